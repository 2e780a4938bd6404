"""What a new-user trial of every sub-command found: each a CLI run asserting the exit code and
the one-line message or the figure."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_cluster_simulate_refuses_a_negative_seed():
    """``cluster simulate --seed -1`` ended in numpy's ``ValueError: expected non-negative integer`` traceback,
    exit 1 (numpy's SeedSequence takes no negative entropy): refused by the option parser, exit 2."""
    argv = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--jobs", "20", "--seed", "-1"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: hnplan cluster simulate: Invalid value for '--seed': Input should be greater than or equal to 0; "
        "got '-1'; see 'hnplan cluster simulate --help'"
    )


def _designs(argv: list[str]) -> list[str]:
    res = runner.invoke(app, [*argv, "--no-trust", "--no-goodput", "--json"])
    assert res.exit_code == 0, res.output
    return [d["system"] for d in json.loads(res.stdout)["designs"]]


def test_compare_takes_systems_repeated_as_comma_separated():
    """``compare --systems gb200-nvl72 --systems hgx-h100-ib-ndr`` compared hgx-h100-ib-ndr alone (a repeated
    plain option keeps its last value), where ``size`` takes ``--system`` repeated: both designs now, as with
    ``--systems gb200-nvl72,hgx-h100-ib-ndr``."""
    base = ["compare", "--model", "llama3.1-8b", "--gpus", "72", "--tokens", "1e9"]
    pair = ["gb200-nvl72", "hgx-h100-ib-ndr"]
    assert _designs([*base, "--systems", pair[0], "--systems", pair[1]]) == pair
    assert _designs([*base, "--systems", ",".join(pair)]) == pair
    res = runner.invoke(app, [*base, "--systems", " , "])  # moved from test_cli_compare: BASE names two designs
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --systems names no system; give ids separated by commas (data/systems)"


def test_compare_seq_len_is_a_count_as_in_train_and_size():
    """``compare --seq-len 8Ki`` was refused (``unable to parse string as an integer``) where ``train`` and
    ``size`` read it as 8,192: the same count parser, so 8Ki plans as 8192 and 1.5 is refused as not whole."""
    base = ["compare", "--model", "llama3.1-8b", "--gpus", "72", "--tokens", "1e9", "--systems", "gb200-nvl72"]
    base += ["--global-batch-tokens", "4Mi", "--no-trust", "--no-goodput", "--json"]
    a = runner.invoke(app, [*base, "--seq-len", "8Ki"])
    b = runner.invoke(app, [*base, "--seq-len", "8192"])
    assert a.exit_code == b.exit_code == 0, a.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    res = runner.invoke(app, [*base[:-1], "--seq-len", "1.5"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: hnplan compare: Invalid value for '--seq-len': count must be whole, got '1.5' = 1.5; "
        "see 'hnplan compare --help'"
    )


def test_size_takes_comma_separated_systems_as_compare_does():
    """``size --system gb200-nvl72,hgx-h100-ib-ndr`` was one unknown id (``unknown system id
    'gb200-nvl72,hgx-h100-ib-ndr'; nearest: hgx-h100-ib-ndr, ...``): split as compare's --systems is."""
    base = ["size", "--model", "llama3.1-8b", "--tokens", "1e9", "--gpus", "72", "--no-goodput", "--json"]
    res = runner.invoke(app, [*base, "--system", "gb200-nvl72, hgx-h100-ib-ndr"])
    assert res.exit_code == 0, res.output
    assert [r["system"] for r in json.loads(res.stdout)["results"]] == ["gb200-nvl72", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*base[:-1], "--system", " , "])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --system names no system; give an id (data/systems) or a YAML path"


def test_train_prints_large_counts_with_thousands_separators():
    """``train`` printed ``searched 12096 candidates, 5952 feasible`` and ``model TFLOP/s per GPU 1294.5`` where
    every other count in the table has separators (``172,087 tokens/s``)."""
    argv = ["train", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--gpus", "64", "--seq-len", "8192"]
    argv += ["--global-batch-tokens", "16Mi"]
    res = runner.invoke(app, argv, terminal_width=200)
    assert res.exit_code == 0, res.output
    d = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    assert d["searched"] > 1000 and d["model_tflops_per_gpu"] > 1000
    assert f"searched {d['searched']:,} candidates, {d['feasible']:,} feasible" in res.stdout
    row = next(line for line in res.stdout.splitlines() if "model TFLOP/s per GPU" in line)
    assert row.split("│")[2].strip() == f"{d['model_tflops_per_gpu']:,.1f}"


def test_report_progress_counts_reports_and_their_time(tmp_path, monkeypatch, capsys):
    """``hnplan report``'s bar ended ``reports ━━━ 100% 0:00:00`` after 16 s of notebooks: rich's default last
    column is the time remaining, which a finished bar prints as zero and reads as the run time. It now says
    how many reports of how many are done and the time since the start (``2/2 0:00:16``)."""
    import re

    from hnplan import reports

    def slow_run(scenario, notebook, *args):
        import time

        time.sleep(1.1)
        return reports.ReportResult(scenario, notebook, "ok", 1.1, None)

    monkeypatch.setattr(reports, "_safe_skip", lambda *args: (None, None))
    monkeypatch.setattr(reports, "_safe_run", slow_run)
    results = reports.run_reports(reports.load_scenarios("default"), tmp_path, jobs=1, progress=True)
    assert [r.status for r in results] == ["ok", "ok"]
    bar = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"reports ━+ 2/2 0:00:0[2-9]", bar), bar


def test_infer_says_when_the_kv_budget_asked_for_is_more_than_the_hbm_holds():
    """``infer --kv-budget-gib 100000`` (a budget in MiB, say, or per node) answered as if it had been read: the
    KV cache silently took what the HBM holds after the weights (117.3 GiB per GB200 GPU at TP 2, bf16 Llama
    3.1 70B: 185.03 GiB visible less about 65.7 GiB of weights and the engine's workspace and overheads). A note says
    so, in the table and in --json (``kv_budget_note``); a budget that fits has none."""
    base = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2000"]
    base += ["--output-tokens", "500", "--tp", "2", "--json"]
    for extra in ([], ["--qps", "10", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]):
        res = runner.invoke(app, [*base, *extra, "--kv-budget-gib", "100000"])
        assert res.exit_code == 0, res.output
        d = json.loads(res.stdout)
        assert d["kv_budget_note"] == (
            "--kv-budget-gib 100,000 is more than the 117.3 GiB per GPU left after weights, workspace and "
            "overheads; the KV cache holds that"
        )
        res = runner.invoke(app, [*base, *extra, "--kv-budget-gib", "100"])
        assert res.exit_code == 0 and "kv_budget_note" not in json.loads(res.stdout)
    res = runner.invoke(app, [*base[:-1], "--kv-budget-gib", "100000"], terminal_width=250)
    assert "│ KV budget note " in res.stdout


def test_size_past_the_fabric_gives_the_days_at_the_largest_count_with_a_plan():
    """``size`` of Llama 3.1 405B, 15T tokens in 5 days on GB200 NVL72 ended ``at 64,800 GPUs: no plan ...
    divides`` (900 racks of 72: the factor 9 a batch of 2,048 never divides), which says nothing of how far
    the deadline is; and on H100 in 0.5 days of 1T tokens ``it takes 1 days`` (1.5 rounded to a whole day).
    Now the days at the fastest count tried (the powers of two below the fabric's limit among them: more GPUs need
    not train faster), to a tenth of a day."""
    base = ["size", "--model", "llama3.1-405b", "--system"]
    res = runner.invoke(app, [*base, "gb200-nvl72", "--tokens", "15T", "--deadline-days", "5"])
    assert res.exit_code == 3, res.output
    assert res.stderr.strip() == (
        "infeasible: gb200-nvl72: no count of gb200-nvl72 up to the most its scale-out fabric joins (65,520 GPUs, "
        "a 3-tier fat-tree of 64-port qm9700 switches) trains llama3.1-405b on 15T tokens within 5 days; the "
        "fastest of the counts tried, 32,768 GPUs, takes 16.6 days"
    )
    res = runner.invoke(app, [*base, "hgx-h100-ib-ndr", "--tokens", "1T", "--deadline-days", "0.5"])
    assert res.exit_code == 3, res.output
    assert res.stderr.strip().endswith("within 0.5 days; the fastest of the counts tried, 65,536 GPUs, takes 1.5 days")


def test_counts_read_thousands_separators_and_a_budget_its_dollar_sign():
    """A count copied from hnplan's own output (``--global-batch-tokens 16,777,216``, ``--seq-len 8,192``) was
    refused (``cannot read count '16,777,216'``), and ``--budget-usd '$1.5M'`` too: both read now, the same
    plan and verdict as ``16Mi`` and ``1.5M``; a comma that is not a thousands separator (``1,5``) is still
    refused, one line, exit 2."""
    base = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--json"]
    a = runner.invoke(app, [*base, "--seq-len", "8,192", "--global-batch-tokens", "1,048,576"])
    b = runner.invoke(app, [*base, "--seq-len", "8192", "--global-batch-tokens", "1Mi"])
    assert a.exit_code == b.exit_code == 0, a.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    res = runner.invoke(app, [*base[:-1], "--seq-len", "8192", "--global-batch-tokens", "1,5"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: hnplan train: Invalid value for '--global-batch-tokens': cannot read count '1,5': expected a number "
        "with an optional k, M, G/B, T or Ki, Mi, Gi, Ti (15T, 15e12, 16Mi); see 'hnplan train --help'"
    )
    size = ["size", "--model", "llama3.1-8b", "--tokens", "1e9", "--system", "hgx-h100-ib-ndr", "--gpus", "8"]
    for budget in ("$1.5M", "1,500,000", "1.5M"):
        res = runner.invoke(app, [*size, "--no-goodput", "--budget-usd", budget, "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["budget_usd"] == 1.5e6


def test_size_table_right_aligns_its_figures():
    """``size`` left-aligned its figures (``│ 8,192  │`` over ``│ 16,384 │``), so magnitudes did not line up as
    they do in ``compare``'s table: every column but the design and the plan is right-aligned."""
    argv = ["size", "--model", "llama3.1-8b", "--tokens", "1e10", "--gpus", "8", "--no-goodput"]
    res = runner.invoke(app, [*argv, "--system", "hgx-h100-ib-ndr", "--system", "gb200-nvl72"], terminal_width=250)
    assert res.exit_code == 0, res.output
    rows = [line.split("│")[1:-1] for line in res.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 2
    for cells in rows:
        assert cells[0].startswith(" ") and not cells[0].startswith("  ")  # the design, left
        assert cells[-1].startswith(" ") and not cells[-1].startswith("  ")  # the plan, left
        for cell in cells[1:-1]:
            assert cell.endswith(" ") and not cell.endswith("  "), cells  # each figure, right
    assert {len(r[1]) for r in rows} == {len(rows[0][1])}


def test_a_number_typed_with_a_unit_is_told_the_unit_is_in_the_option_name():
    """``--kv-budget-gib 80GB``, ``--deadline-days 30d`` or ``--ttft-slo-ms 1s`` said only "Input should be a
    valid number"; the line now says the option's unit is in its name (and what 80 GB is in GiB)."""
    infer = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2000"]
    res = runner.invoke(app, [*infer, "--kv-budget-gib", "80GB"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: hnplan infer: Invalid value for '--kv-budget-gib': Input should be a valid number, unable to parse "
        "string as a number; got '80GB'; --kv-budget-gib is in GiB (2**30 bytes; 80 GB is 74.5 GiB): give the "
        "number alone; see 'hnplan infer --help'"
    )
    size = ["size", "--model", "llama3.1-8b", "--tokens", "1e9", "--system", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*size, "--deadline-days", "30d"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: hnplan size: Invalid value for '--deadline-days': Input should be a valid number, unable to parse "
        "string as a number; got '30d'; --deadline-days is in days: give the number alone; see 'hnplan size --help'"
    )
    # a count option's own message lists its suffixes (1.5B): no hint that would forbid them
    res = runner.invoke(app, [*size, "--deadline-days", "30", "--budget-usd", "1.5Bn"])
    assert res.exit_code == 2 and "give the number alone" not in res.stderr


def test_infer_table_prints_large_whole_numbers_with_separators():
    """``infer --input-tokens 32000`` printed ``input tokens 32000`` where its float rows print ``16,870``: whole
    numbers from 10,000 up take separators too (below, as before: ``output tokens 500``)."""
    argv = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "32000"]
    res = runner.invoke(app, [*argv, "--output-tokens", "500", "--tp", "1"], terminal_width=200)
    assert res.exit_code == 0, res.output
    cells = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in res.stdout.splitlines() if "│" in line}
    assert cells["input tokens"] == "32,000" and cells["output tokens"] == "500"


def test_claims_off_a_terminal_says_when_it_simulates_for_minutes(capsys):
    """``hnplan claims > audit.txt`` ran 23 minutes (its shared-cluster runs uncached, load average 12) with
    nothing on stderr: the bar is drawn on a terminal only. Off one, a line as each batch of runs starts and one
    as it ends."""
    from hnplan.cli.claims_cmd import _run_progress

    with _run_progress() as progress:
        progress(0, 40)
        progress(1, 40)
        progress(40, 40)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "claims: simulating 40 shared-cluster runs no cache holds (minutes the first time after a change of code or "
        "catalog, then cached)"
    )
    assert len(err) == 2 and err[1].startswith("claims: 40 runs simulated in ") and err[1].endswith(" s")


def test_catalog_validate_says_a_file_is_empty_rather_than_of_no_kind(tmp_path):
    """``catalog validate empty.yaml`` said it could not tell which catalog the file belongs to and asked for
    --kind, which changes nothing for an empty file: it says the file is empty (a list, a bare value: what it
    holds), as ``--model empty.yaml`` does; a mapping of no known kind still asks for --kind."""
    empty, listed = tmp_path / "empty.yaml", tmp_path / "list.yaml"
    empty.write_text("")
    listed.write_text("- a\n- b\n")
    for path, what in ((empty, "nothing (the file is empty)"), (listed, "a list of 2 items")):
        res = runner.invoke(app, ["catalog", "validate", str(path)])
        assert res.exit_code == 2
        assert " ".join(res.stderr.split()) == f"invalid: {path}: expected one mapping of an entry's fields, got {what}"
    odd = tmp_path / "odd.yaml"
    odd.write_text("colour: blue\n")
    res = runner.invoke(app, ["catalog", "validate", str(odd)])
    assert res.exit_code == 2 and "cannot tell which catalog this file belongs to" in res.stderr
