"""README, "A short tour": the start-up table is one run of benchmarks/bench_startup.py. Every call the bench
times has its row, each row's verdict is its figure against the bench's target, and the run's conditions (date,
load average, yardstick) and the history in docs/performance.md are given beside it."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "| command (the bench's call) | CPU s | target | |"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_startup", ROOT / "benchmarks" / "bench_startup.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADER)
    block = text[start : text.index("\n\n", start)].splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block]


def test_startup_table_has_a_row_per_bench_call_with_its_verdict():
    bench = _bench()
    rows = _rows()
    # the first row is the paired ratio of a fully given train --json to the yardstick
    ratio_row, *calls = rows
    assert ratio_row[0].startswith("`train --json`") and ratio_row[2] == f"{bench.RATIO_TARGET}x"
    ratio = float(re.search(r"\(([\d.]+)x the yardstick\)", ratio_row[1]).group(1))
    assert ratio_row[3] == bench.verdict(ratio, bench.RATIO_TARGET)
    counts: dict[str, int] = {}
    for cell, cpu, target, verdict in calls:
        assert target == f"{bench.COMMAND_TARGET_S} s", cell
        # a range (every --help) is judged by its largest figure
        assert verdict == bench.verdict(float(cpu.split("-")[-1]), bench.COMMAND_TARGET_S), cell
        name = re.match(r"`([a-z]+)", cell)
        if name:
            counts[name.group(1)] = counts.get(name.group(1), 0) + 1
    expected = {name: 1 + len(bench.MORE_CALLS.get(name, [])) for name in bench.TYPICAL}
    assert counts == expected
    assert calls[-1][0] == "every `--help`"


def test_startup_table_states_its_run_and_links_the_history():
    readme = " ".join((ROOT / "README.md").read_text().split())
    intro = readme[: readme.index(" ".join(HEADER.split()))]
    intro = intro[intro.rindex("`benchmarks/bench_startup.py` times whole processes") :]
    # the run's date and time, the machine's load and the yardstick it was judged against
    assert re.search(r"on 20\d\d-\d\d-\d\d at \d\d:\d\d-\d\d:\d\d UTC", intro)
    assert re.search(r"load average [\d.]+-[\d.]+, which inflates every figure", intro)
    assert re.search(r"the yardstick [\d.]+ s of CPU, [\d.]+ s wall", intro)
    assert "[docs/performance.md](docs/performance.md)" in readme
    assert (ROOT / "docs" / "performance.md").exists()
