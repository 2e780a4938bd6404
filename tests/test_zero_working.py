"""The ZeRO-2/3 working set: gathered units and unsharded gradients in flight (hnplan.memory.zero_working)."""

import numpy as np
import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.memory import training_memory
from hnplan.memory.states import model_state_table, stack_accounting
from hnplan.memory.zero_working import (
    DEEPSPEED_MAX_LIVE_PARAMS,
    DEEPSPEED_REDUCE_BUCKET_PARAMS,
    largest_module_params,
    largest_unit_params,
    rank_stage_params,
    zero_working_bytes,
)

# Llama 3.1 8B (hidden 4,096, 8 KV heads of 128, FFN 14,336, vocabulary 128,256, untied embeddings):
EMB = 128_256 * 4_096  # 525,336,576: the embedding unit
HEAD = EMB + 4_096  # the output head and the final norm: one unit
# attention q, k, v, o: 4,096 x (4,096 + 1,024 + 1,024 + 4,096); SwiGLU 3 x 4,096 x 14,336; two norms
LAYER = 4_096 * 10_240 + 3 * 4_096 * 14_336 + 2 * 4_096  # 218,112,000


@pytest.fixture(scope="module")
def llama8b():
    return load_catalog().model("llama3.1-8b")


def test_units_by_hand(llama8b):
    layer, end = largest_unit_params(llama8b, 2, 1, 2, "first", 1)  # pp 1: the embedding and the head
    assert float(layer) == pytest.approx(LAYER / 2)
    assert float(end) == pytest.approx(HEAD / 2)
    layer, end = largest_unit_params(llama8b, 2, 1, 2, "middle", 4)  # a middle stage: layers only
    assert float(end) == 0.0 and float(layer) == pytest.approx(LAYER / 2)
    _, end = largest_unit_params(llama8b, 1, 1, 1, "first", 4)  # the first stage: the embedding
    assert float(end) == pytest.approx(EMB)


def test_working_bytes_by_hand(llama8b):
    bf16 = stack_accounting("bf16", 4.0)  # 2-byte weights, 4-byte gradients
    # ZeRO 3, TP 2, pp 1: the head unit (largest), two gathered at 2 bytes, two units' gradients at 4 bytes
    w, g = zero_working_bytes(llama8b, 2, 1, 1, 3, bf16)
    assert float(w) == pytest.approx(2 * 2 * HEAD / 2)
    assert float(g) == pytest.approx(2 * 4 * HEAD / 2)
    # a middle stage of pp 4: a Transformer layer; torchtitan's FSDP2 gradients: bf16 2 + fp32 4 = 6 bytes
    w, g = zero_working_bytes(llama8b, 1, 4, 1, 3, bf16, "middle", unsharded_grad_bytes=6.0)
    assert (float(w), float(g)) == pytest.approx((2 * 2 * LAYER, 6 * LAYER))
    # ZeRO 2 gathers nothing (whole weights), but its unit's gradients exist whole before the reduce-scatter
    w, g = zero_working_bytes(llama8b, 1, 4, 1, 2, bf16, "middle")
    assert (float(w), float(g)) == pytest.approx((0.0, 8 * LAYER))
    # ZeRO 0 and 1 keep whole weights and gradients already: nothing more
    w, g = zero_working_bytes(llama8b, 1, 4, 1, np.array([0, 1]), bf16, "middle")
    assert w.tolist() == [0.0, 0.0] and g.tolist() == [0.0, 0.0]


def test_fp8_gather_width(llama8b):
    # fp8 parameters gathered in fp8 (per-tensor fp8 and its transpose: 2 bytes); the head unit stays bf16
    a = stack_accounting("fp8", 4.0, fp8_params=True, fp8_recipe="current")
    w, _ = zero_working_bytes(llama8b, 1, 4, 1, 3, a, "middle")
    assert float(w) == pytest.approx(2 * a.weight_bytes * LAYER)
    w, _ = zero_working_bytes(llama8b, 1, 4, 1, 3, a, "last")
    assert float(w) == pytest.approx(2 * max(a.weight_bytes * LAYER, 2.0 * HEAD))


def test_moe_unit_shrinks_with_expert_parallelism():
    m = load_catalog().model("deepseek-v3")
    units = [float(largest_unit_params(m, 1, ep, 1, "middle", 4)[0]) for ep in (8, 16, 32, 64)]
    assert all(a > b for a, b in zip(units, units[1:]))


def test_training_memory_counts_the_working_set(llama8b):
    kw = dict(recipe=stack_accounting("bf16", 4.0), overheads=False)
    z3 = training_memory(llama8b, 8192, 1, 1, 1, 8, zero=3, **kw)
    w, g, _ = model_state_table(llama8b, 1, 1, 8, 1, 3, kw["recipe"])
    # pp 1: the head unit; 2 x 2 bytes gathered and 2 x 4 bytes of gradients on top of the 1/8 shards
    assert z3.params_bytes == pytest.approx(float(w[()]) + 4 * HEAD)
    assert z3.grads_bytes == pytest.approx(float(g[()]) + 8 * HEAD)
    z1 = training_memory(llama8b, 8192, 1, 1, 1, 8, zero=1, **kw)
    w1, g1, _ = model_state_table(llama8b, 1, 1, 8, 1, 1, kw["recipe"])
    assert (z1.params_bytes, z1.grads_bytes) == pytest.approx((float(w1[()]), float(g1[()])))


def test_cached_fp8_casts_stay_off_the_embedding_unit(llama8b):
    # Transformer Engine's cached fp8 cast and transpose (2 of the 4 bytes a parameter) belong to the layers'
    # GEMMs and are kept whole in the model states under ZeRO-3 (test_zero3_fp8_cache): the gathered unit is
    # its bf16 weights alone; the embedding and head units are gathered in bf16 (2 bytes)
    a = stack_accounting("fp8", 4.0)
    assert (a.weight_bytes, a.zero3_whole_bytes) == (4.0, 2.0)
    w, _ = zero_working_bytes(llama8b, 1, 4, 1, 3, a, "middle")
    assert float(w) == pytest.approx(2 * 2.0 * LAYER)
    w, _ = zero_working_bytes(llama8b, 1, 4, 1, 3, a, "first")
    assert float(w) == pytest.approx(2 * max(2.0 * LAYER, 2.0 * EMB))
    # fp8 parameters with Megatron-FSDP's keep_fp8_transpose_cache: the transpose is kept whole, the unit is
    # gathered row-wise (1 byte)
    k = stack_accounting("fp8", 2.0, fp8_params=True, fp8_recipe="current", keep_fp8_transpose_cache=True)
    w, _ = zero_working_bytes(llama8b, 1, 4, 1, 3, k, "middle")
    assert float(w) == pytest.approx(2 * 1.0 * LAYER)


def test_largest_module_by_hand(llama8b):
    # DeepSpeed gathers submodules: Llama 3.1 8B's are the embedding (525.3M) on the first stage, the fused
    # gate and up projection 2 x 4,096 x 14,336 = 117,440,512 elsewhere, the head on the last stage
    assert float(largest_module_params(llama8b, 1, 1, 1, "first", 4)) == EMB
    assert float(largest_module_params(llama8b, 1, 1, 1, "middle", 4)) == 2 * 4_096 * 14_336
    assert float(largest_module_params(llama8b, 2, 1, 2, "middle", 4)) == 4_096 * 14_336  # TP 2
    assert float(largest_module_params(llama8b, 1, 1, 1, "last", 4)) == EMB  # the untied head, V x h
    # Qwen3-30B-A3B (h 2,048, 128 experts of 768, SwiGLU) at EP 8: 16 local experts' gate and up projections as
    # one grouped module, 16 x 2 x 2,048 x 768 = 50,331,648, larger than the QKV 2,048 x (32 + 8) x 128 = 10.5M
    qwen = load_catalog().model("qwen3-30b-a3b")
    assert float(largest_module_params(qwen, 1, 8, 1, "middle", 2)) == 16 * 2 * 2_048 * 768
    assert float(largest_module_params(qwen, 1, 8, 1, "first", 2)) == 151_936 * 2_048  # the embedding


def test_deepspeed_working_bytes_by_hand(llama8b):
    # a middle stage of Llama 3.1 8B at DeepSpeed's defaults, bf16 weights: M = 117,440,512
    m, acct = 2 * 4_096 * 14_336, stack_accounting("bf16", 4.0)
    w, g = zero_working_bytes(llama8b, 1, 4, 1, 3, acct, "middle", max_live_params=1e9, reduce_bucket_params=5e8)
    assert float(w) == (2 * m + 1e9) * 2  # the module computing, the live cap and one module over it
    assert float(g) == (m + 2 * 5e8) * 2  # the module's gradients and two buckets of 5e8
    # ZeRO 2 gathers nothing; the buckets stay
    w2, g2 = zero_working_bytes(llama8b, 1, 4, 1, 2, acct, "middle", max_live_params=1e9, reduce_bucket_params=5e8)
    assert float(w2) == 0.0 and float(g2) == float(g)


def test_deepspeed_gathers_no_more_than_the_rank_holds(llama8b):
    # DeepSpeed gathers a parameter only while NOT_AVAILABLE and counts it once (stage3.py @ v0.3.15,
    # fetch_sub_module / prefetch_next_sub_modules): the cap of 1e9 live parameters cannot hold more than the
    # stage. Llama 3.1 8B on 16 stages: the first holds 2 layers and the embedding, 2 x 218,112,000 + 525,336,576 =
    # 961,560,576 parameters, below 2 M + 1e9 = 2 x 525,336,576 + 1e9 = 2,050,673,152 (M: the embedding)
    m, acct = EMB, stack_accounting("bf16", 4.0)
    stage = 2 * LAYER + EMB
    assert float(rank_stage_params(llama8b, 1, 1, 1, "first", 16)) == stage
    assert 2 * m + 1e9 > stage
    w, _ = zero_working_bytes(llama8b, 1, 16, 1, 3, acct, "first", max_live_params=1e9)
    assert float(w) == stage * 2  # the whole stage in bf16, 1.92 GB, not (2 M + 1e9) x 2 = 4.10 GB
    # at TP 2 each rank holds half of it (vocabulary-parallel embedding): 480,780,288 x 2 bytes
    w2, _ = zero_working_bytes(llama8b, 2, 16, 1, 3, acct, "first", max_live_params=1e9)
    assert float(w2) == stage / 2 * 2
    # a middle stage's 2 layers, 436,224,000, below 2 x 117,440,512 + 1e9; on 4 stages (8 layers, 1.745e9) the cap
    # binds first and the count is (2 M + 1e9) as before
    w3, _ = zero_working_bytes(llama8b, 1, np.array([16, 4]), 1, 3, acct, "middle", max_live_params=1e9)
    assert w3.tolist() == [2 * LAYER * 2, (2 * 2 * 4_096 * 14_336 + 1e9) * 2]


def test_fsdp_gathers_no_more_than_the_rank_holds(llama8b):
    # FSDP's two gathered units are distinct modules, each gathered once (FSDP1 FlatParamHandle.unshard reuses an
    # unsharded handle): never more than the stage. Llama 3.1 8B on 32 stages (one layer each): a middle stage
    # holds 1 layer, so 1 x 218,112,000 x 2 bytes, not 2 x; the first stage 1 layer and the embedding,
    # (218,112,000 + 525,336,576) x 2 = 1.49 GB, not 2 x 525,336,576 x 2 = 2.10 GB; on 4 stages (8 layers) two
    # units fit and the count is 2 x 2 x LAYER as before
    bf16 = stack_accounting("bf16", 4.0)
    w, g = zero_working_bytes(llama8b, 1, np.array([32, 4]), 1, 3, bf16, "middle")
    assert w.tolist() == [2 * LAYER, 2 * 2 * LAYER]
    assert g.tolist() == [8 * LAYER, 8 * LAYER]  # the gradients' units are not capped here
    w, _ = zero_working_bytes(llama8b, 1, 32, 1, 3, bf16, "first")
    assert float(w) == 2 * (LAYER + EMB)
    # fp8 layer gather (2 bytes, per-tensor fp8 and its transpose) beside the bf16 embedding: the stage at the wider 2
    fp8 = stack_accounting("fp8", 4.0, fp8_params=True, fp8_recipe="current")
    w, _ = zero_working_bytes(llama8b, 1, 32, 1, 3, fp8, "first")
    assert float(w) == 2 * (LAYER + EMB)


def test_memory_command_counts_the_stacks_working_set():
    """``hnplan memory`` (memory_summary) takes the stack's ZeRO working-set fields as the planner does: torchtitan's
    6-byte FSDP2 gradients, and DeepSpeed's submodules and buckets on a stack that sets them."""
    from hnplan.planning.memory import memory_summary

    cat = load_catalog()
    kw = dict(tp=1, pp=1, dp=32, zero=3, catalog=cat)
    tt = memory_summary("llama3.1-8b", "train", 8192, stack="torchtitan-2506", **kw)
    fsdp = memory_summary("llama3.1-8b", "train", 8192, stack="megatron-core", **kw)
    # the largest unit at pp 1 is the head with the final norm (HEAD): 6 bytes against the default 2 x 4
    assert (tt["grads_gib"] - fsdp["grads_gib"]) * 2**30 == pytest.approx((6 - 8) * HEAD)
    ds = cat.stack("megatron-lm-2021").model_copy(
        update=dict(
            zero_stages=(0, 3),
            zero3_max_live_params=DEEPSPEED_MAX_LIVE_PARAMS,
            zero_reduce_bucket_params=DEEPSPEED_REDUCE_BUCKET_PARAMS,
        )
    )
    big = dict(seq_len=2048, dp=640, zero=3, microbatch_size=4, recompute="full", catalog=cat)
    a = memory_summary("megatron-529.6b", "train", stack=ds, **big)
    b = memory_summary("megatron-529.6b", "train", stack="megatron-lm-2021", **big)
    m = 20_480 * 81_920  # the MLP's first linear layer; the layer unit is 12 h^2 + 2 h
    assert (b["params_gib"] - a["params_gib"]) * 2**30 == pytest.approx(
        2 * (12 * 20_480**2 + 2 * 20_480) * 2 - (2 * m + 1e9) * 2
    )
    assert a["total_gib"] < 79.15 < b["total_gib"]
