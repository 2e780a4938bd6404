"""Training step-time estimate for one parallel plan, and a small plan search (first-order).

Step model (1F1B pipeline, Narayanan et al. SC21 [1]_ Sec. 2.2 and 3.3):

``step = (m + (p - 1) / v) * t_mb + t_dp + t_opt``

with ``m`` micro-batches, ``p`` pipeline stages, ``v`` virtual stages, ``t_mb`` the time of one
micro-batch on the slowest stage (compute + exposed TP/CP/EP/PP communication), ``t_dp`` the
data-parallel gradient reduction (not overlapped in this first-order model) and ``t_opt`` the
optimizer step (memory-bound: 30 bytes read or written per local parameter for mixed-precision Adam,
fp32 master weights, momentum, variance and gradient read; all three plus bf16 weights written).

Degrees follow Megatron-LM: ``tp x pp x dp x cp = gpus`` with TP ranks innermost, then CP, then DP,
then PP; expert-parallel groups are carved out of ``dp x cp`` (``ep`` divides ``dp x cp``).

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, arXiv:2104.04473.
.. [2] Korthikanti et al., arXiv:2205.05198 (sequence parallelism: all-gather + reduce-scatter
   replace each all-reduce, same volume).
.. [3] Chowdhery et al., PaLM, arXiv:2204.02311, Appendix B (MFU, HFU).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Model, System
from hnplan.comm.collectives import hierarchical_allreduce_time, pairwise_alltoall_time, sendrecv_time
from hnplan.comm.topology import LinkParams, SystemLinks, split_group, system_links
from hnplan.compute import (
    RECOMPUTE_MODES,
    achievable_hbm_Bps,
    param_counts,
    peak_flops_per_s,
    training_flops_per_token,
    training_stage_time_s,
)
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.memory import ZERO_STAGES, training_memory

TRAIN_DTYPES = ("bf16", "fp8")
ADAM_STEP_BYTES_PER_PARAM = 30.0  # 4+4+4+4 read (master, m, v, fp32 grad) + 4+4+4+2 written


@dataclass(frozen=True)
class ParallelPlan:
    """A parallel layout and its knobs."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    microbatch_size: int = 1
    virtual_stages: int = 1
    zero_stage: int = 1
    recompute: str = "none"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp


@dataclass(frozen=True)
class TrainingEstimate:
    """The estimate of one plan. Times in seconds, memory in bytes unless the name says GiB."""

    model: str
    system: str
    gpus: int
    seq_len: int
    global_batch_seqs: int
    dtype: str
    plan: ParallelPlan
    num_microbatches: int
    step_time_s: float
    tokens_per_s: float
    model_flops_per_token: float
    hardware_flops_per_token: float
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    memory_per_gpu_bytes: float
    memory_breakdown_gib: dict
    hbm_bytes: float
    fits: bool
    breakdown_s: dict = field(default_factory=dict)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_seqs * self.seq_len

    def days_to_train(self, tokens: float) -> float:
        """Days to train on ``tokens`` tokens at this step time (no failures) [days]."""
        return units.s_to_days(tokens / self.tokens_per_s)

    def to_dict(self) -> dict:
        """The JSON shape of ``hnplan train --json``."""
        p = self.plan
        return {
            "model": self.model,
            "system": self.system,
            "gpus": self.gpus,
            "seq_len": self.seq_len,
            "global_batch_seqs": self.global_batch_seqs,
            "global_batch_tokens": self.tokens_per_step,
            "dtype": self.dtype,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "model_flops_per_token": self.model_flops_per_token,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "memory_per_gpu_gib": units.to_GiB(self.memory_per_gpu_bytes),
            "memory_breakdown_gib": self.memory_breakdown_gib,
            "hbm_gib": units.to_GiB(self.hbm_bytes),
            "fits": self.fits,
            "parallel": {
                "tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep,
                "microbatch_size": p.microbatch_size, "num_microbatches": self.num_microbatches,
                "virtual_stages": p.virtual_stages, "zero_stage": p.zero_stage, "recompute": p.recompute,
            },
            "breakdown_s": dict(self.breakdown_s),
        }


def _group_allreduce(n_bytes: float, size: int, stride: int, links: SystemLinks) -> float:
    if size <= 1:
        return 0.0
    inner, outer = split_group(size, stride, links.domain_gpus)
    return hierarchical_allreduce_time(n_bytes, inner, outer, links.scaleup.bw_Bps, links.scaleup.alpha_s,
                                       links.scaleout.bw_Bps, links.scaleout.alpha_s)


def _tier(size: int, stride: int, links: SystemLinks) -> LinkParams:
    _, outer = split_group(size, stride, links.domain_gpus)
    return links.scaleup if outer == 1 else links.scaleout


def validate_plan(model: Model, gpus: int, plan: ParallelPlan, global_batch_seqs: int) -> int:
    """Check that a plan divides; return the number of micro-batches.

    Raises
    ------
    InfeasiblePlan
        With a message naming the violated rule: degrees whose product differs from ``gpus``, more
        pipeline stages than layers, a TP degree that does not divide the attention (or KV) heads,
        EP not dividing ``dp x cp`` or the experts, a batch not divisible by ``dp x microbatch``, ...
    InputError
        For an unknown recompute mode or ZeRO stage.
    """
    p = plan
    if p.recompute not in RECOMPUTE_MODES:
        raise InputError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}; got {p.recompute!r}")
    if p.zero_stage not in ZERO_STAGES:
        raise InputError(f"zero stage must be one of 0, 1, 2, 3; got {p.zero_stage!r}")
    for name in ("tp", "pp", "dp", "cp", "ep", "microbatch_size", "virtual_stages"):
        if getattr(p, name) < 1:
            raise InfeasiblePlan(f"{name} must be >= 1, got {getattr(p, name)}")
    if p.gpus != gpus:
        raise InfeasiblePlan(f"tp x pp x dp x cp = {p.tp} x {p.pp} x {p.dp} x {p.cp} = {p.gpus}, not --gpus {gpus}")
    if p.pp * p.virtual_stages > model.layers:
        raise InfeasiblePlan(f"pp x virtual_stages = {p.pp * p.virtual_stages} exceeds the model's {model.layers} layers")
    if model.heads % p.tp:
        raise InfeasiblePlan(f"tp = {p.tp} does not divide the {model.heads} attention heads of {model.id}")
    if (p.dp * p.cp) % p.ep:
        raise InfeasiblePlan(f"ep = {p.ep} must divide dp x cp = {p.dp * p.cp} (expert groups are carved from them)")
    if p.ep > 1 and (model.moe is None or model.moe.experts % p.ep):
        n = "no experts" if model.moe is None else f"{model.moe.experts} experts"
        raise InfeasiblePlan(f"ep = {p.ep} needs a number of experts divisible by it; {model.id} has {n}")
    if global_batch_seqs % (p.dp * p.microbatch_size):
        raise InfeasiblePlan(f"global batch of {global_batch_seqs} sequences is not divisible by "
                             f"dp x microbatch = {p.dp} x {p.microbatch_size}")
    m = global_batch_seqs // (p.dp * p.microbatch_size)
    if p.virtual_stages > 1 and m % p.pp:
        raise InfeasiblePlan(f"interleaved schedule needs micro-batches ({m}) divisible by pp ({p.pp})")
    return m


def estimate_training_step(model, system, gpus: int, plan: ParallelPlan, seq_len: int,
                           global_batch_seqs: int, dtype: str = "bf16",
                           catalog: Catalog | None = None) -> TrainingEstimate:
    """Estimate step time, throughput, MFU/HFU and memory of one training plan.

    Parameters
    ----------
    model, system : id, path or catalog entry
    gpus : int
        Accelerators in the job.
    plan : ParallelPlan
    seq_len : int
        Sequence length [tokens].
    global_batch_seqs : int
        Sequences per optimizer step.
    dtype : {"bf16", "fp8"}
        GEMM dtype; fp8 runs GEMMs at the accelerator's fp8 peak, the rest stays bf16.

    Returns
    -------
    TrainingEstimate

    Raises
    ------
    InfeasiblePlan
        If the plan does not divide (see :func:`validate_plan`).
    InputError
        For an unknown dtype, or fp8 on an accelerator without an fp8 peak.
    CatalogError
        For unknown ids.
    """
    cat = catalog or load_catalog()
    model = cat.model(model)
    system = cat.system(system)
    acc = cat.accelerator(system.accelerator)
    if dtype not in TRAIN_DTYPES:
        raise InputError(f"dtype must be one of {', '.join(TRAIN_DTYPES)}; got {dtype!r}")
    m = validate_plan(model, gpus, plan, global_batch_seqs)
    p = plan
    links = system_links(system, cat)
    act_bytes = units.dtype_bytes("bf16")

    flops = training_flops_per_token(model, seq_len, p.recompute)

    # --- per micro-batch compute on the slowest stage: operator-level roofline (hnplan.compute) ---
    tokens_mb = p.microbatch_size * seq_len
    layers_slowest = math.ceil(model.layers / p.pp)
    t_compute_mb = training_stage_time_s(model, acc, p.microbatch_size, seq_len, tp=p.tp, cp=p.cp, ep=p.ep,
                                         pp=p.pp, dtype=dtype, recompute=p.recompute)

    # --- tensor parallel: 2 all-reduces (or AG + RS with SP) forward, 2 backward per layer ----
    tp_msg = tokens_mb / p.cp * model.hidden * act_bytes
    n_tp = 4 + (2 if p.recompute == "full" else 0)
    t_tp_mb = layers_slowest * n_tp * _group_allreduce(tp_msg, p.tp, 1, links)

    # --- context parallel: ring exchange of K/V, cp-1 steps forward, twice that backward -------
    t_cp_mb = 0.0
    if p.cp > 1:
        kv_dim = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) if model.mla else 2 * model.kv_heads * (model.head_dim or model.hidden // model.heads)
        kv_msg = tokens_mb / p.cp * kv_dim * act_bytes / p.tp
        lk = _tier(p.cp, p.tp, links)
        t_cp_mb = layers_slowest * 3 * (p.cp - 1) * sendrecv_time(kv_msg, lk.bw_Bps, lk.alpha_s)

    # --- expert parallel: dispatch + combine all-to-all, forward and backward ----------------
    t_ep_mb = 0.0
    if p.ep > 1 and model.moe is not None:
        moe_layers_slowest = math.ceil((model.layers - model.moe.first_dense_layers) / p.pp)
        a2a_msg = tokens_mb / (p.tp * p.cp) * model.moe.active_experts * model.hidden * act_bytes
        lk = _tier(p.ep, p.tp, links)
        t_ep_mb = moe_layers_slowest * 4 * pairwise_alltoall_time(a2a_msg, p.ep, lk.bw_Bps, lk.alpha_s)

    # --- pipeline point-to-point: activations forward, gradients backward ----------------------
    t_pp_mb = 0.0
    if p.pp > 1:
        lk = _tier(p.pp, p.tp * p.cp * p.dp, links)
        pp_msg = tokens_mb / (p.cp * p.tp) * model.hidden * act_bytes
        t_pp_mb = 2 * p.virtual_stages * sendrecv_time(pp_msg, lk.bw_Bps, lk.alpha_s)

    t_mb = t_compute_mb + t_tp_mb + t_cp_mb + t_ep_mb + t_pp_mb
    bubble_mb = (p.pp - 1) / p.virtual_stages

    # --- data parallel gradient reduction (all-reduce volume; ZeRO-3 adds parameter gathers) ----
    pc = param_counts(model)
    dense_local = (pc.total - pc.expert_params) / (p.tp * p.pp)
    expert_local = pc.expert_params / (p.tp * p.pp * p.ep)
    grad_bytes = 4.0 if dtype == "bf16" else 2.0  # Megatron-LM reduces bf16 gradients in fp32
    t_dp = _group_allreduce(dense_local * grad_bytes, p.dp * p.cp, p.tp, links)
    if expert_local:
        edp = max(1, p.dp * p.cp // p.ep)
        t_dp += _group_allreduce(expert_local * grad_bytes, edp, p.tp * p.ep, links)
    if p.zero_stage == 3:
        t_dp *= 1.5  # forward and backward parameter all-gathers, each half an all-reduce (ZeRO Sec. 7)

    # --- optimizer step, memory-bound ------------------------------------------------------------
    local = dense_local + expert_local
    shard = (p.dp * p.cp) if p.zero_stage >= 1 else 1
    t_opt = local / shard * ADAM_STEP_BYTES_PER_PARAM / achievable_hbm_Bps(acc)

    step = (m + bubble_mb) * t_mb + t_dp + t_opt
    tokens_per_s = global_batch_seqs * seq_len / step
    peak = peak_flops_per_s(acc, dtype)
    mem = training_memory(model, seq_len, p.microbatch_size, p.tp, p.pp, p.dp, p.cp, p.ep,
                          p.zero_stage, p.recompute, m)
    hbm = units.GB_to_bytes(acc.hbm_gb)
    model_rate = flops.model * tokens_per_s / gpus
    hw_rate = flops.hardware * tokens_per_s / gpus
    breakdown = {
        "compute": m * t_compute_mb,
        "tp_comm_exposed": m * t_tp_mb,
        "cp_comm_exposed": m * t_cp_mb,
        "ep_comm_exposed": m * t_ep_mb,
        "pp_comm_exposed": m * t_pp_mb,
        "pp_bubble": bubble_mb * t_mb,
        "dp_comm_exposed": t_dp,
        "optimizer": t_opt,
    }
    return TrainingEstimate(
        model=model.id, system=system.id, gpus=gpus, seq_len=seq_len, global_batch_seqs=global_batch_seqs,
        dtype=dtype, plan=plan, num_microbatches=m, step_time_s=step, tokens_per_s=tokens_per_s,
        model_flops_per_token=flops.model, hardware_flops_per_token=flops.hardware,
        mfu=model_rate / peak, hfu=hw_rate / peak,
        model_tflops_per_gpu=model_rate / units.TERA, hardware_tflops_per_gpu=hw_rate / units.TERA,
        memory_per_gpu_bytes=mem.total_bytes, memory_breakdown_gib=mem.as_gib(), hbm_bytes=hbm,
        fits=mem.total_bytes <= hbm, breakdown_s=breakdown,
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_plans(model: Model, system: System, gpus: int, global_batch_seqs: int,
                    fixed: dict | None = None):
    """Yield candidate plans (a small first-order space): TP up to the scale-up domain and dividing
    the heads, PP dividing the GPUs up to the layers, micro-batch 1-2, ZeRO 1, recompute modes.

    ``fixed`` pins any :class:`ParallelPlan` field.
    """
    fixed = dict(fixed or {})
    max_tp = min(system.scaleup_domain_gpus, 64)  # TP beyond 64 ranks is not used in published runs
    tps = [fixed["tp"]] if "tp" in fixed else [
        t for t in _divisors(model.heads) if t <= max_tp and gpus % t == 0]
    pps = [fixed["pp"]] if "pp" in fixed else [p for p in _divisors(gpus) if p <= min(model.layers, 128)]
    cps = [fixed.get("cp", 1)]
    eps = [fixed["ep"]] if "ep" in fixed else ([1] if model.moe is None else [e for e in _divisors(model.moe.experts) if e <= 64])
    mbs = [fixed["microbatch_size"]] if "microbatch_size" in fixed else [1, 2]
    recs = [fixed["recompute"]] if "recompute" in fixed else list(RECOMPUTE_MODES)
    zeros = [fixed["zero_stage"]] if "zero_stage" in fixed else [1]
    vss = [fixed.get("virtual_stages", 1)]
    for tp, pp, cp, ep, mb, rc, z, vs in itertools.product(tps, pps, cps, eps, mbs, recs, zeros, vss):
        if gpus % (tp * pp * cp):
            continue
        dp = gpus // (tp * pp * cp)
        if "dp" in fixed and fixed["dp"] != dp:
            continue
        yield ParallelPlan(tp, pp, dp, cp, ep, mb, vs, z, rc)


def best_plan(model, system, gpus: int, seq_len: int, global_batch_seqs: int, dtype: str = "bf16",
              fixed: dict | None = None, catalog: Catalog | None = None, top: int = 1):
    """Evaluate :func:`candidate_plans` and return the fastest plans that fit, best first.

    Returns
    -------
    tuple (list of TrainingEstimate, int searched, int feasible)

    Raises
    ------
    InfeasiblePlan
        If no candidate divides and fits.
    """
    cat = catalog or load_catalog()
    model, system = cat.model(model), cat.system(system)
    feasible, searched = [], 0
    for plan in candidate_plans(model, system, gpus, global_batch_seqs, fixed):
        searched += 1
        try:
            est = estimate_training_step(model, system, gpus, plan, seq_len, global_batch_seqs, dtype, cat)
        except InfeasiblePlan:
            continue
        if est.fits:
            feasible.append(est)
    if not feasible:
        raise InfeasiblePlan(f"no plan of {model.id} on {gpus} x {system.id} divides and fits in memory "
                             f"({searched} candidates searched)")
    feasible.sort(key=lambda e: e.step_time_s)
    return feasible[:top], searched, len(feasible)


def plan_as_dict(plan: ParallelPlan) -> dict:
    """A plan's fields as a plain dict."""
    return asdict(plan)
