"""The load a run offers and whether its window reaches steady state: the offered load of a job table
(the queueing literature's ``rho``), the part of it inside the measuring window, the steady-state test
and the sentence a person reads beside the number (:func:`load_text`)."""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.cluster.jobs import job_count, take_rows
from hnplan.cluster.topology import MILLI


def _gpu_s(jobs) -> np.ndarray:
    """GPU-seconds each job of a table demands, ``gpus x share x ideal run time`` [GPU s], shape ``(n,)``."""
    return np.asarray(jobs["gpus"]) * np.asarray(jobs["gpu_milli"]) / MILLI * np.asarray(jobs["duration_s"])


def admitted_jobs(jobs, status) -> tuple:
    """The jobs a run admitted, and the GPU-hours of those it turned away at submission.

    A job larger than the cluster (``rejected``) or than every node of a GPU model it accepts
    (``unplaceable``) never asks the cluster for GPU-time, so it is left out of the offered load, the
    demand in the window and the steady-state test (kept in, one 100-GPU job of 10,000 h on an 8-GPU
    cluster read as a load of 4.5 x 10^7 %); its demand is reported apart.

    Parameters
    ----------
    jobs : DataFrame or mapping
        The run's job table (``gpus``, ``gpu_milli``, ``duration_s`` [s]; :mod:`hnplan.cluster.jobs`).
    status : array of str
        Each job's final status, aligned with ``jobs`` (``"rejected"``, ``"unplaceable"``, ...).

    Returns
    -------
    admitted : DataFrame or mapping
        The rows of ``jobs`` (of its kind) neither rejected nor unplaceable (empty when every job was turned away: a load
        of 0, and the steady-state test then takes its time scale from all the jobs).
    turned : dict
        ``rejected_gpu_hours`` and ``unplaceable_gpu_hours`` [GPU h]: ``gpus x share x run time`` summed.

    """
    st = np.asarray(status)
    gpu_h = units.s_to_hours(_gpu_s(jobs).astype(float))
    turned = {s: st == s for s in ("rejected", "unplaceable")}
    admitted = take_rows(jobs, ~(turned["rejected"] | turned["unplaceable"]))
    return admitted, {f"{s}_gpu_hours": float(gpu_h[m].sum()) for s, m in turned.items()}


def _window_demand(jobs, start: float, end: float) -> float:
    """GPU-seconds the jobs would occupy inside ``[start, end]`` had each started on arrival at full
    speed [GPU s]: the most GPU-time a scheduler could fill in the measuring window (work arriving
    near its end runs past it; a heavy-tailed mix leaves much of ``offered_load`` outside)."""
    a = np.asarray(jobs["arrival_s"], float)
    inside = np.clip(np.minimum(a + np.asarray(jobs["duration_s"], float), end) - np.maximum(a, start), 0.0, None)
    return float((np.asarray(jobs["gpus"]) * np.asarray(jobs["gpu_milli"]) / MILLI * inside).sum())


#: the measuring window (after the warm-up cut) must span this many GPU-time-weighted run times: jobs
#: arriving evenly over it lose about ``d / 2`` of a run time ``d`` past its end, 12.5 % of the demand at 4 d
MEASURE_RUN_TIMES = 4.0


def steady_window_s(run_s: float, warmup: float = 0.2) -> float:
    """The shortest arrival window [s] whose figures are steady-state ones, for jobs whose
    GPU-time-weighted run time is ``run_s`` [s] and a warm-up cut of the share ``warmup`` of the window.

    Two conditions, as steady-state simulation output is handled (the initial transient deleted, then
    a run long against the process's time scale: Law, *Simulation Modeling and Analysis*, 5th ed. 2015,
    Sec. 9.5.1; with heavy-tailed job sizes the time scale is that of the jobs carrying the work,
    Crovella and Lipsky, WSC 1997, doi:10.1145/268437.268733):

    * the warm-up covers one run time: a cluster that starts empty fills like an M/G/inf system,
      ``E[N(t)] = lambda int_0^t P(S > u) du`` (Eick, Massey and Whitt, Operations Research 41(4), 1993),
      which reaches its stationary level ``lambda E[S]`` only once ``t`` passes the run times that carry
      the GPU-time: ``warmup x W >= d``;
    * the measuring window spans :data:`MEASURE_RUN_TIMES` run times: ``(1 - warmup) W >= 4 d``.

    With the default ``warmup = 0.2`` both give ``W >= 5 d``.

    >>> steady_window_s(36000.0) / 3600, steady_window_s(36000.0, warmup=0.5) / 3600
    (50.0, 80.0)
    """
    need = MEASURE_RUN_TIMES / (1.0 - warmup)
    if warmup > 0:
        need = max(need, 1.0 / warmup)
    return need * run_s


def run_time_weighted_s(jobs) -> float:
    """The jobs' ideal run time weighted by their GPU-time [s]: ``sum(g_i d_i^2) / sum(g_i d_i)`` with
    ``g_i`` the GPUs a job holds (count x share) and ``d_i`` its run time; 0 for no demand.

    >>> j = {"gpus": [8, 8], "gpu_milli": [1000, 1000], "duration_s": [3600.0, 36000.0]}  # or a DataFrame
    >>> round(run_time_weighted_s(j))  # (8 x 3600^2 + 8 x 36000^2) / (8 x 3600 + 8 x 36000)
    33055
    """
    d = np.asarray(jobs["duration_s"], float)
    gpu_s = (np.asarray(jobs["gpus"]) * np.asarray(jobs["gpu_milli"]) / MILLI).astype(float) * d
    return float((gpu_s * d).sum() / gpu_s.sum()) if gpu_s.sum() > 0 else 0.0


def mix_steady_basis(mix, cluster_gpus: int, load: float) -> dict:
    """The steady-state test's inputs from a job mix's expectations (:func:`steady_state_of`'s keywords):
    ``run_s``, its GPU-time-weighted run time [s] (:func:`hnplan.cluster.synthetic.mix_run_time_weighted_s`),
    ``jobs_per_s``, its arrival rate ``load x G / E[GPU s per job]`` [1/s] as
    :func:`hnplan.cluster.synthetic.synthetic_jobs` draws it, and ``load_asked``, the offered load it aims at
    [fraction]; GPU counts cut at the cluster's ``cluster_gpus``."""
    from hnplan.cluster.synthetic import mean_gpu_seconds, mix_run_time_weighted_s

    return {
        "run_s": mix_run_time_weighted_s(mix, cluster_gpus),
        "jobs_per_s": load * cluster_gpus / mean_gpu_seconds(mix, cluster_gpus),
        "load_asked": load,
    }


def steady_state_of(
    jobs,
    load: float,
    window_s: float,
    warmup: float = 0.2,
    *,
    run_s: float | None = None,
    jobs_per_s: float | None = None,
    load_asked: float | None = None,
) -> dict:
    """Whether a run's figures are steady-state ones, and what run would give them.

    A run is in steady state when (1) its arrival window ``window_s`` is at least
    :func:`steady_window_s` of the jobs' GPU-time-weighted run time (the warm-up covers one run time,
    the measured part four), and (2) its offered load is below 1: at or above it the queue grows for
    as long as jobs arrive, and a queue has a steady state only when work arrives more slowly than
    the servers complete it (Harchol-Balter, *Performance Modeling and Design of Computer Systems*,
    2013, ch. 2, stability). For a mix both the load it aims at and the drawn jobs' ``load`` must be
    below 1: a draw heavier than its mix (the default mix at 85 % drew 113 % over 14 days on 1,024
    GPUs, seed 0) queues work for the whole window, so its figures are an overloaded cluster's.

    Both are properties of the process that generates the jobs. For a job mix the caller passes the
    mix's expectations (``run_s``: :func:`hnplan.cluster.synthetic.mix_run_time_weighted_s`; ``jobs_per_s``:
    its arrival rate; ``load_asked``: the load it aims at), so the verdict and the remedy do not move
    with the draw and a run that follows the remedy meets it. A heavy-tailed draw's own
    :func:`run_time_weighted_s` is mostly below its expectation (the ratio is carried by rare long,
    large jobs: on the default mix one day, 19,000 jobs and nine days read 41.3, 43.1 and 32.1 h
    against 65.9 h) and moves from run to run; it is used only for a trace or a given table.

    Returns
    -------
    dict
        ``steady_state`` (bool), ``run_time_weighted_s`` [s] (the time scale used),
        ``run_time_weighted_basis`` (``"mix"`` or ``"jobs"``), ``run_time_weighted_drawn_s`` (the drawn
        jobs' own [s]), ``steady_window_s`` (the window condition (1) needs [s]), ``steady_jobs`` (the
        jobs the arrival rate brings in that window, rounded up to two digits; a ``--jobs`` draw of a
        heavy-tailed mix sets its rate from the jobs drawn, so its window may come out shorter:
        ``--days`` is the sure remedy) and ``steady_short`` (condition (1) fails).

    >>> j = {"gpus": [8, 8], "gpu_milli": [1000, 1000], "duration_s": [3600.0, 36000.0]}
    >>> d = steady_state_of(j, 0.5, 600.0)  # two jobs in 10 minutes, GPU-time-weighted run time 9.18 h
    >>> d["steady_state"], round(d["steady_window_s"] / 3600, 1), d["steady_jobs"]  # 5 x 9.18 h; 2 x 165,278 / 600
    (False, 45.9, 560)
    """
    drawn = run_time_weighted_s(jobs)
    basis = "jobs" if run_s is None else "mix"
    run_s = drawn if run_s is None else run_s
    need = steady_window_s(run_s, warmup)
    short = window_s < need
    n = job_count(jobs)
    rate = n / window_s if jobs_per_s is None else jobs_per_s
    # the process's load (a mix's aim) and this draw's: a heavy-tailed draw that offers 100 % or more
    # overloads the cluster for this window whatever the mix aims at
    stable = max(load, 0.0 if load_asked is None else load_asked) < 1.0
    return {
        "steady_state": bool(not short and stable),
        "run_time_weighted_s": run_s,
        "run_time_weighted_basis": basis,
        "run_time_weighted_drawn_s": drawn,
        "steady_window_s": need,
        "steady_jobs": _round_up(max(n, rate * need)),
        "steady_short": bool(short),
    }


def _figure(x: float) -> str:
    """A duration's figure in the load and steady-state lines: three significant digits, and whole numbers with
    separators from 1,000 up, where ``:.3g`` prints an exponent (a 144-day trace's window was ``3.47e+03 h``).

    >>> [_figure(x) for x in (3466.4, 1451.0, 21.6, 0.000278, 144.4)]
    ['3,466', '1,451', '21.6', '0.000278', '144']
    """
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def steady_text(summary: dict) -> str:
    """Whether a run's summary is in steady state, why not, and the remedy, in one line. The remedy's
    days are rounded up (two digits), so a run that follows it is long enough.

    >>> steady_text({"steady_state": False, "steady_short": True, "window_s": 86400.0, "offered_load": 1.93,
    ...     "run_time_weighted_s": 148629.0, "steady_window_s": 743145.0, "steady_jobs": 19000})
    ... # doctest: +NORMALIZE_WHITESPACE
    "no: the 24 h arrival window is 0.58x the jobs' GPU-time-weighted run time (41.3 h), under the 5x that
    steady state needs (a warm-up of one run time, four measured), so its figures are mostly warm-up; and
    the jobs offer 193% of the capacity, a queue that grows while they arrive; simulate --days 8.7 or
    about 19,000 jobs (--jobs)"
    """
    w, run_s, load = summary["window_s"], summary["run_time_weighted_s"], summary["offered_load"]
    mix = summary.get("run_time_weighted_basis") == "mix"
    asked = summary.get("offered_load_asked")
    rho = asked if mix and asked is not None else load  # the process's load for a mix, the table's otherwise
    who = "the mix's" if mix else "the jobs'"
    offer = (
        f"the mix offers {rho:.0%} of the capacity (this draw {load:.0%})"
        if mix and asked is not None
        else f"the jobs offer {load:.0%} of the capacity"
    )
    need = summary["steady_window_s"]
    span = f"{_figure(units.s_to_days(w))}-day" if w >= 2 * units.DAY else f"{_figure(units.s_to_hours(w))} h"
    run = f"{_figure(units.s_to_hours(run_s))} h"
    if summary["steady_state"]:
        return (
            f"yes: the {span} arrival window is {w / run_s:,.2g}x {who} GPU-time-weighted run time ({run}) and {offer}"
        )
    why = []
    if summary["steady_short"]:
        why.append(
            f"the {span} arrival window is {w / run_s:.2g}x {who} GPU-time-weighted run time ({run}), under "
            f"the {need / run_s:.2g}x that steady state needs (a warm-up of one run time, four measured), so "
            + (
                "its figures are mostly warm-up"
                if w < run_s
                else "the empty start and the work cut at its end bias them"
            )
        )
    if rho >= 1.0:
        why.append(f"{offer}, a queue that grows while they arrive")
    elif load >= 1.0:
        why.append(f"{offer}: this draw's large jobs overload the cluster, a queue that grows while they arrive")
    recorded = summary.get("jobs_from") == "trace"  # --days and --jobs only cut a trace, --load does not scale it
    if summary["steady_short"]:
        days = steady_window_days(need)
        fix = (
            f"replay a trace of {days:,g} days or about {int(summary['steady_jobs']):,} jobs (--days and --jobs "
            "only cut this one)"
            if recorded
            else f"simulate --days {days:,g} or about {int(summary['steady_jobs']):,} jobs (--jobs)"
        )
    elif rho < 1.0:  # the draw, not the process, is over: average more draws
        fix = "average more draws (--replications) or a longer window (--days)"
    else:
        fix = "simulate more GPUs (--gpus)" if recorded else "lower the load (--load) or simulate more GPUs (--gpus)"
    return "no: " + "; and ".join(why) + "; " + fix


def steady_window_days(window_s: float) -> float:
    """A steady-state window of ``window_s`` [s] in days, rounded up to two significant digits [days]: the
    arrival days :func:`steady_text`'s remedy names and the simulated utilisation runs
    (:func:`hnplan.cluster.utilisation.steady_days`).

    >>> steady_window_days(743145.0)   # 8.60 days
    8.7
    """
    return _ceil_digits(units.s_to_days(window_s))


def _ceil_digits(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (8.64 -> 8.7, 13.7 -> 14).

    >>> _ceil_digits(8.64), _ceil_digits(13.7), _ceil_digits(0.123), _ceil_digits(8.6)
    (8.7, 14.0, 0.13, 8.6)
    """
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return round(math.ceil(round(x / step, 9)) * step, 12)


def _round_up(n: float) -> int:
    """``n`` rounded up to two significant digits (27,982 -> 28,000)."""
    step = 10 ** max(int(math.log10(max(n, 1.0))) - 1, 0)
    return int(math.ceil(n / step) * step)


def offered_load_of(jobs, gpus: int, window_s: float) -> float:
    """Offered load of a job table on ``gpus`` GPUs [fraction]: the GPU-seconds the jobs demand
    (``gpus x share x ideal run time``, summed) per GPU-second of capacity over the arrival window
    ``window_s`` [s] (the simulated days, else up to the last arrival).

    This is the queueing literature's load of a server farm, ``rho = lambda E[S] / k`` (arrival rate
    times mean service demand over capacity; Harchol-Balter, *Performance Modeling and Design of
    Computer Systems*, 2013, ch. 2 and 15), measured on the jobs of the run, so it is the same number
    however the run is sized (``--jobs``, ``--days`` or a trace). Above 1 the arrivals ask for more
    GPU-time than the cluster has while they arrive: the queue grows.

    >>> j = {"gpus": [8, 8], "gpu_milli": [1000, 1000], "duration_s": [3600.0, 3600.0]}
    >>> offered_load_of(j, 16, 7200.0)  # 16 GPU-hours asked of 16 GPUs over 2 hours
    0.5
    """
    demand = float(_gpu_s(jobs).sum())
    return demand / (gpus * window_s)


def load_notes(summary: dict) -> list[str]:
    """The notes :func:`load_text` puts in parentheses after the offered load: the load a mix aimed at where
    the jobs drawn offer another (``offered_load_asked``), oversubscription, and a window too short for
    steady state (``steady_short``, :func:`steady_state_of`); none nests parentheses of its own, so a
    caller may join them with other notes in one pair (the CLI adds the replications' interval).

    >>> load_notes({"offered_load": 0.7, "window_s": units.DAY, "offered_load_asked": 0.85})
    ['the mix aims at 85.0%; this draw offers less']
    """
    x, window_h = summary["offered_load"], units.s_to_hours(summary["window_s"])
    asked = summary.get("offered_load_asked")
    notes = []
    if asked is not None and abs(x - asked) > 0.05 * asked:
        notes.append(f"the mix aims at {asked:.1%}; this draw offers {'more' if x > asked else 'less'}")
    short = summary.get("steady_short", False)
    if x > 1 and (not short or summary.get("offered_load_window", 0.0) > 1):  # a queue forms inside the window
        notes.append(
            f"oversubscribed: the jobs ask for {x:.2g}x the GPU-hours of the {_figure(window_h)} h arrival window"
        )
    if short:  # the load counts GPU-time that lies past the window (steady_text says what would reach it)
        notes.append(
            f"over a {_figure(window_h)} h arrival window, too short to reach steady state: the jobs run "
            f"{_figure(units.s_to_hours(summary['run_time_weighted_s']))} h, GPU-time-weighted mean"
        )
    return notes


def load_text(summary: dict) -> str:
    """The offered load of a run's summary for people: ``85.0%``, above 100 % labelled
    ``250.0% (oversubscribed: the jobs ask for 2.5x the GPU-hours of the 3.0 h arrival window)``, and
    the notes of :func:`load_notes` beside it, in one pair of parentheses. "Oversubscribed" is
    kept off a short window unless the demand inside it alone exceeds the capacity (a queue forms there).

    >>> load_text({"offered_load": 0.7, "window_s": units.DAY, "offered_load_asked": 0.85})
    '70.0% (the mix aims at 85.0%; this draw offers less)'
    """
    notes = load_notes(summary)
    return f"{summary['offered_load']:.1%}" + (f" ({'; '.join(notes)})" if notes else "")
