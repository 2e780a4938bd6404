"""Components of the training step time, each over numpy arrays of candidate plans.

Every function takes a :class:`Job` (the model, system and batch shared by all candidates) and a
candidate table (columns of :data:`hnplan.planning.training.plan.PLAN_FIELDS` plus
``num_microbatches``) and returns arrays aligned with its rows. Quantities that depend on only a few
distinct shapes (the operator-level compute time of a layer, the activation bytes of a layer, the
model states of a stage) are evaluated once per distinct shape with the cost-model functions of
:mod:`hnplan.compute`, :mod:`hnplan.comm` and :mod:`hnplan.memory` and broadcast back (:func:`memo`).

Step model (Narayanan et al. SC21 [1]_ Sec. 2.2, 3.3):

``step = (m + (p - 1) / v) * t_mb + t_dp_exposed + t_opt``

* ``t_mb``: one micro-batch on the slowest pipeline stage: operator-level compute (forward, backward,
  recomputation) + exposed TP, CP and EP communication + PP point-to-point.
* bubble ``(p - 1) / v`` micro-batch times: 1F1B ``(p - 1) / m`` of the ideal time, interleaved
  with ``v`` model chunks per stage ``(p - 1) / (v m)`` ([1]_ Sec. 2.2.1-2.2.2).
* ``t_dp_exposed``: gradient reduce-scatter (all-reduce without a distributed optimizer) bucketed
  against the backward of the last micro-batch, and the parameter all-gather against the forward of
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

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.catalog.schemas import Accelerator, Model, SoftwareStack, StackChoices, System
from hnplan.comm.messages import random_routing_peak
from hnplan.comm.placement import GroupPlacement, place_group
from hnplan.comm.topology import SystemLinks
from hnplan.compute import ACT_BYTES, param_counts, training_flops_per_token
from hnplan.compute.fp8_recipes import StepKernels, optimizer_step_s, weight_cast_step_s
from hnplan.compute.gemm import with_matmul_efficiency
from hnplan.compute.host import stage_times, sync_s
from hnplan.compute.layout import stage_layers
from hnplan.compute.parts import part_time_table
from hnplan.memory import hbm_capacity_bytes, training_memory_table
from hnplan.memory.states import StateAccounting, stack_accounting
from hnplan.planning.training.partial import block_mix
from hnplan.vectorise import Columns, column, factorize, on_distinct

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
MEGATRON_2021 = StackChoices(dp_grad_reduce=False, dp_param_gather=False, attention="unfused", sequence_parallel=False)


def stack_choices(stack: SoftwareStack) -> StackChoices:
    """The :class:`StackChoices` of a software stack (catalog ``data/stacks/``; the stack inherits its
    choice fields from :class:`StackChoices`)."""
    return StackChoices(**{k: getattr(stack, k) for k in StackChoices.model_fields})


def stack_accelerator(stack: SoftwareStack, acc: Accelerator) -> Accelerator:
    """The accelerator with the stack's in-training ``matmul_efficiency`` where the stack has one for
    it (per dtype; other dtypes and accelerators keep the catalog's micro-benchmark value)."""
    eff = (stack.matmul_efficiency or {}).get(acc.id)
    return with_matmul_efficiency(acc, eff) if eff else acc


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
    #: results a repeated evaluation of the job reuses (collective times, cache keys); not carried over
    #: by ``dataclasses.replace`` (a job with other links or another accelerator starts afresh)
    memo: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    @cached_property
    def params(self):
        return param_counts(self.model)

    def group(self, size: int, stride: int) -> GroupPlacement:
        """The placement of a group of ``size`` ranks spaced ``stride`` apart (cached)."""
        key = (size, stride)
        if key not in self._groups:
            self._groups[key] = place_group(self.catalog.design(self.system), size, stride, self.gpus, self.links)
        return self._groups[key]


def placement_summary(job: Job, tp: int, pp: int, dp: int, cp: int, ep: int) -> dict:
    """Where each parallel group of one plan sits: ``{group: {ranks, per_domain, domains, level, bw_GBps}}``
    for ``tp, cp, ep, dp, pp`` (Megatron order; DP reduces over ``dp x cp``); ``level`` is the smallest
    network level holding the group (``domain``, ``leaf``, ``pod``, ``fabric``) and ``bw_GBps`` the
    per-rank bandwidth of the slowest tier it uses [GB/s, per direction]."""
    out = {}
    for name, size, stride in (
        ("tp", tp, 1),
        ("cp", cp, tp),
        ("ep", ep, tp),
        ("dp", dp * cp, tp),
        ("pp", pp, tp * cp * dp),
    ):
        g = job.group(int(size), int(stride))
        link = g.up if g.domains == 1 else g.out
        out[name] = dict(
            ranks=int(size),
            per_domain=g.per_domain,
            domains=g.domains,
            level=g.level,
            bw_GBps=units.Bps_to_GBps(link.bw_Bps) if size > 1 else 0.0,
        )
    return out


def _col(df, name):
    return column(df, name)


def recompute_is(df: pd.DataFrame | Columns, mode: str) -> np.ndarray:
    """Which plans of a table recompute with ``mode`` [bool array]: from the codes of a categorical
    ``recompute`` column (:func:`hnplan.planning.training.evaluate_plans` keeps one), else by value."""
    if isinstance(df, Columns):
        codes, values = df.codes("recompute")
        hit = np.flatnonzero(values == mode)
        return codes == hit[0] if len(hit) else np.zeros(len(codes), dtype=bool)
    rc = df["recompute"]
    if isinstance(rc.dtype, pd.CategoricalDtype):
        cats = list(rc.cat.categories)
        codes = rc.cat.codes.to_numpy()
        return codes == cats.index(mode) if mode in cats else np.zeros(len(codes), dtype=bool)
    return rc.to_numpy() == mode


# ----------------------------------------------------------------------------------------------
# compute
# ----------------------------------------------------------------------------------------------


def stage_kinds(job: Job, pp):
    """Layers of the first, a middle and the last pipeline stage, split by kind [arrays of counts].

    Stages hold ``ceil(L / pp)`` consecutive layers and the last one the rest
    (:func:`hnplan.compute.layout.stage_layers`); an MoE model's leading dense layers sit on the
    first stage. Returns ``{stage: (dense layers, moe layers)}``.
    """
    L = job.model.layers
    first_dense = L if job.model.moe is None else job.model.moe.first_dense_layers
    pp = np.asarray(pp)
    split = stage_layers(job.model, pp)
    n, last = split.per_stage, np.maximum(split.last, 0)
    d_first = np.minimum(n, first_dense)
    mid_dense = np.clip(first_dense - n, 0, n)  # the second stage's dense layers (worst middle stage)
    d_last = np.where(pp == 1, first_dense, np.clip(first_dense - (L - last), 0, last))
    return {"first": (d_first, n - d_first), "middle": (mid_dense, n - mid_dense), "last": (d_last, last - d_last)}


SHAPE_KEYS = ["microbatch_size", "tp", "cp", "ep"]  # what the operator-level part times depend on


def part_times(job: Job, shapes: pd.DataFrame | Columns, dtype: str) -> Columns:
    """:func:`hnplan.compute.parts.training_part_times` of the job's model, accelerator, sequence and
    stack choices for each row of ``shapes`` (columns :data:`SHAPE_KEYS`), memoised per shape on the
    system's :class:`~hnplan.catalog.design.Design` (:meth:`~hnplan.catalog.design.Design.memo`): a
    repeated search (sizing loops, sweeps) times only the shapes it has not seen. Each shape's row is
    independent of the others, so the result equals one call over ``shapes``.

    Returns
    -------
    Columns
        Aligned with ``shapes``: the columns of :func:`~hnplan.compute.parts.training_part_times` [s].
    """
    ch = job.choices
    if ("part_times_key", dtype) not in job.memo:
        job.memo["part_times_key", dtype] = (
            "training_part_times",
            job.model.model_dump_json(),
            job.acc.model_dump_json(),
            job.seq_len,
            dtype,
            ch,
        )
    cache: dict = job.catalog.design(job.system).memo(job.memo["part_times_key", dtype], dict)
    cols = [column(shapes, k).tolist() for k in SHAPE_KEYS]
    wanted = list(zip(*cols))
    missing = list(dict.fromkeys(s for s in wanted if s not in cache))
    if missing:
        names, new = part_time_table(
            job.model,
            job.acc,
            [(int(b), int(t), int(c), int(e)) for b, t, c, e in missing],
            job.seq_len,
            dtype,
            ch.attention,
            ch.sequence_parallel,
            ch,
        )
        cache.setdefault("columns", names)
        cache.update(zip(missing, new))
    names = cache.get("columns", [])
    table = np.array([cache[s] for s in wanted]).reshape(len(wanted), len(names))
    return Columns({k: table[:, i] for i, k in enumerate(names)})


def busiest_rank_load(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Routed token copies of the busiest expert-parallel rank over the mean, per plan [-]: the stack's
    ``moe_load_imbalance`` (routing that is not random) times the peak random routing leaves with the
    plan's ``T = b s / (cp tp)`` tokens a rank (:func:`hnplan.comm.messages.random_routing_peak`; 1 for a
    dense model or ``ep = 1``)."""
    moe = job.model.moe
    if moe is None:
        return np.ones(len(df))
    tokens = _col(df, "microbatch_size") * job.seq_len / (_col(df, "cp") * _col(df, "tp"))
    peak = random_routing_peak(tokens, moe.active_experts, moe.experts, _col(df, "ep"))
    return job.choices.moe_load_imbalance * peak


def compute_per_microbatch(job: Job, df: pd.DataFrame, per_stage: bool = False):
    """Compute time of one micro-batch on the slowest pipeline stage, with its parts [s].

    Operator-level times per layer, embedding and head (:func:`hnplan.compute.parts.training_part_times`,
    once per distinct ``(micro-batch, tp, cp, ep)``) times the layers of each stage
    (:func:`stage_kinds`); recomputation adds the re-run forward (``full``) or attention core
    (``selective``).

    Returns a frame with ``t_compute_mb`` (forward + backward + recomputation), ``t_fwd_mb``,
    ``t_bwd_mb``, ``attn_per_layer`` (attention core forward + backward + recomputed, one layer) and
    ``layers`` / ``moe_layers`` (of that stage). With ``per_stage``, the array
    ``[stage (first, middle, last), quantity (STAGE_QUANTITIES), candidate]`` instead, for a caller that
    adds each stage's communication before picking the slowest (an MoE model's last stage holds fewer
    MoE layers and their all-to-alls than its compute alone suggests). A model's multi-token-prediction
    modules (``mtp_modules``) sit on the last stage: one more layer and one more pass through the
    output head and loss each. The routed-expert work of an MoE layer (:data:`hnplan.compute.parts.ROUTED_OPS`)
    grows by :func:`busiest_rank_load`: the busiest EP rank sets the pace.
    Every quantity is evaluated once per distinct ``(micro-batch, tp, cp, ep, recompute, pp)`` (and
    ``virtual_stages`` where the stack recomputes only some layers: :mod:`.partial`).
    """
    block = ["virtual_stages"] if job.choices.recompute_num_layers is not None else []  # its share is per chunk
    codes, uniq = factorize(df, [*SHAPE_KEYS, "recompute", "pp", *block])
    stack = _stage_table(job, uniq).take(codes, axis=2)  # [stage, quantity, candidate]
    if per_stage:
        return stack
    slowest = np.argmax(stack[:, 0, :], axis=0)
    pick = stack[slowest, :, np.arange(stack.shape[2])]  # [candidate, quantity]
    return pd.DataFrame(pick, columns=list(STAGE_QUANTITIES))


def _stage_table(job: Job, df: pd.DataFrame) -> np.ndarray:
    """:func:`compute_per_microbatch`'s ``[stage, quantity, plan]`` array for the plans of ``df``."""
    codes, uniq = factorize(df, SHAPE_KEYS)
    lt = _taken(part_times(job, uniq, job.dtype), codes)
    pp = _col(df, "pp")
    full, selective = recompute_is(df, "full"), recompute_is(df, "selective")
    rerun_attn = full | (selective & ("core_attn" in job.choices.recompute_modules))

    extra = busiest_rank_load(job, df) - 1.0  # the busiest EP rank's surplus of routed tokens

    def part(name, lt=lt, full=full):
        fwd = lt(f"{name}_fwd") + np.select([full, selective], [lt(f"{name}_rc_full"), lt(f"{name}_rc_sel")], 0.0)
        bwd = lt(f"{name}_bwd")
        if np.any(extra > 0):
            # routed-expert work (GEMMs at their tokens per expert, permutation) grows with the tokens
            fwd = fwd + extra * (lt(f"{name}_routed_fwd") + np.where(full, lt(f"{name}_routed_rc"), 0))
            bwd = bwd + extra * lt(f"{name}_routed_bwd")
        # the attention core runs again when recomputed: the ring exchange can hide behind that too
        attn = lt(f"{name}_attn") + np.where(rerun_attn, lt(f"{name}_rc_attn"), 0.0)
        return fwd, bwd, attn, lt(f"{name}_wgrad")

    dense, moe, emb, head = part("dense"), part("moe"), part("emb"), part("head")

    def host(name, lt=lt, full=full):  # host time (fwd with recomputation, bwd) of a part [s], hnplan.compute.host
        rc = np.select([full, selective], [lt(f"{name}_host_rc_full"), lt(f"{name}_host_rc_sel")], 0.0)
        return lt(f"{name}_host_fwd") + rc, lt(f"{name}_host_bwd")

    h_dense, h_moe, h_emb, h_head = host("dense"), host("moe"), host("emb"), host("head")
    # an MoE layer's forward (and its full recomputation) runs between device-host syncs
    syncs = job.choices.moe_host_syncs_per_layer * (1.0 + full)
    synced = float(job.choices.moe_host_syncs_per_layer > 0)  # without syncs the MoE forward joins the rest
    g_sync = synced * (moe[0] - np.where(selective & ~full, lt("moe_rc_sel"), 0.0))
    h_sync = synced * (h_moe[0] - np.where(selective & ~full, lt("moe_host_rc_sel"), 0.0))
    ends = _bf16_end_layers(job, uniq, codes, part, dense, moe)  # (first, last): extra (fwd, bwd) of bf16 layers
    mtp = job.model.mtp_modules  # each one more layer and one more output head + loss, on the last stage
    if mtp:
        layer = moe if job.model.moe is not None else dense
        head = tuple(h + (0.0 if i == 2 else mtp * (x + h)) for i, (h, x) in enumerate(zip(head, layer)))
    stages = stage_kinds(job, pp)
    whole = None  # block recomputation: the layers not recomputed, as without recomputation
    if job.choices.recompute_num_layers is not None and np.any(full):
        no = np.zeros_like(full)
        whole = part("dense", full=no), part("moe", full=no), host("dense", full=no), host("moe", full=no)
    layer_parts = (dense, moe, h_dense, h_moe, g_sync, h_sync, syncs)
    cols = []
    for name, (nd, nm) in stages.items():
        dense, moe, h_dense, h_moe, g_sync, h_sync, syncs = block_mix(
            job.choices, df, nd + nm, full, whole, *layer_parts
        )
        fwd = nd * dense[0] + nm * moe[0]
        bwd = nd * dense[1] + nm * moe[1]
        wgrad = nd * dense[3] + nm * moe[3]
        attn = np.where(nm > 0, moe[2], dense[2])
        hf, hb = nd * h_dense[0] + nm * h_moe[0], nd * h_dense[1] + nm * h_moe[1]
        if name == "first":
            fwd, bwd, wgrad = fwd + emb[0], bwd + emb[1], wgrad + emb[3]
            hf, hb = hf + h_emb[0], hb + h_emb[1]
        if name == "last":
            fwd, bwd, wgrad = fwd + head[0], bwd + head[1], wgrad + head[3]
            hf, hb = hf + h_head[0], hb + h_head[1]
        if name == "first":  # pp = 1: the one stage holds the embedding and the head
            fwd = fwd + np.where(pp == 1, head[0], 0.0)
            bwd = bwd + np.where(pp == 1, head[1], 0.0)
            wgrad = wgrad + np.where(pp == 1, head[3], 0.0)
            hf, hb = hf + np.where(pp == 1, h_head[0], 0.0), hb + np.where(pp == 1, h_head[1], 0.0)
        if name == "middle":  # no middle stage below pp = 3: nothing of it (nor its communication) counts
            fwd, bwd, wgrad, hf, hb = (np.where(pp > 2, x, 0.0) for x in (fwd, bwd, wgrad, hf, hb))
            nd, nm = np.where(pp > 2, nd, 0), np.where(pp > 2, nm, 0)
        nm_sync = nm  # the stage's MoE layers (the multi-token-prediction layers below are left out of the host model)
        if ends is not None and name != "middle":  # the first (and with pp = 1 also the last) end layers
            on = pp > 1 if name == "last" else True
            (ff, fb), (lf, lb) = ends
            add_f = (lf if name == "last" else ff + np.where(pp == 1, lf, 0.0)) * on
            add_b = (lb if name == "last" else fb + np.where(pp == 1, lb, 0.0)) * on
            fwd, bwd = fwd + add_f, bwd + add_b
        if mtp and name != "middle":  # the multi-token-prediction layers communicate as the others do
            here = mtp * (np.ones_like(pp) if name == "last" else (pp == 1))
            if name == "last":
                here = here * (pp > 1)
            nd, nm = (nd, nm + here) if job.model.moe is not None else (nd + here, nm)
        # the host in the loop: launches slower than kernels, and the GPU idle after each device-host sync
        fwd, bwd = stage_times(
            fwd, bwd, hf, hb, nm_sync * g_sync, nm_sync * h_sync, nm_sync * syncs, sync_s(job.choices)
        )
        cols.append(np.broadcast_arrays(fwd + bwd, fwd, bwd, attn, nd + nm, nm, wgrad))
    return np.array(cols, dtype=float)  # [stage, quantity, plan]


def _taken(table: Columns, codes: np.ndarray):
    """A column reader of ``table`` broadcast to the candidates (row ``codes[i]`` for candidate ``i``)."""
    return lambda col: table[col][codes]


STAGE_QUANTITIES = ("t_compute_mb", "t_fwd_mb", "t_bwd_mb", "attn_per_layer", "layers", "moe_layers", "t_wgrad_mb")


def _bf16_end_layers(job: Job, uniq, codes, part, dense, moe):
    """Extra time of the layers an fp8 stack keeps in bf16 at each end of the model
    (``fp8_bf16_end_layers``): ``((fwd, bwd) at the first end, (fwd, bwd) at the last end)`` [s], or None."""
    n = job.choices.fp8_bf16_end_layers
    if not n or units.dtype_bytes(job.dtype) >= ACT_BYTES:
        return None
    lt16 = _taken(part_times(job, uniq, "bf16"), codes)
    moe_cfg = job.model.moe
    first_kind = "moe" if moe_cfg is not None and moe_cfg.first_dense_layers == 0 else "dense"
    last_kind = "dense" if moe_cfg is None else "moe"
    fp8 = {"dense": dense, "moe": moe}
    out = []
    for kind in (first_kind, last_kind):
        f16, b16 = part(kind, lt16)[:2]
        out.append((n * (f16 - fp8[kind][0]), n * (b16 - fp8[kind][1])))
    return tuple(out)


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


def local_params(job: Job, df: pd.DataFrame):
    """Parameters on one GPU of the fullest stage: ``(dense, expert)`` [arrays of parameters]."""
    pc = job.params
    tp, pp, ep = _col(df, "tp"), _col(df, "pp"), _col(df, "ep")
    return (pc.total - pc.expert_params) / (tp * pp), pc.expert_params / (tp * pp * ep)


def optimizer_s(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Per-step kernels, memory-bound [s]: the Adam step and the gradient norm of clipping on the local
    (ZeRO >= 1: sharded over ``dp x cp``) parameters (:func:`hnplan.compute.fp8_recipes.optimizer_step_s`),
    and in fp8 training the weight cast a stack caches for the whole step, on the local GEMM weights
    (:func:`hnplan.compute.fp8_recipes.weight_cast_step_s`)."""

    def per_layout(u):  # once per distinct (tp, pp, dp, cp, ep, zero)
        dense, expert = local_params(job, u)
        tp, pp, dp, cp, ep, z = (_col(u, c) for c in ("tp", "pp", "dp", "cp", "ep", "zero_stage"))
        shard_d = np.where(z >= 1, dp * cp, 1)
        shard_e = np.where(z >= 1, np.maximum(dp * cp // ep, 1), 1)
        local = dense / shard_d + expert / shard_e
        t = optimizer_step_s(job.acc, local, ADAM_STEP_BYTES_PER_PARAM, job.choices.grad_reduce_bytes)
        if units.dtype_bytes(job.dtype) < ACT_BYTES:
            pc = job.params
            gemm_dense = pc.layers_total - pc.expert_params - pc.norms_per_layer * (pc.dense_layers + pc.moe_layers)
            fp8_w = gemm_dense / (tp * pp) + pc.expert_params / (tp * pp * ep)
            t = t + weight_cast_step_s(job.acc, StepKernels.of(job.choices), fp8_w)
        return (np.broadcast_to(t, len(tp)),)

    return on_distinct(df, ["tp", "dp", "cp", "ep", "zero_stage", "pp"], per_layout)[0]


# ----------------------------------------------------------------------------------------------
# memory and FLOPs
# ----------------------------------------------------------------------------------------------


def memory_recipe(dtype: str, choices: StackChoices | None = None) -> StateAccounting:
    """Bytes per parameter a stack keeps for a training dtype (:func:`hnplan.memory.states.stack_accounting`
    of its gradient buffer width, fp8 weight fields and optimizer precision; default: hnplan's default stack)."""
    ch = StackChoices() if choices is None else choices
    return stack_accounting(
        dtype,
        ch.grad_reduce_bytes,
        ch.fp8_params,
        ch.fp8_weight_cache,
        ch.precision_aware_optimizer,
        ch.adam_moment_bytes,
        ch.fp8_recipe,
    )


def memory_per_gpu(job: Job, df: pd.DataFrame) -> pd.DataFrame:
    """Training memory per GPU of the fullest pipeline stage of every candidate [bytes], by part:
    :func:`hnplan.memory.training_memory_table` with the bytes per parameter the job's stack keeps
    (:func:`hnplan.memory.states.stack_accounting`: its gradient buffer width, fp8 weights or cached fp8
    copies), the model's dropout, the stack's attention kernel, sequence parallelism, pipeline
    split of the end stages, recomputed modules and pipeline schedule (DualPipe's two parameter copies)
    (the model :func:`hnplan.memory.training_memory` evaluates for one plan).

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
        cache=job.memo.setdefault("memory", {}),
        recompute_num_layers=ch.recompute_num_layers,
        offload_layers=ch.cpu_offload_layers,
    )


def flops_per_token(job: Job, df: pd.DataFrame):
    """Model and hardware training FLOPs per token (by recompute mode; selective re-runs the stack's
    ``recompute_modules``) [arrays of FLOP]."""
    codes, modes = df.codes("recompute") if isinstance(df, Columns) else pd.factorize(df["recompute"])
    f = [training_flops_per_token(job.model, job.seq_len, r, job.choices.recompute_modules) for r in modes]
    return np.array([v.model for v in f], dtype=float)[codes], np.array([v.hardware for v in f], dtype=float)[codes]


def hbm_bytes(acc: Accelerator) -> float:
    """Device memory a program can allocate [bytes] (:func:`hnplan.memory.hbm_capacity_bytes`)."""
    return hbm_capacity_bytes(acc)
