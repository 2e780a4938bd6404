"""Network figures: topology drawings, busbw against message size, the domain boundary, BOM bars.

Inputs are the tables of :mod:`hnplan.planning.network`; nothing here computes a result.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.plots.common import BREAKDOWN_COLOURS, axis_label, design_colour, log_ticks
from hnplan.units import format_si

_KIND_COLOURS = {
    "gpu": "#4c78a8",
    "nic": "#9ecae9",
    "scaleup-switch": "#f58518",
    "leaf": "#54a24b",
    "spine": "#e45756",
    "aggregation": "#e45756",
    "core": "#b279a2",
}


def topology_figure(nodes: pd.DataFrame, edges: pd.DataFrame, title: str) -> go.Figure:
    """Draw a graph laid out by :func:`hnplan.planning.network.graph_layout` (one trace per link kind and
    node kind)."""
    fig = go.Figure()
    for net, f in edges.groupby("net", sort=True):
        xs, ys = [], []
        for r in f.itertuples():
            xs += [r.x0, r.x1, None]
            ys += [r.y0, r.y1, None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=f"{net} links",
                hoverinfo="skip",
                line=dict(width=0.5, color="#f58518" if net == "scaleup" else "#7f7f7f"),
            )
        )
    for kind, f in nodes.groupby("kind", sort=False):
        fig.add_trace(
            go.Scatter(
                x=f["x"],
                y=f["y"],
                mode="markers",
                name=kind,
                text=f["name"],
                marker=dict(size=6 if kind == "gpu" else 9, color=_KIND_COLOURS.get(kind, "#333")),
            )
        )
    fig.update_layout(
        title=title,
        xaxis=dict(visible=False),
        yaxis=dict(title="tier [layer]", tickmode="linear"),
        legend_title="element",
    )
    return fig


def busbw_figure(df: pd.DataFrame, title: str) -> go.Figure:
    """busbw against message size (log-log), one line per design, the chosen algorithm on hover."""
    fig = go.Figure()
    for sid, f in df.groupby("system", sort=False):
        fig.add_trace(
            go.Scatter(
                x=f["size_bytes"],
                y=f["busbw_GBps"],
                mode="lines+markers",
                name=sid,
                text=f["algorithm"],
                line=dict(color=design_colour(sid)),
                hovertemplate="%{x:.3s}B: %{y:.1f} GB/s (%{text})",
            )
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "size_bytes", "message size", "bytes"),
        yaxis_title=axis_label(df, "busbw_GBps", "busbw", "GB/s"),
        xaxis_type="log",
        yaxis_type="log",
        legend_title="design",
    )
    log_ticks(fig, "x", df["size_bytes"], lambda v: format_si(v, "B"))
    return log_ticks(fig, "y", df["busbw_GBps"])


def boundary_figure(df: pd.DataFrame, title: str) -> go.Figure:
    """busbw of one size against the group size, per design (log x)."""
    fig = go.Figure()
    for sid, f in df.groupby("system", sort=False):
        fig.add_trace(
            go.Scatter(
                x=f["gpus"],
                y=f["busbw_GBps"],
                mode="lines+markers",
                name=sid,
                text=f["algorithm"],
                line=dict(color=design_colour(sid), shape="hv"),
            )
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "gpus", "GPUs in the group", "count"),
        yaxis_title=axis_label(df, "busbw_GBps", "busbw", "GB/s"),
        xaxis_type="log",
        legend_title="design",
    )
    return log_ticks(fig, "x", df["gpus"])


def bom_figure(df: pd.DataFrame, columns: dict, title: str) -> go.Figure:
    """Grouped bars of BOM counts per design; ``columns`` maps column -> "label [unit]"."""
    fig = go.Figure()
    for i, (col, label) in enumerate(columns.items()):
        fig.add_bar(name=label, x=df["system"], y=df[col], marker_color=BREAKDOWN_COLOURS[i % len(BREAKDOWN_COLOURS)])
    fig.update_layout(
        barmode="group",
        title=title,
        xaxis_title="design",
        yaxis_title="count [items]",
        yaxis_type="log",
        legend_title="item",
    )
    return fig
