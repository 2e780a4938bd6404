"""What a training step pays once per step or per layer regardless of the work: the distributed optimizer's
buckets and parameter gather bytes, and fp8 current scaling's TP amax all-reduces (docs/training.md,
"What grows with scale")."""

import pandas as pd
import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.planning.training import ParallelPlan, dp_collectives, estimate_training_step
from hnplan.planning.training import collectives as coll
from hnplan.planning.training.dp_buckets import edge_bucket_bytes, param_gather_bytes
from hnplan.planning.training.job import make_job


def test_fp8_param_gather_moves_gemm_weights_as_one_byte(cat):
    # Llama 3.1 8B: per layer QKV 4,096 x (4,096 + 2 x 1,024), output 4,096 x 4,096, MLP 3 x 4,096 x 14,336
    # = 218.1M GEMM weights, 32 layers = 6.98B; embedding and output layer 2 x 128,256 x 4,096 = 1.05B and
    # 65 norms of 4,096 stay bf16; dense parameters 8.03B
    gemm = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)
    rest = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096
    expected = (gemm * 1.0 + rest * 2.0) / (gemm + rest)  # 1.131 bytes per parameter
    fp8 = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, "fp8", cat, choices=StackChoices(fp8_params=True))
    assert param_gather_bytes(fp8)[0] == pytest.approx(expected, rel=1e-4)
    assert expected == pytest.approx(1.131, abs=0.001)
    # bf16 weights (no fp8_params, or bf16 training) gather 2 bytes
    for dtype, ch in (("fp8", StackChoices(fp8_params=False)), ("bf16", StackChoices(fp8_params=True))):
        job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, dtype, cat, choices=ch)
        assert param_gather_bytes(job) == (2.0, 2.0)


def test_amax_all_reduces_of_current_scaling_with_sequence_parallel(cat):
    # per layer two 4-byte all-reduces forward (QKV and MLP-up inputs) and two backward (output-projection and
    # MLP-down output gradients) over the TP pair, none under delayed scaling or without TP
    ch = StackChoices(fp8_recipe="current", sequence_parallel=True)
    job = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp8", cat, choices=ch)
    df = pd.DataFrame({"tp": [2, 1, 2], "cp": [1, 1, 1], "microbatch_size": [1, 1, 1]})
    df["recompute"] = ["none", "none", "full"]
    t = coll.fp8_amax_per_microbatch(job, df, 32)
    one = coll.collective_s(job, "allreduce", 4.0, [2], 1)[0]
    assert t[0] == pytest.approx(32 * 4 * one, rel=1e-12)
    assert t[1] == 0.0
    assert t[2] == pytest.approx(32 * 6 * one, rel=1e-12)  # full recomputation casts the forward inputs again
    # NCCL's latency for a 2-rank NVLink ring in LL: baseLat 6.6 us + 2 x (2 - 1) x 0.6 us (tuning.cc)
    assert one == pytest.approx(7.8e-6, rel=0.05)
    delayed = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp8", cat, choices=StackChoices())
    assert not coll.fp8_amax_per_microbatch(delayed, df, 32).any()


def test_recipe_bucket_size_sets_the_exposed_last_bucket(cat):
    # one bucket holding every parameter: nothing is left to hide behind, so the whole reduce-scatter and
    # all-gather are exposed; Megatron-Core's default buckets (max(40M, 1M x dp) = 40M) expose less
    plan = ParallelPlan(tp=1, pp=1, dp=8, zero_stage=1)

    def dp_exposed(**kw):
        ch = StackChoices(dp_bucket_params=kw["bucket"]) if kw else StackChoices()
        est = estimate_training_step("llama3.1-8b", "dgx-b200-ib-ndr", 8, plan, 8192, 8, "bf16", cat, choices=ch)
        return est.breakdown_s["dp_comm_exposed"]

    default, whole = dp_exposed(), dp_exposed(bucket=10**10)
    assert whole > default > 0
    assert dp_exposed(bucket=40_000_000) == pytest.approx(default, rel=1e-12)
    with pytest.raises(ValueError):
        StackChoices(dp_bucket_params=0)


def _dp64_edge(job):
    df = pd.DataFrame(
        {"tp": [1], "dp": [64], "cp": [1], "ep": [1], "zero_stage": [1], "pp": [1], "etp": [1], "num_microbatches": [1]}
    )
    df["virtual_stages"] = 1
    return dp_collectives.dp_comm_exposed(job, df, 10.0, 10.0, 10.0)[0]  # everything else hidden behind a long compute


def test_the_exposed_buckets_hold_the_embedding(cat):
    # Llama 3.1 8B at TP 1, bf16 parameters (one buffer): the input-embedding shard is 128,256 x 4,096 = 525.3M
    # parameters, about four of the recipe's 134.2M-parameter buckets. Megatron-Core walks the parameters from
    # the last registered (output layer 525,336,576; final norm 4,096; then per layer linear_fc2 58,720,256,
    # linear_fc1 117,440,512 and its norm 4,096, linear_qkv 25,165,824 and its norm 4,096, linear_proj
    # 16,777,216) and closes a bucket after the parameter that brings it to 134,217,728: the output layer alone,
    # layer 31's fc2 + fc1 (+ final norm), then (norm, qkv, norm, proj of layer k, fc2, fc1 of layer k - 1),
    # 218.1M each, which leaves layer 0's qkv, proj and two norms (41,951,232) in the embedding's bucket:
    # 567,287,808 gradients reduced after the backward and 1.13 GB of bf16 weights gathered before the forward.
    # With everything else hidden at no slowdown, these two are exposed.
    ov = dict(dp_bucket_params=134217728, fp8_params=False, overlap_gemm_slowdown=0.0)
    job = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "fp8", cat, overrides=ov)
    emb = 128256 * 4096
    edge = emb + 25165824 + 16777216 + 2 * 4096
    assert edge == 567287808
    rs = coll.collective_s(job, "reducescatter", edge * job.choices.grad_reduce_bytes, [64], [1])[0]
    ag = coll.collective_s(job, "allgather", edge * 2.0, [64], [1])[0]
    assert _dp64_edge(job) == pytest.approx(rs + ag, rel=1e-9)
    # a bucket of ~134M parameters alone would expose about a quarter of that
    bucket = 8.03e9 / 60
    one = coll.collective_s(job, "reducescatter", bucket * job.choices.grad_reduce_bytes, [64], [1])[0]
    assert rs > 3 * one
    # buckets larger than the shard (768M): output layer, final norm, layer 31 and layer 30's fc2 (802.2M); layer
    # 30's fc1 to layer 27's fc1 (771.8M); then (layer k's norms, qkv, proj, three whole layers, layer k - 4's
    # fc2 and fc1), 872.4M each, down to layer 3: the last bucket is layer 3's qkv, proj and norms (41,951,232),
    # layers 2 to 0 (3 x 218,112,000) and the embedding, 1,221,623,808 parameters, all bf16
    big = make_job(
        "llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "fp8", cat, overrides={**ov, "dp_bucket_params": 768000000}
    )
    n = 41951232 + 3 * 218112000 + emb
    assert n == 1221623808
    g_bytes, a_bytes = edge_bucket_bytes(big, 1, 1, 768000000, 2.0)
    assert (float(g_bytes), float(a_bytes)) == (2.0 * n, 2.0 * n)


def test_fp8_parameters_expose_every_bf16_parameter_with_the_last_fp8_bucket(cat):
    # Megatron-Core keeps Transformer Engine's fp8 weights in a uint8 buffer of their own and merges every
    # bucket of the bf16 buffer into the group of the last fp8 bucket (param_and_grad_buffer.py
    # partition_buckets, case 3). Llama 3.1 8B at TP 1, PP 1, 134,217,728-parameter buckets: the GEMM weights,
    # walked from the last registered, close a bucket with layer 31's fc2 + fc1 (176,160,768), then with each
    # (qkv, proj of layer k, fc2, fc1 of layer k - 1) (218,103,808), leaving layer 0's qkv + proj (41,943,040)
    # last, not a full bucket; the bf16 buffer holds the embedding and the untied output layer
    # (2 x 525,336,576) and 65 norms of 4,096 (266,240): the group reduces 1,092,882,432 gradients after the
    # backward and gathers 41,943,040 fp8 bytes (delayed scaling, 1 byte) and 1,050,939,392 x 2 bf16 bytes
    # before the forward.
    ov = dict(dp_bucket_params=134217728, fp8_params=True, overlap_gemm_slowdown=0.0)
    job = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "fp8", cat, overrides=ov)
    assert job.choices.fp8_recipe == "delayed"
    last_fp8, bf16 = 25165824 + 16777216, 2 * 525336576 + 65 * 4096
    g = job.choices.grad_reduce_bytes
    assert [float(x) for x in edge_bucket_bytes(job, 1, 1, 134217728, g)] == pytest.approx(
        [(last_fp8 + bf16) * g, last_fp8 * 1.0 + bf16 * 2.0], rel=1e-12
    )
    rs = coll.collective_s(job, "reducescatter", (last_fp8 + bf16) * g, [64], [1])[0]
    ag = coll.collective_s(job, "allgather", last_fp8 * 1.0 + bf16 * 2.0, [64], [1])[0]
    assert _dp64_edge(job) == pytest.approx(rs + ag, rel=1e-9)
    # at PP 2 the first stage holds the embedding and its 16 layers' norms only (the output layer is on the
    # last stage, which finishes its backward first and starts its forward last); its 16 layers walk as at PP 1
    # and leave layer 0's qkv + proj last again
    g2, a2 = edge_bucket_bytes(job, 1, 2, 134217728, g)
    bf16_first = 525336576 + 16 * 8192
    assert (float(g2), float(a2)) == pytest.approx(((last_fp8 + bf16_first) * g, last_fp8 + 2.0 * bf16_first))
