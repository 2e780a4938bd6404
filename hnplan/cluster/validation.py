"""Validation of the placement policies against Weng et al. (USENIX ATC 2023) on the Alibaba
GPU-sharing trace: the fill experiment of their Sec. 6.

Tasks sampled (with replacement) from the trace's GPU pods arrive one by one and never leave, onto
the trace's heterogeneous cluster (:data:`OPENB_NODE_GPUS`), until the GPUs requested reach the
cluster's capacity; a task that fits nowhere is skipped. The outcome is the share of GPUs left
unallocated. CPU, memory and GPU-type constraints, which their Kubernetes simulator also checks,
are not modelled here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan.cluster.policies import Workload, place
from hnplan.cluster.topology import MILLI, ClusterTopology

OPENB_NODE_GPUS = {8: 617, 4: 54, 2: 518, 1: 24}
"""GPU nodes of the trace's cluster by GPUs per node (``openb_node_list_gpu_node.csv``: 1,213 nodes,
6,212 GPUs; data/traces/README.md)."""

WENG_2023 = {
    "cluster_gpus": 6212,
    "fgd_fewer_unallocated_max": 0.49,
    "fgd_more_gpus_used": 290,
    "ranking": ("fragmentation-aware", "best-fit"),
    "source": "Weng et al., 'Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation "
              "Gradient Descent', USENIX ATC 2023, abstract: FGD reduces unallocated GPUs by up to 49 % "
              "(290 more GPUs used) on an emulated 6,200-GPU cluster, against packing-based schedulers "
              "(best-fit among them)",
}


def openb_topology(node_gpus: dict | None = None, scale: float = 1.0) -> tuple[ClusterTopology, np.ndarray]:
    """A heterogeneous cluster as 8-slot nodes: the slots a node lacks are never free.

    Returns
    -------
    (ClusterTopology, ndarray)
        The topology (each node its own domain and leaf) and the initial free array
        ``(nodes, 8)`` [milli-GPU].
    """
    counts = {g: max(1, round(n * scale)) for g, n in (node_gpus or OPENB_NODE_GPUS).items()}
    sizes = np.concatenate([np.full(n, g) for g, n in counts.items()])
    nodes = len(sizes)
    free = np.where(np.arange(8)[None, :] < sizes[:, None], MILLI, 0).astype(np.int64)
    idx = np.arange(nodes)
    topo = ClusterTopology(system_id="openb", gpus=int(sizes.sum()), node_gpus=8, domain_gpus=8, domain=idx,
                           leaf=idx, pod=idx, nodes_per_leaf=1, leaves_per_pod=1, failure_unit_gpus=8, unit=idx,
                           hot_swap=False)
    return topo, free


def fill_experiment(jobs: pd.DataFrame, policies=("best-fit", "fragmentation-aware"), seed: int = 0,
                    scale: float = 1.0, arrived: float = 1.0) -> pd.DataFrame:
    """Unallocated GPUs after tasks requesting ``arrived`` x the cluster's GPUs have arrived.

    Parameters
    ----------
    jobs : DataFrame
        A job table (e.g. :func:`hnplan.cluster.read_openb` of the trace sample); tasks are drawn from
        its rows; tasks larger than one node are left out.
    policies : sequence of str
    seed : int
        The same task sequence is offered to every policy.
    scale : float
        Node counts of :data:`OPENB_NODE_GPUS` times this (tests use a smaller cluster).
    arrived : float
        Requested GPUs / cluster GPUs at which arrivals stop [fraction].

    Returns
    -------
    DataFrame
        One row per policy: ``policy, cluster_gpus, requested_gpus, allocated_gpus, unallocated_gpus,
        unallocated_fraction, failed_tasks``.
    """
    topo, free0 = openb_topology(scale=scale)
    t = jobs[jobs["gpus"] <= 8]
    demand = (t["gpus"] * t["gpu_milli"]).to_numpy()
    rng = np.random.default_rng(seed)
    order = rng.integers(len(t), size=4 * int(topo.gpus * MILLI * arrived / max(demand.mean(), 1)) + 16)
    cum = np.cumsum(demand[order])
    order = order[: int(np.searchsorted(cum, topo.gpus * MILLI * arrived)) + 1]
    g = t["gpus"].to_numpy()[order]
    m = t["gpu_milli"].to_numpy()[order]
    wl = Workload.from_jobs(t["gpus"].to_numpy(), t["gpu_milli"].to_numpy(), 8)
    up = np.ones(topo.nodes, bool)
    rows = []
    for policy in policies:
        free = free0.copy()
        failed = 0
        for gi, mi in zip(g.tolist(), m.tolist()):
            got = place(policy, free, up, topo, gi, mi, workload=wl)
            if got is None:
                failed += 1
                continue
            free[got[0], got[1]] -= mi
        allocated = (free0.sum() - free.sum()) / MILLI
        rows.append({"policy": policy, "cluster_gpus": topo.gpus, "requested_gpus": float((g * m).sum() / MILLI),
                     "allocated_gpus": float(allocated), "unallocated_gpus": float(topo.gpus - allocated),
                     "unallocated_fraction": float(1 - allocated / topo.gpus), "failed_tasks": failed})
    return pd.DataFrame(rows)
