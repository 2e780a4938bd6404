"""The GEMM law on Blackwell: the B200's shape parameters are those fitted to the OpenXLA sm_100 sweep, the GB200
carries them, the fit meets its bounds on the bf16 and FP8 rows, and the same method checks out on Hopper."""

import numpy as np
import pytest

from hnplan.compute.gemm import gemm_time_s
from hnplan.validation.gemm_fit import (
    SHAPE_PARAMS,
    fit_gemm_law,
    fit_xla_sweep,
    predict_table,
    with_params,
    xla_table,
    xla_tool_offset_s,
)

SHAPE_FIELDS = (*SHAPE_PARAMS, "gemm_tile_mnk", "gemm_row_granularity", "gemm_splitk_min_k", "host_dispatch_us")


@pytest.fixture(scope="module")
def fit():
    return fit_xla_sweep()


def test_the_catalog_holds_the_blackwell_fit(cat, fit):
    b200, p = cat.accelerator("b200"), fit["params"]
    assert tuple(b200.gemm_tile_mnk) == fit["tile"] == (64, 128, 64)
    assert b200.gemm_k_overhead == pytest.approx(p["gemm_k_overhead"], abs=0.5)
    assert b200.kernel_overhead_us == pytest.approx(p["kernel_overhead_us"], abs=0.02)
    assert b200.gemm_overlap_exponent == pytest.approx(p["gemm_overlap_exponent"], abs=0.02)
    assert b200.gemm_splitk_us == pytest.approx(p["gemm_splitk_us"], abs=0.02)
    assert b200.gemm_wave_weight == pytest.approx(p["gemm_wave_weight"], abs=0.01)
    # the host floor is the framework's, carried from the H200 sweep; the ceilings are held, not fitted
    h200 = cat.accelerator("h200-sxm")
    assert b200.host_dispatch_us == h200.host_dispatch_us
    ratio = h200.gemm_efficiency["bf16"] / h200.matmul_efficiency["bf16"]
    for dt in ("bf16", "fp8"):
        assert b200.gemm_efficiency[dt] == pytest.approx(b200.matmul_efficiency[dt] * ratio, abs=0.0015)


def test_gb200_carries_the_b200_shape_parameters(cat):
    b200, gb200 = cat.accelerator("b200"), cat.accelerator("gb200")
    for f in SHAPE_FIELDS:  # same die: tiles, K elements and microseconds do not change with power
        if f == "host_dispatch_us":  # a host's, not the die's: Grace dispatches 2.75x slower than the x86 host
            grace = cat.system("gb200-nvl72").host_dispatch_factor
            assert gb200.host_dispatch_us == pytest.approx(b200.host_dispatch_us * grace, abs=0.05)
            continue
        assert getattr(gb200, f) == getattr(b200, f), f
    # the Grace-paired part reports 4 SMs more (flashinfer#5716's docs: GB200 152, B200 148)
    assert (b200.compute_units, gb200.compute_units) == (148, 152)


def test_the_fit_meets_its_bounds_on_the_sm100_sweep(fit):
    df = fit["table"]
    assert len(df) == 280  # 125 shapes at batch 1 and 15 at batch 4, bf16 and FP8 e4m3 x e4m3
    assert fit["mape"] <= 0.065
    by_dtype = df.groupby("dtype")["error"].agg(lambda s: s.abs().mean())
    assert by_dtype["bf16"] <= 0.06 and by_dtype["fp8"] <= 0.07
    assert df["error"].abs().max() < 0.30
    # 64 x 128 beats the larger tcgen05 tiles, as it did on Hopper
    assert min(fit["by_tile"], key=fit["by_tile"].get) == (64, 128, 64)


def test_the_sweep_cannot_pin_the_ceiling(fit):
    # fitted freely the ceilings come out 0.75 / 0.76 of the peak with the same MAPE as the held 0.712 / 0.700:
    # the table (largest GEMM 4 x 4096^3) does not decide the rate of sustained training shapes
    free = fit_xla_sweep(names=(*SHAPE_PARAMS, "gemm_efficiency.bf16", "gemm_efficiency.fp8"), tiles=((64, 128, 64),))
    assert abs(free["mape"] - fit["mape"]) < 0.005
    assert 0.72 < free["params"]["gemm_efficiency.bf16"] < 0.78


def test_the_sweeps_own_fixed_cost_is_calibrated_on_hopper(cat, fit):
    # the Hopper law as fitted to the H200 PyTorch sweep misses the sm_90 bf16 rows by 17 % on average, mostly on
    # small shapes; one constant per GEMM (XLA's kernels and CUPTI timing) takes that to under 9 %
    off = xla_tool_offset_s(cat)
    assert off == pytest.approx(1.72e-6, abs=0.02e-6) and fit["offset_s"] == off
    tab = xla_table(cat, "sm_90", "bf16xbf16->bf16")
    pred = predict_table(cat.accelerator("h100-sxm"), tab)
    assert np.abs(pred / tab["time_s"] - 1).mean() > 0.15
    assert np.abs((pred + off) / tab["time_s"] - 1).mean() < 0.09


def test_the_method_checks_out_on_hopper(cat):
    # the same fit on the sm_90 sweep, with the H200 ceiling held, predicts the independent H200 PyTorch sweep
    # (1 to 16,384 tokens, host floor included) almost as well as that sweep's own fit
    hop = fit_xla_sweep(arch="sm_90", accelerator="h100-sxm", dtype_keys=("bf16xbf16->bf16",), tiles=((64, 128, 64),))
    assert hop["mape"] <= 0.075
    own = fit_gemm_law()
    ref = cat.reference("h200_gemm_bf16")
    h200 = with_params(cat.accelerator("h200-sxm"), hop["params"])
    err = predict_table(h200, ref, eager=True) / ref["time_s"] - 1.0
    assert own["mape"] < 0.06 and float(np.abs(err).mean()) <= 0.07


def test_fp8_on_hopper_in_the_sweep_is_unphysical(cat):
    # the sm_90 FP8 rows run faster than the dense FP8 peak of any Hopper GPU (1,979 TFLOP/s): reported only
    tab = xla_table(cat, "sm_90", "f8e4m3fnxf8e4m3fn->bf16")
    rate = 2 * tab["groups"] * tab["m_tokens"] * tab["n"] * tab["k"] / tab["time_s"] / 1e12
    assert rate.max() > 2500 > cat.accelerator("h100-sxm").dense_tflops["fp8"]


def test_a_hand_checked_row(cat):
    # bf16 4096 x 4096 x 4096 on the B200 (sm_100 sweep: 1,416.9 TFLOP/s = 97.0 us)
    b200 = cat.accelerator("b200")
    eta, k0, p, w = b200.gemm_efficiency["bf16"], b200.gemm_k_overhead, b200.gemm_overlap_exponent, 0.0
    tiles = (4096 / 64) * (4096 / 128)  # 2,048 tiles of 64 x 128, no split-K (more tiles than the 148 SMs)
    waves = tiles / 148 + b200.gemm_wave_weight * (np.ceil(tiles / 148) - tiles / 148) + w
    t_c = waves * 2 * 64 * 128 * (4096 + k0) / (2250e12 * eta / 148)
    t_m = (2 * 4096 * 4096 * 2 + 2 * 4096 * 4096) / (7.7e12 * b200.hbm_efficiency)
    t = (t_c**p + t_m**p) ** (1 / p) + b200.kernel_overhead_us * 1e-6
    assert gemm_time_s(b200, "bf16", 4096, 4096, 4096) == pytest.approx(t, rel=1e-9)
    assert t == pytest.approx(93.0e-6, rel=0.01)  # 89.3 us of tiles and streaming + 3.67 us fixed
    measured = 2 * 4096**3 / 1416.867e12  # 97.0 us, of which the sweep's own 1.72 us per GEMM
    assert (t + 1.72e-6) / measured - 1 == pytest.approx(-0.024, abs=0.01)


def test_with_params_sets_one_dtype_ceiling(cat):
    b200 = cat.accelerator("b200")
    a = with_params(b200, {"gemm_efficiency.fp8": 0.5, "gemm_k_overhead": 1.0})
    assert a.gemm_efficiency["fp8"] == 0.5 and a.gemm_efficiency["bf16"] == b200.gemm_efficiency["bf16"]
    assert a.gemm_k_overhead == 1.0
