"""Interruption rates, the failure unit (blast radius), GPUs held in repair and spares.

* Job interruption rate ``lambda = sum_c rate_c x count_c`` over accelerators, hosts (nodes), NICs,
  scale-out links (from :func:`hnplan.comm.scaleout_bom`) and job GPUs (software), with the rates
  of ``data/reliability.yaml`` (derived from the Llama 3 paper's Table 5, [1]_). Mean time between
  interruptions ``M = 1 / lambda``. Counts never fall as GPUs grow, so ``M`` never rises.
* The accelerators held out of service for repair on the job's behalf (Little's law:
  ``sum_k lambda_k x drained_k x repair_k``): without hot swap a failure drains its whole failure
  unit (node, or NVL72/UB rack) for the repair time; with hot swap a failed card alone is out, for
  the hot-swap time (:func:`drained_per_failure`). Spares for a target availability are the
  quantile of that compound Poisson count (:func:`spare_gpus`); :func:`hnplan.cost.design_cost`
  buys them. A unit in repair does not fail again (a finite source): the mean is corrected to
  ``a / (1 + a / units)`` (:func:`hnplan.reliability.spares.units_down`), and where the units in repair are not
  few beside the job's (1 % or more) the count is binomial, so neither ever exceeds the GPUs of the job.

References
----------
.. [1] Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.4, Table 5.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.schemas import System
from hnplan.comm.topology import scaleout_bom
from hnplan.errors import InputError
from hnplan.reliability.spares import binomial_pmf, drain_share, poisson_pmf, units_down

#: the share of a job's units Little's law holds in repair from which spares are counted on the finite-source
#: (binomial) distribution rather than the Poisson one: below it the two differ by less than it does
FINITE_SOURCE_FROM = 0.01

HARDWARE = ("accelerator", "host", "nic", "scaleout-link")
#: probability that the spares keep a job whole, the default of :func:`spare_gpus` and of the reported
#: ``spare_gpus`` (assumption: "two nines", a conventional service level; no published target used)
SPARE_QUANTILE = 0.99


# -- interruption rates -------------------------------------------------------------------------
def component_counts(design: Design, gpus: int) -> dict:
    """Components a job of ``gpus`` accelerators depends on, keyed as ``ComponentRate.per``.

    Returns
    -------
    dict
        ``accelerator, host, nic, scaleout-link, job-gpu`` -> counts. A host is a node
        (8-GPU server, NVL72 compute tray); links come from the scale-out BOM.
    """
    if gpus < 1:
        raise InputError(f"gpus must be >= 1; got {gpus}")
    system = design.system
    nodes = math.ceil(gpus / system.node_gpus)
    return {
        "accelerator": gpus,
        "host": nodes,
        "nic": nodes * system.nics_per_node,
        "scaleout-link": scaleout_bom(design, gpus).links,
        "job-gpu": gpus,
    }


def interruption_rates_per_h(design: Design, gpus: int, rate_factor: float = 1.0) -> dict:
    """Unexpected interruptions per hour of a job, by component [1/h] (``rate_factor`` scales all),
    with the rates of the design's ``reliability.yaml``."""
    if rate_factor < 0:
        raise InputError(f"rate_factor must be >= 0; got {rate_factor}")
    counts = component_counts(design, gpus)
    return {name: rate_factor * r.value * counts[r.per] for name, r in design.reliability.rates.items()}


def mtbi_s(design: Design, gpus: int, rate_factor: float = 1.0) -> float:
    """Mean time between unexpected interruptions of a job of ``gpus`` accelerators [s].

    Examples
    --------
    Llama 3 405B: 16,384 H100 had 419 unexpected interruptions in 54 days ([1]_).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> round(units.days_to_s(54) / mtbi_s(cat.design("hgx-h100-roce-400g"), 16384))
    419
    """
    total = sum(interruption_rates_per_h(design, gpus, rate_factor).values())
    return math.inf if total == 0 else units.HOUR / total


def failure_unit_gpus(system: System) -> int:
    """Accelerators one hardware failure takes out of a job (blast radius).

    The system's ``failure_unit_gpus`` (default one node); in-domain spares of at least a node
    absorb a failure inside the domain, shrinking the unit to one node.
    """
    unit = system.failure_unit_gpus or system.node_gpus
    if system.spare_gpus_per_unit >= system.node_gpus:
        return min(unit, system.node_gpus)
    return unit


def drained_per_failure(design: Design, repair_hours: float | None = None) -> dict:
    """GPUs one hardware failure takes out of service, and for how long, by component kind.

    Without hot swap a failure drains its whole failure unit (:func:`failure_unit_gpus`: the node,
    or the NVL72/UB rack a job is laid out across; a host, NIC or link failure at least its node)
    for the repair time. With ``hot_swap`` a failed accelerator is replaced in the running node: only
    that card is out, for the hot-swap time (the system's ``repair_hours``, else
    ``reliability.yaml``'s ``hot_swap_repair_hours``); a host, NIC or link failure drains its node
    (not the rack) for the repair time.

    Returns
    -------
    dict
        ``reliability.yaml`` rate name (hardware kinds only) -> ``(gpus, hours)``.
    """
    system, rel = design.system, design.reliability
    unit = failure_unit_gpus(system)
    rh = repair_hours if repair_hours is not None else (system.repair_hours or rel.repair_hours.value)
    out = {}
    for name, r in rel.rates.items():
        if r.per not in HARDWARE:
            continue
        if r.per != "accelerator":  # a host, NIC or link failure takes at least its node out
            out[name] = (max(unit, system.node_gpus) if not system.hot_swap else system.node_gpus, rh)
        elif not system.hot_swap:
            out[name] = (unit, rh)
        else:
            hs = rel.hot_swap_repair_hours.value if rel.hot_swap_repair_hours is not None else rh
            out[name] = (1, repair_hours if repair_hours is not None else (system.repair_hours or hs))
    return out


def gpus_in_repair(
    design: Design,
    gpus: int,
    rate_factor: float = 1.0,
    repair_hours: float | None = None,
    gpus_bought: int | None = None,
) -> float:
    """Mean accelerators out of service for repair on behalf of a job of ``gpus`` (Little's law:
    ``sum_k lambda_k x drained_k x repair_k`` over hardware kinds, :func:`drained_per_failure`). With
    ``gpus_bought``, idle nodes of the units bought stand in for failed ones while they last: the sum is
    multiplied by the probability a failure finds its pool's spares all in repair
    (:mod:`hnplan.reliability.spares`)."""
    rates = interruption_rates_per_h(design, gpus, rate_factor)
    drained = drained_per_failure(design, repair_hours)
    share = drain_share(design.system, gpus, gpus_bought, rates, drained)
    # by the size of what a failure drains: units of that size in the job, and the units Little's law would hold
    # in repair, corrected for a finite source (a unit in repair does not fail again: units_down)
    return sum(size * units_down(m, n) for size, (m, n) in _offered_units(rates, drained, gpus, share).items())


def _offered_units(rates: dict, drained: dict, gpus: int, share: float = 1.0) -> dict:
    """Failure-unit size [GPUs] -> (units Little's law holds in repair, ``sum_k lambda_k x repair_k`` over the
    kinds that drain that size, thinned by ``share``; the job's units of that size, ``ceil(gpus / size)``)."""
    out: dict[int, tuple[float, int]] = {}
    for k, (g, h) in drained.items():
        m, n = out.get(g, (0.0, max(1, math.ceil(gpus / g))))
        out[g] = (m + rates[k] * h * share, n)
    return out


def spare_gpus(
    design: Design,
    gpus: int,
    quantile: float = SPARE_QUANTILE,
    repair_hours: float | None = None,
    rate_factor: float = 1.0,
    gpus_bought: int | None = None,
) -> int:
    """Spare accelerators that keep a job of ``gpus`` whole with probability ``quantile``.

    Each hardware failure of kind ``k`` takes ``drained_k`` accelerators out for ``repair_k`` hours
    (:func:`drained_per_failure`); failures of a kind in repair are Poisson with mean
    ``lambda_k x repair_k`` (Little's law), so the accelerators out are a compound Poisson sum;
    spares = its ``quantile`` (exact, by convolving the scaled Poisson distributions). With one
    unit size this is the Poisson quantile x the failure-unit size. With ``gpus_bought``, the idle nodes of
    the units bought count toward them as :func:`gpus_in_repair` counts them: only the failures that find
    none left (:func:`hnplan.reliability.spares.drain_share`) drain a unit, their means thinned by that share.

    Raises
    ------
    InputError
        For a quantile outside (0, 1).
    """
    if not 0 < quantile < 1:
        raise InputError(f"quantile must be in (0, 1); got {quantile}")
    rates = interruption_rates_per_h(design, gpus, rate_factor)
    drained = drained_per_failure(design, repair_hours)
    share = drain_share(design.system, gpus, gpus_bought, rates, drained)
    pmf = np.ones(1)
    for size, (mean, n) in _offered_units(rates, drained, gpus, share).items():
        # Poisson while the units in repair are few beside the job's; where they are not, a unit in repair does
        # not fail again: each of the n units is down with probability r / (1 + r), r = mean / n (units_down)
        r = mean / n
        counts = poisson_pmf(mean) if r < FINITE_SOURCE_FROM else binomial_pmf(n, r / (1.0 + r))
        scaled = np.zeros((len(counts) - 1) * size + 1)
        scaled[::size] = counts
        pmf = np.convolve(pmf, scaled)
    return int(np.searchsorted(np.cumsum(pmf), quantile - 1e-12))
