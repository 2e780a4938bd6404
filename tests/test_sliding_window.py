"""Sliding-window attention (gpt-oss): the schema, the operator rows, MFU counts and the KV cache.

Hand-derived values on a two-layer toy (layer 0 sliding with a window of 8, layer 1 full), and properties:
a window at least the sequence equals full attention; a smaller window is never slower.
"""

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hnplan.catalog import load_catalog
from hnplan.catalog.schemas import Model
from hnplan.compute import attention_core_flops_per_token, operator_table, param_counts, totals
from hnplan.compute.parts import training_part_times
from hnplan.memory import inference_memory, kv_cache_bytes_per_token, kv_cache_tokens
from hnplan.planning.inference.passes import sliding_kept

CAT = load_catalog()
TOY = dict(
    id="toy-swa",
    name="toy",
    source="hand-built test model",
    layers=2,
    hidden=64,
    ffn_hidden=128,
    heads=4,
    kv_heads=2,
    head_dim=16,
    vocab=100,
    max_seq=1024,
    activation="swiglu",
    position_embedding="rope",
    dropout=False,
)


def toy(window=8, which="even", **kw) -> Model:
    fields = dict(TOY, **kw)
    if window is not None:
        fields.update(sliding_window=window, sliding_window_layers=which)
    return Model(**fields)


def attn_rows(df):
    return df[df["kind"] == "attention"].set_index(["name", "phase"])


def test_schema_needs_window_and_layers_together():
    with pytest.raises(ValidationError, match="sliding_window and sliding_window_layers go together"):
        Model(**TOY, sliding_window=8)
    with pytest.raises(ValidationError, match="sliding_window and sliding_window_layers go together"):
        Model(**TOY, sliding_window_layers="even")
    with pytest.raises(ValidationError):
        Model(**TOY, sliding_window=8, sliding_window_layers="every-third")


def test_sliding_layer_counts():
    m = toy(layers=5)
    assert m.sliding_layer_count() == 3  # 0, 2, 4
    assert toy(layers=5, which="odd").sliding_layer_count() == 2
    assert toy(layers=5, which="all").sliding_layer_count() == 5
    assert toy(window=None, layers=5).sliding_layer_count() == 0
    assert m.sliding_layer_count(range(1, 3)) == 1


def test_toy_training_flops_by_hand():
    """s = 32, w = 8, 4 heads of 16, one sequence: one full and one sliding layer."""
    acc = CAT.accelerator("h100-sxm")
    ex = attn_rows(operator_table(toy(), acc, "train", 1, 32))
    # full causal: 2 x 4 heads x 32 x 32 pairs x (16 + 16) x 1/2
    assert ex.loc[("attention", "fwd"), "flops"] == 2 * 4 * 32 * 32 * 32 / 2 == 131072
    # sliding, executed: 32 queries x (w - w^2 / 2s) = 32 x 7 keys (whole pairs: 32 x 8 - 8 x 7 / 2 = 228)
    assert ex.loc[("attention_sliding", "fwd"), "flops"] == 2 * 4 * 32 * 7 * 32 == 57344
    assert ex.loc[("attention", "fwd"), "count"] == ex.loc[("attention_sliding", "fwd"), "count"] == 1
    # the backward executes 2.5x (FlashAttention-2)
    assert ex.loc[("attention_sliding", "bwd"), "flops"] == 2.5 * 57344
    # the sliding kernel's longest unit walks 8 keys
    assert ex.loc[("attention_sliding", "fwd"), "n"] == 8
    md = attn_rows(operator_table(toy(), acc, "train", 1, 32, convention="model"))
    assert md.loc[("attention", "fwd"), "flops"] == 2 * 4 * 32 * 32 * 32 == 262144
    assert md.loc[("attention_sliding", "fwd"), "flops"] == 2 * 4 * 32 * 8 * 32 == 65536
    # the MFU count per token agrees: 2 x 4 heads x 32 x (32 + 8 keys) = 10240
    assert attention_core_flops_per_token(toy(), 32) == 10240 == (262144 + 65536) / 32


def test_toy_kv_cache_by_hand():
    m = toy()
    # 2 layers x 2 KV heads x 16 x (K, V) x 2 bytes = 256 bytes a token in every layer
    assert kv_cache_bytes_per_token(m) == 256
    # 32 tokens: the full layer keeps 32 x 128 bytes, the sliding one 8 x 128
    assert kv_cache_tokens(m, 32) * 256 == 32 * 128 + 8 * 128 == 5120
    assert kv_cache_tokens(m, 5) == 5  # shorter than the window: everything kept
    mem = inference_memory(m, 3, 32, overheads=CAT.memory_overheads)
    assert mem.kv_cache_bytes == 3 * 5120
    assert sliding_kept(m, 32) == 0.25 and sliding_kept(toy(window=None), 32) == 1.0


def test_toy_decode_reads_the_window_only():
    acc = CAT.accelerator("h100-sxm")
    a = attn_rows(operator_table(toy(), acc, "decode", 4, 1, kv_len=1000))
    b = attn_rows(operator_table(toy(), acc, "decode", 4, 1, kv_len=8))
    assert a.loc[("attention_sliding", "decode"), "bytes"] == b.loc[("attention_sliding", "decode"), "bytes"]
    assert a.loc[("attention_sliding", "decode"), "n"] == 8
    # 2 x 4 sequences x 4 heads x 8 keys x 32
    assert a.loc[("attention_sliding", "decode"), "flops"] == 2 * 4 * 4 * 8 * 32
    assert a.loc[("attention", "decode"), "n"] == 1000


def test_gpt_oss_mfu_count_matches_the_model_convention_table():
    m = CAT.model("gpt-oss-20b")
    df = operator_table(m, CAT.accelerator("h100-sxm"), "train", 1, 8192, convention="model")
    a = df[df["kind"] == "attention"]
    assert (a["flops"] * a["count"]).sum() / 8192 == pytest.approx(3 * attention_core_flops_per_token(m, 8192))
    # 12 sliding layers at 128 keys a query, 12 full at 8,192
    assert attention_core_flops_per_token(m, 8192) == 2 * 64 * 128 * (12 * 8192 + 12 * 128)


def test_planner_parts_equal_the_table():
    """The planner's per-occurrence MoE layer (parts) is the table's layers' mean: half sliding, half full."""
    m, acc = CAT.model("gpt-oss-20b"), CAT.accelerator("gb200")
    parts = training_part_times(m, acc, pd.DataFrame(dict(microbatch_size=[1], tp=[1], cp=[1], ep=[1])), 8192)
    df = operator_table(m, acc, "train", 1, 8192)
    a = df[(df["kind"] == "attention") & df["phase"].isin(["fwd", "bwd"])]
    assert parts["moe_attn"].iloc[0] == pytest.approx((a["time_s"] * a["count"]).sum() / m.layers, rel=1e-12)


def test_context_parallel_ring_keeps_the_full_layers_only():
    m, acc = CAT.model("gpt-oss-20b"), CAT.accelerator("gb200")
    names = set(operator_table(m, acc, "train", 1, 8192, cp=2)["name"])
    assert {"attention_cp_diagonal", "attention_cp_step", "attention_sliding"} <= names
    assert "attention" not in names


def _attn_time(model, acc, phase, batch, seq, kv_len=None):
    df = operator_table(model, acc, phase, batch, seq, kv_len=kv_len)
    a = df[df["kind"] == "attention"]
    return float((a["time_s"] * a["count"]).sum()), totals(df)


@settings(max_examples=25, deadline=None)
@given(
    s=st.sampled_from([256, 1024, 4096, 8192]),
    extra=st.integers(0, 5000),
    b=st.integers(1, 4),
    acc_id=st.sampled_from(["h100-sxm", "gb200", "b200"]),
)
def test_window_at_least_the_sequence_is_full_attention(s, extra, b, acc_id):
    acc = CAT.accelerator(acc_id)
    full = totals(operator_table(toy(window=None), acc, "train", b, s, convention="executed"))
    swa = totals(operator_table(toy(window=s + extra), acc, "train", b, s, convention="executed"))
    for k in ("flops", "bytes", "time_s"):
        assert swa[k] == pytest.approx(full[k], rel=1e-12)
    full_m = totals(operator_table(toy(window=None), acc, "train", b, s, convention="model"))
    swa_m = totals(operator_table(toy(window=s + extra), acc, "train", b, s, convention="model"))
    assert swa_m["flops"] == pytest.approx(full_m["flops"], rel=1e-12)
    assert attention_core_flops_per_token(toy(window=s + extra), s) == attention_core_flops_per_token(
        toy(window=None), s
    )
    dec_full, _ = _attn_time(toy(window=None), acc, "decode", b, 1, kv_len=s)
    dec_swa, _ = _attn_time(toy(window=s + extra), acc, "decode", b, 1, kv_len=s)
    assert dec_swa == pytest.approx(dec_full, rel=1e-12)
    assert kv_cache_tokens(toy(window=s + extra), s) == s


# 16 heads of 64: at 2,048 tokens and more a training or prefill kernel has b x 16 x s / 128 >= 256 query tiles,
# more than any catalog chip's SMs. Below one wave the attention law splits a kernel's keys over the idle SMs
# (hnplan.compute.gemm.wave_efficiency), and a full kernel's s keys split further than a window's few: there a
# small-shape kernel of a window can come out a few per cent slower than a full one, as the law's split-K
# quantisation makes any kernel's time a sawtooth in its keys; the property is stated where the SMs are full.
WIDE = dict(hidden=1024, ffn_hidden=2048, heads=16, kv_heads=4, head_dim=64)


@settings(max_examples=25, deadline=None)
@given(
    s=st.sampled_from([2048, 4096, 8192]),
    w1=st.integers(1, 9000),
    w2=st.integers(1, 9000),
    b=st.integers(1, 4),
    which=st.sampled_from(["even", "odd", "all"]),
    acc_id=st.sampled_from(["h100-sxm", "gb200", "b200"]),
)
def test_a_smaller_window_is_never_slower(s, w1, w2, b, which, acc_id):
    lo, hi = sorted((w1, w2))
    acc = CAT.accelerator(acc_id)
    for phase, seq, kv in (("train", s, None), ("prefill", s, None), ("decode", 1, s)):
        t_lo, tot_lo = _attn_time(toy(window=lo, which=which, **WIDE), acc, phase, b, seq, kv)
        t_hi, tot_hi = _attn_time(toy(window=hi, which=which, **WIDE), acc, phase, b, seq, kv)
        t_full, _ = _attn_time(toy(window=None, **WIDE), acc, phase, b, seq, kv)
        assert tot_lo["flops"] <= tot_hi["flops"] * (1 + 1e-12)
        assert tot_lo["bytes"] <= tot_hi["bytes"] * (1 + 1e-12)
        assert t_lo <= t_full * (1 + 1e-9) and t_hi <= t_full * (1 + 1e-9)
        if phase != "decode":  # decode's few query tiles split their keys (the sawtooth above): FLOPs and bytes only
            assert t_lo <= t_hi * (1 + 1e-12)
            assert tot_lo["time_s"] <= tot_hi["time_s"] * (1 + 1e-12)
    assert kv_cache_tokens(toy(window=lo, which=which), s) <= kv_cache_tokens(toy(window=hi, which=which), s)


def test_gpt_oss_catalog_entries():
    for mid, layers, params in (("gpt-oss-20b", 24, 20.9), ("gpt-oss-120b", 36, 116.8)):
        m = CAT.model(mid)
        assert (m.sliding_window, m.sliding_window_layers) == (128, "even")
        assert m.sliding_layer_count() == layers // 2
        assert m.params_b_published == params
        assert param_counts(m).total / 1e9 == pytest.approx(params, rel=2e-3)  # the model card's total
        assert not any(k.startswith("heads.sliding") for k in m.assumptions)
    assert kv_cache_tokens(CAT.model("gpt-oss-120b"), 4096) == (4096 + 128) / 2


def test_pipeline_stages_count_their_own_sliding_layers():
    """Three layers on three stages: layers 0 and 2 slide, layer 1 attends to the whole sequence; the slowest
    stage is the full layer's (the middle one, with neither embedding nor head, is compared alone)."""
    from hnplan.compute.operator_rows import _raw_rows, _times

    m, acc = toy(layers=3, window=8, **WIDE), CAT.accelerator("h100-sxm")

    def stage(layers):
        rows = _raw_rows(
            m, "train", 1, 2048, 0, 1, 1, 1, "bf16", "none", "executed", layers=layers, embedding=False, head=False
        )
        attn = [r for r in rows if r[2] == "attention"]
        return {r[0] for r in attn if r[4] > 0}, float(_times(rows, acc, "bf16")[2] @ [r[4] for r in rows])

    assert stage(range(0, 1))[0] == {"attention_sliding"}
    assert stage(range(1, 2))[0] == {"attention"}
    assert stage(range(1, 2))[1] > stage(range(0, 1))[1]


def test_context_parallel_communication_counts_the_full_layers_only():
    """gpt-oss-20b with CP 16 across two H100 servers: the ring's exposed exchange is that of its 12 full layers,
    half of what the same model with every layer full exposes (the sliding layers attend within the rank's chunk
    and the 128 keys before it, whose exchange is not counted)."""
    from hnplan.planning.training import evaluate_plans, search_candidates
    from hnplan.planning.training.job import make_job

    m = CAT.model("gpt-oss-20b")
    fixed = dict(tp=1, pp=1, cp=16, ep=1, dp=1, microbatch_size=1, zero_stage=1, recompute="none")
    exposed = []
    for mm in (m, m.model_copy(update=dict(sliding_window=None, sliding_window_layers=None))):
        job = make_job(mm, "hgx-h100-ib-ndr", 16, 8192, 64, "bf16", CAT)
        exposed.append(evaluate_plans(job, search_candidates(job, fixed))["t_cp_comm_exposed_s"].iloc[0])
    assert exposed[1] > 0 and exposed[0] == pytest.approx(exposed[1] / 2, rel=1e-12)
