"""Activation memory: Korthikanti et al. 2022's formulas worked by hand, their shape generalisation
(GQA, SwiGLU, MoE, MLA) and the pipeline micro-batches in flight."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.errors import InputError
from hnplan.memory import (
    activation_bytes_per_layer,
    microbatches_in_flight,
    output_activation_bytes,
    stage_activation_bytes,
    training_memory,
)
from hnplan.memory.layer_tensors import routing_weight_bytes
from hnplan.memory.states import STAGES
from hnplan.memory.zero_working import zero_working_bytes

# GPT-3 175B as in Korthikanti et al. Table 3: s = 2048, h = 12288, a = 96, t = 8
S, H, A, T = 2048, 12288, 96, 8


@pytest.fixture(scope="module")
def gpt3(cat):
    return cat.model("gpt3-175b")


def test_gpt_layer_no_parallelism(gpt3):
    # Sec. 4.1: s b h (34 + 5 a s / h) bytes; attention 11 sbh + 5 a s^2 b, MLP 19 sbh, norms 4 sbh
    by_hand = S * 1 * H * (34 + 5 * A * S / H)
    assert activation_bytes_per_layer(gpt3, S, 1, flash_attention=False) == pytest.approx(by_hand)


def test_gpt_layer_tensor_parallel_without_sp(gpt3):
    # Sec. 4.2.1: s b h (10 + 24 / t + 5 a s / (h t)): norm inputs, GEMM inputs and masks replicated
    by_hand = S * H * (10 + 24 / T + 5 * A * S / (H * T))
    got = activation_bytes_per_layer(gpt3, S, 1, tp=T, sequence_parallel=False, flash_attention=False)
    assert got == pytest.approx(by_hand)


def test_gpt_layer_tensor_and_sequence_parallel(gpt3):
    # Sec. 4.2.2: s b h / t (34 + 5 a s / h)
    got = activation_bytes_per_layer(gpt3, S, 1, tp=T, flash_attention=False)
    assert got == pytest.approx(S * H / T * (34 + 5 * A * S / H))


@pytest.mark.parametrize("sp,by_hand", [(True, S * H * 34 / T), (False, S * H * (10 + 24 / T))])
def test_gpt_layer_selective_recompute(gpt3, sp, by_hand):
    # Sec. 5 / Table 2: selective recomputation drops the 5 a s / h term
    got = activation_bytes_per_layer(
        gpt3, S, 1, tp=T, sequence_parallel=sp, recompute="selective", flash_attention=False
    )
    assert got == pytest.approx(by_hand)


@pytest.mark.parametrize("sp,by_hand", [(True, 2 * S * H / T), (False, 2 * S * H)])
def test_gpt_layer_full_recompute(gpt3, sp, by_hand):
    # Table 2: full recomputation keeps the layer input, 2 s b h (/ t with sequence parallelism)
    assert activation_bytes_per_layer(gpt3, S, 1, tp=T, sequence_parallel=sp, recompute="full") == by_hand


def test_flash_attention_stores_no_scores(gpt3):
    assert activation_bytes_per_layer(gpt3, S, 2, tp=T) == pytest.approx(34 * S * 2 * H / T)


def test_context_parallel_splits_the_sequence(gpt3):
    # s -> s / cp, also inside the s^2 term
    got = activation_bytes_per_layer(gpt3, S, 1, tp=T, cp=2, flash_attention=False)
    s = S / 2
    assert got == pytest.approx(s * H / T * (34 + 5 * A * s / H))


def test_gqa_swiglu_layer_by_hand(cat):
    # Llama 3.1 8B, no dropout: h = 4096, 32 query / 8 KV heads of 128, SwiGLU f = 14336, per token:
    # norms + QKV input + MLP input 4 x 2h = 32768; Q 2*4096, K and V 2*1024 each, attention output
    # 2*4096 = 20480; gate, up and product 3 x 2 x 14336 = 86016: 139264 bytes = 34 h (no dropout)
    m = cat.model("llama3.1-8b")
    got = activation_bytes_per_layer(m, 8192, 1, dropout=False)
    assert got == 8192 * (32768 + 20480 + 86016)
    # with dropout the two masks add h each: 36 h per token
    assert activation_bytes_per_layer(m, 8192, 1) == 8192 * 36 * 4096


def test_gqa_keeps_one_kv_head_per_rank(cat):
    m = cat.model("llama3.1-8b")  # 8 KV heads on 16 ranks: each rank keeps a whole head's K and V
    per_token = activation_bytes_per_layer(m, 1, 1, tp=16, dropout=False)
    assert per_token == pytest.approx((32768 + 2 * (4096 + 2 * 16 * 128 + 4096) + 86016) / 16)


def test_moe_layer_by_hand(cat):
    # Mixtral 8x7B, no dropout: router input and fp32 aux-loss probabilities (4 x 8 B), and per routed copy
    # (top-2) the expert input 2h, its SwiGLU intermediates 6 f_e and its routing weight in the router logits'
    # dtype (2 B in bf16, Megatron-Core's default; 4 B with an fp32 router); the weights scale the activation
    # (Megatron-Core's weighted SwiGLU), so no expert output is kept
    m = cat.model("mixtral-8x7b")
    per_token = 8 * 4096 + 4 * 8 + 20480 + 2 * (2 * 4096 + 6 * 14336 + 2)
    assert activation_bytes_per_layer(m, 4096, 1, dropout=False) == 4096 * per_token
    fp32 = activation_bytes_per_layer(m, 4096, 1, dropout=False, routing_weight=routing_weight_bytes("fp32"))
    assert fp32 == 4096 * (per_token + 2 * 2)


def test_mla_dense_layer_by_hand(cat):
    # DeepSeek-V3 dense layer, no dropout: 8h, latent norm/up-projection inputs 2*(2*1536 + 2*512 + 64),
    # per-head Q, K (192 wide) and V, output (128 wide) 2*128*(192*2 + 128*2), SwiGLU 6 * 18432
    m = cat.model("deepseek-v3")
    per_token = 8 * 7168 + 2 * (2 * 1536 + 2 * 512 + 64) + 2 * 128 * (192 * 2 + 128 * 2) + 6 * 18432
    assert activation_bytes_per_layer(m, 4096, 1, dropout=False, moe_layer=False) == 4096 * per_token


def test_output_layer(gpt3):
    # Sec. 4.3: 4 s b h / t (1 + v / h)
    assert output_activation_bytes(gpt3, S, 1, tp=T) == pytest.approx(4 * S * H / T * (1 + gpt3.vocab / H))


def test_first_stage_holds_p_microbatches(gpt3):
    # 1F1B, p = 8: 12 layers x 8 micro-batches in flight + 8 embedding dropout masks s b h / t
    per_layer = activation_bytes_per_layer(gpt3, S, 1, tp=T)
    got = stage_activation_bytes(gpt3, S, 1, tp=T, pp=8, num_microbatches=64)
    assert got == pytest.approx(12 * per_layer * 8 + 8 * S * H / T)
    # Korthikanti Sec. 4.2.3: the first stage stores about L layers' worth whatever p is
    assert got == pytest.approx(gpt3.layers * per_layer * (1 + 1 / (34 * 12)))


def test_interleaved_schedule_factor(gpt3):
    # 1 + (p - 1) / (p v) more on the first stage (Sec. 4.2.3)
    per_layer = activation_bytes_per_layer(gpt3, S, 1, tp=T, dropout=False)
    got = stage_activation_bytes(gpt3, S, 1, tp=T, pp=8, virtual_stages=4, dropout=False)
    assert got == pytest.approx(12 * per_layer * 8 * (1 + 7 / 32))


def test_few_microbatches_and_last_stage(gpt3):
    assert microbatches_in_flight(8, 3) == 3
    per_layer = activation_bytes_per_layer(gpt3, S, 1, tp=T)
    last = stage_activation_bytes(gpt3, S, 1, tp=T, pp=8, stage="last")
    assert last == pytest.approx(12 * per_layer + output_activation_bytes(gpt3, S, 1, tp=T))


def test_training_memory_reports_worst_stage(cat):
    # a big vocabulary and few layers per stage make the last stage (LM head, fp32 logits) the fullest
    m = cat.model("llama3.1-8b")
    mem = training_memory(m, 8192, 1, 1, 32, 1, recompute="full", num_microbatches=1)
    assert mem.stage == "last"
    assert mem.total_bytes == pytest.approx(sum(mem.parts_bytes().values()))


def test_bad_recompute_mode(gpt3):
    with pytest.raises(InputError, match="none, selective, full"):
        activation_bytes_per_layer(gpt3, S, 1, recompute="some")


MODELS = ["llama3.1-8b", "gpt3-175b", "mixtral-8x7b", "deepseek-v3", "llama2-7b"]


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    s=st.sampled_from([512, 2048, 8192]),
    b=st.integers(1, 4),
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2, 4]),
    flash=st.booleans(),
    dropout=st.booleans(),
    sp=st.booleans(),
)
def test_recompute_and_sharding_never_raise_activations(cat, model, s, b, tp, cp, flash, dropout, sp):
    m = cat.model(model)
    kw = dict(flash_attention=flash, dropout=dropout, sequence_parallel=sp)
    none, sel, full = (
        activation_bytes_per_layer(m, s, b, tp, cp, recompute=r, **kw) for r in ("none", "selective", "full")
    )
    assert none >= sel >= full > 0
    assert activation_bytes_per_layer(m, s, b, 2 * tp, cp, **kw) <= none
    assert activation_bytes_per_layer(m, s, b, tp, 2 * cp, **kw) <= none
    assert activation_bytes_per_layer(
        m, s, b, tp, cp, flash_attention=flash, dropout=dropout, sequence_parallel=True
    ) <= activation_bytes_per_layer(m, s, b, tp, cp, flash_attention=flash, dropout=dropout, sequence_parallel=False)
    assert math.isfinite(none)


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(["llama3.1-8b", "mixtral-8x7b", "deepseek-v3"]),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([8, 16]),
    zero=st.sampled_from([0, 1, 2, 3]),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_more_sharding_never_raises_training_tensors(cat, model, tp, pp, dp, zero, recompute):
    m = cat.model(model)
    ep = 8 if m.moe else 1
    kw = dict(tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, recompute=recompute)

    def total(**more):
        args = kw | more
        return training_memory(
            m, 4096, 1, args.pop("tp"), args.pop("pp"), args.pop("dp"), overheads=False, **args
        ).total_bytes

    base = total()
    for more in (dict(tp=2 * tp), dict(dp=2 * dp), dict(cp=2)):
        assert total(**more) <= base * (1 + 1e-12)
    # a higher ZeRO stage shards more, but ZeRO-2 / 3 hold the largest unit's gathered weights and unsharded
    # gradients in flight (hnplan.memory.zero_working): it never raises memory by more than that working set
    z = min(zero + 1, 3)
    working = max(sum(zero_working_bytes(m, tp, pp, ep, z, "zero-paper", stage)) for stage in STAGES)
    assert total(zero=z) <= base * (1 + 1e-12) + float(working)


def test_expert_parallel_must_divide(cat):
    from hnplan.errors import InfeasiblePlan

    with pytest.raises(InfeasiblePlan, match="does not divide"):
        training_memory(cat.model("mixtral-8x7b"), 4096, 1, 1, 1, 6, ep=4)


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["llama3.1-405b", "llama3.1-8b", "gpt3-175b"]),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.integers(3, 40),
    dp=st.sampled_from([1, 4, 64]),
    cp=st.sampled_from([1, 2]),
    mb=st.integers(1, 4),
    v=st.sampled_from([1, 2, 4]),
    m=st.integers(1, 64),
    zero=st.sampled_from([0, 1, 2, 3]),
    recompute=st.sampled_from(["none", "selective", "full"]),
    block=st.sampled_from([None, 1]),
)
def test_dense_middle_stage_never_fuller_than_the_first(cat, model, tp, pp, dp, cp, mb, v, m, zero, recompute, block):
    """Why training_memory_table weighs a dense model's middle stage only with balanced ends or DualPipe: it
    holds the first stage's ceil(L / pp) layers without the embedding and no more micro-batches in flight
    (1F1B min(p - 1, m) <= min(p, m); interleaved ((v + 1) p - 3) / v < p + (p - 1) / v), so in every part,
    and in floating point, it never exceeds the first stage."""
    import numpy as np

    from hnplan.memory.activations import stage_activation_table
    from hnplan.memory.states import model_state_table
    from hnplan.memory.training import overhead_terms
    from hnplan.vectorise import Columns

    mdl = cat.model(model)
    one = dict(tp=tp, pp=pp, dp=dp, cp=cp, microbatch_size=mb, num_microbatches=m, virtual_stages=v)
    plans = Columns(
        {k: np.array([x]) for k, x in one.items()}, {"recompute": (np.array([0]), np.array([recompute], dtype=object))}
    )
    fixed, slope = overhead_terms([tp], [pp], [dp], [cp], [1], cat)
    total = {}
    for stage in ("first", "middle"):
        states = model_state_table(mdl, [tp], [pp], [dp], [1], [zero], "zero-paper", [cp], stage)
        acts = stage_activation_table(mdl, plans, 4096, stage, recompute_num_layers=block)
        assert acts[0] <= total.get("acts", np.inf)
        total["acts"] = acts[0]
        tensors = states[0] + states[1] + states[2] + acts
        total[stage] = (tensors + (fixed + slope * tensors))[0]
    assert total["middle"] <= total["first"]


@pytest.mark.parametrize(
    "model,degrees,kw",
    [
        ("llama3.1-70b", dict(tp=8, pp=4, dp=8), dict(recompute="selective")),
        ("llama3.1-405b", dict(tp=8, pp=16, dp=128), dict(recompute="full", balanced=True, virtual_stages=2)),
        ("deepseek-v3", dict(tp=1, pp=16, dp=128, ep=64), dict(dualpipe=True, recipe="fp8", num_microbatches=7)),
        ("deepseek-v3", dict(tp=8, pp=8, dp=16, ep=64, etp=1), dict(zero=3, recompute="full", recompute_num_layers=2)),
        ("llama3.1-8b", dict(tp=2, pp=1, dp=16, cp=2), dict(zero=0, overheads=False)),
    ],
    ids=["70b", "405b-balanced-interleaved", "dsv3-dualpipe-fp8", "dsv3-folded-zero3", "8b-cp"],
)
def test_one_plan_memory_is_the_tables_frame_row_exactly(cat, model, degrees, kw):
    # training_memory passes its one plan to the table as plain columns (no pandas); the frame path's row is the
    # same bits, stage included
    import pandas as pd

    from hnplan.memory.training import TABLE_PARTS, training_memory, training_memory_table

    m = cat.model(model)
    one = training_memory(m, 8192, 1, catalog=cat, **degrees, **kw)
    table_kw = {k: v for k, v in kw.items() if k not in ("zero", "recompute", "num_microbatches", "virtual_stages")}
    row = {**dict(tp=1, pp=1, dp=1, cp=1, ep=1), **degrees}
    row.setdefault("etp", row["tp"])
    row.update(
        microbatch_size=1,
        num_microbatches=kw.get("num_microbatches", row["pp"]),
        virtual_stages=kw.get("virtual_stages", 1),
        zero_stage=kw.get("zero", 1),
        recompute=kw.get("recompute", "none"),
    )
    framed = training_memory_table(m, pd.DataFrame([row]), 8192, catalog=cat, **table_kw).iloc[0]
    assert [getattr(one, k) for k in TABLE_PARTS] == [float(framed[k]) for k in TABLE_PARTS]
    assert one.stage == str(framed["stage"])
    assert one.params_bytes > 0 and one.activations_bytes > 0


def test_attention_output_copy_only_above_microbatch_1(cat):
    # Transformer Engine's FlashAttention backend: the sbhd copy of flash-attn's bshd output at b > 1, 2 a d_v bytes
    # a token (Llama 3.1 8B: 32 heads of 128, 8,192 bytes; DeepSeek-V3 MLA: 128 heads of v 128, 32,768), over tp;
    # nothing at b = 1 (a view) or with the attention core recomputed (flash-attn keeps nothing)
    for name, extra in (("llama3.1-8b", 2 * 32 * 128), ("deepseek-v3", 2 * 128 * 128)):
        m = cat.model(name)
        for mb, tp, add in ((1, 1, 0), (2, 1, extra), (2, 4, extra / 4)):
            base = activation_bytes_per_layer(m, 4096, mb, tp=tp, dropout=False, moe_layer=False)
            got = activation_bytes_per_layer(
                m, 4096, mb, tp=tp, dropout=False, moe_layer=False, attention_output_copy=True
            )
            assert got - base == pytest.approx(4096 * mb * add)
        kw = dict(tp=1, dropout=False, moe_layer=False, recompute="selective")
        assert activation_bytes_per_layer(m, 4096, 2, attention_output_copy=True, **kw) == activation_bytes_per_layer(
            m, 4096, 2, **kw
        )
