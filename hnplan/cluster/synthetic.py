"""Synthetic jobs of a shared cluster drawn from a job mix (``data/cluster_mixes/``): arrivals, sizes, run
times and classes fitted to public traces, and the mix's expected GPU-time and GPU-time-weighted run time
(the job table: :mod:`hnplan.cluster.jobs`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.cluster.jobs import MAX_JOB_YEARS, MAX_JOBS, check_days, check_jobs, job_frame
from hnplan.cluster.topology import MILLI
from hnplan.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


# -- synthetic jobs ---------------------------------------------------------------------------
def _draw(dist, n: int, rng: np.random.Generator) -> np.ndarray:
    if dist.kind == "discrete":
        w = np.asarray(dist.weights, float)
        x = rng.choice(np.asarray(dist.values, float), size=n, p=w / w.sum())
    else:
        x = rng.lognormal(dist.mu, dist.sigma, size=n)
    return x if dist.max is None else np.minimum(x, dist.max)


def _moment(dist, k: int = 1, cap: float | None = None) -> float:
    """``E[min(X, c)^k]`` of a distribution cut at ``max`` and at ``cap``; for a log-normal in closed form,
    ``exp(k mu + k^2 sigma^2 / 2) Phi(z - k sigma) + c^k (1 - Phi(z))`` with ``z = (ln c - mu) / sigma``
    (the partial moments of the log-normal: Johnson, Kotz and Balakrishnan, *Continuous Univariate
    Distributions*, vol. 1, 2nd ed. 1994, ch. 14)."""
    c = dist.max if cap is None else (cap if dist.max is None else min(dist.max, cap))
    if dist.kind == "discrete":
        v, w = np.asarray(dist.values, float), np.asarray(dist.weights, float)
        v = v if c is None else np.minimum(v, c)
        return float(np.dot(v**k, w) / w.sum())
    mu, s = dist.mu, dist.sigma
    full = np.exp(k * mu + k * k * s * s / 2)
    if c is None or s == 0:
        return float(full if c is None else min(full, c**k))
    z = (np.log(c) - mu) / s
    # the standard normal's cdf and survival function through the complementary error function (math.erfc:
    # Phi(x) = erfc(-x / sqrt 2) / 2), which keeps scipy.stats (~0.37 s to import) off `cluster simulate`
    return float(full * _norm_cdf(z - k * s) + c**k * _norm_cdf(-z))


def _norm_cdf(x: float) -> float:
    """Standard normal cdf ``Phi(x) = erfc(-x / sqrt(2)) / 2``, the identity scipy's own ``ndtr`` evaluates
    (``scipy.special.ndtr`` costs about 0.23 s of import, the stdlib's ``math.erfc`` nothing); checked against
    ``scipy.stats.norm`` in tests/test_cli_lazy.py."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _mean(dist, cap: float | None = None) -> float:
    """Mean of a distribution cut at ``max`` and at ``cap`` (a log-normal's ``E[min(X, c)]`` in
    closed form)."""
    return _moment(dist, 1, cap)


def _gpus_held(c, max_gpus: int | None) -> float:
    """Expected GPUs a job of class ``c`` holds (count x share) [GPU], counts cut at ``max_gpus``."""
    eg = _mean(c.gpus, max_gpus)
    if c.fractional is not None and c.gpu_milli is not None and c.gpus.kind == "discrete":
        w = np.asarray(c.gpus.weights, float)
        w1 = w[np.asarray(c.gpus.values) == 1].sum() / w.sum()
        eg -= w1 * c.fractional.value * (1 - min(_mean(c.gpu_milli), MILLI) / MILLI)
    return float(eg)


def mean_gpu_seconds(mix, max_gpus: int | None = None) -> float:
    """Expected GPU-seconds of one job of a mix [GPU s] (``E[gpus x share] E[duration]`` per class,
    weighted by the class shares; log-normal mean ``exp(mu + sigma^2 / 2)``), with GPU counts cut at
    ``max_gpus`` as :func:`synthetic_jobs` cuts them to the cluster (a 1,024-GPU draw on a 64-GPU
    cluster asks for 64)."""
    return float(sum(c.share.value * _gpus_held(c, max_gpus) * _mean(c.duration_s) for c in mix.classes))


def _above(dist, c: float) -> float:
    """``P(X > c)`` of a distribution cut at ``max`` (a draw at ``max`` is not above a ``c`` at or over it)."""
    if dist.max is not None and dist.max <= c:
        return 0.0
    if dist.kind == "discrete":
        v, w = np.asarray(dist.values, float), np.asarray(dist.weights, float)
        return float(w[v > c].sum() / w.sum())
    if dist.sigma == 0:
        return float(math.exp(dist.mu) > c)
    return _norm_cdf(-(math.log(c) - dist.mu) / dist.sigma)


def capped_shares(mix, cluster_gpus: int) -> tuple[float, float]:
    """What the cap on a draw's GPUs (:func:`synthetic_jobs` asks at most ``cluster_gpus``: a job-size distribution
    fitted to a larger cluster's trace, drawn for a smaller one) changes: ``(jobs, GPU-time)``, the expected share
    of the drawn jobs that asked for more than the cluster and run on all of it, and their share of the offered
    GPU-time [fraction each].

    >>> from hnplan.catalog.mixes import cluster_mix
    >>> [round(x, 3) for x in capped_shares(cluster_mix("default"), 100_000)]
    [0.0, 0.0]
    """
    share = sum(c.share.value for c in mix.classes)
    jobs = sum(c.share.value * _above(c.gpus, cluster_gpus) for c in mix.classes) / share
    held = sum(c.share.value * cluster_gpus * _above(c.gpus, cluster_gpus) * _mean(c.duration_s) for c in mix.classes)
    return float(jobs), float(held / mean_gpu_seconds(mix, cluster_gpus))


def mix_run_time_weighted_s(mix, max_gpus: int | None = None) -> float:
    """The mix's expected run time weighted by GPU-time [s]: ``E[g d^2] / E[g d]`` over its jobs, ``g``
    the GPUs a job holds and ``d`` its run time, drawn independently within a class (so
    ``E[g d^k] = E[g] E[d^k]`` per class, weighted by the class shares; ``E[d^2]`` of the cut
    log-normal by :func:`_moment`). The expectation of what :func:`hnplan.cluster.load.run_time_weighted_s`
    measures on a drawn table, the time scale of a steady-state run that does not move with the draw.

    >>> from hnplan.catalog.mixes import cluster_mix
    >>> round(mix_run_time_weighted_s(cluster_mix("default"), 1152) / 3600, 1)  # hours
    65.9
    """
    num = sum(c.share.value * _gpus_held(c, max_gpus) * _moment(c.duration_s, 2) for c in mix.classes)
    return float(num / mean_gpu_seconds(mix, max_gpus))


def synthetic_jobs(
    mix,
    cluster_gpus: int,
    *,
    jobs: int | None = None,
    days: float | None = None,
    seed: int = 0,
    offered_load: float | None = None,
    max_gpus: int | None = None,
) -> pd.DataFrame:
    """Jobs drawn from a synthetic mix (:class:`hnplan.catalog.schemas.ClusterMix`), a job table
    (:mod:`hnplan.cluster.jobs`; :func:`synthetic_columns` gives the same as numpy columns, without pandas).

    Each job's class, GPU count, GPU share and duration are drawn independently from the class's
    distributions. Arrivals are Poisson with rate ``lambda = load x G / E[GPU s per job]`` [1/s] for
    a cluster of ``G`` GPUs, so the offered demand is ``load`` of the cluster (Little's law): with
    ``jobs``, ``E`` is the mean of the drawn jobs (a heavy-tailed duration converges slowly to its
    expectation); with ``days``, the mix's expectation (:func:`mean_gpu_seconds`) sets the count.

    Parameters
    ----------
    mix : ClusterMix
    cluster_gpus : int
    jobs, days : int or float
        Draw this many jobs, or the arrivals of this many days (exactly one of the two).
    seed : int
    offered_load : float, optional
        Replaces the mix's ``offered_load`` [fraction].
    max_gpus : int, optional
        Larger draws are capped at this (default ``cluster_gpus``).

    Raises
    ------
    InputError
        Unless exactly one of ``jobs``/``days`` is given and positive, for a load <= 0, or when the run
        would draw more than :data:`MAX_JOBS` jobs (``jobs`` above it, or ``days`` of arrivals expected to).
    """
    return job_frame(
        synthetic_columns(
            mix, cluster_gpus, jobs=jobs, days=days, seed=seed, offered_load=offered_load, max_gpus=max_gpus
        )
    )


def synthetic_columns(
    mix,
    cluster_gpus: int,
    *,
    jobs: int | None = None,
    days: float | None = None,
    seed: int = 0,
    offered_load: float | None = None,
    max_gpus: int | None = None,
) -> dict:
    """:func:`synthetic_jobs` as a mapping of column name to numpy array (:func:`hnplan.cluster.jobs.job_columns`):
    the same draw, checked and sorted, for the simulation, which reads columns and needs no pandas."""
    if (jobs is None) == (days is None):
        raise InputError("give exactly one of jobs and days")
    if (jobs is not None and jobs < 1) or (days is not None and days <= 0):
        raise InputError(f"jobs must be >= 1 and days > 0; got jobs={jobs}, days={days}")
    load = mix.offered_load.value if offered_load is None else offered_load
    if load <= 0:
        raise InputError(f"offered load must be > 0; got {load}")
    rng = np.random.default_rng(seed)
    cap = max_gpus or cluster_gpus
    if jobs is None:
        per_day = load * cluster_gpus / mean_gpu_seconds(mix, cap) * units.days_to_s(1.0)
        # the lower of the two bounds is named: the job limit on a large cluster, 15 years on a small one
        if per_day * days > MAX_JOBS and MAX_JOBS / per_day <= units.s_to_days(units.years_to_s(MAX_JOB_YEARS)):
            raise InputError(
                f"days must be at most {MAX_JOBS / per_day:.3g} for mix {mix.id} on {cluster_gpus:,} GPUs at "
                f"load {load:.0%}: a day draws about {per_day:,.0f} jobs and a run is limited to {MAX_JOBS:,} jobs "
                f"(the event simulation takes about 0.3 ms a job, some 5 minutes at the limit); got {days!r}"
            )
        check_days(days)
        n = max(int(rng.poisson(per_day * days)), 1)
    else:
        if jobs > MAX_JOBS:
            raise InputError(
                f"jobs must be at most {MAX_JOBS:,}, the jobs a run is limited to (the event simulation takes "
                f"about 0.3 ms a job, some 5 minutes at the limit); got {jobs!r}"
            )
        n = jobs
    shares = np.array([c.share.value for c in mix.classes])
    which = rng.choice(len(mix.classes), size=n, p=shares / shares.sum())
    gpus = np.ones(n, np.int64)
    milli = np.full(n, MILLI, np.int64)
    dur = np.ones(n)
    ckpt = np.zeros(n)
    tp = np.ones(n, np.int64)
    cls = np.empty(n, dtype=object)
    for i, c in enumerate(mix.classes):
        sel = np.flatnonzero(which == i)
        k = len(sel)
        if not k:
            continue
        g = np.clip(np.round(_draw(c.gpus, k, rng)), 1, cap).astype(np.int64)
        gpus[sel] = g
        if c.fractional is not None and c.gpu_milli is not None:
            frac = (g == 1) & (rng.random(k) < c.fractional.value)
            m = np.clip(np.round(_draw(c.gpu_milli, k, rng)), 1, MILLI).astype(np.int64)
            milli[sel[frac]] = m[frac]
        dur[sel] = np.maximum(_draw(c.duration_s, k, rng), 1.0)
        ckpt[sel] = np.inf if c.checkpoint_s.value < 0 else c.checkpoint_s.value
        tp[sel] = np.minimum(c.tp_gpus, g)
        cls[sel] = c.cls
    if jobs is None:
        arrivals = np.sort(rng.uniform(0.0, units.days_to_s(days), size=n))
    else:  # the rate that offers `load` of the cluster with the GPU-seconds actually drawn
        rate = load * cluster_gpus / float(np.mean(gpus * milli / MILLI * dur))
        arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    return check_jobs(
        {
            "arrival_s": arrivals,
            "gpus": gpus,
            "gpu_milli": milli,
            "duration_s": dur,
            "cls": cls,
            "checkpoint_s": ckpt,
            "tp": tp,
        },
        f"mix {mix.id}",
    )
