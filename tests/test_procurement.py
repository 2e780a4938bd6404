"""Procurement what-ifs: tornado, seeded Monte Carlo, the MILP mix (caps and binding constraint), sizing."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan import units
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.planning.procurement import (
    best_mix,
    evaluate,
    mc_bands,
    monte_carlo,
    solve_mix,
    tornado,
    whatif_case,
)
from hnplan.planning.sizing import _next_smooth, size_design, size_designs, size_for_deadline, size_table
from hnplan.planning.time_to_train import time_to_train


@pytest.fixture(scope="module")
def case(cat):
    return whatif_case("llama3.1-8b", "hgx-h100-ib-ndr", 64, 1e11, 4096, 256, catalog=cat)


def test_evaluate_time_to_train_is_tokens_over_goodput_throughput(cat, case):
    r = evaluate(case, cat)
    assert r["days_to_train"] == pytest.approx(1e11 / (case.tokens_per_s * r["goodput"]) / units.DAY)
    assert r["run_usd"] == pytest.approx(r["usd_per_gpu_hour"] * 64 * r["days_to_train"] * 24)
    with pytest.raises(InputError, match="unknown what-if"):
        evaluate(case, cat, price=1)


@pytest.mark.parametrize(
    "inputs,needle",
    [
        # a negative price gave a TCO below the hardware's and a lower $ per GPU-hour, with no error
        ({"electricity_usd_per_kwh": -0.1}, "electricity_usd_per_kwh must be >= 0; got -0.1"),
        ({"years": 0.0}, "years must be > 0; got 0"),
        ({"hardware_price_factor": float("nan")}, "hardware_price_factor must be a finite number"),
    ],
)
def test_evaluate_refuses_inputs_outside_their_range(cat, case, inputs, needle):
    with pytest.raises(InputError, match=needle):
        evaluate(case, cat, **inputs)


def test_tornado_ranges_and_order(cat, case):
    df = tornado(case, "tco_usd", cat)
    assert list(df["swing"]) == sorted(df["swing"], reverse=True)
    row = df.set_index("input").loc["electricity_usd_per_kwh"]
    assert row["metric_high"] > row["metric_low"]  # dearer power never lowers TCO
    assert set(df["input"]) == set(cat.uncertainties)
    days = tornado(case, "days_to_train", cat).set_index("input")
    assert days.loc["rate_factor", "metric_high"] > days.loc["rate_factor", "metric_low"]
    assert days.loc["electricity_usd_per_kwh", "swing"] == 0  # prices do not change time


def test_monte_carlo_is_reproducible_with_a_seed(cat, case):
    a, b, c = (
        monte_carlo(case, 40, seed=7, catalog=cat),
        monte_carlo(case, 40, seed=7, catalog=cat),
        monte_carlo(case, 40, seed=8, catalog=cat),
    )
    assert a.equals(b) and not a.equals(c)
    u = cat.uncertainties["pue"]
    assert a["pue"].between(u.low, u.high).all()
    bands = mc_bands(a).set_index("metric")
    assert (bands["p5"] <= bands["p50"]).all() and (bands["p50"] <= bands["p95"]).all()


def test_mix_hand_case_names_the_binding_constraint():
    rate = np.array([[10.0, 30.0]])  # tokens/s per unit of two designs
    capex, power = np.array([1.0, 2.0]), np.array([1.0, 5.0])
    # demand 300: 10 units of design 1 (capex 20, power 50) or 30 of design 0 (capex 30, power 30)
    x, served, binding = solve_mix(rate, [300.0], capex, power, budget_usd=100, power_cap_w=100)
    assert served[0] == pytest.approx(1.0) and binding == "none"
    x, served, binding = solve_mix(rate, [300.0], capex, power, budget_usd=10, power_cap_w=100)
    assert binding == "budget" and served[0] < 1 and (x.sum(0) * capex).sum() <= 10
    x, served, binding = solve_mix(rate, [300.0], capex, power, budget_usd=100, power_cap_w=12)
    assert binding == "power cap" and (x.sum(0) * power).sum() <= 12
    assert served[0] == pytest.approx(120 / 300)  # 12 units of design 0 beat 2 of design 1 per watt


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), budget=st.floats(1.0, 500.0), cap=st.floats(1.0, 500.0))
def test_mix_never_breaks_a_cap(seed, budget, cap):
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0, 50, size=(2, 3))
    capex, power = rng.uniform(1, 20, 3), rng.uniform(1, 20, 3)
    x, served, binding = solve_mix(rate, rng.uniform(50, 400, 2), capex, power, budget, cap)
    assert (x >= 0).all()
    assert (x.sum(0) * capex).sum() <= budget * (1 + 1e-9)
    assert (x.sum(0) * power).sum() <= cap * (1 + 1e-9)
    assert binding in ("none", "budget", "power cap", "budget and power cap", "integrality")
    assert ((served >= 0) & (served <= 1)).all()


def test_best_mix_on_catalog_designs(cat):
    wl = [dict(model="llama3.1-8b", tokens=1e11, deadline_days=2, seq_len=4096, global_batch_seqs=256, ref_gpus=72)]
    r = best_mix(wl, ["hgx-h100-ib-ndr", "gb200-nvl72"], budget_usd=1e9, power_cap_w=1e6, catalog=cat)
    assert r.facility_power_w <= 1e6 and r.capex_usd <= 1e9
    tight = best_mix(wl, ["hgx-h100-ib-ndr", "gb200-nvl72"], budget_usd=1e9, power_cap_w=30e3, catalog=cat)
    assert tight.binding == "power cap" and tight.facility_power_w <= 30e3


def test_sizing_meets_deadline_with_the_smallest_smooth_count(cat):
    row = size_design("llama3.1-8b", "hgx-h100-ib-ndr", 1e11, 2.0, 4096, 256, catalog=cat, budget_usd=1e7)
    assert row["days"] <= 2.0 and row["gpus"] == 8 * row["units"]
    smaller = [n for n in range(1, row["units"]) if _next_smooth(n) == n]
    if smaller:
        m, s = cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr")
        try:
            days = time_to_train(m, s, 8 * smaller[-1], 1e11, 4096, 256, "bf16", cat)["days"]
        except InfeasiblePlan:
            days = np.inf
        assert days > 2.0
    assert row["within_budget"] == (row["capex_usd"] <= 1e7)


def test_sizing_plans_with_the_stack_given(cat):
    """``size_design(s)`` take the ``stack`` that ``hnplan size --stack`` (``size_table``) takes: the eager
    PyTorch stack (eager norms and rotary, no TP overlap) is slower per GPU, so the same deadline (1.6 days for
    1e11 tokens of Llama 3.1 8B) needs more servers than the planner's default stack."""
    args = ("llama3.1-8b", "hgx-h100-ib-ndr", 1e11, 1.6, 4096, 256)
    default = size_design(*args, catalog=cat)
    eager = size_design(*args, catalog=cat, stack="pytorch-eager")
    assert eager["gpus"] > default["gpus"] and eager["days"] <= 1.6
    cli = size_table(args[0], [args[1]], args[2], 4096, 256, deadline_days=1.6, catalog=cat, stack="pytorch-eager")
    table = size_designs(args[0], [args[1]], *args[2:], catalog=cat, stack="pytorch-eager")
    for other in (cli.iloc[0], table.iloc[0]):
        assert (other["gpus"], other["days"]) == (eager["gpus"], eager["days"])


def test_size_designs_keeps_infeasible_rows(cat):
    df = size_designs("llama3.1-8b", ["hgx-h100-ib-ndr", "gb200-nvl72"], 1e11, 1e-6, 4096, 256, catalog=cat)
    assert list(df["system"]) == ["hgx-h100-ib-ndr", "gb200-nvl72"]
    assert df["status"].str.startswith("infeasible").all()


def test_sizing_reports_run_energy(cat):
    # 288 sequences: a data-parallel degree of 9 takes the factor 9 of a 72-GPU rack
    row = size_design("llama3.1-8b", "gb200-nvl72", 1e11, 2.0, 4096, 288, catalog=cat)
    from hnplan.power import design_power

    pw = design_power(cat.design("gb200-nvl72"), row["gpus"])
    mwh = pw.facility_w * cat.facility.training_power_fraction.value * row["days"] * 24 / 1e6
    assert row["energy_mwh"] == pytest.approx(mwh)
    assert row["co2_t"] == pytest.approx(mwh * 1e3 * cat.facility.grid_gco2_per_kwh.value / 1e6)


def test_simulated_utilisation_is_fixed_not_sampled(cat, case):
    """With the utilisation from the cluster simulation, the what-if holds it at that value: the
    tornado leaves it out and every Monte Carlo sample carries it."""
    from hnplan.cluster.utilisation import simulated_utilisation

    sim = whatif_case("llama3.1-8b", "hgx-h100-ib-ndr", 64, 1e11, 4096, 256, utilisation="simulated", catalog=cat)
    u = simulated_utilisation("hgx-h100-ib-ndr", 64, catalog=cat)["utilisation"]
    assert sim.utilisation == pytest.approx(u) and "simulated" in sim.utilisation_source
    assert sim.tokens_per_s == case.tokens_per_s
    assert "utilisation" not in set(tornado(sim, "tco_usd", cat)["input"])
    mc = monte_carlo(sim, 10, seed=1, catalog=cat)
    assert (mc["utilisation"] == u).all()
    # a given number is kept too; anything else is an input error
    assert (
        whatif_case("llama3.1-8b", "hgx-h100-ib-ndr", 64, 1e11, 4096, 256, utilisation=0.6, catalog=cat).utilisation
        == 0.6
    )
    with pytest.raises(InputError, match="utilisation"):
        whatif_case("llama3.1-8b", "hgx-h100-ib-ndr", 64, 1e11, 4096, 256, utilisation="high", catalog=cat)


def test_deadline_search_tries_counts_of_seven_or_thirteen_times_a_power_of_two(cat):
    """DeepSeek-V3 on HGX H100 in 90 days: 3,072 GPUs miss by a hair (90.0 days), 3,200-4,000 GPUs have no layout
    (a batch of 2,048 sequences takes no factor 3 or 5 into DP); the walk over 2-3-5-smooth counts jumped to 4,096
    (56.3 days). 3,328 = 13 x 256 GPUs hold TP1 PP13 with DP a power of two and train in 79.4 days: the smallest
    count of those tried between the miss and 4,096."""
    from hnplan.planning.sizing_search import _refine_counts

    r = size_for_deadline("deepseek-v3", "hgx-h100-ib-ndr", 14.8e12, 90.0, 8192, 2048, catalog=cat)
    assert r["gpus"] == 3328 and r["units"] == 416
    assert 75.0 < r["days"] <= 90.0
    assert r["parallel"]["pp"] % 13 == 0  # the factor 13 goes to the pipeline, DP stays a power of two
    assert 416 in _refine_counts(384, 512) and 448 in _refine_counts(384, 512)
    assert 392 not in _refine_counts(384, 512)  # 49 x 8: an odd part above 15, not scanned


def test_whatif_summary_says_when_no_cap_binds():
    """The what-if report read "binding constraint: **none**" where every workload was served within both caps:
    it says so in words, and names a binding cap as before."""
    import pandas as pd

    from hnplan.planning.procurement import MixResult, whatif_summary

    units_df = pd.DataFrame({"gb200-nvl72": [4]}, index=["llama3.1-8b"])
    bands = pd.DataFrame(columns=["metric", "p5", "p50", "p95"])
    tornado = pd.DataFrame(columns=["name", "low", "high", "unit", "metric_low", "metric_high", "swing"])
    served = pd.Series({"llama3.1-8b": 1.0})
    free = MixResult(units_df, served, 1.2e7, 5.0e5, 1e9, 1e6, "none")
    text = whatif_summary(tornado, bands, free)
    assert "neither the budget nor the power cap binds (every workload is served in full within both)" in text
    capped = MixResult(units_df, pd.Series({"llama3.1-8b": 0.5}), 1.2e7, 5.0e5, 1.2e7, 1e6, "budget")
    assert "binding constraint: **budget**" in whatif_summary(tornado, bands, capped)
