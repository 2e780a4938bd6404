"""The outcome of a cluster simulation: :class:`ClusterResult` (summary, time series, per-job table) and how
it is assembled from a finished :class:`hnplan.cluster.engine.ClusterSim` (split from
:mod:`hnplan.cluster.simulate`, which re-exports its public names)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hnplan.cluster.daily import utilisation_by_day
from hnplan.cluster.engine import DONE, QUEUED, REJECTED, RUNNING, UNPLACEABLE, ClusterSim
from hnplan.cluster.gpu_types import by_model_summary
from hnplan.cluster.jobs import CLASSES, job_count
from hnplan.cluster.ledger import capacity_split, ledger_series, time_means  # noqa: F401  (public here as before)
from hnplan.cluster.load import (
    _window_demand,
    admitted_jobs,
    offered_load_of,
    steady_state_of,
    steady_text,
)
from hnplan.cluster.topology import MILLI

if TYPE_CHECKING:
    import pandas as pd

SERIES_UNITS = {
    "time_s": "s",
    "allocation": "fraction of GPUs",
    "utilisation": "fraction of GPUs",
    "queued": "jobs",
    **{f"queued_{c}": "jobs" for c in CLASSES},
    "fragmentation": "fraction of GPUs",
    "free": "fraction of GPUs",
    "running": "jobs",
    "down": "fraction of GPUs",
    "blocked": "fraction of GPUs",
    "queued_free": "fraction of GPUs",
}
JOB_UNITS = {
    "arrival_s": "s",
    "duration_s": "s",
    "start_s": "s",
    "end_s": "s",
    "queue_delay_s": "s",
    "lost_work_s": "s",
    "allocated_gpu_s": "GPU s",
    "useful_gpu_s": "GPU s",
    "slowdown": "x",
    "bounded_slowdown": "x",
    "speed": "fraction",
    # columns present only with --inference-reserve-gpus / --reference-system
    "reserve_gpu_s": "GPU s",
    "design_speed": "x (training speed on the simulated design over the reference system)",
}
#: the run time below which the bounded slowdown divides by this instead [s] (Feitelson et al. 1997 Sec. 4.2
#: and Feitelson 2001: 10 s, "interactive" jobs for which waiting counts less than for batch ones)
BOUNDED_SLOWDOWN_TAU_S = 10.0
#: the job-size classes of the queueing delay by size [GPUs asked, upper bound of each]: Jeon et al.'s 1, 2-4,
#: 5-8 and more than 8 GPUs (USENIX ATC 2019, Fig. 3, the queueing delay on the Philly trace; the classes as the
#: authors' analysis notebook draws it, msr-fiddle/philly-traces analysis/Philly Trace Analysis.ipynb,
#: get_bucket_from_num_gpus, @ 29a1b87fa2d9ed80b83c9e3a37f3a88d382b031d), the last split at 64 and 512 GPUs
#: for today's gang jobs; a share of one GPU (Philly had none) counts as 1
SIZE_CLASSES = ((1, "1"), (4, "2-4"), (8, "5-8"), (64, "9-64"), (512, "65-512"), (math.inf, "513+"))
SUMMARY_UNITS = {
    "utilisation": "fraction of installed GPU-time",
    "allocation_rate": "fraction of installed GPU-time",
    "offered_load": "fraction of installed GPU-time",
    "fragmentation": "fraction of GPUs (time mean)",
    "blocked": "fraction of GPUs (time mean)",
    "queue_delay_s": "s",
    "queue_delay_by_gpus_s": "s (p50/p95/p99) and count (jobs), by GPUs asked",
    "jct_slowdown": "x (completion time over ideal run time, finished jobs)",
    "jct_bounded_slowdown": "x (max(1, completion time over max(ideal run time, tau_s)), finished jobs); tau_s in s",
    "capacity_gpu_s": "GPU s over the measuring window (integrated over every state change); shares: fraction of installed GPU-time",
    "goodput": "fraction of the jobs' allocated GPU-time, over the whole run (warm-up included)",
    "lost_work_gpu_s": "GPU s",
    "down_gpu_s": "GPU s",
    "preemptions": "count",
    "utilisation_by_day": "per calendar day from time 0: allocated, down [fraction of GPUs]; *_s in s",
}
"""Units of the summary's figures (also ``summary["units"]`` and the ``--json`` output's ``units``)."""
SERIES_COLUMNS = tuple(SERIES_UNITS)
"""The time series' columns, in order."""
STATUS = {
    DONE: "done",
    RUNNING: "running",
    QUEUED: "queued",
    REJECTED: "rejected",
    UNPLACEABLE: "unplaceable",
    0: "not arrived",
}


@dataclass(frozen=True)
class ClusterResult:
    """Outcomes of one simulated cluster.

    The summary is computed from numpy arrays; the time series and the per-job table are pandas DataFrames
    built on first access (a run that prints its summary never imports pandas).

    Attributes
    ----------
    summary : dict
        ``utilisation`` (productive GPU-time / installed GPU-time over the window), ``allocation_rate``
        (allocated / installed), ``offered_load`` (:func:`offered_load_of`: the GPU-hours the jobs demand
        per GPU-hour of capacity over the arrival window; above 1 the cluster is oversubscribed),
        ``oversubscribed`` (``offered_load > 1``), ``offered_load_asked`` (the load a mix aims its arrivals
        at, the mix's or ``offered_load``; None for a trace or a given job table), ``jobs_from`` (``"mix"``,
        ``"trace"`` or ``"table"``: where the jobs came from), ``offered_load_window`` (the part of it inside the measuring window, had every job
        started on arrival: the bound utilisation approaches when nothing queues), ``steady_state``,
        ``run_time_weighted_s``, ``run_time_weighted_basis``, ``run_time_weighted_drawn_s``,
        ``steady_window_s``, ``steady_jobs``, ``steady_short`` (:func:`steady_state_of`: false when the
        window is shorter than five GPU-time-weighted run times or the offered load is 100 % or more;
        for a mix both from the mix's expectations, so the remedy is the same for every seed), ``steady_state_note`` (:func:`steady_text`: the
        verdict, why and the remedy in one line), ``fragmentation`` (time-mean share of installed GPUs free but usable by
        no queued job; ``fragmentation_max`` its largest; these time means are integrated over every state
        change, :func:`time_means`), ``blocked`` (time-mean share of installed GPUs free, not counted as fragmentation,
        while the job holding the backfill reservation, or without backfilling the first blocked job, waits: the
        drain for a gang job), ``queue_delay_s`` (class -> p50/p95/p99 [s]; jobs still queued at the end count
        with their wait so far), ``queue_delay_by_gpus_s`` (the same per job-size class, :func:`queue_delay_by_size`,
        with ``jobs``), ``jct_slowdown`` (mean/p50/p95 of completion time over ideal run time,
        finished jobs; unbounded: a job of seconds that waited minutes counts hundreds), ``jct_bounded_slowdown``
        (:func:`bounded_slowdown`, tau 10 s: mean/p50/p95 and ``tau_s``; the figure to compare designs and
        policies by), ``capacity_gpu_s`` (:func:`capacity_split`: installed GPU-time split into busy, drained
        for a reservation, fragmented, other idle with jobs queued, idle with the queue empty and down, with
        ``blocked`` their sum while jobs are queued, and each as a share), ``utilisation_by_day`` (allocated and
        down shares per calendar day, :func:`hnplan.cluster.daily.utilisation_by_day`), ``units`` (:data:`SUMMARY_UNITS`), ``goodput`` (useful / allocated GPU-time), ``preemptions``, ``interruptions``,
        ``hardware_failures``, ``jobs`` (status counts; ``rejected``: larger than the cluster,
        ``unplaceable``: no node of a GPU model the job accepts is large enough), ``rejected_gpu_hours`` and
        ``unplaceable_gpu_hours`` (their demand [GPU h], left out of the offered load, the demand in the window
        and the steady-state test: :func:`hnplan.cluster.load.admitted_jobs`), ``concurrent_jobs``
        (time mean, max), window and run metadata; on a cluster of several GPU models ``by_gpu_model``
        (model -> ``gpus``, ``utilisation``, ``allocation_rate`` of that model's GPUs).
    timeseries : DataFrame
        One row per sample: :data:`SERIES_UNITS` (``attrs["units"]``); from ``series_rows``.
    jobs : DataFrame
        One row per job: the input columns plus ``status, start_s, end_s, queue_delay_s, lost_work_s,
        allocated_gpu_s, useful_gpu_s, slowdown, speed, preemptions, interruptions`` (``attrs["units"]``); from
        ``job_columns``.
    series_rows : list of tuple
        The time series' rows (:data:`SERIES_COLUMNS`).
    job_columns : dict
        The per-job table's columns (name -> array, ``status`` a list of str), the job table's first
        (``input_columns`` of them); columns added here before ``jobs`` is first read appear in it.
    snapshot : DataFrame or None
        With ``snapshot_at``: one row per GPU at the first sample at or after that time: ``node, gpu,
        domain, leaf, rack, used`` [fraction of the GPU], ``up`` (and ``gpu_model`` on a cluster of
        several models); ``attrs["time_s"]``.
    """

    system: str
    gpus: int
    policy: str
    summary: dict
    series_rows: list = field(repr=False)
    job_columns: dict = field(repr=False)
    input_columns: int = field(repr=False)
    snapshot: pd.DataFrame | None = field(default=None, repr=False)

    @functools.cached_property
    def timeseries(self) -> pd.DataFrame:
        import pandas as pd

        ts = pd.DataFrame(self.series_rows, columns=list(SERIES_COLUMNS))
        ts.attrs["units"] = SERIES_UNITS
        return ts

    @functools.cached_property
    def jobs(self) -> pd.DataFrame:
        import pandas as pd

        names = list(self.job_columns)
        out = pd.DataFrame({c: self.job_columns[c] for c in names[: self.input_columns]})
        for c in names[self.input_columns :]:  # added as the simulation's outcome columns
            out[c] = self.job_columns[c]
        out.attrs["units"] = JOB_UNITS
        return out

    def to_json(self) -> dict:
        """The summary as plain JSON types."""
        return _plain(self.summary)


def _plain(o):
    if isinstance(o, dict):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, (np.floating, float)):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.integer):
        return int(o)
    return o


def _pct(x: np.ndarray) -> dict:
    if not len(x):
        return {"p50": None, "p95": None, "p99": None}
    p = np.percentile(x, [50, 95, 99])
    return {"p50": float(p[0]), "p95": float(p[1]), "p99": float(p[2])}


def size_class(gpus) -> np.ndarray:
    """The size class (:data:`SIZE_CLASSES`) of jobs asking for ``gpus`` GPUs each, as labels, shape of ``gpus``.

    >>> size_class([1, 2, 8, 9, 72, 1024]).tolist()
    ['1', '2-4', '5-8', '9-64', '65-512', '513+']
    """
    edges = np.array([b for b, _ in SIZE_CLASSES[:-1]], float)
    labels = np.array([name for _, name in SIZE_CLASSES], dtype=object)
    return labels[np.searchsorted(edges, np.asarray(gpus, float), side="left")]


def queue_delay_by_size(gpus, delay_s) -> dict:
    """Queueing delay percentiles per job-size class: class -> ``jobs`` (count), ``p50``/``p95``/``p99`` [s];
    only classes with jobs, smallest first.

    Under gang scheduling a job waits until all its GPUs are free at once, so the wait grows with its size
    (Jeon et al., USENIX ATC 2019, Fig. 3: the queueing delay's CDF by job size on Philly); the per-class
    figure mixes the sizes and hides it. The authors' notebook (:data:`SIZE_CLASSES`) counts each wait of a job (to its first attempt, and after a
    failed attempt to the next) as its own sample; here a job's waits are added up (``queued_s``).

    Parameters
    ----------
    gpus, delay_s : array_like
        GPUs each job asks for and its time queued [s] (jobs that started or still wait), same shape.

    >>> queue_delay_by_size([1, 1, 16], [0.0, 100.0, 3600.0])["9-64"]
    {'jobs': 1, 'p50': 3600.0, 'p95': 3600.0, 'p99': 3600.0}
    """
    cls, d = size_class(gpus), np.asarray(delay_s, float)
    return {
        name: {"jobs": int((cls == name).sum()), **_pct(d[cls == name])}
        for _, name in SIZE_CLASSES
        if (cls == name).any()
    }


def bounded_slowdown(wait_s, run_s, tau_s: float = BOUNDED_SLOWDOWN_TAU_S) -> np.ndarray:
    """The bounded slowdown of jobs, ``max(1, (wait + run) / max(run, tau))`` [x], shape of the inputs.

    The plain slowdown ``(wait + run) / run`` of a 1-second job that waited 10 minutes is 601; a few such
    jobs make its mean, while its median stays 1. Bounding the divisor by ``tau`` (10 s: shorter jobs count as
    if they ran 10 s) keeps the mean a measure of the jobs users wait for (Feitelson, Rudolph, Schwiegelshohn,
    Sevcik and Wong, "Theory and practice in parallel job scheduling", JSSPP 1997, Sec. 4.2; Feitelson,
    "Metrics for parallel job scheduling and their convergence", JSSPP 2001, which uses tau = 10 s).

    Parameters
    ----------
    wait_s, run_s : array_like
        Time from submission to start and run time [s].
    tau_s : float
        The least run time the slowdown divides by [s].

    >>> bounded_slowdown([600.0, 600.0, 0.0, 3600.0], [1.0, 100.0, 5.0, 3600.0]).tolist()  # 601/10; 700/100; 1; 2
    [60.1, 7.0, 1.0, 2.0]
    """
    w, r = np.asarray(wait_s, float), np.asarray(run_s, float)
    return np.maximum((w + r) / np.maximum(r, tau_s), 1.0)


def _result(
    sim: ClusterSim,
    jobs: dict,
    topo,
    policy: str,
    window: float,
    warm: float,
    end: float,
    asked=None,
    basis: dict | None = None,
    jobs_from: str = "table",
) -> ClusterResult:
    out = dict(jobs)
    n_input = len(out)
    status = [STATUS[s] for s in sim.status]
    out["status"] = status
    out["start_s"], out["end_s"] = sim.first_start, sim.end
    out["queue_delay_s"] = sim.queued_s
    out["lost_work_s"] = sim.lost_s
    out["allocated_gpu_s"] = sim.alloc_gpu_s
    out["useful_gpu_s"] = sim.done * sim.share
    out["slowdown"] = (sim.end - sim.arrival) / sim.dur
    # wait + ideal run time = completion time; the run time the ideal one, as in the plain slowdown
    out["bounded_slowdown"] = bounded_slowdown(sim.end - sim.arrival - sim.dur, sim.dur)
    out["speed"] = sim.speed
    out["preemptions"], out["interruptions"] = sim.preempted, sim.interrupted
    cap = topo.gpus * (window - warm)
    st = np.array(status, dtype=object)
    waited = np.isin(st, ["done", "running", "queued"])
    sd = out["slowdown"][st == "done"]
    bsd = out["bounded_slowdown"][st == "done"]
    ledger = ledger_series(sim)
    means = time_means(ledger, warm, window)
    alloc_total = float(np.nansum(out["allocated_gpu_s"]))  # a column's sum as pandas takes it: NaN skipped
    admitted, turned_gpu_h = admitted_jobs(jobs, st)
    load = offered_load_of(admitted, topo.gpus, window)
    cls, delay = np.asarray(jobs["cls"])[waited], out["queue_delay_s"][waited]
    summary = {
        "system": topo.system_id,
        "gpus": topo.gpus,
        "policy": policy,
        "scheduler": {
            "bf_interval_s": sim.bf_interval_s,
            "sched_interval_s": sim.sched_interval_s,
            "defer": sim.defer,
            "preempt_exempt_s": sim.preempt_exempt_s,
            "strict_priority": sim.strict_priority,
        },
        "window_s": float(window),
        "warmup_s": float(warm),
        "end_s": float(end),
        "offered_load": load,
        "oversubscribed": load > 1,
        "offered_load_window": _window_demand(admitted, warm, window) / cap,
        **steady_state_of(jobs if not job_count(admitted) else admitted, load, window, warm / window, **(basis or {})),
        "utilisation": float(sim.int_prod / cap),
        "allocation_rate": float(sim.int_alloc / cap),
        **{k: v for k, v in means.items() if k != "concurrent_jobs"},
        "queue_delay_s": {c: _pct(delay[cls == c]) for c in CLASSES if (cls == c).any()},
        "queue_delay_by_gpus_s": queue_delay_by_size(np.asarray(jobs["gpus"])[waited], delay),
        "jct_slowdown": {
            "mean": float(sd.mean()) if len(sd) else None,
            "p50": float(np.median(sd)) if len(sd) else None,
            "p95": float(np.percentile(sd, 95)) if len(sd) else None,
        },
        "jct_bounded_slowdown": {
            "mean": float(bsd.mean()) if len(bsd) else None,
            "p50": float(np.median(bsd)) if len(bsd) else None,
            "p95": float(np.percentile(bsd, 95)) if len(bsd) else None,
            "tau_s": BOUNDED_SLOWDOWN_TAU_S,
        },
        "capacity_gpu_s": capacity_split(ledger, topo.gpus, warm, window),
        "utilisation_by_day": utilisation_by_day(ledger, window, warm),
        # at most 1: the useful and the allocated GPU-time are summed along different paths, and with no work
        # lost their ratio rounded to 1 + 2e-16
        "goodput": min(1.0, float(np.nansum(out["useful_gpu_s"])) / alloc_total) if alloc_total > 0 else None,
        "preemptions": int(sim.preempted.sum()),
        "interruptions": int(sim.interrupted.sum()),
        "hardware_failures": sim.hw_failures,
        "lost_work_gpu_s": float((sim.lost_s * sim.share).sum()),
        "down_gpu_s": sim.down_gpu_s,
        "concurrent_jobs": means["concurrent_jobs"],
        "jobs": {s: int((st == s).sum()) for s in ("done", "running", "queued", "rejected", "unplaceable")},
        **turned_gpu_h,
        "offered_load_asked": asked,
        "jobs_from": jobs_from,
        "units": dict(SUMMARY_UNITS),
    }
    summary["steady_state_note"] = steady_text(summary)
    if sim.by_model is not None:
        summary["by_gpu_model"] = by_model_summary(topo, sim.by_model, window - warm)
    snap = None
    if sim.snapshot is not None:
        import pandas as pd

        t, free, up = sim.snapshot
        n, g = np.divmod(np.arange(free.size), free.shape[1])
        snap = pd.DataFrame(
            {
                "node": n,
                "gpu": g,
                "domain": topo.domain[n],
                "leaf": topo.leaf[n],
                "rack": topo.rack[n],
                "used": 1 - free.ravel() / MILLI,
                "up": up[n],
            }
        )
        if len(topo.gpu_models) > 1:
            snap["gpu_model"] = np.asarray(topo.gpu_models)[topo.models[n]]
        if topo.node_slots is not None:  # slots a smaller node lacks are no GPUs
            snap = snap[g < topo.node_slots[n]].reset_index(drop=True)
        snap.attrs["time_s"] = t
    return ClusterResult(topo.system_id, topo.gpus, policy, summary, sim.samples, out, n_input, snap)
