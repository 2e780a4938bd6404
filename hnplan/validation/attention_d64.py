"""cuDNN's attention kernels at gpt-oss's shape (head dimension 64, learnable sinks, full causal and sliding-window
layers) against the attention law as the operator table times them
(:func:`hnplan.compute.attention.attention_kernel_s`): reported rows, nothing fitted to them.

The measurements (``data/reference/cudnn_sdpa_gpt_oss.csv``, its README section) are NVIDIA/cudnn-frontend's
benchmark results: the full causal forward on GB300, GB200 and H200 (cuDNN 9.27), and the sliding layer's forward and
backward in bf16 and MXFP8 on GB300 (9.22) and GB200 (9.27), window 128, and in bf16 on the H200 (9.19.1), window
1,024. MXFP8 rows are timed as a training step with FP8 attention under ``megatron-bridge-2608-mxfp8`` times them
(:func:`hnplan.planning.training.fp8_attention_accelerator`: the stack's FP8 / bf16 ratio, and the backward of a
sliding layer over the whole causal triangle where the stack says cuDNN runs it so). Kernel times at the short-run
clock the law's ceilings were fitted at (no sustained-clock fraction), as the other kernel rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

from hnplan import units
from hnplan.compute.attention import attention_kernel_s, causal_attention_flops
from hnplan.validation.rows import Row

DATA = Path(__file__).resolve().parents[2] / "data" / "reference" / "cudnn_sdpa_gpt_oss.csv"
FP8_STACK = "megatron-bridge-2608-mxfp8"  # the stack whose FP8 attention the MXFP8 rows are timed with
SOURCE = (
    "data/reference/cudnn_sdpa_gpt_oss.csv: NVIDIA/cudnn-frontend benchmark/attention_inference and "
    "benchmark/sdpa_benchmark_training results (gpt_oss configs, cuDNN backend, non-deterministic backward)"
)


def rows(cat) -> list[Row]:
    """One reported row per measured kernel (kernel time [us]): the model against cuDNN at head dimension 64."""
    from hnplan.planning.training import fp8_attention_accelerator

    out = []
    with DATA.open(newline="") as f:
        table = list(csv.DictReader(f))
    for r in table:
        acc = cat.accelerator(r["accelerator"])
        if r["dtype"] == "mxfp8":
            acc = fp8_attention_accelerator(acc, cat.stack(FP8_STACK), "fp8", {})
        seq, window, d = float(r["seq"]), float(r["window"]), float(r["head_dim"])
        groups = float(r["batch"]) * float(r["q_heads"])
        backward = r["pass"] == "bwd"
        sliding = r["kind"] == "sliding"
        t = attention_kernel_s(
            acc,
            [causal_attention_flops(groups, seq, d, window if sliding else None, backward)],
            [seq],
            [window if sliding else seq],
            [d],
            [groups],
            [backward],
            [sliding],
        )[0]
        shape = f"window {int(window):,}" if sliding else "full causal"
        out.append(
            Row(
                "compute",
                f"{r['dtype']} attention {r['pass']} d=64 {shape} b={r['batch']} heads={r['q_heads']}/{r['kv_heads']} "
                f"s={int(seq):,} (cuDNN {r['cudnn']}) on {acc.name.split(' (')[0]}",
                "kernel time",
                "us",
                units.s_to_us(units.ms_to_s(float(r["time_ms"]))),
                units.s_to_us(float(t)),
                "reported",
                None,
                f"{SOURCE}: {r['source_file']}",
                "gpt-oss's attention (learnable sinks); the law's ceilings were fitted at head dimensions 128 and 192: "
                "reported, not asserted (docs/compute.md, 'Head dimension 64, sliding windows and FP8 (gpt-oss), "
                "against cuDNN')"
                + (
                    f"; timed with {FP8_STACK}'s FP8 attention"
                    + (", the backward over the whole causal triangle" if backward and sliding else "")
                    if r["dtype"] == "mxfp8"
                    else ""
                ),
            )
        )
    return out
