"""GPU models in the cluster simulation: which jobs a cluster's models can ever take, the capacity
stranded per model, and the GPUs a job holds of each model.

A cluster's nodes carry a GPU model (:attr:`~hnplan.cluster.topology.ClusterTopology.node_model`: one
for a catalog system, seven for the Alibaba trace's cluster); a job's ``gpu_spec`` lists the models it
accepts (:func:`hnplan.cluster.jobs.gpu_spec_mask`; empty = any). Placement skips nodes of other
models (:func:`hnplan.cluster.policies.place`), as the trace's own simulator does
(hkust-adsl/kubernetes-scheduler-simulator, ``IsNodeAccessibleToPodByType``).
"""

from __future__ import annotations

import numpy as np

from hnplan.cluster.jobs import GPU_SPEC, gpu_spec_mask, job_count, missing_cell
from hnplan.cluster.policies import stranded, type_ok
from hnplan.cluster.topology import MILLI, ClusterTopology
from hnplan.errors import InputError


def is_typed(topo: ClusterTopology, jobs) -> bool:
    """Whether GPU models matter to a run: the cluster has more than one model or nodes of unequal
    size, or some job names the models it accepts. A homogeneous run with no ``gpu_spec`` takes none
    of the typed paths (its outcome is the same as without them)."""
    if len(topo.gpu_models) > 1 or topo.node_slots is not None:
        return True
    return GPU_SPEC in jobs and any(not missing_cell(s) and str(s).strip() for s in jobs[GPU_SPEC])


def job_masks(topo: ClusterTopology, jobs) -> np.ndarray:
    """Accepted-model bitmask of every job over ``topo.gpu_models`` (0 = any), shape ``(jobs,)``; ``jobs`` a
    DataFrame or a mapping of columns (:func:`hnplan.cluster.jobs.job_count`: a mapping's ``len`` is its
    columns, which gave a mix's or a trace's jobs without ``gpu_spec`` on ``--nodes openb`` one mask per column).

    >>> from hnplan.cluster.validation import openb_topology
    >>> job_masks(openb_topology()[0], {"gpus": np.array([1, 2, 8]), "gpu_milli": np.array([1000] * 3)}).tolist()
    [0, 0, 0]
    """
    if GPU_SPEC not in jobs:
        return np.zeros(job_count(jobs), np.int64)
    return gpu_spec_mask(jobs[GPU_SPEC], topo.gpu_models)


def placeable(topo: ClusterTopology, spec: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Whether each job could start on the empty cluster, shape ``(jobs,)``: a job of at most one
    node's GPUs needs a node of an accepted model with that many GPUs, a larger one that many GPUs on
    nodes of accepted models.

    >>> from hnplan.cluster.validation import openb_topology
    >>> topo = openb_topology()[0]   # T4 nodes have 2 or 4 GPUs; G2 nodes 8
    >>> placeable(topo, np.array([16, 16, 2, 1 << 7]), np.array([4, 8, 8, 1])).tolist()
    [True, False, True, False]
    """
    out = np.zeros(len(spec), bool)
    slots = topo.slots
    for s in np.unique(spec):
        ok = type_ok(int(s), topo.models)
        rows = spec == s
        largest = int(slots[ok].max()) if ok.any() else 0
        total = int(slots[ok].sum())
        g = gpus[rows]
        out[rows] = np.where(g <= topo.node_gpus, g <= largest, g <= total)
    return out


def stranded_by_model(
    topo: ClusterTopology, free: np.ndarray, up: np.ndarray, q_gpus, q_milli, q_spec: np.ndarray
) -> float:
    """Free capacity no queued job can use [GPU], each model's nodes measured against the queued
    jobs that accept that model (:func:`hnplan.cluster.policies.stranded` per model; a multi-node job
    is counted against each accepted model's nodes alone; a model no queued job accepts counts 0:
    its GPUs are idle for want of demand, not fragmented)."""
    model = topo.models
    out = 0.0
    for m in range(len(topo.gpu_models)):
        nodes = model == m
        if not nodes.any():
            continue
        acc = type_ok(q_spec, m)
        f, u = free[nodes], up[nodes]
        if acc.any():  # a model no queued job accepts is idle, not fragmented (as stranded's 0)
            out += stranded(f, u, q_gpus[acc], q_milli[acc], topo.node_gpus)
    return out


class ModelLevels:
    """GPUs allocated and productive on each GPU model [GPU], shape ``(models,)``, and their time
    integrals [GPU s] (the per-model split of the simulation's ``level_alloc``/``level_prod``)."""

    def __init__(self, topo: ClusterTopology):
        m = len(topo.gpu_models)
        self.topo = topo
        self.held: dict[int, np.ndarray] = {}  # GPUs each running job holds of each model
        self.alloc, self.prod = np.zeros(m), np.zeros(m)
        self.int_alloc, self.int_prod = np.zeros(m), np.zeros(m)

    def advance(self, dt: float):
        self.int_alloc += self.alloc * dt
        self.int_prod += self.prod * dt

    def start(self, j: int, nodes: np.ndarray, milli: int, speed: float):
        """Job ``j`` starts on ``nodes`` (one entry per GPU) at ``milli`` of each, running at ``speed``."""
        held = np.bincount(self.topo.models[nodes], minlength=len(self.alloc)) * (milli / MILLI)
        self.held[j] = held
        self.alloc += held
        self.prod += held * speed

    def productive(self, j: int, speed: float, on: bool):
        """Job ``j`` leaves (``on=False``) or resumes (``on=True``) productive work at ``speed``."""
        self.prod += (1 if on else -1) * self.held[j] * speed

    def release(self, j: int, speed: float):
        """Job ``j`` frees its GPUs; ``speed`` is its productive speed then (0 while restarting)."""
        held = self.held.pop(j)
        self.alloc -= held
        self.prod -= held * speed


def model_gpus(topo: ClusterTopology) -> np.ndarray:
    """Installed GPUs of each model, shape ``(models,)``."""
    return np.bincount(topo.models, weights=topo.slots, minlength=len(topo.gpu_models))


def by_model_summary(topo: ClusterTopology, levels: ModelLevels, span_s: float) -> dict:
    """Per GPU model: ``gpus`` installed, ``utilisation`` and ``allocation_rate`` (productive and
    allocated GPU-time of that model's GPUs over the measuring span ``span_s`` [s] / installed)."""
    gpus = model_gpus(topo)
    cap = gpus * span_s
    return {
        name: {
            "gpus": int(gpus[m]),
            "utilisation": float(levels.int_prod[m] / cap[m]) if cap[m] > 0 else None,
            "allocation_rate": float(levels.int_alloc[m] / cap[m]) if cap[m] > 0 else None,
        }
        for m, name in enumerate(topo.gpu_models)
    }


NODE_LISTS = ("openb",)
"""Node lists a simulation can take in place of a catalog system's nodes: ``openb``, the Alibaba
trace's heterogeneous cluster (:func:`hnplan.cluster.validation.openb_topology`, seven GPU models)."""


def node_list(name: str, gpus: int) -> ClusterTopology:
    """The topology of a node list of :data:`NODE_LISTS` with its node counts scaled to about
    ``gpus`` GPUs (each kind of node kept at least once).

    Raises
    ------
    InputError
        For ``gpus < 1``.
    """
    from hnplan.cluster.validation import WENG_2023, openb_topology

    if gpus < 1:
        raise InputError(f"gpus must be >= 1; got {gpus}")
    return openb_topology(gpus / WENG_2023["cluster_gpus"])[0]
