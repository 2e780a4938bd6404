"""The decode step of the large-batch inference validation rows split by term (docs/inference.md, "The decode
step by term"): the large-EP DeepSeek-V3 decode rows at the batch their source ran, and the MLPerf Llama 2 70B
rows at the batch they are predicted at, each through :func:`hnplan.planning.inference.split.decode_split`.

Usage::

    PYTHONPATH=. python tools/decode_split_rows.py [ID_SUBSTRING]
"""

from __future__ import annotations

import math
import sys

import pandas as pd

from hnplan.catalog.loader import load_catalog
from hnplan.planning.inference import Replica, measurements, resolve
from hnplan.planning.inference.split import decode_split
from hnplan.planning.inference.validation import throughput_point


def split_rows(select: str = "") -> pd.DataFrame:
    """One row per ``tokens_per_s_per_gpu_at_batch`` row and per MLPerf ``tokens_per_s`` or Server row whose id contains
    ``select``: :func:`decode_split`'s keys (times in ms, bytes in GB) with ``id`` and ``batch_per_group``."""
    cat = load_catalog()
    out = []
    for m in measurements():
        if select not in m.id:
            continue
        if m.quantity == "tokens_per_s_per_gpu_at_batch":
            replica = Replica(tp=m.tp, ep=m.ep, dtype=m.dtype, overlap=m.overlap, engine=m.engine)
            s = resolve(m.model, m.system, replica, cat)
            b = math.ceil((m.batch or 1) / s.replica.groups)
            ctx = ctx_max = m.context_tokens or m.input_tokens + m.output_tokens / 2
        elif m.quantity == "tokens_per_s" and m.id.startswith("mlperf"):
            s, p = throughput_point(m, cat)
            b = math.ceil(p.batch / s.replica.groups)
            ctx, ctx_max = m.input_tokens + m.output_tokens / 2, m.input_tokens + m.output_tokens
        elif m.quantity == "tokens_per_s_per_gpu_at_concurrency":  # MLPerf Server: the log's concurrency
            s = resolve(m.model, m.system, Replica(tp=m.tp, ep=m.ep, dtype=m.dtype, engine=m.engine), cat)
            b = m.batch or 1
            ctx = ctx_max = m.input_tokens + m.output_tokens / 2
        else:
            continue
        sp = decode_split(s, b, ctx, ctx_max)
        row = {"id": m.id, "batch_per_group": b}
        for k, v in sp.items():
            if k.endswith("_s"):
                row[k[:-2] + "_ms"] = 1e3 * v
            elif k.endswith("_bytes"):
                row[k[:-6] + "_GB"] = v / 1e9
            else:
                row[k] = v
        out.append(row)
    return pd.DataFrame(out)


if __name__ == "__main__":
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    print(split_rows(sys.argv[1] if len(sys.argv) > 1 else "").round(2).to_string(index=False))
