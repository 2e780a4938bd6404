"""Plots read what they draw from the tables they get: units from ``attrs["units"]``, colours from ids."""

import pandas as pd
import pytest

from hnplan.catalog import load_catalog
from hnplan.planning.memory import fit_grid
from hnplan.planning.roofline import roofline_comparison
from hnplan.plots import axis_label, design_colour, fit_map, roofline, unit_of
from hnplan.plots.common import PALETTE


def test_design_colour_is_stable_and_distinct_across_the_catalog():
    ids = load_catalog().ids("systems")
    colours = [design_colour(s) for s in ids]
    assert len(set(colours)) == len(ids) <= len(PALETTE)
    assert [design_colour(s) for s in reversed(ids)] == colours[::-1]  # the same id, the same colour


def test_axis_label_reads_the_table_units():
    df = pd.DataFrame({"busbw_GBps": [1.0]})
    df.attrs["units"] = {"busbw_GBps": "GB/s"}
    assert axis_label(df, "busbw_GBps", "busbw") == "busbw [GB/s]"
    assert axis_label(pd.DataFrame({"x": [1]}), "x", "x", "s") == "x [s]"  # a default where the table names none
    with pytest.raises(KeyError, match="names no unit for column 'x'"):
        unit_of(pd.DataFrame({"x": [1]}), "x")


def test_figures_take_their_units_from_the_planners_tables():
    g = fit_grid("llama3.1-8b", "hgx-h100-ib-ndr", "train", gpus=8, tps=(1, 8), pps=(1,), seq_len=4096)
    g.attrs["units"] = {**g.attrs["units"], "tp": "accelerators"}
    assert fit_map(g, "tp", "pp").layout.xaxis.title.text == "tensor parallel [accelerators]"
    ops, curves, _ = roofline_comparison("llama3.1-8b", ["h100-sxm"], "decode", 8, 1024, kv_len=512)
    assert roofline(ops, curves).layout.xaxis.title.text == "arithmetic intensity [FLOP/byte]"
    curves.attrs["units"] = {**curves.attrs["units"], "peak_flops_per_s": "TFLOP/s"}
    with pytest.raises(ValueError, match="FLOP/s"):
        roofline(ops, curves)


def test_log_axes_tick_at_the_values_that_matter():
    """Issue 17: log axes label the GPU counts and request rates themselves, for people, not "2 3 ... 9 10k"."""
    import pandas as pd

    from hnplan.plots.common import log_ticks
    from hnplan.plots.training import scaling_figure

    df = pd.DataFrame(
        {
            "system": ["a"] * 3,
            "gpus": [2048, 8192, 16384],
            "tokens_per_s": [1e5, 4e5, 8e5],
            "mfu": [0.4] * 3,
            "status": ["ok"] * 3,
        }
    )
    ax = scaling_figure(df).layout.xaxis
    assert ax.type == "log" and list(ax.tickvals) == [2048, 8192, 16384]
    assert list(ax.ticktext) == ["2,048", "8,192", "16,384"]
    import plotly.graph_objects as go

    many = log_ticks(go.Figure(), "y", [3e3 * 2**k for k in range(20)]).layout.yaxis  # 3k .. 1.6G: decades
    assert list(many.tickvals)[:3] == [1e3, 1e4, 1e5] and list(many.ticktext)[:3] == ["1,000", "10,000", "100k"]


def test_table_headers_and_cells_for_people():
    from hnplan.plots import cell_text, column_header, people_table

    # unit suffix -> bracketed unit, design qualifier -> words, field terms in their usual spelling
    assert column_header("step_time_s_super") == "step time, supernode [s]"
    assert column_header("comm_share_base") == "communication share, servers [-]"
    assert column_header("nic_gbps") == "NIC [Gb/s]"
    assert column_header("mfu") == "MFU [-]"
    # 28,310.4 to 4 significant digits, 1.652e9 in the short scale, NaN and None as a dash
    assert [cell_text(v) for v in (28310.4, 1.652e9, float("nan"), None, False)] == ["28,310", "1.652B", "—", "—", "no"]
    df = pd.DataFrame({"step_time_s": [1.5, float("nan")], "gpus": [576, 2304]})
    html = people_table(df).to_html()
    assert "step time [s]" in html and "GPUs [count]" in html and "2,304" in html
    assert "nan" not in html and "step_time_s" not in html
