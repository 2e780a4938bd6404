"""The two Pai-Megatron-Patch Qwen3-30B-A3B runs on 16 H800 (alibaba/Pai-Megatron-Patch issue 643), byte by byte.

Both ran; hnplan's memory model puts them over the H800's 79.11 GiB (``hnplan_fits: false`` in
data/validation/training_runs.yaml). Each term is derived here by hand from the code the runs used
(Megatron-LM 6a6cd478839d, the backends/megatron/Megatron-LM-250624 submodule of Pai-Megatron-Patch 2b201af08336;
examples/qwen3/run_mcore_qwen3.sh there): the model counts each as the code keeps it, so what is left between the
tensors and the card is the runtime's (CUDA context, NCCL buffers, the allocator), and the rows stay marked.

Qwen3-30B-A3B: hidden 2,048, 48 layers, 32 query heads and 4 KV heads of 128, 128 experts of 768 (SwiGLU), top 8,
vocabulary 151,936, untied embeddings.
"""

import pytest

from hnplan.planning.memory import memory_summary

GIB = 2**30
H = 2_048
ATTN = H * (32 + 2 * 4) * 128 + 32 * 128 * H  # fused QKV 2,048 x 5,120 and the output projection: 18,874,368
DENSE = ATTN + 2 * H + H * 128  # two RMSNorms and the router, whole on every EP rank: 19,140,608
EXPERT = 3 * H * 768  # gate, up and down of one expert: 4,718,592
EMB = 151_936 * H  # the first stage's word embedding: 311,164,928
# activations a token and layer, bf16 unless said (no dropout; FlashAttention keeps no s x s scores):
# attention: TE LayerNormLinear keeps its input and the norm's output (2 x 2h), FlashAttention Q, K, V and its
# output (the projection's input), the QK-norms their inputs (Q 32 x 128, K 4 x 128)
ATTN_ACT = 2 * 2 * H + 2 * (4_096 + 512 + 512) + 2 * 4_096 + 2 * (4_096 + 512)  # 35,840
# The same bytes storage by storage, as the run's code holds them at micro-batch 1 (Megatron-LM 6a6cd478839d
# transformer/attention.py get_query_key_value_tensors; Transformer Engine v2.2-v2.4 ops/basic/rmsnorm.py,
# ops/_common.py reshape, FusedRoPEFunc, FlashAttention.forward): query.reshape of the split QKV output copies Q
# (its 4 heads a group are not one stride apart) and the q-norm keeps that copy; the k-norm keeps the contiguous
# copy TE's reshape makes of K; the fused RoPE keeps only its frequencies; FlashAttention's sbhd -> bshd
# transpose(0, 1).contiguous() copies only V (the size-1 batch dimension makes the post-RoPE Q and K, and the
# output's return trip, no-ops), so FlashAttention's output and the output projection's input are one tensor, and
# the QKV GEMM output is freed once the attention's forward ends: nothing is held twice.
ATTN_STORAGE = 2 * 2 * H + 2 * 4_096 + 2 * 512 + 2 * (4_096 + 512) + 2 * 512 + 2 * 4_096
# Held beside them and not counted: FlashAttention's fp32 softmax statistics (32 heads x 4), the norms' fp32
# rsigma (1 + 32 + 4 + 1 rows x 4)
ATTN_UNCOUNTED = 32 * 4 + (1 + 32 + 4 + 1) * 4  # 280
# MoE: the pre-MLP norm's input and output (router and permute input) and the fp32 router scores (128 x 4);
# each of the 8 routed copies: TEGroupedMLP's fc1 input (2h), weighted_bias_swiglu_impl's input (2 x 768) and
# routing weight (bf16: the logits' dtype, moe_utils.py topk_softmax_with_capacity .type_as(logits), as the script
# sets no --moe-router-dtype), fc2's input (768)
COPY = 2 * H + 2 * 2 * 768 + 2 + 2 * 768  # 8,706
MOE_ACT = 2 * 2 * H + 128 * 4 + 8 * COPY  # 78,352
# Storage by storage (Megatron-LM 6a6cd478839d transformer/moe): RouterGatingLinearFunction keeps the norm's output,
# which the unfused permute's index_select does not keep again (its backward needs only the indices); the
# all-to-all output is freed once sort_chunks_by_idxs' torch.cat has made fc1's input (GroupedLinear keeps views
# of it); unpermute gets no probs (they were applied in the SwiGLU), so its scatter_add_ keeps only indices. The
# aux-loss scores are fp32 (router.py compute_routing_scores_for_aux_loss) and the routing weights take the logits'
# bf16 (moe_utils.py topk_softmax_with_capacity: .type_as(logits)), both counted so. Uncounted: the top-k
# indices (8 x int64) and the fp32 softmax over them (8 x 4), the bool routing map kept by the capacity mask's
# product and its transposed copy kept by the permute's masked_select of the probs (2 x 128), with that
# masked_select's bf16 input (probs.T.contiguous(), 2 x 128), the permutation indices (8 x int64).
MOE_UNCOUNTED = 8 * 8 + 8 * 4 + 2 * 128 + 2 * 128 + 8 * 8  # 672


@pytest.mark.parametrize(
    "pp,dp,ep,gbs,in_flight",
    [
        (2, 8, 8, 128, 2),  # PP - rank - 1 = 1 warm-up micro-batch, so 2 in flight on the first stage
        (4, 4, 4, 256, 4),  # 3 warm-up micro-batches, 4 in flight
    ],
    ids=["pp2-ep8", "pp4-ep4"],
)
def test_pai643_rows_term_by_term(cat, pp, dp, ep, gbs, in_flight):
    layers = 48 // pp
    local = 128 // ep * EXPERT
    params = layers * (DENSE + local) + EMB
    edp = 16 // (pp * ep)  # expert-data-parallel = world / (PP x EP x ETP) (core/parallel_state.py): 1 in both
    r = memory_summary(
        "qwen3-30b-a3b", "train", 8192, tp=1, pp=pp, dp=dp, ep=ep, num_microbatches=gbs // dp, zero=1,
        stack="pai-megatron-patch-2504", catalog=cat, system="hgx-h800-ib",
    )  # fmt: skip
    assert r["stage"] == "first"
    assert r["params_gib"] * GIB == pytest.approx(2 * params, rel=1e-12)  # bf16
    # --bf16 forces fp32 gradient accumulation (megatron/training/arguments.py) and the distributed optimizer
    # keeps the whole buffer
    assert r["grads_gib"] * GIB == pytest.approx(4 * params, rel=1e-12)
    # fp32 master weight and two Adam moments: the dense part sharded over DP, the experts over expert-DP (1)
    dense = layers * DENSE + EMB
    assert r["optimizer_gib"] * GIB == pytest.approx(12 * (dense / dp + layers * local / edp), rel=1e-12)
    assert r["activations_gib"] * GIB == pytest.approx(in_flight * layers * 8_192 * (ATTN_ACT + MOE_ACT), rel=1e-12)
    # nothing is counted twice: storage by storage the code holds the same 114,192 bytes and 952 more (0.8 %)
    assert ATTN_STORAGE == ATTN_ACT
    held = in_flight * layers * 8_192 * (ATTN_STORAGE + MOE_ACT + ATTN_UNCOUNTED + MOE_UNCOUNTED)
    assert held / GIB - r["activations_gib"] == pytest.approx(0.35, abs=0.005)
    tensors = 2 * params + 4 * params + 12 * (dense / dp + layers * local / edp)
    tensors += in_flight * layers * 8_192 * (ATTN_ACT + MOE_ACT)
    # the tensors alone leave the runtime 1.53 GiB (pp2-ep8) / 2.38 GiB (pp4-ep4) of the H800's 79.11 GiB, against
    # 3.8 GiB of catalogued CUDA context and NCCL buffers (data/memory.yaml) before any allocator reserve
    assert r["hbm_gib"] - tensors / GIB == pytest.approx({2: 1.53, 4: 2.38}[pp], abs=0.01)
    runtime = 0.4 + 3 * 0.64 + 3.0 * 16 / 32  # context; DP, PP and EP communicators; the all-to-all at 16 channels
    assert r["overhead_gib"] == pytest.approx(runtime + 0.05 * tensors / GIB, abs=1e-9)
    assert not r["fits"]


def test_pai643_fp32_router_keeps_fp32_routing_weights(cat):
    """With ``--moe-router-dtype fp32`` (which the example script does not pass) the logits, so the routing weights
    (moe_utils.py topk_softmax_with_capacity: .type_as(logits)), are fp32: 2 bytes more for each of the 8 routed
    copies of a token, in each of the first stage's 24 layers and its 2 micro-batches in flight (pp2-ep8)."""
    stack = cat.stack("pai-megatron-patch-2504")
    kw = dict(tp=1, pp=2, dp=8, ep=8, num_microbatches=16, zero=1, catalog=cat, system="hgx-h800-ib")
    bf16 = memory_summary("qwen3-30b-a3b", "train", 8192, stack=stack, **kw)
    fp32 = memory_summary(
        "qwen3-30b-a3b", "train", 8192, stack=stack.model_copy(update={"moe_router_dtype": "fp32"}), **kw
    )
    assert (fp32["activations_gib"] - bf16["activations_gib"]) * GIB == pytest.approx(2 * 24 * 8_192 * 8 * 2)


def test_pai_flash_attention_backend_keeps_the_output_twice_above_microbatch_1(cat):
    """Transformer Engine's FlashAttention backend (the stack's FL=true) hands the output projection an sbhd copy of
    flash-attn's bshd output (TE v2.4 backends.py FlashAttention.forward: view, transpose(0, 1), contiguous), and
    flash-attn keeps its own for the backward: at micro-batch 2 the 32 x 128 output is held twice, 2 x 4,096 = 8,192
    bytes a token more in each of the first stage's 24 layers, 2 micro-batches of 2 x 8,192 tokens in flight (pp2-ep8):
    6 GiB; at micro-batch 1 the transpose is a view and nothing is added."""
    stack = cat.stack("pai-megatron-patch-2504")
    assert stack.attention_output_copy
    cudnn = stack.model_copy(update={"attention_output_copy": False})
    kw = dict(tp=1, pp=2, dp=8, ep=8, num_microbatches=16, zero=1, catalog=cat, system="hgx-h800-ib")
    for mb, extra in ((1, 0), (2, 2 * 24 * 2 * 8_192 * 8_192)):
        fa = memory_summary("qwen3-30b-a3b", "train", 8192, microbatch_size=mb, stack=stack, **kw)
        fused = memory_summary("qwen3-30b-a3b", "train", 8192, microbatch_size=mb, stack=cudnn, **kw)
        assert (fa["activations_gib"] - fused["activations_gib"]) * GIB == pytest.approx(extra, abs=1)
    assert 2 * 24 * 2 * 8_192 * 8_192 / GIB == 6.0
