"""The tuner that picks the fastest collective algorithm per message size, as NCCL's does ([3]_), over the
algorithms' times of :mod:`hnplan.comm.algorithm_times` (whose names this module re-exports).

References
----------
.. [3] NVIDIA/nccl src/graph/tuning.cc: per-algorithm bandwidth/latency model and the choice of the
   fastest (algorithm, protocol) per size; nvlsEfficiency.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan.comm import nccl, nccl_bw
from hnplan.comm.algorithm_times import (  # noqa: F401 - the algorithms' times re-exported
    ALGORITHMS,
    _allreduce,
    _checked_time,
    _nccl,
    _one_pass,
    _ring,
    _ring_bw,
    _tree_data,
    _tuned,
    algorithm_table,
    algorithm_time,
    p2p_terms,
)
from hnplan.comm.collectives import OPS, CollectiveResult, busbw_factor
from hnplan.comm.group_stack import derived, when
from hnplan.comm.placement import GroupPlacement
from hnplan.errors import InputError, check_choice


def _tuner_key(op: str, alg: str, g: GroupPlacement, s, t):
    """What the tuner ranks algorithm ``alg`` by at sizes ``s``, given its time ``t`` [s].

    On an NCCL fabric (:func:`_nccl`) NCCL's own estimate: the tree all-reduce with NCCL's 0.92, its
    per-channel caps and size corrections (:func:`hnplan.comm.nccl_bw.tree_estimate_s`), the ring with its
    LL128 channel cap where the group has channels and a GPU generation and the cap binds; elsewhere, and for the other algorithms, ``t`` itself.
    NCCL runs what its tuner estimates fastest (src/graph/tuning.cc, src/enqueue.cc); the time charged is
    hnplan's of that algorithm: the caps are the tuner's estimates, not limits the links reach (forced NCCL
    trees on 3 GB200 partitions reached 234 and 486 GB/s busbw through 4 and 8 NICs, above 4 x 24 and 8 x 24,
    data/reference/comm_at_scale.csv)."""
    if alg != "ring" and (alg != "tree" or op != "allreduce"):  # ranked by its time on any fabric
        return t
    if not _nccl(g):
        return t
    if alg == "tree":  # the all-reduce's
        return nccl_bw.tree_estimate_s(g, s, _tree_data(g, s)[0])
    if alg == "ring":
        binds = g.derived.get("ring_ll128_cap_binds")  # (read first: the tuner's scalar path)
        if binds is None:
            binds = derived(g, "ring_ll128_cap_binds", ring_cap_binds)
        if not (binds if binds.__class__ is bool else when(binds)):
            return t
        p = g.size
        if op == "allreduce":
            return _ring(g, 2, 2 * (p - 1) / p * s, True, model=True)
        if op in ("reducescatter", "allgather"):
            return _ring(g, 1, (p - 1) / p * s, False, model=True)
    return t


def ring_cap_binds(g: GroupPlacement) -> bool:
    """Whether the ring's LL128 channel cap (channels x perChMaxRingLL128Bws) is below LL128's share of the ring
    bandwidth on ``g`` (:func:`_tuner_key`; once per placement)."""
    cap = nccl_bw.channel_cap(g, nccl_bw.PER_CHANNEL_RING_LL128_GBps)
    return cap is not None and cap < nccl.LL128_LINE_FRACTION * _ring_bw(g)


SCALAR_SIZES = 4  # up to this many sizes, fastest_time evaluates each size on floats (3x faster than arrays)


def fastest_time(op: str, n_bytes, group: GroupPlacement) -> np.ndarray:
    """The tuner's time of ``op`` at each size [s]: the least of :func:`algorithm_table`'s times, computed
    without building the table (the planners' path; the same numbers).

    Parameters
    ----------
    op : str
        One of :data:`hnplan.comm.collectives.OPS`.
    n_bytes : float or array
        nccl-tests size S [bytes].
    group : GroupPlacement

    Returns
    -------
    numpy.ndarray
        Shaped as ``n_bytes``; 0 for a group of one rank.

    Raises
    ------
    InputError
        For an unknown op.
    """
    check_choice("collective", op, OPS)
    s = np.asarray(n_bytes, dtype=float)
    if group.size == 1:
        return np.zeros_like(s)
    if s.size <= SCALAR_SIZES:  # the same formulas on floats (best_time): the same numbers, no array overhead
        return np.array([_best(op, x, group)[0] for x in s.ravel().tolist()], dtype=float).reshape(s.shape)
    return _fastest(op, s, group)


def _fastest(op: str, s: np.ndarray, group) -> np.ndarray:
    """:func:`fastest_time` of a checked op at sizes ``s`` (a float array) on a group of more than one rank, or
    on a :class:`~hnplan.comm.group_stack.GroupStack` (``s`` one size per element)."""
    best = key = None
    for alg in _tuned(op, group):
        t = _allreduce(alg, group, s) if op == "allreduce" else _one_pass(op, alg, group, s)
        if t is not None:
            k = _tuner_key(op, alg, group, s, t)
            if best is None:
                best, key = t, k
            else:
                better = k < key
                best, key = np.where(better, t, best), np.where(better, k, key)
    best = np.asarray(best, dtype=float)
    return best if best.shape == s.shape and best is not s else np.broadcast_to(best, s.shape).copy()


def collective(op: str, n_bytes, group: GroupPlacement, algorithm: str | None = None) -> CollectiveResult:
    """Time, algbw and busbw of a collective, with the fastest applicable algorithm per size (as NCCL's
    tuner picks, [3]_) or the one forced by ``algorithm``.

    Parameters
    ----------
    op : str
        allreduce, reducescatter, allgather, alltoall, broadcast or sendrecv.
    n_bytes : float or array
        nccl-tests size S [bytes], shape (n,) or scalar.
    group : GroupPlacement
        From :func:`hnplan.comm.placement.place_group`.
    algorithm : str, optional
        Force one algorithm (``ALGORITHMS[op]``).

    Returns
    -------
    CollectiveResult

    Raises
    ------
    InputError
        For an unknown op or algorithm, or an algorithm that does not apply to this group.

    Examples
    --------
    Ring all-reduce of 1 GB on 8 ranks of 100 GB/s with no latency: 2 x 7/8 x 1e9 / 1e11 = 17.5 ms,
    algbw 57.1 GB/s, busbw 100 GB/s.

    >>> from hnplan.comm.topology import LinkParams
    >>> from hnplan.comm.placement import flat_placement
    >>> lk = LinkParams(1e11, 0.0, 1e11)
    >>> r = collective("allreduce", 1e9, flat_placement(8, 8, lk, lk), "ring")
    >>> round(float(r.time_s[0]) * 1e3, 3), round(float(r.busbw_Bps[0]) / 1e9, 1)
    (17.5, 100.0)
    """
    s = np.atleast_1d(np.asarray(n_bytes, dtype=float))
    if np.any(s < 0):
        raise InputError("message sizes must be >= 0 bytes")
    if algorithm is not None:
        t = algorithm_time(op, algorithm, s, group)
        if t is None:
            raise InputError(
                f"algorithm {algorithm!r} does not apply to {op} on this group "
                f"(p = {group.size}, {group.per_domain} per domain; rhd needs powers of two, pat one rank per domain on an NCCL fabric, "
                "inr a switch that reduces)"
            )
        names = np.full(s.shape, algorithm if group.size > 1 else "none", dtype=object)
    else:
        table = algorithm_table(op, s, group)
        keys = list(table)
        stack = np.vstack([table[k] for k in keys])
        ranks = np.vstack([np.broadcast_to(_tuner_key(op, k, group, s, table[k]), s.shape) for k in keys])
        idx = np.argmin(ranks, axis=0)
        t = stack[idx, np.arange(s.size)]
        names = np.array([keys[i] if group.size > 1 else "none" for i in idx], dtype=object)
    positive = t > 0
    finite_algbw = s / np.where(positive, t, 1.0)
    algbw = np.where(positive, finite_algbw, np.inf)
    busbw = np.where(positive, finite_algbw * busbw_factor(op, group.size), 0.0)
    return CollectiveResult(op, group.size, s, t, algbw, busbw, names, group.per_domain, group.domains, group.level)


def best_time(op: str, n_bytes: float, group: GroupPlacement) -> tuple[float, str]:
    """The tuner's time [s] and algorithm for one scalar size (the planners' fast path of
    :func:`collective`; same formulas, no arrays).

    Raises
    ------
    InputError
        For an unknown op.
    """
    if op not in OPS:  # (checked before the call: the tuner's scalar path asks once per message)
        check_choice("collective", op, OPS)
    if group.size == 1:
        return 0.0, "none"
    return _best(op, float(n_bytes), group)


def _best(op: str, s: float, group: GroupPlacement) -> tuple[float, str]:
    """:func:`best_time` of a checked op on a group of more than one rank."""
    best, key, name = math.inf, math.inf, ""
    for alg in _tuned(op, group):
        t = _allreduce(alg, group, s) if op == "allreduce" else _one_pass(op, alg, group, s)
        if t is not None:
            k = _tuner_key(op, alg, group, s, t)
            if k < key:
                best, key, name = float(t), float(k), alg
    return best, name
