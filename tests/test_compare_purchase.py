"""``compare_training_designs`` charges what is bought and weighs the job layouts the sizing planner weighs."""

import json

import pytest
from typer.testing import CliRunner

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.cost import design_cost
from hnplan.planning.compare import compare_training_designs
from hnplan.planning.sizing import size_for_deadline
from hnplan.planning.sizing_search import job_gpu_options
from hnplan.power import design_power


def test_job_gpu_options_are_all_gpus_and_the_power_of_two_of_each_unit():
    # 128 racks of 72: 9,216 GPUs, or 64 of each = 8,192; an 8-GPU server has no other option
    assert job_gpu_options(72, 128) == (9216, 8192)
    assert job_gpu_options(8, 16) == (128,)
    assert job_gpu_options(384, 1) == (384, 256)  # a 384-NPU CloudMatrix: 256 = 2^8


def test_run_cost_and_energy_count_the_144_gpus_bought_for_128():
    """Llama 3.1 70B on 128 GB300 GPUs: two 72-GPU racks are bought (144 GPUs) and 16 idle. The run costs
    TCO / productive GPU-hours x 144 GPUs x run hours, not x 128 (the idle GPUs are paid for); the power and
    energy count the same two racks."""
    cat = load_catalog()
    df = compare_training_designs("llama3.1-70b", ["gb300-nvl72"], 128, 1e12, 8192, 2048, catalog=cat)
    r = df.iloc[0]
    assert (r["gpus"], r["gpus_bought"], r["racks"]) == (128, 144, 2)
    assert "128 of 144 GPUs bought train (the rest idle)" in r["status"]
    c = design_cost(cat.design("gb300-nvl72"), 144)
    assert c.gpus == 144
    rate = c.tco_usd / c.productive_gpu_hours  # USD per GPU-hour over the lifetime's productive hours
    hours = r["days"] * 24
    assert r["run_musd"] * 1e6 == pytest.approx(rate * 144 * hours, rel=1e-9)
    # the 128-GPU charge would have been 128/144 = 0.889 of it
    assert r["run_musd"] * 1e6 / (rate * 128 * hours) == pytest.approx(144 / 128, rel=1e-9)
    assert r["usd_per_million_tokens"] == pytest.approx(r["run_musd"] * 1e6 / 1e12 * 1e6, rel=1e-9)
    pw = design_power(cat.design("gb300-nvl72"), 144)
    assert r["it_power_mw"] == pytest.approx(units.w_to_mw(pw.it_w), rel=1e-12)
    assert r["capex_musd"] * 1e6 == pytest.approx(c.capex_usd, rel=1e-12)


def test_compare_and_size_agree_on_one_rack():
    """Llama 3.1 8B, 2,048 x 8,192-token sequences per step on one GB200 NVL72 rack: `hnplan size` (a
    deadline of 2 days, which one rack meets) runs the job on 64 of the 72 GPUs (DP64), as all 72 have no
    plan; `compare --gpus 72` weighs the same option and chooses the same job, plan and step time."""
    cat = load_catalog()
    s = size_for_deadline("llama3.1-8b", "gb200-nvl72", 1e11, 2.0, 8192, 2048, catalog=cat)
    r = compare_training_designs("llama3.1-8b", ["gb200-nvl72"], 72, 1e11, 8192, 2048, catalog=cat).iloc[0]
    assert (s["units"], s["gpus_bought"], s["gpus"]) == (1, 72, 64)
    assert (r["gpus_bought"], r["gpus"]) == (72, 64)
    assert r["step_time_s"] == pytest.approx(s["step_time_s"], rel=1e-12)
    # both after the same goodput (the reliability model on the 64 GPUs that train): the same days
    assert r["goodput"] == pytest.approx(s["goodput"], rel=1e-12) and r["goodput"] < 1
    assert r["days"] == pytest.approx(s["days"], rel=1e-12)
    assert r["tp"] * r["pp"] * r["dp"] * r["cp"] == 64
    # 72 = 8 x 9: no layout of the 32 layers and 2,048 sequences takes the 9, so the 72 have no plan
    assert "64 of 72 GPUs bought train (the 72 asked for have no plan)" in r["status"]
    # all 72 GPUs bought are charged: power and cost of one rack
    assert r["racks"] == 1 and r["gpus_bought"] == design_cost(cat.design("gb200-nvl72"), 72).gpus


def test_mfu_is_labelled_with_the_peak_it_is_of():
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "64", "--tokens", "1e11", "--seq-len", "8192"]
    argv += ["--global-batch-tokens", "1179648", "--systems", "gb300-nvl72", "--dtype", "fp4", "--no-trust"]
    runner = CliRunner()
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    assert "MFU (fp4 peak)" in res.stdout
    d = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    assert d["units"]["mfu"].startswith("fraction of peak_tflops")
    row = d["designs"][0]
    assert row["dtype"] == "fp4" and row["peak_tflops"] == load_catalog().accelerator("gb300").dense_tflops["fp4"]
