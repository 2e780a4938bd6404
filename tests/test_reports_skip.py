"""Report re-runs with nothing to redo stay fast (issue 16): the parameters are read without papermill,
and a skipped report imports neither papermill nor nbformat."""

import subprocess
import sys

import papermill
import pytest

from hnplan.reports import notebook_parameters

from nbparams import NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_match_papermill(name):
    from hnplan.reports import notebook_path

    theirs = papermill.inspect_notebook(str(notebook_path(name)))
    ours = notebook_parameters(name)
    assert list(ours) == list(theirs)
    assert {k: v["default"] for k, v in ours.items()} == {k: v["default"] for k, v in theirs.items()}


PROBE = """
import sys
from pathlib import Path
from hnplan.reports import _inputs_digest, load_scenarios, notebook_path, run_reports
out = Path(sys.argv[1])
sc = load_scenarios("default")
item = sc[0].notebooks[0]
# a report whose inputs have not changed: its HTML and its stamp exist
from hnplan.catalog import load_catalog
target = out / sc[0].id
target.mkdir(parents=True)
(target / f"{item.notebook}.html").write_text("<html></html>")
(target / f".{item.notebook}.inputs").write_text(
    _inputs_digest(notebook_path(item.notebook), item.parameters, load_catalog().content_hash()))
res = run_reports(sc, out, only=item.notebook, progress=False)
assert [r.status for r in res] == ["skipped"], res
print("papermill" in sys.modules, "nbformat" in sys.modules, "hnplan.planning.training" in sys.modules)
"""


def test_skip_imports_no_notebook_machinery(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "reports")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # nor the training planner: the default scenario's dtype is checked against the catalog's copy of its dtypes
    assert out.stdout.split() == ["False", "False", "False"]


def _stamp(out, scenario, item):
    """A report of ``item`` whose inputs have not changed: its page and the stamp of its inputs' digest."""
    from hnplan.catalog import load_catalog
    from hnplan.reports import _inputs_digest, notebook_path

    target = out / scenario.id
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{item.notebook}.html").write_text("<html></html>")
    digest = _inputs_digest(notebook_path(item.notebook), item.parameters, load_catalog().content_hash())
    (target / f".{item.notebook}.inputs").write_text(digest)


def test_skips_are_decided_before_any_worker_starts(tmp_path, monkeypatch):
    """``--jobs 2`` with nothing to redo starts no worker process (a pool forks its workers at once, each of
    which then hashed the code again only to skip); with one report to redo, one worker runs that one alone."""
    import concurrent.futures as cf

    from hnplan import reports
    from hnplan.reports import load_scenarios

    sizes, ran = [], []

    class Recording(cf.ThreadPoolExecutor):  # in-process, so the stand-in run below is seen
        def __init__(self, max_workers):
            sizes.append(max_workers)
            super().__init__(max_workers)

    def run(scenario, notebook, *args):
        ran.append(notebook)
        return reports.ReportResult(scenario, notebook, "ok", 0.0, None)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Recording)
    monkeypatch.setattr(reports, "_safe_run", run)
    (sc,) = load_scenarios("default")
    first, second = sc.notebooks
    _stamp(tmp_path, sc, first)
    _stamp(tmp_path, sc, second)
    results = reports.run_reports([sc], tmp_path, jobs=2, progress=False)
    assert [r.status for r in results] == ["skipped", "skipped"] and sizes == [] and ran == []

    (tmp_path / sc.id / f".{second.notebook}.inputs").write_text("another digest")  # its inputs changed
    results = reports.run_reports([sc], tmp_path, jobs=2, progress=False)
    assert [(r.notebook, r.status) for r in results] == [(first.notebook, "skipped"), (second.notebook, "ok")]
    assert sizes == [1] and ran == [second.notebook]


def test_inputs_digest_follows_the_code(monkeypatch):
    """The digest holds the code's (every Python file of the package, hashed once per process): other code,
    another digest."""
    from hnplan import report_inputs, reports

    path = reports.notebook_path("design_comparison")
    before = reports._inputs_digest(path, {"gpus": 8}, "abc")
    assert reports._inputs_digest(path, {"gpus": 8}, "abc") == before
    assert reports._inputs_digest(path, {"gpus": 16}, "abc") != before
    assert reports._code_digest.cache_info().hits > 0  # hashed once, not per report
    monkeypatch.setattr(report_inputs, "_code_digest", lambda: "other code")
    assert reports._inputs_digest(path, {"gpus": 8}, "abc") != before


def test_a_report_hashes_its_inputs_once(tmp_path, monkeypatch):
    """A report whose stamp no longer matches hashed its inputs (notebook, parameters, catalog, the package's
    code) twice: once to decide it was not up to date, again for the new stamp. Once now, skipped or run."""
    import papermill

    from hnplan import reports

    calls = []
    digest = reports._inputs_digest

    def counted(*args):
        calls.append(args)
        return digest(*args)

    def fails(*args, **kwargs):  # the run itself is not under test: it fails at once and is recorded
        raise RuntimeError("not run")

    monkeypatch.setattr(reports, "_inputs_digest", counted)
    monkeypatch.setattr(papermill, "execute_notebook", fails)
    target = tmp_path / "s"
    target.mkdir()
    (target / "design_comparison.html").write_text("<html></html>")
    (target / ".design_comparison.inputs").write_text("another digest")  # its inputs changed
    args = ("s", "design_comparison", {"gpus": 8}, str(tmp_path), "abc", False)
    assert reports._run_one(*args).status == "failed" and len(calls) == 1
    (target / ".design_comparison.inputs").write_text(digest(*calls[0]))  # up to date: skipped
    calls.clear()
    assert reports._run_one(*args).status == "skipped" and len(calls) == 1


def test_run_reports_hashes_each_report_once(tmp_path, monkeypatch):
    """``hnplan report`` hashed a report whose stamp no longer matched twice: in the skip test before the pool,
    and again in the run. The digest of the skip test now goes with the report to its run."""
    import papermill

    from hnplan import reports

    calls = []
    digest = reports._inputs_digest

    def counted(*args):
        calls.append(args)
        return digest(*args)

    def fails(*args, **kwargs):  # the run itself is not under test: it fails at once and is recorded
        raise RuntimeError("not run")

    monkeypatch.setattr(reports, "_inputs_digest", counted)
    monkeypatch.setattr(papermill, "execute_notebook", fails)
    sc = reports.load_scenarios("default")
    item = sc[0].notebooks[0]
    target = tmp_path / sc[0].id
    target.mkdir()
    (target / f"{item.notebook}.html").write_text("<html></html>")
    (target / f".{item.notebook}.inputs").write_text("another digest")  # its inputs changed
    res = reports.run_reports(sc, tmp_path, only=item.notebook, progress=False)
    assert [r.status for r in res] == ["failed"] and len(calls) == 1


def test_inputs_digest_follows_every_input(tmp_path):
    """A report re-runs when any of its inputs changes: the notebook's bytes, a parameter, the catalog's YAML
    (its content hash), the catalog folder's other files (the published measurements' CSV), a file a parameter
    names by path, and the package's files beyond its Python (the page's template)."""
    import shutil

    from hnplan import reports

    nb = tmp_path / "design_comparison.ipynb"
    shutil.copy(reports.notebook_path("design_comparison"), nb)
    data = tmp_path / "data"
    (data / "reference").mkdir(parents=True)
    (data / "reference" / "runs.csv").write_text("run,step_s\na,1.0\n")
    (data / "models").mkdir()
    (data / "models" / "m.yaml").write_text("id: m\n")
    model = tmp_path / "dense1t.yaml"
    model.write_text("id: dense1t\nlayers: 100\n")
    params = {"model": str(model), "gpus": 8}

    def digest():
        reports._data_files_digest.cache_clear()  # once per process in a run; here the files change between calls
        return reports._inputs_digest(nb, params, "abc", str(data))

    seen = {digest()}
    assert digest() in seen  # nothing changed: the same digest, the report is skipped
    changes = [
        lambda: nb.write_bytes(nb.read_bytes().replace(b"Markdown", b"Markdown ", 1)),  # the notebook
        lambda: params.update(gpus=16),  # a parameter
        lambda: (data / "reference" / "runs.csv").write_text("run,step_s\na,1.1\n"),  # a published measurement
        lambda: (data / "reference" / "more.csv").write_text("run,step_s\n"),  # a new file in the catalog folder
        lambda: model.write_text("id: dense1t\nlayers: 120\n"),  # the model file the parameter names, same name
    ]
    for change in changes:
        change()
        now = digest()
        assert now not in seen
        seen.add(now)
    # the catalog's YAML is its content hash's (read once for the index too), not hashed a second time here
    (data / "models" / "m.yaml").write_text("id: m\nlayers: 2\n")
    assert digest() in seen
    assert reports._inputs_digest(nb, params, "abd", str(data)) not in seen  # another content hash


def test_code_digest_covers_the_template(tmp_path):
    """The package's digest holds every file of it (path and bytes), the report page's Jinja template as much as
    the Python; compiled bytecode is left out."""
    from hnplan import report_inputs

    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "report.html.j2").write_text("<html>{{ body }}</html>")
    (tmp_path / "a.py").write_text("x = 1\n")
    before = report_inputs._tree_digest(tmp_path, (".pyc",))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-312.pyc").write_bytes(b"\0")
    (tmp_path / "b.pyc").write_bytes(b"\0")
    assert report_inputs._tree_digest(tmp_path, (".pyc",)) == before
    (tmp_path / "templates" / "report.html.j2").write_text("<html><main>{{ body }}</main></html>")
    assert report_inputs._tree_digest(tmp_path, (".pyc",)) != before
    (tmp_path / "a.py").rename(tmp_path / "c.py")  # the same bytes under another name
    assert report_inputs._tree_digest(tmp_path, (".pyc",)) != before
    assert any(p.suffix == ".j2" for p in (report_inputs.Path(report_inputs.__file__).parent / "templates").iterdir())


def test_a_changed_measurement_re_runs_its_report(tmp_path, monkeypatch):
    """End to end: with the default scenario's reports up to date, a changed CSV in the catalog folder (which the
    catalog's content hash leaves out) re-runs both of them; nothing else changed, neither."""
    import shutil

    from hnplan import reports
    from hnplan.catalog.loader import Catalog, data_dir

    data = tmp_path / "data"
    shutil.copytree(data_dir(), data)
    cat = Catalog(data)
    ran = []

    def run(scenario, notebook, *args):
        ran.append(notebook)
        return reports.ReportResult(scenario, notebook, "ok", 0.0, None)

    monkeypatch.setattr(reports, "_safe_run", run)
    (sc,) = reports.load_scenarios("default", catalog=cat)
    out = tmp_path / "reports"
    (out / sc.id).mkdir(parents=True)
    for item in sc.notebooks:
        (out / sc.id / f"{item.notebook}.html").write_text("<html></html>")
        digest = reports._inputs_digest(
            reports.notebook_path(item.notebook), item.parameters, cat.content_hash(), str(data)
        )
        (out / sc.id / f".{item.notebook}.inputs").write_text(digest)
    assert [r.status for r in reports.run_reports([sc], out, progress=False, catalog=cat)] == ["skipped"] * 2
    csv = data / "reference" / "training_measurements.csv"
    csv.write_text(csv.read_text() + "\n")
    reports._data_files_digest.cache_clear()  # a new process: the file changed since the last run
    assert [r.status for r in reports.run_reports([sc], out, progress=False, catalog=cat)] == ["ok"] * 2
    assert ran == [i.notebook for i in sc.notebooks]


@pytest.mark.parametrize(
    ("errors", "status", "calls"),
    [
        (["Kernel died before replying to kernel_info"], "ok", 2),  # one kernel died starting: the next ran it
        (["Kernel died before replying to kernel_info"] * 2, "failed", 2),  # twice: recorded, no third kernel
        (["a cell's own error"], "failed", 1),  # a run that started is never repeated
    ],
)
def test_a_kernel_that_dies_starting_is_started_once_more(tmp_path, monkeypatch, errors, status, calls):
    """jupyter_client raises ``RuntimeError: Kernel died before replying to kernel_info`` for a kernel process
    that exits before its first reply (jupyter/jupyter_client issue 154; seen with two reports starting kernels at
    once on a loaded machine): no cell ran, so the notebook is run once more on a fresh kernel
    (``reports.KERNEL_START_TRIES`` = 2) before its failure is recorded; any other error is recorded at once."""
    import nbformat
    import papermill

    from hnplan import reports

    made = []

    def execute(src, out, **kwargs):
        made.append(out)
        if len(made) <= len(errors):
            raise RuntimeError(errors[len(made) - 1])
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("ran")]), out)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    res = reports._run_one("s", "design_comparison", {"gpus": 8}, str(tmp_path), "abc", False)
    assert (res.status, len(made)) == (status, calls)
    if status == "failed":
        assert res.error == f"RuntimeError: {errors[-1]}"
    else:
        assert (tmp_path / "s" / "design_comparison.html").exists()
