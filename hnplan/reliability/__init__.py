"""Reliability model: interruption rates from component counts, the failure unit (blast radius) and
spares, checkpoint size and write time (synchronous and asynchronous), the optimal checkpoint
interval, restart time and goodput.

The interruption rates, the failure unit, the GPUs in repair and the spares are in
:mod:`hnplan.reliability.rates` (the idle nodes of the units bought as hot spares in
:mod:`hnplan.reliability.spares`); checkpoints, the interval, goodput and :func:`reliability_estimate`
in :mod:`hnplan.reliability.checkpoint`; the package re-exports their public names.
"""

from __future__ import annotations

from hnplan.reliability.checkpoint import (
    CHECKPOINT_MODES,
    ReliabilityEstimate,
    checkpoint_bytes,
    checkpoint_times,
    daly_goodput,
    daly_interval_s,
    reliability_estimate,
    young_interval_s,
)
from hnplan.reliability.rates import (
    HARDWARE,
    SPARE_QUANTILE,
    component_counts,
    drained_per_failure,
    failure_unit_gpus,
    gpus_in_repair,
    interruption_rates_per_h,
    mtbi_s,
    spare_gpus,
)
from hnplan.reliability.spares import drain_share, poisson_pmf, spare_pools

__all__ = [
    "CHECKPOINT_MODES",
    "HARDWARE",
    "SPARE_QUANTILE",
    "ReliabilityEstimate",
    "checkpoint_bytes",
    "checkpoint_times",
    "component_counts",
    "daly_goodput",
    "daly_interval_s",
    "drain_share",
    "drained_per_failure",
    "failure_unit_gpus",
    "gpus_in_repair",
    "interruption_rates_per_h",
    "mtbi_s",
    "poisson_pmf",
    "reliability_estimate",
    "spare_gpus",
    "spare_pools",
    "young_interval_s",
]
