"""The design-space notebook runs a small sweep into a dataset and reads it: key table, Pareto front,
Sobol indices, and the cheapest design meeting a deadline, every number from the library."""

import tempfile
from pathlib import Path

import pytest

from hnplan import units
from hnplan.planning import design_space as ds
from hnplan.planning.sweep import read_sweep

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

# a dataset folder per test process (the notebook test and the browser check may run side by side)
SMALL = dict(
    spec=str(Path(__file__).resolve().parent / "sweep_small.yaml"),
    dataset=tempfile.mkdtemp(prefix="hnplan-design-space-"),
    run_missing=True,
    workers=2,
    deadline_days=1.0,
    probability=0.9,
)


def test_design_space_notebook(tmp_path):
    params = {**SMALL, "dataset": str(tmp_path / "ds")}
    nb, html = run_notebook("design_space", params, tmp_path)
    df = read_sweep(tmp_path / "ds")
    assert len(df) == 16 and df["error"].isna().all()
    summary = ds.design_summary(df)
    assert 'id="key-table"' in html and "What this means" in html
    for tco in summary["tco_mean_usd"]:
        assert f">{units.format_usd(tco)}<" in html  # the key table shows the library's mean TCO per design
    for head in ("chance to meet the deadline [%]", "cost, mean [USD]", "time to train: S1 [-]"):
        assert head in html  # units in the headers, no snake_case names
    assert "p_meet" not in html and "cost_mean_usd" not in html
    assert plotly_divs(html) == 4  # Pareto, two Sobol bar charts, deadline
    # 64 H100 take 1.26 days, 64 GB200 0.54: only the dearer GB200 meets a one-day deadline
    best = ds.cheapest_meeting(ds.deadline_table(df, 1.0), 0.9)
    assert best["system"] == "gb200-nvl72"
    assert "is <strong>64 x gb200-nvl72</strong>" in html
