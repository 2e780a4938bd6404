"""Where a simulated cluster's GPU-time went, integrated exactly: the state after every change of a finished
:class:`hnplan.cluster.engine.ClusterSim` (:func:`ledger_series`, piecewise constant between events), its split
into busy, drained, fragmented, other queued, idle and down GPU-seconds (:func:`capacity_split`) and the
summary's time means (:func:`time_means`). Split from :mod:`hnplan.cluster.result`, which re-exports them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hnplan.cluster.engine import ClusterSim


def capacity_split(series: dict, gpus: int, warm: float, window: float) -> dict:
    """Installed GPU-time over ``[warm, window]`` split into where it went [GPU s], from the state after every
    change (:func:`ledger_series`: piecewise constant between the simulation's events, so the integral is exact).

    Each row holds from its time to the next (the last to the window's end). Per row the GPUs are
    ``busy`` (allocated) + ``down`` (in repair) + free, and the free ones, while jobs are queued, are
    ``drained`` (idle while the job holding the backfill reservation, or without backfilling the first blocked
    job, waits for the rest of its GPUs: EASY's drain, Mu'alem and Feitelson 2001 Sec. 2), ``fragmented``
    (free but no queued job fits them, :func:`hnplan.cluster.policies.stranded`) or ``other_queued`` (a
    queued job fits but has not started yet); with the queue empty they are ``idle_empty_queue``. So
    ``busy + drained + fragmented + other_queued + idle_empty_queue + down = gpus x (window - warm)``;
    ``blocked`` is ``drained + fragmented + other_queued`` (idle while jobs wait).

    Parameters
    ----------
    series : dict
        Arrays of equal length, times ascending: ``time_s`` [s] and, as fractions of ``gpus``,
        ``allocation``, ``free``, ``fragmentation``, ``blocked``, ``queued_free``, ``down``; ``queued``
        (jobs queued, or any positive number while some are).
    gpus : int
        Installed GPUs.
    warm, window : float
        The measuring window's start and end [s].

    Returns
    -------
    dict
        Those GPU-seconds, ``total``, and ``share`` (each over ``total``).

    >>> c = capacity_split({"time_s": [0.0, 10.0], "allocation": [0.5, 1.0], "free": [0.5, 0.0],
    ...                     "fragmentation": [0.0, 0.0], "blocked": [0.5, 0.0], "queued_free": [0.0, 0.0],
    ...                     "down": [0.0, 0.0], "queued": [1, 0]}, 8, 0.0, 30.0)
    >>> c["busy"], c["drained"], c["total"]   # 4 GPUs x 10 s + 8 x 20 s; 4 x 10 s; 8 x 30 s
    (200.0, 40.0, 240.0)
    """
    dt = _held_s(series, warm, window)
    free = np.asarray(series["free"], float)
    queued = np.asarray(series["queued"], float) > 0
    frag = _fragmented(series)
    parts = {
        "busy": np.asarray(series["allocation"], float),
        "drained": np.where(queued, np.asarray(series["blocked"], float), 0.0),
        "fragmented": np.where(queued, frag, 0.0),
        "other_queued": np.where(queued, np.asarray(series["queued_free"], float), 0.0),
        "idle_empty_queue": np.where(queued, 0.0, free),
        "down": np.asarray(series["down"], float),
    }
    out = {k: float((v * dt).sum()) * gpus for k, v in parts.items()}
    out["blocked"] = out["drained"] + out["fragmented"] + out["other_queued"]
    out["total"] = float(gpus * (window - warm))
    out["share"] = {k: v / out["total"] if out["total"] > 0 else 0.0 for k, v in out.items() if k != "total"}
    return out


def _held_s(series: dict, warm: float, window: float) -> np.ndarray:
    """The time each row of a piecewise constant series holds inside ``[warm, window]`` [s]: from its time to
    the next row's, the last to the window's end."""
    t = np.asarray(series["time_s"], float)
    edges = np.clip(np.append(t, max(window, t[-1] if len(t) else window)), warm, window)
    return np.diff(edges)


def _fragmented(series: dict) -> np.ndarray:
    """The fragmented share of the GPUs per row: stranded, at most the free ones (0 with the queue empty)."""
    frag = np.minimum(np.asarray(series["fragmentation"], float), np.asarray(series["free"], float))
    return np.where(np.asarray(series["queued"], float) > 0, frag, 0.0)


def time_means(series: dict, warm: float, window: float) -> dict:
    """The summary's time means and maxima over ``[warm, window]``, integrated exactly over the state after
    every change (:func:`ledger_series`), as :func:`capacity_split` integrates the GPU-time.

    A mean is the time-weighted one, sum(value x time held) / (window - warm); a maximum is taken over the
    rows that hold for some time inside the window (a state replaced at the same instant never held).

    Parameters
    ----------
    series : dict
        As for :func:`capacity_split`, and ``running`` (jobs running).
    warm, window : float
        The measuring window's start and end [s].

    Returns
    -------
    dict
        ``fragmentation`` and ``fragmentation_max`` (:func:`capacity_split`'s fragmented GPUs as a fraction
        of the installed ones: so ``fragmentation x gpus x (window - warm)`` is its ``fragmented``),
        ``blocked`` (the drained fraction: its ``drained`` likewise), ``concurrent_jobs`` (``mean``, ``max``
        jobs running); 0 for an empty window.

    >>> m = time_means({"time_s": [0.0, 10.0], "fragmentation": [0.25, 0.0], "free": [0.5, 0.0],
    ...                 "blocked": [0.25, 0.0], "queued": [1, 0], "running": [1, 3]}, 0.0, 40.0)
    >>> m["fragmentation"], m["fragmentation_max"], m["concurrent_jobs"]  # 0.25 x 10 / 40; (1 x 10 + 3 x 30) / 40
    (0.0625, 0.25, {'mean': 2.5, 'max': 3})
    """
    dt = _held_s(series, warm, window)
    span = window - warm
    held = dt > 0
    frag = _fragmented(series)
    drained = np.where(np.asarray(series["queued"], float) > 0, np.asarray(series["blocked"], float), 0.0)
    running = np.asarray(series["running"], float)

    def mean(x: np.ndarray) -> float:
        return float((x * dt).sum() / span) if span > 0 else 0.0

    def peak(x: np.ndarray) -> float:
        return float(x[held].max()) if held.any() else 0.0

    return {
        "fragmentation": mean(frag),
        "fragmentation_max": peak(frag),
        "blocked": mean(drained),
        "concurrent_jobs": {"mean": mean(running), "max": int(peak(running))},
    }


def ledger_series(sim: ClusterSim) -> dict:
    """The simulation's state after every change (``sim.ledger``) as the series :func:`capacity_split`
    integrates: ``time_s`` [s], ``queued`` (1 while jobs are queued), ``running`` (jobs running), the rest
    fractions of the GPUs."""
    rows = sim.ledger_rows()
    t, alloc, free, strand, blocked, other, down, queued, running = rows.T
    total = sim.topo.gpus
    return {
        "time_s": t,
        "allocation": alloc / total,
        "free": free / total,
        "fragmentation": strand / total,
        "blocked": blocked / total,
        "queued_free": other / total,
        "down": down / total,
        "queued": queued,
        "running": running,
    }
