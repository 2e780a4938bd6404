"""EASY backfilling's reservation for the cluster simulation: when a blocked job could start if the
running jobs end as expected (the shadow time), the GPUs spare then, and whether a candidate would
move it (Lifka 1995; Mu'alem and Feitelson, IEEE TPDS 2001, Sec. 2).

Counted in the units the blocked job's placement needs (whole-free GPUs, one node, whole TP groups in
scale-up domains; GPU models it accepts). A mixin of :class:`hnplan.cluster.engine.ClusterSim`, whose
state (free shares, allocations, expected ends, nodes up) it reads.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan.cluster.policies import type_ok
from hnplan.cluster.topology import MILLI


class Reservation:
    """The backfill reservation's methods of :class:`hnplan.cluster.engine.ClusterSim` (internal)."""

    def _release_at(self, gone=()) -> np.ndarray:
        """When each GPU becomes whole-free if running jobs end as expected [s], shape (nodes, node_gpus):
        now for a free GPU, the latest expected end of the jobs on it, the end of its repair on a down node.
        ``gone``: running jobs to count as stopped now (a preemption's trial)."""
        now = self.env.now
        if not gone and self._at[:2] == (self.version, now):
            return self._at[2].copy()
        free = self.free
        if gone:
            free = free.copy()
            for g in gone:
                np.add.at(free, self.alloc[g], self.milli[g])
        held, owner = self.held.arrays(gone)  # the running jobs' GPUs (occupancy.HeldGPUs), those gone left out
        at = np.where(free == MILLI, now, -np.inf)
        if len(held):  # the latest expected end of the jobs on each GPU (max: the order of the entries is moot)
            np.maximum.at(at.reshape(-1), held, np.maximum(self.exp_end[owner], now))
        at[np.isneginf(at)] = now
        # a node in repair frees its GPUs when the repair ends (the failure process's fixed repair time)
        at[~self.up] = np.maximum(at[~self.up], self.repair_end[~self.up, None])
        if self.absent is not None:
            at[self.absent] = math.inf
        if gone:
            return at
        self._at = (self.version, now, at)
        return at.copy()

    def _shadow_of(self, j: int, at: np.ndarray) -> tuple[float, float]:
        topo, g = self.topo, int(self.gpus[j])
        at = self._reserve_view(j, at)
        typed_head = self.spec is not None and self.spec[j] != 0
        if typed_head:  # only nodes of the models it accepts
            ok = type_ok(int(self.spec[j]), topo.models)
            typed_head = not ok.all()  # a spec every node meets is no constraint
            at = np.where(ok[:, None], at, math.inf)
        if g <= topo.node_gpus:
            t = float(np.sort(at, axis=1)[:, g - 1].min())
        else:
            group = 1
            if self.policy == "topology-aware" and self.tp[j] > 1:
                group = int(min(self.tp[j], topo.domain_gpus))
            per_dom = np.sort(at.reshape(topo.domains, -1), axis=1)
            events = np.sort(per_dom[:, group - 1 :: group].ravel())
            need = -(-g // group)
            t = float(events[need - 1]) if need <= len(events) else math.inf
        extra = float((at <= t).sum()) - self.share[j] if math.isfinite(t) else 0.0
        if typed_head:  # GPUs of other models are all spare to it: _delays decides for each candidate
            return t, math.inf
        return t, max(extra, 0.0)

    def _shadow_time(self, j: int) -> tuple[float, float]:
        """When blocked job ``j`` could start if running jobs end as expected, and the whole GPUs free
        then beyond its need (EASY backfilling's shadow time and extra nodes: Lifka 1995; Mu'alem and
        Feitelson, IEEE TPDS 2001, Sec. 2).

        Counted in the units the job's placement needs: a GPU is whole-free once every job on it has
        ended; a job that fits one node needs that many GPUs on one node; a topology-aware job with
        TP groups needs whole groups of free GPUs inside scale-up domains (so small jobs scattered
        over the servers delay it, as they do in the placement itself). A node in repair counts from the end of its repair.
        """
        if self._shadow[:2] == (j, self.version):
            return self._shadow[2]
        out = self._shadow_of(j, self._release_at())
        self._shadow = (j, self.version, out)
        return out

    def _delays(self, head: int, shadow: float, j: int, nodes: np.ndarray, slots: np.ndarray, run_s: float) -> bool:
        """Whether starting job ``j`` on ``(nodes, slots)`` for ``run_s`` moves ``head``'s reservation."""
        at = self._release_at()
        np.maximum.at(at, (nodes, slots), self.env.now + run_s)
        return self._shadow_of(head, at)[0] > shadow + 1e-9
