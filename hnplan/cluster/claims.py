"""The seed documents' cluster-operations claims, tested by simulation (for the claims audit).

* "GPU utilisation below 40 % on traditional clusters, 70 %+ on supernodes";
* "fragmented clusters run below 30 %";
* "512 concurrent jobs at 92 % utilisation".

Each is evaluated on the same job stream for both designs and stated with the job mix, load, policy
and cluster size it holds or fails under (:func:`utilisation_claims`; the claims audit's grids over the
offered load: :func:`audit_points`).
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cluster.replicate import ci_range, mean_ci, replication_seeds
from hnplan.cluster.simulate import resolve_jobs, simulate_cluster
from hnplan.cluster.topology import CLUSTER_GPUS
from hnplan.errors import check_choice

if TYPE_CHECKING:
    from hnplan.cluster.utilisation import RunCache


def utilisation_claims(
    traditional: str = "hgx-h100-ib-ndr",
    supernode: str = "gb200-nvl72",
    gpus: int = CLUSTER_GPUS,
    mix: str = "default",
    n_jobs: int = 20000,
    offered_load: float | None = None,
    policy: str = "topology-aware",
    fragmenting_policy: str = "first-fit",
    seed: int = 0,
    catalog: Catalog | None = None,
) -> list[dict]:
    """Simulated evidence for the seeds' utilisation claims.

    Returns
    -------
    list of dict
        One per claim: ``id, claim, verdict`` (holds / does not hold), ``finding`` (one sentence with
        the numbers), ``conditions`` (mix, load, policy, GPUs, jobs, seed) and ``evidence`` (numbers).
    """
    cat = catalog or load_catalog()
    jobs = resolve_jobs(gpus, mix=mix, jobs=n_jobs, seed=seed, offered_load=offered_load, catalog=cat)
    run = {
        (s, p): simulate_cluster(s, gpus, jobs, policy=p, seed=seed, catalog=cat).summary
        for s in (traditional, supernode)
        for p in dict.fromkeys((policy, fragmenting_policy))
    }
    t, s_ = run[(traditional, policy)], run[(supernode, policy)]
    load = t["offered_load"]
    cond = f"job mix '{mix}' at {load:.0%} offered load, {len(jobs):,} jobs, {gpus:,} GPUs per design, seed {seed}"
    out = []
    holds = t["utilisation"] < 0.40 and s_["utilisation"] >= 0.70
    out.append(
        dict(
            id="utilisation",
            claim="GPU utilisation <40% on traditional clusters, 70%+ on supernodes",
            verdict="holds" if holds else "does not hold",
            finding=f"Simulated useful utilisation {t['utilisation']:.1%} on {traditional} and "
            f"{s_['utilisation']:.1%} on {supernode} under {policy} placement; both are bounded "
            f"by the offered load, and the gap comes from placement and failures, not the design "
            f"alone.",
            conditions=f"{cond}, {policy} placement",
            evidence=dict(
                utilisation_traditional=t["utilisation"], utilisation_supernode=s_["utilisation"], offered_load=load
            ),
        )
    )
    f = run[(traditional, fragmenting_policy)]
    out.append(
        dict(
            id="fragmented-utilisation",
            claim="Fragmented clusters run below 30% utilisation",
            verdict="holds" if f["utilisation"] < 0.30 else "does not hold",
            finding=f"With {fragmenting_policy} placement {traditional} strands {f['fragmentation']:.1%} of "
            f"its GPUs on average and keeps {f['utilisation']:.1%} busy usefully.",
            conditions=f"{cond}, {fragmenting_policy} placement",
            evidence=dict(utilisation=f["utilisation"], fragmentation=f["fragmentation"]),
        )
    )
    c = s_["concurrent_jobs"]
    ok = c["mean"] >= 512 and s_["utilisation"] >= 0.92
    out.append(
        dict(
            id="concurrent-jobs",
            claim="512 concurrent jobs at 92% utilisation",
            verdict="holds" if ok else "does not hold",
            finding=f"{supernode} runs {c['mean']:.0f} jobs at once on average (max {c['max']}) at "
            f"{s_['utilisation']:.1%} useful utilisation.",
            conditions=f"{cond}, {policy} placement",
            evidence=dict(concurrent_mean=c["mean"], concurrent_max=c["max"], utilisation=s_["utilisation"]),
        )
    )
    return out


# -- the claims audit's cluster experiments (hnplan.planning.claims.cluster_utilisation) ----------
AUDIT_CLAIMS = ("utilisation-40-to-70", "fragmentation-below-30", "utilisation-below-50", "concurrent-512-jobs-92")
#: the most processes the audit's runs take side by side (each a Python process with the simulation loaded)
MAX_AUDIT_WORKERS = 8


def audit_workers() -> int:
    """Processes for the audit's runs by default: the machine's cores (``os.cpu_count()``), at most
    :data:`MAX_AUDIT_WORKERS`."""
    return max(1, min(os.cpu_count() or 1, MAX_AUDIT_WORKERS))


def _run(
    system: str,
    gpus: int,
    mix: str,
    load: float,
    policy: str,
    backfill: bool,
    jobs: int,
    seed: int,
    lines: int,
    root,
    bf_interval_s: float = 0.0,
) -> dict:
    """One run of the audit (its claims share them: :func:`_runs`): the summary numbers the audit reads.

    With ``lines > 1`` the job stream is split at random into ``lines`` business lines, each on its
    own cluster of ``gpus / lines`` GPUs (whole scale-up domains); the numbers are then the totals
    over the partitions (utilisation weighted by GPUs)."""
    cat = load_catalog(root)
    stream = resolve_jobs(gpus, mix=mix, jobs=jobs, seed=seed, offered_load=load, catalog=cat)
    if lines <= 1:
        parts = [(stream, gpus)]
    else:
        line = np.random.default_rng(seed + 1).integers(lines, size=len(stream))
        parts = [(stream[line == k], gpus // lines) for k in range(lines)]
    rows = []
    for part, g in parts:
        if part.empty:
            continue
        r = simulate_cluster(
            system, g, part, policy=policy, backfill=backfill, seed=seed, bf_interval_s=bf_interval_s, catalog=cat
        )
        rows.append((r.gpus, r.summary))
    total = sum(g for g, _ in rows)
    return {
        "gpus": total,
        "utilisation": sum(g * s["utilisation"] for g, s in rows) / total,
        "allocation_rate": sum(g * s["allocation_rate"] for g, s in rows) / total,
        "offered_load_window": sum(g * s["offered_load_window"] for g, s in rows) / total,
        "fragmentation": sum(g * s["fragmentation"] for g, s in rows) / total,
        "concurrent_jobs": sum(s["concurrent_jobs"]["mean"] for _, s in rows),
        "rejected_jobs": sum(s["jobs"]["rejected"] for _, s in rows),
    }


#: the runs of this process, by their arguments (:func:`_run`'s)
_DONE: dict[tuple, dict] = {}
#: called as ``hook(done, total)`` while :func:`_runs` simulates the runs neither this process nor the cache holds
#: (0 before the first, then after each): a caller's progress bar (``hnplan claims`` draws one on a terminal)
RUN_PROGRESS: ContextVar = ContextVar("hnplan_cluster_audit_progress", default=None)


def _runs(args: list[tuple], workers: int, cache: RunCache | None = None) -> list[dict]:
    """:func:`_run` of each argument tuple, from this process's runs, else from ``cache`` where given
    (:data:`hnplan.cluster.utilisation.RunCache`, keyed by ``"cluster-audit-run"`` and the arguments but the
    catalog folder: the planner's on-disk cache keys by the catalog's content), else run now, on up to
    ``workers`` processes side by side (``concurrent.futures.ProcessPoolExecutor``). Each run is a function of
    its arguments alone (its own seed), so the numbers do not depend on ``workers`` or on the order the runs
    finish in."""
    todo = [a for a in dict.fromkeys(args) if a not in _DONE]
    if todo:
        # the catalog folder (last but one argument) is left out: the cache's key holds the catalog's content
        keys = [("cluster-audit-run", *a[:-2], a[-1]) for a in todo]

        def compute(idx: list[int]) -> list[dict]:
            sel = [todo[i] for i in idx]
            n = min(workers, len(sel))
            hook = RUN_PROGRESS.get()
            out: list[dict] = []
            if hook is not None:
                hook(0, len(sel))
            if n <= 1:
                rows = (_run(*a) for a in sel)
            else:
                from concurrent.futures import ProcessPoolExecutor

                pool = ProcessPoolExecutor(max_workers=n)
                rows = pool.map(_run, *zip(*sel, strict=True))
            try:
                for row in rows:  # in order, as they finish
                    out.append(row)
                    if hook is not None:
                        hook(len(out), len(sel))
            finally:
                if n > 1:
                    pool.shutdown(cancel_futures=True)
            return out

        rows = compute(list(range(len(todo)))) if cache is None else cache(keys, compute)
        for a, row in zip(todo, rows, strict=True):
            _DONE[a] = row
    return [_DONE[a] for a in args]


def _configs(claim_id: str, traditional: str, supernode: str, lines: int) -> list[tuple]:
    """``(system, policy, backfill, lines)`` of every design a claim's grid runs at each load."""
    ta = (traditional, "topology-aware", True, 1)
    return {
        "utilisation-40-to-70": [ta, (supernode, "topology-aware", True, 1)],
        "fragmentation-below-30": [ta, (traditional, "topology-aware", True, lines)],
        "utilisation-below-50": [(traditional, "first-fit", False, 1), (traditional, "first-fit", True, 1), ta],
    }.get(claim_id, [(supernode, "topology-aware", True, 1)])


def audit_points(
    claim_id: str,
    traditional: str,
    supernode: str,
    *,
    gpus: int = CLUSTER_GPUS,
    mix: str = "default",
    loads: tuple = (0.5, 0.7, 0.9, 1.0),
    jobs: int = 10000,
    seed: int = 0,
    lines: int = 4,
    replications: int = 1,
    bf_interval_s: float = 0.0,
    catalog: Catalog | None = None,
    workers: int | None = None,
    cache: RunCache | None = None,
) -> tuple[pd.DataFrame, str, str, float, str]:
    """The grid of one cluster claim of the audit, simulated on the same job stream for every row.

    Parameters
    ----------
    claim_id : str
        One of :data:`AUDIT_CLAIMS`.
    traditional, supernode : str
        System ids of the 8-GPU-server design and the supernode.
    gpus, mix, loads, jobs, seed :
        Cluster size [GPUs], job mix id, offered loads [fraction of the GPUs], jobs per run, seed.
    lines : int
        Business lines of the partitioned cluster (``fragmentation-below-30``).
    replications : int
        Independent job streams per point (:func:`hnplan.cluster.replicate.replication_seeds` of
        ``seed``; 1: the stream of ``seed`` itself). With more than one, a point's figures are the mean
        over the streams with a 95 % Student-t interval (``utilisation_low``/``_high``,
        ``concurrent_jobs_low``/``_high``; where it leaves the quantity's range, [0, 1] for the
        utilisation and >= 0 for the jobs, the interval on the logit or log scale,
        :func:`hnplan.cluster.replicate.ci_range`, never a clipped one), and it holds only when the whole interval is on the claim's
        side of the threshold, fails when the whole interval is on the other side, and is undecided
        (``holds`` NaN, ``verdict_ci`` ``undecided``) when it straddles the threshold.
    bf_interval_s : float
        Seconds between backfill passes (:func:`hnplan.cluster.simulate_cluster`; 0: at every event).
    catalog : Catalog, optional
    workers : int, optional
        Processes that run the grid's simulations side by side (default :func:`audit_workers`; 1: one
        after another in this process). The numbers do not depend on it. Runs already made in this
        process are not run again.
    cache : RunCache, optional
        A store of runs (:data:`hnplan.cluster.utilisation.RunCache`): those it holds are not run again. The
        planner passes its on-disk cache (:func:`hnplan.planning.claims.cluster_utilisation`,
        :func:`hnplan.planning.prediction_cache.run_cache`; ``HNPLAN_NO_CACHE=1`` bypasses it); none: runs
        are kept in this process only.

    Returns
    -------
    (points, metric, op, threshold, condition)
        ``points``: one row per grid point with ``offered_load``, ``design``, ``utilisation``,
        ``offered_load_window`` (the demand inside the measuring window: utilisation cannot exceed it
        for long), ``fragmentation``, ``concurrent_jobs``, their intervals, ``replications``, a
        ``holds`` (bool; NaN for a row shown for context or undecided) and ``verdict_ci`` (``holds``,
        ``fails``, ``undecided`` or None); ``condition`` a sentence naming the job mix, policy, cluster
        size and where the claim holds, fails or is undecided.

    Raises
    ------
    InputError
        For an unknown claim id.
    """
    check_choice("cluster claim", claim_id, AUDIT_CLAIMS)
    cat = catalog or load_catalog()
    root = str(cat.root)

    seeds = replication_seeds(seed, replications)

    def args(system, load, policy="topology-aware", backfill=True, n_lines=1):
        return [
            (system, gpus, mix, float(load), policy, backfill, jobs, s, n_lines, root, float(bf_interval_s))
            for s in seeds
        ]

    # every run of the grid at once, so that they can run side by side
    grid = [
        a for load in loads for c in _configs(claim_id, traditional, supernode, lines) for a in args(c[0], load, *c[1:])
    ]
    done = dict(zip(grid, _runs(grid, audit_workers() if workers is None else workers, cache), strict=True))

    def run(system, load, policy="topology-aware", backfill=True, n_lines=1):
        rs = [done[a] for a in args(system, load, policy, backfill, n_lines)]
        out = {k: float(np.mean([r[k] for r in rs])) for k in rs[0]}
        for k, bounds in (("utilisation", (0.0, 1.0)), ("concurrent_jobs", (0.0, None))):
            # where the Student-t interval leaves the quantity's range, the one on the logit (log) scale
            c = mean_ci([r[k] for r in rs], bounds=bounds)
            lo, hi = ci_range(c, bounds)
            out[f"{k}_low"], out[f"{k}_high"] = (c["mean"], c["mean"]) if lo is None else (lo, hi)
        out["replications"] = len(rs)
        return out

    def side(r, key, op, thr):  # True: the interval holds, False: it fails, None: it straddles the threshold
        lo, hi = r[f"{key}_low"], r[f"{key}_high"]
        if op == "<":
            return True if hi < thr else False if lo >= thr else None
        return True if lo >= thr else False if hi < thr else None

    def both(*xs):  # the conjunction of interval verdicts
        return False if any(x is False for x in xs) else True if all(x is True for x in xs) else None

    rows = []
    if claim_id == "utilisation-40-to-70":
        for load in loads:
            t, s = run(traditional, load), run(supernode, load)
            ok = both(side(t, "utilisation", "<", 0.40), side(s, "utilisation", ">=", 0.70))
            rows += [dict(offered_load=load, design=d, **r, holds=ok) for d, r in ((traditional, t), (supernode, s))]
        metric, op, thr = "utilisation", ">=", 0.70
    elif claim_id == "fragmentation-below-30":
        for load in loads:
            for d, r in (
                (f"{traditional}, pooled", run(traditional, load)),
                (f"{traditional}, {lines} lines", run(traditional, load, n_lines=lines)),
            ):
                rows.append(
                    dict(
                        offered_load=load,
                        design=d,
                        **r,
                        holds="context" if d.endswith("pooled") else side(r, "utilisation", "<", 0.30),
                    )
                )
        metric, op, thr = "utilisation", "<=", 0.30
    elif claim_id == "utilisation-below-50":
        for load in loads:
            for d, pol, bf in (
                (f"{traditional}, first-fit, no backfill", "first-fit", False),
                (f"{traditional}, first-fit, backfill", "first-fit", True),
                (f"{traditional}, topology-aware, backfill", "topology-aware", True),
            ):
                r = run(traditional, load, pol, bf)
                rows.append(dict(offered_load=load, design=d, **r, holds=side(r, "utilisation", "<", 0.50)))
        metric, op, thr = "utilisation", "<=", 0.50
    else:
        for load in loads:
            r = run(supernode, load)
            ok = both(side(r, "concurrent_jobs", ">=", 512), side(r, "utilisation", ">=", 0.92))
            rows.append(dict(offered_load=load, design=supernode, **r, holds=ok))
        metric, op, thr = "utilisation", ">=", 0.92
    for r in rows:  # the interval verdict in words; `holds` bool where decided, NaN otherwise
        h = r["holds"]
        r["verdict_ci"] = None if h == "context" else "undecided" if h is None else "holds" if h else "fails"
        r["holds"] = h if isinstance(h, bool) else np.nan
    pts = pd.DataFrame(rows)
    pts["holds"] = pts["holds"].astype(object).where(pts["holds"].notna(), None)
    return pts, metric, op, thr, _condition(claim_id, pts, gpus, mix, jobs, seed, loads, len(seeds))


def _where(g: pd.DataFrame) -> str:
    return "; ".join(
        f"{d} at {', '.join(f'{x:.0%}' for x in h['offered_load'])} offered load"
        for d, h in g.groupby("design", sort=False)
    )


def _condition(claim_id, pts, gpus, mix, jobs, seed, loads, reps: int = 1) -> str:
    runs = f"seed {seed}" if reps == 1 else f"the mean of {reps} independent streams from seed {seed}, 95 % intervals"
    setup = f"job mix '{mix}', {jobs:,} jobs per run on {gpus:,} GPUs per design ({runs}), offered loads " + ", ".join(
        f"{x:.0%}" for x in loads
    )
    ev = pts[pts["holds"].notna()]
    ok = ev[ev["holds"].astype(bool)]
    if ev.empty:
        verdict = "decided at no point"
    elif ok.empty:
        verdict = "holds at no point"
    elif len(ok) == len(ev):
        verdict = "holds at every point" + ("" if (pts["verdict_ci"] != "undecided").all() else " decided")
    else:
        verdict = "holds only for " + _where(ok)
    und = pts[pts["verdict_ci"] == "undecided"]
    if not und.empty:
        verdict += "; undecided (the interval straddles the threshold) for " + _where(und)

    def fig(r) -> str:
        if r.replications == 1:
            return f"{r.design} {r.utilisation:.0%}"
        return f"{r.design} {r.utilisation:.0%} ({r.utilisation_low:.0%} to {r.utilisation_high:.0%})"

    nums = "; ".join(
        f"{x:.0%} load: " + ", ".join(fig(r) for r in g.itertuples()) for x, g in pts.groupby("offered_load", sort=True)
    )
    demand = pts.groupby("offered_load")["offered_load_window"].first()
    tail = " The demand inside the measuring window (the jobs' GPU-time in it) is "
    tail += ", ".join(f"{d:.0%}" for d in demand) + " of the GPUs."
    w = pts.pivot_table(index="offered_load", columns="design", values="utilisation")
    d = list(pts["design"].unique())  # in grid order: servers then supernode, or pooled then lines

    def points(x: float) -> str:
        return f"{round(x * 100) + 0:+d}"

    if claim_id == "utilisation-40-to-70":
        gap = w[d[1]] - w[d[0]]
        tail += f" Supernode minus servers: {points(gap.min())} to {points(gap.max())} points."
    elif claim_id == "fragmentation-below-30":
        gap = w[d[1]] - w[d[0]]
        rej = int(pts.loc[pts["design"].str.endswith("lines"), "rejected_jobs"].sum())
        tail += (
            f" Business lines minus pooled: {points(gap.min())} to {points(gap.max())} points "
            f"({rej} jobs too large for a line's cluster)."
        )
    elif claim_id == "concurrent-512-jobs-92":
        tail += " Jobs running at once (mean): " + ", ".join(f"{c:.0f}" for c in pts["concurrent_jobs"]) + "."
    return (
        f"{verdict} (useful utilisation, topology-aware placement with backfill unless named; {setup}): {nums}.{tail}"
    )
