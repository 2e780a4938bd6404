"""Qwen3 on Hopper: the per-head query/key RMSNorm (q_norm, k_norm), its bytes, launches and stored activations;
the GEMM law at the narrow widths of fine-grained experts."""

import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute import operator_table
from hnplan.compute.host import kernels_per_row
from hnplan.memory.activations import layer_activations
from hnplan.planning.training import ParallelPlan, estimate_training_step


def _rows(df, name):
    return df[df.name == name].set_index("phase")


def test_qwen3_head_norm_bytes_by_hand(cat):
    # Qwen3-30B-A3B: 32 query heads and 4 KV heads of 128. One micro-batch of 4,096 tokens at TP 1: the query
    # norm reads and writes 4,096 x 32 x 128 = 16,777,216 bf16 elements forward (4 bytes each: 67,108,864 B) and
    # reads the input and the output gradient and writes the input gradient backward (the norm rows' 8 bytes an
    # element: 134,217,728 B); the key norm the same over 4 heads (8,388,608 and 16,777,216 B)
    m = cat.model("qwen3-30b-a3b")
    assert m.qk_norm
    df = operator_table(m, cat.accelerator("h100-sxm"), "train", 1, 4096, tp=1, ep=8)
    q, k = _rows(df, "q_head_norm"), _rows(df, "k_head_norm")
    assert q.loc["fwd", "bytes"] == pytest.approx(4096 * 32 * 128 * 4)
    assert q.loc["bwd", "bytes"] == pytest.approx(4096 * 32 * 128 * 8)
    assert k.loc["fwd", "bytes"] == pytest.approx(4096 * 4 * 128 * 4)
    assert k.loc["bwd", "bytes"] == pytest.approx(4096 * 4 * 128 * 8)
    # TP 2 halves the heads on a rank (16 query, 2 KV), not the tokens: the norms run after the QKV projection
    df2 = operator_table(m, cat.accelerator("h100-sxm"), "train", 1, 4096, tp=2, ep=8)
    assert _rows(df2, "q_head_norm").loc["fwd", "bytes"] == pytest.approx(4096 * 16 * 128 * 4)
    assert _rows(df2, "k_head_norm").loc["fwd", "bytes"] == pytest.approx(4096 * 2 * 128 * 4)
    # inference runs them too (prefill of 4,096 tokens)
    pre = operator_table(m, cat.accelerator("h100-sxm"), "prefill", 1, 4096)
    assert _rows(pre, "q_head_norm").loc["prefill", "bytes"] == pytest.approx(4096 * 32 * 128 * 4)


def test_models_without_qk_norm_have_no_head_norms(cat):
    df = operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), "train", 1, 4096)
    assert not df.name.isin(["q_head_norm", "k_head_norm"]).any()
    off = cat.model("qwen3-30b-a3b").model_copy(update={"qk_norm": False})
    df = operator_table(off, cat.accelerator("h100-sxm"), "train", 1, 4096, ep=8)
    assert not df.name.isin(["q_head_norm", "k_head_norm"]).any()


def test_head_norms_launch_like_the_other_norms():
    # one fused kernel a pass, or the eager chain of 8 (to(float32), pow, mean, add eps, rsqrt, mul, to(dtype), mul)
    for name in ("q_head_norm", "k_head_norm"):
        assert kernels_per_row(name, "moe-layer", "elementwise", 1.0, StackChoices()) == 1.0
        assert kernels_per_row(name, "moe-layer", "elementwise", 1.0, StackChoices(norm_kernel="eager")) == 8.0


def test_head_norm_inputs_are_stored_activations(cat):
    # the norms' inputs (the projection's Q and K, bf16) are kept for their backward: (32 + 4) x 128 x 2 bytes =
    # 9,216 bytes per token more in the TP-split part of a layer
    m = cat.model("qwen3-30b-a3b")
    on, off = layer_activations(m, moe_layer=True), layer_activations(m.model_copy(update={"qk_norm": False}), True)
    assert on.split - off.split == pytest.approx((32 + 4) * 128 * 2)
    assert on.replicated == off.replicated


def test_head_norms_never_speed_up_a_step(cat):
    m = cat.model("qwen3-30b-a3b")
    plan = ParallelPlan(tp=1, pp=1, dp=8, ep=8, microbatch_size=1)
    t = {
        q: estimate_training_step(
            m.model_copy(update={"qk_norm": q}), "hgx-h100-ib-ndr", 8, plan, 4096, 64, "bf16", cat
        )
        for q in (False, True)
    }
    assert t[True].step_time_s > t[False].step_time_s
    # By hand: this eager MoE step on x86 hosts is host-bound, so the norms' GPU time (about 111 us a layer and
    # micro-batch at the H100's norm-class bandwidth) hides under the host's, and what the step gains is their
    # launches: 4 kernels a layer (query and key norm, forward and backward; one fused kernel each, above) at the
    # default stack's 13.1 us a launch, over 48 layers and 64 / 8 = 8 micro-batches: 4 x 13.1 us x 48 x 8 = 20.12 ms
    assert StackChoices().kernel_launch_us == 13.1 and t[True].num_microbatches == 8
    assert t[True].step_time_s - t[False].step_time_s == pytest.approx(4 * 13.1e-6 * 48 * 8, rel=1e-9)
    assert {k for k, v in t[True].breakdown_s.items() if v != t[False].breakdown_s[k]} == {"compute"}


def test_gemm_law_errs_slow_at_the_narrow_widths_of_fine_grained_experts(cat):
    # Qwen3-30B-A3B's experts run N = 1,536 / K = 2,048 and N = 2,048 / K = 768 at 2,048-4,096 tokens each. The
    # H200 bf16 sweep's narrowest outputs (Llama 3.1 8B / 70B QKV at TP 8: N = 768, K = 4,096 and N = 1,280,
    # K = 8,192) at 2,048-16,384 tokens ran 19.1-446 us; the law (eager calls, as timed) is 6-10 % slower on
    # every one of them: at narrow N it does not flatter the expert GEMMs
    from hnplan.compute.gemm import gemm_time_s

    acc = cat.accelerator("h200-sxm")
    ref = cat.reference("h200_gemm_bf16").query("n <= 1280 and m_tokens >= 2048")
    assert len(ref) == 6
    for r in ref.itertuples():
        law = float(gemm_time_s(acc, "bf16", r.m_tokens, r.n, r.k, eager=True))
        assert 1.05 * r.time_s <= law <= 1.12 * r.time_s, r
