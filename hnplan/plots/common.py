"""Shared plotting helpers: design colours, axis labels from a table's units, breakdown bars,
offline display.

Plots draw the tables planners return and import neither the catalog nor a cost model: a column's
unit is the one its table names in ``df.attrs["units"]`` (:func:`unit_of`, :func:`axis_label`), and
a design's colour depends on its id alone (:func:`design_colour`). Axis labels read "name [unit]".
:func:`show` embeds plotly.js once per page so exported reports open offline.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

PALETTE = px.colors.qualitative.Safe + px.colors.qualitative.Vivid
BREAKDOWN_COLOURS = px.colors.qualitative.Pastel

_COLOUR_OF: dict[str, int] = {}  # design id -> palette index, in the order designs were first drawn


def design_colour(system_id: str) -> str:
    """A stable colour per design id.

    The palette slot is the sum of the id's character codes modulo the palette size, so a design
    keeps its colour from one report to the next; if another design drawn earlier in this process
    holds that slot, the next free slot is taken, so designs on one page never share a colour (up to
    :data:`PALETTE`'s 22 designs).
    """
    if system_id not in _COLOUR_OF:
        n = len(PALETTE)
        taken = set(_COLOUR_OF.values())
        i = sum(map(ord, system_id)) % n
        for step in range(n):
            if (i + step) % n not in taken:
                i = (i + step) % n
                break
        _COLOUR_OF[system_id] = i
    return PALETTE[_COLOUR_OF[system_id]]


def unit_of(df: pd.DataFrame, column: str, default: str | None = None) -> str:
    """The unit of ``column`` as the table names it in ``df.attrs["units"]``, else ``default``.

    Raises
    ------
    KeyError
        If the table names no unit for the column and no default is given.
    """
    unit = df.attrs.get("units", {}).get(column, default)
    if unit is None:
        raise KeyError(f"the table names no unit for column {column!r} (attrs['units'])")
    return unit


def axis_label(df: pd.DataFrame, column: str, name: str, default: str | None = None) -> str:
    """``"name [unit]"`` with the unit of :func:`unit_of`."""
    return f"{name} [{unit_of(df, column, default)}]"


def design_colours(ids) -> dict:
    """``{system id: colour}`` for a list of ids."""
    return {s: design_colour(s) for s in ids}


def step_breakdown_bar(df: pd.DataFrame, title: str = "Step-time breakdown") -> go.Figure:
    """Stacked bars of the step-time parts (``t_<part>_s`` columns) per system."""
    parts = [c for c in df.columns if c.startswith("t_") and c.endswith("_s") and df[c].fillna(0).any()]
    fig = go.Figure()
    for i, c in enumerate(parts):
        fig.add_bar(
            name=c[2:-2].replace("_", " "),
            x=df["system"],
            y=df[c],
            marker_color=BREAKDOWN_COLOURS[i % len(BREAKDOWN_COLOURS)],
        )
    label = axis_label(df, parts[0], "time per step", "s") if parts else "time per step [s]"
    fig.update_layout(barmode="stack", title=title, xaxis_title="design", yaxis_title=label, legend_title="part")
    return fig


def design_bars(df: pd.DataFrame, column: str, label: str, title: str | None = None) -> go.Figure:
    """One bar per system for ``column``, coloured by design; ``label`` is the axis title with unit."""
    fig = go.Figure(
        go.Bar(
            x=df["system"],
            y=df[column],
            marker_color=[design_colour(s) for s in df["system"]],
            text=[f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in df[column]],
            textposition="outside",
        )
    )
    fig.update_layout(title=title or label, xaxis_title="design", yaxis_title=label, showlegend=False)
    return fig


_EMBEDDED = {"done": False}


def show(fig: go.Figure) -> None:
    """Display a figure in a notebook with plotly.js embedded the first time (offline reports)."""
    from IPython.display import HTML, display

    include = not _EMBEDDED["done"]
    _EMBEDDED["done"] = True
    display(HTML(fig.to_html(include_plotlyjs=include, full_html=False)))


def log_ticks(fig: go.Figure, axis: str, values, fmt=None, max_ticks: int = 8) -> go.Figure:
    """A readable log axis: ticks at the values the chart is about (the GPU counts, the request rates)
    when there are at most ``max_ticks`` of them, else at the powers of ten they span, labelled for
    people (16,384; 1.2M; 15T: :func:`hnplan.units.format_count`, or ``fmt``), instead of plotly's
    default "2 3 ... 9 10k" minor labels.

    Parameters
    ----------
    fig : plotly Figure
    axis : "x" or "y"
    values : iterable of float
        The data plotted on that axis (non-positive and non-finite values are ignored).
    fmt : callable, optional
        Tick label of one value.
    """
    import math

    from hnplan.units import format_count

    fmt = fmt or format_count
    vals = sorted({float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0})
    if not vals:
        return fig
    if len(vals) > max_ticks:
        lo, hi = math.floor(math.log10(vals[0])), math.ceil(math.log10(vals[-1]))
        step = max(1, math.ceil((hi - lo + 1) / max_ticks))
        vals = [10.0**k for k in range(lo, hi + 1, step)]
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    update(type="log", tickmode="array", tickvals=vals, ticktext=[fmt(v) for v in vals])
    return fig
