"""GPUs set aside for inference in the cluster simulation (``inference_reserve_gpus``).

Operators keep a whole-cluster training job from being preempted by every arriving inference job by
setting GPUs aside for serving: on Slurm a partition or reservation only the serving QOS may use
(slurm.conf(5) ``PartitionName ... AllowQos``; scontrol(1) ``create reservation``), on Kubernetes a
quota or priority class with capacity reserved for it (Kubernetes documentation, "Resource Quotas",
``scopeSelector`` on ``PriorityClass``). The simulation models it as whole nodes, the highest-numbered
ones (the last scale-up domain first), that only inference jobs may use: a request of ``N`` GPUs is
rounded up to whole nodes, since a node's GPUs share its NICs and a job placed across the boundary
would put training traffic on the serving nodes.

An inference job is placed on the reserve first; only if it does not fit there does it look at the
shared GPUs (and, if nothing fits, preempt training as without a reserve: :mod:`hnplan.cluster.preempt`).
Training, fine-tuning and development jobs never see the reserve: their placement, the backfill
reservation's shadow time and the blocked capacity are counted on the shared nodes only.

A mixin of :class:`hnplan.cluster.engine.ClusterSim`, whose state (free shares, nodes up, allocations)
it reads; with no reserve (``None``) none of its methods changes what the engine does.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan.cluster.jobs import CLASSES
from hnplan.cluster.topology import MILLI, ClusterTopology
from hnplan.errors import InputError

INFERENCE = CLASSES.index("inference")


def reserve_nodes(topo: ClusterTopology, gpus: int) -> np.ndarray | None:
    """The nodes set aside for inference: the last ``ceil(gpus / node_gpus)`` nodes, shape ``(nodes,)``
    bool; None for ``gpus == 0`` (no reserve).

    Raises
    ------
    InputError
        For a negative count, or a reserve that leaves no GPU to the shared pool.

    Examples
    --------
    >>> from hnplan.cluster.topology import build_topology
    >>> m = reserve_nodes(build_topology("hgx-h100-ib-ndr", 64), 12)   # 12 GPUs: two 8-GPU servers
    >>> int(m.sum()), np.flatnonzero(m).tolist()
    (2, [6, 7])
    """
    if gpus < 0 or gpus != int(gpus):
        raise InputError(f"inference_reserve_gpus must be a whole number of GPUs >= 0; got {gpus}")
    if gpus == 0:
        return None
    if topo.node_slots is not None:
        raise InputError(
            f"inference_reserve_gpus {gpus} needs nodes of equal size; a node list of mixed sizes has none"
        )
    nodes = math.ceil(gpus / topo.node_gpus)
    if nodes >= topo.nodes:
        raise InputError(
            f"inference_reserve_gpus {gpus} takes {nodes} of the cluster's {topo.nodes} {topo.node_gpus}-GPU nodes: "
            "leave at least one node to the shared pool"
        )
    mask = np.zeros(topo.nodes, bool)
    mask[topo.nodes - nodes :] = True
    return mask


def reserve_note(topo: ClusterTopology, asked: int, mask: np.ndarray) -> str:
    """One line saying what the reserve holds and whether the request was rounded up."""
    got = int(mask.sum()) * topo.node_gpus
    rounded = "" if got == asked else f" (asked {asked}: rounded up to whole {topo.node_gpus}-GPU nodes)"
    nodes = int(mask.sum())
    return f"{got} GPUs on {nodes} node{'s' * (nodes != 1)} for inference only{rounded}"


class InferenceReserve:
    """The reserve's methods of :class:`hnplan.cluster.engine.ClusterSim` (internal)."""

    def _init_reserve(self, mask: np.ndarray | None):
        self.reserve = mask
        self.level_reserve = 0.0  # GPUs allocated on the reserve [GPU]
        self.int_reserve = 0.0  # its integral over the window [GPU s]
        self.reserve_gpu_s = np.zeros(self.n)  # per job: GPU-time held on the reserve [GPU s]

    def _on_reserve(self, j: int) -> float:
        """GPUs job ``j``'s allocation holds on the reserve [GPU]."""
        nodes = self.alloc[j][0]
        return float(self.reserve[nodes].sum()) * self.milli[j] / MILLI

    def _reserve_start(self, j: int):
        if self.reserve is not None:
            self.level_reserve += self._on_reserve(j)

    def _reserve_release(self, j: int):
        if self.reserve is not None:
            held = self._on_reserve(j)
            self.level_reserve -= held
            self.reserve_gpu_s[j] += (self.env.now - self.alloc_at[j]) * held

    def _capacity_for(self, j: int) -> int:
        """GPUs job ``j`` may ever hold: the cluster's, less the reserve's unless it is inference (a larger
        job is rejected at submission)."""
        if self.reserve is None or self.cls[j] == INFERENCE:
            return self.topo.gpus
        return self.topo.gpus - int(self.reserve.sum()) * self.topo.node_gpus

    def _place_for(self, j: int, free) -> tuple | None:
        """Job ``j``'s placement: inference on the reserve first, then anywhere; other classes on the
        shared nodes only."""
        if self.reserve is None:
            return self._place(j, free, self.up)
        if self.cls[j] == INFERENCE:
            got = self._place(j, free, self.up & self.reserve)
            return got if got is not None else self._place(j, free, self.up)
        return self._place(j, free, self.up & ~self.reserve)

    def _reserve_view(self, j: int, at: np.ndarray) -> np.ndarray:
        """Release times ``at`` (nodes, node_gpus) as job ``j`` sees them: the reserve never frees for a
        job that is not inference."""
        if self.reserve is None or self.cls[j] == INFERENCE:
            return at
        return np.where(self.reserve[:, None], math.inf, at)

    def _reserve_free(self) -> float:
        """Free GPUs on the reserve's nodes that are up [GPU]."""
        if self.reserve is None:
            return 0.0
        return float((self.free[self.reserve] * self.up[self.reserve, None]).sum()) / MILLI


def reserve_summary(out, sim, topo: ClusterTopology, asked: int, span_s: float) -> None:
    """Add the reserve's figures to a result: ``summary["reserve"]`` (``gpus``, ``nodes``,
    ``utilisation``: GPUs allocated on it over its capacity in the window, ``note``) and the jobs' column
    ``reserve_gpu_s`` (GPU-time each held on it [GPU s])."""
    gpus = int(sim.reserve.sum()) * topo.node_gpus
    out.summary["reserve"] = {
        "gpus": gpus,
        "nodes": int(sim.reserve.sum()),
        "utilisation": float(sim.int_reserve / (gpus * span_s)) if span_s > 0 else 0.0,
        "note": reserve_note(topo, asked, sim.reserve),
    }
    out.job_columns["reserve_gpu_s"] = sim.reserve_gpu_s
