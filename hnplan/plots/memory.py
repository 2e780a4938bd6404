"""Memory figures: stacked per-GPU breakdowns against each accelerator's HBM, and fit maps.

Plotting only: the tables come from :func:`hnplan.memory.breakdown_table` and
:func:`hnplan.memory.fit_grid`.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.memory import PARTS, STATUSES
from hnplan.plots.common import BREAKDOWN_COLOURS, design_colour

STATUS_COLOURS = {"fits": "#2ca02c", "spills": "#ff7f0e", "does-not-fit": "#d62728"}


def memory_breakdown_bars(df: pd.DataFrame, title: str = "Memory per GPU") -> go.Figure:
    """Stacked bars of the ``<part>_gib`` columns per ``system``, with each system's ``hbm_gib`` as a
    line across its bar in the design's colour."""
    fig = go.Figure()
    parts = [p for p in PARTS if f"{p}_gib" in df and df[f"{p}_gib"].fillna(0).any()]
    for i, p in enumerate(parts):
        fig.add_bar(name=p.replace("_", " "), x=df["system"], y=df[f"{p}_gib"],
                    marker_color=BREAKDOWN_COLOURS[i % len(BREAKDOWN_COLOURS)])
    for s, hbm in zip(df["system"], df["hbm_gib"]):
        fig.add_scatter(x=[s], y=[hbm], mode="markers", name=f"HBM {s}",
                        marker=dict(symbol="line-ew-open", size=60, line=dict(width=4, color=design_colour(s))),
                        hovertemplate=f"{s}: HBM %{{y:.1f}} GiB<extra></extra>")
    fig.update_layout(barmode="stack", title=title, xaxis_title="design", yaxis_title="memory per GPU [GiB]",
                      legend_title="part")
    return fig


def fit_map(df: pd.DataFrame, x: str, y: str, title: str | None = None) -> go.Figure:
    """A fits / spills / does-not-fit map over two grid columns of :func:`hnplan.memory.fit_grid`
    (``tp``/``pp`` or ``batch``/``context``), each cell labelled with its total in GiB."""
    codes = {s: i for i, s in enumerate(STATUSES)}
    grid = df.pivot(index=y, columns=x, values="status")
    totals = df.pivot(index=y, columns=x, values="total_gib")
    z = grid.apply(lambda col: col.map(codes)).to_numpy(dtype=float)
    text = [[("" if pd.isna(st) else f"{st}<br>{tot:,.0f} GiB") for st, tot in zip(rs, rt)]
            for rs, rt in zip(grid.to_numpy(), totals.to_numpy())]
    n = len(STATUSES)
    scale = []
    for i, s in enumerate(STATUSES):
        scale += [(i / n, STATUS_COLOURS[s]), ((i + 1) / n, STATUS_COLOURS[s])]
    fig = go.Figure(go.Heatmap(z=z, x=[str(v) for v in grid.columns], y=[str(v) for v in grid.index], text=text,
                               texttemplate="%{text}", zmin=-0.5, zmax=n - 0.5, colorscale=scale, showscale=False,
                               hoverinfo="text"))
    label = {"tp": "tensor parallel [GPUs]", "pp": "pipeline parallel [stages]", "batch": "batch [sequences]",
             "context": "context [tokens]"}
    fig.update_layout(title=title or f"Does it fit? ({df.attrs.get('system', '')})",
                      xaxis_title=label.get(x, x), yaxis_title=label.get(y, y))
    return fig
