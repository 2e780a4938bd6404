"""Figures of a design-space sweep (:mod:`hnplan.planning.design_space`); they draw, never compute."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan import units
from hnplan.formatting import counted
from hnplan.labels import name_and_unit
from hnplan.plots.common import design_colour


def pareto_figure(
    points: pd.DataFrame, summary: pd.DataFrame, front: pd.DataFrame, title: str = "Time-to-train against TCO"
) -> go.Figure:
    """Every draw of every design (time-to-train [days] vs TCO [M USD]), marker size by facility power,
    and the designs' means with the Pareto front ringed."""
    fig = go.Figure()
    ok = points[points["error"].isna()]
    pmax = max(ok["facility_power_w"].max(), 1.0) if len(ok) else 1.0
    for design, g in ok.groupby("design", sort=False):
        colour = design_colour(str(g["system"].iloc[0]))
        fig.add_trace(
            go.Scatter(
                x=g["days_to_train"],
                y=g["tco_usd"] / units.MEGA,
                mode="markers",
                name=design,
                opacity=0.45,
                marker=dict(color=colour, size=6 + 14 * g["facility_power_w"] / pmax),
                hovertemplate=design + "<br>%{x:.1f} days<br>$%{y:,.1f}M<extra></extra>",
            )
        )
    on_front = summary["design"].isin(front["design"])
    for flag, symbol, name in ((True, "star", "design mean, on the Pareto front"), (False, "x", "design mean")):
        s = summary[on_front == flag].dropna(subset=["days_mean"])
        if len(s):
            fig.add_trace(
                go.Scatter(
                    x=s["days_mean"],
                    y=s["tco_mean_usd"] / units.MEGA,
                    mode="markers+text",
                    name=name,
                    text=s["design"],
                    textposition="top center",
                    marker=dict(symbol=symbol, size=14, color="black"),
                    customdata=s["facility_power_w"] / units.MEGA,
                    hovertemplate="%{text}<br>%{x:.1f} days<br>$%{y:,.1f}M<br>%{customdata:.2f} MW<extra></extra>",
                )
            )
    fig.update_layout(
        title=title,
        xaxis_title="time to train [days]",
        yaxis_title="TCO [million USD]",
        legend_title="design (marker size: facility power)",
    )
    return fig


def sobol_bars(sobol: pd.DataFrame, output: str, label: str) -> go.Figure:
    """First-order Sobol indices of the sampled inputs for one output, one bar group per design, over a
    grey band up to the noise floor (``noise_floor`` of
    :func:`hnplan.planning.design_space.sobol_indices`: the index an input that does not matter stays
    below in 95 % of samples of this size; not a confidence interval). A bar at or below its design's
    floor is hatched and faded: not distinguishable from zero."""
    s = sobol[sobol["output"] == output]
    fig = go.Figure()
    for design, g in s.groupby("design", sort=False):
        noise = ~g["above_noise"].to_numpy(bool)
        fig.add_trace(
            go.Bar(
                x=[name_and_unit(i)[0] for i in g["input"]],  # a reader's words, not the spec's field names
                y=g["S1"],
                name=design,
                marker=dict(
                    pattern=dict(shape=["/" if n else "" for n in noise]),
                    opacity=[0.45 if n else 1.0 for n in noise],
                ),
                customdata=["not distinguishable from zero" if n else "above the noise floor" for n in noise],
                hovertemplate=design + "<br>%{x}: S1 %{y:.2f}, %{customdata}<extra></extra>",
            )
        )
    if len(s):
        floor, draws = s["noise_floor"].max(), int(s["draws"].min())
        fig.add_hrect(
            y0=0,
            y1=floor,
            fillcolor="grey",
            opacity=0.2,
            line_width=0,
            layer="below",
            annotation_text=f"noise floor {floor:.2f} at {draws} draws per design (hatched bars: not distinguishable "
            "from zero)",
            annotation_position="top right",
        )
    fig.update_layout(
        title=f"What drives {label}: first-order Sobol indices",
        barmode="group",
        xaxis_title="sampled input",
        yaxis_title="first-order Sobol index S1 [0-1]",
    )
    return fig


def deadline_figure(table: pd.DataFrame, deadline_days: float, probability: float) -> go.Figure:
    """Probability of meeting the deadline against mean TCO, one marker per design, the target line."""
    fig = go.Figure(
        go.Scatter(
            x=table["cost_mean_usd"] / units.MEGA,
            y=table["p_meet"],
            mode="markers+text",
            text=table["design"],
            textposition="top center",
            marker=dict(size=12, color=[design_colour(str(s)) for s in table["system"]]),
        )
    )
    fig.add_hline(y=probability, line_dash="dash", annotation_text=f"target {probability:.0%}")
    fig.update_layout(
        title=f"Chance of training within {counted(deadline_days, 'day', spec='g')} against cost",
        xaxis_title="mean TCO [million USD]",
        yaxis_title="probability of meeting the deadline [0-1]",
        yaxis_range=[-0.05, 1.1],
    )
    return fig
