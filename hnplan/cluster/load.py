"""The load a run offers and whether its window reaches steady state: the offered load of a job table
(the queueing literature's ``rho``), the part of it inside the measuring window, the steady-state test
and the sentence a person reads beside the number (:func:`load_text`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.cluster.topology import MILLI


def _window_demand(jobs: pd.DataFrame, start: float, end: float) -> float:
    """GPU-seconds the jobs would occupy inside ``[start, end]`` had each started on arrival at full
    speed [GPU s]: the most GPU-time a scheduler could fill in the measuring window (work arriving
    near its end runs past it; a heavy-tailed mix leaves much of ``offered_load`` outside)."""
    a = jobs["arrival_s"].to_numpy(float)
    inside = np.clip(np.minimum(a + jobs["duration_s"].to_numpy(float), end) - np.maximum(a, start), 0.0, None)
    return float((jobs["gpus"].to_numpy() * jobs["gpu_milli"].to_numpy() / MILLI * inside).sum())


#: a window this many times the jobs' GPU-time-weighted run time keeps most of their demand inside it
#: (jobs arriving evenly over a window W with the warm-up 0.2 W left out lose about d / 1.6 W of a run
#: time d past its end: 16 % at W = 4 d)
STEADY_WINDOW_RUN_TIMES = 4.0


def steady_state_of(jobs: pd.DataFrame, load: float, load_window: float, window_s: float) -> dict:
    """Whether a run's window is long enough to reach steady state, and what would be.

    The offered load (:func:`offered_load_of`) counts each job's whole GPU-time against the arrival
    window; the cluster can only be as busy as the part of it that falls inside the window
    (``offered_load_window``). When the jobs run much longer than the window (200 jobs arriving within
    minutes, each running hours), most of that GPU-time lies after the window: the run ends before the
    queue the load implies can form, and the measured utilisation is far below the offered load. Such a run
    is flagged when less than half of ``min(offered_load, 1)`` falls inside the window.

    Returns
    -------
    dict
        ``steady_state`` (bool), ``run_time_weighted_s`` (the jobs' ideal run time weighted by their
        GPU-time [s]), ``steady_window_s`` (:data:`STEADY_WINDOW_RUN_TIMES` times it [s]) and
        ``steady_jobs`` (the jobs the same arrival rate brings in that window).

    >>> j = pd.DataFrame({"gpus": [8, 8], "gpu_milli": [1000, 1000], "duration_s": [3600.0, 36000.0]})
    >>> d = steady_state_of(j, 5.0, 0.2, 600.0)  # two jobs in 10 minutes, running 1 h and 10 h
    >>> d["steady_state"], round(d["run_time_weighted_s"] / 3600, 2), d["steady_jobs"]
    (False, 9.18, 450)
    """
    gpu_s = (jobs["gpus"] * jobs["gpu_milli"] / MILLI * jobs["duration_s"]).to_numpy(float)
    run_s = float((gpu_s * jobs["duration_s"].to_numpy(float)).sum() / gpu_s.sum()) if gpu_s.sum() > 0 else 0.0
    steady_window = STEADY_WINDOW_RUN_TIMES * run_s
    return {
        "steady_state": bool(load_window >= 0.5 * min(load, 1.0)),
        "run_time_weighted_s": run_s,
        "steady_window_s": steady_window,
        "steady_jobs": _round_up(max(len(jobs), len(jobs) * steady_window / window_s)),
    }


def _round_up(n: float) -> int:
    """``n`` rounded up to two significant digits (27,982 -> 28,000)."""
    step = 10 ** max(int(math.log10(max(n, 1.0))) - 1, 0)
    return int(math.ceil(n / step) * step)


def offered_load_of(jobs: pd.DataFrame, gpus: int, window_s: float) -> float:
    """Offered load of a job table on ``gpus`` GPUs [fraction]: the GPU-seconds the jobs demand
    (``gpus x share x ideal run time``, summed) per GPU-second of capacity over the arrival window
    ``window_s`` [s] (the simulated days, else up to the last arrival).

    This is the queueing literature's load of a server farm, ``rho = lambda E[S] / k`` (arrival rate
    times mean service demand over capacity; Harchol-Balter, *Performance Modeling and Design of
    Computer Systems*, 2013, ch. 2 and 15), measured on the jobs of the run, so it is the same number
    however the run is sized (``--jobs``, ``--days`` or a trace). Above 1 the arrivals ask for more
    GPU-time than the cluster has while they arrive: the queue grows.

    >>> j = pd.DataFrame({"gpus": [8, 8], "gpu_milli": [1000, 1000], "duration_s": [3600.0, 3600.0]})
    >>> offered_load_of(j, 16, 7200.0)  # 16 GPU-hours asked of 16 GPUs over 2 hours
    0.5
    """
    demand = float((jobs["gpus"] * jobs["gpu_milli"] / MILLI * jobs["duration_s"]).sum())
    return demand / (gpus * window_s)


def load_text(summary: dict) -> str:
    """The offered load of a run's summary for people: ``85.0%``, above 100 % labelled
    ``250.0% (oversubscribed: the jobs ask for 2.5x the GPU-hours of the 3.0 h arrival window)``, and
    the load a mix aimed at beside it where the jobs drawn offer another (``offered_load_asked``).

    >>> load_text({"offered_load": 0.7, "window_s": units.DAY, "offered_load_asked": 0.85})
    '70.0% (the mix aims at 85.0%; this draw offers less)'
    """
    x, window_h = summary["offered_load"], units.s_to_hours(summary["window_s"])
    asked = summary.get("offered_load_asked")
    notes = []
    if asked is not None and abs(x - asked) > 0.05 * asked:
        notes.append(f"the mix aims at {asked:.1%}; this draw offers {'more' if x > asked else 'less'}")
    if not summary.get("steady_state", True):
        notes.append(
            f"over a {window_h:,.3g} h arrival window, too short to reach steady state: the jobs run "
            f"{units.s_to_hours(summary['run_time_weighted_s']):,.3g} h (GPU-time-weighted mean), so only "
            f"{summary['offered_load_window']:.1%} falls inside the measuring window; for steady state simulate "
            f"{STEADY_WINDOW_RUN_TIMES:g}x that run time: --days {units.s_to_days(summary['steady_window_s']):,.2g} "
            f"or about {summary['steady_jobs']:,} jobs (--jobs)"
        )
    elif x > 1:
        notes.append(f"oversubscribed: the jobs ask for {x:.2g}x the GPU-hours of the {window_h:,.3g} h arrival window")
    return f"{x:.1%}" + (f" ({'; '.join(notes)})" if notes else "")
