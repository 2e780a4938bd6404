"""``hnplan size --gpus N`` weighs the job layouts the deadline search weighs on the units N buys."""

import json

import pytest
from typer.testing import CliRunner

from hnplan import units
from hnplan.cli import app
from hnplan.errors import InfeasiblePlan
from hnplan.planning.sizing import time_on_purchase

runner = CliRunner()
BATCH = ["--seq-len", "8192", "--global-batch-tokens", "16777216"]  # Llama 3 405B: 2,048 x 8,192 tokens


def _train(gpus: int) -> dict:
    res = runner.invoke(
        app, ["train", "--model", "llama3.1-405b", "--system", "gb200-nvl72", "--gpus", str(gpus), *BATCH, "--json"]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_9216_gb200_train_the_405b_on_64_of_each_rack():
    """Llama 3.1 405B, 15.6T tokens on 9,216 GB200 GPUs (128 NVL72 racks). All 9,216 carry the factor 9,
    which the power-of-two batch of 2,048 sequences leaves to PP9 (step 5.40 s at TP4 PP9 DP64 CP4 on
    this catalog); 64 of each rack, 8,192 GPUs, run DP2048 TP4 without a pipeline (4.71 s, the last layer's
    gradient reduce-scatter, which the optimizer step waits for, included). Hand check, from ``train``'s step
    times: 16,777,216 tokens / 4.706 s = 3.565M tokens/s, 15.6e12 / 3.565e6 = 4.375e6 s = 50.6 days before the
    goodput; on 9,216: 3.105M tokens/s, 58.2 days. The 8,192-GPU job is faster by 5.40 / 4.71 = 1.15x, so
    ``size --gpus 9216`` trains on 8,192 and buys 9,216."""
    step = {g: _train(g)["step_time_s"] for g in (8192, 9216)}
    assert step[8192] < step[9216]
    assert step[9216] / step[8192] == pytest.approx(1.15, abs=0.02)
    res = runner.invoke(
        app,
        ["size", "--model", "llama3.1-405b", "--tokens", "15.6e12", "--system", "gb200-nvl72", "--gpus", "9216"]
        + [*BATCH, "--json"],
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["results"][0]
    assert (r["gpus"], r["gpus_bought"], r["units"]) == (8192, 9216, 128)
    assert r["step_time_s"] == pytest.approx(step[8192], rel=1e-12)
    days = {g: 15.6e12 / (16_777_216 / step[g]) / units.DAY for g in step}  # before the goodput
    assert days[8192] == pytest.approx(50.6, abs=0.1) and days[9216] == pytest.approx(58.2, abs=0.1)
    weighed = {o["gpus"]: o["days"] for o in r["gpu_options"]}
    assert list(weighed) == [9216, 8192]  # the count asked for first
    assert r["days"] == pytest.approx(days[8192] / r["goodput"], rel=1e-9) == weighed[8192]
    assert weighed[9216] > weighed[8192]
    assert days[9216] / weighed[9216] < 1  # the goodput divides the 9,216-GPU option too
    assert r["gpus_choice"] == (
        f"8,192 GPUs train (64 of each 72-GPU unit), {weighed[8192]:,.1f} days; on 9,216: {weighed[9216]:,.1f} days"
    )
    table = runner.invoke(
        app,
        ["size", "--model", "llama3.1-405b", "--tokens", "15.6e12", "--system", "gb200-nvl72", "--gpus", "9216"]
        + BATCH,
    )
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())
    assert "the job runs on 8,192 GPUs of 9,216 bought (128 whole units of 72, the rest idle as spares)" in text
    assert "8,192 GPUs train (64 of each 72-GPU unit)" in text


def test_a_power_of_two_unit_or_a_count_at_the_power_of_two_weighs_one_option():
    """8-GPU servers have no other layout, and 64 GPUs of a 72-GPU rack are already its power of two:
    one option each, no choice to state; the purchase is the whole units (one rack for 64)."""
    for system, gpus, bought in (("hgx-h100-ib-ndr", 64, 64), ("gb200-nvl72", 64, 72)):
        r = time_on_purchase("llama3.1-8b", system, gpus, 1e11, 8192, 144, goodput=False)
        assert (r["gpus"], r["gpus_bought"], r["gpus_choice"]) == (gpus, bought, "")
        assert [o["gpus"] for o in r["gpu_options"]] == [gpus]


def test_no_option_with_a_plan_gives_the_reason_of_the_count_asked_for():
    # DeepSeek-V3 (671B parameters) in fp8 fits on neither 72 nor 64 GB200 GPUs: the 72-GPU reason is given.
    # (In bf16 one rack just holds it: TP8 PP9 EP8, a middle stage's 7 MoE layers at 10.1B parameters a GPU
    # and 18 bytes each, 184 GiB with activations and overheads.)
    with pytest.raises(InfeasiblePlan, match="on 72 GPUs fits in memory"):
        time_on_purchase("deepseek-v3", "gb200-nvl72", 72, 1e12, 8192, 2048, "fp8")


def test_a_job_count_two_purchases_reach_is_skipped_once():
    """Llama 3.1 70B in 30 days on GB200 NVL72 at 2,048 sequences: 2,880 GPUs are all of 40 racks and 64 of
    each of 45; no layout divides it for the batch of 2**11 sequences, and the count is listed once, not twice."""
    from hnplan.planning.sizing import size_for_deadline

    r = size_for_deadline("llama3.1-70b", "gb200-nvl72", 15e12, 30.0, 8192, 2048)
    gpus = [s["gpus"] for s in r["skipped"]]
    assert 2880 in gpus
    assert len(gpus) == len(set(gpus)) and gpus == sorted(gpus)


def test_the_verdict_writes_one_goodput_where_the_designs_agree_at_its_precision():
    # two designs at 99.62 % and 99.58 % goodput printed "goodput 99.6%-99.6%"; both round to 99.6 % at one decimal
    import pandas as pd

    from hnplan.planning.sizing import sizing_verdict

    row = {"status": "ok", "gpus": 1024, "gpus_bought": 1024, "racks": 32, "facility_power_mw": 1.8}
    row |= {"capex_usd": 4e7, "days": 20.0, "within_budget": None, "goodput_mode": "on"}
    df = pd.DataFrame([row | {"system": "a", "goodput": 0.9962}, row | {"system": "b", "goodput": 0.9958}])
    assert "stalls (goodput 99.6%)." in sizing_verdict(df)
    df.loc[1, "goodput"] = 0.981
    assert "stalls (goodput 98.1%-99.6%)." in sizing_verdict(df)
    assert units.format_span(1.2, 1.2049, ".2f", "x") == "1.20x"  # the trust note's speed-ratio span, same writer


def test_sizing_verdict_names_a_power_bound_rack_count():
    """128 H100 in 8-GPU servers: 6 racks by the facility's 40 kW a rack (3 servers of 10.2 kW) against 4 by
    space (tests/test_rack_constraint.py); the sentence says so, and says nothing when space sets the count."""
    import pandas as pd

    from hnplan.planning.sizing import sizing_verdict

    row = {"status": "ok", "gpus": 128, "gpus_bought": 128, "racks": 6, "facility_power_mw": 0.2}
    row |= {"capex_usd": 5e6, "days": 20.0, "within_budget": None, "goodput_mode": "off", "system": "h"}
    power = row | {"racks_bound_by": "power: 40 kW a rack, 3 servers of 10.2 kW"}
    assert "in 6 racks (set by power: 40 kW a rack, 3 servers of 10.2 kW), " in sizing_verdict(pd.DataFrame([power]))
    space = row | {"racks": 4, "racks_bound_by": "space: 32 GPUs a rack"}
    assert "in 4 racks, " in sizing_verdict(pd.DataFrame([space]))


def test_the_deadline_search_buys_the_fewest_racks_that_hold_its_job():
    """Llama 3.1 405B, 15T tokens within 60 days on GB200 NVL72: the search's job is 8,192 GPUs, first found as 64 of
    each of 128 racks (9,216 bought, 50.5 days); the same 8,192 GPUs packed into ceil(8,192 / 72) = 114 racks (8,208
    bought) keep the deadline at 52.1 days (fewer idle GPUs as hot spares), as ``size --gpus 8192`` places them: the
    search buys those 114 racks (14 racks and about $43M less at $3.1M a rack)."""
    from hnplan.planning.sizing_search import size_for_deadline

    out = size_for_deadline("llama3.1-405b", "gb200-nvl72", 15e12, 60.0, 8192, 2048)
    assert (out["gpus"], out["units"], out["gpus_bought"]) == (8192, 114, 8208)
    assert 50.5 < out["days"] <= 60.0
    assert "8,192 GPUs (of the 8,208 in the 114 72-GPU units bought)" in out["gpus_choice"]
    res = runner.invoke(app, ["size", "--model", "llama3.1-405b", "--tokens", "15e12", "--gpus", "8192"]
                        + ["--systems", "gb200-nvl72", *BATCH, "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (given,) = json.loads(res.stdout)["results"]
    assert (given["gpus_bought"], given["days"]) == (8208, pytest.approx(out["days"], rel=1e-9))


def test_the_packing_keeps_scale_up_groups_whole_and_finds_the_fewest_units_by_bisection():
    """Llama 3.1 70B, 15T tokens in 10 days on NVL72: 8,192 GPUs at TP 4 need 114 racks packed, which miss the
    deadline (10.1 days: fewer idle GPUs as spares), and 128 at 64 a rack keep it; the fewest between that keep
    it are 121 (9.82 days), found by bisection. A job whose EP-64 groups cannot share a 72-GPU rack is not packed
    (packed_units: 1,536 GPUs at EP 64 need 24 racks, as 64 a rack)."""
    from hnplan.planning.sizing_search import packed_units, size_for_deadline

    out = size_for_deadline("llama3.1-70b", "gb200-nvl72", 15e12, 10.0, 8192, 2048)
    assert (out["gpus"], out["units"]) == (8192, 121) and out["days"] <= 10.0
    assert packed_units(1536, 72, {"tp": 1, "cp": 1, "ep": 64, "etp": 1}) == 24
    assert packed_units(8192, 72, {"tp": 4, "cp": 1, "ep": 1}) == 114
    assert packed_units(100, 8, {"tp": 16}) == 13  # a group wider than a unit spans units anyway


def test_a_count_whose_scale_up_groups_cannot_tile_its_units_buys_the_units_that_hold_them():
    """DeepSeek-V3 FP8 on 1,536 GB200 GPUs plans EP 64: 24 groups of 64, one a 72-GPU rack (two cannot share one), so
    the 22 racks that hold 1,536 GPUs cannot hold them; compare and size --gpus buy 24 racks (1,728 GPUs, the
    idle ones spares) where they bought 22."""
    from hnplan.planning.compare import compare_design_rows

    (row,) = compare_design_rows("deepseek-v3", ["gb200-nvl72"], 1536, 15e12, 4096, 4096, "fp8")
    assert (row["gpus"], row["ep"], row["gpus_bought"], row["racks"]) == (1536, 64, 1728, 24)
    out = time_on_purchase("deepseek-v3", "gb200-nvl72", 1536, 15e12, 4096, 4096, "fp8")
    assert (out["gpus"], out["gpus_bought"], out["units"]) == (1536, 1728, 24)
    assert out["gpus_choice"].endswith("bought as 24 whole units, which hold its scale-up groups whole (22 do not)")
