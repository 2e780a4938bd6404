"""Bookkeeping that spares the cluster simulation's scheduler pass work per queued job, outcomes unchanged: the
running jobs' GPUs kept as one list as jobs start and end (:class:`HeldGPUs`, what the backfill reservation's
release times are computed from at every change) and the free GPUs counted once per change
(:func:`fit_counts`), against which a queued job that cannot fit is passed over without a placement search
(:func:`may_fit`). Used by :class:`hnplan.cluster.engine.ClusterSim`; the profile they answer is in
``benchmarks/bench_cluster.py``."""

from __future__ import annotations

import numpy as np

from hnplan.cluster.policies import whole_free
from hnplan.cluster.topology import MILLI


class HeldGPUs:
    """The GPUs the running jobs hold, as one list: each GPU's flat index ``node x width + slot`` once per job
    on it (a GPU shared by fractional jobs appears once for each), and the job.

    Kept in place as jobs start (:meth:`add`) and end (:meth:`remove`, which marks the job's entries dead), the
    buffers grown by doubling and compacted once half their entries are dead, so a start or an end costs a
    slice assignment, not a copy of the list; :meth:`arrays` returns the live entries. Each job's entries
    are contiguous (a job holds one allocation at a time).

    >>> h = HeldGPUs(width=8)
    >>> h.add(3, np.array([0, 1]), np.array([7, 0])); h.add(5, np.array([1]), np.array([0])); h.remove(3)
    >>> [a.tolist() for a in h.arrays()]   # GPU 8 (node 1, slot 0) held by job 5
    [[8], [5]]
    """

    def __init__(self, width: int, capacity: int = 1024):
        self.width = int(width)
        self.gpu = np.empty(capacity, np.int64)
        self.job = np.empty(capacity, np.int64)
        self.n = 0  # entries used, live or dead
        self.dead = 0
        self.span: dict[int, tuple[int, int]] = {}  # job -> its entries [start, stop)

    def add(self, j: int, nodes: np.ndarray, slots: np.ndarray) -> None:
        """Job ``j`` holds GPUs ``(nodes[i], slots[i])``."""
        k = len(nodes)
        if self.n + k > len(self.gpu):
            if self.dead:
                self._compact()
            if self.n + k > len(self.gpu):
                size = max(2 * len(self.gpu), self.n + k)
                for name in ("gpu", "job"):
                    grown = np.empty(size, np.int64)
                    grown[: self.n] = getattr(self, name)[: self.n]
                    setattr(self, name, grown)
        self.gpu[self.n : self.n + k] = np.asarray(nodes, np.int64) * self.width + np.asarray(slots, np.int64)
        self.job[self.n : self.n + k] = j
        self.span[j] = (self.n, self.n + k)
        self.n += k

    def remove(self, j: int) -> None:
        """Job ``j`` holds no GPU any more."""
        a, b = self.span.pop(j)
        self.job[a:b] = -1
        self.dead += b - a
        if 2 * self.dead > self.n:
            self._compact()

    def _compact(self) -> None:
        live = self.job[: self.n] >= 0
        gpu, job = self.gpu[: self.n][live], self.job[: self.n][live]
        self.n, self.dead = len(gpu), 0
        self.gpu[: self.n], self.job[: self.n] = gpu, job
        starts = np.flatnonzero(np.r_[True, job[1:] != job[:-1]]) if self.n else np.zeros(0, np.int64)
        stops = np.r_[starts[1:], self.n]
        self.span = dict(zip(job[starts].tolist(), zip(starts.tolist(), stops.tolist())))

    def arrays(self, gone=()) -> tuple[np.ndarray, np.ndarray]:
        """``(gpu, job)``: the live entries (the GPU's flat index and the job holding it), without the jobs in
        ``gone``; views or copies, not to be written."""
        gpu, job = self.gpu[: self.n], self.job[: self.n]
        keep = job >= 0 if self.dead else None
        if len(gone):
            out = ~np.isin(job, list(gone))
            keep = out if keep is None else keep & out
        return (gpu, job) if keep is None else (gpu[keep], job[keep])


def fit_counts(free: np.ndarray, up: np.ndarray) -> tuple[int, int, int]:
    """``(whole free GPUs, most whole free GPUs on one node, largest free share of a GPU [milli-GPU])`` on the
    nodes up; ``free`` shape (nodes, node_gpus) [milli-GPU], ``up`` shape (nodes,)."""
    w = whole_free(free, up)
    if not len(w):
        return 0, 0, 0
    return int(w.sum()), int(w.max()), int((free * up[:, None]).max())


def may_fit(counts: tuple[int, int, int], gpus: int, milli: int, node_gpus: int) -> bool:
    """Whether a job of ``gpus`` GPUs at ``milli`` each may fit free GPUs of :func:`fit_counts` ``counts``: a
    share needs a GPU with that much free, a job of one node's GPUs or fewer that many whole free on one node,
    a larger one that many whole free in all. These are the first tests of
    :func:`hnplan.cluster.policies.place`, which every placement it returns meets (on the nodes a job's GPU
    models or an inference reserve allow, fewer still), so False means ``place`` returns None.

    >>> may_fit((12, 6, 1000), 8, 1000, 8), may_fit((12, 6, 1000), 12, 1000, 8), may_fit((0, 0, 400), 1, 500, 8)
    (False, True, False)
    """
    total, most, share = counts
    if milli < MILLI:
        return share >= milli
    return (most if gpus <= node_gpus else total) >= gpus
