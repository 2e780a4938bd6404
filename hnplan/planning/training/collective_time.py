"""The time of one collective for every candidate plan: each distinct ``(size, stride)`` group placed on the
system once (:func:`hnplan.comm.placement.place_group`) and each distinct message timed once with the NCCL
tuner's choice of algorithm (:func:`hnplan.comm.algorithms.fastest_time`), remembered on the job and, by the
group's placement, for every job of the process. :mod:`hnplan.planning.training.collectives` builds the TP, CP
and PP traffic of a step on it, :mod:`hnplan.planning.training.dp_collectives` the DP traffic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.comm.algorithms import SCALAR_SIZES, _fastest, _nccl, best_time, fastest_time, p2p_terms, ring_cap_binds
from hnplan.comm.collectives import sendrecv_time
from hnplan.comm.group_stack import GroupStack, MixedBranch, derived, stack_key
from hnplan.planning.training.stage_compute import content_memo

if TYPE_CHECKING:
    from hnplan.planning.training.components import Job

#: ops whose time equals another op's at every size on every group, timed once under that op's memo entry:
#: a reduce-scatter is an all-gather's pass in reverse: the same algorithms (ring, rhd, PAT) with the same time
#: and tuner estimate in :mod:`hnplan.comm.algorithms` (NVIDIA/nccl src/graph/tuning.cc counts ``nRanks - 1``
#: steps for both; tested)
SAME_TIME = {"reducescatter": "allgather"}


def collective_s(job: Job, op: str, n_bytes, size, stride) -> np.ndarray:
    """Time of one collective per candidate [s]: each distinct ``(size, stride)`` group is placed on
    the system once (:func:`hnplan.comm.placement.place_group`: Megatron rank order, domain / leaf /
    pod level) and timed with the fastest applicable algorithm for every candidate's message size
    (:func:`hnplan.comm.algorithms.fastest_time`, the NCCL-tuner choice); 0 for groups of one rank.
    Each time is remembered on the job (``job.memo``): a repeated search times only new messages; a
    reduce-scatter and an all-gather of the same size on the same group share their entry (one pass of
    the same algorithms with the same times, :data:`SAME_TIME`).

    Parameters
    ----------
    op : str
        ``allreduce``, ``reducescatter``, ``allgather``, ``alltoall`` or ``sendrecv``.
    n_bytes : array
        nccl-tests size S per candidate [bytes].
    size, stride : array of int
        Group size and rank stride per candidate.
    """
    size = np.asarray(size, dtype=np.int64)
    out = np.zeros(size.shape)
    live = size > 1
    if not live.any():
        return out
    idx = np.flatnonzero(live)
    if len(idx) <= SCALAR_SIZES:  # a few plans (a published run's): each on floats, without the array passes
        return _few_collectives(job, op, out, idx, size, stride, n_bytes)
    stride = np.broadcast_to(np.asarray(stride, dtype=np.int64), size.shape)
    n = np.broadcast_to(np.asarray(n_bytes, dtype=float), size.shape)
    # each distinct (size, stride, bytes) once: candidates share a few message sizes per group
    base = int(stride.max()) + 1
    n_uniq, n_codes = np.unique(n[idx], return_inverse=True)
    key = (size[idx] * base + stride[idx]) * len(n_uniq) + n_codes
    ukey, codes = np.unique(key, return_inverse=True)
    pair, u_n = ukey // len(n_uniq), n_uniq[ukey % len(n_uniq)]
    memo = job.memo.setdefault(("collective_s", SAME_TIME.get(op, op)), {})  # {(size, stride, bytes): time}
    keys = list(zip((pair // base).tolist(), (pair % base).tolist(), u_n.tolist()))
    res = np.array([memo.get(k, np.nan) for k in keys])
    miss = np.flatnonzero(np.isnan(res))
    if len(miss):  # each group placed once; its messages timed on floats, or together where it has many
        u_pair, inv, count = np.unique(pair[miss], return_inverse=True, return_counts=True)
        placed = [job.group(p // base, p % base) for p in u_pair.tolist()]
        if op == "sendrecv":  # its one algorithm, alpha + S / bw (p2p_terms): every group's messages at once
            alpha, bw = (np.array(x, dtype=float) for x in zip(*map(p2p_terms, placed)))
            res[miss] = sendrecv_time(u_n[miss], bw[inv], alpha[inv])
        else:
            _tuner_times(op, res, miss, u_n, inv, count, placed)
        memo.update(zip((keys[i] for i in miss), res[miss].tolist()))
    out[idx] = res.take(codes)
    return out


def collectives_s(job: Job, requests: list[tuple]) -> list[np.ndarray]:
    """:func:`collective_s` of several requests ``(op, n_bytes, size, stride)``, those of one op, or of ops
    with the same time (:data:`SAME_TIME`), in one call over their rows put end to end: each distinct
    message is timed once as there, so a caller with a few collectives of a few hundred layouts each pays the
    per-call passes (the distinct messages, the memo look-ups) once per op rather than once per request.

    Returns
    -------
    list of numpy.ndarray
        The time of each request per row [s], shaped as its ``size`` broadcast with its ``n_bytes``.
    """
    shapes = [np.broadcast_shapes(np.shape(size), np.shape(n)) for _, n, size, _ in requests]
    ops: dict = {}  # {op whose time it takes: [request index]}, in the order first asked for
    for i, (op, *_) in enumerate(requests):
        ops.setdefault(SAME_TIME.get(op, op), []).append(i)
    out: list = [None] * len(requests)
    for op, at in ops.items():
        parts = [
            [np.broadcast_to(np.asarray(x, dtype=t), shapes[i]).ravel() for x, t in zip(requests[i][1:], dtypes)]
            for i in at
            for dtypes in ((float, np.int64, np.int64),)
        ]
        n, size, stride = (np.concatenate(col) for col in zip(*parts))
        t = collective_s(job, op, n, size, stride)
        ends = np.cumsum([int(np.prod(shapes[i])) for i in at])[:-1]
        for i, piece in zip(at, np.split(t, ends)):
            out[i] = piece.reshape(shapes[i])
    return out


#: at most this many placements in the tuner times every job shares (:func:`_shared_times`)
SHARED_GROUPS = 10_000

#: up to this many new sizes on one group, :func:`_tuner_times` times each on floats (:func:`_kept_time`), above it
#: the group's sizes together (:func:`~hnplan.comm.algorithms.fastest_time`): the same numbers either way (tested);
#: a speed choice, not physics. Replaying the tuner's batches of a first search on fresh placements (callgrind, three
#: replays): DeepSeek-V3 on 2,048 H800 (its all-gathers and all-to-alls of 9 to 15 sizes a group) 96.0 million
#: instructions with 16 here, 84.1 with 8, 99.5 with 4; Llama 3.1 405B on 16,384 H100 30.1 with 16, 31.1 with 8
#: (its three 9-size TP all-reduces, :data:`ALLREDUCE_FLOAT_SIZES`)
TUNER_FLOAT_SIZES = 8

#: :data:`TUNER_FLOAT_SIZES` of an all-reduce: its array path weighs three algorithms and the tree's estimate, so
#: its floats stay cheaper up to more sizes (the 405B search's 9-size TP groups: 30.1 against 31.1 million
#: instructions as arrays)
ALLREDUCE_FLOAT_SIZES = 16


def _tuner_times(op: str, res: np.ndarray, miss: np.ndarray, u_n: np.ndarray, inv: np.ndarray, count, placed) -> None:
    """Fill ``res[miss]`` with the tuner's time of ``op`` for sizes ``u_n[miss]`` on groups ``placed[inv]``:
    a group's sizes on floats (:func:`_kept_time`), or together where it has many
    (:func:`~hnplan.comm.algorithms.fastest_time`), kept for every job of the process (:func:`_shared_times`)."""
    shared = _shared_times(op)
    kept = [shared.setdefault(g, {}) for g in placed]  # each placement looked up once
    if op in STACKED_OPS and len(miss) >= STACKED_ALLREDUCES:
        _stacked_times(op, res, miss, u_n, inv, kept, placed)
        return
    limit = ALLREDUCE_FLOAT_SIZES if op == "allreduce" else TUNER_FLOAT_SIZES
    few = count[inv] <= limit  # on floats, without fastest_time's per-call array overhead
    at = miss[few]
    if len(at):
        res[at] = [_kept_time(kept[i], op, x, placed[i]) for x, i in zip(u_n[at].tolist(), inv[few].tolist())]
    for i in np.flatnonzero(count > limit).tolist():
        at = miss[inv == i]
        sizes = tuple(u_n[at].tolist())  # the group's sizes together, as fastest_time times them
        times = kept[i].get(sizes)
        if times is None:
            times = kept[i][sizes] = fastest_time(op, u_n[at], placed[i])
        res[at] = times


#: from this many new messages of an op of :data:`STACKED_OPS` in one call, :func:`_tuner_times` times those of every
#: placement that takes the same branches (:func:`~hnplan.comm.group_stack.stack_key`) in one array pass
#: (:class:`~hnplan.comm.group_stack.GroupStack`): the same numbers as on floats (tested); a speed choice, not
#: physics. Replaying the all-reduces of a first Llama 3.1 405B search on 16,384 H100 (75 messages on 27
#: placements): about 6 us a message on floats, a pass about 110 us plus 0.5 us a message, so a stack pays from
#: about 20 messages
STACKED_ALLREDUCES = 20

#: a stack of fewer messages than this is timed on floats (:func:`_kept_time`), as :data:`STACKED_ALLREDUCES`
STACK_LEAST = 20

#: the ops :func:`_tuner_times` stacks (:data:`STACKED_ALLREDUCES`): the all-reduce, and the all-gather and
#: reduce-scatter (their one time, :data:`SAME_TIME`: ring and PAT); the formulas of each branch on a stack's numbers
#: as on one placement's (:mod:`hnplan.comm.group_stack`)
STACKED_OPS = ("allreduce", "allgather", "reducescatter")


def _stacked_times(
    op: str, res: np.ndarray, miss: np.ndarray, u_n: np.ndarray, inv: np.ndarray, kept: list, placed
) -> None:
    """:func:`_tuner_times` of many messages on many placements: each message already kept (:func:`_shared_times`)
    read back; the others of the placements that NCCL times (:func:`~hnplan.comm.algorithms._nccl`) stacked by
    the branches the formulas take on them (:func:`~hnplan.comm.group_stack.stack_key`) and each stack timed in
    one array pass (:func:`~hnplan.comm.algorithms._fastest` on a :class:`~hnplan.comm.group_stack.GroupStack`);
    the rest, and a stack whose branches differ after all (:class:`~hnplan.comm.group_stack.MixedBranch`), on
    floats (:func:`_kept_time`)."""
    sizes, at = u_n[miss].tolist(), inv.tolist()
    out: list = [kept[i].get(x) for x, i in zip(sizes, at)]
    keys: dict = {}  # {placement index: its stack key, None where NCCL does not time it}
    stacks: dict = {}  # {stack key: [message position]}
    for j, i in enumerate(at):
        if out[j] is None:
            key = keys.get(i, 0)
            if key == 0:
                g = placed[i]
                key = keys[i] = stack_key(g, derived(g, "ring_ll128_cap_binds", ring_cap_binds)) if _nccl(g) else None
            stacks.setdefault(key, []).append(j)
    for key, js in stacks.items():
        if key is not None and len(js) >= STACK_LEAST:
            members: dict = {}  # {placement index: its index in the stack}
            local = [members.setdefault(at[j], len(members)) for j in js]
            stack = GroupStack([placed[i] for i in members], np.array(local))
            try:
                times = _fastest(op, np.array([sizes[j] for j in js]), stack).tolist()
            except MixedBranch:
                times = None
            if times is not None:
                for j, t in zip(js, times):
                    out[j] = kept[at[j]][sizes[j]] = t
                continue
        for j in js:
            out[j] = _kept_time(kept[at[j]], op, sizes[j], placed[at[j]])
    res[miss] = out


def _shared_times(op: str) -> dict:
    """The tuner times of ``op`` that every job of the process shares, ``{placement: {bytes: time}}`` on floats
    and ``{placement: {sizes: times}}`` of a group's sizes together (:func:`content_memo`): a time depends on
    the group's placement (its numbers: size, ranks per domain, level, links) and the size alone, so another
    job, or a new catalog, that places a group alike reuses it. Emptied past :data:`SHARED_GROUPS` placements."""
    shared = content_memo(("collective_s", SAME_TIME.get(op, op)))
    if len(shared) > SHARED_GROUPS:
        shared.clear()
    return shared


def _kept_time(kept: dict, op: str, n_bytes: float, group) -> float:
    """:func:`~hnplan.comm.algorithms.best_time` of ``op`` for one size on one group [s], kept in ``kept`` (the
    group's entry of :func:`_shared_times`)."""
    t = kept.get(n_bytes)
    if t is None:
        t = kept[n_bytes] = best_time(op, n_bytes, group)[0]
    return t


def _few_collectives(job: Job, op: str, out: np.ndarray, idx: np.ndarray, size, stride, n_bytes) -> np.ndarray:
    """:func:`collective_s` of at most :data:`~hnplan.comm.algorithms.SCALAR_SIZES` live plans (rows ``idx``),
    one by one on floats: the same memo entries and the same numbers as its distinct-message path."""
    memo = job.memo.setdefault(("collective_s", SAME_TIME.get(op, op)), {})
    at = [_at(np.asarray(x, dtype=t), size.shape, idx) for x, t in ((stride, np.int64), (n_bytes, float))]
    for i, key in zip(idx.tolist(), zip(size[idx].tolist(), *at)):
        t = memo.get(key)
        if t is None:
            g = job.group(key[0], key[1])
            if op == "sendrecv":
                alpha, bw = p2p_terms(g)
                t = float(sendrecv_time(np.array([key[2]]), np.array([bw], dtype=float), np.array([alpha]))[0])
            else:
                t = _kept_time(_shared_times(op).setdefault(g, {}), op, key[2], g)
            memo[key] = t
        out[i] = t
    return out


def _at(a: np.ndarray, shape: tuple, idx: np.ndarray) -> list:
    """The values of ``a`` broadcast to ``shape`` at rows ``idx``, as Python numbers."""
    return a[idx].tolist() if a.shape == shape else np.broadcast_to(a, shape)[idx].tolist()
