"""The per-accelerator memory breakdown shared by training and inference, and the HBM a program sees."""

from __future__ import annotations

from dataclasses import dataclass

from hnplan import units
from hnplan.catalog.schemas import Accelerator

PARTS = ("params", "grads", "optimizer", "activations", "kv_cache", "overhead")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-accelerator memory [bytes], by part; ``total_bytes`` is the sum of every part."""

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    kv_cache_bytes: float = 0.0
    overhead_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return sum(getattr(self, f"{p}_bytes") for p in PARTS)

    def parts_bytes(self) -> dict:
        """``{part: bytes}`` for the parts in :data:`PARTS`."""
        return {p: getattr(self, f"{p}_bytes") for p in PARTS}

    def as_gib(self) -> dict:
        """The breakdown in GiB (2**30 bytes): ``params_gib`` ... ``overhead_gib``, ``total_gib``."""
        d = {f"{p}_gib": units.to_GiB(v) for p, v in self.parts_bytes().items()}
        d["total_gib"] = units.to_GiB(self.total_bytes)
        return d


def hbm_capacity_bytes(acc: Accelerator) -> float:
    """Device memory a program can allocate from [bytes].

    ``hbm_visible_gib`` (what the driver reports, e.g. 79.11 GiB on an H100 80GB) where the catalog
    has it, else the datasheet's ``hbm_gb`` read as decimal gigabytes (the lower of the two readings
    of "80 GB").

    >>> from hnplan.catalog import load_catalog
    >>> round(units.to_GiB(hbm_capacity_bytes(load_catalog().accelerator("h100-sxm"))), 2)
    79.11
    """
    if acc.hbm_visible_gib is not None:
        return units.GiB_to_bytes(acc.hbm_visible_gib)
    return units.GB_to_bytes(acc.hbm_gb)
