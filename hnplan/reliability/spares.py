"""Idle GPUs of the units bought as hot spares: the share of hardware failures that must wait for a repair.

A design bought in whole units may hold GPUs the job does not train on: a GB200 NVL72 job on 64 of each
rack's 72 GPUs (16 of its 18 compute trays) leaves two trays per rack idle. NVIDIA recommends Slurm's
``--segment=16`` for large jobs on GB200 NVL72, so that a rack with up to two unavailable compute trays
still contributes its 16 to the job ([1]_): a failed tray is drained and the job restarts on the rack's
idle ones, inside the same NVLink domain. Such a failure costs the restart (the reload and the work lost
since the last checkpoint, which Daly's goodput already counts) but not the repair wait, while the spares
last.

Model (a pool of ``k`` spare nodes, failures Poisson at rate ``lambda`` per pool, each failed node back
after its repair time ``h``): the nodes in repair are the busy servers of an M/G/infinity queue, Poisson
with mean ``a = sum_k lambda_k h_k`` (Little's law; any repair-time distribution), and by PASTA a failure
finds ``N ~ Poisson(a)`` nodes of its pool in repair. It finds no spare when ``N >= k``:

``P_short = P(N >= k) = 1 - e^{-a} sum_{i<k} a^i / i!``

and only then drains its failure unit for the repair as before; the GPUs held in repair on the job's
behalf (:func:`hnplan.reliability.gpus_in_repair`) are multiplied by ``P_short``. The swap unit is one node
(a compute tray, a server). A design whose unit spans several nodes (an NVL72 rack, a CloudMatrix
supernode: one scale-up domain) keeps a pool per unit, the spares of the unit with the fewest idle nodes;
a design whose unit is one server pools the idle whole servers of the purchase (any of them can join the
job over the scale-out fabric). Failures of the idle nodes themselves are left out (they carry no load).

References
----------
.. [1] NVIDIA Technical Blog, "Unlock Exascale Performance on NVIDIA GB200 NVL72 with Slurm Topology-Aware
   Job Scheduling" (2025): segment size 16 recommended for jobs of 128+ GPUs; an NVL72 domain (18 compute
   trays) with up to two unavailable nodes still contributes 16 nodes to a ``--segment=16`` job.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan.catalog.schemas import System
from hnplan.errors import InputError


def spare_pools(system: System, gpus: int, gpus_bought: int | None) -> tuple[int, int]:
    """``(pools, spare nodes per pool)`` that the idle GPUs of a purchase hold for a job of ``gpus``.

    Parameters
    ----------
    system : System
    gpus : int
        GPUs the job trains on.
    gpus_bought : int or None
        GPUs of the whole units bought (>= ``gpus``); None: no idle GPUs counted (``(1, 0)``).

    Returns
    -------
    tuple of int
        A unit spanning several nodes: ``(units, idle whole nodes of the least idle unit)``, the job spread
        evenly over the units; a one-node unit (a server): ``(1, idle whole servers)``.

    Raises
    ------
    InputError
        For ``gpus_bought`` below ``gpus``.

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> spare_pools(cat.system("gb200-nvl72"), 64 * 128, 72 * 128), spare_pools(cat.system("dgx-b200-ib-ndr"), 16, 32)
    ((128, 2), (1, 2))
    """
    if gpus_bought is None or gpus_bought == gpus:
        return 1, 0
    if gpus_bought < gpus:
        raise InputError(f"gpus_bought ({gpus_bought:,}) must be >= the job's gpus ({gpus:,})")
    node, unit = system.node_gpus, system.unit_gpus
    if unit > node:  # one scale-up domain per unit: its idle nodes stand in for its own failed ones
        n_units = math.ceil(gpus_bought / unit)
        return n_units, (unit - math.ceil(gpus / n_units)) // node
    return 1, (gpus_bought - gpus) // node


def drain_share(system: System, gpus: int, gpus_bought: int | None, rates: dict, drained: dict) -> float:
    """Share of a job's hardware failures that find no idle node of their pool and drain their failure unit
    for the repair [-]: :func:`short_probability` of the pool's mean nodes in repair, ``sum_k lambda_k h_k``
    over the pools of :func:`spare_pools` (``rates``: failures per hour by kind, ``drained``: ``(gpus, hours)``
    by kind, as :func:`hnplan.reliability.drained_per_failure`); 1 without idle nodes."""
    pools, spares = spare_pools(system, gpus, gpus_bought)
    return short_probability(sum(rates[k] * h for k, (_, h) in drained.items()) / pools, spares)


def short_probability(mean_in_repair: float, spares: int) -> float:
    """Probability that a failure finds all ``spares`` of its pool in repair, ``P(N >= spares)`` for
    ``N ~ Poisson(mean_in_repair)`` (M/G/infinity repairs, PASTA) [-]; 1 without spares.

    >>> round(short_probability(0.24, 2), 6)  # 1 - e^-0.24 (1 + 0.24)
    0.024581
    """
    if spares <= 0:
        return 1.0
    if mean_in_repair <= 0:
        return 0.0
    term = total = math.exp(-mean_in_repair)
    for i in range(1, spares):
        term *= mean_in_repair / i
        total += term
    return max(0.0, 1.0 - total)


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """Probabilities of 0, 1, ..., ``n`` successes of ``n`` independent trials of probability ``p`` [-], in log space
    (``ln C(n, k) = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)``), written out for the reason
    :func:`poisson_pmf` is.

    >>> [round(float(q), 4) for q in binomial_pmf(2, 0.5)]
    [0.25, 0.5, 0.25]
    """
    if p <= 0 or n <= 0:
        return np.ones(1)
    if p >= 1:
        out = np.zeros(n + 1)
        out[-1] = 1.0
        return out
    k = np.arange(n + 1)
    lg = np.array([math.lgamma(i + 1.0) for i in range(n + 1)])
    return np.exp(lg[-1] - lg - lg[::-1] + k * math.log(p) + (n - k) * math.log1p(-p))


def units_down(offered: float, units: int) -> float:
    """Mean units out for repair among ``units`` whose failures, counted as if every unit stayed in service
    (Little's law), would hold ``offered`` units in repair [-]: a unit in repair does not fail again (the
    machine-repair model with a repairer per unit, a finite source), so each is down a share
    ``r / (1 + r)`` of the time, ``r = offered / units`` its failure rate times its repair time:
    ``offered / (1 + offered / units)``, the offered load itself while it is small beside the units, never more
    than the units (Kleinrock, Queueing Systems Vol. 1, 1975, Ch. 3: the finite-population infinite-server
    system M/M/inf//M).

    >>> round(units_down(1.0, 1000), 6), round(units_down(3000.0, 910), 1)
    (0.999001, 698.2)
    """
    if offered <= 0 or units <= 0:
        return 0.0
    return offered / (1.0 + offered / units)


def poisson_pmf(mean: float, tail: float = 1e-12) -> np.ndarray:
    """Probabilities of 0, 1, ..., K events of a Poisson count with ``mean`` [-], K the first count whose
    upper tail is at most ``tail``: ``p_k = exp(k ln(mean) - mean - ln k!)`` (the log-space form, finite
    for large means; ``ln k! = lgamma(k + 1)``), the tail summed from the smallest terms up. Written out rather than taken from
    ``scipy.stats``, whose import costs about 0.5 s of CPU to every command that sizes spares;
    tests compare it with ``scipy.stats.poisson``.

    >>> [round(float(p), 4) for p in poisson_pmf(1.0)[:3]]
    [0.3679, 0.3679, 0.1839]
    """
    if mean <= 0:
        return np.ones(1)
    k_hi = int(mean + 12.0 * math.sqrt(mean) + 40.0)  # > 1e-12 upper tail for every mean (Chernoff bound)
    k = np.arange(k_hi + 1)
    log_fact = np.array([math.lgamma(i + 1.0) for i in range(k_hi + 1)])
    p = np.exp(k * math.log(mean) - mean - log_fact)
    above = np.cumsum(p[::-1])[::-1] - p  # P(N > k), the small terms added first
    k_ppf = int(np.argmax(above <= tail))  # scipy's poisson.ppf(1 - tail): the first k with P(N > k) <= tail
    return p[: min(k_ppf + 1, k_hi) + 1]
