"""Static checks of every committed notebook: one parameters cell papermill can read, no outputs, and
cell ids that are present and unique (the notebooks are the one source of their cells: edited in
JupyterLab and committed cleared, so a diff shows only what changed)."""

import ast
import json
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_parameters_cell_is_readable(path):
    cells = json.loads(path.read_text())["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    names = [t.id for node in ast.parse("".join(tagged[0]["source"])).body if isinstance(node, ast.Assign)
             for t in node.targets]
    assert set(papermill.inspect_notebook(str(path))) == set(names), "papermill cannot parse every parameter line"
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), "outputs are committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_clean_with_cell_ids(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) >= (4, 5), "nbformat 4.5 or later (cell ids)"
    ids = [c.get("id") for c in nb.cells]
    assert all(ids) and len(set(ids)) == len(ids), "every cell has an id, and ids are unique"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is None for c in code), "execution counts are committed (clear outputs)"
