"""Attention with Q/K heads wider than V (DeepSeek-V3's MLA in training: d_qk = 128 + 64 = 192, d_v = 128): the
backward's five matmuls split 3 over d_qk and 2 over d_v, and its four fp32 accumulators (S/P, dP/dS, dK, dV) outgrow
the 512 columns an SM holds for them (Blackwell tensor memory; Hopper register file), so the backward ceiling
measured at head dimension 128 drops by 512 / 576. Checked, not fitted, against NVIDIA's published cuDNN SDPA runs
of the DeepSeek-V3 shape (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training)."""

import numpy as np
import pytest

from hnplan.compute._op import _Op
from hnplan.compute.attention import attention_compute_s, attention_rows, flash_bwd_factor
from hnplan.compute.kernels import attention_time_s

B, HQ, S = 2, 128, 4096


def _mla_op(d_qk=192, d_v=128):
    return _Op(
        "attention", "attention", "dense-layer", b=B, hq=HQ, s_q=S, s_kv=S, d_qk=d_qk, d_v=d_v,
        kv_width=HQ * (d_qk + d_v), causal=True,
    )  # fmt: skip


def test_backward_flops_put_three_matmuls_over_qk_and_two_over_v():
    fwd, bwd = attention_rows(_mla_op(), "train", "none", True, 1.0)[:2]
    # causal forward: half of 2 x (QK^T over 192 + PV over 128) per (sequence, head, query, key)
    f = 2.0 * B * HQ * S * S * (192 + 128) / 2  # 1,374.4 GFLOP
    assert fwd[5] == pytest.approx(f) and fwd[5] == pytest.approx(1374.39e9, rel=1e-4)
    # backward: S = QK^T, dQ = dS K, dK = dS^T Q over 192; dP = dO V^T, dV = P^T dO over 128:
    # 2 x (3 x 192 + 2 x 128) = 1,664 FLOP per score element against the forward's 640, 2.6x
    assert bwd[5] == pytest.approx(f * 1664 / 640) and flash_bwd_factor(192, 128) == pytest.approx(2.6)
    assert flash_bwd_factor(128, 128) == 2.5  # FlashAttention-2's 2.5x for equal head dimensions
    # the rows carry the mean head dimension, (192 + 128) / 2
    assert fwd[9] == bwd[9] == 160.0


def test_wide_heads_overflow_the_accumulator_columns(cat):
    # the tensor-core pipeline alone (the exponentials, which do not slow with it, in tests/test_attention_exp.py)
    acc = cat.accelerator("gb200").model_copy(update={"sfu_exp_per_clk_per_sm": None})
    assert acc.attention_bwd_accumulator_columns == 512 and acc.attention_tile_q == 128
    unlimited = acc.model_copy(update={"attention_bwd_accumulator_columns": None})
    f, s = np.array([1e12, 2.6e12]), [S] * 2
    for d, bwd_ratio in ((128, 1.0), (160, 576 / 512), (96, 1.0)):
        # demand 2 x 128 + 2 d columns: 512 at d = 128 (fits), 576 at DeepSeek's 192 / 128 (mean 160)
        args = (f, s, s, [d] * 2, [B * HQ] * 2, [False, True])
        t, t0 = attention_compute_s(acc, *args), attention_compute_s(unlimited, *args)
        assert t[0] == pytest.approx(t0[0])  # the forward keeps S/P and O only
        assert t[1] / t0[1] == pytest.approx(bwd_ratio)


def test_equal_head_dims_are_unchanged(cat):
    acc = cat.accelerator("h200-sxm")
    unlimited = acc.model_copy(update={"attention_bwd_accumulator_columns": None})
    for a in (acc, unlimited):
        assert attention_time_s(a, 1, 64, 8, 8192, 128, passes="fwd+bwd") == pytest.approx(
            attention_time_s(acc, 1, 64, 8, 8192, 128, head_dim_v=128, passes="fwd+bwd")
        )


# DeepSeek-V3 shape (128 heads, d_qk 192, d_v 128, causal, bf16) as NVIDIA published it: (chip, batch, tokens) ->
# (forward ms, backward ms). cuDNN 9.22.0, non-deterministic backward: results/dsv3/gb200/dsv3_20260424_101009.csv and
# gb300/dsv3_20260424_101002.csv; cuDNN 9.19.1, deterministic backward: results/gb200_919_only_cudnn,
# gb300_919_only_cudnn and h200_919_only_cudnn (commit df73764)
DSV3 = {
    ("gb200", 2, 4096): (0.977, 3.383),
    ("gb200", 2, 8192): (3.470, 11.984),
    ("gb300", 2, 4096): (0.864, 3.127),
    ("gb300", 2, 8192): (3.013, 11.074),
    ("gb200", 1, 4096): (0.509, 1.613),
    ("gb300", 1, 4096): (0.454, 1.544),
    ("h200-sxm", 1, 4096): (1.148, 4.424),
    ("h200-sxm", 1, 8192): (4.278, 16.162),
}


@pytest.mark.parametrize("key", list(DSV3))
def test_deepseek_v3_attention_against_cudnn(cat, key):
    chip, b, s = key
    fwd_ms, bwd_ms = DSV3[key]
    acc = cat.accelerator(chip)
    t_f = attention_time_s(acc, b, 128, 128, s, 192, head_dim_v=128)
    t_b = attention_time_s(acc, b, 128, 128, s, 192, head_dim_v=128, passes="fwd+bwd") - t_f
    # out of sample: the law's ceilings were measured at head dimension 128 (and 64 on Hopper) only. Blackwell
    # -6..+10 % (before the accumulator limit: -17..-3 %); the H200 -12..-11 %: its rows are cuDNN 9.19.1's
    # deterministic backward, the Hopper fit is of the non-deterministic one (h200_kernels, h200_attention_backends)
    assert t_b / (bwd_ms * 1e-3) - 1 == pytest.approx(0.02 if chip != "h200-sxm" else -0.115, abs=0.08)
    # forward: Blackwell -12..-6 % (the exponentials' share falls with the wider Q/K heads; the law without them,
    # one ceiling per chip, gave -10..0 % with the GB300 / GB200 ratio 4-6 % off), H200 -3..+1 %
    assert t_f / (fwd_ms * 1e-3) - 1 == pytest.approx(-0.05, abs=0.075)


@pytest.mark.parametrize(("b", "s"), [(2, 4096), (2, 8192), (1, 4096)])
def test_deepseek_v3_blackwell_ultra_gain_against_cudnn(cat, b, s):
    # GB300 / GB200 time ratio of the DeepSeek-V3 shape, measured 1.12-1.15 forward and 1.05-1.08 backward: the
    # SFU rate alone carries it (one Blackwell ceiling and overlap exponent per pass), within 3 % (the law
    # without exponentials, one ceiling per chip: up to 6 % off)
    t = {}
    for chip in ("gb200", "gb300"):
        acc = cat.accelerator(chip)
        t_f = attention_time_s(acc, b, 128, 128, s, 192, head_dim_v=128)
        t[chip] = (t_f, attention_time_s(acc, b, 128, 128, s, 192, head_dim_v=128, passes="fwd+bwd") - t_f)
    for i in (0, 1):
        measured = DSV3[("gb200", b, s)][i] / DSV3[("gb300", b, s)][i]
        assert t["gb200"][i] / t["gb300"][i] == pytest.approx(measured, rel=0.03)
