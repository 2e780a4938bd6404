"""Operator-level roofline: field cases (decode, large GEMM), sharding, MoE/MLA bytes, and properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog.schemas import StackChoices
from hnplan.compute import (
    achievable_hbm_Bps,
    gemm_flops_per_s,
    gemm_roofline,
    operator_columns,
    operator_table,
    param_counts,
    quantisation_efficiency,
    roofline_time_s,
    totals,
    training_stage_time_s,
)
from hnplan.errors import InputError, PlanRuleError


def test_llama31_70b_decode_batch1_is_weight_streaming(cat):
    """Decode at batch 1 reads every weight once: memory-bound, time within 10% of weight bytes / HBM bandwidth."""
    m, acc = cat.model("llama3.1-70b"), cat.accelerator("h100-sxm")
    df = operator_table(m, acc, "decode", 1, 1024, kv_len=1024)
    t = totals(df)
    assert set(df.loc[df["kind"] == "gemm", "bound"]) == {"memory"}
    weight_bytes = 2 * (param_counts(m).total - param_counts(m).embedding)  # bf16; only one embedding row is read
    ideal = weight_bytes / achievable_hbm_Bps(acc)
    assert t["time_s"] == pytest.approx(ideal, rel=0.10)
    assert t["time_s"] > ideal  # KV cache, activations and kernel overheads only add


def test_large_square_bf16_gemm_on_h100_is_compute_bound(cat):
    acc = cat.accelerator("h100-sxm")
    g = gemm_roofline(acc, "bf16", 8192, 8192, 8192)
    assert g["bound"] == "compute"
    assert g["intensity"] == pytest.approx(2 * 8192**3 / (3 * 8192**2 * 2))  # 2731 FLOP/byte >> ridge ~263
    # the GEMM law (Hopper parameters fitted on the H200 sweep): 8192 tiles of 64 x 128 over 132 SMs with a
    # balanced tail (wave weight 0), each paying a 40.4-element K prologue/epilogue, at 0.737 of 989.4 TFLOP/s;
    # memory 3 x 8192^2 x 2 B / (3.35 TB/s x 0.9) = 133.5 us, combined with p = 3.43; launch 2.85 us
    t_c = 2 * 8192**2 * (8192 + 40.4) / (989.4e12 * 0.737)
    t_m = 3 * 8192**2 * 2 / (3.35e12 * 0.9)
    assert g["compute_time_s"] == pytest.approx(t_c, rel=1e-9)
    assert g["time_s"] == pytest.approx((t_c**3.43 + t_m**3.43) ** (1 / 3.43) + 2.85e-6, rel=1e-9)
    assert g["tflops"] == pytest.approx(724.1, abs=0.5)  # the H200 measured 690 on this shape (same die)


def test_small_gemm_is_memory_bound_and_wave_quantised(cat):
    acc = cat.accelerator("h100-sxm")
    assert gemm_roofline(acc, "bf16", 1, 8192, 8192)["bound"] == "memory"
    # the quantisation function itself: 133 output tiles of 128 x 128 on 132 SMs, a second wave with one tile
    q = quantisation_efficiency(128 * 133, 128, 8192, 1, (128, 128, 64), acc.compute_units)
    assert q == pytest.approx(133 / 264)


def test_accelerators_without_sm_count_or_tile_have_no_wave_term(cat):
    # every catalogued chip with a tile has an SM count now: a GB200 without one stands in for the code path
    gb200, ascend = cat.accelerator("gb200").model_copy(update={"compute_units": None}), cat.accelerator("ascend-910c")
    assert ascend.gemm_tile_mnk is None
    # tile padding only (200 rows in 4 tiles of 64 = 256 rows) and the K prologue (139.2 on Blackwell), no wave term
    assert gemm_flops_per_s(gb200, "bf16", 200, 128, 4096) == pytest.approx(
        2500e12 * 0.669 * 200 / 256 * 4096 / (4096 + 139.2)
    )
    # ascend-910c: no law fields, the measured-or-assumed large-GEMM fraction for every shape: bf16 at the
    # assumed 0.70 of 2 x 353.9 = 707.8 TFLOP/s (msmodeling's die profile), int8 at the measured 0.774 of 1,504
    assert gemm_flops_per_s(ascend, "bf16", 1, 7, 3) == pytest.approx(707.8e12 * 0.7)
    assert gemm_flops_per_s(ascend, "int8", 1, 7, 3) == pytest.approx(1504e12 * 0.774)


def test_decode_intensity_grows_with_batch(cat):
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    ints = []
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        t = totals(operator_table(m, acc, "decode", b, 2048))
        ints.append(t["flops"] / t["bytes"])
    assert all(b > a for a, b in zip(ints, ints[1:]))
    gemm = [operator_table(m, acc, "decode", b, 2048).query("name == 'mlp_up'")["intensity"].iloc[0] for b in (1, 64)]
    assert gemm[1] > 50 * gemm[0]


def test_kv_cache_bytes_gqa_and_mla(cat):
    acc = cat.accelerator("h100-sxm")
    # GQA (Llama 3.1 8B): 2 x 8 KV heads x 128 x 2 bytes per cached token per layer
    att = [
        operator_table(cat.model("llama3.1-8b"), acc, "decode", 4, 1, kv_len=k).query("name == 'attention'")
        for k in (1000, 2000)
    ]
    assert float(att[1]["bytes"].iloc[0] - att[0]["bytes"].iloc[0]) == pytest.approx(4 * 1000 * 2 * 8 * 128 * 2)
    # MLA (DeepSeek-V3): the 512 + 64 latent, shared by all heads (absorbed decode)
    att = [
        operator_table(cat.model("deepseek-v3"), acc, "decode", 4, 1, kv_len=k, tp=8).query("name == 'attention'")
        for k in (1000, 2000)
    ]
    assert float(att[1]["bytes"].iloc[0] - att[0]["bytes"].iloc[0]) == pytest.approx(4 * 1000 * 576 * 2)


def test_moe_reads_only_touched_experts_at_small_batch(cat):
    m, acc = cat.model("deepseek-v3"), cat.accelerator("h200-sxm")
    gate_up_w = 7168 * 2 * 2048 * 2  # gate and up projections of one expert in bf16

    def expert_up(batch):
        df = operator_table(m, acc, "decode", batch, 1024, ep=8)
        return df[df["name"] == "expert_up"].iloc[0]

    # one token picks 8 of 256 experts; with ep = 8 the 32 local experts see 8 tokens' choices
    touched = 32 * (1 - (1 - 8 / 256) ** 8)
    acts = 8 * 7168 * 2 + 8 * 2 * 2048 * 2  # 8 expert rows in, gate+up out (bf16)
    assert expert_up(1)["bytes"] - acts == pytest.approx(touched * gate_up_w, rel=1e-9)
    up = expert_up(4096)
    assert up["bytes"] > 32 * gate_up_w  # every one of the 32 local experts' gate+up weights is read


def test_tensor_parallel_conserves_model_flops(cat):
    """Megatron sharding: per-GPU model FLOPs x tp = unsharded FLOPs (no replicated matmuls in Llama)."""
    m, acc = cat.model("llama3.1-70b"), cat.accelerator("h100-sxm")
    one = totals(operator_table(m, acc, "train", 1, 4096, convention="model"))["flops"]
    eight = totals(operator_table(m, acc, "train", 1, 4096, tp=8, convention="model"))["flops"]
    assert 8 * eight == pytest.approx(one, rel=1e-12)
    cp2 = totals(operator_table(m, acc, "train", 1, 4096, cp=2, convention="model"))["flops"]
    assert 2 * cp2 == pytest.approx(one, rel=1e-12)


def test_executed_attention_is_causal_and_flash_backward(cat):
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    ex = operator_table(m, acc, "train", 1, 8192).query("name == 'attention'").set_index("phase")["flops"]
    mo = (
        operator_table(m, acc, "train", 1, 8192, convention="model")
        .query("name == 'attention'")
        .set_index("phase")["flops"]
    )
    assert ex["fwd"] == pytest.approx(mo["fwd"] / 2) == pytest.approx(4 * 8192**2 * 4096 / 2)
    assert ex["bwd"] == pytest.approx(2.5 * ex["fwd"])
    assert mo["bwd"] == pytest.approx(2 * mo["fwd"])


def test_fp8_gemms_are_faster_and_need_an_fp8_peak(cat):
    m = cat.model("llama3.1-8b")
    h100 = cat.accelerator("h100-sxm")
    bf16 = totals(operator_table(m, h100, "train", 1, 4096))["time_s"]
    fp8 = totals(operator_table(m, h100, "train", 1, 4096, dtype="fp8"))["time_s"]
    assert 0.5 < fp8 / bf16 < 0.9  # GEMMs at 2x peak x (0.709 / 0.803); attention and element-wise stay bf16
    with pytest.raises(InputError, match="no fp8 peak"):
        operator_table(m, cat.accelerator("a100-sxm-80gb"), "train", 1, 4096, dtype="fp8")


def test_stage_time_shrinks_with_pipeline_stages(cat):
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    one = training_stage_time_s(m, acc, 1, 4096)
    assert one == pytest.approx(totals(operator_table(m, acc, "train", 1, 4096))["time_s"], rel=1e-12)
    four = training_stage_time_s(m, acc, 1, 4096, pp=4)
    assert one / 4 < four < one / 2  # 8 layers + the LM head on the last stage


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(phase="backward"), "train, prefill, decode"),
        (dict(recompute="some"), "none, selective, full"),
        (dict(dtype="fp6"), "allowed"),
    ],
)
def test_bad_input_names_the_allowed_values(cat, kwargs, needle):
    args = dict(phase="train", batch=1, seq_len=128) | kwargs
    with pytest.raises(InputError, match=needle):
        operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), **args)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(tp=3), "tp = 3 does not divide the 32 attention heads"),
        (dict(ep=2), "ep = 2 needs a number of experts divisible by it; llama3.1-8b has no experts"),
    ],
)
def test_a_split_the_model_forbids_is_a_plan_rule_error(cat, kwargs, needle):
    args = dict(phase="train", batch=1, seq_len=128) | kwargs
    with pytest.raises(PlanRuleError, match=needle):
        operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), **args)


pos = st.floats(1e3, 1e15, allow_nan=False)


@given(f=pos, b=pos, rate=pos, bw=pos, df=st.floats(1.0, 100.0), db=st.floats(1.0, 100.0))
def test_roofline_time_monotone(f, b, rate, bw, df, db):
    t = roofline_time_s(f, b, rate, bw)
    assert roofline_time_s(f * df, b, rate, bw) >= t
    assert roofline_time_s(f, b * db, rate, bw) >= t
    assert roofline_time_s(f, b, rate * df, bw) <= t
    assert roofline_time_s(f, b, rate, bw * db) <= t


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 20000),
    n=st.integers(1, 20000),
    k=st.integers(1, 20000),
    dm=st.integers(0, 5000),
    dn=st.integers(0, 5000),
    acc_id=st.sampled_from(["h100-sxm", "gb200", "ascend-910c", "mi300x"]),
    exposed=st.sampled_from([None, 0.5, 1.0]),
)
def test_gemm_time_never_decreases_when_the_gemm_grows(cat, m, n, k, dm, dn, acc_id, exposed):
    # except by the split-K reduction: a shape that gains enough tiles to fill the SMs stops splitting K and
    # stops paying it (docs/compute.md, Limits; cuBLAS on the H200 does the same: Llama 3.1 8B TP8 qkv takes
    # 15.8 us at 128 tokens and 12.3 us at 512, data/reference/h200_gemm_bf16.csv)
    # with the output write exposed after the K loop as well (gemm_output_exposed, DeepGEMM's and TileLang's kernels)
    acc = cat.accelerator(acc_id).model_copy(update={"gemm_output_exposed": exposed})
    slack = (acc.gemm_splitk_us or 0.0) * 1e-6
    t = gemm_roofline(acc, "bf16", m, n, k)["time_s"]
    assert gemm_roofline(acc, "bf16", m + dm, n, k)["time_s"] >= t * (1 - 1e-12) - slack
    assert gemm_roofline(acc, "bf16", m, n + dn, k)["time_s"] >= t * (1 - 1e-12) - slack


def test_the_split_k_drop_is_the_documented_one(cat):
    # H100, m = 2113, k = 2048: at n = 128 34 tiles split K in two and pay the 3.09 us reduction; at n = 129 the
    # 68 tiles run unsplit: the time falls by less than the reduction
    acc = cat.accelerator("h100-sxm")
    t128 = gemm_roofline(acc, "bf16", 2113, 128, 2048)["time_s"]
    t129 = gemm_roofline(acc, "bf16", 2113, 129, 2048)["time_s"]
    assert t128 == pytest.approx(9.845e-6, rel=1e-3) and t129 == pytest.approx(9.230e-6, rel=1e-3)
    assert 0 < t128 - t129 < acc.gemm_splitk_us * 1e-6


@settings(max_examples=20, deadline=None)
@given(scale=st.floats(1.0, 8.0), phase=st.sampled_from(["train", "prefill", "decode"]), batch=st.integers(1, 64))
def test_pass_time_never_increases_when_a_peak_grows(cat, scale, phase, batch):
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    faster_flops = acc.model_copy(update={"dense_tflops": {k: v * scale for k, v in acc.dense_tflops.items()}})
    faster_hbm = acc.model_copy(update={"hbm_bw_TBps": acc.hbm_bw_TBps * scale})
    t = totals(operator_table(m, acc, phase, batch, 512))["time_s"]
    assert totals(operator_table(m, faster_flops, phase, batch, 512))["time_s"] <= t * (1 + 1e-12)
    assert totals(operator_table(m, faster_hbm, phase, batch, 512))["time_s"] <= t * (1 + 1e-12)
    assert not math.isnan(t) and np.isfinite(t)


@pytest.mark.parametrize(
    "model,phase,batch,seq,kw",
    [
        ("deepseek-v3", "decode", 37, 2176, dict(kv_len=2176, tp=8, ep=8)),
        ("deepseek-v3", "prefill", 2, 2048, dict(tp=8, dtype="fp8")),
        ("llama3.1-70b", "decode", 1, 1024, dict(kv_len=1024, tp=4, dtype="fp8")),
        ("llama3.1-8b", "train", 2, 4096, dict(recompute="selective")),
    ],
)
def test_operator_columns_are_the_tables_numbers(cat, model, phase, batch, seq, kw):
    """The serving planner's frame-free path: the same rows in the same order, so the same totals to the bit."""
    m, acc = cat.model(model), cat.accelerator("h100-sxm")
    df = operator_table(m, acc, phase, batch, seq, **kw)
    cols = operator_columns(m, acc, phase, batch, seq, **kw)
    for k in ("count", "flops", "bytes", "compute_time_s", "memory_time_s", "time_s"):
        assert np.array_equal(cols[k], df[k].to_numpy()), k
    assert list(cols["kind"]) == list(df["kind"]) and list(cols["bound"]) == list(df["bound"])
    assert totals(cols) == totals(df)


@pytest.mark.parametrize(
    "model,phase,kw",
    [
        ("llama3.1-70b", "prefill", {}),
        ("llama3.1-8b", "train", {"tp": 2, "recompute": "full", "dtype": "fp8", "stack": "megatron-core"}),
        ("deepseek-v3", "decode", {"tp": 8, "kv_len": 2048, "attention": "unfused"}),
    ],
)
def test_the_roofline_answer_is_the_operator_table_without_the_frame(cat, model, phase, kw):
    """`hnplan roofline` reads the operator table's columns (no pandas); its rows, totals and inputs are the frame's,
    value for value and type for type (the JSON is the same bytes)."""
    from hnplan.compute.operators import operator_table, table_attrs, totals
    from hnplan.planning.roofline import OP_KEYS, roofline_answer

    ans = roofline_answer(model, "h100-sxm", phase, 2, 4096, catalog=cat, **kw)
    if "stack" in kw:
        st = cat.stack(kw["stack"])
        kw = dict(kw, stack=StackChoices(**{k: getattr(st, k) for k in StackChoices.model_fields}))
    m, acc = cat.model(model), cat.accelerator("h100-sxm")
    df = operator_table(m, acc, phase, 2, 4096, **kw)
    assert ans["ops"] == df[list(OP_KEYS)].to_dict("records")
    assert [type(v) for v in ans["ops"][0].values()] == [
        type(v) for v in df[list(OP_KEYS)].to_dict("records")[0].values()
    ]
    assert {k: ans[k] for k in totals(df)} == totals(df)
    assert table_attrs(m, acc, phase, 2, 4096, **kw) == {k: v for k, v in df.attrs.items() if k != "units"}
