"""Several designs and policies on the same jobs: summary tables, long time series, delay
distributions, the Weng et al. comparison and the sentences of a report's "What this means"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cluster.jobs import CLASSES
from hnplan.cluster.load import steady_window_days
from hnplan.cluster.simulate import ClusterResult, simulate_cluster

SUMMARY_UNITS = {
    "utilisation": "fraction",
    "allocation_rate": "fraction",
    "fragmentation": "fraction",
    "goodput": "fraction",
    "jct_slowdown_mean": "x",
    "jct_bounded_slowdown_mean": "x",
    "idle_queued": "fraction of GPU-time",
    "idle_drained": "fraction of GPU-time",
    "idle_fragmented": "fraction of GPU-time",
    "preemptions": "count",
    **{f"{c}_p95_delay_s": "s" for c in CLASSES},
}


def summary_row(r: ClusterResult) -> dict:
    """One flat row of a result's summary."""
    s = r.summary
    row = {
        "system": r.system,
        "gpus": r.gpus,
        "policy": r.policy,
        "utilisation": s["utilisation"],
        "allocation_rate": s["allocation_rate"],
        "offered_load": s["offered_load"],
        "steady_state": s["steady_state"],
        # what a steady state would need (load.steady_state_of): the arrival days, or about as many jobs
        "steady_days": steady_window_days(s["steady_window_s"]) if s.get("steady_window_s") else float("nan"),
        "steady_jobs": s.get("steady_jobs", float("nan")),
        "fragmentation": s["fragmentation"],
        "goodput": s["goodput"],
        "jct_slowdown_mean": s["jct_slowdown"]["mean"],
        "jct_bounded_slowdown_mean": s["jct_bounded_slowdown"]["mean"],
        "idle_queued": s["capacity_gpu_s"]["share"]["blocked"],
        "idle_drained": s["capacity_gpu_s"]["share"]["drained"],
        "idle_fragmented": s["capacity_gpu_s"]["share"]["fragmented"],
        "preemptions": s["preemptions"],
        "interruptions": s["interruptions"],
        "concurrent_jobs": s["concurrent_jobs"]["mean"],
    }
    for c in CLASSES:
        q = s["queue_delay_s"].get(c)
        row[f"{c}_p95_delay_s"] = None if q is None else q["p95"]
    return row


def compare_cluster(
    systems,
    gpus: int,
    jobs: pd.DataFrame,
    policies=("topology-aware",),
    seed: int = 0,
    catalog: Catalog | None = None,
    **kw,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Simulate every ``(system, policy)`` on the same job table.

    Returns
    -------
    (DataFrame, DataFrame, dict)
        The summary table (one row per run, :data:`SUMMARY_UNITS` in ``attrs["units"]``), the time
        series of all runs stacked (``system, policy`` columns added) and ``{(system, policy):
        ClusterResult}``.
    """
    cat = catalog or load_catalog()
    results = {}
    for s in systems:
        for p in policies:
            results[(s, p)] = simulate_cluster(s, gpus, jobs, policy=p, seed=seed, catalog=cat, **kw)
    table = pd.DataFrame([summary_row(r) for r in results.values()])
    table.attrs["units"] = SUMMARY_UNITS
    ts = pd.concat([r.timeseries.assign(system=s, policy=p) for (s, p), r in results.items()], ignore_index=True)
    ts.attrs["units"] = next(iter(results.values())).timeseries.attrs["units"]
    return table, ts, results


def delays_frame(results: dict) -> pd.DataFrame:
    """Queueing delay of every job of every run: ``system, policy, cls, queue_delay_s`` [s]."""
    return pd.concat(
        [r.jobs[["cls", "queue_delay_s"]].assign(system=s, policy=p) for (s, p), r in results.items()],
        ignore_index=True,
    )


def daily_frame(results: dict) -> pd.DataFrame:
    """Every run's utilisation per calendar day (``summary["utilisation_by_day"]``,
    :func:`hnplan.cluster.daily.utilisation_by_day`), one row per run and day: ``system, policy, day``,
    ``start_s, length_s, measured_s`` [s], ``allocated, down`` [fraction of installed GPUs]."""
    return pd.concat(
        [pd.DataFrame(r.summary["utilisation_by_day"]).assign(system=s, policy=p) for (s, p), r in results.items()],
        ignore_index=True,
    )


def delay_by_size_frame(results: dict) -> pd.DataFrame:
    """Every run's queueing delay by job size (``summary["queue_delay_by_gpus_s"]``,
    :func:`hnplan.cluster.result.queue_delay_by_size`), one row per run and size class, smallest first:
    ``system, policy, size, jobs``, ``p50, p95, p99`` [s]."""
    rows = [
        {"system": s, "policy": p, "size": size, **q}
        for (s, p), r in results.items()
        for size, q in r.summary["queue_delay_by_gpus_s"].items()
    ]
    return pd.DataFrame(rows, columns=["system", "policy", "size", "jobs", "p50", "p95", "p99"])


def _load_note(row) -> str:
    over = ", oversubscribed" if row["offered_load"] > 1 else ""
    if not row["steady_state"]:  # a window shorter than 5 run times, or a load of 100 % or more (load.steady_state_of)
        days, jobs = row.get("steady_days", float("nan")), row.get("steady_jobs", float("nan"))
        need = (
            f": a steady state needs about {days:g} days of arrivals or {jobs:,.0f} jobs"
            if days == days and jobs == jobs and row["offered_load"] < 1
            else ""
        )
        return over + ", not in steady state" + need
    return over


def cluster_verdict(table: pd.DataFrame) -> str:
    """Markdown sentences from a :func:`compare_cluster` table (numbers only from the table)."""
    lines = []
    best = table.loc[table["utilisation"].idxmax()]
    worst = table.loc[table["utilisation"].idxmin()]
    lines.append(
        f"- **Busiest**: {best['system']} with {best['policy']} keeps {best['utilisation']:.1%} of its "
        f"{best['gpus']:,} GPUs doing useful work (allocated {best['allocation_rate']:.1%}, offered "
        f"{best['offered_load']:.1%}{_load_note(best)})."
    )
    if len(table) > 1:
        lines.append(
            f"- **Least busy**: {worst['system']} with {worst['policy']} at {worst['utilisation']:.1%}; "
            f"the gap is {best['utilisation'] - worst['utilisation']:.1%} of the cluster."
        )
    for _, r in table.iterrows():
        lost = r["allocation_rate"] - r["utilisation"]
        tr = r.get("training_p95_delay_s")
        bsd = r.get("jct_bounded_slowdown_mean")
        lines.append(
            f"- **{r['system']} / {r['policy']}**: {lost:.1%} of the GPUs are allocated but not productive "
            f"(slower cross-domain placements, restarts, work lost to failures and preemptions); "
            f"{r['idle_queued']:.1%} of the GPU-time idle while jobs queue ({r['idle_drained']:.1%} drained for a "
            f"large job's reservation, {r['idle_fragmented']:.1%} fragmented: free but no queued job fits); "
            f"training waits {'-' if tr is None or pd.isna(tr) else f'{units.s_to_hours(tr):.1f} h'} at p95; "
            f"bounded slowdown {'-' if bsd is None or pd.isna(bsd) else f'{bsd:.2f}'}; "
            f"{int(r['preemptions'])} preemptions."
        )
    lines.append(
        "- **Reading it**: GPU-time idle while jobs queue is demand the cluster could not serve though GPUs were "
        "free; its drained part is the cost of starting large gang jobs (EASY backfilling holds GPUs free for the "
        "reserved job), its fragmented part the cost of placement. "
        "Slowdown is the bounded one (Feitelson et al. 1997, tau 10 s): the plain mean is set by jobs of seconds "
        "that waited minutes, so it ranks designs by their shortest jobs' luck."
    )
    seed_claim = table["utilisation"].max() >= 0.70
    lines.append(
        f'- **Seed claim "70 %+ utilisation"**: {"holds" if seed_claim else "does not hold"} for this job mix '
        f"and load (best {table['utilisation'].max():.1%}); utilisation here is bounded by the offered load."
    )
    return "\n".join(lines)


def weng_table(fill: pd.DataFrame) -> pd.DataFrame:
    """Our fill experiment (:func:`hnplan.cluster.validation.fill_experiment`) beside Weng et al.'s
    headline: unallocated GPUs per policy and FGD's reduction against best-fit (theirs against their
    BestFit, from their artifact, and the abstract's against DotProd; the like-for-like run is
    :func:`hnplan.cluster.weng_fill.weng_fill`)."""
    from hnplan.cluster.validation import WENG_2023, WENG_2023_ARTIFACT

    fgd, bf = (WENG_2023_ARTIFACT["unallocated_at_100"][k] for k in ("FGD", "BestFit"))

    f = fill.set_index("policy")
    ours = np.nan
    if {"best-fit", "fragmentation-aware"} <= set(f.index) and f.loc["best-fit", "unallocated_gpus"] > 0:
        ours = 1 - f.loc["fragmentation-aware", "unallocated_gpus"] / f.loc["best-fit", "unallocated_gpus"]
    rows = [
        {"quantity": "cluster GPUs", "Weng et al. 2023": WENG_2023["cluster_gpus"], "hnplan": f["cluster_gpus"].iloc[0]}
    ]
    # the artifact's own policy of the same rule, where it has one (it runs no first-fit): its share at 100 % of
    # the capacity arrived (a different fill than this run's, so the shares compare, not the counts)
    theirs = {"best-fit": "BestFit", "fragmentation-aware": "FGD"}
    for p in f.index:
        share = WENG_2023_ARTIFACT["unallocated_at_100"].get(theirs.get(p, ""))
        rows.append(
            {
                "quantity": f"unallocated GPUs, {p}",
                "Weng et al. 2023": f"{share:.1%} ({theirs[p]}, their artifact)" if share is not None else "-",
                "hnplan": f"{f.loc[p, 'unallocated_gpus']:.0f} ({f.loc[p, 'unallocated_fraction']:.1%})",
            }
        )
    rows.append(
        {
            "quantity": "FGD: fewer unallocated GPUs than best-fit",
            "Weng et al. 2023": f"{1 - fgd / bf:.1%} against their BestFit; up to "
            f"{WENG_2023['fgd_fewer_unallocated_max']:.0%} ({WENG_2023['fgd_more_gpus_used']} GPUs) against DotProd",
            "hnplan": f"{ours:.1%}" if np.isfinite(ours) else "-",
        }
    )
    rows.append(
        {
            "quantity": "ranking",
            "Weng et al. 2023": "FGD ahead of best-fit",
            "hnplan": "FGD ahead of or equal to best-fit" if np.isfinite(ours) and ours >= 0 else "best-fit ahead",
        }
    )
    out = pd.DataFrame(rows)
    out.attrs["source"] = WENG_2023["source"]
    return out
