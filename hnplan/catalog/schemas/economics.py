"""Economics and operations: prices, facility, reliability rates, what-if inputs and memory overheads."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from hnplan.catalog.schemas.base import (
    Entry,
    Positive,
    Source,
    _check_source,
    _Strict,
)


class SourcedValue(_Strict):
    """One number with its provenance (PyPSA technology-data style)."""

    value: float
    unit: str = Field(min_length=1)
    source: Source
    as_of: _dt.date | None = None
    assumption: bool = Field(default=False, description="true when the value is a labelled assumption")

    @field_validator("source")
    @classmethod
    def _src(cls, v):
        return _check_source(v)


class Price(Entry):
    """A dated price of something the bill of materials counts."""

    item: str = Field(description="the catalog id priced (system, switch) or a BOM part name")
    kind: Literal["system-unit", "switch", "transceiver", "cable", "nic", "rack", "other"]
    usd: Positive = Field(description="price [US dollars] for one `per`")
    per: str = Field(description="what one price buys: unit, switch, transceiver, cable, ...")
    as_of: _dt.date = Field(
        description="date of the price (YYYY-MM-DD; use the first of the month if only the month is known)"
    )
    assumption: bool = False


class Facility(Entry):
    """Facility and finance defaults, each value with its own provenance."""

    electricity_usd_per_kwh: SourcedValue
    pue_air: SourcedValue
    pue_liquid: SourcedValue
    amortisation_years: SourcedValue
    dc_build_usd_per_mw: SourcedValue
    maintenance_fraction_per_year: SourcedValue
    grid_gco2_per_kwh: SourcedValue
    training_power_fraction: SourcedValue = Field(
        description="average draw of a training node as a fraction of its rated power"
    )
    # -- power curve, racks (issue 8) -------------------------------------------------------
    accelerator_idle_fraction: SourcedValue | None = Field(
        default=None, description="idle power of an accelerator without idle_w, as a fraction of its TDP"
    )
    rack_limit_kw_air: SourcedValue | None = Field(
        default=None, description="IT power limit of one air-cooled rack [kW]"
    )
    rack_limit_kw_liquid: SourcedValue | None = Field(
        default=None, description="IT power limit of one liquid-cooled rack [kW]"
    )

    @field_validator(
        "electricity_usd_per_kwh",
        "pue_air",
        "pue_liquid",
        "amortisation_years",
        "dc_build_usd_per_mw",
        "maintenance_fraction_per_year",
    )
    @classmethod
    def _in_whatif_range(cls, v: SourcedValue, info) -> SourcedValue:
        return _whatif_checked(_FACILITY_WHATIF[info.field_name], v)


class ComponentRate(SourcedValue):
    """A failure (interruption) rate of one component kind, per component and hour."""

    per: Literal["accelerator", "host", "nic", "scaleout-link", "job-gpu"] = Field(
        description="what one count is: an accelerator, a host (node), a NIC, a scale-out link, or a GPU "
        "of the job (software and job-level faults)"
    )


class Reliability(Entry):
    """Failure rates per component and the checkpoint/restart defaults (``data/reliability.yaml``)."""

    rates: dict[str, ComponentRate] = Field(
        description="component -> unexpected interruptions per component-hour [1/h]"
    )
    planned_per_gpu_hour: SourcedValue = Field(description="planned interruptions per job GPU-hour [1/h]")
    measured_on: list[str] = Field(
        default_factory=list,
        description="accelerator ids the rates were measured on; a system of another accelerator carries them "
        "unchanged (an assumption its reliability output states); empty: not said",
    )
    restart_overhead_s: SourcedValue = Field(
        description="job restart excluding the checkpoint read: detection, rescheduling, init [s]"
    )
    storage_write_GBps_per_node: SourcedValue = Field(
        description="checkpoint write bandwidth per node when the system gives none [GB/s]"
    )
    storage_read_GBps_per_node: SourcedValue = Field(
        description="checkpoint read bandwidth per node when the system gives none [GB/s]"
    )
    storage_node_gpus: SourcedValue | None = Field(
        default=None,
        description="GPUs per node of the cluster the per-node storage figures were derived on: a system with "
        "other nodes gets them scaled by its node_gpus / this (storage sized per GPU); none: not scaled",
    )
    repair_hours: SourcedValue = Field(description="time to repair a failure unit when the system gives none [h]")
    deploy_days: SourcedValue = Field(description="delivery-to-production time when the system gives none [days]")
    checkpoint_storage_share: SourcedValue | None = Field(
        default=None,
        description="largest fraction of the time a job's storage may spend writing its checkpoints: the "
        "checkpoint interval is at least write time / this share [fraction, 0-1]; none: 1 (back to back)",
    )
    # -- hot swap and deployment from the bill of materials ---------------------------
    hot_swap_repair_hours: SourcedValue | None = Field(
        default=None, description="time to swap a failed card in a running node (hot swap) [h]"
    )
    install_hours: dict[str, SourcedValue] = Field(
        default_factory=dict,
        description="technician-hours to install one item of the bill of materials (rack, system-unit, "
        "cable, transceiver, switch, coolant-loop)",
    )
    install_technicians_per_mw: SourcedValue | None = Field(
        default=None, description="technicians installing in parallel per MW of IT power [1/MW]"
    )
    install_shift_hours_per_day: SourcedValue | None = Field(
        default=None, description="working hours per day of the install crews [h/day]"
    )
    commission_days: SourcedValue | None = Field(
        default=None, description="burn-in and acceptance after the last item is installed [days]"
    )

    @field_validator("storage_write_GBps_per_node", "storage_read_GBps_per_node")
    @classmethod
    def _bandwidth(cls, v: SourcedValue) -> SourcedValue:
        return _whatif_checked("write_GBps_per_node", v)

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: dict[str, ComponentRate]) -> dict[str, ComponentRate]:
        for name, rate in v.items():
            if not (math.isfinite(rate.value) and 0.0 <= rate.value < 1.0):
                raise ValueError(f"{name}: a rate per component-hour must be >= 0 and < 1; got {rate.value:g}")
        return v


WhatIfInput = Literal[
    "electricity_usd_per_kwh",
    "pue",
    "hardware_price_factor",
    "utilisation",
    "rate_factor",
    "write_GBps_per_node",
    "years",
    "dc_build_usd_per_mw",
    "maintenance_fraction",
]
WHATIF_INPUTS = get_args(WhatIfInput)
#: the values each what-if input can take: (lowest, whether the lowest itself is allowed, highest or None);
#: outside them the cost model has no meaning (a negative price, a PUE below 1, a lifetime of 0, a
#: lifetime of a million years). The highest values are generous bounds, not estimates:
#: - years 15: three times the five-to-six-year useful life the hyperscalers book their servers over
#:   (Amazon 10-K FY2024: five years; Microsoft, Alphabet: six; data/facility.yaml), and about the life of
#:   a hall's power and cooling plant; the model holds prices, utilisation and failure rates constant over it
#: - pue 3: above any fleet survey (Uptime Institute: 2.5 in 2007, 1.58 in 2023; data/uncertainty.yaml)
#: - electricity 2 USD/kWh: 25 times the US industrial average of 2023 (0.0806, data/facility.yaml)
#: - maintenance 1 per year: maintenance costing more each year than the hardware itself
#: - hardware price factor 10: ten times the catalog's dated prices (the surveyed range is 0.74-1.22,
#:   data/uncertainty.yaml)
#: - rate factor 100: a hundred times the measured failure rates (surveyed range 0.5-2.3); at that rate
#:   a 16,384-GPU job of Llama 3's cluster (419 interruptions in 54 days, Llama 3 paper Sec. 3.3.4) is
#:   interrupted every 2 minutes
#: - write bandwidth 1e-3 to 1e5 GB/s per node: from 1 MB/s (the floor of ``hnplan reliability
#:   --write-GBps-per-node``) to 100 TB/s, 250 times what a node's eight 400 Gb/s NICs carry
#: - facility build 1e8 USD per MW: four times the hardware itself (a GB200 NVL72 rack costs about
#:   3 M USD for its 132 kW, about 23 M USD per MW; surveyed builds 9.3-15 M USD per MW)
WHATIF_RANGES: dict[str, tuple[float, bool, float | None]] = {
    "electricity_usd_per_kwh": (0.0, True, 2.0),
    "pue": (1.0, True, 3.0),
    "hardware_price_factor": (0.0, False, 10.0),
    "utilisation": (0.0, False, 1.0),
    "rate_factor": (0.0, True, 100.0),
    "write_GBps_per_node": (1e-3, True, 1e5),
    "years": (0.0, False, 15.0),
    "dc_build_usd_per_mw": (0.0, True, 1e8),
    "maintenance_fraction": (0.0, True, 1.0),
}
#: the largest operations staff cost a TCO takes (``hnplan tco --staff-usd-per-year``) [USD/year]: ten
#: billion dollars a year, about 50,000 engineers at 200,000 USD each, more than any one cluster's
#: operations; a larger figure is a typo (a missing decimal point, a cost in cents)
MAX_STAFF_USD_PER_YEAR = 1e10


def whatif_range_problem(name: str, value: float) -> str | None:
    """Why ``value`` is outside what-if input ``name``'s range (:data:`WHATIF_RANGES`), or None.

    Parameters
    ----------
    name : str
        One of :data:`WHATIF_INPUTS`.
    value : float
        The value given, in the input's own unit (USD/kWh, a factor, years, GB/s per node, ...).

    Returns
    -------
    str or None
        One line naming the input, its bound and the value (``pue must be >= 1; got 0.9``); None when in range.

    Raises
    ------
    KeyError
        For a ``name`` outside :data:`WHATIF_INPUTS` (callers check the name first).

    >>> whatif_range_problem("pue", 0.9), whatif_range_problem("years", 5.0)
    ('pue must be >= 1; got 0.9', None)
    """
    low, closed, high = WHATIF_RANGES[name]
    if not math.isfinite(value):
        return f"{name} must be a finite number; got {value}"
    if value < low or (value == low and not closed):
        return f"{name} must be {'>=' if closed else '>'} {low:g}; got {value:g}"
    if high is not None and value > high:
        return f"{name} must be <= {high:g}; got {value:g}"
    return None


#: Facility field -> the what-if input whose range (:data:`WHATIF_RANGES`) its value must lie in
_FACILITY_WHATIF = {
    "electricity_usd_per_kwh": "electricity_usd_per_kwh",
    "pue_air": "pue",
    "pue_liquid": "pue",
    "amortisation_years": "years",
    "dc_build_usd_per_mw": "dc_build_usd_per_mw",
    "maintenance_fraction_per_year": "maintenance_fraction",
}


def _whatif_checked(name: str, v: SourcedValue) -> SourcedValue:
    """``v`` if its value lies in what-if input ``name``'s range; else ValueError ``value must be ...``."""
    problem = whatif_range_problem(name, v.value)
    if problem is not None:
        raise ValueError("value" + problem[len(name) :])
    return v


class UncertainInput(Entry):
    """The plausible range of one procurement what-if input (``data/uncertainty.yaml``)."""

    input: WhatIfInput = Field(description="the what-if input this range applies to")
    unit: str = Field(min_length=1)
    distribution: Literal["uniform", "triangular"] = "uniform"
    low: float
    high: float
    mode: float | None = Field(default=None, description="most likely value (triangular only)")
    as_of: _dt.date | None = None
    assumption: bool = False

    @model_validator(mode="after")
    def _ordered(self):
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.distribution == "triangular" and (self.mode is None or not self.low <= self.mode <= self.high):
            raise ValueError("a triangular range needs low <= mode <= high")
        return self


class MemoryOverheads(Entry):
    """Runtime memory overheads per accelerator process that no tensor of the model accounts for, and
    the serving engine's memory defaults; each value with its own provenance."""

    cuda_context_gib: SourcedValue = Field(
        description="CUDA context, kernel images and library workspaces of one process [GiB]"
    )
    nccl_gib_per_communicator: SourcedValue = Field(
        description="device buffers of one NCCL communicator running ring/tree collectives [GiB]"
    )
    nccl_alltoall_extra_gib: SourcedValue = Field(
        description="extra device buffers once a communicator runs all-to-all (all peers connected) [GiB]"
    )
    nccl_alltoall_channels_per_peer: SourcedValue = Field(
        description="send/recv channels per peer pair of the nccl_alltoall_extra_gib reading (the buffers scale "
        "with them, hnplan.memory.training.nccl_alltoall_scale) [-]"
    )
    allocator_fragmentation_fraction: SourcedValue = Field(
        description="memory the caching allocator reserves but cannot use, as a fraction of tensor memory"
    )
    serving_memory_utilization: SourcedValue = Field(
        description="fraction of device memory a serving engine may use (vLLM gpu_memory_utilization)"
    )
    serving_max_batched_tokens: SourcedValue = Field(
        description="tokens in the largest forward pass the serving engine plans its activation workspace for"
    )
