"""Group placement: where the ranks of a TP/CP/EP/DP/PP group sit (domain, leaf, pod) and which
per-rank alpha-beta parameters its collectives see.

Ranks follow Megatron-LM's order (tensor-parallel innermost, then context, data/expert, pipeline
outermost; Narayanan et al. SC21 Sec. 3): a group of ``size`` ranks spaced ``stride`` apart fills
``q`` ranks of each of ``D`` scale-up domains (:func:`hnplan.comm.topology.split_group`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from hnplan.catalog.design import Design
from hnplan.comm.topology import LinkParams, SystemLinks, scaleout_bom, split_group, system_links
from hnplan.errors import InputError

LEVELS = ("none", "domain", "leaf", "pod", "fabric")
MAX_NVLS_HEADS = 32  # NCCL_MAX_NVLS_ARITY (NVIDIA/nccl src/include/device.h): GPU:NIC heads of an NVLS graph


@dataclass(frozen=True)
class GroupPlacement:
    """A group's shape on the network and the per-rank links its collectives use.

    Attributes
    ----------
    size : int
        Ranks in the group (p).
    per_domain : int
        Ranks of the group in each scale-up domain (q).
    domains : int
        Scale-up domains spanned (D = p / q).
    level : str
        The smallest network level holding the group: ``none`` (p = 1), ``domain`` (one scale-up
        domain), ``leaf`` (one leaf switch or rail leaf group), ``pod`` (one 3-tier pod), ``fabric``.
    up : LinkParams
        Scale-up link of one rank.
    out : LinkParams
        Scale-out share of one rank (its NIC bandwidth; divided by the leaf oversubscription when the
        group spans more than one leaf).
    ring_lanes : float, optional
        Rank shares of scale-out bandwidth that the rings and trees crossing a domain boundary use
        together (each ring flow leaves and enters a domain through one NIC, NVIDIA/nccl
        src/graph/search.cc): ``min(q, n_ring x node_gpus / nics_per_node)`` for a system whose rings
        use ``n_ring`` NICs per domain (``scaleout_ring_nics_per_domain``); None: every rank's share, q.
    inr_heads : int, optional
        Heads of an in-network-reduction + tree all-reduce in each domain: the group's GPUs paired with a
        NIC of their own, ``min(q, 32, NICs serving the q ranks, n_ring)`` (NCCL's NVLS graph pairs GPUs
        with NICs, at most NCCL_MAX_NVLS_ARITY = 32: src/graph/search.cc, src/include/device.h); None:
        ``min(q, 32)``.
    channels : int, optional
        NCCL's search channels of a group that spans domains: one ring through one NIC of each domain
        (NVIDIA/nccl src/graph/search.cc), so the NICs per domain its rings use, ``min(NICs serving the q
        ranks, n_ring)``; with the scale-up fabric's ``nccl_generation`` they set NCCL's per-channel
        bandwidth caps (:mod:`hnplan.comm.nccl_bw`). None: one domain, or no channel count (no cap).
    derived : dict
        Numbers the collective models derive from the fields above alone (a ring's protocol latencies and
        bandwidths, the tuner's caps: :mod:`hnplan.comm.algorithm_times`, :mod:`hnplan.comm.nccl_bw`), kept
        here the first time one is asked for, so that timing many message sizes on one placement derives
        them once. Not part of the placement's identity (equality, hash) and not copied by
        :func:`dataclasses.replace`, which makes a new placement.
    """

    size: int
    per_domain: int
    domains: int
    level: str
    up: LinkParams
    out: LinkParams
    ring_lanes: float | None = None
    inr_heads: int | None = None
    channels: int | None = None
    derived: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:
        """The hash of the fields that make the placement (those :meth:`__eq__` compares), computed once: a
        placement keys the tuner times every job shares (:mod:`hnplan.planning.training.collective_time`),
        looked up for each collective timed on it (hashing the links' fields each time costs more than the
        lookup)."""
        h = self.derived.get("__hash__")
        if h is None:
            h = self.derived["__hash__"] = hash(tuple(getattr(self, name) for name in _COMPARED))
        return h

    @property
    def crossing_Bps(self) -> float:
        """Scale-out bandwidth [bytes/s per direction] that a domain's ring (or tree) flows have to and
        from the next domain: ``min(q, ring_lanes) x B_o``."""
        lanes = self.per_domain if self.ring_lanes is None else min(self.per_domain, self.ring_lanes)
        return lanes * self.out.bw_Bps


_COMPARED = tuple(f.name for f in fields(GroupPlacement) if f.compare)  # the fields a placement is hashed by


def nodes_per_leaf(design: Design) -> int:
    """Nodes whose NICs hang off one leaf: ``down / nics_per_node`` on a fat-tree, ``down`` on a
    rail-optimised fat-tree (a rail leaf takes one NIC of each node), with ``down = k o / (1 + o)``."""
    system, sw = design.system, design.scaleout_switch
    o = system.scaleout_oversubscription
    ports_per_nic = max(1, math.ceil(system.nic_gbps / sw.port_gbps))
    down = max(1, math.floor(sw.ports * o / (1 + o)))
    if system.scaleout_topology == "rail-optimized-fat-tree":
        return max(1, down // ports_per_nic)
    return max(1, down // (system.nics_per_node * ports_per_nic))


def place_group(
    design: Design, size: int, stride: int = 1, job_gpus: int | None = None, links: SystemLinks | None = None
) -> GroupPlacement:
    """Place a group of ``size`` ranks spaced ``stride`` apart on a job of ``job_gpus`` accelerators.

    The links (default :func:`hnplan.comm.topology.system_links` of the job) and the scale-out bill of
    materials come from the design's per-GPU-count memo, so placing many groups of one job builds the
    fat-tree once.

    The group covers ``size x stride`` consecutive accelerators (at least its domains); it fits a
    leaf when those span no more than :func:`nodes_per_leaf` nodes, a pod when they fit ``k/2``
    leaves of a three-tier tree. Oversubscription divides the scale-out share only when the group
    leaves its leaf.

    Raises
    ------
    InputError
        For ``size`` or ``stride`` < 1, or a group larger than the job.
    """
    if size < 1 or stride < 1:
        raise InputError(f"group size and stride must be >= 1 (got {size}, {stride})")
    system = design.system
    job = job_gpus or size * stride
    if size * stride > job and size > 1:
        raise InputError(
            f"a group of {size} ranks with stride {stride} needs {size * stride} accelerators; the job has {job}"
        )
    lk = links or system_links(design, gpus=job)
    q, d = split_group(size, stride, system.scaleup_domain_gpus)
    out = lk.scaleout
    if size == 1:
        level = "none"
    elif d == 1:
        level = "domain"
    else:
        span_gpus = max(size * stride, d * system.scaleup_domain_gpus if stride < system.scaleup_domain_gpus else 0)
        nodes = math.ceil(min(span_gpus, job) / system.node_gpus)
        per_leaf = design.memo(("nodes_per_leaf",), lambda: nodes_per_leaf(design))
        bom = scaleout_bom(design, job)
        if nodes <= per_leaf or bom.tiers == 1:
            level = "leaf"
        else:
            k = design.scaleout_switch.ports
            level = "pod" if bom.tiers == 3 and nodes <= per_leaf * (k // 2) else "fabric"
            out = design.memo(("oversubscribed", out), lambda: _oversubscribed(out, system.scaleout_oversubscription))
    nics = system.scaleout_ring_nics_per_domain
    lanes = None if nics is None else nics * system.node_gpus / system.nics_per_node
    group_nics = q * system.nics_per_node // system.node_gpus
    heads = max(1, min(q, MAX_NVLS_HEADS, group_nics, nics if nics is not None else group_nics))
    channels = max(1, min(group_nics, nics if nics is not None else group_nics)) if d > 1 else None
    return GroupPlacement(size, q, d, level, lk.scaleup, out, lanes, heads, channels)


def _oversubscribed(link: LinkParams, o: float) -> LinkParams:
    """A scale-out link shared ``o``:1 above the leaves: bandwidth, line rate and all-to-all rates divided by ``o``."""
    a2a = None if link.alltoall_bw_Bps is None else link.alltoall_bw_Bps / o
    flex = None if link.flex_alltoall_bw_Bps is None else link.flex_alltoall_bw_Bps / o
    return replace(
        link,
        bw_Bps=link.bw_Bps / o,
        line_rate_Bps=link.line_rate_Bps / o,
        alltoall_bw_Bps=a2a,
        flex_alltoall_bw_Bps=flex,
    )


def flat_placement(size: int, per_domain: int, up: LinkParams, out: LinkParams) -> GroupPlacement:
    """A placement from explicit numbers (for studies and tests): ``size`` ranks, ``per_domain`` of
    them in each scale-up domain.

    Raises
    ------
    InputError
        If ``per_domain`` does not divide ``size``.
    """
    if size < 1 or per_domain < 1 or size % per_domain:
        raise InputError(f"per_domain ({per_domain}) must divide the group size ({size}), both >= 1")
    d = size // per_domain
    level = "none" if size == 1 else ("domain" if d == 1 else "fabric")
    return GroupPlacement(size, per_domain, d, level, up, out)
