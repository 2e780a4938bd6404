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


# Driver reservation off the nominal capacity, where the catalog has no reading of the visible
# capacity: an H100 80GB shows 79.11 GiB to programs (vLLM memory-profiler log, torch.cuda.mem_get_info)
# of its 80 GiB of HBM3, 1.1 %. Applied to the nominal capacity read in GiB (HBM stacks come in binary
# sizes: 80 GB = 5 x 16 GiB); on the accelerators with a reading the rule is within 1.3 % of it
# (A100 79.15, H200 139.81, B200 179.06, MI300X 191.45 GiB), below it on all.
HBM_DRIVER_RESERVE_FRACTION = 1.0 - 79.11 / 80.0


def hbm_capacity_bytes(acc: Accelerator) -> float:
    """Device memory a program can allocate from [bytes].

    ``hbm_visible_gib`` (what the driver reports to programs, ``torch.cuda.mem_get_info``'s total or
    ``nvidia-smi``'s ``memory.total``, e.g. 79.11 GiB on an H100 80GB) where the catalog has it, else the
    datasheet's ``hbm_gb`` read as GiB less :data:`HBM_DRIVER_RESERVE_FRACTION` (1.1 %, the
    reservation measured on H100).

    >>> from hnplan.catalog import load_catalog
    >>> round(units.to_GiB(hbm_capacity_bytes(load_catalog().accelerator("h100-sxm"))), 2)
    79.11
    >>> round(units.to_GiB(hbm_capacity_bytes(load_catalog().accelerator("h800-sxm"))), 2)   # 80 GiB less 1.1 %
    79.11
    """
    if acc.hbm_visible_gib is not None:
        return units.GiB_to_bytes(acc.hbm_visible_gib)
    return units.GiB_to_bytes(acc.hbm_gb * (1.0 - HBM_DRIVER_RESERVE_FRACTION))
