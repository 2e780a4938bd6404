"""networkx graphs of scale-up domains and scale-out fat-trees: for drawing, hop counts between two
accelerators, and cross-checks of the closed forms in :mod:`hnplan.comm.topology`.

Nodes carry ``kind`` (``gpu``, ``scaleup-switch``, ``leaf``, ``spine``, ``aggregation``, ``core``)
and ``layer`` (0 for accelerators, growing upwards); accelerators carry ``gpu`` (global index),
``node`` and ``domain``. Edges carry ``capacity_Bps`` (per-direction line rate of all the parallel
links they stand for), ``links`` (how many) and ``net`` (``scaleup`` or ``scaleout``).

Graphs grow with the system; build them for the small instances you draw or check (a few thousand
accelerators at most). Planners use the closed forms.

References
----------
.. [1] Al-Fares, Loukissas, Vahdat, SIGCOMM 2008 (fat-tree).
.. [2] Ford and Fulkerson (max-flow min-cut), as implemented by ``networkx.minimum_cut``.
"""

from __future__ import annotations

import math

import networkx as nx

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.comm.topology import fat_tree_counts
from hnplan.errors import InputError

MAX_GRAPH_GPUS = 4096
"""Largest explicit networkx graph built [GPUs] (a size limit, not physics: beyond it the graph costs
seconds and memory, and the closed forms of :mod:`hnplan.comm.topology` answer the same questions)."""


def _add_link(g: nx.Graph, a, b, cap_Bps: float, net: str, n: int = 1):
    if g.has_edge(a, b):
        g[a][b]["capacity_Bps"] += cap_Bps * n
        g[a][b]["links"] += n
    else:
        g.add_edge(a, b, capacity_Bps=cap_Bps * n, links=n, net=net)


def gpu_nodes(g: nx.Graph) -> list:
    """The accelerator nodes of a graph, in global rank order."""
    return sorted((n for n, d in g.nodes(data=True) if d["kind"] == "gpu"), key=lambda n: g.nodes[n]["gpu"])


def add_scaleup_domain(
    g: nx.Graph, gpus: list, topology: str, bw_Bps: float, switches: int = 1, node_gpus: int = 8, prefix: str = "d0"
) -> None:
    """Wire the accelerators ``gpus`` (existing nodes) into one scale-up domain.

    Parameters
    ----------
    topology : {"switched", "full-mesh", "torus-2d", "torus-3d", "clos"}
        switched: every accelerator has ``bw_Bps / switches`` to each of ``switches`` switch chips
        (NVSwitch); full-mesh: ``bw_Bps / (n-1)`` to every peer (xGMI); torus: ``bw_Bps / (2 dims)``
        to each neighbour of a square or cubic torus; clos: every accelerator to the ``switches``
        first-level chips of its node (one per plane), each first-level chip to its plane's
        second-level switch (CloudMatrix UB; one graph node stands for a plane's L2 chips).
    bw_Bps : float
        Per-direction line rate of one accelerator [bytes/s].
    """
    n = len(gpus)
    if n <= 1:
        return
    if topology == "switched":
        for s in range(switches):
            sw = f"{prefix}/nvs{s}"
            g.add_node(sw, kind="scaleup-switch", layer=1)
            for u in gpus:
                _add_link(g, u, sw, bw_Bps / switches, "scaleup")
    elif topology == "full-mesh":
        for i in range(n):
            for j in range(i + 1, n):
                _add_link(g, gpus[i], gpus[j], bw_Bps / (n - 1), "scaleup")
    elif topology in ("torus-2d", "torus-3d"):
        dims = 2 if topology == "torus-2d" else 3
        side = math.ceil(n ** (1 / dims) - 1e-9)
        if side**dims != n:
            raise InputError(f"a {topology} needs a square/cubic number of accelerators, got {n}")
        grid = nx.grid_graph(dim=[side] * dims, periodic=True)
        index = {c: gpus[i] for i, c in enumerate(sorted(grid.nodes))}
        for a, b in grid.edges:
            _add_link(g, index[a], index[b], bw_Bps / (2 * dims), "scaleup")
    elif topology == "clos":
        planes = max(1, switches)
        nodes = math.ceil(n / node_gpus)
        for p in range(planes):
            top = f"{prefix}/l2-{p}"
            g.add_node(top, kind="scaleup-switch", layer=2)
            for k in range(nodes):
                l1 = f"{prefix}/l1-{k}-{p}"
                g.add_node(l1, kind="scaleup-switch", layer=1)
                members = gpus[k * node_gpus : (k + 1) * node_gpus]
                for u in members:
                    _add_link(g, u, l1, bw_Bps / planes, "scaleup")
                _add_link(g, l1, top, bw_Bps / planes * len(members), "scaleup")
    else:
        raise InputError(
            f"unknown scale-up topology {topology!r}; allowed: switched, full-mesh, torus-2d, torus-3d, clos"
        )


def add_fat_tree(
    g: nx.Graph,
    hosts: list,
    radix: int,
    port_Bps: float,
    oversubscription: float = 1.0,
    rails: int = 1,
    prefix: str = "so",
) -> None:
    """Wire ``hosts`` (existing nodes, one NIC port each, in node-major order) into a fat-tree with the
    switch counts of :func:`hnplan.comm.topology.fat_tree_counts`.

    Leaves take ``down`` hosts each (rail-optimised: host i of every node goes to a leaf of rail
    ``i mod rails``); two tiers: every leaf spreads its ``up`` uplinks evenly over the spines; three
    tiers: pods of ``k/2`` leaves share ``k/2`` aggregation switches (Al-Fares [1]_), and aggregation
    switch j of every pod spreads its ``k/2`` uplinks over the cores of group j.
    """
    e, k, o = len(hosts), radix, oversubscription
    c = fat_tree_counts(e, k, o, rails)
    if c["tiers"] == 1:
        sw = f"{prefix}/leaf0"
        g.add_node(sw, kind="leaf", layer=3)
        for h in hosts:
            _add_link(g, h, sw, port_Bps, "scaleout")
        return
    down = max(1, math.floor(k * o / (1 + o)))
    n_leaves = c["per_tier"][0]
    leaf_of = []
    if rails > 1 and e % rails == 0:
        per_rail = n_leaves // rails
        for i in range(e):
            r, node = i % rails, i // rails
            leaf_of.append(r * per_rail + node // down)
    else:
        leaf_of = [i // down for i in range(e)]
    leaves = [f"{prefix}/leaf{i}" for i in range(n_leaves)]
    for name in leaves:
        g.add_node(name, kind="leaf", layer=3)
    for h, li in zip(hosts, leaf_of):
        _add_link(g, h, leaves[li], port_Bps, "scaleout")
    used = [leaf_of.count(i) for i in range(n_leaves)]
    if c["tiers"] == 2:
        spines = [f"{prefix}/spine{i}" for i in range(c["per_tier"][1])]
        for name in spines:
            g.add_node(name, kind="spine", layer=4)
        for li, name in enumerate(leaves):
            ups = math.ceil(used[li] / o) if used[li] else 0
            for j in range(ups):
                _add_link(g, name, spines[j % len(spines)], port_Bps, "scaleout")
        return
    half = k // 2
    n_aggs, n_cores = c["per_tier"][1], c["per_tier"][2]
    pods = math.ceil(n_leaves / half)
    per_pod = max(1, math.ceil(n_aggs / pods))
    group = max(1, math.ceil(n_cores / per_pod))
    aggs = [f"{prefix}/agg{i}" for i in range(n_aggs)]
    cores = [f"{prefix}/core{i}" for i in range(n_cores)]
    for name in aggs:
        g.add_node(name, kind="aggregation", layer=4)
    for name in cores:
        g.add_node(name, kind="core", layer=5)
    for li, name in enumerate(leaves):
        pod = li // half
        pod_aggs = aggs[pod * per_pod : (pod + 1) * per_pod] or aggs[-per_pod:]
        ups = math.ceil(used[li] / o) if used[li] else 0
        for j in range(ups):
            _add_link(g, name, pod_aggs[j % len(pod_aggs)], port_Bps, "scaleout")
    for ai, name in enumerate(aggs):
        j = ai % per_pod
        members = cores[j * group : (j + 1) * group] or cores[-group:]
        for t in range(half):
            _add_link(g, name, members[t % len(members)], port_Bps, "scaleout")


def system_graph(design: Design, gpus: int) -> nx.Graph:
    """The graph of ``gpus`` accelerators of a system: scale-up domains plus the scale-out fat-tree.

    Accelerator g is in node ``g // node_gpus`` and domain ``g // scaleup_domain_gpus``; NIC r of a
    node hangs off accelerator ``r x node_gpus / nics_per_node`` (its port is a ``nic_gbps`` link).

    Raises
    ------
    InputError
        Beyond :data:`MAX_GRAPH_GPUS` accelerators (use the closed forms).
    """
    if not 1 <= gpus <= MAX_GRAPH_GPUS:
        raise InputError(
            f"graphs are built for 1..{MAX_GRAPH_GPUS} accelerators (got {gpus}); "
            "use hnplan.comm.topology's closed forms for larger networks"
        )
    system, acc, sw = design.system, design.accelerator, design.scaleout_switch
    b_up = units.GBps_to_Bps(system.scaleup_bw_GBps_per_dir or acc.scaleup_bw_GBps_per_dir)
    g = nx.Graph(system=system.id)
    ids = [f"gpu{i}" for i in range(gpus)]
    for i, name in enumerate(ids):
        g.add_node(name, kind="gpu", layer=0, gpu=i, node=i // system.node_gpus, domain=i // system.scaleup_domain_gpus)
    dom = system.scaleup_domain_gpus
    n_switch = int(system.scaleup_switches_per_domain or 1)
    if system.scaleup_topology == "clos":
        n_switch = 7 if system.scaleup_switches_per_domain else 1  # UB planes (CloudMatrix384 Sec 3)
    for d in range(math.ceil(gpus / dom)):
        add_scaleup_domain(
            g, ids[d * dom : (d + 1) * dom], system.scaleup_topology, b_up, n_switch, system.node_gpus, prefix=f"d{d}"
        )
    ports_per_nic = max(1, math.ceil(system.nic_gbps / sw.port_gbps))
    hosts = []
    nodes = math.ceil(gpus / system.node_gpus)
    step = system.node_gpus / system.nics_per_node
    for nd in range(nodes):
        for r in range(system.nics_per_node):
            owner = ids[min(nd * system.node_gpus + int(r * step), gpus - 1)]
            for q in range(ports_per_nic):
                hosts.append(
                    owner
                    if system.nics_per_node == system.node_gpus and ports_per_nic == 1
                    else _nic(g, owner, nd, r, q)
                )
    rails = system.nics_per_node * ports_per_nic if system.scaleout_topology == "rail-optimized-fat-tree" else 1
    add_fat_tree(g, hosts, sw.ports, units.gbps_to_Bps(sw.port_gbps), system.scaleout_oversubscription, rails)
    return g


def _nic(g: nx.Graph, owner, node: int, rail: int, port: int):
    name = f"nic{node}-{rail}-{port}"
    g.add_node(name, kind="nic", layer=0.5)
    _add_link(g, owner, name, math.inf, "host")
    return name


def hop_count(g: nx.Graph, a: int, b: int) -> int:
    """Links on the shortest path between accelerators ``a`` and ``b`` (global indices)."""
    return nx.shortest_path_length(g, f"gpu{a}", f"gpu{b}")


def gpu_diameter(g: nx.Graph) -> int:
    """The longest shortest path between two accelerators of the graph [links]."""
    gs = gpu_nodes(g)
    best = 0
    for u in gs:
        dist = nx.single_source_shortest_path_length(g, u)
        best = max(best, max(dist[v] for v in gs))
    return best


def cut_bandwidth_Bps(g: nx.Graph, left: list | None = None) -> float:
    """Max-flow / min-cut bandwidth between two halves of the accelerators [bytes/s per direction].

    ``left`` defaults to the first half in rank order (the cut that separates whole domains, leaves
    and pods, the worst one for tree-shaped networks). Each accelerator is tied to a super-source or
    super-sink with infinite capacity, and ``networkx.minimum_cut`` [2]_ finds the cut.
    """
    gs = gpu_nodes(g)
    left = set(left if left is not None else gs[: len(gs) // 2])
    h = nx.DiGraph()
    for a, b, d in g.edges(data=True):
        h.add_edge(a, b, capacity=d["capacity_Bps"])
        h.add_edge(b, a, capacity=d["capacity_Bps"])
    for u in gs:
        if u in left:
            h.add_edge("_src", u, capacity=math.inf)
        else:
            h.add_edge(u, "_dst", capacity=math.inf)
    value, _ = nx.minimum_cut(h, "_src", "_dst")
    return float(value)
