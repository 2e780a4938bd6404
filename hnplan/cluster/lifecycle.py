"""A job's life on its GPUs in the cluster simulation: start on a placement (its speed there from the
training planner through :mod:`hnplan.cluster.runtime`), run with software interruptions and restarts,
completion, release, a stop for preemption or a hardware failure (work since the last checkpoint lost, the
job requeued), and the hardware failures and repairs that take nodes down. A mixin of
:class:`hnplan.cluster.engine.ClusterSim`, whose state (free shares, allocations, per-job arrays, the
time integrals) it changes; the job states are here so that both modules name them.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from hnplan.cluster.policies import allocation_shape

QUEUED, RUNNING, DONE, REJECTED, WAITING, UNPLACEABLE = 1, 2, 3, 4, 0, 5
"""A job's state: queued, running, done, rejected (larger than the cluster), waiting (not yet arrived),
unplaceable (no node of the models it accepts is large enough)."""


class JobLifecycle:
    """The job and failure processes and the state changes of :class:`hnplan.cluster.engine.ClusterSim`
    (internal)."""

    # -- processes ------------------------------------------------------------------------------
    def _failures(self):
        rate = self.rates.hardware_per_gpu_s * self.topo.gpus
        if rate <= 0:
            return
        while True:
            yield self.env.timeout(self.rng.exponential(1.0 / rate))
            node = int(self.rng.integers(self.topo.nodes))
            if not self.up[node]:
                continue
            self.hw_failures += 1
            scope = np.array([node]) if self.topo.hot_swap else np.flatnonzero(self.topo.unit == self.topo.unit[node])
            hit = [j for j in list(self.running) if np.isin(self.alloc[j][0], scope).any()]
            for j in hit:
                self._stop(j, "failure")
            self.free_milli -= int(self.free[scope][self.up[scope]].sum())  # their free GPUs go down with them
            self.up[scope] = False
            self.repair_end[scope] = self.env.now + self.rates.repair_s
            self.version += 1
            self.env.process(self._repair(scope))
            self._kick()

    def _repair(self, scope):
        t0 = self.env.now
        yield self.env.timeout(self.rates.repair_s)
        lost = len(scope) * self.topo.node_gpus if self.topo.node_slots is None else self.topo.gpus_on(scope)
        self.down_gpu_s += (self.env.now - t0) * lost
        self.free_milli += int(self.free[scope][~self.up[scope]].sum())
        self.up[scope] = True
        self.epoch += 1
        self.version += 1
        self._kick()

    def _job(self, j: int):
        if self.procs.get(j) is not self.env.active_process:
            # stopped in the instant it started, before this process first ran (a preemption in the same pass):
            # the stop has released it; its interruption finds the process ended
            return
        try:
            if self.pending_restart[j] > 0:
                self.exp_end[j] = self.env.now + self.pending_restart[j] + (self.dur[j] - self.done[j]) / self.speed[j]
                self._set_restart(j, True)
                yield self.env.timeout(self.pending_restart[j])
                self.pending_restart[j] = 0.0
                self._set_restart(j, False)
            sw = self.rates.software_per_gpu_s * self.share[j] if self.failures else 0.0
            while True:
                self.seg_start[j] = self.env.now
                t_done = (self.dur[j] - self.done[j]) / self.speed[j]
                self.exp_end[j] = self.env.now + t_done
                t_fail = self.rng.exponential(1.0 / sw) if sw > 0 else math.inf
                if t_fail < t_done:
                    yield self.env.timeout(t_fail)
                    self._checkpoint_loss(j)
                    self.interrupted[j] += 1
                    self._set_restart(j, True)
                    yield self.env.timeout(self.rates.restart_s)
                    self._set_restart(j, False)
                    continue
                yield self.env.timeout(t_done)
                self.done[j] = self.dur[j]
                self._release(j)
                self.status[j] = DONE
                self.end[j] = self.env.now
                self._finish_count()
                self._kick()
                return
        except simpy.Interrupt:
            return

    # -- state changes ------------------------------------------------------------------------
    def _finish_count(self):
        self.finished += 1
        if self.finished == self.n and not self.all_done.triggered:
            self.all_done.succeed()

    def _set_restart(self, j: int, on: bool):
        self._advance()
        if on and not self.in_restart[j]:
            self.level_prod -= self.share[j] * self.speed[j]
        elif not on and self.in_restart[j]:
            self.level_prod += self.share[j] * self.speed[j]
        if self.by_model is not None and on != self.in_restart[j]:
            self.by_model.productive(j, self.speed[j], not on)
        self.in_restart[j] = on

    def _checkpoint_loss(self, j: int):
        """Progress since the segment began, rolled back to the last checkpoint."""
        if self.in_restart[j]:
            return
        total = self.done[j] + (self.env.now - self.seg_start[j]) * self.speed[j]
        c = self.ckpt[j]
        kept = total if c == 0 else (0.0 if not np.isfinite(c) else math.floor(total / c) * c)
        kept = min(kept, self.dur[j])
        self.lost_s[j] += total - kept
        self.done[j] = kept

    def _speed_on(self, j: int, nodes: np.ndarray) -> float:
        """Job ``j``'s speed on an allocation of ``nodes`` (1 unless a multi-GPU training job)."""
        if self.trains[j] and self.gpus[j] > 1:
            return float(self.speed_fn(*allocation_shape(nodes, self.topo)))
        return 1.0

    def _start(self, j: int, nodes: np.ndarray, slots: np.ndarray, speed: float | None = None):
        self._dequeue(j)
        self._advance()
        np.subtract.at(self.free, (nodes, slots), self.milli[j])
        self.free_milli -= int(self.milli[j]) * len(nodes)  # (placements are on nodes up)
        self.alloc[j] = (nodes, slots)
        self.held.add(j, nodes, slots)
        self.version += 1
        spd = self._speed_on(j, nodes) if speed is None else speed
        self.speed[j] = spd
        self.status[j] = RUNNING
        self.running.add(j)
        if np.isnan(self.first_start[j]):
            self.first_start[j] = self.env.now
        self.alloc_at[j] = self.env.now
        self.seg_start[j] = self.env.now  # a stop before its process first runs (the same instant) loses nothing
        # expected end now (the job's process sets it again when it runs): a reservation made in this
        # same pass must not see its GPUs as held for ever
        self.exp_end[j] = self.env.now + self.pending_restart[j] + (self.dur[j] - self.done[j]) / spd
        self.level_alloc += self.share[j]
        self.level_prod += self.share[j] * spd
        self._reserve_start(j)
        if self.by_model is not None:
            self.by_model.start(j, nodes, int(self.milli[j]), spd)
        self.in_restart[j] = False
        self.procs[j] = self.env.process(self._job(j))

    def _release(self, j: int):
        self._advance()
        self._reserve_release(j)
        nodes, slots = self.alloc.pop(j)
        np.add.at(self.free, (nodes, slots), self.milli[j])
        self.free_milli += int(self.milli[j]) * int(self.up[nodes].sum())
        self.held.remove(j)
        self.running.discard(j)
        self.procs.pop(j, None)
        self.level_alloc -= self.share[j]
        if not self.in_restart[j]:
            self.level_prod -= self.share[j] * self.speed[j]
        if self.by_model is not None:
            self.by_model.release(j, 0.0 if self.in_restart[j] else self.speed[j])
        self.in_restart[j] = False
        self.alloc_gpu_s[j] += (self.env.now - self.alloc_at[j]) * self.share[j]
        self.exp_end[j] = math.inf
        self.epoch += 1
        self.version += 1

    def _stop(self, j: int, why: str):
        """Preempt or fail a running job: lose work since its checkpoint, free its GPUs, requeue it."""
        self._checkpoint_loss(j)
        proc = self.procs.get(j)
        self._release(j)
        if why == "preempt":
            self.preempted[j] += 1
        else:
            self.interrupted[j] += 1
        self.pending_restart[j] = self.rates.restart_s
        if proc is not None and proc.is_alive:
            proc.interrupt(why)
        self._enqueue(j)
