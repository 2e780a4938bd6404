"""The compute roofline against measured training throughput (NeMo 24.07 on DGX H100, and the
compute issue's Llama-2-7B case): a roofline leaves out communication, bubbles and framework
overheads, so it must bound the measurement from above, and not loosely."""

from __future__ import annotations

import pandas as pd

from hnplan.compute import training_stage_time_s
from hnplan.validation import Row, area

BOUND = 1.8  # largest roofline / measured ratio accepted: measured runs reach >= 55% of the roofline

# (model id, reference run id, micro-batch, seq, tp, cp, pp, dtype)
CASES = [
    ("llama2-7b", "nemo2407_h100_LLAMA2-7B_8", 1, 4096, 1, 1, 1, "fp8"),
    ("llama3.1-8b", "nemo2407_h100_LLAMA3-8B_8", 1, 8192, 1, 2, 1, "fp8"),
    ("llama3.1-70b", "nemo2407_h100_LLAMA3-70B_64", 1, 8192, 4, 2, 4, "fp8"),
    ("gpt3-175b", "nemo2407_h100_GPT3-175B_512", 2, 2048, 4, 1, 8, "fp8"),
]


@area("compute")
def rows(cat) -> list[Row]:
    ref = cat.reference("training_measurements").set_index("run_id")
    h100 = cat.accelerator("h100-sxm")
    out = []
    for model, run, mb, seq, tp, cp, pp, dtype in CASES:
        t = training_stage_time_s(cat.model(model), h100, mb, seq, tp=tp, cp=cp, pp=pp, dtype=dtype)
        bound = mb * seq / (tp * cp * pp) / t
        measured = float(pd.to_numeric(ref.loc[run, "tokens_per_sec_per_gpu"]))
        out.append(Row("compute", f"{model} on H100 {dtype}, TP{tp} CP{cp} PP{pp}", "tokens/s per GPU (roofline)",
                       "tokens/s", measured, bound, "bound", BOUND, ref.loc[run, "source"],
                       "compute-only roofline: no communication, bubble, FP8 casts or framework overhead"))
    t = training_stage_time_s(cat.model("llama2-7b"), h100, 1, 4096, dtype="bf16")
    out.append(Row("compute", "llama2-7b on H100 bf16", "tokens/s per GPU (roofline)", "tokens/s", 9600.0,
                   4096 / t, "bound", BOUND, "compute issue: a Llama-2-7B run at 9,600 tokens/s per H100 (~46% MFU)"))
    return out
