"""Training-planner figures: throughput against GPU count per design, and model vs published runs."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.plots.common import axis_label, design_colour, log_ticks


def scaling_figure(df: pd.DataFrame, title: str = "Throughput against GPU count") -> go.Figure:
    """Lines of best-plan ``tokens_per_s`` over ``gpus``, one per ``system`` (rows with status ok)."""
    fig = go.Figure()
    ok = df[df["status"] == "ok"]
    for sid, g in ok.groupby("system", sort=False):
        fig.add_scatter(
            x=g["gpus"],
            y=g["tokens_per_s"],
            mode="lines+markers",
            name=sid,
            line=dict(color=design_colour(sid)),
            customdata=g[["mfu"]].to_numpy(),
            hovertemplate="%{x} GPUs: %{y:,.0f} tokens/s, MFU %{customdata[0]:.1%}",
        )
    fig.update_layout(
        title=title,
        xaxis_title=axis_label(df, "gpus", "accelerators", "GPUs"),
        yaxis_title=axis_label(df, "tokens_per_s", "throughput", "tokens/s"),
        xaxis_type="log",
        legend_title="design",
    )
    return log_ticks(fig, "x", ok["gpus"])


def training_validation_figure(df: pd.DataFrame, title: str = "Planner vs published runs") -> go.Figure:
    """Bars of the speed error per run id (``speed_error_pct`` of a validation_table, + always faster than
    measured, whether the run published a step time or a throughput; ``error_pct`` where the table has none) with
    the ``tolerance_pct`` band."""
    col = "speed_error_pct" if "speed_error_pct" in df else "error_pct"
    colours = [
        "#3b7d3b" if w else ("#c0392b" if e == "within" else "#999999") for w, e in zip(df["within"], df["expect"])
    ]
    fig = go.Figure(
        go.Bar(
            x=df["id"],
            y=df[col],
            marker_color=colours,
            text=[f"{v:+.0f}%" for v in df[col]],
            textposition="outside",
        )
    )
    tol = float(df["tolerance_pct"].max())
    for y in (tol, -tol):
        fig.add_hline(y=y, line_dash="dot", line_color="#666")
    fig.update_layout(
        title=title,
        xaxis_title="run",
        yaxis_title=(
            "hnplan speed / measured - 1 [%] (+ = faster than measured)"
            if col == "speed_error_pct"
            else axis_label(df, "error_pct", "model / published - 1", "%")
        ),
        showlegend=False,
    )
    return fig
