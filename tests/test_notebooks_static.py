"""Static checks of every committed notebook: one parameters cell papermill can read, no outputs."""

import ast
import json
from pathlib import Path

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
