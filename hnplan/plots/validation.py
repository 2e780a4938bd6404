"""Validation figures: predicted against published, and the error of each row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hnplan.plots.common import PALETTE

ROLE_SYMBOLS = {"prediction": "circle", "calibration": "diamond-open", "bound": "triangle-up", "reported": "x"}


def parity_plot(df: pd.DataFrame, title: str = "hnplan vs published") -> go.Figure:
    """Predicted / published ratio per row on a log axis, grouped by area; 1 is a perfect prediction."""
    fig = go.Figure()
    for i, (name, g) in enumerate(df.groupby("area", sort=False)):
        fig.add_scatter(
            x=g["predicted"] / g["published"],
            y=g["case"] + " - " + g["quantity"],
            mode="markers",
            name=name,
            marker=dict(
                color=PALETTE[i % len(PALETTE)], size=10, symbol=[ROLE_SYMBOLS.get(r, "circle") for r in g["role"]]
            ),
            customdata=np.c_[g["published"], g["predicted"], g["unit"], g["role"]],
            hovertemplate="%{y}<br>published %{customdata[0]:.4g} %{customdata[2]}<br>"
            "hnplan %{customdata[1]:.4g}<br>%{customdata[3]}<extra></extra>",
        )
    fig.add_vline(x=1.0, line_dash="dash", line_color="grey")
    fig.update_layout(
        title=title,
        xaxis_title="hnplan / published [ratio, log scale]",
        xaxis_type="log",
        yaxis_title="",
        height=max(400, 22 * len(df)),
        legend_title="area",
    )
    return fig
