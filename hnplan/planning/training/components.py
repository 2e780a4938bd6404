"""Components of the training step time, each over numpy arrays of candidate plans.

Every function takes a :class:`Job` (the model, system and batch shared by all candidates) and a
candidate table (columns of :data:`hnplan.planning.training.plan.PLAN_FIELDS` plus
``num_microbatches``) and returns arrays aligned with its rows. Quantities that depend on only a few
distinct shapes (the operator-level compute time of a layer, the activation bytes of a layer, the
model states of a stage) are evaluated once per distinct shape with the cost-model functions of
:mod:`hnplan.compute`, :mod:`hnplan.comm` and :mod:`hnplan.memory` and broadcast back
(:func:`hnplan.vectorise.on_distinct`). The compute term ``t_mb`` of each pipeline stage is
:mod:`hnplan.planning.training.stage_compute`'s (:func:`compute_per_microbatch`, re-exported here).

Step model (Narayanan et al. SC21 [1]_ Sec. 2.2, 3.3):

``step = m * t_mb + t_bubble + t_dp_exposed + t_opt``

* ``t_mb``: one micro-batch on the slowest pipeline stage: operator-level compute (forward, backward,
  recomputation) + exposed TP, CP and EP communication + PP point-to-point.
* ``t_bubble``: ``(p - 1) / v`` micro-batch times where the stages are alike: 1F1B ``(p - 1) / m`` of
  the ideal time, interleaved with ``v`` model chunks per stage ``(p - 1) / (v m)`` ([1]_ Sec.
  2.2.1-2.2.2); the fill and drain run through each other stage once a chunk, so each counts its own
  micro-batch time (``t_others / v``, :func:`hnplan.planning.training.slowest.slowest_stage`).
* ``t_dp_exposed``: gradient reduce-scatter (all-reduce without a distributed optimizer) bucketed
  against the backward of the last micro-batch (each model chunk's against the cool-down's later
  backwards under the interleaved schedule), and the parameter all-gather against the forward of
  the first; only what the compute cannot hide, and at least the last bucket (Megatron-Core
  ``--overlap-grad-reduce`` / ``--overlap-param-gather`` [4]_).
* ``t_opt``: per-step kernels, memory-bound: the Adam step (:data:`ADAM_STEP_BYTES_PER_PARAM`) and the
  gradient norm of clipping at the measured fused-AdamW bandwidth, and in fp8 training the weight cast a stack
  caches for the whole step (:func:`optimizer_s`).

References
----------
.. [1] Narayanan et al., SC21, arXiv:2104.04473.
.. [2] Korthikanti et al., arXiv:2205.05198: sequence parallelism replaces each TP all-reduce with a
   reduce-scatter and an all-gather of the same total volume; full recomputation repeats the forward
   collectives.
.. [3] Liu, Zaharia, Abbeel, "Ring Attention with Blockwise Transformers", arXiv:2310.01889: the K/V
   block exchange of each ring step overlaps the attention of the current block.
.. [4] NVIDIA Megatron-Core, ``distributed/distributed_data_parallel_config.py``: ``overlap_grad_reduce``,
   ``overlap_param_gather`` and the default bucket of ``max(40,000,000, 1,000,000 x dp)`` parameters.
.. [5] DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437, Sec. 3.2.1 (DualPipe overlaps the
   expert all-to-all with compute; without it the all-to-all is on the critical path).
.. [6] Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054, Sec. 7 (stage 3: parameters gathered for
   the forward and the backward of every micro-batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.catalog.schemas import Accelerator, Model, SoftwareStack, StackChoices, System
from hnplan.catalog.schemas.software import OverlapComm
from hnplan.comm.placement import GroupPlacement, place_group
from hnplan.comm.topology import SystemLinks
from hnplan.compute import ACT_BYTES, param_counts, training_flops_per_token
from hnplan.compute.clocks import sustained_accelerator
from hnplan.compute.fp8_recipes import StepKernels, optimizer_step_s, weight_cast_step_s
from hnplan.compute.gemm import with_matmul_efficiency
from hnplan.compute.sm_share import sm_share_slowdown
from hnplan.memory import hbm_capacity_bytes, training_memory_table
from hnplan.memory.layer_tensors import routing_weight_bytes
from hnplan.memory.states import StateAccounting, expert_dp, stack_accounting, zero_shard_ranks
from hnplan.memory.training import nccl_alltoall_scale
from hnplan.planning.training.partial import eager_saved
from hnplan.planning.training.stage_compute import (  # noqa: F401  (the compute terms, re-exported here)
    SHAPE_KEYS,
    STAGE_QUANTITIES,
    _stage_table,
    _taken,
    busiest_rank_load,
    compute_per_microbatch,
    content_memo,
    part_times,
    recompute_is,
    stage_kinds,
    with_etp,
)
from hnplan.vectorise import Columns, column, on_distinct

if TYPE_CHECKING:
    import pandas as pd

PARAM_GATHER_BYTES = 2.0  # bf16 parameters all-gathered by the distributed optimizer / ZeRO-3
# Adam step per local parameter: read fp32 master, m, v, gradient (16 B); write master, m, v (12 B)
# and the bf16 weight (2 B) (Rajbhandari et al. 2020 Sec. 3.1 state sizes).
ADAM_STEP_BYTES_PER_PARAM = 30.0
# Megatron-Core DDP default bucket size [parameters] ([4]_): max(BUCKET_MIN, BUCKET_PER_DP x dp).
BUCKET_MIN_PARAMS = 40_000_000
BUCKET_PER_DP_PARAMS = 1_000_000


# Megatron-LM 2021 (SC21): no DP overlap, no distributed optimizer, unfused attention (FlashAttention was
# published in 2022, arXiv:2205.14135) and no sequence parallelism (arXiv:2205.05198, 2022); the same
# choices as the catalog's software stack ``megatron-lm-2021`` (data/stacks/, tested equal)
MEGATRON_2021 = StackChoices(
    dp_grad_reduce=False,
    dp_param_gather=False,
    attention="unfused",
    sequence_parallel=False,
    pipeline_layout=False,
    pipeline_uneven_stages=False,
)


def stack_choices(stack: SoftwareStack) -> StackChoices:
    """The :class:`StackChoices` of a software stack (catalog ``data/stacks/``; the stack inherits its
    choice fields from :class:`StackChoices`)."""
    return StackChoices(**{k: getattr(stack, k) for k in StackChoices.model_fields})


def stack_accelerator(stack: SoftwareStack, acc: Accelerator) -> Accelerator:
    """The accelerator with the stack's in-training ``matmul_efficiency`` where the stack has one for
    it (per dtype; other dtypes and accelerators keep the catalog's micro-benchmark value), and with the
    stack's ``attention_efficiency`` (the attention law's per-pass ceilings of its attention kernel) where
    it has those."""
    eff = (stack.matmul_efficiency or {}).get(acc.id)
    acc = with_matmul_efficiency(acc, eff) if eff else acc
    attn = (stack.attention_efficiency or {}).get(acc.id)
    return acc.model_copy(update={"attention_efficiency": dict(attn)}) if attn else acc


def held_gemm_dtypes(stack: SoftwareStack | None, acc_id: str) -> list[str]:
    """The GEMM dtypes whose efficiency ``stack`` measured in training on accelerator ``acc_id`` (at the
    sustained clock already: :func:`hnplan.compute.clocks.sustained_accelerator` keeps their rate); the
    dtypes of ``matmul_efficiency_short_run`` (a library's GEMM benchmark at boost clock) are not held."""
    if stack is None:
        return []
    short = set(stack.matmul_efficiency_short_run or ())
    return sorted(d for d in (stack.matmul_efficiency or {}).get(acc_id, {}) if d not in short)


@dataclass(frozen=True)
class Job:
    """What every candidate of one search shares: model, system (its accelerator with the stack's
    GEMM efficiency), links, sequence, batch, dtype and the stack's choices; built by
    :func:`hnplan.planning.training.make_job`, which records in ``provenance`` where each choice and
    the GEMM efficiency came from."""

    model: Model
    system: System
    acc: Accelerator
    links: SystemLinks
    gpus: int
    seq_len: int
    global_batch_seqs: int
    dtype: str
    choices: StackChoices
    catalog: Catalog
    stack: SoftwareStack | None = None  # the software stack the job was made with (make_job), if any
    # where each choice and the GEMM efficiency came from: {"matmul_efficiency": ..., "tp_comm": ...}
    provenance: dict[str, str] = field(default_factory=dict, compare=False)
    _groups: dict = field(default_factory=dict, compare=False, repr=False)
    #: what a message calls the job's GPU count: the CLI flag, or a runs file's field (a calibration)
    gpus_name: str = field(default="--gpus", compare=False)
    #: results a repeated evaluation of the job reuses (collective times, cache keys); not carried over
    #: by ``dataclasses.replace`` (a job with other links or another accelerator starts afresh)
    memo: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    @cached_property
    def params(self):
        return param_counts(self.model)

    @cached_property
    def model_json(self) -> str:
        """The model's fields as JSON: part of the key of the per-shape tables every job shares
        (:func:`~hnplan.planning.training.stage_compute.content_memo`)."""
        return self.model.model_dump_json()

    @cached_property
    def kernel_acc_json(self) -> str:
        """:attr:`kernel_acc`'s fields as JSON (as :attr:`model_json`)."""
        return self.kernel_acc.model_dump_json()

    @cached_property
    def kernel_acc(self) -> Accelerator:
        """The accelerator the step's kernels are timed on: at the clock its power limit sustains
        (:func:`hnplan.compute.clocks.sustained_accelerator`); GEMMs of the dtypes whose efficiency the
        stack measured in training keep that rate (it holds the clock already), attention and the other
        compute terms take the fraction; ``acc`` keeps the datasheet peak for MFU."""
        return sustained_accelerator(self.acc, held_gemm_dtypes=held_gemm_dtypes(self.stack, self.acc.id))

    def group(self, size: int, stride: int) -> GroupPlacement:
        """The placement of a group of ``size`` ranks spaced ``stride`` apart (cached)."""
        key = (size, stride)
        if key not in self._groups:
            self._groups[key] = place_group(self.catalog.design(self.system), size, stride, self.gpus, self.links)
        return self._groups[key]


def placement_summary(job: Job, tp: int, pp: int, dp: int, cp: int, ep: int, etp: int | None = None) -> dict:
    """Where each parallel group of one plan sits: ``{group: {ranks, per_domain, domains, level, bw_GBps}}``
    for ``tp, cp, ep, dp, pp`` (Megatron order; DP reduces over ``dp x cp``) and, for an MoE plan
    (``ep > 1``), ``edp``, the routed experts' data-parallel group; ``level`` is the smallest
    network level holding the group (``domain``, ``leaf``, ``pod``, ``fabric``) and ``bw_GBps`` the
    per-rank bandwidth of the slowest tier it uses [GB/s, per direction]; for ``ep`` the all-to-all's rate there
    (the flex dispatcher's ``flex_alltoall_efficiency`` across domains, else the fabric's all-to-all rate).

    The expert layers order the same ranks ETP innermost, then EP, then expert-DP (Megatron-Core's expert
    ``RankGenerator``, order ``tp-ep-dp-pp``; MoE parallel folding, arXiv:2504.14960): the EP group is
    ``ep`` ranks spaced ``etp`` apart (``etp`` default ``tp``; with ``etp = 1`` EP 8 at TP 8 is the 8 ranks
    of one NVLink domain) and expert-DP ``tp cp dp / (etp ep)`` ranks spaced ``etp ep`` apart."""
    etp = tp if etp is None else etp
    out = {}
    groups = [("tp", tp, 1), ("cp", cp, tp), ("ep", ep, etp), ("dp", dp * cp, tp), ("pp", pp, tp * cp * dp)]
    if ep > 1:
        groups.append(("edp", int(expert_dp(tp, dp, cp, ep, etp)), etp * ep))
    for name, size, stride in groups:
        g = job.group(int(size), int(stride))
        link = g.up if g.domains == 1 else g.out
        bw = link.bw_Bps
        if name == "ep":  # the all-to-all's own rate: the flex dispatcher's across domains, else the fabric's
            flex_bw = link.flex_alltoall_bw_Bps if job.choices.ep_dispatcher == "flex" and g.domains > 1 else None
            bw = link.a2a_Bps if flex_bw is None else flex_bw
        out[name] = dict(
            ranks=int(size),
            per_domain=g.per_domain,
            domains=g.domains,
            level=g.level,
            bw_GBps=units.Bps_to_GBps(bw) if size > 1 else 0.0,
        )
    return out


def _col(df, name):
    return column(df, name)


# ----------------------------------------------------------------------------------------------
# communication
# ----------------------------------------------------------------------------------------------

TP_COLLECTIVES_PER_PASS = 2  # per layer: after the attention output and after the MLP (SC21 Sec. 2.3, Fig. 5)


def overlapped_comm(t_comm, t_compute, fraction, slowdown: float):
    """Time a collective adds to a micro-batch when a stack overlaps it with compute [s].

    ``hidden = min(fraction x t_comm, t_compute)`` runs concurrently with the compute, which is
    slowed by ``slowdown`` for that time (the communication kernels take SMs and HBM bandwidth: Transformer
    Engine's userbuffers reserve ``num_sm`` SMs with ``set_sm_margin``; DeepSeek-V3 dedicates 20 of 132
    SMs to its all-to-all, arXiv:2412.19437 Sec. 3.2.2); the rest is exposed:
    ``t_comm - hidden + slowdown x hidden``. No overlap setting makes the cost vanish unless the
    fraction is 1 and the slowdown 0.

    >>> float(overlapped_comm(1.0, 10.0, 0.75, 0.14))   # 0.25 exposed + 0.14 x 0.75 slower GEMMs
    0.355
    >>> float(overlapped_comm(1.0, 0.5, 1.0, 0.0))      # hidden only behind 0.5 s of compute
    0.5
    """
    hidden = np.minimum(fraction * np.asarray(t_comm, dtype=float), t_compute)
    return t_comm - (1.0 - slowdown) * hidden


def overlap_slowdown(job: Job, comm: OverlapComm) -> float:
    """Slowdown of the compute beside an overlapped collective of class ``comm`` (``dp``, ``tp`` or ``ep``)
    [-]: with the class in the choices' ``overlap_comm_ctas`` and the accelerator's SM count known,
    ``compute_units / (compute_units - ctas) - 1`` (:func:`hnplan.compute.sm_share.sm_share_slowdown`: the
    communication CTAs hold that many SMs); otherwise the stack's flat ``overlap_gemm_slowdown``.

    >>> from hnplan.planning.training import make_job
    >>> job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16, overrides=dict(overlap_comm_ctas={"dp": 32}))
    >>> round(overlap_slowdown(job, "dp"), 4), overlap_slowdown(job, "tp")   # 148 / 116 - 1; tp: the flat 0.14
    (0.2759, 0.14)
    """
    ch = job.choices
    ctas, sms = ch.overlap_comm_ctas.get(comm), job.acc.compute_units
    if ctas is None or sms is None:
        return ch.overlap_gemm_slowdown
    return sm_share_slowdown(sms, ctas)


def local_params(job: Job, df: pd.DataFrame):
    """Parameters on one GPU of the fullest stage: ``(dense, expert)`` [arrays of parameters]; routed
    experts split over ``etp x ep`` (:func:`hnplan.memory.states.stage_params`)."""
    pc = job.params
    df = with_etp(df)
    tp, pp, ep, etp = _col(df, "tp"), _col(df, "pp"), _col(df, "ep"), _col(df, "etp")
    return (pc.total - pc.expert_params) / (tp * pp), pc.expert_params / (etp * pp * ep)


def optimizer_s(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Per-step kernels, memory-bound [s]: the Adam step and the gradient norm of clipping on the local
    (ZeRO >= 1: sharded over ``dp x cp``, under HSDP at ZeRO 3 over the shard group
    (:func:`hnplan.memory.states.zero_shard_ranks`), routed experts over their ``tp cp dp / (etp ep)`` replicas)
    parameters (:func:`hnplan.compute.fp8_recipes.optimizer_step_s`),
    and in fp8 training the weight cast a stack caches for the whole step, on the local GEMM weights
    (:func:`hnplan.compute.fp8_recipes.weight_cast_step_s`)."""

    def per_layout(u):  # once per distinct (tp, pp, dp, cp, ep, etp, zero)
        dense, expert = local_params(job, u)
        tp, pp, dp, cp, ep, z, etp = (_col(u, c) for c in ("tp", "pp", "dp", "cp", "ep", "zero_stage", "etp"))
        shard_d = np.where(z >= 1, zero_shard_ranks(dp * cp, z, job.choices.zero3_shard_ranks), 1)
        shard_e = np.where(z >= 1, expert_dp(tp, dp, cp, ep, etp), 1)
        local = dense / shard_d + expert / shard_e
        t = optimizer_step_s(job.acc, local, ADAM_STEP_BYTES_PER_PARAM, job.choices.grad_reduce_bytes)
        if units.dtype_bytes(job.dtype) < ACT_BYTES:
            pc = job.params
            gemm_dense = pc.layers_total - pc.expert_params - pc.norms_per_layer * (pc.dense_layers + pc.moe_layers)
            fp8_w = gemm_dense / (tp * pp) + pc.expert_params / (etp * pp * ep)
            t = t + weight_cast_step_s(job.acc, StepKernels.of(job.choices, job.dtype), fp8_w)
        return (np.broadcast_to(t, len(tp)),)

    return on_distinct(with_etp(df), ["tp", "dp", "cp", "ep", "zero_stage", "pp", "etp"], per_layout)[0]


# ----------------------------------------------------------------------------------------------
# memory and FLOPs
# ----------------------------------------------------------------------------------------------


def memory_recipe(dtype: str, choices: StackChoices | None = None) -> StateAccounting:
    """Bytes per parameter a stack keeps for a training dtype (:func:`hnplan.memory.states.stack_accounting`
    of its gradient buffer width, fp8 weight fields, fp4 parameters and optimizer precision; default: hnplan's
    default stack)."""
    ch = StackChoices() if choices is None else choices
    return stack_accounting(
        dtype,
        ch.grad_reduce_bytes,
        ch.fp8_params,
        ch.fp8_weight_cache,
        ch.precision_aware_optimizer,
        ch.adam_moment_bytes,
        ch.fp8_recipe,
        ch.distributed_optimizer,
        fp4_params=ch.fp4_params,
        bf16_end_layers=ch.fp8_bf16_end_layers,
        keep_fp8_transpose_cache=ch.keep_fp8_transpose_cache,
        zero3_fp8_params=ch.zero3_fp8_params,
    )


def memory_per_gpu(job: Job, df: pd.DataFrame) -> pd.DataFrame:
    """Training memory per GPU of the fullest pipeline stage of every candidate [bytes], by part:
    :func:`hnplan.memory.training_memory_table` with the bytes per parameter the job's stack keeps
    (:func:`hnplan.memory.states.stack_accounting`: its gradient buffer width, fp8 weights or cached fp8
    copies), the model's dropout, the stack's attention kernel, sequence parallelism, pipeline
    split of the end stages, recomputed modules, pipeline schedule (DualPipe's two parameter copies) and router
    dtype and dispatcher (the routing weights' width, :func:`hnplan.memory.layer_tensors.routing_weight_bytes`)
    and what its eager code keeps (:func:`eager_saved`) (the model :func:`hnplan.memory.training_memory` evaluates
    for one plan).

    Returns
    -------
    DataFrame or Columns (as ``df``)
        ``params_bytes, grads_bytes, optimizer_bytes, activations_bytes, overhead_bytes, total_bytes``.
    """
    ch = job.choices
    return training_memory_table(
        job.model,
        df,
        job.seq_len,
        recipe=memory_recipe(job.dtype, ch),
        flash_attention=ch.attention == "flash",
        dropout=job.model.dropout,
        sequence_parallel=ch.sequence_parallel,
        catalog=job.catalog,
        balanced=ch.pipeline_balanced_ends,
        recompute_modules=ch.recompute_modules,
        dualpipe=ch.pipeline_schedule == "dualpipe",
        cache=memory_cache(job),
        recompute_num_layers=ch.recompute_num_layers,
        offload_layers=ch.cpu_offload_layers,
        zero3_gathered_units=ch.zero3_gathered_units,
        zero_unsharded_grad_bytes=ch.zero_unsharded_grad_bytes,
        zero3_max_live_params=ch.zero3_max_live_params,
        zero_reduce_bucket_params=ch.zero_reduce_bucket_params,
        alltoall_scale=nccl_alltoall_scale(job.acc, job.catalog),
        zero3_shard_ranks=ch.zero3_shard_ranks,
        routing_weight=routing_weight_bytes(ch.moe_router_dtype, ch.ep_dispatcher),
        attention_output_copy=ch.attention_output_copy,
        eager=eager_saved(ch),
        grads_in_backward=ch.grads_in_backward,
    )


def memory_cache(job: Job) -> dict:
    """The per-shape activation bytes of the job's model (the ``cache`` of
    :func:`hnplan.memory.training_memory_table`: one model's, keyed inside by the sequence and the flags),
    shared by every job of the process with the same model (:func:`content_memo`)."""
    return content_memo(("memory", job.model_json))


def flops_per_token(job: Job, df: pd.DataFrame):
    """Model and hardware training FLOPs per token (by recompute mode; selective re-runs the stack's
    ``recompute_modules``) [arrays of FLOP]."""
    if isinstance(df, Columns):
        codes, modes = df.codes("recompute")
    else:
        import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

        codes, modes = pd.factorize(df["recompute"])
    f = [training_flops_per_token(job.model, job.seq_len, r, job.choices.recompute_modules) for r in modes]
    return np.array([v.model for v in f], dtype=float).take(codes), np.array([v.hardware for v in f], dtype=float).take(
        codes
    )


def hbm_bytes(acc: Accelerator) -> float:
    """Device memory a program can allocate [bytes] (:func:`hnplan.memory.hbm_capacity_bytes`)."""
    return hbm_capacity_bytes(acc)
