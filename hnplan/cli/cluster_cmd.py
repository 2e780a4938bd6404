"""``hnplan cluster simulate``: a job mix or trace on a shared cluster; utilisation, fragmentation,
queueing delay per class, JCT slowdown, goodput and preemptions."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from hnplan import units
from hnplan.cli._app import (
    app,
    count,
    current_context,
    err_console,
    handle_errors,
    print_json,
)
from hnplan.cli._options import option_given
from hnplan.errors import InputError

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
    *,
    trace: Path | None,
    replications: int,
    backfill: bool,
    preemption: bool,
    failures: bool,
    defer: bool,
    sched_interval: float | None = None,
) -> None:
    """Refuse a flag of ``cluster simulate`` that means nothing beside another one the user gave (or its
    default): one line naming both, :class:`hnplan.errors.InputError` (exit 2). Each pair was read and ignored
    before: the simulator runs no backfill pass without backfilling (so no period and no reservation to take
    over), exempts nothing from preemption when nothing is preempted, runs the main scheduler's periodic pass
    only with ``defer`` (:data:`hnplan.cluster.simulate.SCHED_INTERVAL_S`: the pass at every event already
    tests the queue; with ``defer`` a period of 0 runs no main pass at all, so a job waits for the next
    completion or repair, and is refused), replays a trace's jobs in place of a mix's draw (drawing nothing then without failures:
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
    if sched_interval is not None:  # the simulator's own rule, in the flags' names
        from hnplan.cluster.simulate import check_defer_interval

        check_defer_interval(defer, sched_interval, ("--defer", "--sched-interval"))
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
    seed: int = typer.Option(0, "--seed", min=0, help="random seed, >= 0 (a run is reproducible from it)"),
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
    demand_gpus: float = typer.Option(
        None,
        "--demand-gpus",
        help="the mix's demand as GPUs kept busy on average, whatever --gpus (the load is it over the GPUs; "
        "compare sizes at one job stream); not with --load",
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
        None,
        "--serve",
        help="MODEL:QPS [requests/s], a serving deployment sized by the inference planner for 1,000-token prompts "
        "and 200-token answers at TTFT 1 s and TPOT 50 ms in fp8 (repeatable)",
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
    from hnplan.cluster import replicate_cluster, simulate_cluster
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
            sched_interval=sched_interval,
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
        if demand_gpus is not None:
            if load is not None:
                raise InputError("give --load or --demand-gpus, not both: each sets the arrival rate")
            if trace is not None:
                raise InputError("--demand-gpus scales a mix's arrivals; a trace's jobs arrive as recorded")
            if not 0 < demand_gpus < math.inf:
                raise InputError(f"--demand-gpus must be a finite number > 0; got {demand_gpus:g}")
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
        else:  # a missing file, a folder or an empty file names the flag too, before the catalog's work
            from hnplan.cluster.trace_csv import check_trace_file

            try:
                check_trace_file(trace)
            except InputError as exc:
                raise InputError(f"--trace: {exc}", path=trace) from None
        services = []
        for item in serve or []:
            model_id, _, qps = item.rpartition(":")
            try:
                services.append((model_id, float(qps)))
            except ValueError:
                raise InputError(f"--serve takes MODEL:QPS (e.g. llama3.1-70b:30); got {item!r}") from None
            if not model_id:
                raise InputError(f"--serve takes MODEL:QPS, a model id before the colon; got {item!r}")
            if not 0 < services[-1][1] < math.inf:  # nan and inf are no request rate to size replicas for
                raise InputError(f"--serve takes MODEL:QPS with QPS a finite number > 0; got {item!r}")
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
        if demand_gpus is not None:
            kw["demand_gpus"] = demand_gpus
        if strict_priority:
            kw["strict_priority"] = True
        if inference_reserve_gpus:
            kw["inference_reserve_gpus"] = inference_reserve_gpus
        if json_ or not err_console.is_terminal:  # the bar goes to stderr: a table sent to a file keeps it
            r = (
                replicate_cluster(system, gpus, replications, workers=workers, **kw)
                if replications > 1
                else simulate_cluster(system, gpus, **kw)
            )
        else:  # a bar on stderr once the run has lasted a second (reading, drawing and simulating alike)
            from hnplan.cli._progress import delayed_progress

            label = "simulating" if replications == 1 else f"simulating {replications} replications"
            with delayed_progress(label) as update:
                if replications > 1:
                    r = replicate_cluster(system, gpus, replications, workers=workers, progress=update, **kw)
                else:
                    r = simulate_cluster(system, gpus, progress=lambda now, end: update(now / end), **kw)
        d = r.to_json()
        turned = d["jobs"]["rejected"] + d["jobs"]["unplaceable"]
        if turned and turned == sum(d["jobs"].values()):  # nothing ran: no figure below means anything
            from hnplan.cli.cluster_text import rejected_bound

            remedy = "give more GPUs (--gpus)" + (" or a smaller --inference-reserve-gpus" if "reserve" in d else "")
            raise InputError(
                f"every job is larger than {rejected_bound(d)} or than every node it may run on "
                f"({n_jobs_text(d['jobs'])}): nothing ran; {remedy}"
            )
        if json_:
            print_json(d)
            return
        from hnplan.cli.cluster_text import print_simulation

        print_simulation(
            r,
            d,
            system=system,
            gpus=gpus,
            policy=policy,
            seed=seed,
            replications=replications,
            backfill=backfill,
            nodes=nodes,
            cat=cat,
        )


@cluster_app.command("size")
def size(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    demand_gpus: float = typer.Option(
        ..., "--demand-gpus", help="GPUs the mix keeps busy on average, whatever the cluster's size (> 0)"
    ),
    target_wait_h: float = typer.Option(..., "--target-wait-h", help="queueing delay not to exceed [h] (>= 0)"),
    cls: str = typer.Option(
        "training", "--class", help="job class judged: inference, training, fine-tuning or development"
    ),
    quantile: str = typer.Option("p95", "--quantile", help="percentile of its queueing delay: p50, p95 or p99"),
    mix: str = typer.Option("default", "--mix", help="synthetic job mix id (data/cluster_mixes/) or YAML path"),
    policy: str = typer.Option(
        "topology-aware", "--policy", help="first-fit, best-fit, topology-aware or fragmentation-aware"
    ),
    days: float = typer.Option(
        14.0,
        "--days",
        help="days of arrivals each size is simulated for (> 0; default 14, the default mix's steady state)",
    ),
    replications: int = typer.Option(
        1, "--replications", min=1, max=100, help="independent runs per size, their percentiles averaged"
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="random seed, >= 0 (every size tried sees the same jobs)"),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """How many GPUs a shared cluster needs so that a job class waits at most a target, at a fixed demand: the
    smallest cluster (whole scale-up domains) whose simulated queueing delay meets it, and every size tried."""
    from rich.markup import escape
    from rich.table import Table

    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster.sizing import check_sizing_inputs, size_for_wait
    from hnplan.errors import CatalogError

    with handle_errors():
        check_refs({"--system": ("systems", system)})
        flags = {"cls": "--class", "quantile": "--quantile", "demand_gpus": "--demand-gpus", "days": "--days"}
        check_sizing_inputs(
            cls, quantile, demand_gpus, target_wait_h, days, {**flags, "target_wait": "--target-wait-h"}
        )
        cat = load_catalog()
        try:
            cluster_mix(mix, cat)
        except CatalogError as exc:
            raise CatalogError(f"--mix: {exc}", path=exc.path, entry=exc.entry, field=exc.field) from None
        kw = dict(cls=cls, quantile=quantile, days=days, replications=replications, seed=seed, mix=mix, policy=policy)
        if json_ or not err_console.is_terminal:
            r = size_for_wait(system, demand_gpus, target_wait_h * units.HOUR, catalog=cat, **kw)
        else:
            from hnplan.cli._progress import delayed_progress

            with delayed_progress("simulating cluster sizes") as update:
                r = size_for_wait(system, demand_gpus, target_wait_h * units.HOUR, catalog=cat, progress=update, **kw)
        if json_:
            print_json(r)
            return
        from hnplan.cli._app import console

        t = Table(
            title=f"{r['system']}: {cls} {quantile} wait at a demand of {demand_gpus:,.0f} GPUs, {days:g} days each"
        )
        for col in ("GPUs", f"{quantile} wait [h]", "meets", "utilisation", "offered load", "steady state"):
            t.add_column(escape(col), justify="right")
        for row in sorted(r["tried"], key=lambda x: x["gpus"]):
            t.add_row(
                f"{row['gpus']:,}",
                f"{row['wait_s'] / units.HOUR:,.2f}",
                "yes" if row["meets"] else "no",
                f"{row['utilisation']:.1%}",
                f"{row['offered_load']:.1%}",
                "yes" if row["steady_state"] else "no",
            )
        console.print(t)
        console.print(
            f"{r['gpus']:,} GPUs of {r['system']} keep the {cls} jobs' {quantile} queueing delay at "
            f"{r['wait_s'] / units.HOUR:,.2f} h, within {target_wait_h:g} h, at {r['utilisation']:.1%} utilisation "
            f"(the smallest of the sizes simulated that does; one seed's estimate"
            + (f", {replications} replications averaged" if replications > 1 else "")
            + ": near the answer a size's wait is noisy, the table shows how flat the curve is)",
            highlight=False,
        )
        if r["largest_job_gpus"] > demand_gpus:
            console.print(
                f"sizes start at {min(t['gpus'] for t in r['tried']):,} GPUs, the fewest whole domains that hold the "
                f"mix's largest job ({r['largest_job_gpus']:,.0f} GPUs): a smaller cluster would cut it to itself "
                "and see another job stream",
                highlight=False,
            )
