"""The GB300's sustained clock: the B300's power-limited fraction carried from 1,100 W to 1,400 W on one die
(hnplan.compute.clocks.power_scaled_fraction; docs/compute.md, "Blackwell Ultra at 1,400 W")."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog import load_catalog
from hnplan.catalog.runs import training_runs
from hnplan.compute.clocks import power_scaled_fraction
from hnplan.planning.validation import predict_run

CAT = load_catalog()
# flashinfer-ai/flashinfer pull request 2899, a B200 at 1,000 W: 1,450 -> 1,237 TFLOP/s while the SM clock
# falls 1,965 -> about 1,580 MHz, so 0.750 of the throughput follows the clock
SHARE = (1 - 1237 / 1450) / (1 - 1580 / 1965)
IDLE_W = 200.0  # B300 SXM6 AC: idle 182-197 W, NVML minimum limit 200 W (ademeure/QuickRunCUDA b300_clean)


def test_share_of_the_b200_measurement():
    assert SHARE == pytest.approx(0.750, abs=5e-4)


def test_gb300_fraction_is_the_b300_one_at_1400_w():
    b300, gb300 = CAT.accelerator("b300"), CAT.accelerator("gb300")
    assert (b300.tdp_w, gb300.tdp_w) == (1100, 1400)
    # by hand: the B300's clock at its limit 1 - 0.147 / 0.750 = 0.804 of boost; x (1,200 / 900)^(1/3) = 1.101
    # -> 0.885; the throughput 1 - 0.750 x (1 - 0.885) = 0.914
    clock = (1 - (1 - 1237 / 1450) / SHARE) * (1200 / 900) ** (1 / 3)
    assert clock == pytest.approx(0.885, abs=5e-4)
    assert 1 - SHARE * (1 - clock) == pytest.approx(0.914, abs=5e-4)
    law = power_scaled_fraction(b300.sustained_compute_fraction, SHARE, b300.tdp_w, gb300.tdp_w, IDLE_W)
    assert gb300.sustained_compute_fraction == pytest.approx(law, abs=5e-4)
    assert "power_scaled_fraction" in gb300.assumptions["sustained_compute_fraction"]


def test_cube_law_against_the_b300_power_cap():
    # B300 SXM6 AC, random-data FP8 cuBLAS at M = N = K = 8,192: 3,087 TFLOP/s capped at 600 W, 3,983 at its
    # 1,100 W default (ademeure/QuickRunCUDA b300_clean/B300_TRUE_REFERENCE.md): 0.775 against the law's 0.763
    assert 3087 / 3983 == pytest.approx(0.775, abs=5e-4)
    assert ((600 - IDLE_W) / (1100 - IDLE_W)) ** (1 / 3) == pytest.approx(0.763, abs=5e-4)


def test_gb200_is_not_scaled():
    # another die, and the same-plan Megatron-Bridge 25.11 Llama 3 8B GB200 / B200 ratio (1.03x) leaves no room
    assert CAT.accelerator("gb200").sustained_compute_fraction == CAT.accelerator("b200").sustained_compute_fraction


def test_same_recipe_b300_and_gb300_steps_are_not_overstated():
    """MLPerf v5.1 Llama 3.1 8B NVFP4, one layout and recipe (TP 1, micro-batch 2, FP8 attention, 16 sequences
    on 8 GPUs): NVIDIA's GB300 0.3466 s, Nebius's B300 0.394 s (Nebius/benchmarks/llama31_8b/configs/nebius_b300_n1),
    1.137x. Not fitted: the law puts the GB300 1.10x ahead (1.08x at the B300's fraction; 1.12x while the GB300
    entry streamed its HBM3e 3.9 % faster than the B300 on the same memory), short of the measured ratio, so a
    GB300 against B300 comparison stays on the conservative side."""
    gb300 = next(r for r in training_runs() if r.id == "mlperf-v51-nvidia-gb300-llama31-8b-8")
    b300 = gb300.model_copy(update={"id": "nebius-b300", "system": "dgx-b300", "published": 0.394})
    t_gb300 = float(predict_run(gb300, CAT)["step_time_s"])
    t_b300 = float(predict_run(b300, CAT)["step_time_s"])
    assert 0.394 / 0.3466 == pytest.approx(1.137, abs=5e-4)
    assert t_b300 / t_gb300 == pytest.approx(1.10, abs=0.01)
    assert t_b300 / t_gb300 < 0.394 / 0.3466


def test_same_limit_and_bad_input():
    assert power_scaled_fraction(0.853, SHARE, 1100.0, 1100.0, IDLE_W) == 0.853
    with pytest.raises(ValueError, match="idle floor"):
        power_scaled_fraction(0.853, SHARE, 1100.0, 150.0, IDLE_W)
    with pytest.raises(ValueError, match="must lie in"):
        power_scaled_fraction(1.2, SHARE, 1100.0, 1400.0, IDLE_W)


@settings(max_examples=60, deadline=None)
@given(
    f=st.floats(0.5, 1.0),
    p1=st.floats(300.0, 2000.0),
    p2=st.floats(300.0, 2000.0),
)
def test_more_power_never_slows_and_never_passes_boost(f, p1, p2):
    lo, hi = sorted((p1, p2))
    a = power_scaled_fraction(f, SHARE, 1000.0, lo, IDLE_W)
    b = power_scaled_fraction(f, SHARE, 1000.0, hi, IDLE_W)
    assert a <= b + 1e-12 and b <= 1.0
