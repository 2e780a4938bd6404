"""The placement structure of a cluster: nodes, scale-up domains, leaves and pods, as index arrays.

A catalog :class:`~hnplan.catalog.schemas.System` at a GPU count becomes ``nodes = ceil(gpus / node_gpus)``
nodes. Consecutive nodes form a scale-up domain of ``scaleup_domain_gpus`` accelerators (an 8-GPU
server, a 72-GPU NVL72 rack of 18 trays, a 384-NPU CloudMatrix of 48 nodes, the seed's 40-card node).
The scale-out fat-tree is the topology model's (:func:`hnplan.comm.topology.fat_tree_counts`): a leaf of
``k``-port switches keeps ``down = floor(k o / (1 + o))`` ports towards the nodes (``k/2`` non-blocking);
a node uses ``nics_per_node x ports_per_nic`` of them, or only ``ports_per_nic`` per rail when the fabric
is rail-optimised (NIC r of every node on rail-r leaves, [1]_), so a leaf group holds
``down / ports_per_nic`` nodes (rail-optimised) or ``down / (nics x ports_per_nic)`` nodes. A pod of a
three-tier tree is ``k/2`` leaf groups ([2]_). A domain larger than a leaf group (CloudMatrix) spans
several leaf groups.

References
----------
.. [1] NVIDIA DGX SuperPOD reference architecture (rail-optimised compute fabric).
.. [2] Al-Fares, Loukissas, Vahdat, "A Scalable, Commodity Data Center Network Architecture",
   SIGCOMM 2008 (k-ary fat-tree: k pods of k/2 edge switches).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import InputError

MILLI = 1000  # GPU capacity unit of the simulator: 1 GPU = 1000 milli-GPU (as the Alibaba trace's gpu_milli)
CLUSTER_GPUS = 1152
"""The shared cluster the simulations default to [GPUs]: 16 GB200 NVL72 racks = 144 8-GPU servers, whole
purchasable units of both kinds of design, so a supernode and a traditional cluster are compared at equal
capacity (the cluster claims, :mod:`hnplan.cluster.claims`). It is also the largest cluster a cost figure
simulates (:func:`hnplan.cluster.utilisation.simulated_utilisation`), to keep that answer to seconds."""


@dataclass(frozen=True)
class ClusterTopology:
    """Nodes of a cluster and the structure placement cares about (all arrays of shape ``(nodes,)``).

    Attributes
    ----------
    system_id : str
    gpus : int
        Accelerators in the cluster (whole nodes).
    node_gpus, domain_gpus : int
        Accelerators per node and per scale-up domain.
    domain, leaf, pod : ndarray of int
        The scale-up domain, leaf group and pod of every node.
    nodes_per_leaf, leaves_per_pod : int
    failure_unit_gpus : int
        Accelerators one hardware failure takes out (:func:`hnplan.reliability.failure_unit_gpus`).
    unit : ndarray of int
        The failure unit of every node.
    hot_swap : bool
    rack : ndarray of int, optional
        The physical rack of every node (``gpus_per_rack`` of the system).
    gpu_models : tuple of str
        The GPU models of the cluster (a catalog cluster: its accelerator id; the Alibaba trace's:
        its seven models); a job's ``gpu_spec`` names models from it.
    node_model : ndarray of int, optional
        GPU model of every node (index into ``gpu_models``); None: every node ``gpu_models[0]``.
    node_slots : ndarray of int, optional
        GPUs of every node when some have fewer than ``node_gpus`` (their other slots are never
        free); None: every node has ``node_gpus``.
    """

    system_id: str
    gpus: int
    node_gpus: int
    domain_gpus: int
    domain: np.ndarray
    leaf: np.ndarray
    pod: np.ndarray
    nodes_per_leaf: int
    leaves_per_pod: int
    failure_unit_gpus: int
    unit: np.ndarray
    hot_swap: bool
    rack: np.ndarray | None = None
    gpu_models: tuple[str, ...] = ()
    node_model: np.ndarray | None = None
    node_slots: np.ndarray | None = None

    @property
    def nodes(self) -> int:
        return len(self.domain)

    @functools.cached_property
    def domain_nodes(self) -> tuple[np.ndarray, ...]:
        """The nodes of every scale-up domain, ascending (index: the domain)."""
        order = np.argsort(self.domain, kind="stable")
        return tuple(np.split(order, np.cumsum(np.bincount(self.domain, minlength=self.domains))[:-1]))

    @property
    def domains(self) -> int:
        return int(self.domain[-1]) + 1

    @property
    def leaves(self) -> int:
        return int(self.leaf[-1]) + 1

    @property
    def models(self) -> np.ndarray:
        """GPU model of every node (index into ``gpu_models``), shape ``(nodes,)``."""
        return np.zeros(self.nodes, np.int64) if self.node_model is None else self.node_model

    @property
    def slots(self) -> np.ndarray:
        """GPUs of every node, shape ``(nodes,)``."""
        return np.full(self.nodes, self.node_gpus, np.int64) if self.node_slots is None else self.node_slots

    def gpus_on(self, nodes) -> int:
        """GPUs installed on ``nodes`` (indices or a boolean mask over the nodes)."""
        return int(self.slots[nodes].sum())

    def initial_free(self) -> np.ndarray:
        """Free share of every GPU slot of the empty cluster [milli-GPU], shape ``(nodes, node_gpus)``:
        ``MILLI`` on the GPUs a node has, 0 on the slots it lacks."""
        if self.node_slots is None:
            return np.full((self.nodes, self.node_gpus), MILLI, dtype=np.int64)
        return np.where(np.arange(self.node_gpus)[None, :] < self.node_slots[:, None], MILLI, 0).astype(np.int64)

    def frame(self):
        """One row per node: ``node, domain, leaf, pod, unit`` (a pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "node": np.arange(self.nodes),
                "domain": self.domain,
                "leaf": self.leaf,
                "pod": self.pod,
                "unit": self.unit,
            }
        )


def leaf_nodes(system, catalog: Catalog | None = None) -> int:
    """Nodes under one leaf group of the scale-out fat-tree (see the module notes).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> leaf_nodes(cat.system("hgx-h100-ib-ndr"), cat)   # 64-port QM9700, rail-optimised, 1 port per NIC
    32
    """
    cat = catalog or load_catalog()
    sw = cat.switch(system.scaleout_switch)
    o = system.scaleout_oversubscription
    down = max(1, math.floor(sw.ports * o / (1 + o)))
    ports_per_nic = max(1, math.ceil(system.nic_gbps / sw.port_gbps))
    rail = system.scaleout_topology == "rail-optimized-fat-tree"
    per_node = ports_per_nic if rail else system.nics_per_node * ports_per_nic
    return max(1, down // per_node)


def check_cluster_gpus(system, gpus: int, name: str = "gpus", catalog: Catalog | None = None) -> None:
    """Refuse a cluster of more GPUs than one scale-out fabric of the design joins, naming the count as
    ``name`` (``--gpus`` for ``hnplan cluster simulate``) and the bound: the check of ``compare`` and
    ``reliability`` (:func:`hnplan.comm.topology.check_fabric_gpus`; a 3-tier fat-tree of ``k``-port switches,
    ``k^3/4`` ports, in whole units).

    >>> check_cluster_gpus("gb200-nvl72", 65521, "--gpus")
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: --gpus 65521 exceeds the 65,520 GPUs of gb200-nvl72 one scale-out fabric joins (a 3-tier fat-tree of 64-port qm9700 switches); give at most 65,520

    Raises
    ------
    InputError
        One line naming ``name``, its value, the system and the bound.
    """
    from hnplan.comm.topology import check_fabric_gpus

    cat = catalog or load_catalog()
    check_fabric_gpus(cat.design(system), gpus, name)


def build_topology(system, gpus: int, catalog: Catalog | None = None) -> ClusterTopology:
    """The placement structure of ``gpus`` accelerators of a catalog system.

    Parameters
    ----------
    system : str or System
        Catalog id or entry.
    gpus : int
        Accelerators; rounded up to whole scale-up domains.

    Raises
    ------
    InputError
        For ``gpus < 1``.
    CatalogError
        For an unknown system.

    Examples
    --------
    >>> t = build_topology("gb200-nvl72", 144)
    >>> t.nodes, t.domains, t.node_gpus, t.domain_gpus
    (36, 2, 4, 72)
    """
    from hnplan.reliability import failure_unit_gpus

    cat = catalog or load_catalog()
    s = cat.system(system)
    if gpus < 1:
        raise InputError(f"gpus must be >= 1; got {gpus}")
    dom = s.scaleup_domain_gpus
    if dom % s.node_gpus:
        raise InputError(f"system {s.id}: scale-up domain {dom} is not a whole number of {s.node_gpus}-GPU nodes")
    domains = math.ceil(gpus / dom)
    nodes_per_domain = dom // s.node_gpus
    nodes = domains * nodes_per_domain
    idx = np.arange(nodes)
    per_leaf = leaf_nodes(s, cat)
    if nodes_per_domain > per_leaf:  # a domain spans whole leaf groups
        per_leaf = nodes_per_domain // math.ceil(nodes_per_domain / per_leaf)
    else:  # keep domains whole under one leaf group
        per_leaf = (per_leaf // nodes_per_domain) * nodes_per_domain
    radix = cat.switch(s.scaleout_switch).ports
    leaves_per_pod = max(1, radix // 2)
    leaf = idx // per_leaf
    unit_gpus = failure_unit_gpus(s)
    nodes_per_unit = max(1, unit_gpus // s.node_gpus)
    return ClusterTopology(
        system_id=s.id,
        gpus=nodes * s.node_gpus,
        node_gpus=s.node_gpus,
        domain_gpus=dom,
        domain=idx // nodes_per_domain,
        leaf=leaf,
        pod=leaf // leaves_per_pod,
        nodes_per_leaf=per_leaf,
        leaves_per_pod=leaves_per_pod,
        failure_unit_gpus=unit_gpus,
        unit=idx // nodes_per_unit,
        hot_swap=bool(s.hot_swap),
        rack=idx * s.node_gpus // max(s.gpus_per_rack, s.node_gpus),
        gpu_models=(s.accelerator,),
    )
