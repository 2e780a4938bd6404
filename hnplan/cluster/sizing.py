"""How many GPUs a shared cluster needs so that a job stream waits at most a target (``hnplan cluster size``).

The job stream is a mix's (``data/cluster_mixes/``) at a fixed offered demand, ``demand_gpus`` GPUs kept busy on
average whatever the cluster's size (:func:`hnplan.cluster.simulate.simulate_cluster`'s ``demand_gpus``: the
arrival rate does not change with the size, so each size that holds the mix's largest job sees the same jobs,
drawn from one seed). The queueing delay of one class at one percentile falls as the cluster grows; the search
simulates whole scale-up domains (the simulator's own rounding), doubling from the fewest that hold both the demand
and the mix's largest job (:func:`largest_job_gpus`: on a smaller cluster the simulator cuts the largest draws to
it, so the stream, and what is being sized, would differ from size to size) until one meets the target, then
halving the gap down to the smallest size that does. A simulated percentile is noisy: each size is simulated
with the same seeds (common random numbers), ``replications`` of them averaged, and every size tried is returned
so a reader can see how flat the curve is near the answer.
"""

from __future__ import annotations

import math

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cluster.jobs import CLASSES
from hnplan.errors import InfeasiblePlan, InputError, check_choice

QUANTILES = ("p50", "p95", "p99")


def largest_job_gpus(mix) -> float:
    """The most GPUs one job of ``mix`` (a :class:`hnplan.catalog.schemas.ClusterMix`) can ask for [GPU]: the
    largest value of weight > 0 of a discrete ``gpus`` distribution, a log-normal's ``max`` (``inf`` without one),
    over the classes of share > 0.

    >>> from hnplan.catalog.mixes import cluster_mix
    >>> largest_job_gpus(cluster_mix("default"))
    1024.0
    """
    out = 0.0
    for c in mix.classes:
        if not c.share.value > 0:
            continue
        g = c.gpus
        if g.kind == "discrete":
            out = max(out, max(v for v, w in zip(g.values or [], g.weights or []) if w > 0))
        else:
            out = max(out, float(g.max) if g.max is not None else math.inf)
    return float(out)


def check_sizing_inputs(
    cls: str, quantile: str, demand_gpus: float, target_wait: float, days: float, names: dict | None = None
) -> None:
    """Refuse a class, percentile, demand, target or days :func:`size_for_wait` cannot take, each named as ``names``
    maps it (the CLI's flags: ``{"cls": "--class", "target_wait": "--target-wait-h", ...}``; default the parameter
    names, ``target_wait`` as ``target_wait_s``). The target is checked in whatever unit it is given.

    Raises
    ------
    InputError
        One line naming the parameter or flag, what it must be and the value.
    """
    n = {"cls": "cls", "quantile": "quantile", "demand_gpus": "demand_gpus", "target_wait": "target_wait_s"}
    n = {**n, "days": "days", **(names or {})}
    check_choice(n["cls"], cls, CLASSES)
    check_choice(n["quantile"], quantile, QUANTILES)
    if not 0 < demand_gpus < math.inf:
        raise InputError(f"{n['demand_gpus']} must be a finite number > 0; got {demand_gpus:g}")
    if not 0 <= target_wait < math.inf:
        raise InputError(f"{n['target_wait']} must be a finite number >= 0; got {target_wait:g}")
    if not 0 < days < math.inf:
        raise InputError(f"{n['days']} must be > 0; got {days:g}")


def size_for_wait(
    system,
    demand_gpus: float,
    target_wait_s: float,
    *,
    cls: str = "training",
    quantile: str = "p95",
    days: float = 14.0,
    replications: int = 1,
    seed: int = 0,
    catalog: Catalog | None = None,
    progress=None,
    **sim_kw,
) -> dict:
    """The smallest cluster of ``system`` (whole scale-up domains) on which a mix's ``cls`` jobs wait at most
    ``target_wait_s`` at ``quantile``, at a demand of ``demand_gpus`` busy GPUs (module docstring).

    Parameters
    ----------
    system : str or System
    demand_gpus : float
        GPUs the mix keeps busy on average [GPU], > 0.
    target_wait_s : float
        The queueing delay not to exceed [s], >= 0.
    cls : str
        The job class judged (:data:`hnplan.cluster.jobs.CLASSES`).
    quantile : {"p50", "p95", "p99"}
        The class's percentile of queueing delay judged (jobs still queued at the end count with their wait).
    days : float
        Days of arrivals each size is simulated for (the run stops at their end).
    replications : int
        Independent runs per size (seeds spawned from ``seed``), their percentiles averaged.
    progress : callable, optional
        Called with a fraction of the search's simulations done (an estimate: the search's length is known
        only at its end).
    **sim_kw
        Passed to :func:`hnplan.cluster.simulate_cluster` (``mix``, ``policy``, ``backfill``, ...).

    Returns
    -------
    dict
        ``gpus`` (the size found), ``wait_s`` (its percentile), ``utilisation`` and ``offered_load`` of it,
        ``largest_job_gpus`` (the mix's largest job, the smallest size tried at least holds it), and
        ``tried``: ``[{"gpus", "wait_s", "utilisation", "offered_load", "meets", "steady_state"}]`` in the order
        simulated; with the inputs (``demand_gpus``, ``target_wait_s``, ``cls``, ``quantile``, ``days``,
        ``replications``).

    Raises
    ------
    InputError
        For a demand, target, class, percentile or days out of range, or a mix with no job of ``cls``.
    InfeasiblePlan
        When no size up to what one scale-out fabric of the design joins meets the target.
    """
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster.replicate import replicate_cluster
    from hnplan.cluster.simulate import simulate_cluster
    from hnplan.comm.topology import max_scaleout_gpus

    check_sizing_inputs(cls, quantile, demand_gpus, target_wait_s, days)
    cat = catalog or load_catalog()
    sys_ = cat.system(system)
    dom = sys_.scaleup_domain_gpus
    most = max_scaleout_gpus(cat.design(sys_)) // dom  # domains one scale-out fabric joins
    tried: dict[int, dict] = {}

    def run(n: int) -> dict:
        if n in tried:
            return tried[n]
        kw = dict(days=days, demand_gpus=demand_gpus, catalog=cat, **sim_kw)
        if replications > 1:
            s = replicate_cluster(sys_.id, n * dom, replications, seed=seed, **kw).summary
        else:
            s = simulate_cluster(sys_.id, n * dom, seed=seed, **kw).summary
        q = s["queue_delay_s"].get(cls)
        if q is None:
            raise InputError(f"the mix has no {cls} job in {days:g} days of arrivals: choose another class (cls)")
        wait = q[quantile] if q[quantile] is not None else 0.0
        tried[n] = {
            "gpus": n * dom,
            "wait_s": float(wait),
            "utilisation": float(s["utilisation"]),
            "offered_load": float(s["offered_load"]),
            "meets": wait <= target_wait_s,
            "steady_state": bool(s["steady_state"]),
        }
        if progress is not None:
            progress(min(0.95, len(tried) / (len(tried) + 3.0)))  # the search's length is known at its end
        return tried[n]

    largest = largest_job_gpus(cluster_mix(sim_kw.get("mix", "default"), cat))
    # the fewest domains that hold the demand at 100 % load and the mix's largest job (a smaller cluster cuts the
    # largest draws to itself: another job stream); a mix without a bound on its jobs holds the demand only
    lo = max(1, math.ceil(demand_gpus / dom), math.ceil(largest / dom) if math.isfinite(largest) else 1)
    if lo > most:
        what = (
            f"a demand of {demand_gpus:,.0f} GPUs"
            if demand_gpus >= largest
            else f"the mix's largest job ({largest:,.0f} GPUs)"
        )
        raise InfeasiblePlan(f"{what} is more than the {most * dom:,} GPUs of {sys_.id} one scale-out fabric joins")
    n, failed = lo, 0
    while not run(n)["meets"]:  # double until a size meets the target, up to the fabric's bound
        failed = n
        if n >= most:
            worst = tried[most]["wait_s"]
            raise InfeasiblePlan(
                f"no {sys_.id} cluster up to the {most * dom:,} GPUs one scale-out fabric joins keeps the {cls} "
                f"jobs' {quantile} wait at {target_wait_s:,.0f} s at a demand of {demand_gpus:,.0f} GPUs (at "
                f"{most * dom:,}: {worst:,.0f} s)"
            )
        n = min(2 * n, most)
    hi = n
    while hi - failed > 1:  # the smallest size that meets it: halve the gap (the first size meets it: failed 0)
        mid = (failed + hi) // 2
        if mid < lo:
            break
        if run(mid)["meets"]:
            hi = mid
        else:
            failed = mid
    best = tried[hi]
    return {
        "system": sys_.id,
        "demand_gpus": float(demand_gpus),
        "target_wait_s": float(target_wait_s),
        "cls": cls,
        "quantile": quantile,
        "days": float(days),
        "replications": int(replications),
        "largest_job_gpus": largest,
        "gpus": best["gpus"],
        "wait_s": best["wait_s"],
        "utilisation": best["utilisation"],
        "offered_load": best["offered_load"],
        "tried": list(tried.values()),
    }
