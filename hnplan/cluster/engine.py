"""The discrete-event simulation of a shared cluster on SimPy: arrivals, scheduler passes (the main one
after every change; backfilling with it or every ``bf_interval_s``, and with ``defer`` the main one every
``sched_interval_s``, as Slurm's), job processes (run, software restarts, completion), preemption, hardware failures with
repair, and the integrals and samples the outcomes are computed from.

SimPy (https://simpy.readthedocs.io) is the event engine; placement is :mod:`hnplan.cluster.policies`,
backfilling's reservation :mod:`hnplan.cluster.backfill`, the choice of preempted jobs
:mod:`hnplan.cluster.preempt`, a job's life on its GPUs and the hardware failures
:mod:`hnplan.cluster.lifecycle`; runtime and failure rates come from :mod:`hnplan.cluster.runtime`.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import simpy

from hnplan.cluster import gpu_types
from hnplan.cluster.backfill import Reservation
from hnplan.cluster.jobs import CLASSES, PRIORITY, job_count
from hnplan.cluster.lifecycle import (  # noqa: F401  (DONE, RUNNING: the job states, public here)
    DONE,
    QUEUED,
    REJECTED,
    RUNNING,
    UNPLACEABLE,
    WAITING,
    JobLifecycle,
)
from hnplan.cluster.occupancy import HeldGPUs, fit_counts, may_fit
from hnplan.cluster.policies import Workload, place, stranded
from hnplan.cluster.preempt import Preemption
from hnplan.cluster.reserve import InferenceReserve
from hnplan.cluster.topology import MILLI, ClusterTopology

TRAINING_CLASSES = ("training", "fine-tuning")


class ClusterSim(JobLifecycle, Reservation, Preemption, InferenceReserve):
    """One simulation run (build, :meth:`run`, then read the arrays). Internal: use
    :func:`hnplan.cluster.simulate_cluster`."""

    #: ledger rows kept as Python tuples before they are packed into a float64 block (9 x 8 bytes a row: some
    #: 3 rows a job, 220 MB at the 1,000,000-job limit)
    LEDGER_BLOCK = 65536

    def __init__(
        self,
        topo: ClusterTopology,
        jobs,
        policy: str,
        *,
        speed_fn,
        rates,
        seed: int,
        backfill: bool,
        preemption: bool,
        failures: bool,
        queue_depth: int,
        sample_s: float,
        bf_interval_s: float = 0.0,
        sched_interval_s: float = 0.0,
        defer: bool = False,
        preempt_exempt_s: float = 0.0,
        strict_priority: bool = False,
        window_s: float,
        warmup_s: float = 0.0,
        snapshot_s: float | None = None,
        progress=None,
        reserve: np.ndarray | None = None,
    ):
        self.env = simpy.Environment()
        self.topo, self.policy = topo, policy
        self.rng = np.random.default_rng(seed)
        self.free = topo.initial_free()
        self.absent = None if topo.node_slots is None else self.free == 0  # slots a smaller node lacks
        self.up = np.ones(topo.nodes, bool)
        self.free_milli = int(self.free.sum())  # free milli-GPUs on nodes up, kept as jobs start and end and nodes fail
        self.repair_end = np.zeros(topo.nodes)  # when a node in repair comes back [s]
        n = job_count(jobs)
        self.n = n
        self.arrival = np.asarray(jobs["arrival_s"], float)
        self.gpus = np.asarray(jobs["gpus"], np.int64)
        self.milli = np.asarray(jobs["gpu_milli"], np.int64)
        self.share = self.gpus * self.milli / MILLI  # GPUs held [GPU]
        self.dur = np.asarray(jobs["duration_s"], float)
        self.ckpt = np.asarray(jobs["checkpoint_s"], float)
        self.tp = np.asarray(jobs["tp"], np.int64)
        self.cls = np.array([CLASSES.index(c) for c in jobs["cls"]], dtype=np.int64)
        self.prio = np.array([PRIORITY[CLASSES[c]] for c in self.cls])
        self.trains = np.isin(self.cls, [CLASSES.index(c) for c in TRAINING_CLASSES])
        self.speed_fn, self.rates = speed_fn, rates
        self.backfill, self.preemption, self.failures = backfill, preemption, failures
        self.queue_depth, self.sample_s, self.window_s = queue_depth, sample_s, window_s
        self.warmup_s = warmup_s
        self.bf_interval_s, self.sched_interval_s, self.defer = bf_interval_s, sched_interval_s, defer
        self.preempt_exempt_s, self.exempt_wakes = preempt_exempt_s, set()  # Slurm's PreemptExemptTime
        self.strict_priority = strict_priority  # a reservation binds only jobs of its priority or lower
        self.kicks = 0  # events that may let a job start (arrival, end, failure, repair)
        self.snapshot_s, self.snapshot = snapshot_s, None
        self.progress = progress
        # GPU models (gpu_types): None on a homogeneous run whose jobs name none
        self.typed = gpu_types.is_typed(topo, jobs)
        self.spec = gpu_types.job_masks(topo, jobs) if self.typed else None
        self.node_type = topo.models if self.typed else None
        self.workload = Workload.from_jobs(self.gpus, self.milli, topo.node_gpus, spec=self.spec)
        self.placeable = gpu_types.placeable(topo, self.spec, self.gpus) if self.spec is not None else None
        self.by_model = gpu_types.ModelLevels(topo) if len(topo.gpu_models) > 1 else None
        # per-job state
        self.status = np.full(n, WAITING, np.int64)
        self.first_start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.done = np.zeros(n)  # checkpointed progress [ideal s]
        self.queued_s = np.zeros(n)
        self.enqueued_at = np.full(n, np.nan)
        self.seg_start = np.zeros(n)
        self.in_restart = np.zeros(n, bool)
        self.speed = np.ones(n)
        self.exp_end = np.full(n, np.inf)
        self.pending_restart = np.zeros(n)
        self.lost_s = np.zeros(n)  # work lost [ideal s]
        self.preempted = np.zeros(n, np.int64)
        self.interrupted = np.zeros(n, np.int64)
        self.alloc_gpu_s = np.zeros(n)
        self.alloc_at = np.zeros(n)
        self.failed_epoch = np.full(n, -1, np.int64)
        self.preempt_failed = np.full(n, -1, np.int64)
        self.version = 0
        self.alloc: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.held = HeldGPUs(self.free.shape[1])  # the running jobs' GPUs as one list (the reservation reads it)
        self.procs: dict[int, simpy.Process] = {}
        self.queue: list[tuple] = []
        # the distinct (GPUs, share, GPU models) of the queued jobs and how many of each: what the stranded
        # capacity depends on (a set function of the queue), kept as jobs enter and leave it
        self.qtypes: dict[tuple, int] = {}
        # the capacity split's state after every change (time, then GPUs allocated, free, stranded, drained,
        # other free while jobs queue, down, jobs queued > 0, jobs running), each row holding until the next
        self.ledger: list[tuple] = []
        self.ledger_blocks: list[np.ndarray] = []  # the earlier rows, packed
        self.running: set[int] = set()
        self.epoch = 0
        self.finished = 0
        self.all_done = self.env.event()
        self.wake = self.env.event()
        # integrals over [warmup_s, window_s] and samples
        self.t_last = warmup_s
        self.level_alloc = 0.0
        self.level_prod = 0.0
        self.int_alloc = 0.0
        self.int_prod = 0.0
        self.samples: list[tuple] = []
        self.hw_failures = 0
        self.down_gpu_s = 0.0
        self._shadow = (-1, -1, math.inf)
        self.reserved = -1  # the job holding the backfill reservation (-1: none) until it starts
        self.fifo_head = -1  # without backfill: the blocked job the last pass stopped at, which every job waits for
        self._at: tuple = (-1, -1.0, None)
        self._fit_at: tuple = (-1, 0, 0, 0)  # (version, occupancy.fit_counts) after a failed placement
        self._init_reserve(reserve)  # inference-only nodes (None: none)

    # -- bookkeeping ----------------------------------------------------------------------------
    def _advance(self):
        now = min(self.env.now, self.window_s)
        if now <= self.warmup_s:
            return
        if now > self.t_last:
            dt = now - self.t_last
            self.int_alloc += self.level_alloc * dt
            self.int_prod += self.level_prod * dt
            self.int_reserve += self.level_reserve * dt
            if self.by_model is not None:
                self.by_model.advance(dt)
            self.t_last = now

    def _kick(self):
        self.kicks += 1
        if not self.wake.triggered:
            self.wake.succeed()

    def _enqueue(self, j: int):
        self.status[j] = QUEUED
        self.enqueued_at[j] = self.env.now
        bisect.insort(self.queue, (-self.prio[j], self.arrival[j], j))
        t = self._qtype(j)
        self.qtypes[t] = self.qtypes.get(t, 0) + 1

    def _dequeue(self, j: int):
        key = (-self.prio[j], self.arrival[j], j)
        i = bisect.bisect_left(self.queue, key)
        del self.queue[i]
        self.queued_s[j] += self.env.now - self.enqueued_at[j]
        t = self._qtype(j)
        self.qtypes[t] -= 1
        if not self.qtypes[t]:
            del self.qtypes[t]

    def _qtype(self, j: int) -> tuple:
        return (int(self.gpus[j]), int(self.milli[j]), 0 if self.spec is None else int(self.spec[j]))

    def _idle_split(self) -> tuple[float, float, float, float]:
        """The free GPUs now and how they split [GPU]: ``(free, stranded, drained, other)``.

        ``stranded``: free capacity no queued job can use (:func:`hnplan.cluster.policies.stranded`, per GPU
        model on a typed run); ``drained``: the other free GPUs while the job holding the reservation (without
        backfill the first blocked job) waits for the rest of its GPUs; ``other``: free GPUs a queued job fits
        but that none holds yet (0 with the queue empty)."""
        free_gpus = self.free_milli / MILLI
        if not self.qtypes:
            return free_gpus, 0.0, 0.0, 0.0
        strand = 0.0
        if free_gpus > 0:
            q = np.array(list(self.qtypes), dtype=np.int64)
            if self.spec is not None:
                strand = gpu_types.stranded_by_model(self.topo, self.free, self.up, q[:, 0], q[:, 1], q[:, 2])
            else:
                strand = stranded(self.free, self.up, q[:, 0], q[:, 1], self.topo.node_gpus)
        # blocked: free capacity idle while a reserved job waits for the rest of its GPUs (the drain
        # for a gang job), beyond what the fragmentation figure already counts
        # without backfill no job passes the first blocked one: the GPUs left free wait for it alike
        head = self.reserved if self.backfill else self.fifo_head
        waiting = head >= 0 and self.status[head] == QUEUED
        if waiting and self.reserve is not None and self.cls[head] != CLASSES.index("inference"):
            strand += self._reserve_free()  # the reserve's free GPUs are no drain for a training head
        blocked = max(free_gpus - strand, 0.0) if waiting else 0.0
        # free GPUs with jobs queued that neither count: a queued job fits them but has not started (it
        # waits for the next scheduler pass, lies beyond the queue depth or is held by a reservation's
        # shadow time without being the reserved job)
        other = max(free_gpus - min(strand, free_gpus) - blocked, 0.0)
        return free_gpus, strand, blocked, other

    def _note(self):
        """Record the capacity split's state now (after a scheduler pass, or a change no pass follows at
        once); a row at the same time replaces the earlier one (it held for no time)."""
        now = self.env.now
        if self.ledger and self.ledger[-1][0] >= self.window_s and now > self.ledger[-1][0]:
            return  # past the window: nothing more is integrated
        free_gpus, strand, blocked, other = self._idle_split()
        down = float(self.topo.gpus_on(~self.up)) if not self.up.all() else 0.0
        queued, running = float(bool(self.qtypes)), len(self.running)
        row = (now, self.level_alloc, free_gpus, strand, blocked, other, down, queued, running)
        if self.ledger and self.ledger[-1][0] == now:
            self.ledger[-1] = row
        else:
            self.ledger.append(row)
            if len(self.ledger) > self.LEDGER_BLOCK:  # keep the last row a tuple: a later one may replace it
                self.ledger_blocks.append(np.array(self.ledger[:-1], dtype=float))
                del self.ledger[:-1]

    def ledger_rows(self) -> np.ndarray:
        """The recorded states (:meth:`_note`), shape ``(rows, 9)``: time [s], GPUs allocated, free,
        stranded, drained, other free while jobs queue, down [GPU], 1.0 while jobs are queued, and the jobs
        running."""
        return np.vstack([*self.ledger_blocks, np.array(self.ledger, dtype=float).reshape(-1, 9)])

    # -- processes ----------------------------------------------------------------------------
    def _arrivals(self):
        for j in range(self.n):
            dt = self.arrival[j] - self.env.now
            if dt > 0:
                yield self.env.timeout(dt)
            cap = self._capacity_for(j)  # the cluster's GPUs, less the inference reserve for other classes
            if self.share[j] > cap or self.gpus[j] > cap:
                self.status[j] = REJECTED
                self._finish_count()
                continue
            if self.placeable is not None and not self.placeable[j]:  # no node of its models is large enough
                self.status[j] = UNPLACEABLE
                self._finish_count()
                continue
            self._enqueue(j)
            if self.defer:  # Slurm's defer: no pass at submission, the next periodic one sees the job
                self.kicks += 1
                self._note()
            else:
                self._kick()

    def _scheduler(self):
        """The main scheduler on every event; backfilling too unless it has its own interval."""
        while True:
            yield self.wake
            self.wake = self.env.event()
            self._pass(backfill=self.backfill and not self.bf_interval_s)

    def _periodic(self, interval_s: float, backfill: bool):
        """A pass every ``interval_s`` from time 0 (Slurm's backfill and full-queue main loops), skipped when
        nothing changed since the last (no job started, ended, arrived, failed or was repaired)."""
        seen = None
        while True:
            yield self.env.timeout(interval_s)
            if seen != (self.version, self.kicks):
                self._pass(backfill=backfill)
                seen = (self.version, self.kicks)

    def _sampler(self):
        total = self.topo.gpus
        while True:
            q = np.array([k[2] for k in self.queue], dtype=np.int64)
            qc = np.bincount(self.cls[q], minlength=len(CLASSES)) if len(q) else np.zeros(len(CLASSES), np.int64)
            free_gpus, strand, blocked, other = self._idle_split()
            self.samples.append(
                (
                    self.env.now,
                    self.level_alloc / total,
                    self.level_prod / total,
                    len(q),
                    *qc.tolist(),
                    strand / total,
                    free_gpus / total,
                    len(self.running),
                    float(self.topo.gpus_on(~self.up)) / total,
                    blocked / total,
                    other / total,
                )
            )
            if self.snapshot is None and self.snapshot_s is not None and self.env.now >= self.snapshot_s:
                self.snapshot = (self.env.now, self.free.copy(), self.up.copy())
            if self.progress is not None:
                self.progress(self.env.now)
            if self.env.now >= self.window_s:
                return
            yield self.env.timeout(min(self.sample_s, self.window_s - self.env.now))

    # -- the scheduler pass ---------------------------------------------------------------------
    def _try(self, j: int, free=None):
        if free is not None:
            return self._place_for(j, free)
        # once a placement has failed since the free GPUs last changed, a job too large for their count is
        # passed over without a search (occupancy.may_fit: place would return None); outcomes are unchanged
        if self._fit_at[0] == self.version and not may_fit(
            self._fit_at[1:], int(self.gpus[j]), int(self.milli[j]), self.topo.node_gpus
        ):
            return None
        got = self._place_for(j, self.free)
        if got is None and self._fit_at[0] != self.version:
            self._fit_at = (self.version, *fit_counts(self.free, self.up))
        return got

    def _place(self, j: int, free, up):
        return place(
            self.policy,
            free,
            up,
            self.topo,
            int(self.gpus[j]),
            int(self.milli[j]),
            int(self.tp[j]),
            self.workload,
            node_type=self.node_type,
            spec=0 if self.spec is None else int(self.spec[j]),
        )

    def _pass(self, backfill: bool):
        """One scheduler pass over the first ``queue_depth`` queued jobs: start them in priority order, and
        with ``backfill`` the later ones that do not delay the first blocked job (EASY).

        The first blocked job keeps its reservation until it starts: a job queued after it starts before
        it only if that does not delay it (EASY's guarantee, Mu'alem and Feitelson 2001 Sec. 2), production
        inference included, which may still preempt lower classes for a placement that ends before the
        reservation. With ``strict_priority`` a job of higher priority (production inference over training)
        is not bound by it, and a higher-priority job left blocked takes the reservation over: Slurm evaluates jobs in strict priority order and its backfill
        starts lower-priority jobs only where they do not delay the expected start of higher-priority ones
        (Slurm's Scheduling Configuration Guide, https://slurm.schedmd.com/sched_config.html, and sched/backfill
        in slurm.conf(5)), so a higher-priority job takes free GPUs first, those drained for a training job's
        reservation included, and preempts (:mod:`hnplan.cluster.preempt`; Slurm's preemption guide,
        https://slurm.schedmd.com/preempt.html) only when the free GPUs cannot hold it; Slurm's backfill
        reserves for the highest-priority pending job first. A stream of long inference services then keeps
        moving a near-whole-cluster job's reservation back while its drain holds the GPUs idle.

        A job the reservation bound and skipped earlier in a pass whose reserved job then starts is
        reconsidered in the same pass (the pass starts over in priority order): nothing is left to protect, and
        Slurm's scheduler tries its queue in priority order on every pass (sched_config guide above), not
        the next one. The first of them left blocked takes the reservation, as EASY gives it to the first queued
        job that cannot start: often production inference, whose start at the reserved job's end sets the next
        gang job's shadow time (docs/cluster.md, Jobs the reservation binds)."""
        while self._pass_once(backfill):
            pass
        self._note()

    def _pass_once(self, backfill: bool) -> bool:
        """One sweep of the queue (:meth:`_pass`); True when the reserved job started after a job its
        reservation held back in this sweep, so that the sweep must run again."""
        head = None
        shadow, extra = math.inf, 0.0
        held = False  # a job skipped in this sweep because the reservation bound it
        if self.reserved >= 0 and self.status[self.reserved] != QUEUED:
            self.reserved = -1
        if self.reserved >= 0:
            head = self.reserved
            shadow, extra = self._shadow_time(head)
        for key in list(self.queue[: self.queue_depth]):
            j = key[2]
            if self.status[j] != QUEUED:
                continue
            # a reservation binds only jobs of its holder's priority or lower
            bound = head is not None and j != head and (not self.strict_priority or self.prio[j] <= self.prio[head])
            # behind a blocked job: only jobs that end before its reservation, or fit in the GPUs it
            # leaves spare then, may start
            late = bound and self.env.now + (self.dur[j] - self.done[j]) > shadow
            if late and self.share[j] > extra:
                held = True
                continue
            got = None
            if self.failed_epoch[j] != self.epoch:
                got = self._try(j)
                if got is None:
                    self.failed_epoch[j] = self.epoch
            if got is not None:
                spd = self._speed_on(j, got[0])
                run_s = (self.dur[j] - self.done[j]) / spd
                if bound and self.env.now + run_s > shadow:
                    # it would outlast the reservation: only on GPUs the blocked job does not need then
                    late = True
                    if self.share[j] > extra or self._delays(head, shadow, j, *got, run_s):
                        held = True
                        continue
                self._start(j, *got, speed=spd)
                if j == head:  # the reserved job started: the next blocked one gets the reservation
                    self.reserved, head, shadow, extra = -1, None, math.inf, 0.0
                    if held:
                        return True
                elif late:
                    extra -= self.share[j]
                elif head is not None and not bound:  # a higher-priority job took GPUs: the reservation moves
                    shadow, extra = self._shadow_time(head)
                continue
            if self.preemption and self.prio[j] == PRIORITY[CLASSES[0]] and self.preempt_failed[j] != self.version:
                # a job the reservation binds preempts only for a placement that does not move it (EASY: nothing
                # may start that delays the reserved job, Mu'alem and Feitelson 2001 Sec. 2)
                if self._preempt_for(j, (head, shadow) if bound else None):
                    if j == head:  # the reserved job started by preempting: as on the start path above
                        self.reserved, head, shadow, extra = -1, None, math.inf, 0.0
                        if held:
                            return True
                    elif head is not None:
                        # the machine changed (victims stopped, the job started): the reservation is recomputed
                        # (Mu'alem and Feitelson 2001, Sec. 2), with or without strict priority; the stopped
                        # jobs' GPUs beyond the placement may bring it earlier, and a later job of this pass
                        # backfilled against the old, later shadow time onto them would delay the blocked job
                        shadow, extra = self._shadow_time(head)
                    continue
                self.preempt_failed[j] = self.version
                held = held or bound
            if not backfill:
                self.fifo_head = j
                return False
            if head is None or (self.strict_priority and self.prio[j] > self.prio[head]):
                head = self.reserved = j
                shadow, extra = self._shadow_time(j)
        return False

    # -- run ------------------------------------------------------------------------------------
    def run(self, horizon_s: float | None):
        env = self.env
        env.process(self._arrivals())
        env.process(self._scheduler())
        if self.backfill and self.bf_interval_s:
            env.process(self._periodic(self.bf_interval_s, backfill=True))
        if self.sched_interval_s and self.defer:  # without defer the pass at every event already tests the queue
            env.process(self._periodic(self.sched_interval_s, backfill=False))
        env.process(self._sampler())
        if self.failures:
            env.process(self._failures())
        self._note()  # the empty cluster from time 0
        env.run(until=horizon_s if horizon_s is not None else self.all_done)
        self._advance()
        self._note()  # the state the last event left (the run stops before the pass it kicked)
        for j in list(self.running):  # close the open allocations at the end (progress kept, not lost)
            total = self.done[j] + (0 if self.in_restart[j] else (env.now - self.seg_start[j]) * self.speed[j])
            self.alloc_gpu_s[j] += (env.now - self.alloc_at[j]) * self.share[j]
            if self.reserve is not None:
                self.reserve_gpu_s[j] += (env.now - self.alloc_at[j]) * self._on_reserve(j)
            self.done[j] = min(total, self.dur[j])
        for j in [k[2] for k in self.queue]:
            self.queued_s[j] += env.now - self.enqueued_at[j]
        # repairs still under way at the end: their GPUs' down time so far (a repair adds its whole time when
        # it ends, after the end here)
        for t_end in np.unique(self.repair_end[~self.up]):
            nodes = np.flatnonzero(~self.up & (self.repair_end == t_end))
            self.down_gpu_s += (env.now - (t_end - self.rates.repair_s)) * self.topo.gpus_on(nodes)
        return env.now
