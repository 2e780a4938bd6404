"""The utilisation a design reaches under a job mix, from a cached simulation long enough for steady
state, for the cost planners (``hnplan tco --utilisation simulated``, the procurement what-if) in place
of an assumed figure."""

from __future__ import annotations

from collections.abc import Callable

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.mixes import cluster_mix
from hnplan.cluster.load import mix_steady_basis, steady_window_days, steady_window_s
from hnplan.cluster.replicate import BOUNDS, ci_text, mean_ci, replication_seeds
from hnplan.cluster.simulate import simulate_cluster
from hnplan.cluster.topology import CLUSTER_GPUS
from hnplan.errors import InputError
from hnplan.formatting import counted

# A larger design is represented by a cluster of CLUSTER_GPUS under the same mix, to keep the answer to seconds.
DEFAULT_JOBS = None
"""Jobs simulated per cost figure: None, the arrivals of the days the mix's steady-state test needs
(:func:`steady_days`); a count gives a shorter run, labelled when it is not in steady state."""
MAX_STEADY_JOBS = 200_000
"""The most jobs a steady-state cost figure simulates [-] (about 0.3 ms a job: a minute a run, three runs); a mix
whose steady state needs more is refused with the run to make instead (assumption, a time budget)."""
POLICY = "topology-aware"
REPLICATIONS = 3
"""Independent replications a simulated cost figure averages (:mod:`hnplan.cluster.replicate`): a run of a
heavy-tailed mix is one draw, whose few long training jobs move its utilisation by points; three give a
Student-t 95 % interval at three times one run's time (assumption, a time budget: 20-60 s a design)."""


SECONDS_PER_JOB = 0.3e-3
"""Event-simulation time per job on one CPU core [s], for the time a simulated cost figure takes: 0.31 ms
measured for :func:`simulated_utilisation`'s three runs of the default mix on 1,024 H100 (26,657 jobs a run, 24.6 s
of CPU; 2026-12-02), 0.30 ms for ``benchmarks/bench_cluster.py --gpus 1024 --jobs 27000`` (0.42 ms before
:mod:`hnplan.cluster.occupancy`), as :data:`hnplan.cluster.jobs.MAX_JOBS` says."""


def simulation_seconds(system, gpus: int, mix: str = "default", catalog: Catalog | None = None) -> float:
    """About how long :func:`simulated_utilisation` takes when none of its runs is cached [s]: the jobs of the
    mix's steady-state length (:func:`steady_days`) on ``min(gpus, CLUSTER_GPUS)`` GPUs, times
    :data:`REPLICATIONS` runs, times :data:`SECONDS_PER_JOB` (the default mix on 1,024 GPUs: about 27,000
    jobs a run, some 24 s).

    Raises
    ------
    InputError
        As :func:`steady_days`.
    """
    cat = catalog or load_catalog()
    cat.system(system)
    _, jobs = steady_days(mix, min(int(gpus), CLUSTER_GPUS), cat)
    return jobs * REPLICATIONS * SECONDS_PER_JOB


def steady_days(mix, gpus: int, catalog: Catalog | None = None) -> tuple[float, float]:
    """The arrival days a simulation of ``mix`` on ``gpus`` GPUs needs to be in steady state, and the jobs
    they bring: :func:`hnplan.cluster.load.steady_window_s` of the mix's expected GPU-time-weighted run
    time (five run times: a warm-up of one, four measured), rounded up to two digits as the
    steady-state remedy says it, and the mix's arrival rate times that window.

    Returns
    -------
    (days, jobs) : (float, float)
        [days], [-] expected.

    Raises
    ------
    InputError
        When the mix offers 100 % of the capacity or more: a queue that grows while jobs arrive has
        no steady state.

    >>> d, n = steady_days("default", 1024)  # the default mix: 65.9 h x 5 = 13.7 days, about 27,000 jobs
    >>> d, round(n, -3)
    (14.0, 27000.0)
    """
    m = cluster_mix(mix, catalog)
    load = m.offered_load.value
    if load >= 1.0:
        raise InputError(
            f"mix {m.id} offers {load:.0%} of the capacity: its queue grows while jobs arrive and has no "
            "steady-state utilisation to price; give --utilisation a number, or a mix below 100 %"
        )
    basis = mix_steady_basis(m, gpus, load)
    days = steady_window_days(steady_window_s(basis["run_s"]))
    return days, basis["jobs_per_s"] * units.days_to_s(days)


RunCache = Callable[[list[tuple], Callable[[list[int]], list[dict]]], list[dict]]
"""A store of simulated runs: ``cache(keys, compute) -> rows``, one summary row per key (a tuple of plain values
naming the run: ``"simulated-utilisation"``, the policy, system, GPUs, mix, jobs, days and seed), those it does
not hold from ``compute(indices)`` (positions in ``keys``); the planner's on-disk cache
(:func:`hnplan.planning.design.simulated_utilisation_cached`)."""


def _runs(
    cat: Catalog,
    sid: str,
    gpus: int,
    mix: str,
    jobs: int | None,
    days: float | None,
    seeds: list[int],
    progress: Callable[[float], None] | None = None,
    cache: RunCache | None = None,
) -> list[dict]:
    """The summary of each seed's run: from this process's runs, else from ``cache`` where given (:data:`RunCache`),
    else simulated now, with ``progress`` called with the share of the missing runs done [0-1]."""
    args = [(sid, gpus, mix, jobs, days, int(k), str(cat.root)) for k in seeds]
    todo = [a for a in args if a not in _DONE]
    if todo:
        keys = [("simulated-utilisation", POLICY, *a[:-1]) for a in todo]

        def compute(idx: list[int]) -> list[dict]:
            rows = []
            for j, i in enumerate(idx):
                hook = None
                if progress is not None:
                    hook = lambda now, end, j=j: progress((j + min(now / end, 1.0)) / len(idx))  # noqa: E731
                rows.append(_simulate(*todo[i], progress=hook))
            return rows

        rows = compute(list(range(len(todo)))) if cache is None else cache(keys, compute)
        for a, row in zip(todo, rows, strict=True):
            _DONE[a] = row
    if progress is not None:
        progress(1.0)
    return [dict(_DONE[a]) for a in args]


_DONE: dict[tuple, dict] = {}
"""The runs made or read back in this process, by their arguments (the catalog by its folder)."""


def _simulate(
    system_id: str,
    gpus: int,
    mix: str,
    jobs: int | None,
    days: float | None,
    seed: int,
    root: str,
    progress: Callable[[float, float], None] | None = None,
) -> dict:
    cat = load_catalog(root)
    r = simulate_cluster(
        system_id, gpus, mix=mix, n_jobs=jobs, days=days, policy=POLICY, seed=seed, catalog=cat, progress=progress
    )
    s = r.summary
    return {
        "jobs_drawn": int(sum(s["jobs"].values())),
        **{
            k: s[k]
            for k in (
                "utilisation",
                "allocation_rate",
                "offered_load",
                "offered_load_asked",
                "offered_load_window",
                "steady_state",
                "steady_state_note",
                "window_s",
                "gpus",
            )
        },
    }


def simulated_utilisation(
    system,
    gpus: int,
    *,
    mix: str = "default",
    jobs: int | None = DEFAULT_JOBS,
    seed: int = 0,
    replications: int = REPLICATIONS,
    catalog: Catalog | None = None,
    progress: Callable[[float], None] | None = None,
    cache: RunCache | None = None,
) -> dict:
    """Useful utilisation of ``gpus`` accelerators of a design under a job mix, simulated.

    Runs :func:`hnplan.cluster.simulate_cluster` (topology-aware placement with backfill,
    preemption and failures) on ``min(gpus, CLUSTER_GPUS)`` GPUs for the arrival days the mix's
    steady-state test needs (:func:`steady_days`; 14 days of the default mix, some 27,000 jobs on
    1,024 GPUs, 6-20 s a run), or for ``jobs`` jobs where given (a short run, labelled when it is not in
    steady state: a 3,000-job run of the default mix on 1,024 H100 reads 58 % against 48 % over the
    14 days, whose seed-0 draw offers 113 % and is labelled so: a draw heavier than its mix is no
    steady state either); ``replications`` such runs on independent seeds
    (:func:`hnplan.cluster.replicate.replication_seeds` of ``seed``; one: the plain run of ``seed``),
    each kept in this process and in ``cache`` where given (:data:`RunCache`; the planner's on-disk cache, keyed
    by the system, GPUs, mix, length, seed, the catalog's content hash and the code, from which a later process
    reads them back in milliseconds: :func:`hnplan.planning.design.simulated_utilisation_cached`), their figures
    averaged with the utilisation's Student-t 95 % interval (:func:`hnplan.cluster.replicate.mean_ci`; where
    that interval leaves 0-100 %, the interval of the logit is stated too, :func:`~hnplan.cluster.replicate.ci_text`).
    ``progress``, where given, is called with the share of the runs to simulate done [0-1] (not at all when
    every run is read back); :func:`simulation_seconds` says about how long they take.

    Returns
    -------
    dict
        ``utilisation`` (useful GPU-time / installed GPU-time [fraction]), ``allocation_rate``,
        ``offered_load``, ``offered_load_asked``, ``offered_load_window``, ``steady_state``, ``steady_state_note``, ``window_s``,
        ``jobs_drawn``, ``gpus_simulated``, ``mix``, ``jobs`` (as given), ``days`` (simulated, None for a
        ``jobs`` run), ``seed``, ``policy`` and ``source`` (one sentence stating the conditions): means over
        the replications (``steady_state`` only if every run's is; ``jobs_drawn`` the first run's), with
        ``replications``, ``seeds`` and ``utilisation_ci95`` (``mean, low, high, half_width, n``; no interval
        for one run).

    Raises
    ------
    InputError, CatalogError
        For a bad GPU count, system or mix; a mix that offers 100 % or more, or whose steady state needs
        more than :data:`MAX_STEADY_JOBS` jobs, without ``jobs`` (the message says what to run).
    """
    cat = catalog or load_catalog()
    sid = cat.system(system).id
    g = min(int(gpus), CLUSTER_GPUS)
    days = None
    if jobs is None:
        days, expected = steady_days(mix, g, cat)
        if expected > MAX_STEADY_JOBS:
            raise InputError(
                f"a steady-state run of mix {mix} on {g:,} GPUs takes {counted(days, 'day', spec='g')} of arrivals, about "
                f"{expected:,.0f} jobs (more than the {MAX_STEADY_JOBS:,} a cost figure simulates): run hnplan "
                f"cluster simulate --system {sid} --gpus {g} --mix {mix} --days {days:g} and give its utilisation "
                "as --utilisation"
            )
    if not 1 <= int(replications) <= 30:
        raise InputError(f"replications must be 1 to 30 for a cost figure; got {replications}")
    seeds = replication_seeds(int(seed), int(replications))
    n_jobs = None if jobs is None else int(jobs)
    runs = _runs(cat, sid, g, str(mix), n_jobs, days, seeds, progress, cache)
    s = _mean_of(runs)
    out = dict(s, gpus_simulated=s["gpus"], mix=str(mix), jobs=jobs, days=days, seed=int(seed))
    out.pop("gpus")
    out.update(
        policy=POLICY,
        replications=len(seeds),
        seeds=seeds,
        utilisation_ci95=mean_ci((r["utilisation"] for r in runs), bounds=BOUNDS["utilisation"]),
    )
    length = (
        f"{counted(days, 'day', spec='g')} of arrivals ({s['jobs_drawn']:,} jobs, the mix's steady-state length)"
        if days is not None
        else f"{int(jobs or 0):,} jobs"
    )
    ci = out["utilisation_ci95"]
    reps = (
        f"seed {seed}"
        if ci["n"] == 1
        else f"mean of {ci['n']} replications (seeds spawned from {seed}), {ci_text(ci, '.1%', BOUNDS['utilisation'])}"
    )
    out["source"] = (
        f"simulated: {length} of mix '{mix}' at {_load_text(s)}{_load_note(s)} on "
        f"{out['gpus_simulated']:,} GPUs of {sid}, {POLICY} placement with backfill, preemption and failures, {reps}"
    )
    return out


def _mean_of(runs: list[dict]) -> dict:
    """The replications' figures: numbers averaged, ``steady_state`` only if every run's is, the rest
    (text, the window of a ``days`` run) the first run's."""
    out = dict(runs[0])
    for k in ("utilisation", "allocation_rate", "offered_load", "offered_load_window"):
        vals = [r[k] for r in runs if r[k] is not None]
        out[k] = sum(vals) / len(vals) if vals else None
    out["steady_state"] = all(r["steady_state"] for r in runs)
    if not out["steady_state"]:
        out["steady_state_note"] = next(r["steady_state_note"] for r in runs if not r["steady_state"])
    return out


def _load_text(s: dict) -> str:
    """The offered load, the mix's aim first where the jobs drawn offer another (a heavy-tailed mix's draw
    lies above or below it)."""
    asked, drawn = s.get("offered_load_asked"), s["offered_load"]
    if asked is None or abs(drawn - asked) <= 0.05 * asked:
        return f"{drawn:.0%} offered load"
    return f"{asked:.0%} offered load (this draw {drawn:.0%})"


def _load_note(s: dict) -> str:
    notes = ["oversubscribed"] if s["offered_load"] > 1 and not s["steady_state"] else []
    if not s["steady_state"]:  # a window shorter than 5 run times, or a load of 100 % or more (load.steady_state_of)
        notes.append("not in steady state")
    return f" ({', '.join(notes)})" if notes else ""
