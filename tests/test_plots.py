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
