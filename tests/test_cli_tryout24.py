"""What a trial of hnplan by an infrastructure architect (GB200 NVL72 against 8-GPU H100/B200 servers) found:
ids typed in another case, the option named as typed, the cluster table's brackets."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import Catalog
from hnplan.cli import app
from hnplan.errors import CatalogError

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- ids that differ from a catalog id only in case ------------------------------------------------------------


def test_an_id_in_another_case_resolves_to_the_lower_kebab_case_id():
    """Catalog ids are lower-kebab-case file names; an id typed as a datasheet spells it names the same entry
    and the same design object, while an id that is not one in any case is still refused with the nearest."""
    cat = Catalog()
    assert cat.resolve_id("systems", "HGX-H100-IB-NDR") == "hgx-h100-ib-ndr"
    assert cat.resolve_id("models", "Llama3.1-405B") == "llama3.1-405b"
    assert cat.resolve_id("accelerators", "H100-SXM") == "h100-sxm"
    assert cat.resolve_id("systems", "gb200-nvl27") is None
    assert cat.model("Llama3.1-405B").id == "llama3.1-405b"
    assert cat.model("Llama3.1-405B").layers == 126  # Llama 3 paper, Table 3
    assert cat.design("GB200-NVL72") is cat.design("gb200-nvl72")
    with pytest.raises(CatalogError, match=r"unknown system id 'GB200-NVL27'; nearest: gb200-nvl72"):
        cat.system("GB200-NVL27")


def test_train_with_mixed_case_ids_is_the_plan_of_the_lower_case_ids():
    """``--model Llama3.1-8B --system HGX-H100-IB-NDR`` was refused (``unknown model id 'Llama3.1-8B'; nearest:
    llama3.1-8b``); it is now the same answer as the catalog's ids, to the last digit, named by the catalog id."""
    plan = ["--gpus", "64", "--tp", "1", "--pp", "1", "--dp", "64", "--seq-len", "8192", "--json"]
    plan += ["--global-batch-tokens", "4Mi"]  # 512 sequences of 8,192 tokens, 8 per DP rank
    lower = runner.invoke(app, ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", *plan])
    mixed = runner.invoke(app, ["train", "--model", "Llama3.1-8B", "--system", "HGX-H100-IB-NDR", *plan])
    assert lower.exit_code == mixed.exit_code == 0, mixed.stderr
    a, b = json.loads(lower.stdout), json.loads(mixed.stdout)
    assert a["step_time_s"] == b["step_time_s"] > 0
    assert (b["model"], b["system"]) == ("llama3.1-8b", "hgx-h100-ib-ndr")


def test_an_unknown_id_is_still_refused_with_the_nearest_ids():
    r = runner.invoke(app, ["train", "--model", "Llama3.1-406B", "--system", "hgx-h100-ib-ndr", "--gpus", "8"])
    assert r.exit_code == 2
    assert one_line(r.stderr) == (
        "error: --model: unknown model id 'Llama3.1-406B'; nearest: llama3.1-405b, llama3.1-70b, llama3.1-8b"
    )


def test_cluster_reference_design_speed_in_another_case(cat):
    """``cluster simulate --system GB200-NVL72 --reference-system hgx-h100-ib-ndr`` took the upper-case id for a
    file path, found no plan for it and kept every traced duration (1.00x); the ratio is that of the ids,
    2.109x on 72 GPUs (192,014 / 91,025 tokens/s, tests/test_cluster_design_speed.py)."""
    from hnplan.cluster import runtime

    ratio = runtime.design_speed_ratio("GB200-NVL72", "HGX-H100-IB-NDR", 72, catalog=cat)
    assert ratio == pytest.approx(192_013.71 / 91_025.30, rel=1e-3)


def test_a_cluster_mix_id_in_another_case_is_the_mix():
    """``cluster simulate --mix Default`` was refused (``unknown cluster mix id 'Default'; nearest: default``): the
    same case rule as every catalog id. Its classes are the default mix's four (inference, training, fine-tuning,
    development) with shares summing to 1; a mistyped id is still refused."""
    from hnplan.catalog.mixes import cluster_mix

    mix = cluster_mix("Default")
    assert mix.id == "default" and mix == cluster_mix("default")
    assert [c.cls for c in mix.classes] == ["inference", "training", "fine-tuning", "development"]
    assert sum(c.share.value for c in mix.classes) == pytest.approx(1.0)
    r = runner.invoke(app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--mix", "Defaul"])
    assert (r.exit_code, one_line(r.stderr)) == (2, "error: --mix: unknown cluster mix id 'Defaul'; nearest: default")


# -- the option named as typed ---------------------------------------------------------------------------------

COMPARE = ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12"]
SIZE = ["size", "--model", "llama3.1-8b", "--tokens", "1T", "--gpus", "64"]


@pytest.mark.parametrize("command", [COMPARE, SIZE])
@pytest.mark.parametrize("typed", ["--system", "--systems"])
def test_an_unknown_system_names_the_option_as_typed(command, typed):
    """``compare --system nosuch`` said ``--systems nosuch: ...`` (and ``size --systems nosuch`` said
    ``--system``): the option is named as the user spelled it, in the text and the JSON error alike."""
    r = runner.invoke(app, [*command, typed, "nosuch", "--json"])
    assert r.exit_code == 2
    line = one_line(r.stderr)
    assert line.startswith(f"error: {typed} nosuch: unknown system id 'nosuch'; valid ids: cloudmatrix-384, ")
    assert json.loads(r.stdout)["error"]["message"].startswith(f"{typed} nosuch: unknown system id 'nosuch'")
    r = runner.invoke(app, [*command, f"{typed}=,"])
    assert (r.exit_code, one_line(r.stderr).split(";")[0]) == (2, f"error: {typed} names no system")


def test_one_system_typed_in_two_cases_is_one_design():
    """``size --system hgx-h100-ib-ndr,HGX-H100-IB-NDR`` was refused as two files of one id; it is one id, sized
    once: Llama 3.1 8B on 64 H100s for 1T tokens, as ``--system hgx-h100-ib-ndr`` alone."""
    both = runner.invoke(app, [*SIZE, "--system", "hgx-h100-ib-ndr,HGX-H100-IB-NDR", "--no-goodput", "--json"])
    one = runner.invoke(app, [*SIZE, "--system", "hgx-h100-ib-ndr", "--no-goodput", "--json"])
    assert both.exit_code == one.exit_code == 0, both.stderr
    rows, alone = json.loads(both.stdout)["results"], json.loads(one.stdout)["results"]
    assert [r["system"] for r in rows] == ["hgx-h100-ib-ndr"]
    assert rows[0]["days"] == alone[0]["days"] > 0


# -- cluster simulate's table: one pair of parentheses a figure ------------------------------------------------


def test_replications_table_puts_interval_and_notes_in_one_pair_of_parentheses():
    """``cluster simulate ... --replications 3`` printed ``154.9% (95 % CI 139.6% to 170.2%) (over a 5.58 h
    arrival window, too short to reach steady state (the jobs run 64.7 h, GPU-time-weighted mean))``: a
    second pair after the first and one nested in it, closing ``))``. The interval and the notes now share one
    pair, the notes none of their own. The figures are the JSON's: each the mean of the three runs, its interval
    ``mean -+ t(2, 0.975) s / sqrt(3)``, t = 4.303 (checked on the utilisation, whose runs the JSON lists)."""
    import math

    import numpy as np

    argv = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--jobs", "300", "--load", "1.5"]
    argv += ["--replications", "3"]
    text = runner.invoke(app, [*argv, "--json"])
    assert text.exit_code == 0, text.stderr
    s = json.loads(text.stdout)
    runs = [run["utilisation"] for run in s["runs"]]
    assert s["utilisation"] == pytest.approx(float(np.mean(runs)), rel=1e-12)
    half = 4.302652729911275 * float(np.std(runs, ddof=1)) / math.sqrt(3)
    assert s["ci95"]["utilisation"]["half_width"] == pytest.approx(half, rel=1e-9)
    ci = s["ci95"]["offered_load"]
    assert (ci["low"], ci["high"]) == pytest.approx(
        (s["offered_load"] - ci["half_width"], s["offered_load"] + ci["half_width"])
    )
    assert ci["low"] > 1.0  # --load 1.5: every run oversubscribes, so the plain interval stays inside [0, inf)
    window_h, run_h = s["window_s"] / 3600, s["run_time_weighted_s"] / 3600
    assert window_h < 5 * run_h  # the arrival window is too short for steady state
    r = runner.invoke(app, argv, env={"COLUMNS": "1000"})
    assert r.exit_code == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "offered load" in line)
    figure = row.split("│")[2].strip()
    assert figure == (
        f"{s['offered_load']:.1%} (95 % CI {ci['low']:.1%} to {ci['high']:.1%}; over a {window_h:.3g} h arrival "
        f"window, too short to reach steady state: the jobs run {run_h:.3g} h, GPU-time-weighted mean)"
    )
    demand = next(line for line in r.stdout.splitlines() if "demand in the window" in line).split("│")[2].strip()
    assert demand.startswith(f"{s['offered_load_window']:.1%} (95 % CI ") and demand.count("(") == 1
    assert "))" not in r.stdout and ") (" not in r.stdout
    rows: dict[str, str] = {}  # the summary's rows, a cell folded over several lines joined again
    label = ""
    for line in r.stdout.splitlines():
        cells = line.split("│")
        if len(cells) == 4:
            label = cells[1].strip() or label
            rows[label] = f"{rows.get(label, '')} {cells[2].strip()}".strip()
    assert rows["JCT bounded slowdown"].endswith(
        "(completion over max(run, 10 s), at least 1: Feitelson et al. 1997, the figure to compare by)"
    )
