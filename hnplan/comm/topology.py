"""Links, group placement and fat-tree sizing of a system (first-order, closed forms).

References
----------
.. [1] Al-Fares, Loukissas, Vahdat, "A Scalable, Commodity Data Center Network Architecture",
   SIGCOMM 2008 (k-port fat-tree: k^3/4 hosts, 5k^2/4 switches for three tiers).
.. [2] Narayanan et al., SC21, Sec. 3 (Megatron-LM rank order: tensor-parallel ranks innermost).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import System
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
    """

    bw_Bps: float
    alpha_s: float
    line_rate_Bps: float


@dataclass(frozen=True)
class SystemLinks:
    """The scale-up and scale-out tiers of a system, per rank."""

    scaleup: LinkParams
    scaleout: LinkParams
    domain_gpus: int
    node_gpus: int


def fat_tree_tiers(endpoints: int, radix: int) -> int:
    """Tiers of a non-blocking fat-tree of ``radix``-port switches for ``endpoints`` ports:
    1 up to k, 2 up to k^2/2, 3 up to k^3/4 ([1]_).

    Raises
    ------
    InputError
        Beyond k^3/4 endpoints (a three-tier fat-tree is the largest modelled).
    """
    k = radix
    if endpoints <= k:
        return 1
    if endpoints <= k * k // 2:
        return 2
    if endpoints <= k**3 // 4:
        return 3
    raise InputError(f"{endpoints} endpoints exceed a 3-tier fat-tree of {k}-port switches ({k**3 // 4})")


def system_links(system: System, catalog: Catalog | None = None) -> SystemLinks:
    """Per-rank alpha-beta parameters of a system's scale-up and scale-out tiers.

    Scale-up bandwidth is the accelerator's (or the system's override) per-direction figure times the
    fabric's ``bw_efficiency``; the step latency is the fabric's software overhead plus two links and
    one switch hop (switched domains). Scale-out bandwidth per rank is the node's NIC line rate shared
    by its accelerators, ``nics_per_node x nic_gbps / node_gpus``, times ``bw_efficiency``; its latency
    is the overhead plus the links and switch hops of the fat-tree's longest path.
    """
    cat = catalog or load_catalog()
    acc = cat.accelerator(system.accelerator)
    up = cat.interconnect(system.scaleup_fabric)
    out = cat.interconnect(system.scaleout_fabric)
    up_line = units.GBps_to_Bps(system.scaleup_bw_GBps_per_dir or acc.scaleup_bw_GBps_per_dir)
    up_hops = 0 if system.scaleup_topology == "full-mesh" else (2 if system.scaleup_topology == "clos" else 1)
    up_alpha = units.us_to_s(up.software_overhead_us) + units.ns_to_s(2 * up.link_latency_ns + up_hops * up.switch_latency_ns)
    out_line = units.gbps_to_Bps(system.nics_per_node * system.nic_gbps) / system.node_gpus
    # longest path of a 3-tier fat-tree: leaf-agg-core-agg-leaf = 5 switches, 6 links
    out_alpha = units.us_to_s(out.software_overhead_us) + units.ns_to_s(6 * out.link_latency_ns + 5 * out.switch_latency_ns)
    return SystemLinks(
        scaleup=LinkParams(up_line * up.bw_efficiency, up_alpha, up_line),
        scaleout=LinkParams(out_line * out.bw_efficiency, out_alpha, out_line),
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


@dataclass(frozen=True)
class NetworkBOM:
    """Scale-out network bill of materials (first-order: every switch-to-switch and NIC link is optical).

    All counts are numbers of items.
    """

    endpoints: int
    tiers: int
    switches: int
    links: int
    transceivers: int
    switch_model: str

    def as_dict(self) -> dict:
        return asdict(self)


def scaleout_bom(system: System, gpus: int, catalog: Catalog | None = None) -> NetworkBOM:
    """Switches, links and transceivers of the scale-out fat-tree for ``gpus`` accelerators.

    Non-blocking closed forms ([1]_) for E NIC ports and k-port switches: 1 tier: 1 switch; 2 tiers:
    ``2E/k`` leaves + ``E/k`` spines; 3 tiers: ``2E/k`` leaves + ``2E/k`` aggregation + ``E/k`` cores.
    A leaf oversubscription o keeps ``k o/(1+o)`` ports down and ``k/(1+o)`` up, shrinking the upper
    tiers by o. Links: E host links plus the uplinks of each tier; two transceivers per link.
    """
    cat = catalog or load_catalog()
    sw = cat.switch(system.scaleout_switch)
    nodes = math.ceil(gpus / system.node_gpus)
    # a NIC of twice the switch port rate uses two logical ports (e.g. 800G NIC on 400G ports)
    ports_per_nic = max(1, math.ceil(system.nic_gbps / sw.port_gbps))
    e = nodes * system.nics_per_node * ports_per_nic
    k = sw.ports
    o = system.scaleout_oversubscription
    tiers = fat_tree_tiers(e, k)
    if tiers == 1:
        return NetworkBOM(e, 1, 1, e, 2 * e, sw.id)
    down = k * o / (1 + o)
    leaves = math.ceil(e / down)
    up_links = math.ceil(e / o)
    if tiers == 2:
        spines = math.ceil(up_links / k)
        switches, links = leaves + spines, e + up_links
    else:
        aggs = math.ceil(up_links / (k / 2))
        cores = math.ceil(up_links / k)
        switches, links = leaves + aggs + cores, e + 2 * up_links
    return NetworkBOM(e, tiers, switches, links, 2 * links, sw.id)
