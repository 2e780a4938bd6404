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
print("papermill" in sys.modules, "nbformat" in sys.modules)
"""


def test_skip_imports_no_notebook_machinery(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "reports")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
