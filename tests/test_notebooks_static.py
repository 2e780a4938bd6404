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
    names = [
        t.id
        for node in ast.parse("".join(tagged[0]["source"])).body
        if isinstance(node, ast.Assign)
        for t in node.targets
    ]
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


# What a notebook may import from hnplan: planners (and the validation table), plots, units and the
# report runner's provenance footer; never a cost model, the catalog's physics or the CLI.
NOTEBOOK_IMPORTS = (
    "hnplan.planning",
    "hnplan.validation",
    "hnplan.plots",
    "hnplan.units",
    "hnplan.reports",
    "hnplan.cluster",
)  # the cluster simulation orchestrates the planners (issue 14)
NOTEBOOK_EXCEPTIONS: dict[str, set[str]] = {}  # notebook -> modules it may import besides these (none now)


def _hnplan_imports(path) -> set:
    out = set()
    for c in json.loads(path.read_text())["cells"]:
        if c["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(c["source"]))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hnplan":
                out |= {f"hnplan.{a.name}" for a in node.names} if node.module == "hnplan" else {node.module}
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.split(".")[0] == "hnplan"}
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_import_planners_plots_and_units_only(path):
    allowed = NOTEBOOK_EXCEPTIONS.get(path.stem, set())
    bad = {
        m
        for m in _hnplan_imports(path)
        if m not in allowed and not any(m == a or m.startswith(a + ".") for a in NOTEBOOK_IMPORTS)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}: call a planner instead (docs/architecture.md)"
