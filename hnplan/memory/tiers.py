"""Memory tiers of a system per accelerator, and where what does not fit in HBM spills.

Tiers, fastest first: HBM; host memory (DDR over PCIe, or LPDDR over NVLink-C2C); a pooled memory
(CXL, or a supernode's pool); local NVMe. Each has a capacity and a bandwidth per accelerator share:
a node's host memory and NVMe are shared by its ``node_gpus``, a pool by the ``pooled_memory_nodes``
sharing it (a CXL switch or fabric-attached memory), else by the scale-up domain.

Spill placement: parts leave HBM in a fixed order into the fastest tier with room (tiers are
separate links, moved in parallel).

Training (the one offload model of ``hnplan memory --system`` and the training planner's
``offload: auto``; :func:`training_offload`): optimizer states, then weights go to host memory or a
memory pool, then activations to host memory only; gradients stay in HBM (they accumulate over the
micro-batches). The states and weights stream through the GPU, which runs the update ([2]_ Sec. 5-6;
ZeRO-Offload's Adam on the CPU [1]_ is not modelled: it would need the CPU's Adam throughput). Per step,
in the busier direction of each tier's link:

* optimizer states: read and written back once (``1 x`` each way), hidden behind the optimizer step and
  the last micro-batch's backward pass (the gradients are final only then);
* weights: read for the forward and again for the backward pass of every micro-batch (``2 m x``),
  prefetched layer by layer behind the step's compute;
* activations: out and back once per micro-batch (``m x``; an upper bound when a stage holds several
  micro-batches in flight), behind the step's compute;

each prefetch (one per layer) pays the tier's latency, and the exposed part is
``max(0, t_opt - W_opt) + max(0, t_weights + t_act - W_compute)`` on the slowest tier.

Inference: the KV cache, then weights, into any tier (NVMe included); the KV cache is read once per
decode step (1x), weights once per step (1x).

References
----------
.. [1] Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC 2021, Sec. 4.
.. [2] Rajbhandari et al., "ZeRO-Infinity", SC21, arXiv:2104.07857, Sec. 5-6.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.compute import achievable_hbm_Bps
from hnplan.errors import check_choice
from hnplan.memory.breakdown import MemoryBreakdown, hbm_capacity_bytes

SPILL_ORDER = {"train": ("optimizer", "params", "activations"), "inference": ("kv_cache", "params")}
#: training: the tiers each part may move to (activations only to host memory; gradients stay in HBM)
TRAIN_OFFLOAD_TIERS = {"optimizer": ("host", "pooled"), "params": ("host", "pooled"), "activations": ("host",)}


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


def host_memory_bytes_per_gpu(system) -> float:
    """One accelerator's share of its node's host memory [bytes]: ``host_memory_gib_per_node`` [GiB,
    2**30 bytes] over ``node_gpus``.

    Raises
    ------
    TypeError
        When the system gives no ``host_memory_gib_per_node`` (callers check it first).
    """
    return units.GiB_to_bytes(system.host_memory_gib_per_node) / system.node_gpus


def memory_tiers(design: Design) -> list[Tier]:
    """The tiers of a design per accelerator, HBM first, then by bandwidth (fastest first).

    Tiers whose capacity or bandwidth the catalog does not give are left out.
    """
    system, acc = design.system, design.accelerator
    out = [Tier("hbm", hbm_capacity_bytes(acc), units.TBps_to_Bps(acc.hbm_bw_TBps), "on package")]
    rest = []
    if system.host_memory_gib_per_node and system.host_link_GBps_per_gpu:
        link = {"pcie": "PCIe", "nvlink-c2c": "NVLink-C2C"}[system.host_link_kind]
        rest.append(
            Tier(
                "host",
                host_memory_bytes_per_gpu(system),
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
    exposed_transfer_s: float | None = None  # training: :func:`training_offload`'s exposed time

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
        """Spill time not hidden behind the compute time [s] (``None`` without a compute time); training:
        the exposed offload time of :func:`training_offload` (its windows)."""
        if self.exposed_transfer_s is not None:
            return self.exposed_transfer_s
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


@dataclass(frozen=True)
class TrainingOffload:
    """What :func:`training_offload` moves, per plan (arrays aligned with its inputs).

    ``moved[part][tier]`` [bytes per GPU] and ``seconds[part][tier]`` [s per step, latency included];
    ``transfer_s`` the busiest tier's transfer per step, ``exposed_s`` what of it the step waits for [s];
    ``unplaced_bytes`` what still exceeds HBM after every allowed move [bytes]."""

    moved: dict
    seconds: dict
    transfer_s: np.ndarray
    exposed_s: np.ndarray
    unplaced_bytes: np.ndarray


def training_offload(
    parts: dict,
    total_bytes,
    hbm_bytes: float,
    tiers: list[Tier],
    microbatches,
    prefetches,
    window_optimizer_s,
    window_compute_s,
    latency_s: dict | None = None,
) -> TrainingOffload:
    """Offload of training plans that exceed HBM (see the module docstring), vectorised over plans.

    Parameters
    ----------
    parts : dict
        ``optimizer``, ``params``, ``activations`` [bytes per GPU, arrays].
    total_bytes : array
        The whole footprint per GPU [bytes].
    hbm_bytes : float
        What a program can allocate in HBM [bytes].
    tiers : list of Tier
        The tiers a part may move to (:data:`TRAIN_OFFLOAD_TIERS`: host and pooled), fastest first.
    microbatches : array
        Micro-batches per step ``m``.
    prefetches : array
        Transfers per step and part on a tier (one per layer of the stage), each paying ``latency_s``.
    window_optimizer_s, window_compute_s : array
        The optimizer step plus the last micro-batch's backward pass, and the step's compute [s].
    latency_s : dict, optional
        Tier name -> load latency [s] (0 where absent).

    Returns
    -------
    TrainingOffload
    """
    total = np.asarray(total_bytes, dtype=float)
    n = total.shape[0] if total.ndim else 1
    total = np.broadcast_to(total, (n,))
    excess = np.maximum(total - hbm_bytes, 0.0)
    m = np.broadcast_to(np.asarray(microbatches, dtype=float), (n,))
    layers = np.broadcast_to(np.asarray(prefetches, dtype=float), (n,))
    lat = latency_s or {}
    room = {t.name: np.full(n, t.capacity_bytes) for t in tiers}
    per_step = {"optimizer": np.ones(n), "params": 2.0 * m, "activations": m}
    moved: dict = {p: {} for p in TRAIN_OFFLOAD_TIERS}
    seconds: dict = {p: {} for p in TRAIN_OFFLOAD_TIERS}
    t_opt = {t.name: np.zeros(n) for t in tiers}
    t_rest = {t.name: np.zeros(n) for t in tiers}
    for part, allowed in TRAIN_OFFLOAD_TIERS.items():
        left = np.minimum(np.broadcast_to(np.asarray(parts[part], dtype=float), (n,)), excess)
        for t in tiers:
            if t.name not in allowed:
                continue
            put = np.minimum(left, room[t.name])
            room[t.name] = room[t.name] - put
            left = left - put
            excess = excess - put
            secs = put * per_step[part] / t.bw_Bps + np.where(put > 0, layers * lat.get(t.name, 0.0), 0.0)
            moved[part][t.name], seconds[part][t.name] = put, secs
            (t_opt if part == "optimizer" else t_rest)[t.name] += secs
    names = [t.name for t in tiers]
    w_opt = np.asarray(window_optimizer_s, dtype=float)
    w_comp = np.asarray(window_compute_s, dtype=float)
    stack = [np.maximum(t_opt[k] - w_opt, 0.0) + np.maximum(t_rest[k] - w_comp, 0.0) for k in names]
    exposed = np.max(np.vstack(stack), axis=0) if names else np.zeros(n)
    transfer = np.max(np.vstack([t_opt[k] + t_rest[k] for k in names]), axis=0) if names else np.zeros(n)
    return TrainingOffload(moved, seconds, transfer, exposed, np.maximum(excess, 0.0))


def tier_latency_s(system, tier: str) -> float:
    """Load latency of a tier [s]: the pool's ``pooled_memory_latency_ns``; 0 when not given (host
    memory's latency is far below a layer's transfer time)."""
    if tier == "pooled" and system.pooled_memory_latency_ns:
        return units.ns_to_s(system.pooled_memory_latency_ns)
    return 0.0


def offload_tiers(tiers: list[Tier]) -> list[Tier]:
    """The tiers training offload uses: host memory and a memory pool (not HBM, not NVMe), fastest first."""
    return [t for t in tiers[1:] if t.name in ("host", "pooled")]


def spill_plan(
    mem: MemoryBreakdown,
    tiers: list[Tier],
    mode: str = "train",
    compute_time_s: float | None = None,
    *,
    microbatches: float = 1.0,
    prefetches: float = 0.0,
    window_optimizer_s: float | None = None,
    latency_s: dict | None = None,
) -> SpillPlan:
    """Place what does not fit in HBM (``tiers[0]``) on the other tiers and cost the traffic per step.

    Parameters
    ----------
    mem : MemoryBreakdown
        The per-accelerator footprint [bytes].
    tiers : list of Tier
        :func:`memory_tiers` (HBM first).
    mode : {"train", "inference"}
        ``train``: :func:`training_offload` (the training planner's offload; host and pooled memory);
        ``inference``: the KV cache, then weights, into any tier.
    compute_time_s : float, optional
        Compute time per step the transfers hide behind [s] (training: the step's compute, the window
        of weights and activations).
    microbatches, prefetches, window_optimizer_s, latency_s :
        Training only, as :func:`training_offload` (``window_optimizer_s`` default 0: nothing to hide
        the optimizer states' transfer behind).

    Returns
    -------
    SpillPlan
        ``fits`` if the footprint fits in HBM; ``spills`` if the parts allowed to move fit in the other
        tiers; ``does-not-fit`` otherwise (``unplaced_bytes`` > 0).

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
    parts = mem.parts_bytes()
    if mode == "train":
        off = training_offload(
            {p: parts[p] for p in TRAIN_OFFLOAD_TIERS},
            mem.total_bytes,
            hbm,
            offload_tiers(tiers),
            microbatches,
            prefetches,
            0.0 if window_optimizer_s is None else window_optimizer_s,
            np.inf if compute_time_s is None else compute_time_s,
            latency_s,
        )
        per_step = {"optimizer": 1.0, "params": 2.0 * microbatches, "activations": float(microbatches)}
        spills = [
            Spill(p, t, float(b[0]), float(b[0]) * per_step[p], float(off.seconds[p][t][0]))
            for p, by_tier in off.moved.items()
            for t, b in by_tier.items()
            if b[0] > 0
        ]
        unplaced = float(off.unplaced_bytes[0])
        exposed = None if compute_time_s is None else float(off.exposed_s[0])
        status = "spills" if unplaced <= 0 else "does-not-fit"
        return SpillPlan(status, hbm, mem.total_bytes, spills, unplaced, compute_time_s, exposed)
    room = {t.name: t.capacity_bytes for t in tiers[1:]}
    spills = []
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
            spills.append(Spill(part, t.name, put, put, put / t.bw_Bps))
        if excess <= 0:
            break
    status = "spills" if excess <= 0 else "does-not-fit"
    return SpillPlan(status, hbm, mem.total_bytes, spills, max(0.0, excess), compute_time_s)


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
    "host_memory_bytes_per_gpu",
    "memory_tiers",
    "pool_gpus",
    "TRAIN_OFFLOAD_TIERS",
    "TrainingOffload",
    "offload_tiers",
    "spill_plan",
    "tier_latency_s",
    "training_offload",
]
