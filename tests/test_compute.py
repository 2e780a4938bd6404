"""FLOP counts: the operator table against Megatron-LM Eq. 3 and PaLM's 6N + 12 l h s, exactly; MFU cases."""

import pytest

from hnplan.catalog.schemas import Model
from hnplan.compute import (
    megatron_flops_per_iteration,
    megatron_model_flops_per_iteration,
    megatron_vocab_term,
    mfu,
    operator_table,
    param_counts,
    peak_flops_per_s,
    totals,
    training_flops_per_token,
)


def gpt(layers, hidden, vocab, seq):
    """A GPT-style config as Megatron-LM Eq. 3 assumes: MHA, MLP 4h GeLU, learned positions, tied embeddings."""
    return Model(
        id="gpt-test",
        name="GPT test",
        source="Narayanan et al. SC21 Eq. 3 assumptions",
        layers=layers,
        hidden=hidden,
        ffn_hidden=4 * hidden,
        heads=hidden // 64,
        kv_heads=hidden // 64,
        vocab=vocab,
        max_seq=seq,
        activation="gelu",
        position_embedding="learned",
        tied_embeddings=True,
    )


# the issue's two GPT configs (70M: 6 layers, h 512; 20B: 44 layers, h 6144; GPT-2 vocabulary) and
# Megatron-LM Table 1's 1.7B (24 layers, h 2304, V 51200)
GPT_CONFIGS = [(6, 512, 50257, 2048, 8), (44, 6144, 50257, 2048, 2), (24, 2304, 51200, 2048, 4)]


@pytest.mark.parametrize("layers,hidden,vocab,seq,batch", GPT_CONFIGS)
def test_full_recompute_is_megatron_96_form_exactly(cat, layers, hidden, vocab, seq, batch):
    df = operator_table(
        gpt(layers, hidden, vocab, seq),
        cat.accelerator("h100-sxm"),
        "train",
        batch,
        seq,
        recompute="full",
        convention="model",
    )
    assert totals(df)["flops"] == pytest.approx(
        megatron_flops_per_iteration(batch, seq, layers, hidden, vocab), rel=1e-12
    )


@pytest.mark.parametrize("layers,hidden,vocab,seq,batch", GPT_CONFIGS)
def test_model_flops_are_72_form_with_6BshV_head(cat, layers, hidden, vocab, seq, batch):
    df = operator_table(
        gpt(layers, hidden, vocab, seq), cat.accelerator("h100-sxm"), "train", batch, seq, convention="model"
    )
    f = totals(df)["flops"]
    # hand form: 72 B s l h^2 (1 + s/6h) + 6 B s h V
    hand = 72 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden)) + 6 * batch * seq * hidden * vocab
    assert f == pytest.approx(hand, rel=1e-12)
    assert f == pytest.approx(megatron_model_flops_per_iteration(batch, seq, layers, hidden, vocab), rel=1e-12)
    # the printed 72 form scales the LM head by 72/96: it counts 4.5 B s h V instead of 6 B s h V
    printed = megatron_flops_per_iteration(batch, seq, layers, hidden, vocab, full_recompute=False)
    assert f - printed == pytest.approx(1.5 * batch * seq * hidden * vocab, rel=1e-9)


def test_vocab_term_percentages_of_the_issue():
    assert megatron_vocab_term(6, 512, 50257) == pytest.approx(1.02, abs=0.005)  # ~102% for the 70M model
    assert megatron_vocab_term(44, 6144, 50257) == pytest.approx(0.012, abs=0.0005)  # ~1.2% for the 20B model


def test_llama31_8b_matches_palm_6N_plus_12lhs(cat):
    """GQA + SwiGLU: hand-derived matmul parameters, then PaLM's 6N + 12 l h s per token."""
    m = cat.model("llama3.1-8b")
    h, layers, s = 4096, 32, 8192
    per_layer = h * h + 2 * h * 1024 + h * h + 3 * h * 14336  # q, k+v (8 KV heads x 128), o, gate/up/down
    n_matmul = layers * per_layer + 128256 * h  # plus the LM head (input embedding does no FLOPs)
    assert n_matmul == 7_504_658_432  # 8.03B total minus the 0.525B input embedding and norms
    palm = 6 * n_matmul + 12 * layers * h * s
    assert training_flops_per_token(m, s).model == pytest.approx(palm, rel=1e-12)
    df = operator_table(m, cat.accelerator("h100-sxm"), "train", 2, s, convention="model")
    assert totals(df)["flops"] / (2 * s) == pytest.approx(palm, rel=1e-12)
    # with full recomputation the layer stack runs one more forward (the LM head does not)
    full = operator_table(m, cat.accelerator("h100-sxm"), "train", 1, s, convention="model", recompute="full")
    extra = 2 * layers * per_layer + 4 * layers * h * s
    assert totals(full)["flops"] / s == pytest.approx(palm + extra, rel=1e-12)
    assert training_flops_per_token(m, s, "full").hardware == pytest.approx(palm + extra, rel=1e-12)


@pytest.mark.parametrize("model_id", ["mixtral-8x7b", "deepseek-v3", "gpt3-175b", "llama3.1-70b"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_operator_count_equals_closed_form_for_moe_and_mla(cat, model_id, recompute):
    m = cat.model(model_id)
    df = operator_table(m, cat.accelerator("h100-sxm"), "train", 1, 4096, recompute=recompute, convention="model")
    assert totals(df)["flops"] / 4096 == pytest.approx(training_flops_per_token(m, 4096, recompute).hardware, rel=1e-12)


def test_moe_does_only_active_expert_flops(cat):
    """Mixtral: 2 of 8 experts per token; forward FLOPs of the experts = 2 x 2 x 3 h f per token."""
    m = cat.model("mixtral-8x7b")
    df = operator_table(m, cat.accelerator("h100-sxm"), "prefill", 1, 1024)
    experts = df[df["name"].str.startswith("expert_") & (df["kind"] == "gemm")]
    assert (experts["flops"] * experts["count"]).sum() == pytest.approx(32 * 1024 * 2 * 2 * 3 * 4096 * 14336, rel=1e-12)


def test_llama2_7b_mfu_case(cat):
    """9,600 tokens/s per H100 on Llama-2-7B at s = 4096 is ~46% MFU on the 989 TFLOP/s dense peak, and
    half that against the 2:4-sparse 1,979 TFLOP/s datasheet figure."""
    m = cat.model("llama2-7b")
    assert param_counts(m).total == pytest.approx(6.74e9, rel=0.001)
    f = training_flops_per_token(m, 4096).model
    dense = mfu(f, 9600, peak_flops_per_s(cat.accelerator("h100-sxm"), "bf16"))
    # 6N with N = matmul parameters (input embedding excluded) gives 44.7%; counting all 6.74B gives 45.5%
    assert dense == pytest.approx(0.46, abs=0.015)
    assert mfu(f, 9600, 2 * 989.4e12) == pytest.approx(dense / 2, rel=1e-9)
