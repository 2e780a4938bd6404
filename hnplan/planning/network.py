"""Network planner: the figures of ``hnplan topology`` and ``hnplan collective`` and the tidy tables of
the ``network`` notebook (one row per design, size or group): bill of materials, busbw sweeps, the
scale-up domain boundary, and graph layouts to draw.

Everything here resolves ids through the catalog (:meth:`hnplan.catalog.loader.Catalog.design`) and
composes the communication cost model (:mod:`hnplan.comm`); the cost model itself never sees a catalog.
Every frame's ``attrs["units"]`` maps its columns to units.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.algorithms import ALGORITHMS, CollectiveResult, collective
from hnplan.comm.collectives import OPS
from hnplan.comm.placement import place_group
from hnplan.comm.topology import check_fabric_gpus, scaleout_bom, scaleup_bom, whole_units
from hnplan.errors import InputError

if TYPE_CHECKING:
    import networkx as nx
    import pandas as pd

# pandas and networkx are imported by the functions that build frames and graphs: `hnplan topology` and
# `hnplan collective` need neither (networkx alone costs about 0.2 s of start-up)

__all__ = [
    "ALGORITHMS",
    "OPS",
    "bom_table",
    "boundary_summary",
    "busbw_sweep",
    "collective_on",
    "domain_boundary",
    "graph_layout",
    "network_graph",
    "network_summary",
    "parse_sweep",
]


def _design(system, catalog: Catalog | None) -> Design:
    return system if isinstance(system, Design) else (catalog or load_catalog()).design(system)


def network_summary(system, gpus: int, catalog: Catalog | None = None) -> dict:
    """The figures of ``hnplan topology``: tiers, switches, links, transceivers, cables, bisection and
    diameter of the whole network (scale-up domains + scale-out fat-tree) joining ``gpus``.

    The network is built for whole purchasable units (``unit_gpus``: a server, an NVL72 rack, a
    supernode), the count ``hnplan tco`` buys (:func:`hnplan.comm.topology.whole_units`): 100 GPUs of
    GB200 NVL72 are wired as two full racks, 144 GPUs.

    The job's bisection (first half of the ranks against the second) is the scale-out bisection of
    its NICs (``gpus/2 x NIC rate per GPU``, divided by the leaf oversubscription when more than one
    leaf is used, capped by the fabric's own bisection), plus the scale-up bisection when the job fits
    in one domain (a cut between whole domains crosses no scale-up link).
    The diameter is the longest GPU-to-GPU path in links.

    Parameters
    ----------
    system : id, path, System or Design
    gpus : int
        Accelerators joined.

    Returns
    -------
    dict
        ``gpus`` (asked), ``gpus_built`` (whole units), ``unit_gpus``, ``tiers`` (dict per network), ``switches``, ``links``, ``transceivers``, ``cables`` (dicts with
        ``scaleup``, ``scaleout``, ``total``; a scale-up link is a cable only where the domain spans more
        than one node: an HGX baseboard's GPU-NVSwitch links are board traces, NVL72's spine is copper cable), ``bisection_GBps``, ``diameter_hops``, ``domains``, ``hosts_supported`` (nodes the built
        scale-out tiers hold), ``bom`` (both BOMs).
    """
    design = _design(system, catalog)
    system = design.system
    wanted, gpus = gpus, whole_units(design, gpus)
    up = scaleup_bom(design, gpus)
    out = scaleout_bom(design, gpus)
    one_domain = gpus <= system.scaleup_domain_gpus
    nic_Bps = units.gbps_to_Bps(system.nics_per_node * system.nic_gbps) / system.node_gpus
    bis = min(gpus / 2 * nic_Bps / (out.oversubscription if out.tiers > 1 else 1.0), out.bisection_Bps)
    if one_domain:
        bis += up.bisection_Bps
    diameter = up.diameter_links if one_domain else max(up.diameter_links, out.diameter_links)
    # NVLink/xGMI inside a domain is copper; a two-level clos (CloudMatrix UB) runs its L1-L2 half
    # of the links over optics (CloudMatrix384 paper Sec 3)
    optical_up = up.links // 2 if system.scaleup_topology == "clos" else 0
    # a domain on one baseboard (HGX: GPUs to NVSwitch chips) is wired in the board's traces, not cables;
    # a domain across trays or racks (NVL72's copper spine, CloudMatrix's UB links) is cabled
    cabled_up = 0 if system.scaleup_domain_gpus <= system.node_gpus else up.links
    return {
        "gpus": wanted,
        "gpus_built": gpus,
        "unit_gpus": system.unit_gpus,
        "tiers": {
            "scaleup": 2 if system.scaleup_topology == "clos" else (1 if up.switches else 0),
            "scaleout": out.tiers,
        },
        "switches": {
            "scaleup": up.switches,
            "scaleout": out.switches,
            "total": up.switches + out.switches,
            "scaleout_per_tier": list(out.switches_per_tier),
        },
        "links": {"scaleup": up.links, "scaleout": out.links, "total": up.links + out.links},
        "transceivers": {
            "scaleup": 2 * optical_up,
            "scaleout": out.transceivers,
            "total": 2 * optical_up + out.transceivers,
        },
        "cables": {"scaleup": cabled_up, "scaleout": out.cables, "total": cabled_up + out.cables},
        "bisection_GBps": units.Bps_to_GBps(bis),
        "diameter_hops": diameter,
        "domains": up.domains,
        "hosts_supported": out.max_endpoints // max(1, out.endpoints // math.ceil(gpus / system.node_gpus)),
        "bom": {"scaleup": up.as_dict(), "scaleout": out.as_dict()},
    }


# The largest MAX of a sweep [bytes]: a collective's buffers live in each GPU's memory, and the
# catalog's largest holds 288 GB (B300), so 1 TiB bounds any message a collective can move; nccl-tests'
# own default sweeps stop far below (-e 8G in its README's examples).
MAX_SWEEP_BYTES = units.TiB


def parse_sweep(text: str) -> np.ndarray:
    """Sizes of a sweep ``MIN:MAX`` doubling from MIN to MAX, as nccl-tests' ``-b MIN -e MAX -f 2``
    [bytes].

    Raises
    ------
    InputError
        For a malformed sweep, MIN > MAX or MAX above :data:`MAX_SWEEP_BYTES` (1 TiB).

    >>> parse_sweep("8B:64B").tolist()
    [8.0, 16.0, 32.0, 64.0]
    """
    if text.count(":") != 1:
        raise InputError(f"--sweep {text!r}: expected MIN:MAX such as 8B:8GiB")
    try:
        lo, hi = (units.parse_size(t) for t in text.split(":"))
    except ValueError as exc:
        raise InputError(f"--sweep expects MIN:MAX such as 8B:8GiB ({exc})") from None
    if lo < 1 or hi < lo:
        raise InputError(f"--sweep {text!r}: need 1 <= MIN <= MAX")
    if hi > MAX_SWEEP_BYTES:
        raise InputError(
            f"--sweep {text!r}: MAX {hi:.3g} bytes exceeds 1 TiB (a collective's buffers live in one GPU's "
            "memory, 288 GB at most in the catalog); write MAX as 1TiB or less"
        )
    n = int(np.floor(np.log2(hi / lo))) + 1
    return lo * 2.0 ** np.arange(n)


def collective_on(
    system, op: str, gpus: int, sizes, algorithm: str | None = None, catalog: Catalog | None = None
) -> tuple[Design, CollectiveResult]:
    """The ``hnplan collective`` answer: ``op`` on ``gpus`` consecutive ranks of a system, for each
    message size (nccl-tests' ``-b/-e/-f`` sweep) [bytes].

    Parameters
    ----------
    system : id, path, System or Design
    op : str
        One of :data:`OPS`.
    gpus : int
        Ranks in the group.
    sizes : array of float [bytes]
    algorithm : str, optional
        Force one of :data:`ALGORITHMS` (default: the fastest per size).

    Returns
    -------
    (Design, CollectiveResult)

    Raises
    ------
    InputError
        For an unknown op or algorithm, or a bad group size (more GPUs than one scale-out fabric joins).
    CatalogError
        For an unknown system.
    """
    design = _design(system, catalog)
    check_fabric_gpus(design, gpus, "gpus")  # the count and the most one fabric joins, before any placement
    group = place_group(design, gpus, 1, gpus)
    return design, collective(op, np.asarray(sizes, dtype=float), group, algorithm)


def network_graph(system, gpus: int, catalog: Catalog | None = None) -> nx.Graph:
    """The networkx graph of ``gpus`` accelerators of a system (:func:`hnplan.comm.graphs.system_graph`).

    Raises
    ------
    InputError
        Beyond :data:`hnplan.comm.graphs.MAX_GRAPH_GPUS` accelerators.
    """
    from hnplan.comm.graphs import system_graph

    return system_graph(_design(system, catalog), gpus)


_BW_UNITS = {"size_bytes": "B", "time_s": "s", "algbw_GBps": "GB/s", "busbw_GBps": "GB/s"}


def bom_table(systems, gpus: int, catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per system: the network joining ``gpus`` accelerators (:func:`network_summary`).

    Columns ``system, domains, scaleout_tiers, scaleup_switches, scaleout_switches, links,
    transceivers, cables, bisection_GBps, bisection_per_gpu_GBps, diameter_hops``.
    """
    import pandas as pd

    cat = catalog or load_catalog()
    rows = []
    for ref in systems:
        des = cat.design(ref)
        s = des.system
        d = network_summary(des, gpus)
        rows.append(
            {
                "system": s.id,
                "domains": d["domains"],
                "scaleout_tiers": d["tiers"]["scaleout"],
                "scaleup_switches": d["switches"]["scaleup"],
                "scaleout_switches": d["switches"]["scaleout"],
                "links": d["links"]["total"],
                "transceivers": d["transceivers"]["total"],
                "cables": d["cables"]["total"],
                "bisection_GBps": d["bisection_GBps"],
                "bisection_per_gpu_GBps": d["bisection_GBps"] / (d["gpus_built"] / 2),
                "diameter_hops": d["diameter_hops"],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"bisection_GBps": "GB/s", "bisection_per_gpu_GBps": "GB/s", "diameter_hops": "links"}
    return df


def busbw_sweep(
    systems, op: str, gpus: int, sizes, algorithm: str | None = None, catalog: Catalog | None = None
) -> pd.DataFrame:
    """busbw against message size for each system, ``gpus`` consecutive ranks (nccl-tests style).

    Columns ``system, gpus, size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, level``.
    """
    import pandas as pd

    cat = catalog or load_catalog()
    frames = []
    for ref in systems:
        d = cat.design(ref)
        s = d.system
        r = collective(op, np.asarray(sizes, dtype=float), place_group(d, gpus, 1, gpus), algorithm)
        f = pd.DataFrame(r.rows())
        f.insert(0, "gpus", gpus)
        f.insert(0, "system", s.id)
        f["level"] = r.level
        frames.append(f)
    df = pd.concat(frames, ignore_index=True)
    df.attrs["units"] = dict(_BW_UNITS)
    return df


def domain_boundary(systems, op: str, size_bytes: float, group_sizes, catalog: Catalog | None = None) -> pd.DataFrame:
    """busbw of one message size against the group size: where a group leaves its scale-up domain.

    Columns ``system, gpus, domains, per_domain, busbw_GBps, algorithm, level``.
    """
    import pandas as pd

    cat = catalog or load_catalog()
    rows = []
    for ref in systems:
        d = cat.design(ref)
        s = d.system
        for n in group_sizes:
            g = place_group(d, int(n), 1, int(n))
            r = collective(op, size_bytes, g)
            rows.append(
                {
                    "system": s.id,
                    "gpus": int(n),
                    "domains": g.domains,
                    "per_domain": g.per_domain,
                    "busbw_GBps": units.Bps_to_GBps(float(r.busbw_Bps[0])),
                    "algorithm": str(r.algorithm[0]),
                    "level": g.level,
                }
            )
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"busbw_GBps": "GB/s"}
    return df


def boundary_summary(df: pd.DataFrame) -> str:
    """Markdown sentences from :func:`domain_boundary`: each design's busbw inside its largest
    single-domain group and just past it."""
    lines = []
    for sid, f in df.groupby("system", sort=False):
        inside = f[f["domains"] == 1]
        outside = f[f["domains"] > 1]
        if inside.empty or outside.empty:
            continue
        a, b = inside.iloc[-1], outside.iloc[0]
        lines.append(
            f"- **{sid}**: {a['busbw_GBps']:,.0f} GB/s busbw on {a['gpus']} GPUs in one domain, "
            f"{b['busbw_GBps']:,.0f} GB/s on {b['gpus']} GPUs across {b['domains']} domains "
            f"({b['busbw_GBps'] / a['busbw_GBps']:.0%} of it; {b['algorithm']})."
        )
    return "\n".join(lines) or "No group in this range crosses a scale-up domain boundary."


def graph_layout(g: nx.Graph) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Positions to draw a network graph by layer: accelerators at the bottom, switch tiers above.

    Returns
    -------
    (nodes, edges) : DataFrames
        nodes: ``name, kind, layer, x, y``; edges: ``x0, y0, x1, y1, net``. x in [0, 1] per layer.
    """
    import pandas as pd

    by_layer: dict = {}
    for n, d in g.nodes(data=True):
        by_layer.setdefault(d["layer"], []).append(n)
    rows = []
    for layer, names in sorted(by_layer.items()):
        names = sorted(names, key=lambda n: (g.nodes[n].get("gpu", 0), str(n)))
        xs = np.linspace(0, 1, len(names) + 2)[1:-1]
        rows += [
            {"name": n, "kind": g.nodes[n]["kind"], "layer": layer, "x": x, "y": float(layer)}
            for n, x in zip(names, xs)
        ]
    nodes = pd.DataFrame(rows)
    pos = nodes.set_index("name")[["x", "y"]]
    edges = pd.DataFrame(
        [
            {
                "x0": pos.at[a, "x"],
                "y0": pos.at[a, "y"],
                "x1": pos.at[b, "x"],
                "y1": pos.at[b, "y"],
                "net": d.get("net", ""),
            }
            for a, b, d in g.edges(data=True)
        ]
    )
    return nodes, edges
