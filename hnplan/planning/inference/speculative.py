"""What a serving engine's decode step runs beyond one token per sequence over NCCL: speculative decoding
(multi-token prediction), the expert all-to-all kernel it picks, how much of it two micro-batches hide, and
the CUDA-graph batch it pads to.

Speculative decoding
    Each decode step verifies ``1 + k`` tokens per sequence: the next token and ``k`` drafts (DeepSeek-V3's
    multi-token-prediction module, arXiv:2412.19437 Sec. 2.2 and 5.4.3; a draft model, Leviathan et al.,
    ICML 2023). Draft ``i`` is kept only if drafts ``1..i-1`` were, each accepted with probability ``a``
    given the one before, so a step emits ``1 + sum_{i=1..k} a^i`` tokens per sequence on average
    (Leviathan et al. Sec. 3.1, with chained acceptance). The verify pass runs its GEMMs and collectives on
    ``1 + k`` tokens per sequence and its attention on ``1 + k`` queries against the same KV cache: more
    compute, the same KV reads. The ``k`` draft passes run the draft module (one transformer layer for
    DeepSeek-V3's MTP, ``mtp_modules``) one after the other: each is charged as one layer's share of the
    verify step (``t_verify / layers``), an upper bound since it runs at one token per sequence.

Expert all-to-all of a decode step
    ``pairwise`` (default): NCCL's pairwise exchange, ``p - 1`` sequential steps
    (:func:`hnplan.comm.best_time`). ``oneshot``: an EP library's low-latency kernel that writes to every
    peer at once (DeepEP low-latency mode: one message latency plus the bytes at
    ``oneshot_alltoall_efficiency`` of the line rate of the tier crossed, the scale-out share across scale-up
    domains, the scale-up link inside one, :func:`hnplan.comm.collectives.
    oneshot_alltoall_time`). Prefill keeps the pairwise exchange at the fabric's all-to-all bandwidth
    (DeepEP's normal kernels, which the fabric's ``alltoall_efficiency`` records).

Two-micro-batch overlap of a decode step
    With the replica's ``overlap`` a decode step runs as two micro-batches of half the sequences (DeepSeek's
    decode overlap, deepseek-ai/profile-data; SGLang's two-batch overlap): each reads the weights, the
    collectives carry the same bytes (:func:`hnplan.planning.inference.decode_step`), and while one computes
    the other's all-to-all is in flight. The low-latency kernels hold SMs while they send and receive, and a
    receive waits for the slowest of the ``p`` ranks (LMSYS, "Deploying DeepSeek with PD Disaggregation and
    Large-scale Expert Parallelism on 96 H100 GPUs", May 2025: dispatch about 0.17 ms per layer in both
    DeepSeek's and SGLang's decode profiles where DeepEP's unit test needs 0.06 ms, mostly waiting for
    data), so the overlap hides only part of the smaller term: ``t = C + A - e min(C, A)`` with the
    engine's ``decode_overlap_efficiency`` ``e`` (:func:`overlapped_step_s`; 1 without one, the
    ``max(C, A)`` upper bound).

CUDA-graph padding and the engine's per-pass costs
    :func:`graph_batch`: the batch a generation-only iteration is padded to; :func:`dequant_share` and
    :func:`iteration_overhead_s`: unfused (de)quantisation and host time per iteration.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from hnplan import units
from hnplan.comm import best_time
from hnplan.comm.algorithms import algorithm_time
from hnplan.comm.messages import random_routing_peak_one
from hnplan.comm.placement import GroupPlacement
from hnplan.compute import ACT_BYTES
from hnplan.planning.inference.core import Setup


def expected_accepted(k: int, a: float) -> float:
    """Draft tokens accepted per step on average, ``sum_{i=1..k} a^i`` [tokens]: draft ``i`` counts only when
    drafts ``1..i-1`` were accepted, each with probability ``a`` given the one before.

    >>> round(expected_accepted(2, 0.85), 4)  # 0.85 + 0.85^2
    1.5725
    """
    return sum(a**i for i in range(1, k + 1))


def verified_tokens(s: Setup) -> int:
    """Tokens per sequence a decode step runs through the model: ``1 + k`` drafts (1 without speculation)."""
    return 1 + (0 if s.engine is None else s.engine.speculative_tokens)


def tokens_per_step(s: Setup) -> float:
    """Output tokens per sequence one decode step emits on average: ``1 + sum_{i=1..k} a^i`` with the
    engine's ``speculative_tokens`` k and ``acceptance_rate`` a; 1 without speculation [tokens]."""
    e = s.engine
    if e is None or e.speculative_tokens == 0 or e.acceptance_rate is None:
        return 1.0
    return 1.0 + expected_accepted(e.speculative_tokens, e.acceptance_rate)


def draft_share(s: Setup) -> float:
    """The draft passes of a step as a share of its verify pass: ``k x mtp_modules / layers`` (one draft
    layer per MTP module, at most the verify pass's per-layer time), 0 without speculation [-]."""
    k = verified_tokens(s) - 1
    return k * max(1, s.model.mtp_modules) / s.model.layers if k else 0.0


def _oneshot_group(s: Setup, g: GroupPlacement) -> GroupPlacement:
    """The EP group as the engine's one-shot kernel sees it: the tier its exchange crosses at
    ``oneshot_alltoall_efficiency`` of that tier's line rate. Across scale-up domains, the scale-out share at
    it (DeepEP's low-latency kernels over RDMA, where the efficiency was measured). Inside one domain, the
    scale-up link at it but never above the fabric's own all-to-all bandwidth (the slower of kernel and
    fabric: CloudMatrix-Infer's FusedDispatch / FusedCombine over UB, arXiv:2506.12708, run at 0.381 of the
    line rate where UB's all-to-all reaches 0.84; an efficiency measured on RDMA does not speed up NVLink)."""
    eff = s.engine.oneshot_alltoall_efficiency if s.engine is not None else None
    assert eff is not None  # schema validator: oneshot needs its efficiency
    if g.domains == 1:
        return replace(g, up=replace(g.up, alltoall_bw_Bps=min(g.up.line_rate_Bps * eff, g.up.a2a_Bps)))
    return replace(g, out=replace(g.out, alltoall_bw_Bps=g.out.line_rate_Bps * eff))


def ep_alltoall_s(s: Setup, tokens_per_group: float, decode: bool) -> float:
    """Dispatch and combine all-to-alls of one pass over all MoE layers [s].

    Each of the ``T / tp`` tokens of an EP rank goes to its ``k`` experts at the GEMM dtype (at least one
    byte: FP8 dispatch, DeepEP) and returns in bf16 (combine); the busiest rank receives
    :func:`routing_peak` times the mean, and the exchange ends when it has. A decode pass with an engine whose
    ``ep_decode_alltoall`` is ``oneshot`` runs both on the one-shot kernel; otherwise (prefill, no engine,
    ``pairwise``) the tuner's pairwise exchange.
    """
    g = s.placements["ep"]
    if g is None:
        return 0.0
    m, r = s.model, s.replica
    assert m.moe is not None  # an EP group exists only for an MoE model (resolve)
    # the busiest rank receives the routing peak times the mean, and every rank waits for it
    copies = tokens_per_group / r.tp * m.moe.active_experts * m.hidden * routing_peak(s, tokens_per_group)
    dispatch = copies * max(units.dtype_bytes(r.dtype), 1.0)
    combine = copies * ACT_BYTES
    layers = m.layers - m.moe.first_dense_layers
    if decode and s.engine is not None and s.engine.ep_decode_alltoall == "oneshot":
        one = _oneshot_group(s, g)
        return layers * sum(float(algorithm_time("alltoall", "oneshot", b, one)) for b in (dispatch, combine))
    return layers * (best_time("alltoall", dispatch, g)[0] + best_time("alltoall", combine, g)[0])


def decode_overlap_efficiency(s: Setup) -> float:
    """Share of the smaller of a decode step's compute and communication the engine's two-micro-batch
    overlap hides: its ``decode_overlap_efficiency``, 1 (all of it) without an engine or the field [-]."""
    e = s.engine
    return 1.0 if e is None or e.decode_overlap_efficiency is None else e.decode_overlap_efficiency


def overlapped_step_s(compute_s: float, comm_s: float, efficiency: float = 1.0) -> float:
    """Time of a pass whose compute and communication overlap in part [s]:
    ``C + A - e min(C, A)``; ``e = 1`` gives ``max(C, A)``, ``e = 0`` the serial sum.

    >>> overlapped_step_s(0.04, 0.06, 0.5)  # 0.04 + 0.06 - 0.5 x 0.04
    0.08
    """
    return compute_s + comm_s - efficiency * min(compute_s, comm_s)


def graph_batch(s: Setup, batch_per_group: int) -> int:
    """Sequences a generation-only iteration of ``batch_per_group`` runs as [-]: the smallest batch the
    engine captured a CUDA graph at that holds it (``ServingEngine.cuda_graph_batch_sizes``; captured
    sizes above ``min(max_num_seqs, max_num_batched_tokens)`` fall back to that cap), the batch itself
    at or above the largest, or without an engine or its graph sizes.

    Source: TensorRT-LLM ``CUDAGraphRunner.pad_batch`` and ``_filter_cuda_graph_batch_sizes``
    (tensorrt_llm/_torch/pyexecutor), with the sizes of its perf-overview throughput runs.
    """
    e = s.engine
    if e is None or not e.cuda_graph_batch_sizes:
        return batch_per_group
    cap = min(e.max_num_seqs, e.max_num_batched_tokens)
    sizes = sorted({g for g in e.cuda_graph_batch_sizes if g <= cap} | {cap})
    if max(e.cuda_graph_batch_sizes) < cap:
        sizes.remove(cap)
    i = bisect.bisect_left(sizes, batch_per_group)
    return batch_per_group if i == len(sizes) else sizes[i]


def routing_peak(s: Setup, tokens_per_group: float) -> float:
    """Routed token copies of the busiest expert-parallel rank over the mean in a pass of
    ``tokens_per_group`` tokens [-]: the peak of random routing over the ``ep`` ranks
    (:func:`hnplan.comm.messages.random_routing_peak_one`, without scipy; the floor of any real router) times
    the engine's ``expert_load_imbalance`` (a real router's popular experts that EPLB's redundant copies do
    not even out, 1 without it), 1 for a dense model or ``ep = 1``.

    DeepSeek-V3 at EP128 with 92 sequences per rank: ``1 + 2.6 sigma / mu`` with ``mu = 736`` copies:

    >>> from hnplan.catalog import load_catalog
    >>> from hnplan.planning.inference import Replica, resolve
    >>> s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), load_catalog())
    >>> round(routing_peak(s, 92), 3), round(routing_peak(s, 4096), 3)
    (1.094, 1.014)

    The real router's share is measured where random fluctuation vanishes: SGLang's prefill of 16,384
    tokens per GPU (EP32, EPLB with 32 redundant experts, all-to-all bound) runs 59,337 tokens/s per node
    with random expert choice against 50,302 with the model's real routing, 1.18x (LMSYS, "Deploying
    DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs", May 2025, Overall
    Throughput); ``data/engines/sglang-large-ep.yaml``.
    """
    moe, r = s.model.moe, s.replica
    if moe is None or r.ep <= 1:
        return 1.0
    random_peak = random_routing_peak_one(tokens_per_group / r.tp, moe.active_experts, moe.experts, r.ep)
    e = s.engine
    return random_peak * (1.0 if e is None or e.expert_load_imbalance is None else e.expert_load_imbalance)


def dequant_share(s: Setup) -> float:
    """The engine's unfused (de)quantisation cost at the replica's dtype [fraction of operator time]."""
    if s.engine is None:
        return 0.0
    return next((v for k, v in s.engine.dequant_overhead.items() if k == s.replica.dtype), 0.0)


def iteration_overhead_s(s: Setup) -> float:
    """Host time per iteration the GPU waits for (the engine's ``iteration_overhead_s``; 0 without one) [s]."""
    return 0.0 if s.engine is None else s.engine.iteration_overhead_s
