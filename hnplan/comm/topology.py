"""Links and group placement of a system: closed forms, fast enough for planners. The sizing of its networks
(fat-tree tiers and switch counts, the bills of materials, whole purchasable units) is
:mod:`hnplan.comm.network_bom`'s; its names are importable from here as before.

The networkx graphs of the same networks (for drawing, hop counts and cross-checks) are in
:mod:`hnplan.comm.graphs`; tests check that both agree on small instances.

References
----------
.. [2] Narayanan et al., SC21, Sec. 3 (Megatron-LM rank order: tensor-parallel ranks innermost).
"""

from __future__ import annotations

from dataclasses import dataclass

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.comm.network_bom import (  # noqa: F401 - the network sizing, public here as before
    NetworkBOM,
    ScaleupBOM,
    check_fabric_gpus,
    fat_tree_counts,
    fat_tree_max_endpoints,
    fat_tree_tiers,
    max_scaleout_gpus,
    scaleout_bom,
    scaleup_bom,
    scaleup_hops,
    whole_units,
)
from hnplan.errors import InputError


@dataclass(frozen=True)
class LinkParams:
    """Alpha-beta parameters of one tier as seen by one rank.

    Attributes
    ----------
    bw_Bps : float
        Achievable per-direction bandwidth per rank [bytes/s] (line rate x bw_efficiency).
    alpha_s : float
        Latency of one algorithm step [s]: software overhead + links + switch hops.
    line_rate_Bps : float
        Per-direction line rate per rank before efficiency [bytes/s].
    inr_efficiency : float or None
        Fraction of ``bw_Bps`` reached when the tier's switches reduce (None: no in-network reduction).
    alltoall_bw_Bps : float or None
        Per-direction bandwidth per rank of an all-to-all [bytes/s]: line rate x the fabric's
        ``alltoall_efficiency`` where the catalog has one (what expert-parallel libraries reach), else
        None (``bw_Bps``).
    inr_tree_head_busbw_Bps : tuple of two floats or None
        All-reduce busbw one head (a GPU with its NIC) sustains when this tier reduces in its switches
        and a tree joins the domains, on two domains and on three or more [bytes/s] (the fabric's
        ``inr_tree_head_busbw_GBps``; NCCL's perChMaxNVLSTreeBws); None: no such limit.
    nccl_link : str or None
        NCCL's class of the tier's links for its latency table (``nvlink``, ``pci``, ``net``; the fabric's
        ``nccl_link``, :mod:`hnplan.comm.nccl`); None: the collective library is not NCCL and a step costs
        ``alpha_s``.
    hop_latency_s : float
        Links and switch hops of the tier's longest path [s]; across domains it is NCCL's network latency
        (``latencyInter``) on top of the table's per-step latency.
    ll_max_busbw_Bps : float or None
        busbw cap of the LL protocol inside one domain [bytes/s] (``ll_max_busbw_GBps``).
    nccl_generation : str or None
        GPU generation of NCCL's per-channel bandwidth caps (the scale-up fabric's ``nccl_generation``,
        :data:`hnplan.comm.nccl_bw.GENERATIONS`); None: no per-channel caps.
    inr_chunk_step_s : float or None
        Fixed time of one chunk step of NCCL's NVLS all-reduce inside the domain [s] (the fabric's
        ``inr_chunk_step_us``, :func:`hnplan.comm.nccl.nvls_chunk_time_s`); None: no chunk term.
    flex_alltoall_bw_Bps : float or None
        Per-direction bandwidth per rank of the flex expert-parallel dispatcher's cross-domain traffic
        (DeepEP / HybridEP internode, as a training framework calls them) [bytes/s]: line rate x the fabric's
        ``flex_alltoall_efficiency``; None: ``a2a_Bps``. Scale-out tier only.
    """

    bw_Bps: float
    alpha_s: float
    line_rate_Bps: float
    inr_efficiency: float | None = None
    alltoall_bw_Bps: float | None = None
    inr_tree_head_busbw_Bps: tuple[float, float] | None = None
    nccl_link: str | None = None
    hop_latency_s: float = 0.0
    ll_max_busbw_Bps: float | None = None
    nccl_generation: str | None = None
    inr_chunk_step_s: float | None = None
    flex_alltoall_bw_Bps: float | None = None

    @property
    def a2a_Bps(self) -> float:
        """All-to-all bandwidth per rank [bytes/s]: ``alltoall_bw_Bps`` or, without one, ``bw_Bps``."""
        return self.bw_Bps if self.alltoall_bw_Bps is None else self.alltoall_bw_Bps


@dataclass(frozen=True)
class SystemLinks:
    """The scale-up and scale-out tiers of a system, per rank."""

    scaleup: LinkParams
    scaleout: LinkParams
    domain_gpus: int
    node_gpus: int


def system_links(design: Design, gpus: int | None = None) -> SystemLinks:
    """Per-rank alpha-beta parameters of a system's scale-up and scale-out tiers.

    Scale-up bandwidth is the accelerator's (or the system's override) per-direction figure times the
    fabric's ``bw_efficiency``; the step latency is the fabric's software overhead plus the links and
    switch hops of the domain's longest path (:func:`scaleup_hops`). Scale-out bandwidth per rank is
    the node's NIC line rate shared by its accelerators, ``nics_per_node x nic_gbps / node_gpus``,
    times ``bw_efficiency``; its latency is the overhead plus the links and switch hops of the
    fat-tree's longest path: ``2 t`` links and ``2 t - 1`` switches for ``t`` tiers, with ``t`` from
    :func:`scaleout_bom` for ``gpus`` accelerators (3 tiers when ``gpus`` is None). In-network reduction
    (``inr_efficiency``) is set for a tier only when its fabric can reduce *and* the system enables it
    (``scaleup_in_network_reduction``, ``scaleout_in_network_reduction``).

    Memoised on the design per ``gpus`` (:meth:`hnplan.catalog.design.Design.memo`).
    """
    return design.memo(("system_links", gpus), lambda: _system_links(design, gpus))


def _system_links(design: Design, gpus: int | None) -> SystemLinks:
    system, acc = design.system, design.accelerator
    up, out = design.scaleup_fabric, design.scaleout_fabric
    up_line = units.GBps_to_Bps(system.scaleup_bw_GBps_per_dir or acc.scaleup_bw_GBps_per_dir)
    links_up = scaleup_hops(system)
    up_hops = units.ns_to_s(links_up * up.link_latency_ns + max(links_up - 1, 0) * up.switch_latency_ns)
    up_alpha = units.us_to_s(up.software_overhead_us) + up_hops
    out_line = units.gbps_to_Bps(system.nics_per_node * system.nic_gbps) / system.node_gpus
    tiers = 3 if gpus is None else scaleout_bom(design, gpus).tiers
    out_hops = units.ns_to_s(2 * tiers * out.link_latency_ns + (2 * tiers - 1) * out.switch_latency_ns)
    out_alpha = units.us_to_s(out.software_overhead_us) + out_hops
    return SystemLinks(
        scaleup=LinkParams(
            up_line * up.bw_efficiency,
            up_alpha,
            up_line,
            (system.scaleup_inr_efficiency or up.inr_efficiency)
            if up.in_network_reduction and system.scaleup_in_network_reduction
            else None,
            None if up.alltoall_efficiency is None else up_line * up.alltoall_efficiency,
            None
            if up.inr_tree_head_busbw_GBps is None
            else (
                units.GBps_to_Bps(up.inr_tree_head_busbw_GBps[0]),
                units.GBps_to_Bps(up.inr_tree_head_busbw_GBps[1]),
            ),
            up.nccl_link,
            up_hops,
            None if up.ll_max_busbw_GBps is None else units.GBps_to_Bps(up.ll_max_busbw_GBps),
            up.nccl_generation,
            None if up.inr_chunk_step_us is None else units.us_to_s(up.inr_chunk_step_us),
        ),
        scaleout=LinkParams(
            out_line * out.bw_efficiency,
            out_alpha,
            out_line,
            out.inr_efficiency if out.in_network_reduction and system.scaleout_in_network_reduction else None,
            None if out.alltoall_efficiency is None else out_line * out.alltoall_efficiency,
            nccl_link=out.nccl_link,
            hop_latency_s=out_hops,
            flex_alltoall_bw_Bps=None
            if out.flex_alltoall_efficiency is None
            else out_line * out.flex_alltoall_efficiency,
        ),
        domain_gpus=system.scaleup_domain_gpus,
        node_gpus=system.node_gpus,
    )


def split_group(size: int, stride: int, domain: int) -> tuple[int, int]:
    """How a group of ``size`` ranks spaced ``stride`` apart falls on scale-up domains of ``domain``
    ranks: ``(ranks per domain, domains spanned)`` ([2]_: consecutive ranks share a domain).

    >>> split_group(8, 1, 8), split_group(64, 8, 72), split_group(32, 8, 8)
    ((8, 1), (8, 8), (1, 32))
    """
    if size < 1 or stride < 1:
        raise InputError(f"group size and stride must be >= 1 (got {size}, {stride})")
    if stride >= domain:
        return 1, size
    inner = min(size, domain // stride)
    while size % inner:  # a group must split evenly; fall back to the largest divisor
        inner -= 1
    return inner, size // inner
