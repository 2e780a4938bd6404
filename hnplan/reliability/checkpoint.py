"""Checkpoint size and write time (synchronous and asynchronous), the optimal checkpoint interval,
restart time and goodput; :func:`reliability_estimate` puts them together with the interruption rates
of :mod:`hnplan.reliability.rates`.

* Checkpoint = bf16 weights + fp32 master weights and Adam moments (2 + 12 bytes per parameter,
  :func:`hnplan.memory.zero_model_state_bytes` at ZeRO 0; gradients are not saved). A synchronous
  save stalls training for ``bytes / (nodes x write bandwidth)``; an asynchronous save ([4]_) stalls
  only while each accelerator copies its shard to host memory (``bytes / gpus / host link``) and
  writes in the background.
* Optimal interval: Young ([2]_) ``tau = sqrt(2 delta M)``; Daly ([3]_ eq. 37)
  ``tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (1/9) (delta / 2M)] - delta`` for
  ``delta < 2M``, else ``M``.
* Goodput (Daly [3]_ eq. 13, exponential failures): wall time per unit of work
  ``T_w / T_s = M e^{R/M} (e^{(tau + delta)/M} - 1) / tau``; the job's goodput = ``T_s / T_w``,
  further reduced by planned interruptions each costing one restart. The design's goodput also
  charges the accelerators held out of service for repair on the job's behalf
  (:func:`hnplan.reliability.rates.gpus_in_repair`).
* With a storage entry (the system's ``storage``), checkpoint write and restore times come from its
  units beside the data loader's reads (:func:`hnplan.storage.job_storage`).
* Storage bound on the interval (both modes): checkpoints may keep the storage writing at most a share
  ``s`` of the time (``checkpoint_storage_share`` of ``data/reliability.yaml``, a labelled assumption),
  so ``tau >= write / s``. An asynchronous save stalls training only for the copy to host memory, the
  first tier (each GPU's shard over its host link: 1.5 ms for Llama 3.1 405B on 16,384 GB200 at
  NVLink-C2C's 225 GB/s per GPU), so Young/Daly alone would checkpoint every few seconds and keep the
  storage writing most of the time. A stack snapshots the state between optimizer steps (Megatron-LM
  ``--save-interval`` and TorchTitan ``checkpoint.interval`` count iterations), so with the step time
  known the interval is at least one step and a whole number of steps. The estimate says which bound
  (``daly``, ``storage`` or ``step``) set the interval.

References
----------
.. [2] J. W. Young, "A first order approximation to the optimum checkpoint interval",
   Commun. ACM 17(9), 1974, doi:10.1145/361147.361115.
.. [3] J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
   Future Generation Computer Systems 22(3), 2006, doi:10.1016/j.future.2004.11.016.
.. [4] Liang et al., "TorchTitan: One-stop PyTorch native solution for production ready LLM
   pre-training", arXiv:2410.06511 (asynchronous distributed checkpointing, Llama 3.1 8B on
   8 x H100); PyTorch blog "Reducing Model Checkpointing Times by Over 10x with PyTorch Distributed
   Asynchronous Checkpointing" (2024).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from hnplan import storage as sto
from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.schemas import Model, Storage
from hnplan.errors import InputError, check_choice
from hnplan.reliability.rates import failure_unit_gpus, gpus_in_repair, interruption_rates_per_h, spare_gpus
from hnplan.reliability.spares import spare_pools

CHECKPOINT_MODES = ("sync", "async")


# -- checkpoints --------------------------------------------------------------------------------
def checkpoint_bytes(model: Model) -> float:
    """Bytes of a full training checkpoint: bf16 weights + fp32 master weights and Adam moments
    (2 + 12 bytes per parameter; gradients are not saved) [bytes].

    >>> from hnplan.catalog import load_catalog
    >>> round(checkpoint_bytes(load_catalog().model("llama3.1-8b")) / 1e9)
    112
    """
    # the model's state accounting, imported here: the interruption rates (the cluster simulation's) need neither
    from hnplan.compute import param_counts
    from hnplan.memory import zero_model_state_bytes

    weights, _, optimizer = zero_model_state_bytes(param_counts(model).total, 1, 0)
    return weights + optimizer


def checkpoint_times(n_bytes: float, design: Design, gpus: int, write_GBps_per_node: float | None = None) -> dict:
    """Checkpoint write and stall times of both modes [s].

    Parameters
    ----------
    n_bytes : float [bytes]
    design : Design
    gpus : int
    write_GBps_per_node : float, optional
        [GB/s]; default the system's ``storage_write_GBps_per_node``, else reliability.yaml's.

    Returns
    -------
    dict
        ``write_s`` (the full write to storage), ``sync_stall_s`` (= write_s) and
        ``async_stall_s`` (copy of each GPU's shard to host memory over ``host_link_GBps_per_gpu``;
        equal to ``write_s`` for a system without a host-link figure).
    """
    system = design.system
    nodes = math.ceil(gpus / system.node_gpus)
    bw = write_GBps_per_node or design.storage_write_GBps_per_node
    write = n_bytes / (nodes * units.GBps_to_Bps(bw))
    if system.host_link_GBps_per_gpu is None:
        stall = write
    else:
        stall = n_bytes / gpus / units.GBps_to_Bps(system.host_link_GBps_per_gpu)
    return {"write_s": write, "sync_stall_s": write, "async_stall_s": min(stall, write)}


def young_interval_s(delta_s, mtbi_s_):
    """Young's (1974) optimum checkpoint interval ``sqrt(2 delta M)`` [s] ([2]_).

    >>> young_interval_s(50.0, 10_000.0)
    1000.0
    """
    return (
        np.sqrt(2.0 * np.asarray(delta_s) * mtbi_s_)
        if isinstance(delta_s, np.ndarray)
        else math.sqrt(2.0 * delta_s * mtbi_s_)
    )


def daly_interval_s(delta_s: float, mtbi_s_: float) -> float:
    """Daly's (2006) higher-order optimum checkpoint interval [s] ([3]_ eq. 37).

    ``sqrt(2 d M) [1 + sqrt(d / 2M) / 3 + (d / 2M) / 9] - d`` for ``d < 2M``, else ``M``.

    >>> round(daly_interval_s(50.0, 10_000.0), 2)
    966.94
    """
    if delta_s < 0 or mtbi_s_ <= 0:
        raise InputError(f"checkpoint time must be >= 0 and MTBI > 0; got {delta_s}, {mtbi_s_}")
    if delta_s >= 2 * mtbi_s_:
        return mtbi_s_
    x = delta_s / (2 * mtbi_s_)
    return math.sqrt(2 * delta_s * mtbi_s_) * (1 + math.sqrt(x) / 3 + x / 9) - delta_s


def daly_goodput(tau_s, delta_s: float, restart_s: float, mtbi_s_: float):
    """Useful fraction of wall time with checkpoints every ``tau`` of work (Daly [3]_ eq. 13).

    ``T_s / T_w = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1))`` (float or array in ``tau``).
    """
    m = mtbi_s_
    tau = np.asarray(tau_s, dtype=float)
    g = tau / (m * math.exp(restart_s / m) * np.expm1((tau + delta_s) / m))
    return float(g) if g.ndim == 0 else g


# -- the whole picture --------------------------------------------------------------------------
@dataclass(frozen=True)
class ReliabilityEstimate:
    """Interruptions, checkpoints and goodput of one training job."""

    system: str
    model: str
    gpus: int
    mode: str
    mtbi_s: float
    planned_per_h: float
    failure_unit_gpus: int
    spare_gpus: int
    checkpoint_bytes: float
    checkpoint_write_s: float
    checkpoint_stall_s: float
    checkpoint_interval_s: float
    restart_s: float
    goodput: float
    rates_per_h: dict
    job_goodput: float = 1.0
    gpus_in_repair: float = 0.0
    storage: dict | None = None
    checkpoint_interval_bound: str = "daly"  # "daly" (Young/Daly optimum), "storage" (write / share) or "step"
    checkpoint_daly_interval_s: float = math.inf
    checkpoint_storage_share: float = 1.0
    checkpoint_host_link_GBps: float | None = None  # the first tier of an async save (None: sync, or no figure)
    step_s: float | None = None
    gpus_bought: int | None = None  # the units' GPUs, idle ones included (None: the job's alone)
    spare_nodes: int = 0  # idle whole nodes per pool that stand in for failed ones (hnplan.reliability.spares)

    def goodput_at(self, interval_s: float) -> float:
        """Goodput [fraction] had the job checkpointed every ``interval_s`` of work instead: Daly's eq. 13
        ([3]_) with this estimate's stall, restart and MTBI, planned restarts and GPUs in repair as in
        :func:`reliability_estimate` (a what-if beside the chosen interval)."""
        if math.isinf(self.mtbi_s):
            return self.goodput
        g = daly_goodput(interval_s, self.checkpoint_stall_s, self.restart_s, self.mtbi_s)
        g *= max(0.0, 1.0 - self.planned_per_h * units.s_to_hours(self.restart_s))
        return g * self.gpus / (self.gpus + self.gpus_in_repair)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            mtbi_h=units.s_to_hours(self.mtbi_s),
            interruptions_per_day=units.DAY / self.mtbi_s + self.planned_per_h * units.DAY / units.HOUR,
        )
        return d


def reliability_estimate(
    design: Design,
    gpus: int,
    model: Model,
    mode: str = "async",
    rate_factor: float = 1.0,
    write_GBps_per_node: float | None = None,
    restart_overhead_s: float | None = None,
    storage: Storage | None = None,
    storage_units: int | None = None,
    tokens_per_s: float | None = None,
    checkpoint_storage_share: float | None = None,
    step_s: float | None = None,
    gpus_bought: int | None = None,
) -> ReliabilityEstimate:
    """Interruptions, checkpoint interval, restart time and goodput of a job.

    ``job_goodput`` is Daly's useful fraction of the job's wall time (less planned interruptions);
    ``goodput`` also charges the accelerators held out of service for repair on the job's behalf
    (:func:`gpus_in_repair`, which depends on hot swap and the failure unit):
    ``goodput = job_goodput x gpus / (gpus + gpus_in_repair)``. With a storage entry (the system's
    ``storage`` or ``storage``), checkpoint write and restore times come from it beside the data
    loader (:func:`hnplan.storage.job_storage`), else from the per-node figures.

    The planner :func:`hnplan.planning.design.estimate_reliability` resolves ids and calls this.

    Parameters
    ----------
    design : Design
        The system with its reliability defaults (:meth:`hnplan.catalog.loader.Catalog.design`).
    gpus : int
    model : Model
    mode : {"sync", "async"}
        Checkpoint mode. Async stalls only for the device-to-host copy; its background write must
        finish before the next checkpoint, so the interval is at least the write time.
        In both modes the interval is at least ``write time / checkpoint_storage_share``
        (``checkpoint_interval_bound`` says whether that or Daly's optimum set it).
    rate_factor : float
        Multiplies every failure rate (what-ifs).
    write_GBps_per_node : float, optional
        Storage write bandwidth [GB/s per node].
    restart_overhead_s : float, optional
        Restart time before the checkpoint read [s]; default reliability.yaml.
    storage : Storage, optional
        Overrides the system's ``storage`` (ignored when ``write_GBps_per_node`` is given).
    storage_units : int, optional
        Storage units bought; default :func:`hnplan.storage.units_for`.
    tokens_per_s : float, optional
        The job's training throughput [tokens/s], for the data loader's share of the storage.
    checkpoint_storage_share : float, optional
        Largest fraction of the time the storage may spend writing checkpoints, in (0, 1]; default
        ``checkpoint_storage_share`` of reliability.yaml (1 when it has none).
    step_s : float, optional
        The job's training step time [s]: checkpoints are taken between steps, so the interval is at
        least one step and rounded up to whole steps.
    gpus_bought : int, optional
        GPUs of the whole units bought (>= ``gpus``): their idle nodes stand in for failed ones, so the
        GPUs in repair count only the failures that find no spare (:mod:`hnplan.reliability.spares`).

    Returns
    -------
    ReliabilityEstimate

    Raises
    ------
    InputError
        For an unknown mode, a storage that cannot sustain the data loader, a checkpoint storage share
        outside (0, 1], or a step time that is not a positive finite number.
    """
    if step_s is not None and not (0 < step_s < math.inf):
        raise InputError(f"step time must be a finite number > 0 s; got {step_s}")
    check_choice("mode", mode, CHECKPOINT_MODES)
    ck_share = checkpoint_storage_share
    if ck_share is None:
        default = design.reliability.checkpoint_storage_share
        ck_share = default.value if default is not None else 1.0
    if not 0.0 < ck_share <= 1.0:
        raise InputError(f"checkpoint_storage_share must be in (0, 1]; got {ck_share}")
    system, rel = design.system, design.reliability
    rates = interruption_rates_per_h(design, gpus, rate_factor)
    m = units.HOUR / sum(rates.values()) if sum(rates.values()) else math.inf
    n_bytes = checkpoint_bytes(model)
    ck = checkpoint_times(n_bytes, design, gpus, write_GBps_per_node)
    nodes = math.ceil(gpus / system.node_gpus)
    read_s = n_bytes / (nodes * units.GBps_to_Bps(design.storage_read_GBps_per_node))
    job_sto = (
        None if write_GBps_per_node else sto.job_storage(design, gpus, n_bytes, storage, storage_units, tokens_per_s)
    )
    if job_sto is not None:
        write_s = job_sto["write_s"]
        read_s = job_sto["read_s"]
    else:  # per-node figures: the data loader's reads take their share of the same storage time
        loader = units.GBps_to_Bps(design.storage_read_GBps_per_node) * nodes
        share = 1.0 - (tokens_per_s or 0.0) * sto.TEXT_BYTES_PER_TOKEN / loader
        if share <= 0:
            need = units.Bps_to_GBps((tokens_per_s or 0.0) * sto.TEXT_BYTES_PER_TOKEN)
            raise InputError(
                f"tokens_per_s {tokens_per_s:.4g}: the data loader reads {need:.4g} GB/s of text "
                f"({sto.TEXT_BYTES_PER_TOKEN:g} bytes a token), more than the storage's {units.Bps_to_GBps(loader):.0f} "
                "GB/s read"
            )
        write_s = ck["write_s"] / share
    ck["write_s"] = ck["sync_stall_s"] = write_s
    ck["async_stall_s"] = min(ck["async_stall_s"], write_s)
    stall = ck[f"{mode}_stall_s"]
    restart = (rel.restart_overhead_s.value if restart_overhead_s is None else restart_overhead_s) + read_s
    planned = rate_factor * rel.planned_per_gpu_hour.value * gpus
    storage_floor = ck["write_s"] / ck_share  # the storage writes checkpoints at most `ck_share` of the time
    bound = "daly"
    if math.isinf(m):
        daly, interval, goodput = math.inf, math.inf, 1.0
    else:
        daly = daly_interval_s(stall, m)
        interval, bound = (storage_floor, "storage") if storage_floor > daly else (daly, "daly")
        if step_s is not None:  # between optimizer steps, a whole number of them
            bound = "step" if step_s >= interval else bound
            interval = math.ceil(interval / step_s - 1e-9) * step_s
        goodput = daly_goodput(interval, stall, restart, m)
    goodput *= max(0.0, 1.0 - planned * units.s_to_hours(restart))
    in_repair = gpus_in_repair(design, gpus, rate_factor, gpus_bought=gpus_bought)
    return ReliabilityEstimate(
        system=system.id,
        model=model.id,
        gpus=gpus,
        mode=mode,
        mtbi_s=m,
        planned_per_h=planned,
        failure_unit_gpus=min(failure_unit_gpus(system), gpus),  # a job smaller than the unit loses only itself
        spare_gpus=spare_gpus(design, gpus, rate_factor=rate_factor, gpus_bought=gpus_bought),
        checkpoint_bytes=n_bytes,
        checkpoint_write_s=ck["write_s"],
        checkpoint_stall_s=stall,
        checkpoint_interval_s=interval,
        restart_s=restart,
        goodput=goodput * gpus / (gpus + in_repair),
        rates_per_h=rates,
        job_goodput=goodput,
        gpus_in_repair=in_repair,
        storage=job_sto,
        checkpoint_interval_bound=bound,
        checkpoint_daly_interval_s=daly,
        checkpoint_storage_share=ck_share,
        checkpoint_host_link_GBps=system.host_link_GBps_per_gpu if mode == "async" else None,
        step_s=step_s,
        gpus_bought=gpus_bought,
        spare_nodes=spare_pools(system, gpus, gpus_bought)[1],
    )
