"""Kernels of a training step at the clock the board's power limit sustains (hnplan.compute.clocks)."""

import pytest

from hnplan.catalog import load_catalog
from hnplan.compute.clocks import sustained_accelerator
from hnplan.compute.gemm import gemm_compute_s
from hnplan.planning.training import make_job, search_plans

CAT = load_catalog()


def test_b200_fraction_is_the_flashinfer_measurement():
    # flashinfer-ai/flashinfer pull request 2899: FA4 bf16 forward back to back on a B200,
    # 1,450 TFLOP/s (iterations 10-19) -> 1,237 TFLOP/s fully throttled (iterations 70-79)
    assert CAT.accelerator("b200").sustained_compute_fraction == pytest.approx(1237 / 1450, abs=5e-4)


def test_gb200_carries_the_b200_fraction():
    # same die; no GB200 measurement: the B200's 0.853 (the larger 0.891 of a cube-root power scaling would
    # predict Megatron-Bridge's same-plan Llama 3 8B GB200 / B200 ratio at 1.10x against 1.03x measured)
    share = (1 - 1237 / 1450) / (1 - 1580 / 1965)  # the clock's fall reaching the throughput on the B200
    cube_root = 1 - share * (1 - 1580 * 1.2 ** (1 / 3) / 1965)
    assert cube_root == pytest.approx(0.891, abs=5e-4)  # the alternative the catalog's assumption weighs
    assert CAT.accelerator("gb200").sustained_compute_fraction == CAT.accelerator("b200").sustained_compute_fraction


def test_hopper_fraction_is_the_hot_mamf_at_700_w_over_900_w():
    # stas00/ml-engineering MAMF table (mamf-finder.py v2: 30 s warm-up, back-to-back random matmuls): bf16
    # H100 SXM at 700 W 794.5 TFLOP/s, GH200 (same GH100 die, 132 SMs) at 900 W 828.6 TFLOP/s
    assert 794.5 / 828.6 == pytest.approx(0.959, abs=5e-4)
    # cross-check at the same 700 W: the short-run H200 sweep (1,980 MHz) reaches 819.1 TFLOP/s on
    # 2048 x 2304 x 16384, the class of the H100's best MAMF shape (2048 x 2048 x 13312): 794.5 / 819.1 = 0.970
    row = CAT.reference("h200_gemm_bf16").query("m_tokens == 2048 and n == 2304 and k == 16384").iloc[0]
    assert row.tflops == pytest.approx(819.1) and 794.5 / row.tflops == pytest.approx(0.970, abs=5e-4)
    for acc in ("h100-sxm", "h200-sxm", "h800-sxm"):  # one GH100 die, one 700 W limit
        assert CAT.accelerator(acc).sustained_compute_fraction == 0.959


def test_hopper_training_job_runs_kernels_hot_and_gemm_keeps_boost():
    job = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 8192, 128, "fp8", CAT, stack="megatron-bridge-2511")
    # the FP8 ceiling already carries FP8's own power draw (MAMF fp8 / bf16 at 700 W, 1.77x): one fraction
    assert job.kernel_acc.dense_tflops["fp8"] == pytest.approx(1978.9 * 0.959)
    assert job.kernel_acc.gemm_efficiency["fp8"] == 0.651 and job.acc.dense_tflops["fp8"] == 1978.9
    assert job.provenance["kernel_clock"] == (
        "accelerator h100-sxm: 0.959 of the short-run compute rate at its power-limited clock (measured)"
    )


def test_sustained_accelerator_scales_the_peaks_only():
    b200 = CAT.accelerator("b200")
    s = sustained_accelerator(b200)
    assert s.dense_tflops["bf16"] == pytest.approx(2250.0 * 0.853)
    assert s.dense_tflops["fp8"] == pytest.approx(4500.0 * 0.853)
    assert s.hbm_bw_TBps == b200.hbm_bw_TBps and s.gemm_efficiency == b200.gemm_efficiency
    a100 = CAT.accelerator("a100-sxm-80gb")  # no sustained measurement: the short-run rates
    assert a100.sustained_compute_fraction is None and sustained_accelerator(a100) is a100


def test_compute_bound_gemm_slows_by_the_fraction():
    # a large GEMM is compute-bound: its compute term is flops / (peak x efficiency), so 1 / 0.853 longer
    b200 = CAT.accelerator("b200")
    t_boost, _ = gemm_compute_s(b200, "fp8", 16384, 16384, 16384)
    t_sust, _ = gemm_compute_s(sustained_accelerator(b200), "fp8", 16384, 16384, 16384)
    assert float(t_sust / t_boost) == pytest.approx(1 / 0.853, rel=1e-9)


def test_training_job_times_kernels_sustained_and_keeps_the_datasheet_peak_for_mfu():
    job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 128, "fp8", CAT, stack="megatron-bridge-2511")
    assert job.kernel_acc.dense_tflops["fp8"] == pytest.approx(4500.0 * 0.853)
    assert job.acc.dense_tflops["fp8"] == 4500.0
    assert job.provenance["kernel_clock"] == (
        "accelerator b200: 0.853 of the short-run compute rate at its power-limited clock (measured)"
    )
    df = search_plans(
        "llama3.1-8b",
        "dgx-b200-ib-ndr",
        8,
        8192,
        128,
        "fp8",
        fixed=dict(tp=1, pp=1, dp=8, cp=1, ep=1, microbatch_size=2, zero_stage=1),
        catalog=CAT,
        stack="megatron-bridge-2511",
    )
    b = df.iloc[0]
    # MFU = model FLOPs per token x tokens/s / (GPUs x the datasheet fp8 peak, 4,500 TFLOP/s)
    assert b.mfu == pytest.approx(b.model_flops_per_token * b.tokens_per_s / (8 * 4500e12), rel=1e-9)


def test_stack_measured_in_training_keeps_its_gemm_rate_and_attention_slows():
    # a stack's GEMM efficiency solved from in-training timings (as megatron-lm-2021's on A100) holds the
    # sustained clock already: those dtypes' GEMMs keep it (no fraction on top); attention, calibrated in short
    # kernel runs (FlashAttention-4's paper on Blackwell), still takes the fraction: once per kernel family
    st = CAT.stack("megatron-bridge-2511")
    st = st.model_copy(update={"matmul_efficiency": {"b200": {"fp8": 0.6}}})
    job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 128, "fp8", CAT, stack=st)
    k = job.kernel_acc
    assert job.acc.dense_tflops["fp8"] == 4500.0
    # fp8 GEMMs at the measured 0.6 x 4,500 = 2,700 TFLOP/s ceiling, as without the fraction
    assert k.dense_tflops["fp8"] * k.gemm_efficiency["fp8"] == pytest.approx(0.6 * 4500.0)
    t_held, _ = gemm_compute_s(k, "fp8", 16384, 16384, 16384)
    t_meas, _ = gemm_compute_s(job.acc, "fp8", 16384, 16384, 16384)
    assert float(t_held / t_meas) == pytest.approx(1.0, rel=1e-9)
    # bf16 GEMMs (not measured by the stack) and attention (a bf16-peak law) at 0.853 of the short-run rate
    assert k.dense_tflops["bf16"] * k.gemm_efficiency["bf16"] == pytest.approx(2250.0 * 0.712 * 0.853)
    assert k.attention_efficiency == job.acc.attention_efficiency
    assert job.provenance["kernel_clock"] == (
        "accelerator b200: 0.853 of the short-run compute rate at its power-limited clock (measured); "
        "fp8 GEMMs at the stack's in-training efficiency (its clock included)"
    )


def test_a100_stack_in_training_efficiency_is_unchanged():
    # megatron-lm-2021: bf16 0.736 measured in training on A100, which has no sustained fraction
    job = make_job("gpt3-175b", "dgx-a100-hdr", 1024, 2048, 1536, "bf16", CAT, stack="megatron-lm-2021")
    assert job.kernel_acc is job.acc and job.acc.gemm_efficiency["bf16"] == 0.736
    assert job.provenance["kernel_clock"].endswith(
        "bf16/fp16 GEMMs at the stack's in-training efficiency (its clock included)"
    )


def test_hopper_fp8_gemm_ceiling_takes_the_slowdown_once():
    # h100-sxm fp8 ceiling = bf16 short-run ceiling 0.737 x MAMF fp8 / bf16 (0.709 / 0.803, both hot at 700 W,
    # stas00/ml-engineering); the bf16 MAMF is 0.959 of its short-run rate (GH200 at 900 W: 794.5 / 828.6), so
    # the sustained fp8 rate = (0.737 x 989.4 / (794.5 / 0.959)) x MAMF fp8 1,402.6 = short-run ceiling over
    # short-run MAMF, times the hot fp8 MAMF: one slowdown, the fp8 one the MAMF pair measured
    h100 = CAT.accelerator("h100-sxm")
    s = sustained_accelerator(h100)
    hot_fp8 = s.dense_tflops["fp8"] * s.gemm_efficiency["fp8"]
    expect = 0.737 * 989.4 / (794.5 / 0.959) * 1402.6
    assert hot_fp8 == pytest.approx(expect, rel=2e-3)  # 1,235 TFLOP/s (the catalog's 0.651 is rounded)


def test_blackwell_gemm_ceiling_carries_a_ratio_of_hot_mamf_rates():
    # b200 bf16 ceiling = MAMF 1,745 / 2,250 (mamf-finder.py v2, hot) x (H200 short-run ceiling 0.737 over the
    # H100's hot MAMF 0.803) = 0.712: hot over hot, so the ceiling is short-run to the extent both searches ran
    # at one fraction of their boost clocks (the catalog's labelled assumption); 0.853 is then applied once
    b200 = CAT.accelerator("b200")
    assert b200.gemm_efficiency["bf16"] == pytest.approx(1745.0 / 2250.0 * 0.737 / (794.5 / 989.4), abs=1e-3)
    assert "hot over hot" in b200.assumptions["gemm_efficiency"]
