"""Published training configurations ran, so the memory model must say they fit.

A one-sided check (a configuration that ran needs at most the card's memory): Megatron-LM 2021
(Narayanan et al., SC21, Tables 1 and 2: A100 80GB, fp16 mixed precision, full recomputation,
sequence length 2048) and the NeMo 24.07 performance summary (NVIDIA/NeMo
docs/source/performance/performance_summary.md @ e2de75c15e: H100 80GB, fp8), as transcribed in
data/reference/training_measurements.csv. Unknown micro-batch sizes are taken as 1; the 2021
PTD-P runs predate Megatron's distributed optimizer (ZeRO stage 0), the ZeRO-3 rows are DeepSpeed's.
"""

import pytest

from hnplan.memory import hbm_capacity_bytes, training_memory
from hnplan.memory.zero_working import DEEPSPEED_MAX_LIVE_PARAMS, DEEPSPEED_REDUCE_BUCKET_PARAMS

# run_id, model id, seq_len, tp, pp, dp, cp, mbs, vp, zero, recompute, accounting, accelerator
RUNS = [
    ("megatron21_t1_1.7B", "megatron-1.7b", 2048, 1, 1, 32, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    ("megatron21_t1_7.5B", "megatron-7.5b", 2048, 4, 1, 32, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    ("megatron21_t1_39.1B", "megatron-39.1b", 2048, 8, 2, 32, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    ("megatron21_t1_145.6B", "megatron-145.6b", 2048, 8, 8, 24, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    ("megatron21_t1_529.6B", "megatron-529.6b", 2048, 8, 35, 9, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    ("megatron21_t1_1008.0B", "megatron-1t", 2048, 8, 64, 6, 1, 1, 1, 0, "full", "fp32-grad-accum", "a100-sxm-80gb"),
    (
        "megatron21_t2_PTD-P_174.6B_384",
        "gpt3-175b",
        2048,
        8,
        12,
        4,
        1,
        1,
        1,
        0,
        "full",
        "fp32-grad-accum",
        "a100-sxm-80gb",
    ),
    (
        "megatron21_t2_ZeRO-3_174.6B_384",
        "gpt3-175b",
        2048,
        1,
        1,
        384,
        1,
        4,
        1,
        3,
        "full",
        "fp32-grad-accum",
        "a100-sxm-80gb",
    ),
    ("nemo2407_h100_GPT3-175B_512", "gpt3-175b", 2048, 4, 8, 16, 1, 2, 6, 1, "none", "fp8", "h100-sxm"),
    ("nemo2407_h100_LLAMA2-7B_8", "llama2-7b", 4096, 1, 1, 8, 1, 1, 1, 1, "none", "fp8", "h100-sxm"),
    ("nemo2407_h100_LLAMA3-8B_8", "llama3.1-8b", 8192, 1, 1, 4, 2, 1, 1, 1, "none", "fp8", "h100-sxm"),
    ("nemo2407_h100_LLAMA3-70B_64", "llama3.1-70b", 8192, 4, 4, 2, 2, 1, 5, 1, "none", "fp8", "h100-sxm"),
    ("nemo2407_h100_LLAMA2-13B_16", "llama2-13b", 4096, 1, 4, 4, 1, 1, 10, 1, "none", "fp8", "h100-sxm"),
    ("nemo2407_h100_LLAMA2-70B_64", "llama2-70b", 4096, 4, 4, 4, 1, 1, 20, 1, "none", "fp8", "h100-sxm"),
]


@pytest.mark.parametrize("run", RUNS, ids=[r[0] for r in RUNS])
def test_published_configuration_fits(cat, run):
    _, mid, s, tp, pp, dp, cp, mbs, vp, zero, rc, acct, acc = run
    mem = training_memory(
        cat.model(mid),
        s,
        mbs,
        tp,
        pp,
        dp,
        cp,
        1,
        zero,
        rc,
        num_microbatches=64,
        virtual_stages=vp,
        recipe=acct,
        catalog=cat,
    )
    assert mem.total_bytes <= hbm_capacity_bytes(cat.accelerator(acc))


def test_nemo_llama3_8b_is_near_the_limit(cat):
    # the 8-GPU Llama 3 8B run (CP 2, DP 4, 8k sequences) uses most of the card: within 10%
    mem = training_memory(cat.model("llama3.1-8b"), 8192, 1, 1, 1, 4, 2, recipe="fp8", catalog=cat)
    cap = hbm_capacity_bytes(cat.accelerator("h100-sxm"))
    assert 0.9 * cap <= mem.total_bytes <= cap


# Narayanan et al. SC21 Table 2, ZeRO-3 without model parallelism (DeepSpeed): run_id, model, dp, micro-batch
ZERO3_RUNS = [
    ("megatron21_t2_ZeRO-3_174.6B_384", "gpt3-175b", 384, 4),
    ("megatron21_t2_ZeRO-3_174.6B_768", "gpt3-175b", 768, 2),
    ("megatron21_t2_ZeRO-3_174.6B_1536", "gpt3-175b", 1536, 1),
    ("megatron21_t2_ZeRO-3_529.6B_640", "megatron-529.6b", 640, 4),
    ("megatron21_t2_ZeRO-3_529.6B_1120", "megatron-529.6b", 1120, 2),
    ("megatron21_t2_ZeRO-3_529.6B_2240", "megatron-529.6b", 2240, 1),
]
# DeepSpeed's defaults (deepspeed/runtime/zero/constants.py @ v0.3.15, April 2021, as in v0.5.0): the paper states
# no ZeRO settings
DEEPSPEED = dict(
    zero3_max_live_params=DEEPSPEED_MAX_LIVE_PARAMS, zero_reduce_bucket_params=DEEPSPEED_REDUCE_BUCKET_PARAMS
)


def test_deepspeed_defaults_are_the_published_ones():
    # deepspeed/runtime/zero/constants.py @ v0.3.15: stage3_max_live_parameters 1e9, reduce_bucket_size 5e8
    assert (DEEPSPEED_MAX_LIVE_PARAMS, DEEPSPEED_REDUCE_BUCKET_PARAMS) == (10**9, 5 * 10**8)


def _zero3(cat, mid, dp, mbs, **kw):
    return training_memory(
        cat.model(mid), 2048, mbs, 1, 1, dp, 1, 1, 3, "full", num_microbatches=64, recipe="fp32-grad-accum",
        catalog=cat, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("run", ZERO3_RUNS, ids=[r[0] for r in ZERO3_RUNS])
def test_deepspeed_zero3_configurations_fit(cat, run):
    """Every ZeRO-3 row of SC21 Table 2 ran on A100 80GB: with DeepSpeed's submodule-by-submodule gathering and
    its two reduce buckets (hnplan.memory.zero_working) each fits."""
    _, mid, dp, mbs = run
    mem = _zero3(cat, mid, dp, mbs, **DEEPSPEED)
    assert mem.total_bytes <= hbm_capacity_bytes(cat.accelerator("a100-sxm-80gb"))


def test_deepspeed_zero3_529b_on_640_by_hand(cat):
    # 529.6B GPT (h 20,480, f 81,920, GELU, 105 layers, V 51,200 tied): the largest submodule is the MLP's first
    # linear layer, M = 20,480 x 81,920 = 1,677,721,600 parameters (QKV 20,480 x 61,440 = 1.26e9; the embedding
    # 51,200 x 20,480 = 1.05e9); the model's 529.58e9 parameters shard over 640 ranks at 2 bytes (fp16 weights)
    M, n = 20_480 * 81_920, 827_464_288  # parameters per rank: 529,577,144,320 / 640
    ds = _zero3(cat, "megatron-529.6b", 640, 4, **DEEPSPEED)
    assert ds.params_bytes == 2 * n + (2 * M + 1e9) * 2  # the shard + the module, the live cap, one over it
    assert ds.grads_bytes == 2 * n + (M + 2 * max(5e8, M)) * 2  # the shard + the module's and two buckets
    # FSDP's two Transformer-layer units (5.03e9 parameters each) at the same settings: weights and gradients
    # 21.8 and 21.8 GB (20.3 GiB each) where DeepSpeed's submodules give 10.4 and 11.7 GB; 93.5 GiB with the units,
    # 72.5 GiB with the submodules, of the 79.15 the card exposes
    fsdp = _zero3(cat, "megatron-529.6b", 640, 4)
    layer = 12 * 20_480**2 + 2 * 20_480  # QKV, projection, MLP (4h) and two norms' weights (biases left out)
    assert fsdp.params_bytes == 2 * n + 2 * layer * 2
    assert fsdp.params_bytes / 1e9 == pytest.approx(21.79, abs=0.005) and ds.params_bytes / 1e9 == pytest.approx(
        10.37, abs=0.005
    )
    assert fsdp.total_bytes / 2**30 == pytest.approx(93.5, abs=0.05)
    cap = hbm_capacity_bytes(cat.accelerator("a100-sxm-80gb"))
    assert fsdp.total_bytes > cap > ds.total_bytes
    assert ds.total_bytes / 2**30 == pytest.approx(72.5, abs=0.05)
