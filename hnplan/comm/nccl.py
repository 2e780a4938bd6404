"""NCCL's latency model per algorithm and protocol: the constants and formulas of its tuner.

NCCL times every (algorithm, protocol) pair as ``latency + S / busbw`` and runs the fastest
(NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, release tag
v2.30.7-1, [1]_). The latency is a fixed ``baseLat[algorithm][protocol]`` plus per-step hardware
latencies ``hwLat[link][algorithm][protocol]``, the link being the class NCCL gives the path: NVLink, PCI
or the network (NET). hnplan's scale-up and scale-out fabrics carry that class (``nccl_link``), so a
fabric's kind picks its row of the table; a fabric without one (RCCL, HCCL) is not timed by this model.

=================  ==========================================================================
algorithm          latency (n = ranks, q = ranks per domain, D = domains; NCCL's nNodes = D)
=================  ==========================================================================
ring               ``baseLat + (k(n-1) - k(D-1)) l_intra + k(D-1) l_inter``, k = 2 for all-reduce,
                   1 for reduce-scatter and all-gather; across domains ``l_intra`` is at least the
                   host's network post overhead (1 us, 3 us on Simple) and the Simple all-reduce
                   latency is multiplied by 1.4 (the ring's "plateau effect")
tree (all-reduce)  ``baseLat + 2 ((q-1) l_intra + floor(log2 D) l_inter)``
NVLS               ``l_intra`` (25 us on NVLink; baseLat is not added), ``+ l_inter`` across domains
NVLS + tree        ``l_intra + 2 floor(log2 D) l_inter``
CollNet chain      ``2 (q-1) l_intra + l_inter``
PAT (reduce-       ``baseLat + floor(log2 D) l_inter / 3.5 + 2.8 us x n``; Simple only, one rank
scatter, gather)   per node (NCCL enables it only there), at 0.75 of the bandwidth
=================  ==========================================================================

``l_intra = hwLat[link of the scale-up fabric][algorithm][protocol]``; ``l_inter = hwLat[NET][algorithm]
[protocol] + lat_net`` (twice ``lat_net`` on Simple: the flush), with ``hwLat[NET][tree]`` where one rank
sits in each domain (latencies fully exposed). NCCL's ``lat_net`` is what the network plugin reports
(``graph->latencyInter``); hnplan puts there the links and switch hops of the scale-out fat-tree.

Protocol bandwidths: LL moves 4 data bytes in each 8-byte line, so at most half the link bandwidth, and
no more than NCCL's ``llMaxBws``; LL128 carries 120 data bytes in each 128-byte line (NCCL's tuner takes
0.92 of the ring bandwidth, [1]_); Simple moves the full bandwidth. On a tree NCCL's tuner takes 1/3.8
(LL) and 7/9 in one node or 120/128 across nodes (LL128) of the tree bandwidth.

Per-channel bandwidth caps, the tree all-reduce's 0.92, its size corrections and the channel counts a job
sets: :mod:`hnplan.comm.nccl_bw`.

NVLS inside one node moves smaller messages in smaller chunks (128 KiB down to 16 KiB, [3]_), and each
chunk step costs a fixed time besides its bytes, so its bandwidth ramps with the message
(:func:`nvls_chunk_time_s`; the step time is the scale-up fabric's ``inr_chunk_step_us``). NCCL's tuner
does not model it: it times NVLS as ``25 us + S / bw`` at every size.

Left out: the host-CPU dependence of the network overhead and of the multi-node LL cap (the Intel/Arm
values are used; AMD hosts have 2 us and 22.5/19.0 GB/s), the ring Simple plateau's size condition (it
applies from 64 bytes per channel and rank, so to every size where Simple can win) and the tree's 0.85 on
NCCL's split-tree pattern.

References
----------
.. [1] NVIDIA/nccl, ``src/graph/tuning.cc`` at tag v2.30.7-1: ``ncclTunerConstantsDefaults``
   (baseLatencies, hwLatencies, llMaxBws), ``getNetOverhead``, ``ncclTopoTuneModel`` (latency per
   algorithm), ``ncclTopoGetAlgoTime`` (ring Simple plateau factor 1.4 for compute capability >= 8.0).
.. [2] NVIDIA/nccl ``src/device/prims_ll.h`` (8-byte lines: 4 bytes of data and a 4-byte flag) and
   ``src/device/prims_ll128.h`` (128-byte lines of 120 data bytes and an 8-byte flag).
.. [3] NVIDIA/nccl ``src/enqueue.cc``, ``calcCollChunking`` (NCCL 2.19 to 2.30), the NVLS branch: the chunk
   starts at ``nvlsChunkSize`` (``NCCL_NVLS_CHUNKSIZE``, 128 KiB) and drops to 64, 32 and 16 KiB below
   64, 8 and 2 x ``nChannels x nvls.nHeads x chunk`` bytes; ``src/graph/search.cc``: a single-node NVLS
   graph pulls from every GPU (``minChannels = maxChannels`` = the GPUs, one head each);
   ``src/transport/nvls.cc``: ``NCCL_NVLS_NCHANNELS`` 16 on SM 9.0.
.. [4] github.com/C-TC/multi-gpu-programming-models ``repro/thesis_microbench`` @ 383d0476 (README and
   ``results/bench_default_all_reduce_t1-newcluster-20260504.log``): nccl-tests all_reduce_perf on 8 x H200,
   NCCL 2.30.4, NVLS available and picked by the tuner from 2 MiB.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hnplan import units

PROTOCOLS = ("LL", "LL128", "Simple")
"""NCCL's protocols, in the order of its tables."""

LINKS = ("nvlink", "pci", "net")
"""NCCL's link classes for hwLat (NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET)."""

BASE_LATENCY_US = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
    "pat": (8.0, 8.0, 8.0),
}
"""``baseLatencies[algorithm][LL, LL128, Simple]`` [us] ([1]_)."""

HW_LATENCY_US = {
    "nvlink": {
        "tree": (0.6, 1.25, 4.0),
        "ring": (0.6, 1.9, 3.4),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 25.0),
        "nvls_tree": (0.0, 0.0, 25.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "pci": {
        "tree": (1.0, 1.9, 4.0),
        "ring": (1.0, 2.5, 5.7),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "net": {
        "tree": (5.0, 8.5, 14.0),
        "ring": (2.7, 4.0, 14.0),
        "collnet_direct": (0.0, 0.0, 31.0),
        "collnet_chain": (0.0, 0.0, 30.0),
        "nvls": (0.0, 0.0, 18.0),
        "nvls_tree": (0.0, 0.0, 20.9),
        "pat": (0.0, 0.0, 14.0),
    },
}
"""``hwLatencies[link][algorithm][LL, LL128, Simple]``: latency of one step [us] ([1]_)."""

NET_OVERHEAD_US = 1.0
"""Network post overhead per ring step across nodes on Intel and Arm hosts [us], three times on Simple
(``getNetOverhead``; AMD hosts 2.0, [1]_)."""

RING_SIMPLE_PLATEAU = 1.4
"""Factor on the Simple ring all-reduce latency across nodes, compute capability >= 8.0 ([1]_)."""

LL_MAX_BUSBW_ACROSS_GBps = (39.0, 20.4)
"""``llMaxBws`` across nodes on Intel and Arm hosts: two nodes, three or more [GB/s] ([1]_)."""

LL_LINE_FRACTION = 0.5
"""Data per LL line: 4 of 8 bytes ([2]_)."""

LL128_LINE_FRACTION = 120.0 / 128.0
"""Data per LL128 line: 120 of 128 bytes ([2]_)."""

PAT_BW_FRACTION = 0.75
"""NCCL's tuner: PAT at 0.75 of the bandwidth ([1]_)."""

PAT_PER_RANK_US = 2.8
"""NCCL's tuner: the linear part of PAT's latency, per rank [us] ([1]_)."""

TREE_LL_FRACTION = 1.0 / 3.8
"""NCCL's tuner: tree LL at 1/3.8 of the tree bandwidth ([1]_)."""

TREE_LL128_FRACTION_ONE_NODE = 7.0 / 9.0
"""NCCL's tuner: tree LL128 inside one node at 7/9 of the tree bandwidth (120/128 across nodes, [1]_)."""

NVLS_CHUNK_BYTES = 128 * units.KiB
"""NCCL's NVLS chunk for large messages (``NCCL_NVLS_CHUNKSIZE`` default, 128 KiB, [3]_)."""

NVLS_CHANNELS = {"hopper": 16}
"""NVLS channels NCCL opens per GPU generation (``NCCL_NVLS_NCHANNELS`` default on SM 9.0, [3]_; logged as
``NVLS tuning: nChannels 16 chunkSize 131072`` on 8 x H200 with NCCL 2.30.4, [4]_)."""

NVLS_CHUNK_STEPS = ((64, 64 * units.KiB), (8, 32 * units.KiB), (2, 16 * units.KiB))
"""NCCL's NVLS chunk shrink for smaller all-reduces, in order: below ``k x ops x chunk`` bytes (``ops`` =
channels x heads) the chunk drops to the second value [bytes] ([3]_)."""


def nvls_chunk_bytes(n_bytes, ops: int):
    """The chunk NCCL's NVLS all-reduce moves ``n_bytes`` [bytes] in, with ``ops`` = channels x heads
    concurrent pipelines (one head per GPU in one node) [bytes]: 128 KiB, 64 KiB below ``64 ops x 128 KiB``,
    32 KiB below ``8 ops x 64 KiB``, 16 KiB below ``2 ops x 32 KiB`` ([3]_; ``n_bytes`` a number or an array).

    >>> [int(nvls_chunk_bytes(s * units.MiB, 128) / units.KiB) for s in (4, 8, 32, 64, 512, 1024)]
    [16, 32, 32, 64, 64, 128]
    """
    if isinstance(n_bytes, float) or np.ndim(n_bytes) == 0:  # the planners' scalar path (a float: no dispatch)
        size, c = float(n_bytes), float(NVLS_CHUNK_BYTES)
        for k, smaller in NVLS_CHUNK_STEPS:
            if size < k * ops * c and c > smaller:
                c = float(smaller)
        return c
    chunk = np.full(np.shape(n_bytes), float(NVLS_CHUNK_BYTES))
    for k, smaller in NVLS_CHUNK_STEPS:
        chunk = np.where((np.asarray(n_bytes) < k * ops * chunk) & (chunk > smaller), float(smaller), chunk)
    return chunk


def nvls_chunk_time_s(n_bytes, ops: int, step_s: float):
    """Time NCCL's single-node NVLS all-reduce of ``n_bytes`` [bytes] spends on its chunk steps beyond those
    of 128 KiB chunks [s]: each of ``ops`` pipelines (channels x heads) moves ``n_bytes / ops`` in chunks
    (:func:`nvls_chunk_bytes`) one after another, each chunk paying ``step_s`` [s] besides its bytes, so
    ``n_bytes / ops x step_s x (1 / chunk - 1 / 128 KiB)``. The 128 KiB steps are inside the large-message
    bandwidth the fabric's ``inr_efficiency`` reproduces; smaller messages move in smaller chunks and pay
    more steps per byte.

    >>> round(units.s_to_us(nvls_chunk_time_s(8 * units.MiB, 128, 5.65e-6)), 2)
    8.47
    """
    chunk = nvls_chunk_bytes(n_bytes, ops)
    return n_bytes / ops * step_s * (1.0 / chunk - 1.0 / NVLS_CHUNK_BYTES)


def _ix(proto: str) -> int:
    return PROTOCOLS.index(proto)


def hw_latency_s(link: str, algorithm: str, proto: str) -> float:
    """NCCL's ``hwLat[link][algorithm][proto]`` [s] ([1]_).

    Raises
    ------
    KeyError
        For an unknown link class or algorithm; ValueError for an unknown protocol.
    """
    return units.us_to_s(HW_LATENCY_US[link][algorithm][_ix(proto)])


def base_latency_s(algorithm: str, proto: str) -> float:
    """NCCL's ``baseLat[algorithm][proto]`` [s] ([1]_)."""
    return units.us_to_s(BASE_LATENCY_US[algorithm][_ix(proto)])


def log2i(n: int) -> int:
    """NCCL's ``log2i``: floor(log2 n) for n >= 1 (``src/include/utils.h``).

    >>> log2i(1), log2i(2), log2i(3), log2i(20)
    (0, 1, 1, 4)
    """
    return int(n).bit_length() - 1


def inter_latency_s(algorithm: str, proto: str, per_domain: int, net_hop_s: float) -> float:
    """Latency of one step across domains [s]: ``hwLat[NET]`` of the algorithm (of the tree with one rank
    per domain) plus the network's own latency, twice on Simple ([1]_)."""
    alg = "tree" if per_domain == 1 else algorithm
    return hw_latency_s("net", alg, proto) + (2.0 if proto == "Simple" else 1.0) * net_hop_s


@lru_cache(maxsize=4096)
def ring_latency_s(
    up_link: str, net_hop_s: float, ranks: int, domains: int, passes: int, proto: str, allreduce: bool
) -> float:
    """NCCL's ring latency [s] for ``passes`` passes (2: all-reduce, 1: reduce-scatter, all-gather) over
    ``ranks`` ranks in ``domains`` domains of a scale-up fabric of class ``up_link``.

    ``baseLat + (k(n-1) - k(D-1)) l_intra + k(D-1) l_inter``; across domains ``l_intra`` is at least the
    network post overhead (x3 on Simple) and a Simple all-reduce's latency is multiplied by 1.4 ([1]_).

    Examples
    --------
    8 ranks in one NVLink domain, all-reduce, LL128: 14 + 14 x 1.9 = 40.6 us.

    >>> round(ring_latency_s("nvlink", 0.0, 8, 1, 2, "LL128", True) * 1e6, 2)
    40.6
    """
    q = ranks // domains
    intra = hw_latency_s(up_link, "ring", proto)
    if domains > 1:
        intra = max(intra, units.us_to_s(NET_OVERHEAD_US) * (3.0 if proto == "Simple" else 1.0))
    steps, inter_steps = passes * (ranks - 1), passes * (domains - 1)
    inter = inter_latency_s("ring", proto, q, net_hop_s) if domains > 1 else 0.0
    lat = base_latency_s("ring", proto) + (steps - inter_steps) * intra + inter_steps * inter
    if proto == "Simple" and domains > 1 and allreduce:
        lat *= RING_SIMPLE_PLATEAU
    return lat


@lru_cache(maxsize=4096)
def tree_latency_s(up_link: str, net_hop_s: float, per_domain: int, domains: int, proto: str) -> float:
    """NCCL's tree all-reduce latency [s]: ``baseLat + 2((q-1) l_intra + floor(log2 D) l_inter)`` ([1]_).

    Examples
    --------
    4 domains of 8 ranks, LL128, no network latency of its own: 14 + 2 (7 x 1.25 + 2 x 8.5) = 65.5 us.

    >>> round(tree_latency_s("nvlink", 0.0, 8, 4, "LL128") * 1e6, 2)
    65.5
    """
    intra = hw_latency_s(up_link, "tree", proto)
    inter = inter_latency_s("tree", proto, per_domain, net_hop_s)
    return base_latency_s("tree", proto) + 2 * ((per_domain - 1) * intra + log2i(domains) * inter)


def inr_latency_s(up_link: str, net_hop_s: float, per_domain: int, domains: int, algorithm: str) -> float:
    """Latency of an all-reduce whose switches reduce [s] (Simple protocol only, [1]_).

    ``algorithm``: ``nvls`` (NVLS in each domain, and across domains a reducing network, IB SHARP:
    ``l_intra + l_inter``; 25 us in one NVLink domain), ``nvls_tree`` (NVLS in each domain and a tree across:
    ``l_intra + 2 floor(log2 D) l_inter``) or ``collnet_chain`` (a chain in each domain to a reducing network:
    ``2(q-1) l_intra + l_inter``).

    Examples
    --------
    NVLS + tree on 4 NVLink domains of 8, no network latency of its own: 25 + 2 x 2 x 20.9 = 108.6 us.

    >>> round(inr_latency_s("nvlink", 0.0, 8, 4, "nvls_tree") * 1e6, 2)
    108.6
    """
    intra = hw_latency_s(up_link, algorithm, "Simple")
    inter = inter_latency_s(algorithm, "Simple", per_domain, net_hop_s) if domains > 1 else 0.0
    if algorithm == "nvls":
        return intra + inter
    if algorithm == "nvls_tree":
        return intra + 2 * log2i(domains) * inter
    return 2 * (per_domain - 1) * intra + inter


def pat_latency_s(net_hop_s: float, ranks: int, domains: int) -> float:
    """NCCL's PAT reduce-scatter / all-gather latency with one rank per node [s]:
    ``baseLat + floor(log2 D) l_inter / 3.5 + 2.8 us x n``, ``l_inter`` the tree's network latency (one rank per
    node) plus the flush, ``14 + 2 L_net`` ([1]_).

    >>> round(pat_latency_s(0.0, 64, 64) * 1e6, 2)
    211.2
    """
    inter = inter_latency_s("pat", "Simple", 1, net_hop_s)
    return base_latency_s("pat", "Simple") + log2i(domains) * inter / 3.5 + ranks * units.us_to_s(PAT_PER_RANK_US)


@lru_cache(maxsize=4096)
def ring_latencies_s(
    up_link: str, net_hop_s: float, ranks: int, domains: int, passes: int, allreduce: bool
) -> tuple[float, float, float]:
    """:func:`ring_latency_s` of LL, LL128 and Simple [s] (one cached call for the tuner's hot path)."""
    return tuple(ring_latency_s(up_link, net_hop_s, ranks, domains, passes, p, allreduce) for p in PROTOCOLS)  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def tree_latencies_s(up_link: str, net_hop_s: float, per_domain: int, domains: int) -> tuple[float, float, float]:
    """:func:`tree_latency_s` of LL, LL128 and Simple [s]."""
    return tuple(tree_latency_s(up_link, net_hop_s, per_domain, domains, p) for p in PROTOCOLS)  # type: ignore[return-value]


def ll_max_busbw_across_Bps(domains: int) -> float:
    """NCCL's LL busbw cap across nodes [bytes/s]: 39.0 GB/s on two, 20.4 on three or more ([1]_)."""
    return units.GBps_to_Bps(LL_MAX_BUSBW_ACROSS_GBps[0 if domains <= 2 else 1])


def ring_protocol_bw(
    proto: str, ring_Bps: float, domains: int, ll_max_one_domain_Bps: float | None, ll128_cap_Bps: float | None = None
) -> float:
    """Ring busbw of a protocol [bytes/s] from the ring's (Simple) bandwidth: LL half of it and at most
    NCCL's llMaxBws, LL128 120/128 of it and at most ``ll128_cap_Bps`` (the ring's channels times
    perChMaxRingLL128Bws; None: no cap), Simple all of it ([1]_, [2]_)."""
    if proto == "Simple":
        return ring_Bps
    if proto == "LL128":
        bw = LL128_LINE_FRACTION * ring_Bps
        return bw if ll128_cap_Bps is None else min(bw, ll128_cap_Bps)
    cap = ll_max_busbw_across_Bps(domains) if domains > 1 else ll_max_one_domain_Bps
    return LL_LINE_FRACTION * ring_Bps if cap is None else min(LL_LINE_FRACTION * ring_Bps, cap)


@lru_cache(maxsize=4096)
def ring_protocol_bws(
    ring_Bps: float, domains: int, ll_max_one_domain_Bps: float | None, ll128_cap_Bps: float | None = None
) -> tuple[float, float, float]:
    """:func:`ring_protocol_bw` of LL, LL128 and Simple [bytes/s]."""
    return tuple(ring_protocol_bw(p, ring_Bps, domains, ll_max_one_domain_Bps, ll128_cap_Bps) for p in PROTOCOLS)  # type: ignore[return-value]


def tree_protocol_fraction(proto: str, domains: int) -> float:
    """Fraction of the tree bandwidth a protocol moves (NCCL's tuner, [1]_): LL 1/3.8, LL128 7/9 in one
    node and 120/128 across nodes, Simple 1."""
    if proto == "Simple":
        return 1.0
    if proto == "LL128":
        return TREE_LL128_FRACTION_ONE_NODE if domains == 1 else LL128_LINE_FRACTION
    return TREE_LL_FRACTION
