"""Execute a notebook with papermill on small parameters and return its HTML (for notebook tests)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill

from hnplan.reports import export_html

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(name: str, parameters: dict, tmp_path: Path) -> tuple[nbformat.NotebookNode, str]:
    """Run ``notebooks/<name>.ipynb`` with ``parameters``; return the executed notebook and its HTML.

    Raises papermill's PapermillExecutionError if any cell fails.
    """
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(out),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    nb = nbformat.read(out, as_version=4)
    html = export_html(nb, name)
    return nb, html


def plotly_divs(html: str) -> int:
    """Number of plotly chart containers in a report."""
    return html.count('class="plotly-graph-div"')
