"""Tidy tables of the communication model for notebooks and reports (one row per design, size or
group): bill of materials, busbw sweeps, the scale-up domain boundary, and graph layouts to draw.

Every frame's ``attrs["units"]`` maps its columns to units.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.algorithms import collective
from hnplan.comm.placement import place_group
from hnplan.comm.topology import network_summary

_BW_UNITS = {"size_bytes": "B", "time_s": "s", "algbw_GBps": "GB/s", "busbw_GBps": "GB/s"}


def bom_table(systems, gpus: int, catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per system: the network joining ``gpus`` accelerators (:func:`network_summary`).

    Columns ``system, domains, scaleout_tiers, scaleup_switches, scaleout_switches, links,
    transceivers, cables, bisection_GBps, bisection_per_gpu_GBps, diameter_hops``.
    """
    cat = catalog or load_catalog()
    rows = []
    for ref in systems:
        s = cat.system(ref)
        d = network_summary(s, gpus, cat)
        rows.append({
            "system": s.id, "domains": d["domains"], "scaleout_tiers": d["tiers"]["scaleout"],
            "scaleup_switches": d["switches"]["scaleup"], "scaleout_switches": d["switches"]["scaleout"],
            "links": d["links"]["total"], "transceivers": d["transceivers"]["total"], "cables": d["cables"]["total"],
            "bisection_GBps": d["bisection_GBps"], "bisection_per_gpu_GBps": d["bisection_GBps"] / (gpus / 2),
            "diameter_hops": d["diameter_hops"],
        })
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"bisection_GBps": "GB/s", "bisection_per_gpu_GBps": "GB/s", "diameter_hops": "links"}
    return df


def busbw_sweep(systems, op: str, gpus: int, sizes, algorithm: str | None = None,
                catalog: Catalog | None = None) -> pd.DataFrame:
    """busbw against message size for each system, ``gpus`` consecutive ranks (nccl-tests style).

    Columns ``system, gpus, size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, level``.
    """
    cat = catalog or load_catalog()
    frames = []
    for ref in systems:
        s = cat.system(ref)
        r = collective(op, np.asarray(sizes, dtype=float), place_group(s, gpus, 1, gpus, cat), algorithm)
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
    cat = catalog or load_catalog()
    rows = []
    for ref in systems:
        s = cat.system(ref)
        for n in group_sizes:
            g = place_group(s, int(n), 1, int(n), cat)
            r = collective(op, size_bytes, g)
            rows.append({"system": s.id, "gpus": int(n), "domains": g.domains, "per_domain": g.per_domain,
                         "busbw_GBps": units.Bps_to_GBps(float(r.busbw_Bps[0])), "algorithm": str(r.algorithm[0]),
                         "level": g.level})
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
        lines.append(f"- **{sid}**: {a['busbw_GBps']:,.0f} GB/s busbw on {a['gpus']} GPUs in one domain, "
                     f"{b['busbw_GBps']:,.0f} GB/s on {b['gpus']} GPUs across {b['domains']} domains "
                     f"({b['busbw_GBps'] / a['busbw_GBps']:.0%} of it; {b['algorithm']}).")
    return "\n".join(lines) or "No group in this range crosses a scale-up domain boundary."


def graph_layout(g: nx.Graph) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Positions to draw a network graph by layer: accelerators at the bottom, switch tiers above.

    Returns
    -------
    (nodes, edges) : DataFrames
        nodes: ``name, kind, layer, x, y``; edges: ``x0, y0, x1, y1, net``. x in [0, 1] per layer.
    """
    by_layer: dict = {}
    for n, d in g.nodes(data=True):
        by_layer.setdefault(d["layer"], []).append(n)
    rows = []
    for layer, names in sorted(by_layer.items()):
        names = sorted(names, key=lambda n: (g.nodes[n].get("gpu", 0), str(n)))
        xs = np.linspace(0, 1, len(names) + 2)[1:-1]
        rows += [{"name": n, "kind": g.nodes[n]["kind"], "layer": layer, "x": x, "y": float(layer)}
                 for n, x in zip(names, xs)]
    nodes = pd.DataFrame(rows)
    pos = nodes.set_index("name")[["x", "y"]]
    edges = pd.DataFrame([{"x0": pos.at[a, "x"], "y0": pos.at[a, "y"], "x1": pos.at[b, "x"], "y1": pos.at[b, "y"],
                           "net": d.get("net", "")} for a, b, d in g.edges(data=True)])
    return nodes, edges
