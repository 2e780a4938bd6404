"""Continuous batching in steady state and the operating points of a replica over batch size, and the
maximum-throughput point (the frontier of a replica as a table, with its power, is
:func:`hnplan.planning.inference.points.frontier`).

The replica, its resolved setup and its memory live in :mod:`hnplan.planning.inference.core`, whose module
docstring gives the steady-state equations implemented here (Orca, Yu et al. OSDI 2022; Sarathi-Serve,
Agrawal et al. OSDI 2024); the time of one prefill or decode pass in :mod:`hnplan.planning.inference.passes`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from hnplan import units
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.planning.inference.core import (
    DEFAULT_MAX_BATCHED_TOKENS,
    Setup,
    max_batch,
    memory_per_gpu_bytes,
    usable_bytes_per_gpu,
)
from hnplan.planning.inference.passes import (  # noqa: F401  (the pass functions lived here: re-exported)
    _comm_time_s,
    _kv_dtype_reads,
    decode_step,
    decode_steps,
    prefill_pass,
    prefill_per_request_s,
)
from hnplan.planning.inference.speculative import (  # noqa: F401  (graph_batch: re-exported)
    graph_batch,
    iteration_overhead_s,
    tokens_per_step,
)

#: what the KV cache is sized for per sequence in flight (:func:`reserved_context_tokens`)
KV_RESERVES = ("full", "mean")


def reserved_context_tokens(input_tokens: float, output_tokens: float, kv_reserve: str = "full") -> float:
    """KV cache held per sequence in flight when the memory bound on the batch is checked [tokens].

    ``full``: ``I + O``, the whole sequence, what a static reservation (or a no-evict scheduler that reserves a
    request's maximum length at admission) needs: the worst case, and the default. ``mean``: ``I + O/2``, what a
    paged KV cache holds on average under continuous batching: blocks are allocated as tokens are generated
    (vLLM's PagedAttention, Kwon et al., SOSP 2023, Sec. 4), so a sequence of the mean lengths holds its
    prompt plus, averaged over its decode, half its output. ``mean`` is the time average of one request
    of the mean lengths; with variable lengths a sequence in flight is longer on average
    (``E[O (I + O/2)] / E[O]``, :meth:`hnplan.planning.inference.queueing.Traffic.summary`), and an engine
    whose cache fills at that mean preempts or swaps sequences as some grow past it.

    >>> reserved_context_tokens(389, 291), reserved_context_tokens(389, 291, "mean")
    (680, 534.5)

    Raises
    ------
    InputError
        If ``kv_reserve`` is not one of :data:`KV_RESERVES`.
    """
    if kv_reserve == "full":
        return input_tokens + output_tokens
    if kv_reserve == "mean":
        return input_tokens + output_tokens / 2
    raise InputError(f"kv_reserve must be one of {', '.join(KV_RESERVES)}; got {kv_reserve!r}")


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
        ``ttft_s`` without queueing: the prefill of the request, the decode of the other sequences in the
        iteration that carries it and the engine's host time, ``t_prefill(1, I) + (t_decode(B) - t_decode(1)) +
        t_host`` (the mixed iteration streams the weights once: a lone sequence's decode step, their read, is
        not added again; at ``B = 1`` the prefill alone emits the first token); with chunks,
        ``t_prefill(1, I) + ceil(I / chunk) (t_decode(B) - t_decode(1) + t_host)``; disaggregated,
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
    b_group, admitted, b_graph = _decode_batches(s, batch, output_tokens, disaggregated)
    dec = dec_eager = _decode(s, cache, b_group, ctx, None)
    if b_graph is not None:
        # iterations that carry a prefill run eagerly at the batch itself; the generation-only ones (at
        # least 1 - admitted of them) replay the CUDA graph of the padded batch
        padded = _decode(s, cache, b_group, ctx, b_graph)
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
    # the first token: the request's prefill and, in the iteration that carries it, the decode of the others in
    # flight; the weights stream once for both (one forward of I + B - 1 tokens), so the decode adds its step less a
    # lone sequence's (the weights' read): nothing on an idle replica, whose prefill emits the first token
    others = 0.0
    if not disaggregated and batch > 1:
        others = max(0.0, dec_eager["time_s"] - _decode(s, cache, 1, ctx, None)["time_s"])
    ttft = pf_single + host + others
    if chunked_prefill is not None and not disaggregated:
        if chunked_prefill < 1:
            raise InputError(f"chunked_prefill must be >= 1 token; got {chunked_prefill}")
        per_iter = batch * per_step / r.groups * input_tokens / output_tokens
        if check_chunk and per_iter > chunked_prefill:
            raise InfeasiblePlan(
                f"batch {batch} admits {per_iter:.0f} prompt tokens per iteration and attention "
                f"group, more than the {chunked_prefill}-token chunk"
            )
        ttft = pf_single + math.ceil(input_tokens / chunked_prefill) * (others + host)
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


def _decode_batches(s: Setup, batch: int, output_tokens: float, disaggregated: bool) -> tuple[int, float, int | None]:
    """The decode steps an iteration of :func:`steady_state` at ``batch`` runs: the sequences of one attention
    group, the requests each iteration admits per group, and the CUDA graph's batch its generation-only
    iterations are padded to (None when none are: no graph above the batch, or every iteration carries a
    prefill)."""
    r = s.replica
    b_group = math.ceil(batch / r.groups)
    # requests per iteration and group
    admitted = 0.0 if disaggregated else batch * tokens_per_step(s) / output_tokens / r.groups
    b_graph = graph_batch(s, b_group)
    return b_group, admitted, (b_graph if b_graph > b_group and admitted < 1.0 else None)


def _decode(s: Setup, cache: dict, b_group: int, ctx: float, padded_to: int | None) -> dict:
    """:func:`decode_step`, kept in the replica's ``cache`` (where :func:`steady_states` puts a batch grid's)."""
    key = ("decode", b_group, ctx, padded_to)
    if key not in cache:
        cache[key] = decode_step(s, b_group, ctx, padded_to=padded_to)
    return cache[key]


def steady_states(s: Setup, batches, input_tokens: float, output_tokens: float, _cache: dict | None = None, **kwargs):
    """:func:`steady_state` at each of ``batches``, their decode steps timed in one vectorised pass
    (:func:`time_decode_steps`): the same operating points, for a batch grid.

    Returns
    -------
    dict
        ``{batch: OperatingPoint}`` in the order of ``batches``.

    Raises
    ------
    InfeasiblePlan, InputError
        As :func:`steady_state`, for the first batch that raises.
    """
    cache = {} if _cache is None else _cache
    time_decode_steps(s, batches, input_tokens, output_tokens, cache, **kwargs)
    return {int(b): steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs) for b in batches}


def time_decode_steps(
    s: Setup,
    batches,
    input_tokens: float,
    output_tokens: float,
    cache: dict,
    *,
    context_tokens: float | None = None,
    disaggregated: bool = False,
    **_,
) -> None:
    """Time the decode steps :func:`steady_state` needs at each of ``batches`` (its other arguments as
    there) in one vectorised pass (:func:`hnplan.planning.inference.passes.decode_steps`) and keep them in
    the replica's ``cache``, the ``_cache`` of the calls that follow; batches that fit nowhere are timed all
    the same (their :func:`steady_state` raises), invalid arguments left for :func:`steady_state` to name."""
    if input_tokens < 1 or output_tokens < 1:
        return
    ctx = input_tokens + output_tokens / 2 if context_tokens is None else context_tokens
    want: list[tuple[int, int | None]] = []
    for b in (int(b) for b in batches if int(b) >= 1):
        b_group, _admitted, b_graph = _decode_batches(s, b, output_tokens, disaggregated)
        want += [(b_group, None)] + ([] if b_graph is None else [(b_group, b_graph)])
    want = [w for w in dict.fromkeys(want) if ("decode", w[0], ctx, w[1]) not in cache]
    if want:
        steps = decode_steps(s, [w[0] for w in want], ctx, [w[1] for w in want])
        cache.update({("decode", w[0], ctx, w[1]): d for w, d in zip(want, steps)})


def batch_grid(max_b: int, groups: int = 1, points: int = 24) -> np.ndarray:
    """Batches to evaluate: multiples of ``groups`` on a geometric grid from ``groups`` to ``max_b``
    (both included) [-]."""
    lo = groups
    if max_b <= lo:
        return np.array([max(1, max_b)])
    g = np.round(np.geomspace(lo, max_b, points) / groups).astype(int) * groups
    g = g[(g >= 1) & (g <= max_b)]
    # sorted and distinct as numpy.unique gives them, which on a plain array imports numpy.ma (about 10 ms)
    return np.array(sorted(set(g.tolist()) | {int(max_b)}), dtype=g.dtype)


def max_throughput_point(s: Setup, input_tokens: float, output_tokens: float, **kwargs) -> OperatingPoint:
    """The batch that maximises output tokens/s within memory, as throughput benchmarks at an
    unbounded request rate measure (a grid over batch, then the neighbourhood of the best)."""
    mb = max_batch(s, kwargs.get("max_context_tokens") or input_tokens + output_tokens)
    cache: dict = {}
    pts = steady_states(s, batch_grid(mb, s.replica.groups, 16), input_tokens, output_tokens, cache, **kwargs)
    best = max(pts, key=lambda b: pts[b].tokens_per_s)
    keys = sorted(pts)
    i = keys.index(best)
    lo, hi = keys[max(i - 1, 0)], keys[min(i + 1, len(keys) - 1)]
    finer = [int(b) for b in batch_grid(hi, s.replica.groups, 64) if lo < b < hi and int(b) not in pts]
    pts.update(steady_states(s, finer, input_tokens, output_tokens, cache, **kwargs))
    return pts[max(pts, key=lambda b: pts[b].tokens_per_s)]


def queue_run_tokens_per_s(s: Setup, point: OperatingPoint, num_requests: int) -> float:
    """Output tokens/s of a run that serves ``num_requests`` equal requests, all queued at once, at ``point``'s
    batch, measured from the first request's start to the last one's end [tokens/s].

    A throughput benchmark at an unbounded request rate (TensorRT-LLM ``trtllm-bench throughput``: every
    request of the dataset submitted at the start, output throughput = all output tokens / (latest end -
    earliest start), tensorrt_llm/bench/dataclasses/reporting.py ``generate_statistics_summary``) runs its
    ``N`` requests of equal length (prepare_dataset.py ``token-norm-dist`` with stdev 0) in generations: the
    engine holds ``B`` (``point.batch``) of them, and a finished one is replaced from the queue, so
    ``G = N // B`` generations run at ``B`` and the last ``r = N - G B`` requests decode their ``O`` tokens
    at a batch of ``r``::

        T = (O / k) (G t_iter(B) + t_iter(r))      tokens/s = N O / T = N k / (G t_iter(B) + t_iter(r))

    with ``k`` output tokens per sequence and step (:func:`tokens_per_step`) and ``t_iter`` the steady-state
    iteration of :func:`steady_state` (its decode step and the prefill share it carries). As ``N / B`` grows
    this tends to ``point.tokens_per_s``. Labelled assumption: the admissions of one generation are spread
    over far fewer iterations than its ``O / k`` steps, so the tail runs at ``r`` for its whole length
    (where prefill dominates the iteration, ``t_iter`` scales with the batch and the tail costs little either
    way).

    Raises
    ------
    InputError
        If ``num_requests`` < 1.
    """
    if num_requests < 1:
        raise InputError(f"num_requests must be >= 1; got {num_requests}")
    full, rest = divmod(int(num_requests), point.batch)
    t = full * point.iteration_s
    if rest:
        t += steady_state(s, rest, point.input_tokens, point.output_tokens).iteration_s
    return num_requests * tokens_per_step(s) / t
