"""Claims-audit figure: the design-against-design numbers behind the verdicts."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def claims_evidence_bars(df: pd.DataFrame, title: str = "Behind the verdicts") -> go.Figure:
    """Grouped bars of ``evidence_frame`` (fractions shown as percent)."""
    fig = px.bar(df, x="metric", y="value", color="design", barmode="group", text_auto=".0%",
                 color_discrete_sequence=px.colors.qualitative.Safe)
    fig.update_layout(title=title, xaxis_title="", yaxis_title="fraction of step / of peak [%]",
                      yaxis_tickformat=".0%", legend_title="design and plan")
    return fig
