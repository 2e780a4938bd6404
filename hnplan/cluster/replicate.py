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

from hnplan.cluster.daily import mean_by_day
from hnplan.cluster.load import steady_text
from hnplan.cluster.simulate import ClusterResult, _plain, simulate_cluster
from hnplan.cluster.topology import check_cluster_gpus
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


BOUNDS = {
    "utilisation": (0.0, 1.0),
    "allocation_rate": (0.0, 1.0),
    "fragmentation": (0.0, 1.0),
    "fragmentation_max": (0.0, 1.0),
    "blocked": (0.0, 1.0),
    "goodput": (0.0, 1.0),
    "reserve.utilisation": (0.0, 1.0),
    "offered_load": (0.0, None),
    "offered_load_window": (0.0, None),
    "jct_slowdown.mean": (1.0, None),
}
"""The range of the summary figures whose interval is also given on a bounded scale (:func:`mean_ci`'s
``bounds``): shares of GPU-time in [0, 1], loads >= 0, a slowdown >= 1; a class's queueing delay
percentiles (``queue_delay_s.<class>.p95``) are >= 0 and the slowdown percentiles >= 1 (:func:`bounds_of`)."""


def bounds_of(path: str, span_s: float | None = None) -> tuple[float, float | None] | None:
    """The range of the summary figure at ``path`` (:data:`BOUNDS`; a queueing delay >= 0 s and, given the runs'
    longest span ``span_s`` [s], at most it: no job waits longer than the run it waits in; a JCT slowdown
    percentile >= 1), None for a figure without one.

    >>> bounds_of("utilisation"), bounds_of("queue_delay_s.training.p95"), bounds_of("jct_slowdown.p95")
    ((0.0, 1.0), (0.0, None), (1.0, None))
    >>> bounds_of("queue_delay_s.training.p95", 86400.0)
    (0.0, 86400.0)
    """
    if path in BOUNDS:
        return BOUNDS[path]
    if path.startswith(("queue_delay_s.", "queue_delay_by_gpus_s.")) and not path.endswith(".jobs"):
        return (0.0, span_s if span_s else None)
    if path.startswith(("jct_slowdown.", "jct_bounded_slowdown.")) and not path.endswith(".tau_s"):
        return (1.0, None)
    if path.startswith("capacity_gpu_s.share."):
        return (0.0, 1.0)
    return None


def mean_ci(values, confidence: float = CONFIDENCE, bounds: tuple[float, float | None] | None = None) -> dict:
    """The mean of independent replications and its Student-t confidence interval.

    ``mean +- t_{n-1, (1 + confidence) / 2} x s / sqrt(n)`` with ``s`` the sample standard deviation
    (``scipy.stats.t``; Law 2015, Sec. 9.4.1). One value has no interval (``low``/``high`` None).

    With ``bounds = (a, b)`` (a quantity that cannot leave ``[a, b]``, ``b`` None: no upper bound) the same
    interval is also taken on the transformed scale where the quantity is unbounded and mapped back,
    ``bounded_low`` and ``bounded_high``: the logit of ``(x - a) / (b - a)``, or the log of ``x - a``
    (the transformation method for a bounded mean, e.g. Law 2015, Sec. 9.4; asymmetric and always inside
    the bounds). With three replications ``t_{2, 0.975}`` = 4.30, so a share whose runs spread by a few
    points around a small mean has a plain interval reaching below 0; the bounded one stays inside. It is
    None where a value lies on a bound, or within a relative 1e-9 of a non-zero one (the transform is
    infinite there, or so large that the interval spans the whole range), or all values are equal.

    Returns
    -------
    dict
        ``mean``, ``low``, ``high``, ``half_width`` (same unit as the values) and ``n``; with ``bounds``,
        also ``bounded_low``, ``bounded_high`` and (two or more values) ``bounds``, the range they were taken in.

    >>> d = mean_ci([0.40, 0.50, 0.60])  # s = 0.1, t_{2, 0.975} = 4.303: half-width 0.1 x 4.303 / sqrt(3)
    >>> round(d["mean"], 3), round(d["half_width"], 4), round(d["low"], 4), round(d["high"], 4)
    (0.5, 0.2484, 0.2516, 0.7484)
    >>> # mean 0.00367, s 0.00379: 0.00367 - 4.303 x 0.00379 / sqrt(3) = -0.0057 < 0; logits -6.907, -6.213,
    >>> # -4.820: mean -5.980, s 1.0625, half-width 2.640, so expit(-8.620) = 0.00018 to expit(-3.340) = 0.0342
    >>> d = mean_ci([0.001, 0.002, 0.008], bounds=(0.0, 1.0))
    >>> round(d["low"], 4), round(d["bounded_low"], 5), round(d["bounded_high"], 4)
    (-0.0057, 0.00018, 0.0342)
    """
    x = np.asarray([float(v) for v in values], float)
    n = len(x)
    extra = {} if bounds is None else {"bounded_low": None, "bounded_high": None}
    if n == 0:
        return {"mean": None, "low": None, "high": None, "half_width": None, "n": 0, **extra}
    m = float(x.mean())
    if n < 2:
        return {"mean": m, "low": None, "high": None, "half_width": None, "n": 1, **extra}
    from scipy import stats

    t = float(stats.t.ppf((1 + confidence) / 2, n - 1))
    hw = float(t * x.std(ddof=1) / math.sqrt(n))
    if bounds is not None:
        extra = {**_bounded(x, t, *bounds), "bounds": list(bounds)}
    return {"mean": m, "low": m - hw, "high": m + hw, "half_width": hw, "n": n, **extra}


def _bounded(x: np.ndarray, t: float, lower: float, upper: float | None) -> dict:
    """The Student-t interval of ``x`` on the logit (two bounds) or log (a lower bound) scale, mapped back."""
    none = {"bounded_low": None, "bounded_high": None}
    y = x - lower
    if upper is not None:
        y = y / (upper - lower)
    # a run within rounding of a non-zero bound (a goodput of 1 - 6e-16: no work lost; a slowdown of 1 + 2e-16)
    # is on it: its logit (35) or log (-36) would stretch the interval over the whole range; a relative 1e-9 of
    # the bound, as a crossed bound (:func:`_crossed`). Near a bound of 0 a small value is no rounding (a delay
    # of 1e-300 s is above 0)
    span = 1.0 if upper is None else upper - lower
    tol_low, tol_high = 1e-9 * abs(lower) / span, 1e-9 * abs(upper or 0.0) / span
    inside = (y > tol_low).all() and (upper is None or (y < 1 - tol_high).all())
    if not inside or np.ptp(x) <= 1e-12 * max(1.0, abs(float(x[0]))):
        return none
    z = np.log(y / (1 - y)) if upper is not None else np.log(y)
    hw = t * float(z.std(ddof=1)) / math.sqrt(len(z))
    lo, hi = float(z.mean()) - hw, float(z.mean()) + hw
    if upper is not None:  # expit does not overflow for a wide interval on the logit scale
        from scipy.special import expit

        return {
            "bounded_low": lower + (upper - lower) * float(expit(lo)),
            "bounded_high": lower + (upper - lower) * float(expit(hi)),
        }
    with np.errstate(over="ignore"):  # a log-scale interval past e^709 reads inf
        return {"bounded_low": lower + float(np.exp(lo)), "bounded_high": lower + float(np.exp(hi))}


def ci_range(c: dict | None, bounds: tuple[float, float | None] | None = (0.0, 1.0)) -> tuple:
    """``(low, high)`` of a :func:`mean_ci` as a figure's interval: the plain Student-t interval, or where it
    leaves ``bounds`` the interval on the logit (or log) scale (``bounded_low``, ``bounded_high``), never a
    clipped one. Where neither is inside the bounds (a run on the bound: no bounded interval) the plain one
    is returned as it is, so a caller can say it crosses; ``(None, None)`` without an interval.

    >>> lo, hi = ci_range(mean_ci([0.40, 0.50, 0.60], bounds=(0.0, 1.0)))  # inside [0, 1]: the plain interval
    >>> round(lo, 4), round(hi, 4)
    (0.2516, 0.7484)
    >>> lo, hi = ci_range(mean_ci([0.001, 0.002, 0.008], bounds=(0.0, 1.0)))  # plain -0.0057 to 0.0131
    >>> round(lo, 5), round(hi, 4)
    (0.00018, 0.0342)
    """
    if not c or c.get("low") is None:
        return None, None
    lo, hi = c["low"], c["high"]
    if _crossed(lo, hi, bounds) and c.get("bounded_low") is not None:
        return c["bounded_low"], c["bounded_high"]
    return lo, hi


def _crossed(lo: float, hi: float, bounds: tuple[float, float | None] | None) -> list[float]:
    """The bounds the interval ``lo`` to ``hi`` leaves, lower first (``[]`` inside them or without bounds). A
    bound is crossed only past a relative 1e-9, the rounding of runs that all sit on it."""
    if bounds is None:
        return []
    lower, upper = bounds
    tol = 1e-9 * max(1.0, abs(lower), abs(upper or 0.0))
    return [b for b, out in ((lower, lo < lower - tol), (upper, upper is not None and hi > upper + tol)) if out]


def spread_text(c: dict | None, fmt: str = ",.0f", bounds: tuple[float, float | None] | None = (0.0, None)) -> str:
    """The interval beside a table cell's mean: `` ± h`` (Student-t half-width) where ``mean ± h`` stays inside
    ``bounds`` (the interval's own, :func:`mean_ci`'s ``bounds``, where it has them: a queueing delay between 0 and
    the run's span); where it leaves them, `` (a to b)``, the interval on the log (or logit) scale
    (:func:`ci_range`); where that is undefined too (a run on the bound), `` (± h crosses b)``, so the cell
    never implies a value outside the figure's range (a negative queueing delay). ``""`` for one run.

    >>> spread_text(mean_ci([300.0, 400.0, 500.0], bounds=(0.0, None)))  # s = 100: h = 4.303 x 100 / sqrt(3)
    ' ± 248'
    >>> # mean 433 - h 1,225 < 0; logs 4.605, 5.298, 6.908: mean 5.604, s 1.181, h 2.935; exp(2.669) = 14 to
    >>> # exp(8.538) = 5,106
    >>> spread_text(mean_ci([100.0, 200.0, 1000.0], bounds=(0.0, None)))
    ' (14 to 5,106)'
    >>> spread_text(mean_ci([0.0, 0.0, 600.0], bounds=(0.0, None)))  # s = 346.4: h = 860.7 > mean 200
    ' (± 861 crosses 0)'
    """
    if not c or c.get("low") is None or c.get("n", 0) < 2:
        return ""
    if c.get("bounds"):
        bounds = (c["bounds"][0], c["bounds"][1])
    lo, hi = ci_range(c, bounds)
    if (lo, hi) == (c["low"], c["high"]):
        crossed = _crossed(lo, hi, bounds)
        if not crossed:
            return f" ± {c['half_width']:{fmt}}"
        return f" (± {c['half_width']:{fmt}} crosses {' and '.join(f'{b:g}' for b in crossed)})"
    return f" ({lo:{fmt}} to {hi:{fmt}})"


def ci_text(c: dict | None, fmt: str = ".1%", bounds: tuple[float, float | None] | None = (0.0, 1.0)) -> str:
    """``95 % CI a to b`` of a :func:`mean_ci` (``""`` without an interval). Where the plain Student-t interval
    leaves ``bounds`` (few replications against a wide spread) it is not clipped: the interval on the bounded
    scale is given, and the plain one beside it with the bound it crosses; without a bounded interval (a run
    on the bound), the plain one with that note.

    >>> ci_text(mean_ci([0.40, 0.50, 0.60], bounds=(0.0, 1.0)))
    '95 % CI 25.2% to 74.8%'
    >>> ci_text(mean_ci([0.001, 0.002, 0.008], bounds=(0.0, 1.0)), ".2%")
    '95 % CI 0.02% to 3.42%, Student-t on the logit scale; the plain interval, -0.57% to 1.31%, crosses 0% with 3 replications'
    >>> ci_text(mean_ci([0.0, 0.002, 0.008], bounds=(0.0, 1.0)), ".2%")
    '95 % CI -0.70% to 1.37%, crossing 0%: 3 replications are too few for this spread'
    """
    if not c or c.get("low") is None:
        return ""
    lo, hi = c["low"], c["high"]
    plain = f"{lo:{fmt}} to {hi:{fmt}}"
    crossed = _crossed(lo, hi, bounds)
    if not crossed:
        return f"95 % CI {plain}"
    edge = " and ".join(f"{b:.0%}" if fmt.endswith("%") else f"{b:g}" for b in crossed)
    if c.get("bounded_low") is None:
        return f"95 % CI {plain}, crossing {edge}: {c['n']} replications are too few for this spread"
    scale = "logit" if bounds is not None and bounds[1] is not None else "log"
    return (
        f"95 % CI {c['bounded_low']:{fmt}} to {c['bounded_high']:{fmt}}, Student-t on the {scale} scale; the plain "
        f"interval, {plain}, crosses {edge} with {c['n']} replications"
    )


def _number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _aggregate(values: list, path: str, ci: dict, span_s: float | None = None):
    """The mean of the runs' summaries, leaf by leaf; numeric leaves also get ``ci[path]`` (``span_s``: the runs'
    longest span, the bound of a queueing delay, :func:`bounds_of`)."""
    first = values[0]
    if isinstance(first, dict):
        keys = list(dict.fromkeys(k for v in values if isinstance(v, dict) for k in v))
        return {
            k: _aggregate(
                [v[k] for v in values if isinstance(v, dict) and k in v], f"{path}.{k}".lstrip("."), ci, span_s
            )
            for k in keys
        }
    nums = [float(v) for v in values if _number(v) and math.isfinite(float(v))]
    if _number(first) and nums:
        ci[path] = mean_ci(nums, bounds=bounds_of(path, span_s))
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
        every run's is; text: the first run's; ``utilisation_by_day`` day by day,
        :func:`hnplan.cluster.daily.mean_by_day`), plus ``replications`` and ``seeds``.
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
        For ``replications`` outside 1 to :data:`MAX_REPLICATIONS`, ``replications > 1`` with ``jobs`` or
        ``trace`` and ``failures=False`` (nothing random is left: identical runs, an interval of zero width that
        is no certainty; the CLI refuses ``--replications`` with ``--trace --no-failures`` alike), and whatever
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
    given = "jobs" if kw.get("jobs") is not None else "trace" if kw.get("trace") is not None else None
    if replications > 1 and given and not kw.get("failures", True):
        # the seed draws a mix's jobs, failures and software restarts; a given table or trace with failures off
        # leaves nothing to draw: every replication is the same run and the interval's zero width no certainty
        raise InputError(
            f"replications draw independent failures and restarts; with {given} given and failures=False nothing "
            f"is drawn (the jobs are replayed), so the {replications} runs would be identical and their interval "
            "of zero width: give replications=1 or failures=True"
        )
    if kw.get("nodes") is None:  # before any worker starts: the bound one scale-out fabric joins
        check_cluster_gpus(system, gpus, "gpus", kw.get("catalog"))
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
    span = max(float(r.summary["end_s"]) for r in runs)  # no job waits longer than its run lasts
    summary = _aggregate([r.summary for r in runs], "", ci, span)
    summary["utilisation_by_day"] = mean_by_day([r.summary["utilisation_by_day"] for r in runs])
    summary.update(replications=replications, seeds=list(seeds))
    summary["steady_state_note"] = steady_text(summary)  # of the mean window and load
    return ReplicatedResult(tuple(runs), tuple(seeds), summary, ci)
