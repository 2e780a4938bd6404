"""Collective algorithms over a placed group: the time of each at each message size (the tuner that
picks the fastest per size: :mod:`hnplan.comm.algorithms`).

A group of p ranks has q ranks in each of D scale-up domains (:class:`~hnplan.comm.placement.
GroupPlacement`). Every rank sees a scale-up link (``B_u``, ``alpha_u``) and its share of the NICs
(``B_o``, ``alpha_o``); all bandwidths are achievable per-direction figures. ``S`` is the size
nccl-tests passes (the buffer per rank for all-reduce and broadcast, the whole array for
reduce-scatter and all-gather, the send buffer for all-to-all). Pipelined algorithms (ring, tree,
in-network) are limited by their slowest stage; the hierarchical composition adds its stages.

==================  =========================================================================
algorithm           time [s]
==================  =========================================================================
ring                ``k [(p-D) a_u + (D-1) a_o] + k (p-1)/p S / B_ring``, k = 2 for all-reduce,
                    1 for reduce-scatter/all-gather: of the k(p-1) steps, k(D-1) cross a domain
                    boundary at the scale-out latency and the rest stay on the scale-up links
                    (NCCL's ring latency, [3]_); ``B_ring = B_u`` in one domain, else
                    ``min(B_u, min(q, n) B_o)``: each ring flow leaves and enters a domain
                    through one NIC ([5]_), so the NICs the rings use share the crossings: all q
                    rank shares, or n = the system's ``scaleout_ring_nics_per_domain`` in rank
                    shares (``GroupPlacement.crossing_Bps``; 10 NICs of a GB200 NVL72 rack with
                    NCCL 2.26.2). The latency grows linearly with p, so at thousands of ranks
                    busbw keeps rising with S into the GiB range (nccl-tests at 1,440 GB200,
                    data/reference/comm_at_scale.csv)
tree                NCCL double binary tree (Sanders, Speck, Traeff 2009): a chain inside each
                    domain, a binary tree across domains. Per direction an interior rank moves
                    2S (chain, q > 2) and a domain t S through its q NICs, t = 2 for D > 3,
                    1.5 on three domains (each tree is a chain), 1 on two (NCCL trees.cc):
                    ``max(c S/B_u, t S/(min(q, n) B_o))`` + ``2((q-1) a_u + ceil(log2 D) a_o)``:
                    the chain's q-1 hops and the tree's depth (NCCL's tree latency, [3]_;
                    Sanders et al.)
rhd                 recursive halving then doubling (Rabenseifner; Thakur et al. Sec. 4.4), p and
                    q powers of two: ``2 (log2 q a_u + log2 D a_o) + 2 [(1-1/q) S/B_u +
                    (1-1/D) S/(q B_o)]``
hierarchical        reduce-scatter inside the domain, ring all-reduce of the S/q shard across
                    domains (one ring per local rank; together they cross a domain at
                    ``min(q, n) B_o``, the NICs the library's channels use), all-gather inside;
                    stages added
inr                 in-network reduction. In a domain whose switches reduce (NVLink SHARP, NCCL
                    NVLS) each rank sends S and its 1/q shard once and receives the same:
                    ``S (q+1)/q / (B_u e_u)``, in one domain plus NCCL's chunk steps below 128 KiB
                    chunks (:func:`hnplan.comm.nccl.nvls_chunk_time_s`, the fabric's
                    ``inr_chunk_step_us``); across domains a switch-reducing fabric (IB SHARP)
                    moves the S/q shard once per NIC, ``S / (q B_o e_o)``; without it a tree.
                    ``e`` = the fabric's ``inr_efficiency`` (NCCL's nvlsEfficiency; 0.85 for
                    CollNet on Hopper and later); only where the system enables it
                    (``scaleup_in_network_reduction``, ``scaleout_in_network_reduction``).
                    NVLS + tree (NCCL's NVLS_TREE, [6]_): the warps of the same thread blocks
                    reduce a head's share through the switch, hand it to the NIC, take the other
                    domains' sum back and multicast it, so the stages pipeline no faster than
                    those warps: busbw at most ``h c_D`` for h heads (GPUs paired with a NIC,
                    ``GroupPlacement.inr_heads``) and c_D the fabric's
                    ``inr_tree_head_busbw_GBps`` (two domains, three or more; NCCL's
                    perChMaxNVLSTreeBws), i.e. ``t >= 2(p-1)/p S / (h c_D)``
pairwise            all-to-all by pairwise exchange: ``(q-1) a_u + (p-q) a_o + max((q-1)/p S/B_u,
                    (p-q)/p S/B_o)``; a GPU's inter-domain traffic goes through its own NIC share
                    (NICs do not aggregate for one GPU)
oneshot             all-to-all written to every peer at once (an EP library's low-latency kernel,
                    DeepEP): ``a + max((q-1)/p S/B_u, (p-q)/p S/B_o)``, ``a = a_o`` across domains
                    (:func:`~hnplan.comm.collectives.oneshot_alltoall_time`); never the tuner's
                    choice (NCCL has no such kernel), chosen by the serving engine
ring (broadcast)    pipelined chain: ``(p-D) a_u + (D-1) a_o + S / B_ring``; tree: binomial,
                    ``ceil(log2 p)(a + S/B)``
p2p (sendrecv)      ``a + S / B``, B = B_u in one domain, else ``min(B_u, B_o)``
NCCL latencies      on fabrics that carry NCCL's link class (``nccl_link``) ring, tree and inr
                    take NCCL's latency per algorithm and protocol (LL, LL128, Simple) in place
                    of the alpha steps above, each protocol at its share of the bandwidth (LL
                    half, at most llMaxBws; LL128 120/128; Simple all), the fastest kept
                    (:mod:`hnplan.comm.nccl`, [3]_); rhd, hierarchical and the binomial broadcast
                    add NCCL's Ring/LL128 baseLat (14 us) to their alpha steps; the tuner leaves
                    rhd and hierarchical out there (NCCL has neither; forcing still works)
pat                 NCCL's PAT reduce-scatter/all-gather, one rank per domain of an NCCL
                    fabric only: ``8 us + floor(log2 D)(14 us + 2 L_net)/3.5 + 2.8 us x p +
                    (p-1)/p S / (0.75 B_ring)`` ([3]_)
==================  =========================================================================

p = 1 costs nothing. busbw follows nccl-tests (:func:`hnplan.comm.collectives.busbw_factor`), also
for in-network reduction, so its busbw exceeds the link rate exactly as nccl-tests reports it.

References
----------
.. [1] Thakur, Rabenseifner, Gropp, IJHPCA 19(1), 2005.
.. [2] Sanders, Speck, Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
   Parallel Computing 35(12), 2009 (NCCL's double binary tree).
.. [3] NVIDIA/nccl src/graph/tuning.cc: per-algorithm bandwidth/latency model and the choice of the
   fastest (algorithm, protocol) per size; nvlsEfficiency.
.. [4] NVIDIA/nccl-tests doc/PERFORMANCE.md (algbw, busbw).
.. [5] NVIDIA/nccl src/graph/search.cc: a ring channel is ``NET -> GPU a -> ... -> GPU x -> NET``; the
   tree graph gets the ring's channel count (src/init.cc); NCCL 2.27.3 release notes: 16 NICs between
   multi-node NVLink domains on GB200.
.. [6] NVIDIA/nccl src/device/all_reduce.h (NVLS_TREE: scatter, gather, reduce-to-network and
   network-to-broadcast warps of one block per channel), src/graph/tuning.cc (perChMaxNVLSTreeBws,
   NCCL 2.28.3 and later), src/graph/search.cc (one NVLS channel per GPU:NIC head).
"""

from __future__ import annotations

import math

import numpy as np

from hnplan.comm import nccl, nccl_bw
from hnplan.comm.collectives import OPS, oneshot_alltoall_time, sendrecv_time
from hnplan.comm.group_stack import derived, pick, when
from hnplan.comm.placement import MAX_NVLS_HEADS, GroupPlacement
from hnplan.errors import InputError, check_choice

ALGORITHMS = {
    "allreduce": ("ring", "tree", "rhd", "hierarchical", "inr"),
    "reducescatter": ("ring", "rhd", "pat"),
    "allgather": ("ring", "rhd", "pat"),
    "alltoall": ("pairwise", "oneshot"),
    "broadcast": ("ring", "tree"),
    "sendrecv": ("p2p",),
}


def _pow2(x: int) -> bool:
    return x >= 1 and (x & (x - 1)) == 0


def _log2(x: int) -> float:
    return math.log2(x) if x > 1 else 0.0  # of powers of two only (rhd): exact


def _ring_bw(g: GroupPlacement) -> float:
    return g.up.bw_Bps if g.domains == 1 else min(g.up.bw_Bps, g.crossing_Bps)


def _ring_latency(g: GroupPlacement) -> float:
    """Latency of one pass of a ring over the group [s]: p - 1 steps, of which D - 1 cross a domain
    boundary (scale-out latency) and p - D stay inside a domain (scale-up latency), as NCCL's tuner
    counts them (NVIDIA/nccl src/graph/tuning.cc: ``(nsteps - nInterSteps) intraLat + nInterSteps
    interLat``)."""
    return (g.size - g.domains) * g.up.alpha_s + (g.domains - 1) * g.out.alpha_s


def _nccl(g: GroupPlacement) -> bool:
    """Whether NCCL's latency model times the group: its scale-up fabric, and its scale-out fabric where it
    spans domains, carry an NCCL link class (:mod:`hnplan.comm.nccl`)."""
    return g.up.nccl_link is not None and (g.out.nccl_link is not None or when(g.domains == 1))


def _base(g: GroupPlacement) -> float:
    """Fixed latency of an algorithm NCCL does not have (rhd, hierarchical, binomial broadcast) on an NCCL
    fabric: its launch cost, baseLat of Ring/LL128 (14 us); 0 elsewhere."""
    return _LAUNCH_S if _nccl(g) else 0.0


_LAUNCH_S = nccl.base_latency_s("ring", "LL128")


def _ring(g: GroupPlacement, passes: int, data, allreduce: bool, model: bool = False):
    """Time of a ring of ``passes`` passes moving ``data`` bytes per rank [s]: on an NCCL fabric the fastest of
    the LL, LL128 and Simple protocols, each with NCCL's latency (:func:`hnplan.comm.nccl.ring_latency_s`) and
    its share of the ring bandwidth (:func:`hnplan.comm.nccl.ring_protocol_bw`); elsewhere ``passes`` times
    the alpha latency of :func:`_ring_latency` plus ``data / B_ring``. ``model``: NCCL's tuner's estimate
    instead, LL128 also capped at the group's channels x perChMaxRingLL128Bws (what the tuner compares
    algorithms by, :func:`_tuner_key`)."""
    key = ("ring", passes, allreduce, model)
    terms = g.derived.get(key)  # (read first: the tuner's scalar path times every message on a ring)
    if terms is None:
        terms = derived(g, key, _ring_terms, passes, allreduce, model)
    lats, bws = terms
    if len(lats) == 1:  # not NCCL's latency model: the alpha steps
        return lats[0] + data / bws[0]
    if isinstance(data, float):  # the planners' scalar path: LL, LL128 and Simple
        (l0, l1, l2), (b0, b1, b2) = lats, bws
        return nccl_bw.least((l0 + data / b0, l1 + data / b1, l2 + data / b2))
    return nccl_bw.least_array([lat + data / b for lat, b in zip(lats, bws)])


def _ring_terms(g: GroupPlacement, passes: int, allreduce: bool, model: bool) -> tuple[tuple, tuple]:
    """The numbers of :func:`_ring` that depend on the group alone, ``(latencies [s], bandwidths [B/s])``: off an
    NCCL fabric the ``passes`` alpha steps of :func:`_ring_latency` and ``B_ring``; on one, NCCL's latency and
    bandwidth of LL, LL128 and Simple."""
    bw = _ring_bw(g)
    if not _nccl(g):
        return (passes * _ring_latency(g),), (bw,)
    lats = nccl.ring_latencies_s(g.up.nccl_link or "", g.out.hop_latency_s, g.size, g.domains, passes, allreduce)
    cap = nccl_bw.channel_cap(g, nccl_bw.PER_CHANNEL_RING_LL128_GBps) if model else None
    return lats, nccl.ring_protocol_bws(bw, g.domains, g.up.ll_max_busbw_Bps, cap)


def _cross_tree(g: GroupPlacement, s):
    """Bandwidth term and latency of NCCL's double binary tree across domains for S bytes per rank.

    Each tree carries S/2; the busiest domain moves, per direction, S on 2 domains (the root of one tree,
    the leaf of the other), 1.5 S on 3 (each tree is a chain: the middle of one, an end of the other)
    and 2 S from 4 on (two children and a parent in one tree, a leaf in the other): NVIDIA/nccl
    src/graph/trees.cc (ncclGetBtree, ncclGetDtree)."""
    if when(g.domains == 1):
        return 0.0 * s, 0.0
    per_s, crossing, a_cross = derived(g, "cross_tree", _cross_tree_terms)
    return per_s * s / crossing, a_cross


def _cross_tree_terms(g: GroupPlacement) -> tuple[float, float, float]:
    """The numbers of :func:`_cross_tree` that depend on the group alone: the bytes per S through the busiest
    domain, the crossing bandwidth [B/s] and the trees' depth latency [s]."""
    depth = 2 * math.ceil(math.log2(g.domains)) * g.out.alpha_s
    return {2: 1.0, 3: 1.5}.get(g.domains, 2.0), g.crossing_Bps, depth


def _tree_protocols(g: GroupPlacement, s, data):
    """NCCL's tree all-reduce on an NCCL fabric [s]: the fastest protocol, each with NCCL's tree latency
    (:func:`hnplan.comm.nccl.tree_latency_s`) and its fraction of the tree's bandwidth term ``data``
    (:func:`hnplan.comm.nccl.tree_protocol_fraction`); LL also no faster than NCCL's llMaxBws (tree busbw
    is twice its algbw in NCCL's tuner, so ``2 S / llMax``)."""
    lats, cap, ll128 = derived(g, "tree_protocols", _tree_protocol_terms)
    ll = nccl_bw.at_least(data / nccl.TREE_LL_FRACTION, None if cap is None else 2 * s / cap)
    times = (lats[0] + ll, lats[1] + data / ll128, lats[2] + data)
    return nccl_bw.least(times) if isinstance(data, float) else nccl_bw.least_array(times)


def _tree_protocol_terms(g: GroupPlacement) -> tuple:
    """The numbers of :func:`_tree_protocols` that depend on the group alone: NCCL's tree latencies [s], the LL
    busbw cap [B/s] (None: none) and LL128's fraction of the tree bandwidth."""
    lats = nccl.tree_latencies_s(g.up.nccl_link or "", g.out.hop_latency_s, g.per_domain, g.domains)
    cap = nccl.ll_max_busbw_across_Bps(g.domains) if g.domains > 1 else g.up.ll_max_busbw_Bps
    return lats, cap, nccl.tree_protocol_fraction("LL128", g.domains)


def _tree_data(g: GroupPlacement, s):
    """Bandwidth term of the tree all-reduce [s] and the latency of its steps across domains: the chain in a
    domain (2 S through the scale-up link, q > 2) against the trees across (:func:`_cross_tree`)."""
    per_s = g.derived.get("chain")  # (read first: the tuner's scalar path)
    if per_s is None:
        per_s = derived(g, "chain", _chain_bytes)
    chain = per_s * s / g.up.bw_Bps
    cross, a_cross = _cross_tree(g, s)
    return nccl_bw.at_least(chain, cross), a_cross  # floats stay floats (the planners' scalar path)


def _chain_bytes(g: GroupPlacement) -> float:
    """Bytes per S an interior rank of the tree's chain in a domain moves through its scale-up link per direction:
    2 for q > 2, 1 for two ranks, 0 for one (no chain)."""
    q = g.per_domain
    return (2.0 if q > 2 else 1.0) if q > 1 else 0.0


def nvls_pipelines(g: GroupPlacement) -> int:
    """NVLS pipelines of a single-domain all-reduce: the generation's NVLS channels x one head per GPU (at
    most ``MAX_NVLS_HEADS``); 0 where the generation has no NVLS channel count (:data:`nccl.NVLS_CHANNELS`)."""
    return nccl.NVLS_CHANNELS.get(g.up.nccl_generation or "", 0) * min(g.per_domain, MAX_NVLS_HEADS)


def _nvls_chunk_steps(g: GroupPlacement, s):
    """Time NCCL's NVLS all-reduce in one domain spends on chunk steps smaller than 128 KiB [s]
    (:func:`hnplan.comm.nccl.nvls_chunk_time_s`: one head per GPU, the generation's NVLS channels, the
    scale-up link's ``inr_chunk_step_s``, from the fabric's ``inr_chunk_step_us``); 0 across domains (NVLS +
    tree chunks by its own rule), without in-switch reduction, or on a fabric without the step time."""
    up = g.up
    if not up.inr_efficiency or up.inr_chunk_step_s is None or when(g.domains > 1) or when(g.per_domain < 2):
        return 0.0 * s
    ops = derived(g, "nvls_pipelines", nvls_pipelines)  # (after the checks above: most groups span domains)
    if not when(ops != 0):
        return 0.0 * s
    return nccl.nvls_chunk_time_s(s, ops, up.inr_chunk_step_s)


def _allreduce(alg: str, g: GroupPlacement, s):
    p = g.size
    if alg == "ring":  # its numbers are the group's (_ring): no others read (the tuner's scalar path)
        return _ring(g, 2, 2 * (p - 1) / p * s, True)
    q, d = g.per_domain, g.domains
    bu, au, bo, ao = g.up.bw_Bps, g.up.alpha_s, g.out.bw_Bps, g.out.alpha_s
    if alg == "tree":
        data, a_cross = _tree_data(g, s)
        if not _nccl(g):
            return 2 * (q - 1) * au + a_cross + data
        return _tree_protocols(g, s, data)
    if alg == "rhd":
        if not (_pow2(p) and _pow2(q)):
            return None
        return _base(g) + 2 * (_log2(q) * au + _log2(d) * ao) + 2 * ((1 - 1 / q) * s / bu + (1 - 1 / d) * s / (q * bo))
    if alg == "hierarchical":
        inner = 2 * ((q - 1) * au + (q - 1) / q * s / bu)
        outer = 2 * (d - 1) * ao + 2 * (d - 1) / d * s / g.crossing_Bps
        return _base(g) + inner + outer
    if alg == "inr":
        e_u, e_o = g.up.inr_efficiency, g.out.inr_efficiency
        many, across = q > 1, when(d > 1)  # (a stack's elements: one branch across domains, q element-wise)
        reduce_out = bool(e_o) and across  # a reducing network joins the domains: applies at any q
        if not reduce_out and not (e_u and when(many, mixed=True)):
            return None
        if e_u:  # in-switch reduction in the domain, none with one rank in it
            intra, a_in = pick(many, s * (q + 1) / q / (bu * e_u), 0.0 * s), pick(many, 2 * au, 0.0)
        else:  # a ring's reduce-scatter and all-gather in the domain (0 for one rank)
            intra, a_in = 2 * (q - 1) / q * s / bu, 2 * (q - 1) * au
        if reduce_out:
            cross, a_cross = s / (q * bo * e_o), 2 * ao
        else:
            cross, a_cross = _cross_tree(g, s)
            if e_u and across and g.up.inr_tree_head_busbw_Bps is not None:  # NVLS + tree: each head's pipeline
                heads_Bps = derived(g, "inr_heads_Bps", _inr_heads_Bps)
                cross = pick(many, nccl_bw.at_least(cross, 2 * (p - 1) / p * s / heads_Bps), cross)
        intra = intra + _nvls_chunk_steps(g, s)
        lat = a_in + a_cross
        if _nccl(g):
            lat = derived(g, "inr_latency", _inr_latency)
        t = lat + nccl_bw.at_least(intra, cross)
        # where it applies (a stack's elements with one rank per domain and no reducing network: never the choice)
        return t if reduce_out or many.__class__ is bool else np.where(many, t, np.inf)
    raise InputError(f"unknown all-reduce algorithm {alg!r}; allowed: {', '.join(ALGORITHMS['allreduce'])}")


def _inr_heads_Bps(g: GroupPlacement) -> float:
    """busbw of the NVLS + tree heads of a domain [B/s]: its heads (``GroupPlacement.inr_heads``, else one a GPU up
    to ``MAX_NVLS_HEADS``) x one head's busbw on two domains or on three or more (``inr_tree_head_busbw_Bps``)."""
    heads = min(g.per_domain, MAX_NVLS_HEADS) if g.inr_heads is None else g.inr_heads
    head = g.up.inr_tree_head_busbw_Bps or (0.0, 0.0)
    return heads * head[0 if g.domains == 2 else 1]


def _inr_latency(g: GroupPlacement) -> float:
    """NCCL's latency of the in-network all-reduce on ``g`` [s] (:func:`hnplan.comm.nccl.inr_latency_s`): NVLS
    in one domain or over a reducing network, NVLS + tree across a network that does not reduce, CollNet chain
    without a reducing scale-up switch."""
    q, d, e_o = g.per_domain, g.domains, g.out.inr_efficiency
    nvls = bool(g.up.inr_efficiency) and q > 1
    kind = ("nvls" if d == 1 or e_o else "nvls_tree") if nvls else "collnet_chain"
    return nccl.inr_latency_s(g.up.nccl_link or "", g.out.hop_latency_s, q, d, kind)


def _one_pass(op: str, alg: str, g: GroupPlacement, s):
    p = g.size
    if alg == "ring" and op in ("reducescatter", "allgather"):  # the group's numbers in _ring (the tuner's scalar path)
        return _ring(g, 1, (p - 1) / p * s, False)
    q, d = g.per_domain, g.domains
    bu, au, bo, ao = g.up.bw_Bps, g.up.alpha_s, g.out.bw_Bps, g.out.alpha_s
    if op in ("reducescatter", "allgather"):
        if alg == "rhd":
            if not (_pow2(p) and _pow2(q)):
                return None
            return _base(g) + _log2(q) * au + _log2(d) * ao + (1 - 1 / q) * s / bu + (1 - 1 / d) * s / (q * bo)
        if alg == "pat":  # NCCL's PAT: one rank per node only
            one = q == 1  # (a stack's elements: q element-wise, one branch across domains)
            if not (_nccl(g) and when(one, mixed=True) and when(d > 1)):
                return None
            lat, ring_bw = derived(g, "pat", _pat_terms)  # once per placement
            t = lat + (p - 1) / p * s / (nccl.PAT_BW_FRACTION * ring_bw)
            # where it applies (a stack's elements with more ranks per domain: never the choice)
            return t if one.__class__ is bool else np.where(one, t, np.inf)
    elif op == "alltoall" and alg == "pairwise":  # at the bandwidth EP libraries reach where the catalog has it
        intra = (q - 1) / p * s / g.up.a2a_Bps
        cross = (p - q) / p * s / g.out.a2a_Bps
        return (q - 1) * au + (p - q) * ao + nccl_bw.at_least(intra, cross)
    elif op == "alltoall" and alg == "oneshot":
        return oneshot_alltoall_time(s, p, q, g.up.a2a_Bps, g.out.a2a_Bps, au if d == 1 else ao)
    elif op == "broadcast":
        if alg == "ring":
            return _ring(g, 1, s, False)
        if alg == "tree":
            steps = np.ceil(np.log2(p))
            return _base(g) + steps * ((au if d == 1 else ao) + s / (bu if d == 1 else min(bu, bo)))
    elif op == "sendrecv" and alg == "p2p":
        a, b = p2p_terms(g)
        return sendrecv_time(s, b, a)
    raise InputError(f"unknown {op} algorithm {alg!r}; allowed: {', '.join(ALGORITHMS.get(op, ()))}")


def _pat_terms(g: GroupPlacement) -> tuple[float, float]:
    """The numbers of PAT (:func:`_one_pass`) that depend on the group alone: NCCL's PAT latency [s]
    (:func:`hnplan.comm.nccl.pat_latency_s`) and the ring bandwidth [B/s]."""
    return nccl.pat_latency_s(g.out.hop_latency_s, g.size, g.domains), _ring_bw(g)


def p2p_terms(g: GroupPlacement) -> tuple[float, float]:
    """``(alpha [s], bw [B/s])`` of a send/receive in the group, ``alpha + S / bw`` (``p2p``, sendrecv's one
    algorithm): the scale-up link in one domain, else the slower link at the scale-out latency."""
    return (g.up.alpha_s, g.up.bw_Bps) if g.domains == 1 else (g.out.alpha_s, min(g.up.bw_Bps, g.out.bw_Bps))


def algorithm_time(op: str, algorithm: str, n_bytes, group: GroupPlacement):
    """Time of one collective with one algorithm [s], or None where the algorithm does not apply
    (rhd on non-powers of two, inr without a switch that reduces).

    Parameters
    ----------
    op : str
        One of :data:`hnplan.comm.collectives.OPS`.
    algorithm : str
        One of ``ALGORITHMS[op]``.
    n_bytes : float or array
        nccl-tests size S [bytes].
    group : GroupPlacement

    Raises
    ------
    InputError
        For an unknown op or algorithm.
    """
    check_choice("collective", op, OPS)
    check_choice(f"{op} algorithm", algorithm, ALGORITHMS[op])
    return _checked_time(op, algorithm, np.asarray(n_bytes, dtype=float), group)


def _checked_time(op: str, algorithm: str, s: np.ndarray, group: GroupPlacement):
    """:func:`algorithm_time` for an ``op`` and ``algorithm`` already checked and sizes ``s`` as a float array."""
    if group.size == 1:
        return np.zeros_like(s)
    t = _allreduce(algorithm, group, s) if op == "allreduce" else _one_pass(op, algorithm, group, s)
    return None if t is None else np.broadcast_to(np.asarray(t, dtype=float), s.shape).copy()


def algorithm_table(op: str, n_bytes, group: GroupPlacement) -> dict:
    """``{algorithm: time array [s]}`` for every algorithm of ``op`` that applies to the group."""
    check_choice("collective", op, OPS)  # the op once; its algorithms are known names
    s = np.asarray(n_bytes, dtype=float)
    out = {}
    for alg in _tuned(op, group):
        t = _checked_time(op, alg, s, group)
        if t is not None:
            out[alg] = t
    return out


def _tuned(op: str, group: GroupPlacement) -> tuple[str, ...]:
    """The algorithms the tuner weighs for ``op`` on ``group``: all of them but the engine-chosen one-shot
    all-to-all, less rhd and hierarchical where
    NCCL times the group (:func:`_nccl`): NCCL has neither (it reduces by ring, tree, NVLS, CollNet and, with
    one rank per node, PAT: src/graph/tuning.cc); they stay available when forced."""
    return _NCCL_ALGORITHMS[op] if _nccl(group) else _ALL_TUNED[op]


_ALL_TUNED = {op: tuple(a for a in algs if a != "oneshot") for op, algs in ALGORITHMS.items()}
_NCCL_ALGORITHMS = {op: tuple(a for a in algs if a not in ("rhd", "hierarchical")) for op, algs in _ALL_TUNED.items()}
