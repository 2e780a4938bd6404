"""``hnplan cluster simulate``: a job mix or trace on a shared cluster; utilisation, fragmentation,
queueing delay per class, JCT slowdown, goodput and preemptions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from hnplan import units
from hnplan.cli._app import (
    app,
    console,
    count,
    current_context,
    err_console,
    escape,
    handle_errors,
    kv_table,
    print_json,
)
from hnplan.cli._options import option_given
from hnplan.errors import InputError
from hnplan.formatting import counted

#: the largest --load taken: ten times the cluster, a queue that only grows; more is a percentage typed for a
#: fraction (85 for 0.85)
MAX_LOAD = 10.0

cluster_app = typer.Typer(
    help="Shared-cluster operations: a discrete-event simulation of a job mix.", no_args_is_help=True
)
app.add_typer(cluster_app, name="cluster")


def n_jobs_text(jobs: dict) -> str:
    """``rejected 1`` / ``rejected 3, unplaceable 2``: the turned-away counts of a summary's ``jobs``."""
    return ", ".join(f"{k} {v:,.0f}" for k in ("rejected", "unplaceable") if (v := jobs[k]))


def check_pairs(
    *, trace: Path | None, replications: int, backfill: bool, preemption: bool, failures: bool, defer: bool
) -> None:
    """Refuse a flag of ``cluster simulate`` that means nothing beside another one the user gave (or its
    default): one line naming both, :class:`hnplan.errors.InputError` (exit 2). Each pair was read and ignored
    before: the simulator runs no backfill pass without backfilling (so no period and no reservation to take
    over), exempts nothing from preemption when nothing is preempted, runs the main scheduler's periodic pass
    only with ``defer`` (:data:`hnplan.cluster.simulate.SCHED_INTERVAL_S`: the pass at every event already
    tests the queue), replays a trace's jobs in place of a mix's draw (drawing nothing then without failures:
    :mod:`hnplan.cluster.lifecycle` is the only user of the run's random stream), and runs one replication in
    one process."""
    ctx = current_context()

    def given(name: str) -> bool:
        return option_given(ctx, name)

    if not backfill and given("bf_interval"):
        raise InputError(
            "--bf-interval sets the period of backfill passes; with --no-backfill there are none: "
            "drop --bf-interval or --no-backfill"
        )
    if not backfill and given("strict_priority"):
        raise InputError(
            "--strict-priority lets inference take the GPUs drained for a backfill reservation; with --no-backfill "
            "no reservation is made: drop --strict-priority or --no-backfill"
        )
    if not preemption and given("preempt_exempt"):
        raise InputError(
            "--preempt-exempt is how long a job runs before inference may preempt it; with --no-preemption no job "
            "is preempted: drop --preempt-exempt or --no-preemption"
        )
    if not defer and given("sched_interval"):
        raise InputError(
            "--sched-interval is the period of the main scheduler's passes, which start jobs only with --defer "
            "(without it the pass at every event tests the queue): give --defer or drop --sched-interval"
        )
    if replications == 1 and given("workers"):
        raise InputError(
            "--workers runs replications side by side; --replications 1 is one run in one process: "
            "give --replications N (N > 1) or drop --workers"
        )
    if trace is not None and not failures and (replications > 1 or given("seed")):
        # a trace's jobs are read, not drawn; the seed draws only failures and software restarts
        flag = "--seed" if replications == 1 else "--replications"
        raise InputError(
            f"{flag} draws the runs' failures and restarts; with --trace and --no-failures nothing is drawn "
            f"(the trace's jobs are replayed), so every seed gives the same run: drop {flag} or --no-failures"
        )
    if trace is not None and given("mix"):
        raise InputError("--mix draws synthetic jobs; --trace replays the trace's jobs in their place: give one")


@cluster_app.command("simulate")
def simulate(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators in the cluster (whole scale-up domains)"),
    trace: Path = typer.Option(
        None,
        "--trace",
        help="job CSV: hnplan's columns, Alibaba openb_pod_list_*.csv, Helios cluster_log.csv, Acme trace_*.csv or Philly cluster_job_log",
    ),
    mix: str = typer.Option(
        "default", "--mix", help="synthetic job mix id (data/cluster_mixes/) or YAML path; not with --trace"
    ),
    policy: str = typer.Option(
        "topology-aware", "--policy", help="first-fit, best-fit, topology-aware or fragmentation-aware"
    ),
    days: float = typer.Option(None, "--days", help="simulate this many days of arrivals (> 0)"),
    jobs: int = typer.Option(
        None,
        "--jobs",
        parser=count(integer=True),
        metavar="COUNT",
        help="... or this many jobs (10k, 10000; default: 1 day)",
    ),
    seed: int = typer.Option(0, "--seed", help="random seed (a run is reproducible from it)"),
    replications: int = typer.Option(
        1,
        "--replications",
        min=1,
        max=1000,
        help="independent runs (seeds spawned from --seed); figures are their mean with a 95 % confidence interval",
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=256,
        help="processes running replications side by side (only with --replications > 1)",
    ),
    load: float = typer.Option(
        None,
        "--load",
        help=f"offered load [fraction of GPUs: 0.85 = 85 %], > 0 and at most {MAX_LOAD:g}; replaces the mix's",
    ),
    backfill: bool = typer.Option(True, "--backfill/--no-backfill", help="EASY backfilling behind a blocked job"),
    preemption: bool = typer.Option(True, "--preemption/--no-preemption", help="inference preempts lower classes"),
    failures: bool = typer.Option(True, "--failures/--no-failures", help="hardware failures and software restarts"),
    queue_depth: int = typer.Option(
        500,
        "--queue-depth",
        min=1,
        max=1_000_000,
        help="queued jobs a scheduler pass considers (default 500, Slurm's bf_max_job_test; 1 to 1,000,000)",
    ),
    bf_interval: float = typer.Option(
        0.0,
        "--bf-interval",
        min=0.0,
        help="seconds between backfill passes (default 0: at every event; Slurm's bf_interval is 30); "
        "not with --no-backfill",
    ),
    sched_interval: float = typer.Option(
        60.0,
        "--sched-interval",
        min=0.0,
        help="seconds between the main scheduler's periodic passes (default 60, Slurm's sched_interval); "
        "only with --defer, where they start jobs",
    ),
    defer: bool = typer.Option(
        False, "--defer", help="Slurm's SchedulerParameters=defer: no scheduler pass when a job is submitted"
    ),
    preempt_exempt: float = typer.Option(
        units.HOUR,  # hnplan.cluster.simulate.PREEMPT_EXEMPT_S (not imported here: the simulator loads pandas)
        "--preempt-exempt",
        min=0.0,
        help="seconds a job runs after it (re)starts before inference may preempt it (Slurm's PreemptExemptTime; "
        "default 3600, an assumption: one checkpoint period; 0: at once); not with --no-preemption",
    ),
    strict_priority: bool = typer.Option(
        False,
        "--strict-priority",
        help="production inference (higher priority) takes the GPUs drained for a training job's backfill "
        "reservation, as Slurm's strict priority order does, and preempts only when free GPUs cannot hold it "
        "(default: the reservation binds every later job until its job starts); not with --no-backfill",
    ),
    inference_reserve_gpus: int = typer.Option(
        0,
        "--inference-reserve-gpus",
        min=0,
        help="GPUs only inference may use (a serving partition or quota), rounded up to whole nodes: inference "
        "takes them first and preempts training only when they are full; training never sees them (default 0: none)",
    ),
    slicing: str = typer.Option(
        "fractional", "--slicing", help="GPU shares: fractional, mig (profiles of 1/7) or whole"
    ),
    serve: list[str] = typer.Option(
        None, "--serve", help="MODEL:QPS, a serving deployment sized by the inference planner (repeatable)"
    ),
    nodes: str = typer.Option(
        None,
        "--nodes",
        help="openb: the Alibaba trace's 1,213 nodes of seven GPU models in place of the system's "
        "(--gpus 6212 as listed, fewer scales the node counts; --system gives failure rates)",
    ),
    reference_system: str = typer.Option(
        None,
        "--reference-system",
        help="system id the jobs' durations were measured on: training and fine-tuning jobs run "
        "duration x (best-plan tokens/s there / on --system) at their GPU count (default: none, durations as given)",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Simulate a shared cluster: how busy it is, how long jobs wait, how many GPUs are stranded."""
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster import load_text, replicate_cluster, simulate_cluster
    from hnplan.cluster.replicate import bounds_of, ci_text, spread_text
    from hnplan.cluster.topology import check_cluster_gpus
    from hnplan.errors import CatalogError

    with handle_errors():
        check_pairs(
            trace=trace,
            replications=replications,
            backfill=backfill,
            preemption=preemption,
            failures=failures,
            defer=defer,
        )
        check_refs({"--system": ("systems", system)})
        if reference_system is not None:
            check_refs({"--reference-system": ("systems", reference_system)})
            if nodes is not None:
                raise InputError("--reference-system compares catalog designs; --nodes replaces the design: drop one")
        if days is not None and jobs is not None:
            raise InputError("give --days or --jobs, not both")
        if days is not None and days <= 0:
            raise InputError(f"--days must be > 0; got {days}")
        if load is not None and trace is not None:
            raise InputError(
                "--load scales a mix's arrivals; a trace's jobs arrive when it recorded them (drop --load)"
            )
        if load is not None and load <= 0:
            raise InputError(f"--load must be > 0; got {load:g}")
        if load is not None and load > MAX_LOAD:  # a percentage typed for a fraction: 85 for 0.85
            raise InputError(
                f"--load is a fraction of the GPUs (0.85 = 85 %), at most {MAX_LOAD:g}; got {load:g} "
                f"({load:.0%} of the cluster)"
            )
        cat = load_catalog()
        check_cluster_gpus(system, gpus, "--gpus", cat)  # the flag and the design's bound, before any simulation
        if trace is None:  # the mix the jobs are drawn from: a missing file or unknown id names the flag
            try:
                cluster_mix(mix, cat)
            except CatalogError as exc:
                raise CatalogError(f"--mix: {exc}", path=exc.path, entry=exc.entry, field=exc.field) from None
        services = []
        for item in serve or []:
            model_id, _, qps = item.rpartition(":")
            try:
                services.append((model_id, float(qps)))
            except ValueError:
                raise InputError(f"--serve takes MODEL:QPS (e.g. llama3.1-70b:30); got {item!r}") from None
            if not model_id or services[-1][1] <= 0:
                raise InputError(f"--serve takes MODEL:QPS with QPS > 0; got {item!r}")
            check_refs({f"--serve {item}": ("models", model_id)}, cat)  # an unknown model: the nearest ids
        kw = dict(
            seed=seed,
            serve=services,
            trace=trace,
            mix=mix,
            policy=policy,
            days=days,
            n_jobs=jobs,
            offered_load=load,
            backfill=backfill,
            preemption=preemption,
            failures=failures,
            queue_depth=queue_depth,
            bf_interval_s=bf_interval,
            sched_interval_s=sched_interval,
            defer=defer,
            preempt_exempt_s=preempt_exempt,
            slicing=slicing,
            nodes=nodes,
            catalog=cat,
        )
        if reference_system is not None:  # absent otherwise: the call is today's, bit for bit
            kw["reference_system"] = reference_system
        if strict_priority:
            kw["strict_priority"] = True
        if inference_reserve_gpus:
            kw["inference_reserve_gpus"] = inference_reserve_gpus
        if json_ or not console.is_terminal:
            r = (
                replicate_cluster(system, gpus, replications, workers=workers, **kw)
                if replications > 1
                else simulate_cluster(system, gpus, **kw)
            )
        else:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(
                TextColumn("simulating" if replications == 1 else f"simulating {replications} replications"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            ) as bar:
                task = bar.add_task("sim", total=1.0)
                if replications > 1:
                    r = replicate_cluster(
                        system,
                        gpus,
                        replications,
                        workers=workers,
                        progress=lambda x: bar.update(task, completed=x),
                        **kw,
                    )
                else:
                    r = simulate_cluster(
                        system, gpus, progress=lambda now, end: bar.update(task, completed=min(now / end, 1.0)), **kw
                    )
        d = r.to_json()
        turned = d["jobs"]["rejected"] + d["jobs"]["unplaceable"]
        if turned and turned == sum(d["jobs"].values()):  # nothing ran: no figure below means anything
            raise InputError(
                f"every job is larger than the cluster's {d['gpus']:,} GPUs or than every node it may run on "
                f"({n_jobs_text(d['jobs'])}): nothing ran; give more GPUs (--gpus)"
            )
        if json_:
            print_json(d)
            return
        s = d
        ci = d.get("ci95", {})

        def interval(key: str, fmt: str = ".1%") -> str:
            """' (95 % CI a to b)' over the replications; where the Student-t interval leaves the figure's range
            (a share below 0 % with few replications) the interval on the bounded scale, and why
            (:func:`hnplan.cluster.replicate.ci_text`)."""
            text = ci_text(ci.get(key), fmt, bounds_of(key))
            return f" ({text})" if text else ""

        load_row = load_text(s).split(" ", 1)  # the figure, then its notes

        def n(v) -> str:  # a count: as it is, or the mean of the replications' to one decimal
            return str(v) if isinstance(v, int) else f"{v:.1f}"

        rows = [
            ("utilisation (productive)", f"{s['utilisation']:.1%}" + interval("utilisation")),
            ("allocation rate", f"{s['allocation_rate']:.1%}" + interval("allocation_rate")),
            ("offered load", load_row[0] + interval("offered_load") + " ".join(["", *load_row[1:]])),
            (
                "demand in the window",
                f"{s['offered_load_window']:.1%}{interval('offered_load_window')} (the jobs' GPU-time inside the "
                "measuring window: the utilisation it approaches when nothing queues)",
            ),
            ("steady state", s["steady_state_note"]),
            (
                "fragmentation",
                f"{s['fragmentation']:.1%}{interval('fragmentation')} of GPUs free but unusable by any queued job "
                f"(max {s['fragmentation_max']:.1%})",
            ),
            (
                "blocked capacity",
                f"{s['blocked']:.1%}{interval('blocked')} of GPUs free while "
                + (
                    "a reserved job waits for the rest of its GPUs (the drain for a gang job"
                    if backfill
                    else "the first blocked job waits for the rest of its GPUs (no backfill: every job behind it "
                    "waits too"
                )
                + "; not in fragmentation)",
            ),
            (
                "idle while jobs queue",
                "{blocked:.1%} of GPU-time: drained for a reservation {drained:.1%}, fragmented (free, no queued "
                "job fits) {fragmented:.1%}, a queued job fits but not started yet {other_queued:.1%}; "
                "idle with the queue empty {idle_empty_queue:.1%}, busy {busy:.1%}, down {down:.1%}".format(
                    **s["capacity_gpu_s"]["share"]
                ),
            ),
            *(
                [
                    (
                        "inference reserve",
                        f"{s['reserve']['note']}; {s['reserve']['utilisation']:.1%}"
                        f"{interval('reserve.utilisation')} of it allocated (in the cluster's allocation too; "
                        "blocked capacity counts shared GPUs only)",
                    )
                ]
                if s.get("reserve")
                else []
            ),
            (
                "goodput",
                f"{s['goodput']:.1%}{interval('goodput')} of allocated GPU-time" if s["goodput"] is not None else "-",
            ),
            (
                "JCT bounded slowdown",
                f"mean {s['jct_bounded_slowdown']['mean']:.2f}{interval('jct_bounded_slowdown.mean', '.2f')}, "
                f"p95 {s['jct_bounded_slowdown']['p95']:.2f} (max(1, completion / max(run, "
                f"{s['jct_bounded_slowdown']['tau_s']:g} s)), Feitelson et al. 1997: the figure to compare by)"
                if s["jct_bounded_slowdown"]["mean"] is not None
                else "-",
            ),
            (
                "JCT slowdown",
                f"mean {s['jct_slowdown']['mean']:.2f}{interval('jct_slowdown.mean', '.2f')}, "
                f"p95 {s['jct_slowdown']['p95']:.2f} (unbounded: its mean is set by short jobs that waited)"
                if s["jct_slowdown"]["mean"] is not None
                else "-",
            ),
            (
                "preemptions / interruptions",
                f"{n(s['preemptions'])} / {n(s['interruptions'])} ({n(s['hardware_failures'])} hardware failures)",
            ),
            ("concurrent jobs", f"mean {s['concurrent_jobs']['mean']:.3g}, max {n(s['concurrent_jobs']['max'])}"),
            (
                "jobs",
                ", ".join(
                    f"{k} {n(v)}"
                    + (
                        f" (larger than the cluster's {s['gpus']:,} GPUs; {s['rejected_gpu_hours']:,.0f} GPU-hours "
                        "left out of the offered load)"
                        if k == "rejected" and v
                        else ""
                    )
                    + (
                        f" (no node of a GPU model they accept is large enough; {s['unplaceable_gpu_hours']:,.0f} "
                        "GPU-hours left out of the offered load)"
                        if k == "unplaceable"
                        else ""
                    )
                    for k, v in s["jobs"].items()
                    if v or k != "unplaceable"
                ),
            ),
        ]
        if "reference_system" in s:  # durations carried from the reference design
            speed = s["design_speed"]
            rows.append(
                (
                    "design speed",
                    (f"{speed:.2f}x" if speed is not None else "-")
                    + f" the speed on {s['reference_system']} (training jobs' best-plan tokens/s, weighted by GPU-time); "
                    "JCT of the finished jobs "
                    + (
                        f"mean {units.s_to_hours(s['jct_s']['mean']):,.2f} h, p95 {units.s_to_hours(s['jct_s']['p95']):,.2f} h"
                        if s["jct_s"]["mean"] is not None
                        else "-"
                    )
                    + (
                        f"; training jobs mean {units.s_to_hours(s['jct_s']['training_mean']):,.2f} h"
                        if s["jct_s"].get("training_mean") is not None
                        else ""
                    ),
                )
            )
        if "serving" in s:  # the --serve deployments, held from the start: what the mix's jobs share the rest with
            rows.append(
                (
                    "serving (held throughout)",
                    "; ".join(
                        f"{v['model']} at {v['qps']:g} requests/s: {counted(v['replicas'], 'replica')}, "
                        f"{counted(v['gpus'], 'GPU')}"
                        for v in s["serving"]
                    ),
                )
            )
        if "by_gpu_model" in s:
            rows.append(
                (
                    "utilisation by GPU model",
                    ", ".join(
                        f"{m} {v['utilisation']:.1%} of {v['gpus']:,}"
                        for m, v in s["by_gpu_model"].items()
                        if v["gpus"]
                    ),
                )
            )
        w = s["window_s"]
        span = f"{units.s_to_days(w):.1f} days" if units.s_to_days(w) >= 1 else f"{units.s_to_hours(w):.3g} h"
        size = f"{r.gpus:,} x {r.system}"
        if nodes is None and r.gpus != gpus:  # the cluster is built of whole scale-up domains: say the rounding
            dom = cat.system(system).scaleup_domain_gpus
            size += f" ({gpus:,} asked, rounded up to whole {dom:,}-GPU scale-up domains)"
        if replications > 1:
            rows.append(
                (
                    "replications",
                    f"{replications} independent runs (seeds spawned from {seed}); each figure is their mean, "
                    "a queueing or slowdown percentile the mean of the runs' percentiles",
                )
            )
        console.print(kv_table(f"{size}, {policy}, arrival window {span}", rows))
        t = Table(title=escape("queueing delay [s]"))  # "[s]" is not rich markup
        if replications > 1:
            t.caption = (
                "mean of the runs' percentiles; ± h: 95 % Student-t half-width; (a to b): the interval on the log "
                "scale where mean - h < 0; (± h crosses 0): a run at 0 s, too few runs for this spread"
            )
        for col in ("class", "p50", "p95", "p99"):
            t.add_column(col, justify="left" if col == "class" else "right")
        for cls, q in s["queue_delay_s"].items():
            t.add_row(
                cls,
                *(f"{q[k]:,.0f}" + spread_text(ci.get(f"queue_delay_s.{cls}.{k}")) for k in ("p50", "p95", "p99")),
            )
        console.print(t)
        t = Table(title=escape("queueing delay by job size [s]"), caption=t.caption)  # gang jobs wait for all GPUs
        for col in ("GPUs", "jobs", "p50", "p95", "p99"):
            t.add_column(col, justify="left" if col == "GPUs" else "right")
        for size, q in s["queue_delay_by_gpus_s"].items():
            path = f"queue_delay_by_gpus_s.{size}"
            t.add_row(
                size,
                n(q["jobs"]),
                *(f"{q[k]:,.0f}" + spread_text(ci.get(f"{path}.{k}")) for k in ("p50", "p95", "p99")),
            )
        console.print(t)
