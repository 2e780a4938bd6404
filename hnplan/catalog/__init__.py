"""Catalogs: validated, typed entries loaded from ``data/`` (see :mod:`hnplan.catalog.schemas`)."""

from hnplan.catalog.checks import validate_file
from hnplan.catalog.design import Design, DesignPrices
from hnplan.catalog.loader import Catalog, data_dir, load_catalog, parse_entry
from hnplan.catalog.schemas import (
    KINDS,
    MLA,
    Accelerator,
    Facility,
    Interconnect,
    MemoryOverheads,
    Model,
    MoE,
    Price,
    Scenario,
    SoftwareStack,
    SourcedValue,
    Switch,
    System,
)

__all__ = [
    "KINDS",
    "MLA",
    "Accelerator",
    "Catalog",
    "Design",
    "DesignPrices",
    "Facility",
    "Interconnect",
    "MemoryOverheads",
    "Model",
    "MoE",
    "Price",
    "Scenario",
    "SoftwareStack",
    "SourcedValue",
    "Switch",
    "System",
    "data_dir",
    "load_catalog",
    "parse_entry",
    "validate_file",
]
