"""Memory tiers of a system per accelerator, and where what does not fit in HBM spills.

Tiers, fastest first: HBM; host memory (DDR over PCIe, or LPDDR over NVLink-C2C); a pooled memory
(CXL, or a supernode's pool); local NVMe. Each has a capacity and a bandwidth per accelerator share:
a node's host memory and NVMe are shared by its ``node_gpus``, a pool by the ``pooled_memory_nodes``
sharing it (a CXL switch or fabric-attached memory), else by the scale-up domain.

Spill placement: parts leave HBM in a fixed order (training: optimizer states, gradients, weights,
activations; inference: KV cache, then weights) into the fastest tier with room. Each spilled byte
costs traffic per step, in the busier direction of the link:

* optimizer states on host memory: ZeRO-Offload ([1]_ Sec. 4) runs Adam on the CPU; per step the
  gradients go down and the updated 16-bit weights come back: ``weight_bytes / optimizer_bytes`` per
  spilled byte each way; on any other tier the states stream through once each way (ZeRO-Infinity [2]_);
* gradients: written once per step (1x; when the optimizer states also spill to host memory this
  counts the gradient traffic twice, an upper bound);
* weights: read for the forward and again for the backward pass (training, 2x) or once (inference);
* activations: written after the forward pass and read back in the backward pass (1x each way);
* KV cache: read once per decode step (1x).

References
----------
.. [1] Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC 2021, Sec. 4.
.. [2] Rajbhandari et al., "ZeRO-Infinity", SC21, arXiv:2104.07857, Sec. 5-6.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.compute import achievable_flops_per_s, achievable_hbm_Bps, training_flops_per_token
from hnplan.errors import check_choice
from hnplan.memory.breakdown import MemoryBreakdown, hbm_capacity_bytes
from hnplan.memory.states import accounting

SPILL_ORDER = {"train": ("optimizer", "grads", "params", "activations"), "inference": ("kv_cache", "params")}


@dataclass(frozen=True)
class Tier:
    """One memory tier as one accelerator sees it: capacity share [bytes], bandwidth [bytes/s per direction]."""

    name: str
    capacity_bytes: float
    bw_Bps: float
    link: str

    def as_dict(self) -> dict:
        return {
            "tier": self.name,
            "capacity_gib": units.to_GiB(self.capacity_bytes),
            "bw_GBps": units.Bps_to_GBps(self.bw_Bps),
            "link": self.link,
        }


def pool_gpus(system) -> int:
    """Accelerators sharing the pooled memory: ``pooled_memory_nodes x node_gpus``, else the scale-up domain."""
    if system.pooled_memory_nodes:
        return system.pooled_memory_nodes * system.node_gpus
    return system.scaleup_domain_gpus


def memory_tiers(design: Design) -> list[Tier]:
    """The tiers of a design per accelerator, HBM first, then by bandwidth (fastest first).

    Tiers whose capacity or bandwidth the catalog does not give are left out.
    """
    system, acc = design.system, design.accelerator
    out = [Tier("hbm", hbm_capacity_bytes(acc), units.TBps_to_Bps(acc.hbm_bw_TBps), "on package")]
    rest = []
    if system.host_memory_gb_per_node and system.host_link_GBps_per_gpu:
        link = {"pcie": "PCIe", "nvlink-c2c": "NVLink-C2C"}[system.host_link_kind]
        rest.append(
            Tier(
                "host",
                units.GB_to_bytes(system.host_memory_gb_per_node) / system.node_gpus,
                units.GBps_to_Bps(system.host_link_GBps_per_gpu),
                link,
            )
        )
    if system.pooled_memory_tb:
        bw = system.pooled_memory_GBps_per_gpu or system.scaleup_bw_GBps_per_dir or acc.scaleup_bw_GBps_per_dir
        rest.append(
            Tier(
                "pooled",
                system.pooled_memory_tb * units.TB / pool_gpus(system),
                units.GBps_to_Bps(bw),
                "CXL / fabric-attached" if system.pooled_memory_nodes else "scale-up fabric",
            )
        )
    if system.nvme_tb_per_node and system.nvme_read_GBps_per_node:
        rest.append(
            Tier(
                "nvme",
                system.nvme_tb_per_node * units.TB / system.node_gpus,
                units.GBps_to_Bps(system.nvme_read_GBps_per_node) / system.node_gpus,
                "PCIe NVMe",
            )
        )
    return out + sorted(rest, key=lambda t: -t.bw_Bps)


@dataclass(frozen=True)
class Spill:
    """One part (or a piece of it) placed off HBM."""

    part: str
    tier: str
    bytes: float
    traffic_bytes_per_step: float
    seconds_per_step: float

    def as_dict(self) -> dict:
        return {
            "part": self.part,
            "tier": self.tier,
            "gib": units.to_GiB(self.bytes),
            "traffic_gib_per_step": units.to_GiB(self.traffic_bytes_per_step),
            "seconds_per_step": self.seconds_per_step,
        }


@dataclass(frozen=True)
class SpillPlan:
    """Where a footprint lives: ``status`` is ``fits``, ``spills`` or ``does-not-fit``."""

    status: str
    hbm_bytes: float
    total_bytes: float
    spills: list = field(default_factory=list)
    unplaced_bytes: float = 0.0
    compute_time_s: float | None = None

    @property
    def fits(self) -> bool:
        return self.status == "fits"

    @property
    def spill_time_s(self) -> float:
        """Seconds per step to move the spilled parts (tiers in parallel, parts on a tier in series)."""
        per_tier: dict = {}
        for s in self.spills:
            per_tier[s.tier] = per_tier.get(s.tier, 0.0) + s.seconds_per_step
        return max(per_tier.values(), default=0.0)

    @property
    def exposed_s(self) -> float | None:
        """Spill time not hidden behind the compute time [s] (``None`` without a compute time)."""
        if self.compute_time_s is None:
            return None
        return max(0.0, self.spill_time_s - self.compute_time_s)

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "fits": self.fits,
            "hbm_gib": units.to_GiB(self.hbm_bytes),
            "total_gib": units.to_GiB(self.total_bytes),
            "spills": [s.as_dict() for s in self.spills],
            "unplaced_gib": units.to_GiB(self.unplaced_bytes),
            "spill_time_s": self.spill_time_s,
            "compute_time_s": self.compute_time_s,
            "exposed_s": self.exposed_s,
        }


def traffic_factor(part: str, tier: str, mode: str, recipe) -> float:
    """Bytes moved per step and per byte of ``part`` placed on ``tier`` (see the module docstring);
    ``recipe`` is an accounting name or :class:`~hnplan.memory.states.StateAccounting`."""
    if part == "optimizer":
        a = accounting(recipe)
        return a.weight_bytes / a.optimizer_bytes if tier == "host" else 1.0
    if part == "params":
        return 2.0 if mode == "train" else 1.0
    return 1.0


def spill_plan(
    mem: MemoryBreakdown,
    tiers: list[Tier],
    mode: str = "train",
    recipe: str = "zero-paper",
    compute_time_s: float | None = None,
) -> SpillPlan:
    """Place what does not fit in HBM (``tiers[0]``) on the other tiers and cost the traffic per step.

    Parameters
    ----------
    mem : MemoryBreakdown
        The per-accelerator footprint [bytes].
    tiers : list of Tier
        :func:`memory_tiers` (HBM first).
    mode : {"train", "inference"}
        Which parts may spill, in :data:`SPILL_ORDER`.
    recipe : str
        Model-state accounting, for the ZeRO-Offload traffic of optimizer states.
    compute_time_s : float, optional
        Compute time per step the transfers must hide behind [s].

    Returns
    -------
    SpillPlan
        ``fits`` if the footprint fits in HBM; ``spills`` if the spillable parts fit in the other tiers;
        ``does-not-fit`` otherwise (``unplaced_bytes`` > 0).

    Raises
    ------
    InputError
        For an unknown mode.
    """
    check_choice("mode", mode, SPILL_ORDER)
    hbm = tiers[0].capacity_bytes
    excess = mem.total_bytes - hbm
    if excess <= 0:
        return SpillPlan("fits", hbm, mem.total_bytes, compute_time_s=compute_time_s)
    room = {t.name: t.capacity_bytes for t in tiers[1:]}
    spills = []
    parts = mem.parts_bytes()
    for part in SPILL_ORDER[mode]:
        left = min(parts[part], excess)
        for t in tiers[1:]:
            if left <= 0:
                break
            put = min(left, room[t.name])
            if put <= 0:
                continue
            room[t.name] -= put
            left -= put
            excess -= put
            traffic = put * traffic_factor(part, t.name, mode, recipe)
            spills.append(Spill(part, t.name, put, traffic, traffic / t.bw_Bps))
        if excess <= 0:
            break
    status = "spills" if excess <= 0 else "does-not-fit"
    return SpillPlan(status, hbm, mem.total_bytes, spills, max(0.0, excess), compute_time_s)


def training_compute_time_s(
    model,
    acc,
    seq_len: int,
    microbatch: int,
    num_microbatches: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    recompute: str = "none",
    dtype: str = "bf16",
) -> float:
    """Compute time of one training step on one accelerator at the achievable GEMM rate [s]: hardware
    FLOPs per token (recomputation included) x ``microbatch x num_microbatches x seq_len`` tokens per
    data-parallel replica, shared by its ``tp x pp x cp`` accelerators. The time spilled transfers can
    hide behind."""
    f = training_flops_per_token(model, seq_len, recompute).hardware
    return f * microbatch * num_microbatches * seq_len / (tp * pp * cp) / achievable_flops_per_s(acc, dtype)


def decode_step_time_s(mem: MemoryBreakdown, acc) -> float:
    """Time of one memory-bound decode step: weights and KV cache read once from HBM at the achievable
    bandwidth [s] (the compute a spilled KV cache must hide behind)."""
    return (mem.params_bytes + mem.kv_cache_bytes) / achievable_hbm_Bps(acc)


__all__ = [
    "SPILL_ORDER",
    "Spill",
    "SpillPlan",
    "Tier",
    "decode_step_time_s",
    "memory_tiers",
    "pool_gpus",
    "spill_plan",
    "training_compute_time_s",
    "traffic_factor",
]
