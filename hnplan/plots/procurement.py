"""Procurement figures: tornado chart, Monte Carlo distribution, design mix, sizing bars."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.labels import name_and_unit
from hnplan.plots.common import design_colour


def tornado_chart(df: pd.DataFrame, label: str | None = None) -> go.Figure:
    """Horizontal bars from the base metric to its value at each input's low and high end.

    ``df`` is :func:`hnplan.planning.procurement.tornado` output (largest swing on top).
    """
    metric, unit = df.attrs.get("metric", "metric"), df.attrs.get("unit", "")
    d = df.iloc[::-1]
    base = float(d["metric_base"].iloc[0]) if len(d) else 0.0
    fig = go.Figure()
    fig.add_bar(
        y=d["name"],
        x=d["metric_low"] - base,
        base=base,
        orientation="h",
        name="input at low end",
        marker_color="#4C78A8",
        customdata=d[["low", "unit"]],
        hovertemplate="%{y}: low %{customdata[0]:.3g} %{customdata[1]}<extra></extra>",
    )
    fig.add_bar(
        y=d["name"],
        x=d["metric_high"] - base,
        base=base,
        orientation="h",
        name="input at high end",
        marker_color="#F58518",
        customdata=d[["high", "unit"]],
        hovertemplate="%{y}: high %{customdata[0]:.3g} %{customdata[1]}<extra></extra>",
    )
    fig.add_vline(x=base, line_dash="dot")
    fig.update_layout(
        barmode="overlay",
        title=f"Sensitivity of the {name_and_unit(metric)[0]} ({df.attrs.get('system', '')})",
        xaxis_title=label or f"{name_and_unit(metric)[0]} [{unit}]",
        yaxis_title="uncertain input",
    )
    return fig


def mc_histogram(df: pd.DataFrame, column: str, label: str, bands: pd.DataFrame | None = None) -> go.Figure:
    """Histogram of one Monte Carlo output column, with the p5/p50/p95 lines of ``bands`` if given."""
    fig = go.Figure(go.Histogram(x=df[column], marker_color=design_colour(df.attrs.get("system", "")), nbinsx=30))
    if bands is not None:
        row = bands.set_index("metric").loc[column]
        for name, v in row.items():
            fig.add_vline(x=v, line_dash="dash", annotation_text=name)
    fig.update_layout(
        title=f"Monte Carlo: {label} (seed {df.attrs.get('seed', '-')})",
        xaxis_title=label,
        yaxis_title="samples [count]",
        showlegend=False,
    )
    return fig


def mix_bars(units: pd.DataFrame, unit_gpus: dict) -> go.Figure:
    """Stacked GPUs bought per workload, one colour per design (``units``: workloads x designs)."""
    fig = go.Figure()
    for sid in units.columns:
        fig.add_bar(name=sid, x=list(units.index), y=units[sid] * unit_gpus[sid], marker_color=design_colour(sid))
    fig.update_layout(
        barmode="stack",
        title="Best mix of designs",
        xaxis_title="workload",
        yaxis_title="accelerators bought [GPUs]",
        legend_title="design",
    )
    return fig
