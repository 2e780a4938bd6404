"""Figures of the cluster simulation: time series per design, utilisation by day, delay distributions (by class
and by job size), the fragmentation map of the racks, policies compared. Plotting only: every number comes from
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


def daily_utilisation_figure(daily: pd.DataFrame, title: str = "Allocated GPUs by day") -> go.Figure:
    """Bars of the allocated share of the installed GPUs per calendar day, one colour per run, with the share in
    repair stacked above each (hatched); days wholly or partly in the warm-up the summary leaves out are paler.
    ``daily`` as :func:`hnplan.cluster.compare.daily_frame`."""
    fig = go.Figure()
    policies = daily["policy"].unique()
    for i, ((s, p), g) in enumerate(daily.groupby(["system", "policy"], sort=False)):
        c = design_colour(s) if len(policies) == 1 else PALETTE[i % len(PALETTE)]
        name = _label(s, p, policies)
        pale = (g["measured_s"] < g["length_s"]).map({True: 0.45, False: 1.0}).tolist()
        hover = "day %{x}: %{y:.1%}<extra>" + name + "</extra>"
        fig.add_bar(
            x=g["day"],
            y=g["allocated"],
            name=f"{name} allocated",
            offsetgroup=name,
            marker=dict(color=c, opacity=pale),
            hovertemplate=hover,
        )
        fig.add_bar(
            x=g["day"],
            y=g["down"],
            base=g["allocated"],
            name=f"{name} in repair",
            offsetgroup=name,
            marker=dict(color=c, opacity=0.5, pattern_shape="/"),
            hovertemplate="in repair " + hover,
        )
    fig.update_layout(
        title=title,
        barmode="group",
        xaxis_title="day of the window (paler: warm-up, left out of the means)",
        yaxis_title="share of installed GPUs [fraction]",
        yaxis_tickformat=".0%",
        yaxis_range=[0, 1],
    )
    return fig


def delay_by_size_figure(by_size: pd.DataFrame, title: str = "Queueing delay by job size") -> go.Figure:
    """The p50, p95 and p99 queueing delay per job-size class (GPUs asked), one panel each, bars per run (log
    scale; 0 s shown at 1 s; hover gives the jobs of the class). ``by_size`` as
    :func:`hnplan.cluster.compare.delay_by_size_frame`."""
    pcts = ("p50", "p95", "p99")
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=pcts, horizontal_spacing=0.03)
    policies = by_size["policy"].unique()
    for i, ((s, p), g) in enumerate(by_size.groupby(["system", "policy"], sort=False)):
        c = design_colour(s) if len(policies) == 1 else PALETTE[i % len(PALETTE)]
        name = _label(s, p, policies)
        for j, q in enumerate(pcts):
            fig.add_bar(
                x=g["size"],
                y=g[q].clip(lower=1),
                name=name,
                legendgroup=name,
                showlegend=j == 0,
                marker_color=c,
                customdata=g[["jobs", q]].to_numpy(),
                hovertemplate=f"{name}, %{{x}} GPUs: {q} %{{customdata[1]:,.0f}} s (%{{customdata[0]:,}} jobs)<extra></extra>",
                row=1,
                col=j + 1,
            )
    fig.update_yaxes(type="log", row=1, col=1, title_text="queueing delay [s]")
    for j in (2, 3):
        fig.update_yaxes(type="log", row=1, col=j)
    fig.update_xaxes(title_text="GPUs asked", type="category")
    fig.update_layout(title=title, barmode="group")
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
