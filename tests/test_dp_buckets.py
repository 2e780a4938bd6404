"""The data-parallel bucket that stays exposed at the edges of a step, laid out as Megatron-Core's
``_ParamAndGradBuffer`` does (``megatron/core/distributed/param_and_grad_buffer.py``): parameters walked from the
last registered, a bucket closed after the parameter that brings it to ``bucket_size`` elements, a tied
embedding's ``shared_embedding`` weight in a bucket of its own at PP > 1."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog import load_catalog
from hnplan.planning.training import make_job
from hnplan.planning.training.dp_buckets import edge_bucket_bytes

CAT = load_catalog()
LLAMA = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "bf16", CAT)
LLAMA_FP8 = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "fp8", CAT, overrides={"fp8_params": True})
EMB_8B = 128256 * 4096  # Llama 3.1 8B input embedding [parameters]


def test_gpt3_tied_embedding_bucket():
    # GPT-3 175B ties its output layer to the input embedding (50,257 x 12,288) and learns its positions
    # (2,048 x 12,288). At TP 8, PP 8 the first stage's embedding shard, 77,194,752 parameters, is
    # ``shared_embedding`` and closes a bucket of its own: the edge bucket is the shard alone.
    job = make_job("gpt3-175b", "hgx-h100-ib-ndr", 64, 2048, 64, "bf16", CAT)
    shard = 50257 * 12288 / 8
    assert [float(x) for x in edge_bucket_bytes(job, 8, 8, 40_000_000, 2.0)] == pytest.approx([2 * shard] * 2)
    # at PP 1 the weight is not marked shared, but with 40M buckets layer 0's input norm (12,288), linear_proj
    # (12,288^2 / 8 = 18,874,368) and the position table (25,165,824), 44,052,480 >= 40M, close the bucket
    # before it: the embedding shard is again alone
    assert [float(x) for x in edge_bucket_bytes(job, 8, 1, 40_000_000, 2.0)] == pytest.approx([2 * shard] * 2)
    # with 50M buckets they ride with it: 77,194,752 + 44,052,480
    assert float(edge_bucket_bytes(job, 8, 1, 50_000_000, 2.0)[0]) == pytest.approx(2 * (shard + 44052480))


def test_tp_shards_the_walk():
    # Llama 3.1 8B at TP 2, PP 1, 134,217,728-parameter buckets: every GEMM weight and the embedding halve
    # (per layer fc2 29,360,128, fc1 58,720,256, qkv 12,582,912, proj 8,388,608, two norms of 4,096: 109.06M).
    # Walked by hand from the output layer (262.7M, alone): final norm, layer 31 and layer 30's fc2 (138.4M);
    # then every three layers two buckets, (fc1 and the rest of layer k, fc2 and fc1 of k - 1) 167.8M and
    # (the rest of k - 1, all of k - 2, fc2 of k - 3) 159.4M, from k = 30 down to k = 3, whose second bucket
    # ends with layer 0's fc2: layer 0's fc1, qkv, proj and norms (79.7M) stay with the embedding shard
    # (262.7M), 342,368,256 parameters.
    rest = 12582912 + 8388608 + 2 * 4096
    edge = 58720256 + rest + EMB_8B / 2
    assert edge == 342368256
    assert float(edge_bucket_bytes(LLAMA, 2, 1, 134_217_728, 2.0)[0]) == pytest.approx(2 * edge)


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8]),
    bucket=st.integers(min_value=1_000_000, max_value=4_000_000_000),
)
def test_edge_bucket_bounds(tp, pp, bucket):
    # bf16: the embedding shard and what the walk left before it, less than a bucket (it would have closed);
    # fp8 parameters: the last fp8 bucket is less than a bucket plus its largest weight (linear_fc1), and every
    # bf16 parameter of the stage rides with it (at least the embedding shard)
    shard = EMB_8B / tp
    g, a = (float(x) for x in edge_bucket_bytes(LLAMA, tp, pp, bucket, 2.0))
    assert shard <= g / 2 < shard + bucket and a == g
    g8, a8 = (float(x) for x in edge_bucket_bytes(LLAMA_FP8, tp, pp, bucket, 2.0))
    last_fp8 = g8 / 2 - (a8 - g8 / 2)  # reduced 2 (q + b), gathered q + 2 b at 1 fp8 byte
    assert 0 < last_fp8 < bucket + 117440512 / tp
    assert g8 / 2 - last_fp8 >= shard
