"""Shared plotting helpers: design colours, breakdown bars, offline display.

Every design keeps one colour across all charts (:func:`design_colour`); axis labels carry units
("Name [unit]"). :func:`show` embeds plotly.js once per page so exported reports open offline.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from hnplan.catalog.loader import load_catalog

PALETTE = px.colors.qualitative.Safe + px.colors.qualitative.Vivid
BREAKDOWN_COLOURS = px.colors.qualitative.Pastel


def design_colour(system_id: str) -> str:
    """A stable colour per system id (its position in the sorted systems catalog)."""
    try:
        ids = load_catalog().ids("systems")
        i = ids.index(system_id)
    except ValueError:
        i = sum(map(ord, system_id))
    return PALETTE[i % len(PALETTE)]


def design_colours(ids) -> dict:
    """``{system id: colour}`` for a list of ids."""
    return {s: design_colour(s) for s in ids}


def step_breakdown_bar(df: pd.DataFrame, title: str = "Step-time breakdown") -> go.Figure:
    """Stacked bars of the step-time parts (``t_<part>_s`` columns) per system."""
    parts = [c for c in df.columns if c.startswith("t_") and c.endswith("_s") and df[c].fillna(0).any()]
    fig = go.Figure()
    for i, c in enumerate(parts):
        fig.add_bar(name=c[2:-2].replace("_", " "), x=df["system"], y=df[c],
                    marker_color=BREAKDOWN_COLOURS[i % len(BREAKDOWN_COLOURS)])
    fig.update_layout(barmode="stack", title=title, xaxis_title="design", yaxis_title="time per step [s]",
                      legend_title="part")
    return fig


def design_bars(df: pd.DataFrame, column: str, label: str, title: str | None = None) -> go.Figure:
    """One bar per system for ``column``, coloured by design; ``label`` is the axis title with unit."""
    fig = go.Figure(go.Bar(x=df["system"], y=df[column], marker_color=[design_colour(s) for s in df["system"]],
                           text=[f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in df[column]],
                           textposition="outside"))
    fig.update_layout(title=title or label, xaxis_title="design", yaxis_title=label, showlegend=False)
    return fig


_EMBEDDED = {"done": False}


def show(fig: go.Figure) -> None:
    """Display a figure in a notebook with plotly.js embedded the first time (offline reports)."""
    from IPython.display import HTML, display

    include = not _EMBEDDED["done"]
    _EMBEDDED["done"] = True
    display(HTML(fig.to_html(include_plotlyjs=include, full_html=False)))
