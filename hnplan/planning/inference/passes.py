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
from hnplan.compute.operator_grid import operator_grid
from hnplan.compute.part_sums import ROUTED_OPS
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
    saved = _kv_bytes_saved(s, batch, context_tokens)
    return _retime_attention(cols, saved, 1.0, sliding_kept(s.model, context_tokens))


def _kv_bytes_saved(s: Setup, batch: int | np.ndarray, context_tokens: int) -> float | np.ndarray:
    """Bytes per layer a KV cache narrower than bf16 does not read in a decode step [bytes] (``batch``: a
    number or an array of batches)."""
    kvb = units.dtype_bytes(s.replica.kv)
    if kvb == units.dtype_bytes("bf16"):
        return 0.0
    per_layer_bf16 = kv_cache_bytes_per_token(s.model, "bf16", s.replica.tp) / s.model.layers
    return batch * context_tokens * per_layer_bf16 * (1.0 - kvb / units.dtype_bytes("bf16"))


def _kv_bytes_read(s: Setup, batch: int | np.ndarray, context_tokens: int) -> float | np.ndarray:
    """Bytes per layer ``batch`` sequences of ``context_tokens`` read from a KV cache at its dtype [bytes]."""
    per_layer = kv_cache_bytes_per_token(s.model, s.replica.kv, s.replica.tp) / s.model.layers
    return batch * context_tokens * per_layer


def sliding_kept(model, context_tokens) -> float:
    """Share of a sequence's ``context_tokens`` a sliding-window layer's cache keeps and its decode attention
    reads, ``min(ctx, window) / ctx`` [-] (1 without a window, :attr:`hnplan.catalog.schemas.Model.sliding_window`)."""
    if model.sliding_window is None or not context_tokens:
        return 1.0
    return min(float(context_tokens), float(model.sliding_window)) / float(context_tokens)


def _retime_attention(cols: dict, saved_bytes, share, sliding: float = 1.0) -> dict:
    """The attention rows of :func:`hnplan.compute.operator_columns` with ``saved_bytes`` fewer bytes read,
    then ``share`` of their work (the real sequences of a padded step): memory time scales with the bytes,
    compute with the work, the fixed kernel term stays; ``bound`` stays as the table had it. ``saved_bytes``
    are those of a layer attending to the whole context; a sliding-window layer's row (``attention_sliding``)
    saves ``sliding`` of them (:func:`sliding_kept`: it reads only its window).

    ``cols`` may also be :func:`hnplan.compute.operator_grid.operator_grid`'s ``[row, batch]`` columns, with
    ``saved_bytes`` and ``share`` one per batch (arrays); a batch with nothing saved and all its work keeps
    its numbers as they were."""
    saved, share = np.asarray(saved_bytes, dtype=float), np.asarray(share, dtype=float)
    keep = (saved == 0.0) & (share == 1.0)
    if keep.all():
        return cols
    att = cols["kind"] == "attention"
    t, comp, mem, byt, fl = (
        np.array(cols[k], dtype=float) for k in ("time_s", "compute_time_s", "memory_time_s", "bytes", "flops")
    )
    fixed = t[att] - np.maximum(comp[att], mem[att])
    if sliding != 1.0:  # a sliding layer's row saves its window's share of the bytes
        ratio = np.where(np.asarray(cols["name"])[att] == "attention_sliding", sliding, 1.0)
        saved = saved * (ratio[:, None] if byt.ndim == 2 else ratio)
    new_bytes = (byt[att] - saved) * share
    new_mem = mem[att] * new_bytes / byt[att]
    new_comp = comp[att] * share
    new_t = np.maximum(new_comp, new_mem) + fixed
    for col, value in ((mem, new_mem), (comp, new_comp), (fl, fl[att] * share), (byt, new_bytes), (t, new_t)):
        col[att] = np.where(keep, col[att], value)
    return {**cols, "time_s": t, "compute_time_s": comp, "memory_time_s": mem, "bytes": byt, "flops": fl}


def decode_step(s: Setup, batch_per_group: int, context_tokens: float, padded_to: int | None = None) -> dict:
    """One decode step of ``batch_per_group`` sequences through the whole replica [s].

    ``padded_to`` (a CUDA graph's batch, :func:`graph_batch`) runs the step as that many sequences: the
    GEMMs, norms, activations and collectives see the padded batch, the attention only the real
    sequences' KV (a padding sequence holds one token). With ``Replica.overlap`` and at least two
    sequences the step runs as two micro-batches of half the batch each (DeepSeek's decode overlap,
    SGLang's two-batch overlap): each reads the weights, and the engine's overlap hides part of the
    smaller of compute and communication
    (:func:`.speculative.overlapped_step_s`). :func:`decode_steps` times many batches at once.

    Returns
    -------
    dict
        ``compute_s`` (operator roofline over all layers of one accelerator's shard, both micro-batches),
        ``bytes`` [bytes] read and written per accelerator, the collectives ``tp_allreduce_s``,
        ``ep_alltoall_s``, ``pp_send_s`` and ``time_s`` (their sum, or the overlapped step with
        ``Replica.overlap`` and two or more sequences).
    """
    return decode_steps(s, [batch_per_group], context_tokens, [padded_to])[0]


def decode_steps(s: Setup, batches_per_group, context_tokens: float, padded_to=None) -> list[dict]:
    """:func:`decode_step` at each of ``batches_per_group`` [sequences], padded to ``padded_to`` (one entry per
    batch, None for a batch run as itself; default none padded), the operator work of all of them timed in
    one vectorised pass (:func:`hnplan.compute.operator_grid.operator_grid`): a serving search's batch grid.

    Returns
    -------
    list of dict
        One :func:`decode_step` result per batch, in order.
    """
    r = s.replica
    bs = [max(1, int(math.ceil(b))) for b in batches_per_group]
    pads = [None] * len(bs) if padded_to is None else list(padded_to)
    if len(pads) != len(bs):
        raise ValueError(f"{len(pads)} padded batches for {len(bs)} batches")
    bps = [max(b, int(p or b)) for b, p in zip(bs, pads)]
    ctx = max(1, int(round(context_tokens)))
    v = verified_tokens(s)
    # the (sequences, padded sequences) each step runs through the model: the batch, or with the overlap and
    # two or more sequences (one cannot be split: nothing to overlap with) its two micro-batches
    parts = [
        ((b - b // 2, bp - bp // 2), (b // 2, bp // 2)) if r.overlap and b >= 2 else ((b, bp),)
        for b, bp in zip(bs, bps)
    ]
    distinct = list(dict.fromkeys(p for step in parts for p in step))
    work = dict(zip(distinct, _decode_work(s, [p[0] for p in distinct], [p[1] for p in distinct], ctx, v)))
    dequant, hidden, draft = dequant_share(s), decode_overlap_efficiency(s), draft_share(s)
    comm: dict = {}
    out = []
    for bp, step in zip(bps, parts):
        if len(step) == 2:
            tot = {k: work[step[0]][k] + work[step[1]][k] for k in ("time_s", "bytes", "flops")}
        else:
            tot = work[step[0]]
        # the collectives carry the whole batch's bytes; timed as one exchange per layer (the one-shot kernel's
        # latency is about 1 % of its time at these sizes; the pairwise exchange's p - 1 latencies are already
        # a pessimistic stand-in, docs/inference.md)
        if bp not in comm:
            comm[bp] = _comm_time_s(s, bp * v, decode=True)
        one = _pass_times(tot, comm[bp], len(step) == 2, dequant, hidden)
        out.append(one if draft == 0.0 else {k: val * (1.0 + draft) for k, val in one.items()})
    return out


def _decode_work(s: Setup, bs: list[int], bps: list[int], ctx: int, v: int) -> list[dict]:
    """Operator totals of ``bs[j]`` sequences run as ``bps[j]`` (CUDA-graph padding), ``v`` query tokens each
    (speculative decoding: each sequence's KV read once), on the busiest expert-parallel rank: its routed
    experts run :func:`.speculative.routing_peak` times the mean tokens; ``time_s``, ``bytes``, ``flops`` of
    :func:`hnplan.compute.totals`, one dict per ``j``, all timed in one :func:`operator_grid` call (two with
    the busiest rank's routed rows)."""
    r = s.replica
    b, bp = np.array(bs, dtype=np.int64), np.array(bps, dtype=np.int64)
    tokens = bp * v

    def grid(batches, only=None) -> dict:
        return operator_grid(
            s.model, s.acc, "decode", batches, ctx, kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype, only=only
        )

    cols = grid(tokens)
    # the routed rows alone, at the busiest rank's tokens
    busy: dict[int, int] = {}
    for j, p in enumerate(bps):
        peak = routing_peak(s, p * v)
        if peak > 1.0:
            busy[j] = math.ceil(peak * p * v)
    if busy:
        sub = grid(list(busy.values()), ROUTED_OPS)
        rows = np.array([str(n).startswith(ROUTED_OPS) for n in cols["name"]], dtype=bool)
        at = np.ix_(np.flatnonzero(rows), np.array(list(busy), dtype=np.int64))
        cols = {**cols}
        for k in ("flops", "bytes", "compute_time_s", "memory_time_s", "time_s"):
            cols[k] = cols[k].copy()
            cols[k][at] = sub[k]
    saved = _kv_bytes_saved(s, tokens, ctx) + (v - 1) / v * _kv_bytes_read(s, tokens, ctx)
    cols = _retime_attention(cols, saved, b / bp, sliding_kept(s.model, ctx))
    # each batch's rows summed as :func:`hnplan.compute.totals` sums one pass (a contiguous row per batch)
    sums = {k: np.ascontiguousarray((cols[k] * cols["count"]).T).sum(axis=1) for k in ("time_s", "bytes", "flops")}
    return [{k: float(sums[k][j]) for k in sums} for j in range(len(bs))]


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
