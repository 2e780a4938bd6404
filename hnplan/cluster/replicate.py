"""Independent replications of a cluster simulation: every figure as the mean over ``R`` runs on
independent random streams with its 95 % confidence interval, so an answer does not flip with one seed.

A run of a heavy-tailed job mix is one draw of a random process: which few large, long training jobs
it draws decides much of its utilisation and queueing (docs/cluster.md, "Pass intervals": the same
setup reads 45.6 % on one seed and 49.3 % on another, and 23 % when the pass interval changes). The
method of independent replications (Law, *Simulation Modeling and Analysis*, 5th ed. 2015, Sec. 9.4.1)
runs the model ``R`` times on independent streams and reports the mean of each output with the
Student-t interval ``mean +- t_{R-1, 0.975} s / sqrt(R)``; its half-width shrinks as ``1 / sqrt(R)``.
The streams come from ``numpy.random.SeedSequence(seed).spawn(R)`` (NumPy's recommended way to seed
parallel streams that do not overlap).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hnplan.cluster.load import steady_text
from hnplan.cluster.simulate import ClusterResult, _plain, simulate_cluster
from hnplan.errors import InputError

#: the confidence level of the intervals
CONFIDENCE = 0.95
#: the most replications a run takes (each is a whole simulation)
MAX_REPLICATIONS = 1000


def replication_seeds(seed: int, replications: int) -> list[int]:
    """The integer seeds of ``replications`` independent streams: ``[seed]`` for one (a single run is
    the plain run of that seed), else one 32-bit seed from each child of
    ``numpy.random.SeedSequence(seed).spawn(replications)``.

    >>> replication_seeds(7, 1)
    [7]
    >>> len(set(replication_seeds(0, 5))), replication_seeds(0, 5)[:2] == replication_seeds(0, 2)
    (5, True)
    """
    if replications == 1:
        return [int(seed)]
    return [int(c.generate_state(1)[0]) for c in np.random.SeedSequence(seed).spawn(replications)]


def mean_ci(values, confidence: float = CONFIDENCE) -> dict:
    """The mean of independent replications and its Student-t confidence interval.

    ``mean +- t_{n-1, (1 + confidence) / 2} x s / sqrt(n)`` with ``s`` the sample standard deviation
    (``scipy.stats.t``; Law 2015, Sec. 9.4.1). One value has no interval (``low``/``high`` None).

    Returns
    -------
    dict
        ``mean``, ``low``, ``high``, ``half_width`` (same unit as the values) and ``n``.

    >>> d = mean_ci([0.40, 0.50, 0.60])  # s = 0.1, t_{2, 0.975} = 4.303: half-width 0.1 x 4.303 / sqrt(3)
    >>> round(d["mean"], 3), round(d["half_width"], 4), round(d["low"], 4), round(d["high"], 4)
    (0.5, 0.2484, 0.2516, 0.7484)
    """
    x = np.asarray([float(v) for v in values], float)
    n = len(x)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "half_width": None, "n": 0}
    m = float(x.mean())
    if n < 2:
        return {"mean": m, "low": None, "high": None, "half_width": None, "n": 1}
    from scipy import stats

    sem = float(x.std(ddof=1) / math.sqrt(n))
    hw = float(stats.t.ppf((1 + confidence) / 2, n - 1) * sem)
    return {"mean": m, "low": m - hw, "high": m + hw, "half_width": hw, "n": n}


def _number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _aggregate(values: list, path: str, ci: dict):
    """The mean of the runs' summaries, leaf by leaf; numeric leaves also get ``ci[path]``."""
    first = values[0]
    if isinstance(first, dict):
        keys = list(dict.fromkeys(k for v in values if isinstance(v, dict) for k in v))
        return {
            k: _aggregate([v[k] for v in values if isinstance(v, dict) and k in v], f"{path}.{k}".lstrip("."), ci)
            for k in keys
        }
    nums = [float(v) for v in values if _number(v) and math.isfinite(float(v))]
    if _number(first) and nums:
        ci[path] = mean_ci(nums)
        return ci[path]["mean"]
    if isinstance(first, (bool, np.bool_)):  # steady state: only if every run is; too short: if any is
        return bool(any(values)) if path.endswith("_short") else bool(all(values))
    return first  # text (the same for every run of a mix), lists


@dataclass(frozen=True)
class ReplicatedResult:
    """Outcomes of ``R`` independent replications of one cluster simulation.

    Attributes
    ----------
    runs : tuple of ClusterResult
        One per replication, in seed order.
    seeds : tuple of int
        The seeds of the runs (:func:`replication_seeds`).
    summary : dict
        The runs' summaries averaged leaf by leaf (numbers: the mean over the runs, a class's queueing
        percentiles the mean of the per-run percentiles; flags such as ``steady_state``: true only if
        every run's is; text: the first run's), plus ``replications`` and ``seeds``.
    ci95 : dict
        ``"utilisation"``, ``"queue_delay_s.training.p95"``, ...: the :func:`mean_ci` of every numeric
        summary figure (``mean, low, high, half_width, n``).
    """

    runs: tuple[ClusterResult, ...] = field(repr=False)
    seeds: tuple[int, ...]
    summary: dict = field(repr=False)
    ci95: dict = field(repr=False)

    @property
    def system(self) -> str:
        return self.runs[0].system

    @property
    def gpus(self) -> int:
        return self.runs[0].gpus

    def to_json(self) -> dict:
        """The averaged summary with ``ci95`` and each run's ``utilisation``, as plain JSON types."""
        out = _plain(self.summary)
        out["ci95"] = _plain(self.ci95)
        out["runs"] = [
            {"seed": s, "utilisation": _plain(r.summary["utilisation"])}
            for s, r in zip(self.seeds, self.runs, strict=True)
        ]
        return out


def _one_run(system, gpus: int, seed: int, root: str | None, kw: dict) -> ClusterResult:
    """One replication in a worker process, its catalog loaded from ``root``."""
    from hnplan.catalog.loader import load_catalog

    return simulate_cluster(system, gpus, seed=seed, catalog=load_catalog(root), **kw)


def replicate_cluster(
    system,
    gpus: int,
    replications: int = 5,
    *,
    seed: int = 0,
    workers: int = 1,
    progress: Callable[[float], None] | None = None,
    **kw,
) -> ReplicatedResult:
    """Run :func:`hnplan.cluster.simulate_cluster` ``replications`` times on independent seeds and
    average its summary with 95 % confidence intervals.

    Parameters
    ----------
    system, gpus, kw
        As :func:`hnplan.cluster.simulate_cluster` (``jobs``, ``mix``, ``days``, ``n_jobs``, ``policy``,
        ...). With a mix every replication draws its own jobs; with a trace or a given job table only
        the failures and restarts differ between replications.
    replications : int
        Runs, 1 to :data:`MAX_REPLICATIONS`; each costs a whole simulation.
    seed : int
        The root seed (:func:`replication_seeds`).
    workers : int
        Processes that run replications side by side (``concurrent.futures.ProcessPoolExecutor``);
        1 (default): one after another in this process. The results do not depend on it.
    progress : callable, optional
        Called with the share of the total work done [0-1] as the runs advance (with several
        workers, as runs finish).

    Returns
    -------
    ReplicatedResult

    Raises
    ------
    InputError
        For ``replications`` outside 1 to :data:`MAX_REPLICATIONS`, and whatever
        :func:`hnplan.cluster.simulate_cluster` raises.

    Examples
    --------
    >>> r = replicate_cluster("hgx-h100-ib-ndr", 64, 3, n_jobs=200, seed=1)
    >>> len(r.runs), r.ci95["utilisation"]["n"]
    (3, 3)
    >>> r.ci95["utilisation"]["low"] <= r.summary["utilisation"] <= r.ci95["utilisation"]["high"]
    True
    """
    if not 1 <= replications <= MAX_REPLICATIONS:
        raise InputError(f"replications must be 1 to {MAX_REPLICATIONS:,}; got {replications}")
    if workers < 1:
        raise InputError(f"workers must be >= 1; got {workers}")
    seeds = replication_seeds(seed, replications)
    runs: list[ClusterResult] = []
    if workers > 1 and len(seeds) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(seeds))) as pool:
            cat = kw.pop("catalog", None)  # a catalog does not pickle: each worker loads it from its root
            root = None if cat is None else str(cat.root)
            futures = [pool.submit(_one_run, system, gpus, s, root, kw) for s in seeds]
            for i, f in enumerate(futures):
                runs.append(f.result())
                if progress is not None:
                    progress((i + 1) / len(seeds))
    else:
        for i, s in enumerate(seeds):
            hook = (
                None if progress is None else (lambda now, end, i=i: progress((i + min(now / end, 1.0)) / len(seeds)))
            )
            runs.append(simulate_cluster(system, gpus, seed=s, progress=hook, **kw))
    ci: dict = {}
    summary = _aggregate([r.summary for r in runs], "", ci)
    summary.update(replications=replications, seeds=list(seeds))
    summary["steady_state_note"] = steady_text(summary)  # of the mean window and load
    return ReplicatedResult(tuple(runs), tuple(seeds), summary, ci)
