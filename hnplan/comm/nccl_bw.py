"""NCCL's per-channel bandwidth caps and tree corrections: what its tuner estimates, by which hnplan's tuner
ranks algorithms (:func:`hnplan.comm.algorithms.best_time`).

Per-channel bandwidth caps ([1]_, ``ncclTopoTuneModel``): NCCL's busbw of an algorithm is its graph's
channels times a per-channel bandwidth, and per GPU generation (``compCapIndex``: Volta, Ampere, Hopper,
Blackwell) and node count (one node, two, three or more) it caps that per channel: ring LL128 at
``perChMaxRingLL128Bws``, the tree all-reduce at 0.92 of its bandwidth and at most ``perChMaxTreeBws`` per
channel, then tree LL128 at ``perChMaxTreeLL128Bws`` (tree LL: llMaxBws). Across nodes a search channel is
one ring through one NIC of each node (``src/graph/search.cc``), so a group's channels are the NICs per
domain its rings use (:attr:`hnplan.comm.placement.GroupPlacement.channels`). Inside one domain the search
fills NVLink with its channels and hnplan sets no channel cap. ``ncclTopoGetAlgoTime`` then divides the
tree all-reduce bandwidth by a size-dependent correction (``treeCorrectionFactor``, powers of two from
64 B to 256 MiB, :func:`tree_correction`).

Channel counts a job sets (``NCCL_MIN_NCHANNELS``/``NCCL_MAX_NCHANNELS``, ``ncclConfig_t`` minCTAs/maxCTAs)
bound the compute channels a communicator launches (``src/graph/connect.cc``, ``ncclTopoPostset``); the
environment variables ``NCCL_MIN_CTAS``/``NCCL_MAX_CTAS`` override every communicator's ``ncclConfig_t``
values (``src/init.cc``, ``envConfigOverride``, from NCCL 2.18.1 to 2.30.7).

The estimates pick the algorithm; the time charged is hnplan's own model of the one picked: the caps are
the tuner's estimates, not limits the links keep (forced NCCL trees on three GB200 NVLink partitions reached
234 and 486 GB/s busbw through 4 and 8 NICs, above 4 x 24 and 8 x 24 GB/s; ``data/reference/
comm_at_scale.csv``, NVIDIA/nccl issue 1801).

References
----------
.. [1] NVIDIA/nccl ``src/graph/tuning.cc`` at tag v2.30.7-1: ``ncclTunerConstantsDefaults``
   (perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws: one node, two, three or more),
   ``ncclTopoTuneModel`` (the tree all-reduce's 0.92 and the per-channel caps), ``treeCorrectionFactor`` and
   its use in ``ncclTopoGetAlgoTime``; ``src/graph/search.cc`` (a channel's ring through one NIC per node),
   ``src/graph/connect.cc`` (NCCL_MIN/MAX_NCHANNELS, minCTAs/maxCTAs), ``src/init.cc`` (envConfigOverride).
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.comm import nccl
from hnplan.comm.group_stack import derived
from hnplan.comm.placement import GroupPlacement

GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
"""NCCL's GPU generations for its per-channel tables (``compCapIndex``: compute capability 7.x, 8.x, 9.x,
10.x and later, [1]_)."""

PER_CHANNEL_RING_LL128_GBps = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (40.0, 40.0, 40.0),
}
"""``perChMaxRingLL128Bws[generation][one node, two, three or more]``: ring LL128 busbw per channel [GB/s]
([1]_)."""

PER_CHANNEL_TREE_GBps = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
"""``perChMaxTreeBws``: tree all-reduce busbw per channel [GB/s] ([1]_)."""

PER_CHANNEL_TREE_LL128_GBps = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
"""``perChMaxTreeLL128Bws``: tree LL128 busbw per channel [GB/s] ([1]_)."""

TREE_ALLREDUCE_FRACTION = 0.92
"""NCCL's tuner: the tree all-reduce at 0.92 of its graph bandwidth ([1]_)."""

# fmt: off
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0],  # LL
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0],  # LL128
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9],  # Simple
])
# fmt: on
"""``treeCorrectionFactor[LL, LL128, Simple][floor(log2(S / 64))]`` for the 23 powers of two NCCL applies it
to (64 B up to 512 MiB exclusive; its table has a 24th entry the size test never reaches, [1]_)."""


def node_index(domains: int) -> int:
    """NCCL's node index of its per-channel tables: 0 on one node, 1 on two, 2 on three or more ([1]_)."""
    return 0 if domains <= 1 else (1 if domains == 2 else 2)


def per_channel_Bps(table: dict, generation: str, domains: int) -> float:
    """A per-channel busbw cap [bytes/s] of ``table`` (:data:`PER_CHANNEL_TREE_GBps` and its siblings) for a
    GPU generation on ``domains`` nodes ([1]_).

    Raises
    ------
    KeyError
        For a generation outside :data:`GENERATIONS`.

    >>> per_channel_Bps(PER_CHANNEL_TREE_GBps, "blackwell", 20) / 1e9
    24.0
    """
    return units.GBps_to_Bps(table[generation][node_index(domains)])


def tree_correction(proto_index: int, n_bytes):
    """NCCL's tree all-reduce bandwidth correction at ``n_bytes`` (float or array): ``treeCorrectionFactor
    [proto][floor(log2(S / 64))]`` from 64 B to 512 MiB, 1 outside ([1]_).

    Examples
    --------
    Simple at 64 MiB (log2(2^26 / 64) = 20): 0.8; LL128 at 1 MiB (index 14): 0.6; 1 GiB: 1.

    >>> float(tree_correction(2, 64 * 2**20)), float(tree_correction(1, 2**20)), float(tree_correction(2, 2**30))
    (0.8, 0.6, 1.0)
    """
    return tree_corrections(n_bytes)[proto_index]


_CORRECTION_ROWS = tuple(tuple(float(x) for x in row) for row in TREE_CORRECTION)
_NO_CORRECTION = (1.0, 1.0, 1.0)
_PADDED_CORRECTION = np.hstack([TREE_CORRECTION, np.ones((3, 1))])  # a last column of 1 for sizes outside


def tree_corrections(n_bytes):
    """:func:`tree_correction` of LL, LL128 and Simple at ``n_bytes`` (float or array): one size lookup."""
    if isinstance(n_bytes, float):
        chunks = int(n_bytes) >> 6
        i = chunks.bit_length() - 1
        if chunks < 1 or i >= TREE_CORRECTION.shape[1]:
            return _NO_CORRECTION
        return (_CORRECTION_ROWS[0][i], _CORRECTION_ROWS[1][i], _CORRECTION_ROWS[2][i])
    # floor(log2(chunks)) exactly, as int.bit_length above: chunks = m 2^e with 0.5 <= m < 1 (-1 for no chunk)
    i = np.frexp(np.floor(np.asarray(n_bytes, dtype=float) / 64.0))[1] - 1
    at = np.where((i >= 0) & (i < TREE_CORRECTION.shape[1]), i, TREE_CORRECTION.shape[1])  # outside: 1
    return tuple(_PADDED_CORRECTION.take(at, axis=1))


def channel_cap(g: GroupPlacement, table: dict) -> float | None:
    """busbw cap of a group's NCCL channels [bytes/s]: its search channels times the per-channel cap of
    ``table`` for its GPU generation and domain count; None where either is unknown."""
    if g.channels is None or g.up.nccl_generation is None:
        return None
    return g.channels * per_channel_Bps(table, g.up.nccl_generation, g.domains)


def at_least(t, floor):
    """``max(t, floor)`` for a float or an array ``t`` (``floor`` None: ``t``)."""
    if floor is None:
        return t
    if isinstance(t, np.ndarray):
        return np.maximum(t, floor)
    return floor if floor > t else t  # max(t, floor) without the builtin's per-call argument parsing


def least(times: tuple) -> float:
    """``min(times)`` of a few floats: the first smallest, as the builtin compares them (``x < least``), without
    its per-call argument parsing (the tuner's scalar path calls it for every message and algorithm)."""
    out = times[0]
    for t in times[1:]:
        if t < out:
            out = t
    return out


def least_array(times: tuple | list):
    """The element-wise least of a few arrays (``np.minimum.reduce`` without stacking them into one first)."""
    out = times[0]
    for t in times[1:]:
        out = np.minimum(out, t)
    return out


def tree_estimate_s(g: GroupPlacement, s, data):
    """NCCL's tuner's estimate of its tree all-reduce [s] for ``s`` bytes (float or array) whose tree
    bandwidth term is ``data`` [s]: the fastest protocol, each with NCCL's tree latency
    (:func:`hnplan.comm.nccl.tree_latency_s`) and its share of ``data`` as the tuner derives it ([1]_): the
    tree at 0.92 of its bandwidth and at most channels x perChMaxTreeBws (tree busbw is twice its algbw
    there, so a cap C costs ``2 S / C``); LL at 1/3.8 of that and at most llMaxBws; LL128 at 7/9 (one
    domain) or 120/128 of it and at most channels x perChMaxTreeLL128Bws; each divided by
    :func:`tree_correction`."""
    lats, (tree_cap, cap, ll128_cap), ll128_fraction = derived(g, "tree_estimate", _tree_estimate_terms)
    simple = at_least(data / TREE_ALLREDUCE_FRACTION, None if tree_cap is None else 2 * s / tree_cap)
    ll = at_least(simple / nccl.TREE_LL_FRACTION, None if cap is None else 2 * s / cap)
    ll128 = at_least(simple / ll128_fraction, None if ll128_cap is None else 2 * s / ll128_cap)
    c = tree_corrections(s)
    times = (lats[0] + ll / c[0], lats[1] + ll128 / c[1], lats[2] + simple / c[2])
    return least(times) if isinstance(data, float) else least_array(times)


def _tree_estimate_terms(g: GroupPlacement) -> tuple:
    """The numbers of :func:`tree_estimate_s` that depend on the group alone (once per placement,
    :attr:`GroupPlacement.derived`): NCCL's tree latencies [s], the caps of the tree, of LL and of LL128 [B/s]
    (None: none) and LL128's fraction of the tree bandwidth."""
    lats = nccl.tree_latencies_s(g.up.nccl_link or "", g.out.hop_latency_s, g.per_domain, g.domains)
    cap = nccl.ll_max_busbw_across_Bps(g.domains) if g.domains > 1 else g.up.ll_max_busbw_Bps
    caps = (channel_cap(g, PER_CHANNEL_TREE_GBps), cap, channel_cap(g, PER_CHANNEL_TREE_LL128_GBps))
    return lats, caps, nccl.tree_protocol_fraction("LL128", g.domains)
