"""Inference memory: KV cache per token for MHA / GQA / MLA, weights at the serving dtype, and the
Llama-3-8B-on-one-H100 serving case."""

import pytest

from hnplan import units
from hnplan.errors import InputError
from hnplan.memory import (
    inference_memory,
    kv_cache_bytes_per_token,
    kv_capacity,
    max_batch,
    weight_bytes_per_gpu,
)


def test_llama2_7b_kv_cache(cat):
    # MHA: 2 x 32 layers x 32 heads x 128 x 2 B = 0.5 MiB per token; 2 GiB at 4,096 tokens
    m = cat.model("llama2-7b")
    assert kv_cache_bytes_per_token(m) == 2 * 32 * 32 * 128 * 2 == 0.5 * units.MiB
    assert inference_memory(m, 1, 4096, overheads=cat.memory_overheads).kv_cache_bytes == 2 * units.GiB


def test_llama3_8b_gqa_kv_cache(cat):
    # GQA: 2 x 32 x 8 KV heads x 128 x 2 B = 128 KiB per token; split over TP down to one head per rank
    m = cat.model("llama3.1-8b")
    assert kv_cache_bytes_per_token(m) == 128 * units.KiB
    assert kv_cache_bytes_per_token(m, tp=8) == 16 * units.KiB
    assert kv_cache_bytes_per_token(m, tp=16) == 16 * units.KiB
    assert kv_cache_bytes_per_token(m, "fp8") == 64 * units.KiB


def test_deepseek_v3_mla_cache(cat):
    # MLA: 61 layers x (512 latent + 64 RoPE key) x 2 B = 70,272 B per token, the same on every TP rank
    m = cat.model("deepseek-v3")
    assert kv_cache_bytes_per_token(m) == 61 * (512 + 64) * 2 == 70272
    assert kv_cache_bytes_per_token(m, tp=8) == 70272
    # the same model with plain MHA over its 128 heads would cache 61 x 2 x 128 x 128 x 2 B, 57x more
    assert 2 * 61 * 128 * 128 * 2 / 70272 == pytest.approx(56.9, abs=0.1)


@pytest.mark.parametrize(
    "mid,published", [("llama3.1-8b", 131072), ("llama3.1-70b", 327680), ("gpt3-175b", 4718592), ("deepseek-v3", 70272)]
)
def test_matches_reference_table(cat, mid, published):
    # kv_cache_bytes_per_token_bf16 of data/reference/models.csv
    assert kv_cache_bytes_per_token(cat.model(mid)) == published


def test_weights_at_serving_dtypes(cat):
    m = cat.model("llama3.1-8b")
    assert units.to_GiB(weight_bytes_per_gpu(m)) == pytest.approx(14.96, abs=0.005)
    # Below 2 bytes the embedding and the LM head (128,256 x 4,096 each) stay bf16, the rest quantised:
    # fp8 = (8,030,261,248 - 1,050,673,152) x 1 + 1,050,673,152 x 2 = 9,080,934,400 bytes
    vocab = 2 * 128256 * 4096
    assert weight_bytes_per_gpu(m, "fp8") == (8030261248 - vocab) * 1 + vocab * 2 == 9080934400
    assert weight_bytes_per_gpu(m, "int4") == (8030261248 - vocab) * 0.5 + vocab * 2
    assert weight_bytes_per_gpu(m, "fp8", tp=4) == weight_bytes_per_gpu(m, "fp8") / 4
    assert weight_bytes_per_gpu(m, tp=4) == weight_bytes_per_gpu(m) / 4
    with pytest.raises(InputError, match="int4"):
        weight_bytes_per_gpu(m, "fp64")


def test_llama3_8b_serving_on_one_h100(cat):
    # vLLM on one H100 80GB at gpu_memory_utilization 0.9: 79.11 GiB x 0.9 = 71.20 GiB usable;
    # weights 14.96 GiB; the rest, less the workspace and CUDA context, is KV cache at 128 KiB/token.
    # Published vLLM profiler log (Llama-3.1-8B-Instruct, H100): KV 54.62 GiB, 447,088 tokens;
    # the figure: about 53 GiB, about 436,000 tokens.
    c = kv_capacity(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), overheads=cat.memory_overheads)
    assert units.to_GiB(c.usable_bytes) == pytest.approx(71.20, abs=0.01)
    assert units.to_GiB(c.weights_bytes) == pytest.approx(14.96, abs=0.005)
    assert c.kv_bytes_per_token == 131072
    assert c.tokens == pytest.approx(447_088, rel=0.01)
    assert c.tokens == pytest.approx(436_000, rel=0.04)
    # the workspace (0.90 GiB) + context (0.40 GiB) against vLLM's activation peak + non-torch 1.24 + 0.35 GiB
    assert units.to_GiB(c.workspace_bytes + c.overhead_bytes) == pytest.approx(1.59, rel=0.2)
    assert max_batch(c, 8192) == c.tokens // 8192


def test_inference_breakdown_sums(cat):
    mem = inference_memory(cat.model("llama3.1-70b"), 16, 8192, tp=4, overheads=cat.memory_overheads)
    assert mem.total_bytes == pytest.approx(sum(mem.parts_bytes().values()))
    assert mem.grads_bytes == mem.optimizer_bytes == 0
    assert mem.kv_cache_bytes == 16 * 8192 * 2 * 80 * 2 * 128 * 2
    with pytest.raises(InputError):
        inference_memory(cat.model("llama3.1-70b"), 0, 8192, overheads=cat.memory_overheads)
