"""Plotly figures from result DataFrames (one module per topic; plotting never computes a result)."""

from hnplan.plots.claims import claim_figure  # noqa: F401
from hnplan.plots.common import (  # noqa: F401
    BREAKDOWN_COLOURS,
    PALETTE,
    axis_label,
    design_bars,
    design_colour,
    design_colours,
    show,
    step_breakdown_bar,
    unit_of,
)
from hnplan.plots.inference import (  # noqa: F401
    cost_per_token_figure,
    frontier_figure,
    gpus_vs_rate_figure,
    serving_validation_figure,
)
from hnplan.plots.memory import fit_map, memory_breakdown_bars  # noqa: F401
from hnplan.plots.network import bom_figure, boundary_figure, busbw_figure, topology_figure  # noqa: F401
from hnplan.plots.procurement import mc_histogram, mix_bars, tornado_chart  # noqa: F401  (issue 8)
from hnplan.plots.roofline import roofline  # noqa: F401
from hnplan.plots.tables import cell_text, column_header, people_table  # noqa: F401
from hnplan.plots.training import scaling_figure, training_validation_figure  # noqa: F401
from hnplan.plots.validation import parity_plot  # noqa: F401
