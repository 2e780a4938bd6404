"""Preemption for production inference in the cluster simulation: which running jobs of lower classes
are stopped (and requeued) so that an inference job that does not fit can start.

Candidates are the running jobs of lower classes past their exempt time (Slurm's ``PreemptExemptTime``,
slurm.conf(5)), lowest class first, most recently started first. They are freed one by one in a trial
until the job fits; then only the candidates whose GPUs that placement uses are stopped: Slurm preempts
the low-priority jobs whose resources the high-priority job has been allocated (Slurm's preemption
guide, https://slurm.schedmd.com/preempt.html), so a candidate freed in the trial but not under the
placement keeps running. A mixin of :class:`hnplan.cluster.engine.ClusterSim`, whose state (free shares,
allocations, start times) it reads.
"""

from __future__ import annotations

import numpy as np

#: the most candidates one preemption trial frees [jobs]: a bound on the trial's cost per blocked inference job
#: (assumption, not a Slurm setting; an inference job that needs more lower-class jobs stopped waits instead)
MAX_CANDIDATES = 256


class Preemption:
    """The preemption methods of :class:`hnplan.cluster.engine.ClusterSim` (internal)."""

    def _preempt_for(self, j: int, bound: tuple[int, float] | None = None) -> bool:
        """Start job ``j`` by preempting lower classes; False (nothing stopped) when no choice of the
        candidates makes room.

        ``bound``: ``(head, shadow)`` when a backfill reservation binds ``j`` (the reserved job and its shadow
        time [s]); a placement that would move the reservation later, counted with the candidates it stops
        already gone, is passed over as a backfilled job's would be (EASY: nothing started behind the reserved job
        may delay it; Lifka 1995; Mu'alem and Feitelson 2001, Sec. 2), and the trial frees the next candidate."""
        lower = [v for v in self.running if self.prio[v] < self.prio[j]]
        # a job is exempt until it has run preempt_exempt_s since it (re)started (Slurm's PreemptExemptTime);
        # a pass runs again when the first exemption ends
        victims = [v for v in lower if self.env.now - self.alloc_at[v] >= self.preempt_exempt_s]
        if len(victims) < len(lower):
            t = min(float(self.alloc_at[v]) for v in lower if self.env.now - self.alloc_at[v] < self.preempt_exempt_s)
            if t not in self.exempt_wakes:
                self.exempt_wakes.add(t)
                self.env.process(self._wake_at(t + self.preempt_exempt_s))
        if not victims:
            return False
        victims.sort(key=lambda v: (self.prio[v], -self.alloc_at[v]))
        free = self.free.copy()
        chosen = []
        for v in victims[:MAX_CANDIDATES]:
            nodes, slots = self.alloc[v]
            np.add.at(free, (nodes, slots), self.milli[v])
            chosen.append(v)
            got = self._try(j, free)
            if got is None:
                continue
            # stop the candidates on the placement's GPUs only: each of those GPUs then holds what it held
            # in the trial, so the placement is free as found
            width = int(self.free.shape[1])
            used = np.asarray(got[0], np.int64) * width + np.asarray(got[1], np.int64)
            stop = []
            for x in chosen:
                n, s = self.alloc[x]
                if np.isin(np.asarray(n, np.int64) * width + np.asarray(s, np.int64), used).any():
                    stop.append(x)
            if bound is not None and self._delays_after(bound, stop, j, got):
                continue
            for x in stop:
                self._stop(x, "preempt")
            self._start(j, *got)
            # the stopped jobs are requeued behind this pass's snapshot of the queue: a pass at once sees them
            # (a job end is an event, as a failure's is), so one that cannot restart takes the backfill
            # reservation and the GPUs left idle for it count as blocked, not as unexplained free capacity
            self._kick()
            return True
        return False

    def _delays_after(self, bound: tuple[int, float], stop: list[int], j: int, got) -> bool:
        """Whether stopping ``stop`` and starting ``j`` on ``got`` moves the reservation ``bound`` =
        ``(head, shadow)`` later (:meth:`hnplan.cluster.backfill.Reservation._delays` with those jobs gone)."""
        head, shadow = bound
        run_s = (self.dur[j] - self.done[j]) / self._speed_on(j, got[0])
        if self.env.now + run_s <= shadow:  # it ends before the reservation: its GPUs are free by then
            return False
        at = self._release_at(stop)
        np.maximum.at(at, (got[0], got[1]), self.env.now + run_s)
        return self._shadow_of(head, at)[0] > shadow + 1e-9

    def _wake_at(self, t: float):
        yield self.env.timeout(max(t - self.env.now, 0.0))
        self.version += 1  # a job became preemptible: the preemption trials run again
        self._kick()
