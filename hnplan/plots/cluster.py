"""Figures of the cluster simulation: time series per design, delay distributions, the
fragmentation map of the racks, policies compared. Plotting only: every number comes from
:mod:`hnplan.cluster`."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hnplan import units
from hnplan.plots.common import PALETTE, design_colour


def _label(s, p, policies):
    return s if len(policies) == 1 else f"{s} / {p}"


def timeseries_figure(ts: pd.DataFrame, title: str = "Utilisation and queue over time") -> go.Figure:
    """Utilisation (productive), allocation and queued jobs against time, one colour per run."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    policies = ts["policy"].unique()
    for i, ((s, p), g) in enumerate(ts.groupby(["system", "policy"], sort=False)):
        c = design_colour(s) if len(policies) == 1 else PALETTE[i % len(PALETTE)]
        name = _label(s, p, policies)
        x = g["time_s"] / units.HOUR
        fig.add_scatter(x=x, y=g["utilisation"], name=f"{name} utilisation", line=dict(color=c), row=1, col=1)
        fig.add_scatter(x=x, y=g["allocation"], name=f"{name} allocated", line=dict(color=c, dash="dot"), row=1, col=1)
        fig.add_scatter(x=x, y=g["queued"], name=f"{name} queued", line=dict(color=c), showlegend=False, row=2, col=1)
    fig.update_yaxes(title_text="share of GPUs [fraction]", tickformat=".0%", row=1, col=1)
    fig.update_yaxes(title_text="queued jobs [jobs]", row=2, col=1)
    fig.update_xaxes(title_text="time [h]", row=2, col=1)
    fig.update_layout(title=title, height=600)
    return fig


def delay_figure(delays: pd.DataFrame, title: str = "Queueing delay by class") -> go.Figure:
    """Box plots of queueing delay per class, one box per run (log scale; 0 s shown at 1 s)."""
    fig = go.Figure()
    policies = delays["policy"].unique()
    for i, ((s, p), g) in enumerate(delays.groupby(["system", "policy"], sort=False)):
        c = design_colour(s) if len(policies) == 1 else PALETTE[i % len(PALETTE)]
        fig.add_box(
            x=g["cls"], y=g["queue_delay_s"].clip(lower=1), name=_label(s, p, policies), marker_color=c, boxpoints=False
        )
    fig.update_layout(
        title=title, boxmode="group", xaxis_title="class", yaxis_title="queueing delay [s]", yaxis_type="log"
    )
    return fig


def fragmentation_map(snapshot: pd.DataFrame, title: str = "GPU allocation by rack") -> go.Figure:
    """Heat map of every GPU's allocated share, one row per rack (GPUs in rack order); nodes in repair
    shown empty (hover says so)."""
    snap = snapshot.copy()
    snap["slot"] = snap.groupby("rack").cumcount()
    z = snap.pivot(index="rack", columns="slot", values="used")
    down = snap.pivot(index="rack", columns="slot", values="up")
    text = down.map(lambda u: "" if u is True or u == 1 else "in repair")
    fig = go.Figure(
        go.Heatmap(
            z=z.values,
            x=z.columns,
            y=[f"rack {r}" for r in z.index],
            zmin=0,
            zmax=1,
            colorscale="Blues",
            text=text.values,
            colorbar=dict(title="allocated [fraction]"),
            hovertemplate="%{y}, GPU %{x}: %{z:.0%} %{text}<extra></extra>",
        )
    )
    t = snapshot.attrs.get("time_s")
    fig.update_layout(
        title=title + (f" at {t / units.HOUR:.1f} h" if t is not None else ""),
        xaxis_title="GPU in rack",
        yaxis_title="rack",
        height=max(300, 14 * len(z)),
    )
    return fig


def policy_bars(table: pd.DataFrame, title: str = "Policies compared") -> go.Figure:
    """Grouped bars of utilisation, allocation, fragmentation and goodput per run."""
    fig = go.Figure()
    label = table["system"] + " / " + table["policy"]
    for i, (col, name) in enumerate(
        (
            ("utilisation", "utilisation"),
            ("allocation_rate", "allocated"),
            ("fragmentation", "stranded"),
            ("goodput", "goodput"),
        )
    ):
        fig.add_bar(x=label, y=table[col], name=name, marker_color=PALETTE[i])
    fig.update_layout(
        title=title, barmode="group", xaxis_title="design / policy", yaxis_title="fraction", yaxis_tickformat=".0%"
    )
    return fig
