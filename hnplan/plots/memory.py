"""Memory figures: stacked per-GPU breakdowns against each accelerator's HBM, and fit maps.

Plotting only: the tables come from :func:`hnplan.planning.memory.breakdown_table` and
:func:`hnplan.planning.memory.fit_grid`, which name their parts, statuses and units in ``attrs``.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.plots.common import BREAKDOWN_COLOURS, axis_label, design_colour, unit_of

STATUS_COLOURS = {"fits": "#2ca02c", "spills": "#ff7f0e", "does-not-fit": "#d62728"}


def memory_breakdown_bars(df: pd.DataFrame, title: str = "Memory per GPU") -> go.Figure:
    """Stacked bars of the ``<part>_gib`` columns per ``system``, with each system's ``hbm_gib`` as a
    line across its bar in the design's colour; parts in the order of ``df.attrs["parts"]``."""
    fig = go.Figure()
    parts = [p for p in df.attrs["parts"] if f"{p}_gib" in df and df[f"{p}_gib"].fillna(0).any()]
    for i, p in enumerate(parts):
        fig.add_bar(
            name=p.replace("_", " "),
            x=df["system"],
            y=df[f"{p}_gib"],
            marker_color=BREAKDOWN_COLOURS[i % len(BREAKDOWN_COLOURS)],
        )
    for s, hbm in zip(df["system"], df["hbm_gib"]):
        fig.add_scatter(
            x=[s],
            y=[hbm],
            mode="markers",
            name=f"HBM {s}",
            marker=dict(symbol="line-ew-open", size=60, line=dict(width=4, color=design_colour(s))),
            hovertemplate=f"{s}: HBM %{{y:.1f}} {unit_of(df, 'hbm_gib')}<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        title=title,
        xaxis_title="design",
        yaxis_title=axis_label(df, "total_gib", "memory per GPU"),
        legend_title="part",
    )
    return fig


def fit_map(df: pd.DataFrame, x: str, y: str, title: str | None = None) -> go.Figure:
    """A fits / spills / does-not-fit map over two grid columns of :func:`hnplan.planning.memory.fit_grid`
    (``tp``/``pp`` or ``batch``/``context``), each cell labelled with its total; statuses in the order
    of ``df.attrs["statuses"]``."""
    statuses = df.attrs["statuses"]
    codes = {s: i for i, s in enumerate(statuses)}
    grid = df.pivot(index=y, columns=x, values="status")
    totals = df.pivot(index=y, columns=x, values="total_gib")
    z = grid.apply(lambda col: col.map(codes)).to_numpy(dtype=float)
    gib = unit_of(df, "total_gib")
    text = [
        [("" if pd.isna(st) else f"{st}<br>{tot:,.0f} {gib}") for st, tot in zip(rs, rt)]
        for rs, rt in zip(grid.to_numpy(), totals.to_numpy())
    ]
    n = len(statuses)
    scale = []
    for i, s in enumerate(statuses):
        scale += [(i / n, STATUS_COLOURS[s]), ((i + 1) / n, STATUS_COLOURS[s])]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[str(v) for v in grid.columns],
            y=[str(v) for v in grid.index],
            text=text,
            texttemplate="%{text}",
            zmin=-0.5,
            zmax=n - 0.5,
            colorscale=scale,
            showscale=False,
            hoverinfo="text",
        )
    )
    name = {"tp": "tensor parallel", "pp": "pipeline parallel", "batch": "batch", "context": "context"}
    fig.update_layout(
        title=title or f"Does it fit? ({df.attrs.get('system', '')})",
        xaxis_title=axis_label(df, x, name.get(x, x)),
        yaxis_title=axis_label(df, y, name.get(y, y)),
    )
    return fig
