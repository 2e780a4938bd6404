"""Unfused attention (materialised scores, Megatron-LM before FlashAttention): the operators by hand,
never faster than FlashAttention, the added time growing with the sequence, the score activations in
the planner's memory term, and the `--attention` flag."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.compute import operator_table, totals, training_stage_time_s
from hnplan.errors import InputError
from hnplan.memory import activation_bytes_per_layer, training_memory
from hnplan.planning.training import MEGATRON_2021, ParallelPlan, StackChoices, estimate_training_step
from hnplan.planning.training.components import memory_recipe


@pytest.fixture(scope="module")
def gpt(cat):
    return cat.model("megatron-1.7b")  # h 2304, 24 heads of 96, GELU, learned positions


@pytest.fixture(scope="module")
def a100(cat):
    return cat.accelerator("a100-sxm-80gb")


def test_unfused_operators_by_hand(gpt, a100):
    # b = 2 sequences of s = 128 tokens, tp = 2: g = b x heads / tp = 24 (sequence, head) pairs of d = 96
    b, s, tp, d = 2, 128, 2, 96
    g = b * 24 // tp
    e = g * s * s  # score elements
    df = operator_table(gpt, a100, "train", b, s, tp=tp, recompute="selective", attention="unfused")
    rows = df.set_index(["name", "phase"])
    assert "attention" not in df["name"].values  # the fused kernel is replaced
    # QK^T: [s x d] x [d x s] per pair, the full matrix (no causal skipping); reads Q, K, writes the scores
    qk = rows.loc[("attn_scores", "fwd")]
    assert qk["flops"] == 2 * g * s * s * d
    assert qk["bytes"] == 2 * (g * s * d + g * d * s + e)
    assert (qk["m"], qk["n"], qk["k"]) == (s, s, d)
    # dQ = dS K ([s x s] x [s x d]) and dK^T = Q^T dS ([d x s] x [s x s]): same FLOPs and bytes as the forward
    for grad, shape in (("attn_scores_grad_q", (s, d, s)), ("attn_scores_grad_k", (d, s, s))):
        r = rows.loc[(grad, "bwd")]
        assert (r["flops"], r["bytes"], (r["m"], r["n"], r["k"])) == (2 * g * s * s * d, qk["bytes"], shape)
    # softmax: reads the causal lower triangle (2 B x 1/2), writes the full row (2 B); backward reads the
    # gradient and the output on the triangle (4 B x 1/2) and writes the full row (2 B)
    assert rows.loc[("attn_softmax", "fwd"), "bytes"] == 3 * e
    assert rows.loc[("attn_softmax", "bwd"), "bytes"] == 4 * e
    # dropout: read 2 B, write 2 B + a 1-byte mask; backward read 2 B + mask 1 B, write 2 B
    assert rows.loc[("attn_dropout", "fwd"), "bytes"] == 5 * e
    assert rows.loc[("attn_dropout", "bwd"), "bytes"] == 5 * e
    # AV: [s x s] x [s x d]; reads the probabilities and V, writes the context
    av = rows.loc[("attn_context", "fwd")]
    assert av["flops"] == 2 * g * s * d * s
    assert av["bytes"] == 2 * (e + g * s * d + g * s * d)
    # the permute of the context to [s, b, h]: read + write, backward twice that
    assert rows.loc[("attn_context_copy", "fwd"), "bytes"] == 2 * 2 * g * s * d
    assert rows.loc[("attn_context_copy", "bwd"), "bytes"] == 2 * 2 * 2 * g * s * d
    # selective recomputation re-runs the core (2 GEMMs, softmax, dropout), not the copy
    rc = set(df.loc[df["phase"] == "recompute", "name"])
    assert rc == {"attn_scores", "attn_softmax", "attn_dropout", "attn_context"}
    # the score passes are memory-bound on an A100, and the QK^T GEMM at d = 96 too (intensity ~ d)
    assert set(df.loc[df["kind"] == "attention-elementwise", "bound"]) == {"memory"}
    assert qk["bound"] == "memory"
    # inference has no dropout
    pre = operator_table(gpt, a100, "prefill", b, s, tp=tp, attention="unfused")
    assert "attn_dropout" not in pre["name"].values and "attn_softmax" in pre["name"].values


def test_model_flops_do_not_depend_on_the_attention_kernel(gpt, a100):
    # the model convention (PaLM / Megatron Eq. 3) counts the same work whichever kernel runs it
    f = [
        totals(operator_table(gpt, a100, "train", 4, 2048, tp=2, recompute="full", convention="model", attention=a))[
            "flops"
        ]
        for a in ("flash", "unfused")
    ]
    assert f[0] == pytest.approx(f[1], rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(["megatron-1.7b", "megatron-18.4b", "llama3.1-8b", "gpt3-175b"]),
    seq=st.sampled_from([256, 512, 1024, 2048, 4096, 8192]),
    mb=st.sampled_from([1, 2, 4]),
    tp=st.sampled_from([1, 2, 8]),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_unfused_is_never_faster_than_flash(cat, a100, model, seq, mb, tp, recompute):
    m = cat.model(model)
    t = {
        a: training_stage_time_s(m, a100, mb, seq, tp=tp, pp=4, recompute=recompute, attention=a)
        for a in ("flash", "unfused")
    }
    assert t["unfused"] > t["flash"]
    pre = {
        a: totals(operator_table(m, a100, "prefill", mb, seq, tp=tp, attention=a))["time_s"]
        for a in ("flash", "unfused")
    }
    assert pre["unfused"] > pre["flash"]


@settings(max_examples=20, deadline=None)
@given(
    model=st.sampled_from(["megatron-1.7b", "megatron-39.1b", "llama3.1-70b"]),
    s1=st.sampled_from([256, 512, 1024, 2048, 4096]),
    factor=st.sampled_from([2, 4]),
    tp=st.sampled_from([1, 8]),
)
def test_added_time_grows_with_the_sequence(cat, a100, model, s1, factor, tp):
    m = cat.model(model)

    def added(s):  # extra time of the materialised scores for one micro-batch of one sequence
        t = {
            a: training_stage_time_s(m, a100, 1, s, tp=tp, recompute="selective", attention=a)
            for a in ("flash", "unfused")
        }
        return t["unfused"] - t["flash"]

    s2 = s1 * factor
    assert added(s2) > added(s1) > 0
    if s1 >= 2048:  # past the per-kernel overheads the score work is s x s: per token it grows with s
        assert added(s2) / s2 > 1.5 * added(s1) / s1


def test_planner_memory_keeps_the_scores_with_unfused_attention(cat):
    # Korthikanti et al. 2022: 5 a s / h bytes per element of s b h (softmax 2, mask 1, dropout output 2)
    m, s, b, tp = cat.model("megatron-18.4b"), 2048, 2, 8
    plan = ParallelPlan(tp=tp, pp=2, dp=2, microbatch_size=b, recompute="none", zero_stage=0)
    est = {
        o.attention: estimate_training_step(m, "dgx-a100-hdr", 32, plan, s, 16, choices=o, catalog=cat)
        for o in (StackChoices(), MEGATRON_2021)
    }
    per_layer = activation_bytes_per_layer(m, s, b, tp, flash_attention=False) - activation_bytes_per_layer(
        m, s, b, tp, flash_attention=True
    )
    assert per_layer == 5 * m.heads * s * s * b / tp
    ref = training_memory(
        m,
        s,
        b,
        tp,
        2,
        2,
        1,
        1,
        0,
        "none",
        est["unfused"].num_microbatches,
        flash_attention=False,
        recipe=memory_recipe("bf16"),
        sequence_parallel=False,
        catalog=cat,
    )
    assert est["unfused"].memory_per_gpu_bytes == pytest.approx(ref.total_bytes, rel=1e-6)
    assert est["unfused"].memory_per_gpu_bytes > est["flash"].memory_per_gpu_bytes
    assert est["unfused"].step_time_s > est["flash"].step_time_s


def test_unknown_attention_is_an_input_error(gpt, a100):
    with pytest.raises(InputError, match="flash, unfused"):
        operator_table(gpt, a100, "train", 1, 2048, attention="xformers")
    with pytest.raises(InputError, match="flash, unfused"):
        estimate_training_step(gpt, "dgx-a100-hdr", 8, ParallelPlan(dp=8), 2048, 8, overrides=dict(attention="x"))
    with pytest.raises(ValueError, match="flash"):  # the schema refuses it too (pydantic)
        StackChoices(attention="x")


def test_cli_attention_flag():
    argv = [
        "train",
        "--model",
        "megatron-1.7b",
        "--system",
        "dgx-a100-hdr",
        "--gpus",
        "8",
        "--tp",
        "1",
        "--pp",
        "1",
        "--dp",
        "8",
        "--seq-len",
        "2048",
        "--global-batch-size",
        "64",
        "--microbatch-size",
        "4",
        "--virtual-stages",
        "1",
        "--recompute",
        "full",
        "--zero",
        "0",
        "--json",
    ]
    runner = CliRunner()
    out = {a: json.loads(runner.invoke(app, argv + ["--attention", a]).stdout) for a in ("flash", "unfused")}
    assert out["unfused"]["step_time_s"] > out["flash"]["step_time_s"]
    assert out["unfused"]["hardware_flops_per_token"] == out["flash"]["hardware_flops_per_token"]
    res = runner.invoke(app, argv + ["--attention", "xformers"])
    assert res.exit_code == 2 and "flash, unfused" in " ".join(res.stderr.split())
