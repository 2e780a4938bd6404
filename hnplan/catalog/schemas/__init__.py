"""Schemas of the catalogs in ``data/``: one pydantic model per catalog kind.

The same models validate the YAML files and document them (``hnplan catalog schema KIND`` and the
README print their fields). Conventions:

* Unknown keys are rejected (``extra="forbid"``); entries are frozen once loaded.
* Units are spelled in the key, in the field's customary units: ``hbm_gb`` is decimal gigabytes
  (1e9 bytes, as datasheets print), ``hbm_bw_TBps`` terabytes per second, ``nic_gbps`` gigabits per
  second, ``scaleup_bw_GBps_per_dir`` gigabytes per second *per direction*.  Conversion to SI happens
  in :mod:`hnplan.units`, never here.
* Every entry carries a non-empty ``source``.  A field whose value comes from elsewhere names it in
  ``field_sources``; a value nobody published is listed in ``assumptions`` with the reason.
  Calibration factors (efficiencies) must have their own ``field_sources`` or ``assumptions`` item.
* Ids are lower-kebab-case with dots allowed inside version numbers (``llama3.1-405b``).
"""

from __future__ import annotations

from hnplan.catalog.schemas.base import (  # noqa: F401
    DTYPES,
    ID_PATTERN,
    Dtype,
    Entry,
    Fraction,
    NonNegative,
    PosInt,
    Positive,
    Source,
    _check_source,
    _Strict,
)
from hnplan.catalog.schemas.cluster import *  # noqa: F401,F403
from hnplan.catalog.schemas.economics import *  # noqa: F401,F403
from hnplan.catalog.schemas.hardware import *  # noqa: F401,F403
from hnplan.catalog.schemas.hardware import Accelerator, Interconnect, Storage, Switch, System
from hnplan.catalog.schemas.moe_choices import *  # noqa: F401,F403
from hnplan.catalog.schemas.serving import ServingEngine
from hnplan.catalog.schemas.software import *  # noqa: F401,F403
from hnplan.catalog.schemas.software import SoftwareStack
from hnplan.catalog.schemas.workload import *  # noqa: F401,F403
from hnplan.catalog.schemas.workload import Model

KINDS: dict[str, type[Entry]] = {
    "accelerators": Accelerator,
    "interconnects": Interconnect,
    "switches": Switch,
    "systems": System,
    "models": Model,
    "stacks": SoftwareStack,
    "storage": Storage,
    "engines": ServingEngine,
}
