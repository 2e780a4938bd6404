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
