"""hnplan report end to end in a temporary folder: good, failing and skipped runs, the index, and
scenario validation before anything runs."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from hnplan import reports
from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.errors import ScenarioError
from hnplan.reports import load_scenarios, run_reports

pytestmark = pytest.mark.notebook
runner = CliRunner()

SMALL = dict(
    model="llama3.1-8b",
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    gpus=144,
    tokens=1.0e11,
    seq_len=4096,
    global_batch_tokens=4096 * 288,
)


def _scenario(tmp_path, sid, **override):
    path = tmp_path / f"{sid}.yaml"
    params = {**SMALL, **override}
    path.write_text(
        yaml.safe_dump({"id": sid, "name": sid, "notebooks": [{"notebook": "design_comparison", "parameters": params}]})
    )
    return str(path)


def test_failure_is_isolated_and_never_clobbers_a_good_report(tmp_path, monkeypatch):
    out = tmp_path / "reports"
    good = _scenario(tmp_path, "small")
    res = runner.invoke(app, ["report", "--scenario", good, "--out", str(out)])
    assert res.exit_code == 0, res.output
    html = out / "small" / "design_comparison.html"
    first = html.read_text()
    assert 'id="key-table"' in first

    # the same scenario, now broken at run time (no design to compare), next to a good one; validation
    # refuses an empty design list before anything runs (exit 2), so it is bypassed here to get a notebook
    # that fails while it runs
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = _scenario(bad_dir, "small", systems=[])
    refused = runner.invoke(app, ["report", "--scenario", bad, "--out", str(out)])
    assert refused.exit_code == 2 and "parameter 'systems': an empty list" in " ".join(refused.stderr.split())
    monkeypatch.setattr(reports, "validate_scenario", lambda *args, **kwargs: None)
    other = _scenario(tmp_path, "other", gpus=72)
    results = run_reports(load_scenarios(bad) + load_scenarios(other), out, jobs=2, progress=False)
    status = {r.scenario: r for r in results}
    assert status["small"].status == "failed" and "InputError: systems is empty" in status["small"].error
    assert status["other"].status == "ok"
    assert html.read_text() == first  # the earlier good report is untouched
    assert (out / "small" / "design_comparison.failed.ipynb").exists()
    index = (out / "index.html").read_text()
    assert "failed" in index and "other/design_comparison.html" in index
    rows = {r["scenario"]: r for r in json.loads((out / "index.json").read_text())}
    assert rows["small"]["html"] == "small/design_comparison.html"  # still links the good report
    assert not list(out.rglob("*.tmp"))  # nothing half-written left behind

    # the CLI exits non-zero when a notebook failed
    res = runner.invoke(app, ["report", "--scenario", bad, "--out", str(out)])
    assert res.exit_code == 1


def test_rerun_skips_unchanged_inputs(tmp_path):
    out = tmp_path / "reports"
    sc = load_scenarios(_scenario(tmp_path, "small"))
    assert [r.status for r in run_reports(sc, out, progress=False)] == ["ok"]
    assert [r.status for r in run_reports(sc, out, progress=False)] == ["skipped"]
    assert [r.status for r in run_reports(sc, out, progress=False, force=True)] == ["ok"]


@pytest.mark.parametrize(
    "notebooks,needle",
    [
        ([{"notebook": "design_comparision", "parameters": {}}], "unknown notebook 'design_comparision'"),
        ([{"notebook": "design_comparison", "parameters": {"gpu": 8}}], "no parameter 'gpu' (did you mean 'gpus'?)"),
        ([{"notebook": "design_comparison", "parameters": {"systems": ["gb200-nvl36"]}}], "nearest: gb200-nvl72"),
        ([{"notebook": "design_comparison", "parameters": {"model": "llama-405b"}}], "parameter 'model'"),
    ],
)
def test_scenario_is_validated_before_running(tmp_path, notebooks, needle):
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"id": "broken", "name": "broken", "notebooks": notebooks}))
    with pytest.raises(ScenarioError) as info:
        load_scenarios(str(path))
    assert needle in str(info.value) and "broken.yaml" in str(info.value)


def test_scenario_schema_errors_name_the_field(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump({"id": "typo", "name": "t", "notebook": []}))
    res = runner.invoke(app, ["report", "--scenario", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    err = " ".join(res.stderr.split())
    assert "typo.yaml" in err and "'notebook'" in err and "'notebooks'" in err


def test_every_shipped_scenario_is_valid():
    cat = load_catalog()
    assert "default" in cat.scenario_ids()
    assert len(load_scenarios("all")) == len(cat.scenario_ids())


def test_params_overrides_are_checked(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("gpu: 1024\n")
    res = runner.invoke(
        app, ["report", "--scenario", _scenario(tmp_path, "small"), "--params", str(bad), "--out", str(tmp_path / "o")]
    )
    assert (
        res.exit_code == 2
        and "no notebook of these scenarios has parameter 'gpu' (did you mean 'gpus'?); they have:" in res.stderr
    )


@pytest.mark.parametrize(
    "override,needle",
    [
        ({"gpus": "lots"}, "parameter 'gpus': expected int like its default 16384, got str 'lots'"),
        ({"systems": "gb200-nvl72"}, "parameter 'systems': expected list"),
    ],
)
def test_scenario_parameter_types_are_checked(tmp_path, override, needle):
    with pytest.raises(ScenarioError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_scenarios(_scenario(tmp_path, "typed", **override))


def test_only_names_the_notebooks_that_run(tmp_path):
    with pytest.raises(ScenarioError, match="these run: design_comparison"):
        run_reports(load_scenarios(_scenario(tmp_path, "small")), tmp_path / "o", only="memroy", progress=False)


def test_claims_audit_system_ids_are_checked(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "id": "claims",
                "name": "c",
                "notebooks": [{"notebook": "claims_audit", "parameters": {"supernode": "gb200-nvl27"}}],
            }
        )
    )
    with pytest.raises(ScenarioError, match="parameter 'supernode'.*nearest: gb200-nvl72"):
        load_scenarios(str(path))


def test_jobs_start_no_more_workers_than_reports(tmp_path, monkeypatch):
    """``--jobs 1000`` for the default scenario's two notebooks: a process pool forks every worker it is
    given at once (Linux's fork start method), so 1,000 processes started for two reports."""
    import concurrent.futures as cf

    sizes = []

    class Recording(cf.ThreadPoolExecutor):  # in-process, so the stand-in run below is seen
        def __init__(self, max_workers):
            sizes.append(max_workers)
            super().__init__(max_workers)

    def run(scenario, notebook, *args):
        return reports.ReportResult(scenario, notebook, "ok", 0.0, None)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Recording)
    monkeypatch.setattr(reports, "_safe_run", run)
    results = reports.run_reports(load_scenarios("default"), tmp_path, jobs=1000, progress=False)
    assert sizes == [2] and [r.notebook for r in results] == ["design_comparison", "training_plan"]


def test_a_users_scenario_with_a_catalog_scenarios_id_is_refused(tmp_path):
    """A copy of data/scenarios/default.yaml that keeps id: default would write its reports into <out>/default/
    over the catalog scenario's pages and index entry: refused in one line naming the file and the field, exit 2;
    the same file with its own id runs, and the catalog's own scenario by id or by its path is not refused."""
    cat = load_catalog()
    mine = tmp_path / "mine.yaml"
    mine.write_text((cat.root / "scenarios" / "default.yaml").read_text())
    res = runner.invoke(app, ["report", "--scenario", str(mine), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and not (tmp_path / "o" / "default").exists()
    err = " ".join(res.stderr.split())
    assert f"{mine}: field 'id': 'default' is the id of the catalog scenario data/scenarios/default.yaml" in err
    assert [s.id for s in load_scenarios("default")] == ["default"]
    assert [s.id for s in load_scenarios(str(cat.root / "scenarios" / "default.yaml"))] == ["default"]
    mine.write_text(mine.read_text().replace("id: default", "id: my-default", 1))
    assert [s.id for s in load_scenarios(str(mine))] == ["my-default"]
