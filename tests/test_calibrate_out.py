"""Where ``hnplan calibrate`` writes: without ``--out`` every file of a run under ``./calibration/`` (not four
files in the current folder), an earlier run's files replaced and said so, a file it did not write never
replaced."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
# the README's example: Meta's two Llama 3 405B runs on H100 and the nccl-tests sweep of an 8 x H100 node
ARGV = ["calibrate", "--runs", str(EXAMPLES / "calibration_runs.yaml"), "--stack", "megatron-core"]
SWEEP = ["--collectives", str(EXAMPLES / "nccl_tests.csv")]


def test_default_out_is_one_folder_and_a_second_run_says_what_it_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*ARGV, *SWEEP, "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    written = json.loads(res.stdout)["written"]
    folder = tmp_path / "calibration"
    # the stack file and, the sweep having fitted both fabrics of hgx-h100-ib-ndr, its system and two fabrics
    names = [
        "megatron-core-calibrated.yaml",
        "hgx-h100-ib-ndr-for-megatron-core-calibrated.yaml",
        "nvlink4-hgx-h100-ib-ndr-for-megatron-core-calibrated.yaml",
        "ib-ndr-400-hgx-h100-ib-ndr-for-megatron-core-calibrated.yaml",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["calibration"]  # nothing else in the current folder
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert written["stack"] == str(folder / names[0]) and written["replaced"] == []
    again = runner.invoke(app, [*ARGV, *SWEEP])
    assert again.exit_code == 0, again.stdout + again.stderr
    out = " ".join(again.stdout.split())
    assert f"wrote calibration/{names[0]}, calibration/{names[1]}" in out
    assert f"replaced the files an earlier calibration wrote for the same stack file: calibration/{names[0]}" in out
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)  # the same four, no temporary file left


def test_a_file_calibrate_did_not_write_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "my-stack.yaml"
    mine.write_text("id: my-own-stack\n")
    res = runner.invoke(app, [*ARGV, "--out", "my-stack.yaml"])
    assert res.exit_code == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == [
        f"error: --out: {mine}: a file not written by hnplan calibrate for this path is there; not overwriting it "
        "(give --out another file, or remove it)"
    ]
    assert mine.read_text() == "id: my-own-stack\n" and [p.name for p in tmp_path.iterdir()] == ["my-stack.yaml"]
    # the default path too: a hand-made calibration/megatron-core-calibrated.yaml is left as it was
    hand = tmp_path / "calibration" / "megatron-core-calibrated.yaml"
    hand.parent.mkdir()
    hand.write_text("# mine\n")
    res = runner.invoke(app, ARGV)
    assert res.exit_code == 2 and f"{hand}: a file not written by hnplan calibrate" in res.stderr
    assert hand.read_text() == "# mine\n"


def test_help_says_where_the_files_go():
    res = runner.invoke(app, ["calibrate", "--help"], env={"COLUMNS": "250"})
    text = " ".join(res.stdout.split())
    assert "default calibration/<stack>-calibrated.yaml" in text and "is never replaced" in text


def _worse(cal):
    """The calibration with its runs' errors set as a fit that made them worse: +15 % and -15 % before (RMS 15 %),
    +20 % and -20 % after (RMS 20 %)."""
    from dataclasses import replace

    rows = [
        {**cal.run_rows[0], "error_before_pct": 15.0, "error_after_pct": 20.0},
        {**cal.run_rows[0], "id": "copy", "error_before_pct": -15.0, "error_after_pct": -20.0},
    ]
    return replace(cal, run_rows=rows)


def test_a_fit_worse_than_its_start_is_warned(tmp_path, monkeypatch):
    """RMS 15 % before and 20 % after: a warning line on stderr and ``worse_than_start`` / ``warning`` in --json;
    the README example (7.8 % -> 0.3 %) carries none."""
    import hnplan.planning.calibrate as calibrate_mod

    monkeypatch.chdir(tmp_path)
    real = calibrate_mod.calibrate(EXAMPLES / "calibration_runs.yaml", "megatron-core")
    assert real.fit_warning is None and real.to_dict()["worse_than_start"] is False
    bad = _worse(real)
    assert bad.rms_pct("error_before_pct") == 15.0 and bad.rms_pct("error_after_pct") == 20.0
    assert bad.fit_warning == (
        "the fitted stack megatron-core-calibrated predicts these runs worse than megatron-core did: RMS error 20.0% "
        "after the fit against 15.0% before; keep --stack megatron-core, or check the runs (plan, metric, published "
        "value) and the sweep before using it"
    )
    monkeypatch.setattr(calibrate_mod, "calibrate", lambda *a, **k: bad)
    res = runner.invoke(app, ARGV)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "warning: the fitted stack megatron-core-calibrated predicts these runs worse" in " ".join(
        res.stderr.split()
    )
    answer = json.loads(runner.invoke(app, [*ARGV, "--json"]).stdout)
    assert answer["worse_than_start"] is True and answer["warning"] == bad.fit_warning


def test_a_new_out_name_without_a_suffix_is_a_folder(tmp_path, monkeypatch):
    """`--out cal` names a folder to create, as --out of sweep and report do (before: a stack file named
    `cal`, with the system and fabric files beside it in the current folder)."""
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*ARGV, "--out", "cal", "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["written"]["stack"] == str(tmp_path / "cal" / "megatron-core-calibrated.yaml")
    assert [p.name for p in (tmp_path / "cal").iterdir()] == ["megatron-core-calibrated.yaml"]


def test_the_stack_file_says_how_to_use_it_and_what_it_was_fitted_with(tmp_path, monkeypatch):
    """The first line of the stack file gives the train call that reads the whole fit (the system file the fitted
    fabrics went into, not the stack alone, which keeps the catalog's fabrics), hnplan's version and the catalog's
    content hash; the runs file is named by its absolute path; a calibrated stack fitted again keeps one suffix."""
    import hnplan
    from hnplan.catalog import load_catalog

    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, [*ARGV, *SWEEP]).exit_code == 0
    stack = tmp_path / "calibration" / "megatron-core-calibrated.yaml"
    system = tmp_path / "calibration" / "hgx-h100-ib-ndr-for-megatron-core-calibrated.yaml"
    first = stack.read_text().splitlines()[0]
    assert f"use: hnplan train --stack {stack} --system {system};" in first
    assert f"hnplan {hnplan.__version__}, catalog {load_catalog().content_hash()[:12]}" in first
    assert str(EXAMPLES / "calibration_runs.yaml") in stack.read_text()
    again = runner.invoke(app, ["calibrate", "--runs", str(EXAMPLES / "calibration_runs.yaml"), "--stack", str(stack)]
                          + ["--out", str(tmp_path / "again.yaml")])  # fmt: skip
    assert again.exit_code == 0, again.output
    refit = (tmp_path / "again.yaml").read_text()
    assert "\nid: megatron-core-calibrated\n" in refit and refit.count("calibrated to calibration_runs.yaml") == 1
