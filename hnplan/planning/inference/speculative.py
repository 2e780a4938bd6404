"""What a serving engine's decode step runs beyond one token per sequence over NCCL: speculative decoding
(multi-token prediction) and the expert all-to-all kernel it picks.

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
    ``oneshot_alltoall_efficiency`` of the scale-out line rate, :func:`hnplan.comm.collectives.
    oneshot_alltoall_time`). Prefill keeps the pairwise exchange at the fabric's all-to-all bandwidth
    (DeepEP's normal kernels, which the fabric's ``alltoall_efficiency`` records).
"""

from __future__ import annotations

from dataclasses import replace

from hnplan import units
from hnplan.comm import best_time
from hnplan.comm.algorithms import algorithm_time
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
    """The EP group as the engine's one-shot kernel sees it: its scale-out share at
    ``oneshot_alltoall_efficiency`` of the line rate."""
    assert s.engine is not None and s.engine.oneshot_alltoall_efficiency is not None  # schema validator
    bw = g.out.line_rate_Bps * s.engine.oneshot_alltoall_efficiency
    return replace(g, out=replace(g.out, alltoall_bw_Bps=bw))


def ep_alltoall_s(s: Setup, tokens_per_group: float, decode: bool) -> float:
    """Dispatch and combine all-to-alls of one pass over all MoE layers [s].

    Each of the ``T / tp`` tokens of an EP rank goes to its ``k`` experts at the GEMM dtype (at least one
    byte: FP8 dispatch, DeepEP) and returns in bf16 (combine). A decode pass with an engine whose
    ``ep_decode_alltoall`` is ``oneshot`` runs both on the one-shot kernel; otherwise (prefill, no engine,
    ``pairwise``) the tuner's pairwise exchange.
    """
    g = s.placements["ep"]
    if g is None:
        return 0.0
    m, r = s.model, s.replica
    assert m.moe is not None  # an EP group exists only for an MoE model (resolve)
    copies = tokens_per_group / r.tp * m.moe.active_experts * m.hidden
    dispatch = copies * max(units.dtype_bytes(r.dtype), 1.0)
    combine = copies * ACT_BYTES
    layers = m.layers - m.moe.first_dense_layers
    if decode and s.engine is not None and s.engine.ep_decode_alltoall == "oneshot":
        one = _oneshot_group(s, g)
        return layers * sum(float(algorithm_time("alltoall", "oneshot", b, one)) for b in (dispatch, combine))
    return layers * (best_time("alltoall", dispatch, g)[0] + best_time("alltoall", combine, g)[0])
