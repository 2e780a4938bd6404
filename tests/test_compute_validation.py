"""The compute roofline against measured training throughput: it must be an upper bound, and not a loose one.

Rows: NVIDIA/NeMo docs/source/performance/performance_summary.md @ e2de75c15e (NeMo 24.07, DGX-H100,
FP8; data/reference/training_measurements.csv rows nemo2407_h100_*) and the issue's Llama-2-7B
bf16 case (9,600 tokens/s per H100). The roofline leaves out communication, the pipeline bubble, FP8
scaling/cast kernels and framework overheads, so the measurement must fall below it; measured runs
reach 60-70% of it (ratios 1.42-1.68 when this test was written). No constant was tuned to these rows.
"""

import pytest

from hnplan.compute import training_stage_time_s

# (model, micro-batch, seq, tp, cp, pp, dtype, measured tokens/s per GPU, source row)
ROWS = [
    ("llama2-7b", 1, 4096, 1, 1, 1, "fp8", 16934, "nemo2407_h100_LLAMA2-7B_8"),
    ("llama3.1-8b", 1, 8192, 1, 2, 1, "fp8", 12273, "nemo2407_h100_LLAMA3-8B_8"),
    ("llama3.1-70b", 1, 8192, 4, 2, 4, "fp8", 1524, "nemo2407_h100_LLAMA3-70B_64"),
    ("gpt3-175b", 2, 2048, 4, 1, 8, "fp8", 825, "nemo2407_h100_GPT3-175B_512"),
    ("llama2-7b", 1, 4096, 1, 1, 1, "bf16", 9600, "issue 3: Llama-2-7B at ~46% MFU"),
]


@pytest.mark.parametrize("model,mb,seq,tp,cp,pp,dtype,measured,row", ROWS, ids=[r[-1] for r in ROWS])
def test_roofline_bounds_measured_throughput(cat, model, mb, seq, tp, cp, pp, dtype, measured, row):
    t = training_stage_time_s(cat.model(model), cat.accelerator("h100-sxm"), mb, seq, tp=tp, cp=cp, pp=pp, dtype=dtype)
    bound = mb * seq / (tp * cp * pp) / t  # tokens/s per GPU with every stage busy, no bubble, no communication
    assert 1.0 < bound / measured < 1.8
