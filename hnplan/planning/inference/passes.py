"""Time of one serving pass of a replica: a decode step (CUDA-graph padding, two overlapped micro-batches,
the busiest expert-parallel rank, speculative decoding) and a prefill pass, their operator work and their
exposed collectives.

The replica and its resolved setup live in :mod:`hnplan.planning.inference.core`; the steady state of
continuous batching built on these passes is in :mod:`hnplan.planning.inference.steady`.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.comm import best_time
from hnplan.comm.messages import tp_message_bytes
from hnplan.compute import operator_columns, totals
from hnplan.compute.operators import replace_rows
from hnplan.compute.parts import ROUTED_OPS
from hnplan.memory import kv_cache_bytes_per_token
from hnplan.planning.inference.core import DEFAULT_MAX_BATCHED_TOKENS, Setup
from hnplan.planning.inference.speculative import (
    decode_overlap_efficiency,
    dequant_share,
    draft_share,
    ep_alltoall_s,
    overlapped_step_s,
    routing_peak,
    verified_tokens,
)


# --- time of one pass ----------------------------------------------------------------------------------
def _comm_time_s(s: Setup, tokens_per_group: float, decode: bool = False) -> dict:
    """Exposed communication of one pass over all layers for ``tokens_per_group`` tokens [s]; a ``decode``
    pass runs its expert all-to-all on the engine's decode kernel (:func:`.speculative.ep_alltoall_s`)."""
    m, r, groups = s.model, s.replica, s.placements
    msg = tp_message_bytes(m, tokens_per_group, 1)
    out = {"tp_allreduce": 0.0, "ep_alltoall": 0.0, "pp_send": 0.0}
    if groups["tp"] is not None:
        out["tp_allreduce"] = 2 * m.layers * best_time("allreduce", msg, groups["tp"])[0]
    out["ep_alltoall"] = ep_alltoall_s(s, tokens_per_group, decode)
    if groups["pp"] is not None:
        out["pp_send"] = (r.pp - 1) * best_time("sendrecv", msg / r.tp, groups["pp"])[0]
    return out


def _kv_dtype_reads(cols: dict, s: Setup, batch: int, context_tokens: int) -> dict:
    """Re-time the decode attention rows of an operator table for the replica's KV dtype.

    The operator table (:func:`hnplan.compute.operator_columns`) reads the KV cache in bf16; a KV cache in
    fp8 (or fp4) moves ``b x ctx x KV bytes/token/layer`` at its own width. The memory time of the attention
    rows scales with their new byte count; compute time and the fixed kernel term stay; ``bound`` stays as
    the table had it. (To move into :func:`hnplan.compute.operator_table` as a ``kv_dtype`` argument.)
    """
    return _retime_attention(cols, _kv_bytes_saved(s, batch, context_tokens), 1.0)


def _kv_bytes_saved(s: Setup, batch: int, context_tokens: int) -> float:
    """Bytes per layer a KV cache narrower than bf16 does not read in a decode step [bytes]."""
    kvb = units.dtype_bytes(s.replica.kv)
    if kvb == units.dtype_bytes("bf16"):
        return 0.0
    per_layer_bf16 = kv_cache_bytes_per_token(s.model, "bf16", s.replica.tp) / s.model.layers
    return batch * context_tokens * per_layer_bf16 * (1.0 - kvb / units.dtype_bytes("bf16"))


def _kv_bytes_read(s: Setup, batch: int, context_tokens: int) -> float:
    """Bytes per layer ``batch`` sequences of ``context_tokens`` read from a KV cache at its dtype [bytes]."""
    per_layer = kv_cache_bytes_per_token(s.model, s.replica.kv, s.replica.tp) / s.model.layers
    return batch * context_tokens * per_layer


def _retime_attention(cols: dict, saved_bytes: float, share: float) -> dict:
    """The attention rows of :func:`hnplan.compute.operator_columns` with ``saved_bytes`` fewer bytes read,
    then ``share`` of their work (the real sequences of a padded step): memory time scales with the bytes,
    compute with the work, the fixed kernel term stays; ``bound`` stays as the table had it."""
    if saved_bytes == 0.0 and share == 1.0:
        return cols
    att = cols["kind"] == "attention"
    t, comp, mem, byt, fl = (
        np.array(cols[k], dtype=float) for k in ("time_s", "compute_time_s", "memory_time_s", "bytes", "flops")
    )
    fixed = t[att] - np.maximum(comp[att], mem[att])
    new_bytes = (byt[att] - saved_bytes) * share
    mem[att] = mem[att] * new_bytes / byt[att]
    comp[att] = comp[att] * share
    fl[att] = fl[att] * share
    byt[att] = new_bytes
    t[att] = np.maximum(comp[att], mem[att]) + fixed
    return {**cols, "time_s": t, "compute_time_s": comp, "memory_time_s": mem, "bytes": byt, "flops": fl}


def decode_step(s: Setup, batch_per_group: int, context_tokens: float, padded_to: int | None = None) -> dict:
    """One decode step of ``batch_per_group`` sequences through the whole replica [s].

    ``padded_to`` (a CUDA graph's batch, :func:`graph_batch`) runs the step as that many sequences: the
    GEMMs, norms, activations and collectives see the padded batch, the attention only the real
    sequences' KV (a padding sequence holds one token). With ``Replica.overlap`` and at least two
    sequences the step runs as two micro-batches of half the batch each (DeepSeek's decode overlap,
    SGLang's two-batch overlap): each reads the weights, and the engine's overlap hides part of the
    smaller of compute and communication
    (:func:`.speculative.overlapped_step_s`).

    Returns
    -------
    dict
        ``compute_s`` (operator roofline over all layers of one accelerator's shard, both micro-batches),
        ``bytes`` [bytes] read and written per accelerator, the collectives ``tp_allreduce_s``,
        ``ep_alltoall_s``, ``pp_send_s`` and ``time_s`` (their sum, or the overlapped step with
        ``Replica.overlap`` and two or more sequences).
    """
    r = s.replica
    b = max(1, int(math.ceil(batch_per_group)))
    bp = max(b, int(padded_to or b))
    ctx = max(1, int(round(context_tokens)))
    v = verified_tokens(s)
    micro_batched = r.overlap and b >= 2  # one sequence cannot be split: nothing to overlap with
    if micro_batched:
        first, second = (b - b // 2, bp - bp // 2), (b // 2, bp // 2)
        parts = [_decode_work(s, *first, ctx, v)]
        parts.append(parts[0] if second == first else _decode_work(s, *second, ctx, v))
        tot = {k: parts[0][k] + parts[1][k] for k in ("time_s", "bytes", "flops")}
    else:
        tot = _decode_work(s, b, bp, ctx, v)
    # the collectives carry the whole batch's bytes; timed as one exchange per layer (the one-shot kernel's
    # latency is about 1 % of its time at these sizes; the pairwise exchange's p - 1 latencies are already
    # a pessimistic stand-in, docs/inference.md)
    comm = _comm_time_s(s, bp * v, decode=True)
    out = _pass_times(tot, comm, micro_batched, dequant_share(s), decode_overlap_efficiency(s))
    draft = draft_share(s)
    return out if draft == 0.0 else {k: val * (1.0 + draft) for k, val in out.items()}


def _decode_work(s: Setup, b: int, bp: int, ctx: int, v: int) -> dict:
    """Operator totals of ``b`` sequences run as ``bp`` (CUDA-graph padding), ``v`` query tokens each
    (speculative decoding: each sequence's KV read once), on the busiest expert-parallel rank: its routed
    experts run :func:`.speculative.routing_peak` times the mean tokens."""
    r = s.replica
    cols = operator_columns(s.model, s.acc, "decode", bp * v, ctx, kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype)
    peak = routing_peak(s, bp * v)
    if peak > 1.0:
        busy_tokens = math.ceil(peak * bp * v)  # the routed rows alone, at the busiest rank's tokens
        busy = operator_columns(
            s.model, s.acc, "decode", busy_tokens, ctx, kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype, only=ROUTED_OPS
        )
        cols = replace_rows(cols, busy, ROUTED_OPS)
    saved = _kv_bytes_saved(s, bp * v, ctx) + (v - 1) / v * _kv_bytes_read(s, bp * v, ctx)
    cols = _retime_attention(cols, saved, b / bp)
    return totals(cols)


def _pass_times(tot: dict, comm: dict, overlap: bool, dequant: float = 0.0, hidden: float = 1.0) -> dict:
    tot = {**tot, "time_s": tot["time_s"] * (1.0 + dequant)}
    out = {
        "compute_s": tot["time_s"],
        "bytes": tot["bytes"],
        "flops": tot["flops"],
        **{f"{k}_s": v for k, v in comm.items()},
    }
    c = sum(comm.values())
    out["time_s"] = overlapped_step_s(tot["time_s"], c, hidden) if overlap else tot["time_s"] + c
    return out


def prefill_pass(s: Setup, sequences: int, prompt_tokens: float) -> dict:
    """Prefill of ``sequences`` prompts of ``prompt_tokens`` in one attention group [s]; keys as
    :func:`decode_step`."""
    r = s.replica
    n = max(1, int(sequences))
    p = max(1, int(round(prompt_tokens)))
    tot = totals(operator_columns(s.model, s.acc, "prefill", n, p, tp=r.tp, ep=r.ep, dtype=r.dtype))
    return _pass_times(tot, _comm_time_s(s, n * p), r.overlap, dequant_share(s))


def prefill_per_request_s(
    s: Setup, prompt_tokens: float, max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
) -> float:
    """Prefill time per request when the scheduler fills its token budget [s/request]:
    ``t_prefill(n, I) / n`` with ``n = max(1, floor(budget / I))`` prompts per pass."""
    n = max(1, int(max_batched_tokens // max(prompt_tokens, 1)))
    return prefill_pass(s, n, prompt_tokens)["time_s"] / n
