"""The classic log-log roofline: compute ceilings, memory slopes and operators as points."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hnplan import units
from hnplan.plots.common import axis_label, design_colour, unit_of

_SYMBOLS = {"gemm": "circle", "attention": "diamond", "elementwise": "square"}


def roofline(ops: pd.DataFrame, curves: pd.DataFrame, title: str = "Roofline") -> go.Figure:
    """Log-log roofline of operator tables (from :func:`hnplan.planning.roofline.roofline_comparison`).

    Parameters
    ----------
    ops : pandas.DataFrame
        Operator rows with ``accelerator``, ``name``, ``phase``, ``kind``, ``intensity`` [FLOP/byte],
        ``attained_flops_per_s`` [FLOP/s] and ``bound``; rows without FLOPs (gathers, copies) are not drawn.
    curves : pandas.DataFrame
        ``accelerator``, ``intensity``, ``achievable_flops_per_s`` and ``peak_flops_per_s`` [FLOP/s].
        Both name their units in ``attrs["units"]``; throughputs in FLOP/s are drawn in TFLOP/s.

    Raises
    ------
    KeyError
        If a frame names no unit for a drawn column.
    ValueError
        If a throughput column is not in FLOP/s.

    Returns
    -------
    plotly.graph_objects.Figure
        Per accelerator (one colour): the achievable roofline (solid), the dense peak (dotted) and
        the operators as markers (circle GEMM, diamond attention, square element-wise).
    """
    for df, col in ((ops, "attained_flops_per_s"), (curves, "achievable_flops_per_s"), (curves, "peak_flops_per_s")):
        if unit_of(df, col) != "FLOP/s":
            raise ValueError(f"roofline draws {col} in FLOP/s; the table gives {unit_of(df, col)}")
    fig = go.Figure()
    for acc, c in curves.groupby("accelerator", sort=False):
        col = design_colour(acc)
        fig.add_scatter(
            x=c["intensity"],
            y=units.flops_per_s_to_tflops(c["achievable_flops_per_s"]),
            mode="lines",
            line=dict(color=col),
            name=f"{acc} roofline",
            legendgroup=acc,
        )
        fig.add_scatter(
            x=c["intensity"],
            y=units.flops_per_s_to_tflops(c["peak_flops_per_s"]),
            mode="lines",
            line=dict(color=col, dash="dot"),
            name=f"{acc} dense peak",
            legendgroup=acc,
            showlegend=False,
        )
    pts = ops[ops["flops"] > 0]
    for acc, g in pts.groupby("accelerator", sort=False):
        fig.add_scatter(
            x=g["intensity"],
            y=units.flops_per_s_to_tflops(g["attained_flops_per_s"]),
            mode="markers",
            marker=dict(
                color=design_colour(acc),
                symbol=[_SYMBOLS.get(k, "circle") for k in g["kind"]],
                size=8,
                line=dict(width=0.5, color="black"),
            ),
            name=f"{acc} operators",
            legendgroup=acc,
            text=[f"{n} ({p}, {b}-bound)" for n, p, b in zip(g["name"], g["phase"], g["bound"])],
            hovertemplate=f"%{{text}}<br>%{{x:.3g}} {unit_of(ops, 'intensity')}<br>%{{y:.4g}} TFLOP/s<extra></extra>",
        )
    fig.update_xaxes(type="log", title=axis_label(curves, "intensity", "arithmetic intensity"))
    fig.update_yaxes(type="log", title="attained throughput [TFLOP/s]")
    fig.update_layout(title=title, legend_title="accelerator")
    return fig
