"""Network sizing of a system: k-port fat-tree tiers and switch counts, the scale-out and scale-up bills of
materials for a GPU count, whole purchasable units, and the largest fabric a design's switches build. Closed
forms, memoised on the design; :mod:`hnplan.comm.topology` builds the links on them and hands these names on.

References
----------
.. [1] Al-Fares, Loukissas, Vahdat, "A Scalable, Commodity Data Center Network Architecture",
   SIGCOMM 2008, Sec. 3 (k-port fat-tree: k^3/4 hosts, 5k^2/4 switches for three tiers, full
   bisection bandwidth).
.. [3] NVIDIA DGX SuperPOD reference architecture (rail-optimised fabric: NIC k of every node on the
   leaf switches of rail k).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.schemas import System
from hnplan.errors import InputError


def fat_tree_max_endpoints(radix: int) -> int:
    """Endpoints of the largest modelled fat-tree, three tiers of ``radix``-port switches: ``k^3/4`` ([1]_).

    >>> fat_tree_max_endpoints(64)
    65536
    """
    return radix**3 // 4


def fat_tree_tiers(endpoints: int, radix: int) -> int:
    """Tiers of a non-blocking fat-tree of ``radix``-port switches for ``endpoints`` ports:
    1 up to k, 2 up to k^2/2, 3 up to k^3/4 ([1]_).

    Raises
    ------
    InputError
        Beyond k^3/4 endpoints (a three-tier fat-tree is the largest modelled).

    >>> fat_tree_tiers(64, 64), fat_tree_tiers(2048, 64), fat_tree_tiers(65536, 64)
    (1, 2, 3)
    """
    k = radix
    if endpoints <= k:
        return 1
    if endpoints <= k * k // 2:
        return 2
    if endpoints <= fat_tree_max_endpoints(k):
        return 3
    raise InputError(
        f"{endpoints} endpoints exceed a 3-tier fat-tree of {k}-port switches ({fat_tree_max_endpoints(k)})"
    )


def scaleup_hops(system: System, gpus: int | None = None) -> int:
    """Links on the longest path between two accelerators of one scale-up domain.

    switched: GPU-switch-GPU = 2; full-mesh: 1; clos (two switch levels, CloudMatrix UB): 2 inside a
    node, 4 across nodes; torus: the sum of floor(side/2) over the sides of a square (2-D) or cubic
    (3-D) torus of ``gpus`` (default the domain).
    """
    n = min(gpus or system.scaleup_domain_gpus, system.scaleup_domain_gpus)
    topo = system.scaleup_topology
    if n <= 1:
        return 0
    if topo == "full-mesh":
        return 1
    if topo == "switched":
        return 2
    if topo == "clos":
        return 2 if n <= system.node_gpus else 4
    dims = 2 if topo == "torus-2d" else 3
    side = math.ceil(n ** (1 / dims) - 1e-9)
    return dims * (side // 2)


@dataclass(frozen=True)
class NetworkBOM:
    """Scale-out network bill of materials and its figures of merit (first-order: every NIC and
    switch-to-switch link is one optical cable with a transceiver at each end).

    Attributes
    ----------
    endpoints : int
        Switch-facing NIC ports (a NIC of twice the port rate takes two ports).
    tiers : int
        Switch tiers (1 = a single switch).
    switches : int
        All switches; ``switches_per_tier`` splits them (leaf, spine) or (leaf, aggregation, core).
    links, cables, transceivers : int
        NIC-to-leaf plus switch-to-switch links; one cable per link; two transceivers per link.
    switch_model : str
        Switch id.
    switches_per_tier : tuple of int
    bisection_Bps : float
        Bandwidth across the worst even cut of the endpoints, per direction [bytes/s]
        (``E/2 x port rate``, divided by the leaf oversubscription when more than one leaf is used).
    diameter_links : int
        Links on the longest NIC-to-NIC path (``2 x tiers``).
    oversubscription : float
        Leaf downlink:uplink ratio.
    rail_optimized : bool
    max_endpoints : int
        Endpoints the built tiers can hold at this oversubscription (:func:`fat_tree_counts`).
    """

    endpoints: int
    tiers: int
    switches: int
    links: int
    transceivers: int
    switch_model: str
    switches_per_tier: tuple = ()
    cables: int = 0
    bisection_Bps: float = 0.0
    diameter_links: int = 0
    oversubscription: float = 1.0
    rail_optimized: bool = False
    max_endpoints: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def fat_tree_counts(endpoints: int, radix: int, oversubscription: float = 1.0, rails: int = 1) -> dict:
    """Closed-form switch and link counts of a two- or three-tier fat-tree ([1]_).

    For E endpoints and k-port switches, a leaf with oversubscription o keeps ``k o / (1 + o)`` ports
    down and ``k / (1 + o)`` up (``k/2`` each when non-blocking). Two tiers: ``ceil(E / down)``
    leaves and ``ceil(U / k)`` spines, with ``U = ceil(E / o)`` uplinks. Three tiers: the same
    leaves, ``ceil(U / (k/2))`` aggregation and ``ceil(U / k)`` core switches. A rail-optimised
    fabric ([3]_) puts NIC r of every node on the leaves of rail r: ``rails x ceil(E / rails / down)``
    leaves. At E = k^3/4, o = 1 this gives k^2/2 + k^2/2 + k^2/4 = 5k^2/4 switches.

    The built tiers hold at most ``k`` (one tier), ``k x down`` (two: a k-port spine reaches k
    leaves) or ``k^2/2 x down`` endpoints (three: k pods of k/2 leaves): k^2/2 and k^3/4 when
    non-blocking.

    Returns
    -------
    dict
        ``tiers, per_tier (tuple), switches, links, uplinks, max_endpoints``.

    >>> c = fat_tree_counts(4**3 // 4, 4)
    >>> c["tiers"], c["per_tier"], c["switches"]
    (3, (8, 8, 4), 20)
    """
    if endpoints < 1 or radix < 2:
        raise InputError(f"fat-tree needs >= 1 endpoint and radix >= 2 (got {endpoints}, {radix})")
    if oversubscription < 1:
        raise InputError(f"oversubscription must be >= 1, got {oversubscription}")
    e, k, o = endpoints, radix, oversubscription
    tiers = fat_tree_tiers(e, k)
    if tiers == 1:
        return dict(tiers=1, per_tier=(1,), switches=1, links=e, uplinks=0, max_endpoints=k)
    down = max(1, math.floor(k * o / (1 + o)))
    if rails > 1 and e % rails == 0:
        leaves = rails * math.ceil(e / rails / down)
    else:
        leaves = math.ceil(e / down)
    uplinks = math.ceil(e / o)
    if tiers == 2:
        spines = math.ceil(uplinks / k)
        per_tier = (leaves, spines)
        links = e + uplinks
    else:
        per_tier = (leaves, math.ceil(uplinks / (k / 2)), math.ceil(uplinks / k))
        links = e + 2 * uplinks
    cap = k * down if tiers == 2 else k * k // 2 * down
    return dict(tiers=tiers, per_tier=per_tier, switches=sum(per_tier), links=links, uplinks=uplinks, max_endpoints=cap)


def scaleout_bom(design: Design, gpus: int) -> NetworkBOM:
    """Switches, links, cables, transceivers, bisection and diameter of the scale-out fat-tree that
    joins ``gpus`` accelerators (closed forms of :func:`fat_tree_counts`).

    Raises
    ------
    InputError
        For ``gpus < 1`` or a network beyond three tiers.

    Memoised on the design per ``gpus`` (:meth:`hnplan.catalog.design.Design.memo`).
    """
    if gpus < 1:
        raise InputError(f"gpus must be >= 1, got {gpus}")
    return design.memo(("scaleout_bom", gpus), lambda: _scaleout_bom(design, gpus))


def _ports_per_node(design: Design) -> int:
    """Scale-out switch ports one node uses: a NIC of twice the switch port rate takes two logical
    ports (e.g. 800G NIC on 400G ports)."""
    system, sw = design.system, design.scaleout_switch
    return system.nics_per_node * max(1, math.ceil(system.nic_gbps / sw.port_gbps))


def whole_units(design: Design, gpus: int) -> int:
    """Accelerators in the whole purchasable units (``unit_gpus``: a server, a rack, a supernode)
    that hold ``gpus``: the count ``hnplan tco`` buys and ``hnplan topology`` wires.

    >>> from hnplan.catalog import load_catalog
    >>> whole_units(load_catalog().design("gb200-nvl72"), 100)  # two NVL72 racks
    144
    """
    u = design.system.unit_gpus
    return math.ceil(gpus / u) * u


def max_scaleout_gpus(design: Design) -> int:
    """The most accelerators, in whole purchasable units, that the system's scale-out fabric joins:
    its nodes' ports fill at most a three-tier fat-tree of ``k``-port switches, ``k^3/4`` ports ([1]_),
    the largest modelled (:func:`fat_tree_tiers`).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> max_scaleout_gpus(cat.design("hgx-h100-ib-ndr"))  # 64-port NDR: 65,536 ports / 8 per node x 8 GPUs
    65536
    >>> max_scaleout_gpus(cat.design("gb200-nvl72"))  # 16,384 trays of 4 GPUs, down to whole 72-GPU racks
    65520
    """
    system, k = design.system, design.scaleout_switch.ports
    gpus = fat_tree_max_endpoints(k) // _ports_per_node(design) * system.node_gpus
    return gpus // system.unit_gpus * system.unit_gpus


def check_fabric_gpus(design: Design, gpus: int, name: str = "gpus") -> None:
    """Refuse a GPU count larger than one scale-out fabric of the design joins (:func:`max_scaleout_gpus`),
    naming the count as ``name`` (the flag that gave it: ``--gpus``) and the limit, before any bill of
    materials is drawn.

    Raises
    ------
    InputError
        One line naming ``name``, its value, the system and the limit.
    """
    most = max_scaleout_gpus(design)
    if gpus > most:
        sw = design.scaleout_switch
        raise InputError(
            f"{name} {gpus} exceeds the {most:,} GPUs of {design.system.id} one scale-out fabric joins (a 3-tier "
            f"fat-tree of {sw.ports}-port {sw.id} switches); give at most {most:,}"
        )


def _scaleout_bom(design: Design, gpus: int) -> NetworkBOM:
    system, sw = design.system, design.scaleout_switch
    nodes = math.ceil(gpus / system.node_gpus)
    e = nodes * _ports_per_node(design)
    if e > fat_tree_max_endpoints(sw.ports):
        raise InputError(
            f"{gpus:,} GPUs of {system.id} need {e:,} scale-out ports, more than a 3-tier fat-tree of "
            f"{sw.ports}-port {sw.id} switches holds ({fat_tree_max_endpoints(sw.ports):,}); the most it joins is "
            f"{max_scaleout_gpus(design):,} GPUs"
        )
    o = system.scaleout_oversubscription
    rail = system.scaleout_topology == "rail-optimized-fat-tree"
    c = fat_tree_counts(e, sw.ports, o, rails=_ports_per_node(design) if rail else 1)
    port_Bps = units.gbps_to_Bps(sw.port_gbps)
    bisection = e / 2 * port_Bps / (o if c["tiers"] > 1 else 1.0)
    return NetworkBOM(
        endpoints=e,
        tiers=c["tiers"],
        switches=c["switches"],
        links=c["links"],
        transceivers=2 * c["links"],
        switch_model=sw.id,
        switches_per_tier=c["per_tier"],
        cables=c["links"],
        bisection_Bps=bisection,
        diameter_links=2 * c["tiers"],
        oversubscription=o,
        rail_optimized=rail,
        max_endpoints=c["max_endpoints"],
    )


@dataclass(frozen=True)
class ScaleupBOM:
    """The scale-up domains that hold ``gpus`` accelerators.

    Attributes
    ----------
    domains : int
    switches : int
        Scale-up switch chips (``scaleup_switches_per_domain`` per domain).
    links : int
        Accelerator-to-switch links (switched, clos first level) or accelerator-to-accelerator links
        (full mesh, torus).
    bisection_Bps : float
        Per-direction bandwidth across the worst even cut of one domain's accelerators [bytes/s].
    diameter_links : int
    switch_model : str or None
    """

    domains: int
    switches: int
    links: int
    bisection_Bps: float
    diameter_links: int
    switch_model: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def scaleup_bom(design: Design, gpus: int) -> ScaleupBOM:
    """Scale-up switches, links, bisection and diameter of the domains holding ``gpus`` accelerators.

    Links per accelerator: a switched or clos domain (twice: L1 down and up) wires each accelerator's line rate in ports of
    ``scaleup_switch.port_gbps`` (18 NVLink ports on H100 and B200; a system without a switch entry
    counts one GPU-to-chip connection per chip, e.g. 6 on DGX A100); a full mesh of n has n(n-1)/2
    links; a torus 2 (2-D) or 3 (3-D) links per accelerator. Bisection of one domain of n:
    switched/clos ``n/2 x B``; full mesh ``(n/2)^2 x B/(n-1)``; torus ``2 x (n / side) x B / (2 dims)``
    (two wrap-around cuts of a ring per row), with B the per-direction line rate per accelerator.

    Memoised on the design per ``gpus`` (:meth:`hnplan.catalog.design.Design.memo`).
    """
    return design.memo(("scaleup_bom", gpus), lambda: _scaleup_bom(design, gpus))


def _scaleup_bom(design: Design, gpus: int) -> ScaleupBOM:
    system, acc = design.system, design.accelerator
    n = min(gpus, system.scaleup_domain_gpus)
    domains = math.ceil(gpus / system.scaleup_domain_gpus)
    b = units.GBps_to_Bps(system.scaleup_bw_GBps_per_dir or acc.scaleup_bw_GBps_per_dir)
    topo = system.scaleup_topology
    switches = int(math.ceil(system.scaleup_switches_per_domain or 0)) * domains
    if topo in ("switched", "clos"):
        if design.scaleup_switch is not None:
            port = units.gbps_to_Bps(design.scaleup_switch.port_gbps)
            per_gpu = max(1, round(b / port))
        else:
            per_gpu = int(system.scaleup_switches_per_domain or 1)
        links = per_gpu * gpus * (2 if topo == "clos" else 1)  # clos: as many L1 uplinks as downlinks
        bis = n / 2 * b
    elif topo == "full-mesh":
        links = domains * n * (n - 1) // 2
        bis = (n // 2) * (n - n // 2) * b / max(n - 1, 1)
    else:
        dims = 2 if topo == "torus-2d" else 3
        side = max(1, math.ceil(n ** (1 / dims) - 1e-9))
        links = dims * gpus
        bis = 2 * (n / side) * b / (2 * dims)
    return ScaleupBOM(domains, switches, links, bis if n > 1 else 0.0, scaleup_hops(system, n), system.scaleup_switch)
