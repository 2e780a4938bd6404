"""Where the modelled serving iteration goes, row by row of the inference validation.

For every ``tokens_per_s`` row it prints the batch the row is predicted at (what the engine holds under
the benchmark's limits, or the planner's maximum-throughput point) and the most memory holds, the
CUDA-graph batch a generation-only iteration runs at, the decode step split into GEMMs, attention, the
other (element-wise) kernels and the TP all-reduce (with the decode message and the implementation the
engine's rule picks for it, :func:`hnplan.planning.inference.tp_allreduce_path`), the prefill share and host time of the iteration,
and the iteration the published throughput implies at that batch (``batch / published``; for a row
with ``num_requests``, the full-batch iteration of the finite run, its last partial batch as modelled,
``run_over_steady`` the run's throughput over the steady state's) with the gap to the modelled one. A positive gap is time the model does not count.

Usage::

    PYTHONPATH=. python tools/inference_breakdown.py [ID_SUBSTRING]
"""

from __future__ import annotations

import math
import sys

import pandas as pd

from hnplan.catalog.loader import load_catalog
from hnplan.comm.messages import tp_message_bytes
from hnplan.compute import operator_columns
from hnplan.planning.inference import (
    graph_batch,
    measurements,
    queue_run_tokens_per_s,
    steady_state,
    tp_allreduce_path,
)
from hnplan.planning.inference.speculative import tokens_per_step
from hnplan.planning.inference.steady import _kv_dtype_reads
from hnplan.planning.inference.validation import throughput_point


def _split_ms(s, batch_per_group: int, ctx: float) -> dict:
    """Decode-step operator time by kind over all layers [ms] (the replica's KV dtype, unpadded)."""
    r, n = s.replica, max(1, round(ctx))
    cols = operator_columns(s.model, s.acc, "decode", batch_per_group, n, kv_len=n, tp=r.tp, ep=r.ep, dtype=r.dtype)
    df = pd.DataFrame(_kv_dtype_reads(cols, s, batch_per_group, n))
    t = (df["time_s"] * df["count"]).groupby(df["kind"]).sum() * 1e3
    return {
        "gemm_ms": t.get("gemm", 0.0),
        "attn_ms": t.get("attention", 0.0),
        "other_ms": t.drop(["gemm", "attention"], errors="ignore").sum(),
    }


def breakdown(select: str = "") -> pd.DataFrame:
    """One row per ``tokens_per_s`` validation row whose id contains ``select``."""
    cat = load_catalog()
    rows = []
    for m in measurements():
        if m.quantity != "tokens_per_s" or select not in m.id:
            continue
        s, p = throughput_point(m, cat)  # the batch the validation row is predicted at
        b = p.breakdown_s
        bg = math.ceil(p.batch / s.replica.groups)
        implied = p.batch / m.published * 1e3
        run = p.tokens_per_s if m.num_requests is None else queue_run_tokens_per_s(s, p, m.num_requests)
        full, rest = divmod(m.num_requests or 0, p.batch)
        if full:  # the full-batch iteration the published run implies, its last partial batch as modelled
            tail = steady_state(s, rest, m.input_tokens, m.output_tokens).iteration_s if rest else 0.0
            implied = (m.num_requests * tokens_per_step(s) / m.published - tail) / full * 1e3
        msg = float(tp_message_bytes(s.model, graph_batch(s, bg), 1))  # one decode all-reduce [bytes]
        rows.append(
            {
                "id": m.id,
                "error_pct": 100 * (run - m.published) / m.published,
                "run_over_steady": run / p.tokens_per_s,
                "batch": p.batch,
                "max_batch": p.max_batch,
                "graph_batch": graph_batch(s, bg),
                **_split_ms(s, bg, m.input_tokens + m.output_tokens / 2),
                "decode_ms": 1e3 * b["decode_compute"],
                "tp_allreduce_ms": 1e3 * b["tp_allreduce"],
                "ar_msg_mib": msg / 2**20,
                "ar_path": tp_allreduce_path(s, msg),
                "prefill_ms": 1e3 * b["prefill_in_iteration"],
                "host_ms": 1e3 * b["engine_host"],
                "iteration_ms": 1e3 * p.iteration_s,
                "implied_ms": implied,
                "gap_ms": implied - 1e3 * p.iteration_s,
            }
        )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 30):
        print(breakdown(sys.argv[1] if len(sys.argv) > 1 else "").round(2).to_string(index=False))
