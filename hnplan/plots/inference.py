"""Inference figures: throughput-latency frontiers, GPUs against request rate, $ per million tokens,
and the validation scatter.

Plotting only: the tables come from :func:`hnplan.planning.inference.design_frontiers`,
:func:`~hnplan.planning.inference.gpus_vs_rate` and :func:`~hnplan.planning.inference.validation_table`.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.plots.common import PALETTE, axis_label, design_colour, log_ticks


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if "status" in df else df


def frontier_figure(df: pd.DataFrame, title: str = "Throughput-latency frontier") -> go.Figure:
    """Output tokens/s per GPU against tokens/s per user (1 / TPOT), one line per design and layout,
    each point a batch size (hover)."""
    fig = go.Figure()
    ok = _ok(df)
    for (system, layout), g in ok.groupby(["system", "layout"] if "layout" in ok else ["system", "tp"], sort=False):
        fig.add_scatter(
            x=g["tokens_per_s_per_user"],
            y=g["tokens_per_s_per_gpu"],
            mode="lines+markers",
            name=f"{system} ({layout})",
            line=dict(color=design_colour(system)),
            customdata=g[["batch", "tpot_s"]],
            hovertemplate="batch %{customdata[0]}<br>TPOT %{customdata[1]:.4f} s<br>"
            "%{y:,.0f} tokens/s/GPU<extra></extra>",
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "tokens_per_s_per_user", "tokens/s per user (1 / TPOT)", "tokens/s"),
        yaxis_title=axis_label(df, "tokens_per_s_per_gpu", "throughput", "output tokens/s/GPU"),
        legend_title="design",
    )
    return fig


def gpus_vs_rate_figure(df: pd.DataFrame, title: str = "GPUs needed against request rate") -> go.Figure:
    """GPUs that meet the SLOs against the request rate, one line per design (log-log)."""
    fig = go.Figure()
    ok = _ok(df)
    for system, g in ok.groupby("system", sort=False):
        fig.add_scatter(
            x=g["qps"],
            y=g["gpus"],
            mode="lines+markers",
            name=system,
            line=dict(color=design_colour(system)),
            customdata=g[["tp", "ep", "batch", "usd_per_million_tokens"]],
            hovertemplate="%{x:g} req/s: %{y} GPUs<br>TP %{customdata[0]} EP %{customdata[1]}, batch "
            "%{customdata[2]}<br>$%{customdata[3]:.3f} per M tokens<extra></extra>",
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "qps", "request rate", "requests/s"),
        yaxis_title=axis_label(df, "gpus", "accelerators", "GPUs"),
        xaxis_type="log",
        yaxis_type="log",
        legend_title="design",
    )
    if ok.empty:  # no rate served: the table has no gpus column (rates: [1e9] ran the notebook into a KeyError)
        return _none_served(fig)
    log_ticks(fig, "x", ok["qps"])
    return log_ticks(fig, "y", ok["gpus"])


def _none_served(fig: go.Figure) -> go.Figure:
    """The empty chart says why it is empty: no design serves any of the rates within the SLOs."""
    fig.add_annotation(
        text="no design serves any of these rates within the SLOs (the table's status says why)",
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
    )
    return fig


def cost_per_token_figure(df: pd.DataFrame, title: str = "$ per million output tokens") -> go.Figure:
    """$ per million output tokens against the request rate, one line per design."""
    fig = go.Figure()
    for system, g in _ok(df).groupby("system", sort=False):
        fig.add_scatter(
            x=g["qps"],
            y=g["usd_per_million_tokens"],
            mode="lines+markers",
            name=system,
            line=dict(color=design_colour(system)),
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "qps", "request rate", "requests/s"),
        yaxis_title=axis_label(df, "usd_per_million_tokens", "cost", "USD per million output tokens"),
        xaxis_type="log",
        legend_title="design",
    )
    if _ok(df).empty:
        return _none_served(fig)
    return log_ticks(fig, "x", _ok(df)["qps"])


def serving_validation_figure(df: pd.DataFrame, title: str = "Modelled against published") -> go.Figure:
    """Modelled / published ratio per validation row, grouped by source family, with the +-25% band."""
    fig = go.Figure()
    for i, (f, g) in enumerate(df.groupby("family", sort=False)):
        fig.add_scatter(
            x=g["id"],
            y=g["modelled"] / g["published"],
            mode="markers",
            name=f,
            marker=dict(size=9, color=PALETTE[i % len(PALETTE)]),
            customdata=g[["published", "modelled", "unit"]],
            hovertemplate="%{x}<br>published %{customdata[0]:,.4g}<br>modelled %{customdata[1]:,.4g} "
            "%{customdata[2]}<extra></extra>",
        )
    for y, dash in ((1.0, "solid"), (0.75, "dot"), (1.25, "dot")):
        fig.add_hline(y=y, line_dash=dash, line_color="grey")
    fig.update_layout(
        title=title,
        xaxis_title="measurement",
        yaxis_title="modelled / published [-]",
        legend_title="source",
        xaxis_showticklabels=False,
    )
    return fig
