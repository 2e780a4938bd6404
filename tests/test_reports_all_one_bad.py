"""``hnplan report --scenario all`` with one broken scenario among good ones: the good ones still run, the broken
one is named in one line on stderr and the exit code is 2 (bad input)."""

import yaml
from typer.testing import CliRunner

import hnplan.cli.report_cmd as report_cmd
from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.reports import ReportResult

runner = CliRunner()

BAD = {
    "id": "mine",
    "name": "a user's scenario with a mistyped system",
    "description": "network of one design, its id misspelt",
    "notebooks": [{"notebook": "network", "parameters": {"systems": ["gb200-nvl27"]}}],
}


def _with_scenarios(monkeypatch, tmp_path, ids):
    monkeypatch.setattr(type(load_catalog()), "scenario_ids", lambda self: ids)
    ran = []

    def fake_run(scenarios, out, **kw):  # the notebooks themselves are covered by test_reports
        ran.extend(s.id for s in scenarios)
        return [
            ReportResult(s.id, i.notebook, "ok", 0.1, f"{s.id}/{i.notebook}.html")
            for s in scenarios
            for i in s.notebooks
        ]

    monkeypatch.setattr(report_cmd, "run_reports", fake_run)
    return ran


def test_the_good_scenarios_run_and_the_bad_one_is_one_line_exit_2(tmp_path, monkeypatch):
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump(BAD))
    ran = _with_scenarios(monkeypatch, tmp_path, ["default", str(bad), "serving-llama3.1-70b"])
    res = runner.invoke(app, ["report", "--scenario", "all", "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert ran == ["default", "serving-llama3.1-70b"]  # the broken file stopped every report before
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: notebook 'network', parameter "), lines
    assert "unknown system id 'gb200-nvl27'" in lines[0]
    assert "ok       default/design_comparison" in res.stdout


def test_all_broken_is_the_one_line_of_the_first(tmp_path, monkeypatch):
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump(BAD))
    ran = _with_scenarios(monkeypatch, tmp_path, [str(bad)])
    res = runner.invoke(app, ["report", "--scenario", "all", "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and ran == [] and len(res.stderr.strip().splitlines()) == 1, res.output


def test_a_named_broken_scenario_still_stops_before_anything_runs(tmp_path, monkeypatch):
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump(BAD))
    ran = _with_scenarios(monkeypatch, tmp_path, ["default"])
    res = runner.invoke(app, ["report", "--scenario", str(bad), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and ran == [], res.output
