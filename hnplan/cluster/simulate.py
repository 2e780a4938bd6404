"""``simulate_cluster``: a job mix or trace on a catalog system at a GPU count, under a policy; the
outcomes as a frozen :class:`ClusterResult` (summary, time series, per-job table)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cluster import runtime
from hnplan.cluster.engine import ClusterSim
from hnplan.cluster.gpu_types import NODE_LISTS, node_list
from hnplan.cluster.jobs import apply_slicing, check_days, check_jobs, job_columns, job_frame, take_rows
from hnplan.cluster.load import (  # noqa: F401  (public names of hnplan.cluster.simulate)
    MEASURE_RUN_TIMES,
    _window_demand,
    admitted_jobs,
    load_text,
    mix_steady_basis,
    offered_load_of,
    run_time_weighted_s,
    steady_state_of,
    steady_text,
    steady_window_s,
)
from hnplan.cluster.policies import POLICIES
from hnplan.cluster.reserve import reserve_nodes, reserve_summary
from hnplan.cluster.result import (  # noqa: F401  (public names of hnplan.cluster.simulate)
    JOB_UNITS,
    SERIES_UNITS,
    STATUS,
    ClusterResult,
    _pct,
    _plain,
    _result,
)
from hnplan.cluster.synthetic import capped_shares, synthetic_columns
from hnplan.cluster.topology import ClusterTopology, build_topology, check_cluster_gpus
from hnplan.errors import InputError, check_choice

if TYPE_CHECKING:
    import pandas as pd

QUEUE_DEPTH = 500
"""Queued jobs one scheduler pass considers, in priority then arrival order (the queue depth): Slurm's
backfill default, ``bf_max_job_test=500`` (slurm.conf(5), SchedulerParameters; Slurm scheduling
configuration guide, slurm.schedmd.com/sched_config.html). One pass here does both what Slurm's main
scheduler does on an event (start jobs in priority order until the first that cannot start, at most
``default_queue_depth=100`` jobs) and what its backfill plugin does (EASY backfilling behind that job):
every job after the first blocked one is a backfill candidate, so the depth that bounds the pass is the
backfill plugin's; the main scheduler's 100 is reached only when 100 jobs in a row start, which 500 also
covers."""
BF_INTERVAL_S = 30.0
"""Seconds between backfill passes in Slurm: its ``bf_interval`` default (slurm.conf(5), SchedulerParameters:
the seconds between backfill iterations, default 30). With it a job that only backfilling can start (behind
a blocked higher-priority job) waits for the next multiple of it. Not the simulation's default, which
backfills at every event (0): see docs/cluster.md, "Pass intervals", for why and what it moves."""
PREEMPT_EXEMPT_S = units.HOUR
"""Seconds a job runs after it starts (or restarts) before production inference may preempt it: Slurm's
``PreemptExemptTime`` (slurm.conf(5): the minimum run time of a job before it is considered for
preemption; unset by default, no exemption). hnplan's default, one hour, is an assumption: at least one
checkpoint period of the default mix's training (30 min) and fine-tuning (1 h) jobs, so a preempted job has
saved progress, and a whole-cluster job that drained the cluster for its reservation is not thrown out by
the next inference arrival; 0 gives Slurm's default."""
SCHED_INTERVAL_S = 60.0
"""Seconds between the main scheduler's full-queue passes: Slurm's ``sched_interval`` default
(slurm.conf(5), SchedulerParameters, default 60). Slurm's main scheduler also runs at every event
(submission, completion; Slurm scheduling configuration guide, slurm.schedmd.com/sched_config.html), as
hnplan's does, so the period matters only with ``defer`` (no pass at submission)."""
QUEUE_DEPTH_MAX = 1_000_000
"""The largest queue depth accepted: Slurm's own maximum for ``bf_max_job_test`` (slurm.conf(5);
``DEF_BF_MAX_JOB_TEST 500`` and ``MAX_BF_MAX_JOB_TEST 1000000`` in SchedMD/slurm,
src/plugins/sched/backfill/backfill.c)."""


def check_defer_interval(defer: bool, sched_interval_s: float, names=("defer", "sched_interval_s")) -> None:
    """Refuse ``defer`` with a main-scheduler period of 0: no pass at submission (``defer``) and none periodic,
    so a submitted job would wait for the next completion or repair to start (Slurm's ``sched_interval`` is a
    period > 0, default :data:`SCHED_INTERVAL_S`). ``names`` are the caller's words for the two settings:
    the parameters here, the command line's ``("--defer", "--sched-interval")``.

    Raises
    ------
    InputError
        ``sched_interval_s 0 with defer: no pass at submission and none periodic, ...``.
    """
    if defer and not sched_interval_s > 0:
        d, i = names
        raise InputError(
            f"{i} {sched_interval_s:g} with {d}: no pass at submission and none periodic, so a job would wait for "
            f"the next completion or repair to start; give a period > 0 (Slurm's sched_interval default is "
            f"{SCHED_INTERVAL_S:g}) or drop {d}"
        )


def resolve_jobs(
    cluster_gpus: int,
    *,
    trace=None,
    mix="default",
    jobs=None,
    days=None,
    seed=0,
    offered_load=None,
    catalog: Catalog | None = None,
) -> pd.DataFrame:
    """The job table of a run: a trace file or table (cut to ``jobs`` or ``days`` if given), or ``mix`` drawn
    for ``jobs`` jobs or ``days`` days (default 1 day); :func:`resolve_job_columns` as a DataFrame."""
    return job_frame(
        resolve_job_columns(
            cluster_gpus,
            trace=trace,
            mix=mix,
            jobs=jobs,
            days=days,
            seed=seed,
            offered_load=offered_load,
            catalog=catalog,
        )
    )


def resolve_job_columns(
    cluster_gpus: int,
    *,
    trace=None,
    mix="default",
    jobs=None,
    days=None,
    seed=0,
    offered_load=None,
    catalog: Catalog | None = None,
    domain_gpus: int | None = None,
) -> dict:
    """:func:`resolve_jobs` as a mapping of column name to numpy array (:func:`hnplan.cluster.jobs.job_columns`);
    a mix's draw takes no pandas (a trace file is read with it). With ``domain_gpus`` (the design's scale-up
    domain [GPU]) a trace job of at most ``cluster_gpus`` whose TP group is larger (a larger job is rejected at
    submission and counted), or a mix class whose ``tp_gpus`` is, is refused
    (:func:`hnplan.cluster.jobs.check_jobs`): the placement cannot keep such a group in one domain."""
    if trace is not None:
        if hasattr(trace, "columns"):  # a DataFrame
            t = trace
        else:
            from hnplan.cluster.traces import read_trace

            t = read_trace(trace, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
        t = check_jobs(job_columns(t), "trace", domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
        if days is not None:
            check_days(days)  # a window beyond the trace's longest span averages over years of an empty cluster
            t = take_rows(t, t["arrival_s"] < units.days_to_s(days))
        if jobs is not None:
            t = {c: v[:jobs] for c, v in t.items()}  # as DataFrame.head(jobs)
        return check_jobs(t, "trace")
    from hnplan.catalog.mixes import cluster_mix

    m = cluster_mix(mix, catalog)
    for c in m.classes:
        if domain_gpus is not None and c.tp_gpus > domain_gpus:
            raise InputError(
                f"mix {m.id}: class {c.cls}, field tp_gpus: a TP group of {c.tp_gpus} GPUs does not fit the design's "
                f"{domain_gpus}-GPU scale-up domain (the group must share one domain); give tp_gpus <= {domain_gpus} "
                "or a design with a larger domain"
            )
    if jobs is None and days is None:
        days = 1.0
    return synthetic_columns(m, cluster_gpus, jobs=jobs, days=days, seed=seed, offered_load=offered_load)


def simulate_cluster(
    system,
    gpus: int,
    jobs: pd.DataFrame | None = None,
    *,
    trace=None,
    mix="default",
    policy: str = "topology-aware",
    days: float | None = None,
    n_jobs: int | None = None,
    seed: int = 0,
    offered_load: float | None = None,
    demand_gpus: float | None = None,
    backfill: bool = True,
    preemption: bool = True,
    failures: bool = True,
    queue_depth: int = QUEUE_DEPTH,
    bf_interval_s: float = 0.0,
    sched_interval_s: float = SCHED_INTERVAL_S,
    defer: bool = False,
    preempt_exempt_s: float = PREEMPT_EXEMPT_S,
    strict_priority: bool = False,
    samples: int = 400,
    warmup: float = 0.2,
    slicing: str = "fractional",
    snapshot_at: float | None = None,
    serve: list | None = None,
    nodes: str | ClusterTopology | None = None,
    reference_system=None,
    inference_reserve_gpus: int = 0,
    catalog: Catalog | None = None,
    progress=None,
) -> ClusterResult:
    """Simulate a shared cluster of ``gpus`` accelerators of a catalog system under a job stream.

    Parameters
    ----------
    system : str or System
    gpus : int
        Accelerators (rounded up to whole scale-up domains).
    jobs : DataFrame, optional
        A job table (:mod:`hnplan.cluster.jobs`); else ``trace`` or ``mix``.
    trace : path, optional
        A CSV job table, an Alibaba ``openb_pod_list_*.csv``, a Helios ``cluster_log.csv``, an
        Acme ``trace_seren.csv``/``trace_kalos.csv`` or the Philly ``cluster_job_log`` (:func:`hnplan.cluster.traces.read_trace`).
    mix : str
        Synthetic mix id (``data/cluster_mixes/``) when neither ``jobs`` nor ``trace`` is given.
    policy : str
        One of :data:`hnplan.cluster.policies.POLICIES`.
    days, n_jobs : float, int
        With a mix: draw this many days of arrivals or this many jobs (neither: one day, as ``days=1``); with
        ``days`` the run stops at the horizon, else when every job has finished.
    seed : int
        Seeds the mix, failures and software restarts (a run is reproducible from it).
    offered_load : float, optional
        Replaces the mix's offered load [fraction of the GPUs].
    demand_gpus : float, optional
        The mix's offered demand as GPUs kept busy on average, whatever the cluster's size: the offered load is
        ``demand_gpus / GPUs`` (the GPUs rounded up to whole domains), so clusters of several sizes see one job
        stream (a mix only; not with ``offered_load``).
    backfill, preemption, failures : bool
        EASY backfilling behind a blocked job; production inference preempting lower classes;
        hardware failures (drain of the failure unit, repair) and software restarts.
    queue_depth : int
        Queued jobs a scheduler pass considers, in priority then arrival order, 1 to
        :data:`QUEUE_DEPTH_MAX`; default :data:`QUEUE_DEPTH`, Slurm's backfill default
        ``bf_max_job_test=500`` (slurm.conf(5)).
    bf_interval_s : float
        Seconds between backfill passes; 0 (default): backfill at every event, with the main pass. Slurm
        backfills every :data:`BF_INTERVAL_S` (its ``bf_interval`` default, 30 s).
    sched_interval_s : float
        Seconds between the main scheduler's periodic passes (default :data:`SCHED_INTERVAL_S`, Slurm's
        ``sched_interval``); they start jobs only with ``defer``, the main pass running at every event otherwise.
    defer : bool
        Slurm's ``SchedulerParameters=defer``: no pass when a job is submitted; it waits for the next periodic
        pass (main, or backfill with ``bf_interval_s > 0``) or another event (a job ending).
    preempt_exempt_s : float
        Seconds a job runs after it (re)starts before it may be preempted (Slurm's ``PreemptExemptTime``;
        default :data:`PREEMPT_EXEMPT_S`, one hour; 0: at once).
    strict_priority : bool
        Whether a job of higher priority than the one holding the backfill reservation (production
        inference over a training job) may take the GPUs drained for it, as Slurm's strict priority order
        does (:meth:`hnplan.cluster.engine.ClusterSim._pass`); default False: the reservation binds every
        later job until its job starts (EASY's guarantee; docs/cluster.md, "Utilisation against offered load").
    samples : int
        Time-series rows.
    slicing : str
        How GPU shares are granted: ``fractional``, ``mig`` or ``whole``
        (:func:`hnplan.cluster.jobs.apply_slicing`).
    snapshot_at : float, optional
        Keep the per-GPU allocation at this time [fraction of the window] (a fragmentation map).
    warmup : float
        Leading share of the window left out of the time averages (the cluster starts empty) [fraction].
    serve : list of (model, qps), optional
        Production serving deployments added to the jobs at time 0 for the whole window (or a week):
        each replica the inference planner sizes for ``qps`` is one inference job
        (:func:`hnplan.cluster.runtime.serving_jobs`).
    nodes : str or ClusterTopology, optional
        ``openb``: the Alibaba trace's 1,213 nodes of seven GPU models (:data:`NODE_LISTS`; node
        counts scaled by ``gpus / 6212``), or a topology built by hand, in place of the system's
        nodes (``gpus`` then unused); ``system`` still gives the failure rates, repair times and
        training speeds. Jobs with a ``gpu_spec`` go only to nodes of the models it names.
    reference_system : str or System, optional
        The design the jobs' ``duration_s`` were measured on (default None: on ``system`` itself, every
        duration as given). With it each training-class job's ideal duration on ``system`` is
        ``duration_s / ratio`` (:func:`hnplan.cluster.runtime.design_speed_ratio` at its GPU count);
        inference and development jobs keep theirs. The summary then has ``reference_system``,
        ``design_speed`` (the training classes' ratio [x], weighted by their reference GPU-time),
        ``design_speed_kept`` (``jobs``, ``gpu_time_share`` of that GPU-time and the ``gpus`` sizes of the
        training-class jobs that kept their durations, ratio 1.0: no catalogued representative model fits
        on both designs at their GPU count, not even the 1B fallback; none on the catalog's GPUs of 80 GB or more) and ``jct_s``
        (mean/p50/p95 of finished jobs' completion times [s], ``training_mean`` that of the finished training
        jobs, None without one); the per-job table a ``design_speed`` column.
        Not with ``nodes`` (a node list is not a catalog design).
    inference_reserve_gpus : int
        GPUs only inference jobs may use (a serving partition or quota), rounded up to whole nodes, the
        cluster's last (:mod:`hnplan.cluster.reserve`); inference takes them first and preempts lower
        classes only when neither they nor the shared GPUs fit it. Default 0: no reserve (today's run,
        bit for bit). With one, the summary has ``reserve`` (``gpus``, ``nodes``, ``utilisation``: its
        allocated share over the window [fraction], ``note``) and the per-job table a ``reserve_gpu_s`` column
        [GPU s]; the ``blocked`` figure counts shared GPUs only while a training-class job holds the reservation.
    progress : callable, optional
        Called with ``(now_s, end_s)`` as the run advances.

    Returns
    -------
    ClusterResult

    Raises
    ------
    InputError
        For an unknown policy or node list, ``gpus < 1``, ``gpus`` above the GPUs one scale-out fabric of the
        design joins (:func:`hnplan.cluster.topology.check_cluster_gpus`, naming ``gpus``), a negative reserve or one without a shared node left, a queue depth outside 1 to
        :data:`QUEUE_DEPTH_MAX`, a negative or non-finite scheduler interval, ``defer`` with ``sched_interval_s``
        0 (:func:`check_defer_interval`), bad jobs (a TP group larger than
        the scale-up domain among them), or
        ``reference_system`` with ``nodes``.
    CatalogError
        For an unknown system or mix.

    Examples
    --------
    >>> r = simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=200, seed=1)
    >>> 0 < r.summary["utilisation"] <= r.summary["allocation_rate"] <= 1
    True
    >>> r.summary["jobs"]["done"] + r.summary["jobs"]["rejected"]
    200
    """
    check_choice("policy", policy, POLICIES)
    if not 1 <= queue_depth <= QUEUE_DEPTH_MAX:
        raise InputError(
            f"queue_depth must be 1 to {QUEUE_DEPTH_MAX:,} jobs (Slurm's bf_max_job_test range); got {queue_depth}"
        )
    for name, v in (
        ("bf_interval_s", bf_interval_s),
        ("sched_interval_s", sched_interval_s),
        ("preempt_exempt_s", preempt_exempt_s),
    ):
        if not 0 <= v < math.inf:
            raise InputError(f"{name} must be a finite number of seconds >= 0; got {v}")
    check_defer_interval(defer, sched_interval_s)
    cat = catalog or load_catalog()
    sid = cat.system(system).id
    if nodes is None:
        check_cluster_gpus(system, gpus, "gpus", cat)  # one scale-out fabric's bound, as the CLI's --gpus
        topo = build_topology(system, gpus, cat)
    elif isinstance(nodes, ClusterTopology):
        topo = nodes
    else:
        check_choice("nodes", nodes, NODE_LISTS)
        topo = node_list(nodes, gpus)
    reserve = reserve_nodes(topo, inference_reserve_gpus)
    asked, basis = None, {}  # the load a mix aims at and its steady-state expectations (none for a trace or table)
    capped = (0.0, 0.0)  # a mix's draws above the cluster, run on all of it: shares of the jobs and the GPU-time
    jobs_from = "table" if jobs is not None else "trace" if trace is not None else "mix"
    if demand_gpus is not None:
        if offered_load is not None:
            raise InputError("give offered_load or demand_gpus, not both: each sets the arrival rate")
        if jobs_from != "mix":
            raise InputError("demand_gpus scales a mix's arrivals; a trace or table's jobs arrive as recorded")
        if not 0 < demand_gpus < math.inf:
            raise InputError(f"demand_gpus must be a finite number > 0; got {demand_gpus:g}")
        offered_load = demand_gpus / topo.gpus
    if jobs_from == "mix" and n_jobs is None and days is None:
        days = 1.0  # a mix's default, one day, is --days 1: drawn and stopped at its horizon, not drained
    if jobs is None:
        jobs = resolve_job_columns(
            topo.gpus,
            trace=trace,
            mix=mix,
            jobs=n_jobs,
            days=days,
            seed=seed,
            offered_load=offered_load,
            catalog=cat,
            domain_gpus=topo.domain_gpus,
        )
        if trace is None:
            from hnplan.catalog.mixes import cluster_mix

            m = cluster_mix(mix, cat)
            asked = offered_load if offered_load is not None else m.offered_load.value
            basis = mix_steady_basis(m, topo.gpus, asked)
            capped = capped_shares(m, topo.gpus)
    else:
        jobs = check_jobs(job_columns(jobs), domain_gpus=topo.domain_gpus, cluster_gpus=topo.gpus)
    serving: list[dict] = []  # what each --serve deployment holds, for the summary
    if serve:
        span = units.days_to_s(days) if days is not None else max(float(np.max(jobs["arrival_s"])), units.days_to_s(7))
        extra = [runtime.serving_jobs(system, m, float(q), duration_s=span, catalog=cat)[0] for m, q in serve]
        serve = [(cat.model(m).id, q) for m, q in serve]  # a model from a file by its id, as train and size name it
        serving_gpus = sum(float(e["gpus"].sum()) for e in extra)
        if serving_gpus > topo.gpus:
            parts = ", ".join(
                f"{m}:{q:g} {float(e['gpus'].sum()):,.0f}" for (m, q), e in zip(serve, extra, strict=True)
            )
            raise InputError(
                f"the serving deployments need {serving_gpus:,.0f} GPUs ({parts}) and the cluster has {topo.gpus:,}: "
                "lower the request rates or simulate more GPUs"
            )
        serving = [
            {"model": m, "qps": float(q), "replicas": len(e), "gpus": int(e["gpus"].sum())}
            for (m, q), e in zip(serve, extra, strict=True)
        ]
        import pandas as pd  # the serving planner's replicas are frames

        jobs = check_jobs(job_columns(pd.concat([job_frame(jobs).drop(columns="job_id"), *extra], ignore_index=True)))
    jobs = apply_slicing(jobs, slicing)
    ratio = None
    if reference_system is not None:  # durations measured on the reference: carried to this design
        if nodes is not None:
            raise InputError("a reference system compares catalog designs; a node list (nodes) is not one: drop one")
        ratio = runtime.design_speeds(system, reference_system, jobs, cat)
        ref_gpu_s = jobs["duration_s"] * jobs["gpus"]
        jobs = {**jobs, "duration_s": jobs["duration_s"] / ratio}
        if (ratio != 1.0).any():  # the mix's load and run times are the reference's: judge the jobs as run here
            asked, basis = None, {}
    horizon = units.days_to_s(days) if days is not None else None
    last_arrival = float(np.max(jobs["arrival_s"]))
    window = horizon if horizon is not None else max(last_arrival, 1.0)
    rates = runtime.failure_rates(system, topo.gpus, cat)
    if not 0 <= warmup < 1:
        raise InputError(f"warmup must be in [0, 1); got {warmup}")
    if not failures:
        rates = runtime.FailureRates(0.0, 0.0, rates.restart_s, rates.repair_s)

    def speed_fn(g, r, leaves):
        return runtime.training_speed(system, g, r, leaves, cat)

    sim = ClusterSim(
        topo,
        jobs,
        policy,
        speed_fn=speed_fn,
        rates=rates,
        seed=seed + 7919,
        backfill=backfill,
        preemption=preemption,
        failures=failures,
        queue_depth=queue_depth,
        bf_interval_s=bf_interval_s,
        sched_interval_s=sched_interval_s,
        defer=defer,
        preempt_exempt_s=preempt_exempt_s,
        strict_priority=strict_priority,
        sample_s=max(window / samples, 1.0),
        window_s=window,
        warmup_s=warmup * window,
        snapshot_s=None if snapshot_at is None else snapshot_at * window,
        progress=None if progress is None else (lambda now: progress(now, window)),
        reserve=reserve,
    )
    end = sim.run(horizon)
    out = _result(sim, jobs, topo, policy, window, warmup * window, end, asked, basis, jobs_from)
    if capped[0] > 0:  # a mix fitted to a larger cluster: its largest draws are cut to this one (synthetic_jobs)
        out.summary["capped"] = {"jobs_share": capped[0], "gpu_time_share": capped[1]}
    if nodes is not None:
        out.summary["rates_system"] = sid  # the catalog system the failure rates and speeds are of
    if serving:
        out.summary["serving"] = serving
    if reserve is not None:
        reserve_summary(out, sim, topo, inference_reserve_gpus, window - warmup * window)
    if ratio is not None:
        cols = out.job_columns
        cols["design_speed"] = ratio
        trains = np.isin(cols["cls"], ("training", "fine-tuning"))
        done = np.array(cols["status"], dtype=object) == "done"
        jct = cols["end_s"][done] - cols["arrival_s"][done]
        training = np.asarray(cols["cls"])[done] == "training"  # the class whose JCT the design speed moves most
        out.summary["reference_system"] = cat.system(reference_system).id
        w = ref_gpu_s[trains]
        out.summary["design_speed"] = float((ratio[trains] * w).sum() / w.sum()) if w.sum() > 0 else None
        # a training job for which no representative model fits on both designs at its GPU count (a 70B one on
        # 16 H100s is taken as 8B, an 8B one on one H100 as 1B, runtime.FALLBACK_MODEL) keeps its traced duration (ratio 1.0,
        # runtime.design_speed_ratio): said, not only averaged in
        other = runtime.system_key(system, cat) != runtime.system_key(reference_system, cat)
        kept = trains & (ratio == 1.0) & other
        out.summary["design_speed_kept"] = {
            "jobs": int(kept.sum()),
            "gpu_time_share": float(ref_gpu_s[kept].sum() / w.sum()) if w.sum() > 0 else 0.0,
            "gpus": [int(g) for g in np.unique(np.asarray(jobs["gpus"])[kept])],
        }
        out.summary["jct_s"] = {
            "mean": float(jct.mean()) if len(jct) else None,
            "p50": float(np.median(jct)) if len(jct) else None,
            "p95": float(np.percentile(jct, 95)) if len(jct) else None,
            "training_mean": float(jct[training].mean()) if training.any() else None,
        }
    return out
