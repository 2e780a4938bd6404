"""Where the time of one decode step goes: the operator work of :func:`.passes.decode_step` split by the
physics that sets it, for reading a validation row against its source.

The split re-times the same operator rows :func:`.passes.decode_step` sums (the same micro-batches, the busiest
expert-parallel rank's routed rows, the KV cache at its dtype) and groups them:

* ``attention_s``: the attention kernel over the KV cache (FlashAttention / FlashMLA class), whose bytes are
  ``kv_read_bytes`` (``batch x context x KV bytes per token and layer``, :func:`hnplan.memory.
  kv_cache_bytes_per_token` at the replica's KV dtype);
* ``expert_gemm_s``: the routed experts' permute, up, activation and down rows on the busiest rank, at
  ``tokens_per_expert`` (the mean over the rank's experts of the busiest rank: ``routing_peak x T x ep x k / E``
  for ``T`` tokens per rank and micro-batch, ``k`` active of ``E`` routed experts);
* ``other_gemm_s``: every other GEMM (attention projections, dense and shared-expert MLPs, router, LM head),
  whose weights are most of ``weights_bytes`` streamed once per micro-batch (:func:`.core.weights_bytes_per_gpu`);
* ``elementwise_s``: norms, rotary, residuals, activations outside the experts, cache writes, embedding;
* the collectives ``ep_alltoall_s`` (dispatch and combine), ``tp_allreduce_s``, ``pp_send_s`` and the engine's
  ``host_s`` per iteration (:func:`.speculative.iteration_overhead_s`).

``compute_s`` is their operator sum with the engine's unfused (de)quantisation and speculative draft passes, the
``compute_s`` of :func:`.passes.decode_step`; ``time_s`` is the step with its collectives, as there.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.compute import operator_columns
from hnplan.compute.part_sums import ROUTED_OPS
from hnplan.memory import kv_cache_tokens
from hnplan.planning.inference.core import Setup, max_batch, weights_bytes_per_gpu
from hnplan.planning.inference.passes import (
    _comm_time_s,
    _kv_bytes_read,
    _kv_bytes_saved,
    _pass_times,
    _retime_attention,
    sliding_kept,
)
from hnplan.planning.inference.speculative import (
    decode_overlap_efficiency,
    dequant_share,
    draft_share,
    iteration_overhead_s,
    routing_peak,
    verified_tokens,
)

GROUPS = ("attention", "expert_gemm", "other_gemm", "elementwise")


def _group(name: str, kind: str) -> str:
    if kind == "attention":
        return "attention"
    if name.startswith(ROUTED_OPS):
        return "expert_gemm"
    return "other_gemm" if kind.startswith("gemm") else "elementwise"


def decode_split(
    s: Setup, batch_per_group: int, context_tokens: float, max_context_tokens: float | None = None
) -> dict:
    """The decode step of ``batch_per_group`` sequences at a mean KV length of ``context_tokens``, split by term.

    Parameters
    ----------
    s : Setup
    batch_per_group : int
        Sequences of one attention group (one accelerator with data-parallel attention) [-].
    context_tokens : float
        Mean KV length of a sequence [tokens].
    max_context_tokens : float, optional
        KV length each sequence holds in memory, for ``max_batch_per_group`` [tokens]; default ``context_tokens``.

    Returns
    -------
    dict
        ``micro_batches`` [-] and ``sequences_per_micro_batch`` [-]; ``weights_bytes`` and ``kv_read_bytes``
        [bytes] per step and their ``weights_stream_s`` / ``kv_read_s`` at the accelerator's HBM bandwidth [s]
        (floors, not added: the kernels below include them); ``attention_s``, ``expert_gemm_s``,
        ``other_gemm_s``, ``elementwise_s`` [s] (operator time over all layers, all micro-batches);
        ``tokens_per_expert`` [tokens] (busiest rank, per micro-batch; 0 for a dense model);
        ``routing_peak`` [-]; ``compute_s``, ``ep_alltoall_s``, ``tp_allreduce_s``, ``pp_send_s``,
        ``time_s`` as :func:`.passes.decode_step` (unpadded); ``host_s`` [s]; ``step_s`` = ``time_s + host_s``;
        ``max_batch_per_group`` [-] (the KV cache's limit at ``max_context_tokens``).

    Raises
    ------
    ValueError
        If ``batch_per_group`` < 1 or ``context_tokens`` < 1.
    """
    if batch_per_group < 1 or context_tokens < 1:
        raise ValueError(f"batch and context must be >= 1; got {batch_per_group}, {context_tokens}")
    r, m = s.replica, s.model
    b = int(math.ceil(batch_per_group))
    ctx = max(1, int(round(context_tokens)))
    v = verified_tokens(s)
    parts = [b - b // 2, b // 2] if r.overlap and b >= 2 else [b]
    out = dict.fromkeys(GROUPS, 0.0)
    flops = moved = 0.0
    tpe = peak = 0.0
    for part in parts:
        tokens = part * v
        cols = operator_columns(m, s.acc, "decode", tokens, ctx, kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype)
        pk = routing_peak(s, tokens)
        if pk > 1.0:  # the routed rows at the busiest rank's tokens, as decode_steps times them
            sub = operator_columns(
                m,
                s.acc,
                "decode",
                math.ceil(pk * tokens),
                ctx,
                kv_len=ctx,
                tp=r.tp,
                ep=r.ep,
                dtype=r.dtype,
                only=ROUTED_OPS,
            )
            rows = np.flatnonzero([str(n).startswith(ROUTED_OPS) for n in cols["name"]])
            cols = {k: (np.array(val, copy=True) if k in sub else val) for k, val in cols.items()}
            for k in ("flops", "bytes", "compute_time_s", "memory_time_s", "time_s"):
                cols[k][rows] = sub[k]
        saved = _kv_bytes_saved(s, tokens, ctx) + (v - 1) / v * _kv_bytes_read(s, tokens, ctx)
        cols = _retime_attention(cols, saved, 1.0, sliding_kept(m, ctx))
        t = np.asarray(cols["time_s"], dtype=float) * np.asarray(cols["count"], dtype=float)
        for name, kind, ti in zip(cols["name"], cols["kind"], t):
            out[_group(str(name), str(kind))] += float(ti)
        flops += float(np.sum(np.asarray(cols["flops"]) * np.asarray(cols["count"])))
        moved += float(np.sum(np.asarray(cols["bytes"]) * np.asarray(cols["count"])))
        if m.moe is not None:
            tpe = max(tpe, pk * tokens / r.tp * r.ep * m.moe.active_experts / m.moe.experts)
        peak = max(peak, pk)
    comm = _comm_time_s(s, b * v, decode=True)
    tot = {"time_s": sum(out.values()), "bytes": moved, "flops": flops}
    one = _pass_times(tot, comm, len(parts) == 2, dequant_share(s), decode_overlap_efficiency(s))
    draft = draft_share(s)
    if draft:
        one = {k: val * (1.0 + draft) for k, val in one.items()}
    bw = units.TBps_to_Bps(s.acc.hbm_bw_TBps)
    w_bytes = weights_bytes_per_gpu(s) * len(parts)
    kv_bytes = float(_kv_bytes_read(s, b, kv_cache_tokens(m, ctx))) * m.layers  # sliding layers: their window
    host = iteration_overhead_s(s)
    return {
        "micro_batches": len(parts),
        "sequences_per_micro_batch": parts[0],
        "weights_bytes": w_bytes,
        "weights_stream_s": w_bytes / bw,
        "kv_read_bytes": kv_bytes,
        "kv_read_s": kv_bytes / bw,
        **{f"{g}_s": out[g] for g in GROUPS},
        "tokens_per_expert": tpe,
        "routing_peak": peak if m.moe is not None else 1.0,
        "compute_s": one["compute_s"],
        "ep_alltoall_s": one["ep_alltoall_s"],
        "tp_allreduce_s": one["tp_allreduce_s"],
        "pp_send_s": one["pp_send_s"],
        "time_s": one["time_s"],
        "host_s": host,
        "step_s": one["time_s"] + host,
        "max_batch_per_group": max_batch(s, max_context_tokens or context_tokens) // r.groups,
    }
