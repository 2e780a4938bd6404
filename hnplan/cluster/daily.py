"""The cluster's utilisation per calendar day of a simulated window, integrated exactly over the state after every
change (:func:`hnplan.cluster.result.ledger_series`), so the warm-up, bursts and failures show day by day."""

from __future__ import annotations

import numpy as np

from hnplan import units

DAY_FIELDS = ("allocated", "down")
"""The per-day shares: the ledger series whose time means per day are kept [fraction of installed GPUs]."""


def _cumulative(t: np.ndarray, x: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integral from 0 of a piecewise constant ``x`` (row ``i`` holding from ``t[i]`` to ``t[i + 1]``, the
    last onwards, 0 before the first row) up to each time in ``at`` [x unit x s]."""
    held = np.diff(t)
    area = np.concatenate(([0.0], np.cumsum(x[:-1] * held)))  # the integral up to each row's time
    j = np.searchsorted(t, at, side="right") - 1
    inside = j >= 0
    jj = np.where(inside, j, 0)
    return np.where(inside, area[jj] + x[jj] * (at - t[jj]), 0.0)


def utilisation_by_day(series: dict, window: float, warm: float = 0.0, day_s: float = units.DAY) -> dict:
    """Allocated and down shares of the installed GPUs per calendar day of ``[0, window]``, time-weighted.

    Day ``k`` runs from ``k x day_s`` to ``(k + 1) x day_s`` (the last one ends with the window, so it may be
    shorter). Its share is the time mean of the state over the day: with the series piecewise constant between
    the simulation's events (each row holding from its time to the next, the last to the window's end, none
    before the first row) the integral is exact, not sampled: sum(value x time held in the day) / day length.
    So the days' shares weighted by their lengths average to the time mean over the whole window, and, where
    ``warm`` is 0, the allocated one is the summary's ``allocation_rate`` (allocated over installed GPU-time,
    :func:`hnplan.cluster.result.capacity_split`'s ``busy`` share); with a warm-up the days before and across it
    are shown too, ``measured_s`` saying how much of each day the summary's time means count.

    Parameters
    ----------
    series : dict
        Arrays of equal length, times ascending: ``time_s`` [s], ``allocation`` and ``down`` [fraction of the
        installed GPUs] (:func:`hnplan.cluster.result.ledger_series`).
    window : float
        The end of the measuring window [s] (the arrivals' span); days run from time 0.
    warm : float
        The start of the measuring window (the end of the warm-up) [s].
    day_s : float
        The length of a day [s].

    Returns
    -------
    dict
        Lists, one entry per day: ``day`` (index from 0), ``start_s``, ``length_s`` and ``measured_s`` (the part
        of the day inside ``[warm, window]``) [s], ``allocated`` and ``down`` [fraction of installed GPUs].

    >>> d = utilisation_by_day({"time_s": [0.0, 6.0, 30.0], "allocation": [0.5, 1.0, 0.25],
    ...                         "down": [0.0, 0.0, 0.5]}, 40.0, warm=8.0, day_s=24.0)
    >>> d["allocated"]   # (0.5 x 6 + 1 x 18) / 24; (1 x 6 + 0.25 x 10) / 16
    [0.875, 0.53125]
    >>> d["down"], d["length_s"], d["measured_s"]
    ([0.0, 0.3125], [24.0, 16.0], [16.0, 16.0])
    """
    t = np.asarray(series["time_s"], float)
    days = max(int(np.ceil(window / day_s - 1e-12)), 1) if window > 0 else 0
    edges = np.minimum(np.arange(days + 1, dtype=float) * day_s, window)
    length = np.diff(edges)
    out: dict = {
        "day": list(range(days)),
        "start_s": edges[:-1].tolist(),
        "length_s": length.tolist(),
        "measured_s": (np.clip(edges[1:], warm, window) - np.clip(edges[:-1], warm, window)).tolist(),
    }
    keep = t <= window  # rows after the window hold for no time inside it
    tt = t[keep]
    for name, col in (("allocated", "allocation"), ("down", "down")):
        x = np.asarray(series[col], float)[keep]
        area = np.diff(_cumulative(tt, x, edges)) if len(tt) else np.zeros(days)
        out[name] = np.divide(area, length, out=np.zeros(days), where=length > 0).tolist()
    return out


def mean_by_day(runs: list[dict]) -> dict:
    """The mean over replications of their :func:`utilisation_by_day`, day by day: a day's shares averaged over
    the runs whose window reaches it (a run of a given job count ends with its last arrival, so the runs' last
    days differ), its ``length_s`` and ``measured_s`` likewise, with ``runs`` (how many runs reach the day)."""
    n = max(len(r["day"]) for r in runs)
    out: dict = {"day": list(range(n))}
    count = np.zeros(n)
    for r in runs:
        count[: len(r["day"])] += 1
    out["runs"] = count.astype(int).tolist()
    for k in ("start_s", "length_s", "measured_s", *DAY_FIELDS):
        total = np.zeros(n)
        for r in runs:
            total[: len(r[k])] += np.asarray(r[k], float)
        out[k] = (total / count).tolist()
    return out
