"""Time of one serving pass and the operating points of a replica: prefill and decode passes, continuous
batching in steady state, the throughput-latency frontier over batch size and the maximum-throughput point.

The replica, its resolved setup and its memory live in :mod:`hnplan.planning.inference.core`, whose module
docstring gives the steady-state equations implemented here (Orca, Yu et al. OSDI 2022; Sarathi-Serve,
Agrawal et al. OSDI 2024).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.comm import best_time
from hnplan.comm.messages import tp_message_bytes
from hnplan.compute import operator_columns, totals
from hnplan.compute.operators import replace_rows
from hnplan.compute.parts import ROUTED_OPS
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.memory import kv_cache_bytes_per_token
from hnplan.planning.inference.core import (
    DEFAULT_MAX_BATCHED_TOKENS,
    Replica,
    Setup,
    max_batch,
    memory_per_gpu_bytes,
    resolve,
    usable_bytes_per_gpu,
)
from hnplan.planning.inference.speculative import (
    decode_overlap_efficiency,
    dequant_share,
    draft_share,
    ep_alltoall_s,
    graph_batch,
    iteration_overhead_s,
    overlapped_step_s,
    routing_peak,
    tokens_per_step,
    verified_tokens,
)

if TYPE_CHECKING:
    import pandas as pd


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


# --- steady state --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OperatingPoint:
    """Continuous batching in steady state at ``batch`` concurrent sequences. Times [s], rates [1/s]."""

    batch: int
    input_tokens: float
    output_tokens: float
    decode_s: float
    prefill_per_request_s: float
    prefill_single_s: float
    iteration_s: float
    tpot_s: float
    ttft_s: float
    e2e_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    requests_per_s: float
    memory_per_gpu_bytes: float
    hbm_bytes: float  # usable by the engine: visible HBM x serving memory utilization
    max_batch: int
    breakdown_s: dict = field(default_factory=dict)
    compute_busy: float = 0.0  # FLOPs of one accelerator per iteration / (dense peak x iteration) [fraction]
    memory_busy: float = 0.0  # bytes of one accelerator per iteration / (HBM bandwidth x iteration) [fraction]

    @property
    def power_utilisation(self) -> float:
        """Accelerator power utilisation for :func:`hnplan.power.accelerator_power_w`: the larger of the
        compute and memory busy fractions, at most 1 [fraction]."""
        return min(1.0, max(self.compute_busy, self.memory_busy))

    def as_dict(self) -> dict:
        return asdict(self)


def steady_state(
    s: Setup,
    batch: int,
    input_tokens: float,
    output_tokens: float,
    *,
    context_tokens: float | None = None,
    max_context_tokens: float | None = None,
    max_batched_tokens: int | None = None,
    disaggregated: bool = False,
    chunked_prefill: int | None = None,
    _cache: dict | None = None,
) -> OperatingPoint:
    """Continuous batching with ``batch`` concurrent sequences in steady state (module docstring).

    Parameters
    ----------
    s : Setup
    batch : int
        Concurrent sequences in the replica [-].
    input_tokens, output_tokens : float
        Mean prompt and output lengths [tokens].
    context_tokens : float, optional
        Mean KV length during decode [tokens]; default ``I + O/2``.
    max_context_tokens : float, optional
        Longest context to hold in memory [tokens]; default ``I + O``.
    max_batched_tokens : int, optional
        Scheduler token budget of one prefill pass [tokens]; default the engine's
        ``max_num_batched_tokens``, else :data:`DEFAULT_MAX_BATCHED_TOKENS`.
    disaggregated : bool
        Decode-only replica (prefill runs in another pool): no prefill in the iteration.
    chunked_prefill : int, optional
        Chunk size [tokens] (Sarathi-Serve): each iteration carries at most this many prompt tokens
        per attention group next to the decodes (more raises :class:`InfeasiblePlan`). The mean
        iteration is unchanged; a prompt's first token comes after ``ceil(I / chunk)`` iterations.
        Default: the engine's ``max_num_batched_tokens`` when the engine chunks prefills (no
        admission check: the engine's budget then throttles admission), else whole prompts.

    Returns
    -------
    OperatingPoint
        ``ttft_s`` without queueing: the prefill of the request plus the decode step of the iteration
        that carries it and the engine's host time, ``t_prefill(1, I) + t_decode(B) + t_host``; with
        chunks, ``t_prefill(1, I) + ceil(I / chunk) (t_decode(B) + t_host)``; disaggregated,
        ``t_prefill(1, I) + t_host``. ``tpot_s`` is the iteration, host time included, over the
        tokens a sequence emits per step (more than 1 with the engine's speculative decoding,
        :func:`.speculative.tokens_per_step`). See
        :mod:`hnplan.planning.inference.capacity` for queueing at a request rate.

    Raises
    ------
    InfeasiblePlan
        If ``batch`` exceeds :func:`max_batch` (memory) or the weights do not fit.
    """
    if batch < 1 or input_tokens < 1 or output_tokens < 1:
        raise InputError(f"batch, input and output tokens must be >= 1; got {batch}, {input_tokens}, {output_tokens}")
    ctx = input_tokens + output_tokens / 2 if context_tokens is None else context_tokens
    ctx_max = input_tokens + output_tokens if max_context_tokens is None else max_context_tokens
    cache = {} if _cache is None else _cache  # of this replica: what does not depend on the batch
    if ("memory", ctx_max) not in cache:
        cache["memory", ctx_max] = (max_batch(s, ctx_max), usable_bytes_per_gpu(s))
    mb, usable = cache["memory", ctx_max]
    if batch > mb:
        raise InfeasiblePlan(
            f"batch {batch} exceeds the {mb:,} sequences of {ctx_max:,.0f} tokens that fit the KV cache"
        )
    r, eng = s.replica, s.engine
    if max_batched_tokens is None:
        max_batched_tokens = eng.max_num_batched_tokens if eng is not None else DEFAULT_MAX_BATCHED_TOKENS
    check_chunk = chunked_prefill is not None
    if chunked_prefill is None and eng is not None and eng.chunked_prefill:
        chunked_prefill = eng.max_num_batched_tokens
    host = iteration_overhead_s(s)
    per_step = tokens_per_step(s)  # output tokens per sequence and step (speculative decoding: > 1)
    b_group = math.ceil(batch / r.groups)
    dec = dec_eager = decode_step(s, b_group, ctx)
    # requests per iteration and group
    admitted = 0.0 if disaggregated else batch * per_step / output_tokens / r.groups
    b_graph = graph_batch(s, b_group)
    if b_graph > b_group and admitted < 1.0:
        # iterations that carry a prefill run eagerly at the batch itself; the generation-only ones (at
        # least 1 - admitted of them) replay the CUDA graph of the padded batch
        padded = decode_step(s, b_group, ctx, padded_to=b_graph)
        dec = {k: admitted * v + (1.0 - admitted) * padded[k] for k, v in dec_eager.items()}
    key = ("prefill", input_tokens, max_batched_tokens)
    if key not in cache:
        one = prefill_pass(s, 1, input_tokens)
        cache[key] = (
            prefill_per_request_s(s, input_tokens, max_batched_tokens),
            one["time_s"],
            one["flops"],
            one["bytes"],
        )
    pf_req, pf_single, pf_flops, pf_bytes = cache[key]
    # prefill work spreads over the ``groups`` attention groups that run in parallel
    pf_iter = 0.0 if disaggregated else batch * per_step / output_tokens * pf_req / r.groups
    t_it = dec["time_s"] + pf_iter + host
    tps = batch * per_step / t_it
    # the first token: the request's prefill plus the decode step of the iteration that carries it
    ttft = pf_single + host + (0.0 if disaggregated else dec_eager["time_s"])
    if chunked_prefill is not None and not disaggregated:
        if chunked_prefill < 1:
            raise InputError(f"chunked_prefill must be >= 1 token; got {chunked_prefill}")
        per_iter = batch * per_step / r.groups * input_tokens / output_tokens
        if check_chunk and per_iter > chunked_prefill:
            raise InfeasiblePlan(
                f"batch {batch} admits {per_iter:.0f} prompt tokens per iteration and attention "
                f"group, more than the {chunked_prefill}-token chunk"
            )
        ttft = pf_single + math.ceil(input_tokens / chunked_prefill) * (dec_eager["time_s"] + host)
    comm = dec["tp_allreduce_s"] + dec["ep_alltoall_s"] + dec["pp_send_s"]
    # busy fractions of one accelerator over an iteration: its FLOPs at the dense peak, its bytes at the
    # HBM bandwidth (decode step plus the prefill work the iteration carries)
    flops = dec["flops"] + admitted * pf_flops
    moved = dec["bytes"] + admitted * pf_bytes
    peak = {str(k): v for k, v in s.acc.dense_tflops.items()}[r.dtype]
    compute_busy = flops / units.tflops_to_flops_per_s(peak) / t_it
    memory_busy = moved / units.TBps_to_Bps(s.acc.hbm_bw_TBps) / t_it
    breakdown = {
        "decode_compute": dec["compute_s"],
        "tp_allreduce": dec["tp_allreduce_s"],
        "ep_alltoall": dec["ep_alltoall_s"],
        "pp_send": dec["pp_send_s"],
        "hidden_by_overlap": dec["time_s"] - dec["compute_s"] - comm,
        "prefill_in_iteration": pf_iter,
        "engine_host": host,
    }
    return OperatingPoint(
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        decode_s=dec["time_s"],
        prefill_per_request_s=pf_req,
        prefill_single_s=pf_single,
        iteration_s=t_it,
        tpot_s=t_it / per_step,
        ttft_s=ttft,
        e2e_s=ttft + (output_tokens - 1) * t_it / per_step,
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps / r.gpus,
        requests_per_s=tps / output_tokens,
        memory_per_gpu_bytes=memory_per_gpu_bytes(s, batch, ctx_max),
        hbm_bytes=usable,
        max_batch=mb,
        breakdown_s=breakdown,
        compute_busy=compute_busy,
        memory_busy=memory_busy,
    )


def batch_grid(max_b: int, groups: int = 1, points: int = 24) -> np.ndarray:
    """Batches to evaluate: multiples of ``groups`` on a geometric grid from ``groups`` to ``max_b``
    (both included) [-]."""
    lo = groups
    if max_b <= lo:
        return np.array([max(1, max_b)])
    g = np.unique(np.round(np.geomspace(lo, max_b, points) / groups).astype(int) * groups)
    g = g[(g >= 1) & (g <= max_b)]
    return np.unique(np.append(g, max_b))


def frontier(
    model,
    system,
    replica: Replica,
    input_tokens: float,
    output_tokens: float,
    batches=None,
    catalog: Catalog | None = None,
    **kwargs,
) -> pd.DataFrame:
    """The throughput-latency frontier of one replica over batch size.

    Returns
    -------
    pandas.DataFrame
        One row per batch: ``batch, tpot_s, ttft_s, e2e_s, tokens_per_s, tokens_per_s_per_gpu,
        tokens_per_s_per_user`` (= 1 / TPOT), ``memory_per_gpu_gib, hbm_gib, max_batch``, the power at
        that load ``gpu_power_w, node_power_w, joules_per_token``
        (:func:`~hnplan.planning.inference.points.serving_power`) plus ``system, model, tp, ep, pp, dtype``.
        ``df.attrs['units']`` names the units.

    Raises
    ------
    InfeasiblePlan
        If the weights do not fit.
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    from hnplan.planning.inference.points import serving_power  # points builds on this module

    s = resolve(model, system, replica, catalog)
    mb = max_batch(s, input_tokens + output_tokens)
    bs = batch_grid(mb, replica.groups) if batches is None else [b for b in batches if b <= mb]
    cache: dict = {}
    rows = []
    for b in bs:
        p = steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
        pw = serving_power(s, p)
        rows.append(
            {
                "system": s.system.id,
                "model": s.model.id,
                "tp": replica.tp,
                "ep": replica.ep,
                "pp": replica.pp,
                "dtype": replica.dtype,
                "batch": p.batch,
                "tpot_s": p.tpot_s,
                "ttft_s": p.ttft_s,
                "e2e_s": p.e2e_s,
                "tokens_per_s": p.tokens_per_s,
                "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
                "tokens_per_s_per_user": 1.0 / p.tpot_s,
                "memory_per_gpu_gib": units.to_GiB(p.memory_per_gpu_bytes),
                "hbm_gib": units.to_GiB(p.hbm_bytes),
                "max_batch": p.max_batch,
                "gpu_power_w": pw["gpu_power_w"],
                "node_power_w": pw["node_power_w"],
                "joules_per_token": pw["joules_per_token"],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["units"] = {
        "tpot_s": "s",
        "ttft_s": "s",
        "e2e_s": "s",
        "tokens_per_s": "output tokens/s",
        "tokens_per_s_per_gpu": "output tokens/s/GPU",
        "tokens_per_s_per_user": "tokens/s",
        "memory_per_gpu_gib": "GiB",
        "hbm_gib": "GiB",
        "gpu_power_w": "W",
        "node_power_w": "W",
        "joules_per_token": "J/output token",
    }
    return df


def max_throughput_point(s: Setup, input_tokens: float, output_tokens: float, **kwargs) -> OperatingPoint:
    """The batch that maximises output tokens/s within memory, as throughput benchmarks at an
    unbounded request rate measure (a grid over batch, then the neighbourhood of the best)."""
    mb = max_batch(s, input_tokens + output_tokens)
    cache: dict = {}
    pts = {
        int(b): steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
        for b in batch_grid(mb, s.replica.groups, 16)
    }
    best = max(pts, key=lambda b: pts[b].tokens_per_s)
    keys = sorted(pts)
    i = keys.index(best)
    lo, hi = keys[max(i - 1, 0)], keys[min(i + 1, len(keys) - 1)]
    for b in batch_grid(hi, s.replica.groups, 64):
        if lo < b < hi and int(b) not in pts:
            pts[int(b)] = steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
    return pts[max(pts, key=lambda b: pts[b].tokens_per_s)]
