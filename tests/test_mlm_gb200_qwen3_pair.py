"""NVIDIA/Megatron-LM's MoE recipe pair: Qwen3-30B-A3B on 16 GB200 in BF16 and MXFP8 at one layout
(examples/moe_recipes/qwen3_30b/gb200, README @ e5ad09802d5f): the published model TFLOP/s as tokens/s at
Megatron-LM's own FLOP count, and the MXFP8 / BF16 ratio as measured and as hnplan gives it (a documented gap:
docs/training.md, "MXFP8 and NVFP4 on Blackwell")."""

import pytest

from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import best_row, run_job

BF16 = "mlm2603-gb200-qwen3-30b-a3b-16-bf16"
MXFP8 = "mlm2603-gb200-qwen3-30b-a3b-16-fp8"
RUNS = {r.id: r for r in training_runs() if r.id in (BF16, MXFP8)}


def megatron_lm_gflop_per_token() -> float:
    """Megatron-LM's model FLOPs per token of Qwen3-30B-A3B at 4,096 tokens (megatron/training/training.py
    num_floating_point_operations @ e5ad09802d5f, the GQA branch), written out: 6 FLOP a weight a token for the
    routed experts (top-8 of SwiGLU 768), the QKV and output projections and the logits (vocabulary 151,936 after
    make_vocab_size_divisible_by 1,187), and 6 x seq x 4,096 for the causal attention core, 48 layers."""
    h, s, layers, vocab = 2048, 4096, 48, 151936
    q, kv = 32 * 128, 4 * 128
    experts = 6 * h * 3 * 768 * 8
    proj = 6 * (h * (q + 2 * kv) + q * h)
    core = 6 * q * s
    return (layers * (experts + proj + core) + 6 * h * vocab) / 1e9


def test_the_published_tflops_are_tokens_at_megatron_lms_count():
    # 10.872 (experts) + 5.436 (projections) + 4.832 (attention core) + 1.867 (logits) = 23.006 GFLOP a token,
    # Megatron-Bridge 25.11's 23.0 (547 model TFLOP/s over 23,766 tokens/s on 8 GB200)
    assert megatron_lm_gflop_per_token() == pytest.approx(23.006, abs=0.001)
    assert 547e3 / 23766 == pytest.approx(megatron_lm_gflop_per_token(), rel=0.001)
    for run_id, tflops in ((BF16, 528.0), (MXFP8, 514.0)):
        assert RUNS[run_id].published == round(tflops * 1e3 / megatron_lm_gflop_per_token())


def test_the_pair_differs_in_precision_and_graphs_only():
    bf16, mxfp8 = (run_job(RUNS[i]) for i in (BF16, MXFP8))
    assert (bf16.dtype, mxfp8.dtype) == ("bf16", "fp8")
    assert bf16.choices.cuda_graph_scope == ()
    assert set(mxfp8.choices.cuda_graph_scope) == {"attn", "moe_router", "moe_preprocess"}
    same = ("grad_reduce_bytes", "dp_grad_reduce", "dp_param_gather", "ep_dispatcher", "moe_host_us_per_kernel")
    assert all(getattr(bf16.choices, k) == getattr(mxfp8.choices, k) for k in same)
    assert bf16.choices.grad_reduce_bytes == 4.0 and not bf16.choices.dp_grad_reduce


def test_the_mxfp8_over_bf16_ratio_as_measured_and_as_hnplan_gives_it():
    # measured: 514.0 / 528.0 = 0.973 (the README), 480.3 / 504.2 = 0.953 (NVIDIA/Megatron-LM pull request 5728's
    # re-measurement); hnplan gives MXFP8 1.12x BF16 (26,705 and 29,828 tokens/s): the documented gap of the MoE
    # MXFP8 path, held in a band so that it cannot drift unnoticed
    assert RUNS[MXFP8].published / RUNS[BF16].published == pytest.approx(514.0 / 528.0, abs=1e-4)
    bf16, mxfp8 = (best_row(RUNS[i])["tokens_per_s_per_gpu"] for i in (BF16, MXFP8))
    assert mxfp8 / bf16 == pytest.approx(1.117, abs=0.03)
    assert bf16 > RUNS[BF16].published and mxfp8 > RUNS[MXFP8].published  # both optimistic, MXFP8 more
