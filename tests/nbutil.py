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


def table_problems(html: str) -> list[str]:
    """What a person should not meet in a report's tables: snake_case headers, numbers with an exponent
    (``2.831e+04``), ``nan`` cells, and Python dicts in the text."""
    import html as _html
    import re

    heads = {_html.unescape(h) for h in re.findall(r'<th[^>]*class="col_heading[^"]*"[^>]*>(.*?)</th>', html)}
    cells = [_html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]
    found = [f"snake_case header {h!r}" for h in sorted(heads) if re.search(r"[a-z]_[a-z]", h)]
    found += [f"exponent in cell {c!r}" for c in cells if re.fullmatch(r"[-+]?[\d.,]+e[-+]\d+", c)]
    found += ["nan cell in a table" for c in cells if c.lower() == "nan"][:1]
    text = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    found += [f"Python dict in text: {m!r}" for m in re.findall(r"\{(?:'|&#x27;)[^}]{0,60}|=\{\}", text)]
    return found
