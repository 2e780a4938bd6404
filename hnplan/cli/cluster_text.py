"""The text answer of ``hnplan cluster simulate`` (:mod:`hnplan.cli.cluster_cmd`): the summary's rows (utilisation,
offered load and its steady state, fragmentation, blocked capacity, goodput, slowdowns, jobs, and the serving,
reserve, design-speed and replication notes where they apply) and the queueing-delay tables, per class and per job
size, with the replications' intervals."""

from __future__ import annotations

from rich.table import Table

from hnplan import units
from hnplan.cli._app import console, escape, kv_table
from hnplan.formatting import counted, format_number


def rejected_bound(summary: dict) -> str:
    """What a rejected job was larger than: ``the cluster's 64 GPUs``, or with an inference reserve the GPUs its
    class may use (a 64-GPU training job on 64 GPUs, 8 of them reserved, is rejected: it was called larger than
    the cluster's 64 GPUs).

    >>> rejected_bound({"gpus": 64})
    "the cluster's 64 GPUs"
    >>> rejected_bound({"gpus": 64, "reserve": {"gpus": 8}})
    "the GPUs its class may use (the cluster's 64; for classes other than inference the 56 outside the 8-GPU inference reserve)"
    """
    gpus = summary["gpus"]
    if reserved := (summary.get("reserve") or {}).get("gpus"):
        return (
            f"the GPUs its class may use (the cluster's {gpus:,.0f}; for classes other than inference the "
            f"{gpus - reserved:,.0f} outside the {reserved:,.0f}-GPU inference reserve)"
        )
    return f"the cluster's {gpus:,.0f} GPUs"


def kept_text(kept: dict | None) -> str:
    """The design-speed row's note on the training-class jobs that kept their durations (no catalogued
    representative model fits on both designs at their GPU count); ``""`` when none did.

    >>> kept_text({"jobs": 30, "gpu_time_share": 0.041, "gpus": [1, 16]})
    '; 30 training-class jobs (1, 16 GPUs; 4.1% of their GPU-time) keep their durations, 1.00x: no catalogued representative model fits on both designs at that size'
    """
    if not kept or not kept["jobs"]:
        return ""
    sizes = ", ".join(f"{g:,}" for g in kept["gpus"])
    return (
        f"; {kept['jobs']:,.0f} training-class jobs ({sizes} GPUs; {kept['gpu_time_share']:.1%} of their GPU-time) "
        "keep their durations, 1.00x: no catalogued representative model fits on both designs at that size"
    )


def print_simulation(
    r,
    s: dict,
    *,
    system: str,
    gpus: int,
    policy: str,
    seed: int,
    replications: int,
    backfill: bool,
    nodes,
    cat,
) -> None:
    """Print a run's summary table and its two queueing-delay tables.

    Parameters
    ----------
    r : ClusterResult or ReplicatedResult
        The run (its ``gpus`` and ``system``: the cluster as built).
    s : dict
        ``r.to_json()``.
    system, gpus, policy, seed, replications, backfill, nodes
        The command's flags (``gpus`` as asked, before rounding to whole scale-up domains; ``nodes`` None unless
        ``--nodes`` gave the cluster).
    cat : Catalog
        For the design's scale-up domain, named when the GPU count was rounded.
    """
    from hnplan.cluster.load import load_notes
    from hnplan.cluster.replicate import bounds_of, ci_text, spread_text

    ci = s.get("ci95", {})

    def interval(key: str, fmt: str = ".1%") -> str:
        """' (95 % CI a to b)' over the replications; where the Student-t interval leaves the figure's range
        (a share below 0 % with few replications) the interval on the bounded scale, and why
        (:func:`hnplan.cluster.replicate.ci_text`)."""
        return noted(ci_text(ci.get(key), fmt, bounds_of(key)))

    def noted(*notes: str) -> str:
        """' (a; b)': a figure's interval and notes in one pair of parentheses, not one pair after another."""
        kept = [x for x in notes if x]
        return f" ({'; '.join(kept)})" if kept else ""

    def ci_of(key: str) -> str:
        return ci_text(ci.get(key), ".1%", bounds_of(key))

    def n(v) -> str:  # a count (thousands separated, as hnplan prints counts), or the replications' mean to 0.1
        return f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"

    rows = [
        ("utilisation (productive)", f"{s['utilisation']:.1%}" + interval("utilisation")),
        ("allocation rate", f"{s['allocation_rate']:.1%}" + interval("allocation_rate")),
        ("offered load", f"{s['offered_load']:.1%}" + noted(ci_of("offered_load"), *load_notes(s))),
        (
            "demand in the window",
            f"{s['offered_load_window']:.1%}"
            + noted(
                ci_of("offered_load_window"),
                "the jobs' GPU-time inside the measuring window: the utilisation it approaches when nothing queues",
            ),
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
                else "the first blocked job waits for the rest of its GPUs (no backfill: every job behind it waits too"
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
            f"{s['goodput']:.1%}{interval('goodput')} of the jobs' allocated GPU-time over the whole run, the warm-up "
            "included (utilisation over allocation rate is the measured window's productive share)"
            if s["goodput"] is not None
            else "-",
        ),
        (
            "JCT bounded slowdown",
            f"mean {s['jct_bounded_slowdown']['mean']:.2f}{interval('jct_bounded_slowdown.mean', '.2f')}, "
            f"p95 {s['jct_bounded_slowdown']['p95']:.2f} (completion over max(run, "
            f"{s['jct_bounded_slowdown']['tau_s']:g} s), at least 1: Feitelson et al. 1997, the figure to compare by)"
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
            f"{n(s['preemptions'])} / {n(s['interruptions'])} ({n(s['hardware_failures'])} hardware "
            f"failure{'' if s['hardware_failures'] == 1 else 's'})",
        ),
        (
            "concurrent jobs",
            f"mean {format_number(s['concurrent_jobs']['mean'], 3)}, max {n(s['concurrent_jobs']['max'])}",
        ),
        (
            "jobs",
            ", ".join(
                f"{k} {n(v)}"
                + (
                    f" (larger than {rejected_bound(s)}; {s['rejected_gpu_hours']:,.0f} GPU-hours "
                    "left out of the offered load)"
                    if k == "rejected" and v
                    else ""
                )
                + (
                    f" (the cluster has no node of a GPU model they accept, or none large enough; {s['unplaceable_gpu_hours']:,.0f} "
                    "GPU-hours left out of the offered load)"
                    if k == "unplaceable"
                    else ""
                )
                for k, v in s["jobs"].items()
                if v or k != "unplaceable"
            ),
        ),
    ]
    if "capped" in s:  # a mix fitted to larger clusters: its largest draws are cut to this one, not rejected
        c = s["capped"]
        fate = (  # with an inference reserve a whole-cluster training job is larger than the GPUs its class may use
            "are cut to it and then rejected, larger than the GPUs their class may use beside the inference reserve"
            if (s.get("reserve") or {}).get("gpus")
            else "run on all of them: whole-cluster gang jobs that drain it"
        )
        rows.append(
            (
                "jobs cut to the cluster",
                f"{c['jobs_share']:.2%} of the mix's draws ask more than the cluster's {int(s['gpus']):,} GPUs and "
                f"{fate} ({c['gpu_time_share']:.0%} of the offered GPU-time; expected shares; a trace's larger jobs "
                "are rejected at submission)",
            )
        )
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
                )
                + kept_text(s.get("design_speed_kept")),
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
                    f"{m} {v['utilisation']:.1%} of {v['gpus']:,}" for m, v in s["by_gpu_model"].items() if v["gpus"]
                ),
            )
        )
    w = s["window_s"]
    span = f"{units.s_to_days(w):.1f} days" if units.s_to_days(w) >= 1 else f"{units.s_to_hours(w):.3g} h"
    size = f"{r.gpus:,} x {r.system}"
    if nodes is None and r.gpus != gpus:  # the cluster is built of whole scale-up domains: say the rounding
        dom = cat.system(system).scaleup_domain_gpus
        size += f" ({gpus:,} asked, rounded up to whole {dom:,}-GPU scale-up domains)"
    elif nodes is not None and r.gpus != gpus:  # a node list's groups scaled to --gpus, each kept to a node
        size += f" ({gpus:,} asked: each of the node list's groups scaled to it, rounded, at least one node)"
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
            "mean of the runs' percentiles; ± h: 95 % Student-t half-width; (a to b): the interval on the logit "
            "scale of [0 s, the run's span] where mean ± h leaves it (no job waits longer than the run); (± h crosses "
            "0): a run at 0 s, too few runs for this spread"
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
