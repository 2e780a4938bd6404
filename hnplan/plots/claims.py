"""Claims-audit figures: one chart per claim from its grid of points (plots never compute a result)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan.labels import column_header, quantity_text
from hnplan.plots.common import PALETTE

_VERDICT_COLOURS = {
    "holds": "#1a7f37",
    "does not hold": "#cf222e",
    "holds under conditions": "#9a6700",
    "not testable": "#6e7781",
    "undecided": "#8250df",
}
_LABELS = {
    "gpus": "GPUs",
    "params": "model parameters",
    "nic_gbps": "NIC rate [Gb/s]",
    "servers_per_rack": "servers per rack",
    "size_bytes": "buffer [bytes]",
    "ranks": "ranks",
}


def _title(claim) -> str:
    return f"{claim.id}: {claim.verdict}"


def claim_figure(claim) -> go.Figure | None:
    """The claim's metric over its grid, the threshold as a dashed line; a filled marker where the claim
    holds, an open one where it does not, grey for rows shown only for context. ``None`` for a claim
    without points (a claim that cannot be tested and has no grid).

    Parameters
    ----------
    claim : hnplan.planning.claims.Claim
    """
    pts: pd.DataFrame = claim.points
    if pts is None or pts.empty:
        return None
    fig = go.Figure()
    thr = claim.numbers.get("threshold")
    if claim.metric and claim.metric in pts:
        axes = list(claim.axes)
        numeric = [a for a in axes if a in ("gpus", "params", "nic_gbps", "servers_per_rack", "size_bytes", "ranks")]
        x = next((a for a in ("gpus", "size_bytes") if a in numeric), numeric[0] if numeric else axes[0])
        series = [("model" if a == "params" and "model" in pts else a) for a in axes if a != x]
        groups = pts.groupby(series, sort=False) if series else [(claim.metric, pts)]
        for i, (key, g) in enumerate(groups):
            key = key if isinstance(key, tuple) else (key,)
            name = (
                ", ".join(f"{k:g} Gb/s" if a == "nic_gbps" else str(k) for a, k in zip(series, key))
                if series
                else str(key[0])
            )
            g = g.sort_values(x)
            colour = PALETTE[i % len(PALETTE)]
            ctx = g["holds"].isna()
            fig.add_scatter(
                x=g.loc[~ctx, x],
                y=g.loc[~ctx, claim.metric],
                name=str(name),
                mode="lines+markers",
                line_color=colour,
                marker=dict(
                    size=11,
                    color=[colour if h else "white" for h in g.loc[~ctx, "holds"]],
                    line=dict(color=colour, width=2),
                ),
            )
            if ctx.any():
                fig.add_scatter(
                    x=g.loc[ctx, x],
                    y=g.loc[ctx, claim.metric],
                    name=f"{name} (context)",
                    mode="markers",
                    marker=dict(size=9, color="#afb8c1"),
                )
        if thr is not None:
            fig.add_hline(
                y=thr,
                line_dash="dash",
                line_color=_VERDICT_COLOURS[claim.verdict],
                annotation_text=f"claim: {quantity_text(claim.metric, f'{claim.op} {thr:g}')}",
            )
        if x in ("gpus", "params", "size_bytes"):
            fig.update_xaxes(type="log")
        fig.update_layout(
            xaxis_title=_LABELS.get(x, x), yaxis_title=column_header(claim.metric), legend_title=", ".join(series)
        )
    else:
        label = pts.columns[0]
        for i, col in enumerate(
            c
            for c in pts.columns[1:]
            if pd.api.types.is_numeric_dtype(pts[c]) and not pd.api.types.is_bool_dtype(pts[c])
        ):
            fig.add_bar(
                x=pts[label].astype(str), y=pts[col], name=column_header(col), marker_color=PALETTE[i % len(PALETTE)]
            )
        fig.update_layout(barmode="group", xaxis_title=column_header(label), yaxis_title="value [per column]")
    fig.update_layout(title=_title(claim), height=380, margin=dict(t=60, b=40))
    return fig
