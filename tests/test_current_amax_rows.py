"""Current-scaling amax from Transformer Engine's norm and activation kernels (fp8_current_amax_fusion) on the
validation rows whose recipes run it: which stacks and rows state it, and the step time it takes away, by hand
(hnplan.compute.fp8_recipes, module docstring; docs/compute.md)."""

from __future__ import annotations

import pytest

from hnplan.catalog import load_catalog
from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import best_row, run_job

RUNS = {r.id: r for r in training_runs()}


def _choices(run_id: str):
    return run_job(RUNS[run_id]).choices


def _off(run_id: str):
    run = RUNS[run_id]
    return run.model_copy(update={"overrides": {**run.overrides, "fp8_current_amax_fusion": False}})


def test_the_rows_state_what_their_recipes_run():
    # Transformer Engine release_v2.8 (v5.1 NeMo Dockerfiles) and the 26.04 container (v6.0): on; the 8B recipe's
    # config_common_8b.sh: Transformer Engine norms (NVTE_NORM_FWD_USE_CUDNN=0) and, TP 1, the op fuser (USE_TE_OPS)
    for rid in (
        "mlperf-v51-uf-b200-llama31-8b-8",
        "mlperf-v51-nvidia-gb200-llama31-8b-72",
        "mlperf-v51-dell-b300-llama31-8b-8",
    ):
        ch = _choices(rid)
        assert (ch.fp8_recipe, ch.fp8_current_amax_fusion, ch.norm_cudnn, ch.fp8_act_cast_fusion) == (
            "current",
            True,
            False,
            True,
        )
    for rid in ("mlperf-v60-nvidia-gb200-llama31-8b-1024", "mlperf-v60-nvidia-gb300-llama31-8b-512"):
        ch = _choices(rid)
        assert (ch.fp8_current_amax_fusion, ch.norm_cudnn, ch.fp8_act_cast_fusion) == (True, False, False)
    # Lambda's v5.1 image builds Transformer Engine d5919e12 (2025-09-16), before the fused amax
    assert not _choices("mlperf-v51-lambda-gb300-llama31-8b-72").fp8_current_amax_fusion
    # the 405B recipe keeps config_common.sh's cuDNN norms; Megatron-Bridge 25.11 keeps them for these FP8-CS rows
    assert _choices("mlperf-v51-uf-b200-llama31-405b-256").norm_cudnn
    for rid in (
        "mbridge2511-h100-llama3-8b-8",
        "mbridge2511-gb200-llama3-70b-64",
        "mbridge2511-gb300-llama31-405b-256",
    ):
        assert _choices(rid).norm_cudnn and _choices(rid).fp8_current_amax_fusion
    # the 25.09 container's Transformer Engine 2.7 has none; 26.04's 2.14 has it
    assert not _choices("mbridge2509-h100-deepseek-v3-1024-fp8").fp8_current_amax_fusion
    assert _choices("mbridge2604-h100-qwen3-235b-a22b-256-fp8").fp8_current_amax_fusion


def test_uf_b200_8b_step_loses_four_amax_passes_a_layer_hand_derived():
    # 16,384 tokens a GPU (micro-batch 2 x 8,192, one micro-batch a step), 32 layers: the norm returns the amax of
    # the QKV and MLP-up inputs (4,096 columns each), the op fuser's SwiGLU that of the MLP-down input (14,336)
    # and of the MLP-up output gradient (2 x 14,336): 2 bytes an element read once (Transformer Engine's amax kernel,
    # amax_passes 1) at the per-pass amax class, B200 7.7 TB/s x 0.9 x 0.977 = 6.77 TB/s (Transformer Engine's amax
    # measured on a B300, data/accelerators/b300.yaml), plus the B200's 3.67 us per
    # kernel for the 4 x 32 kernels
    acc = load_catalog().accelerator("b200")
    nbytes = 2 * 16384 * (4096 + 4096 + 14336 + 2 * 14336) * 32
    amax_Bps = acc.hbm_bw_TBps * 1e12 * acc.hbm_efficiency * acc.memory_kernel_efficiency["amax"]
    by_hand = nbytes / amax_Bps + 4 * 32 * acc.kernel_overhead_us * 1e-6
    # 0.009748 s at the H200's eager PyTorch amax a pass (0.835), 0.02834 s at its three passes
    assert by_hand == pytest.approx(0.008399, abs=1e-5)
    rid = "mlperf-v51-uf-b200-llama31-8b-8"
    on, off = best_row(RUNS[rid]), best_row(_off(rid))
    assert off["t_compute_s"] - on["t_compute_s"] == pytest.approx(by_hand, rel=1e-6)
    # published 0.5441 s: +6.0 % with every amax pass, +4.5 % without the four (+5.6 / +4.1 % before every bf16
    # parameter was counted in the last fp8 bucket's DP group, +5.3 / +3.8 % before the DP buckets holding the
    # embedding were counted; +5.6 / +3.8 % at the H200's amax and cast classes, +10.2 / +5.0 % at three passes
    # each, when first written)
    assert off["step_time_s"] / RUNS[rid].published - 1 == pytest.approx(0.060, abs=1e-3)
    assert on["step_time_s"] / RUNS[rid].published - 1 == pytest.approx(0.045, abs=1e-3)


def test_cudnn_norms_without_the_op_fuser_keep_every_amax_pass():
    # the 405B recipe: cuDNN's norm returns no amax and Megatron-Core's SwiGLU is not Transformer Engine's
    rid = "mlperf-v51-uf-b200-llama31-405b-256"
    assert best_row(RUNS[rid])["step_time_s"] == best_row(_off(rid))["step_time_s"]
