"""Training memory per accelerator: model states, activations and runtime overheads, worst stage.

References
----------
.. [1] Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054.
.. [2] Korthikanti et al., arXiv:2205.05198 (activations).
.. [3] ``data/memory.yaml``: CUDA context, NCCL buffers and allocator fragmentation, each with its source
   (:mod:`hnplan.memory.overheads`, whose names this module re-exports).
.. [4] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 3.2.1 and Table 2 (DualPipe:
   parameters 2x, activations PP + 1); :mod:`hnplan.memory.recompute`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.loader import Catalog
from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES
from hnplan.errors import PlanRuleError
from hnplan.memory.activations import layer_activation_table, stage_activation_table
from hnplan.memory.breakdown import MemoryBreakdown
from hnplan.memory.layer_tensors import EagerSaved
from hnplan.memory.overheads import (  # noqa: F401  (public names of hnplan.memory.training)
    NCCL_P2P_CHANNELS_PER_NVLINK,
    nccl_alltoall_scale,
    overhead_terms,
    training_overheads,
)
from hnplan.memory.recompute import DEFAULT_MODULES, dualpipe_on
from hnplan.memory.states import STAGES, StateAccounting, model_state_table
from hnplan.memory.zero_working import GATHERED_UNITS, zero_working_bytes
from hnplan.vectorise import Columns, column, is_frame, on_distinct

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class TrainingMemory(MemoryBreakdown):
    """Per-accelerator training memory of the fullest pipeline stage [bytes]; ``stage`` names it
    (``first``, ``middle`` or ``last``; ``first`` when ``pp = 1``)."""

    stage: str = "first"


# the columns :func:`training_memory_table` reads, one row per plan
PLAN_COLUMNS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "microbatch_size",
    "num_microbatches",
    "virtual_stages",
    "zero_stage",
    "recompute",
)
TABLE_PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "overhead_bytes")


def training_memory_table(
    model: Model,
    plans: pd.DataFrame,
    seq_len: int,
    *,
    recipe: str | StateAccounting = "zero-paper",
    flash_attention: bool = True,
    sequence_parallel: bool = True,
    dropout: bool | None = None,
    fp8_gemm_inputs: bool | None = None,
    overheads: bool = True,
    catalog: Catalog | None = None,
    balanced: bool = False,
    cache: dict | None = None,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    dualpipe: bool = False,
    recompute_num_layers: int | None = None,
    offload_layers: int = 0,
    zero3_gathered_units: int = GATHERED_UNITS,
    zero_unsharded_grad_bytes: float | None = None,
    zero3_max_live_params: float | None = None,
    zero_reduce_bucket_params: float | None = None,
    alltoall_scale: float = 1.0,
    zero3_shard_ranks: int | None = None,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
    grads_in_backward: bool = False,
) -> pd.DataFrame:
    """Per-accelerator training memory of the fullest pipeline stage of every plan of a table [bytes]:
    the one training-memory model (:func:`training_memory` is its one-row case).

    For the first, the fullest middle and the last stage (:func:`hnplan.memory.states.end_stage_layer_range`:
    ``ceil(L / pp)`` layers on the first and the middle one, the rest on the last): model states (:func:`hnplan.memory.model_state_bytes_per_gpu`,
    embeddings on the first stage, LM head on the last; once per distinct ``(tp, pp, dp, cp, ep,
    zero)``); the activations of the stage (:func:`hnplan.memory.stage_activation_table`: its
    ``ceil(L / pp)`` layers, the embedding dropout mask on the first stage and the output layer on the
    last, times the micro-batches in flight); runtime
    overheads (:func:`training_overheads`: a fixed part per group layout plus a fraction of the
    tensors; :func:`overhead_terms`). The largest stage total wins (the first on a tie; only the first when
    ``pp = 1``, no middle stage when ``pp = 2``; under DualPipe the first rank holds the first and the last
    stage and a middle rank two middle ones). A dense model's middle stage, without balanced ends or DualPipe,
    never exceeds the first (the same layers without the embedding, no more micro-batches in flight) and is
    not evaluated.

    Parameters
    ----------
    model : Model
    plans : DataFrame
        Columns :data:`PLAN_COLUMNS`, one row per plan (``num_microbatches``: micro-batches per step),
        and optionally ``etp``, the expert tensor-parallel degree (default ``tp``).
    seq_len : int
        [tokens]
    recipe : str or StateAccounting
        Model-state accounting (:data:`hnplan.memory.ACCOUNTINGS`, or a stack's
        :func:`hnplan.memory.states.stack_accounting`).
    flash_attention, sequence_parallel, dropout, fp8_gemm_inputs, overheads, balanced, recompute_modules, dualpipe :
        As :func:`training_memory`.
    recompute_num_layers, offload_layers, zero3_gathered_units, zero_unsharded_grad_bytes, alltoall_scale :
        As :func:`training_memory`.
    zero3_max_live_params, zero_reduce_bucket_params, zero3_shard_ranks, routing_weight : optional
        As :func:`training_memory`.
    eager : EagerSaved, optional
        What the stack's eager code keeps beyond the fused accounting (:class:`hnplan.memory.layer_tensors.EagerSaved`);
        under ``torch.autocast`` over fp32 parameters the weights' bf16 copies (``params_bytes`` of such a stack's
        accounting) live only while autograd saves them, so with full recomputation (``pp`` 1) only the LM head's
        remain: measured on one H200, the Llama 3.2 1B and 3B recomputed peaks sit 1.7 and 5.2 GiB, their layers'
        bf16 copies, under the model that keeps them all (``data/reference/h200_hf_llama_step.csv``).
    grads_in_backward : bool
        The stack keeps no gradient buffer between steps (plain PyTorch with ``zero_grad(set_to_none=True)`` and no
        DDP buckets): at data-parallel degree 1 and ZeRO 0 a step's gradients are allocated during its backward as
        its activations are freed, so its peak is the larger of the backward's start (the activations, no
        gradients) and its end (the gradients): ``grads_bytes`` is the part of the gradients above the activations.
        Measured on one H200: Llama 3.2 1B and 3B peaks 4.6 and 12.0 GiB (their fp32 gradients) under the model
        that counts them (``data/reference/h200_hf_llama_step.csv``).
    cache : dict, optional
        Keeps per-shape activation values across calls for the same model and choices (a planner's
        repeated search; :func:`hnplan.memory.activations.layer_activation_table`).

    Returns
    -------
    DataFrame
        Aligned with ``plans``: :data:`TABLE_PARTS`, ``total_bytes`` [bytes] and ``stage`` (``first``,
        ``middle`` or ``last``, categorical); a :class:`hnplan.vectorise.Columns` for one.

    Raises
    ------
    InputError
        For an unknown ZeRO stage, recompute mode or accounting.
    """
    if fp8_gemm_inputs is None:
        fp8 = recipe == "fp8" or (
            isinstance(recipe, StateAccounting) and recipe.name.startswith(("stack-fp8", "stack-fp4"))
        )
    else:
        fp8 = fp8_gemm_inputs
    df = plans.reset_index(drop=True) if is_frame(plans) else plans
    pp = column(df, "pp")

    def per_layout(u):  # overheads and model states once per distinct (tp, pp, dp, cp, ep, zero)
        if overheads:
            o = list(overhead_terms(*(column(u, k) for k in ("tp", "pp", "dp", "cp", "ep")), catalog, alltoall_scale))
        else:
            o = [np.zeros(len(u)), np.zeros(len(u))]
        degrees = [column(u, k) for k in ("tp", "pp", "dp", "ep", "zero_stage")]
        etp = column(u, "etp") if has_etp else None
        for stage in stages:  # first, (middle,) last
            w, g, opt = model_state_table(
                model, *degrees, recipe, column(u, "cp"), stage, balanced, etp=etp, hsdp_ranks=zero3_shard_ranks
            )
            # ZeRO 2 / 3: the gathered units and their unsharded gradients in flight (hnplan.memory.zero_working)
            gw, gg = zero_working_bytes(
                model, degrees[0], degrees[1], degrees[3], degrees[4], recipe, stage, etp, *zero_working
            )
            o.extend((w + gw, g + gg, opt))
        if dualpipe:  # the last stage on the first rank: its MTP module shares the embedding there
            o.extend(
                model_state_table(
                    model,
                    *degrees,
                    recipe,
                    column(u, "cp"),
                    "last",
                    balanced,
                    False,
                    etp=etp,
                    hsdp_ranks=zero3_shard_ranks,
                )
            )
        return o

    # A dense model's middle stage holds the first stage's layers without its embedding, and no more
    # micro-batches in flight (min(p - 1, m) <= min(p, m); interleaved ((v + 1) p - 3) / v < p + (p - 1) / v):
    # its total never exceeds the first stage's, so it is weighed only where it can be the fullest (an MoE
    # model's later layers, the balanced ends' extra layer, DualPipe's two middle stages).
    middle = model.moe is not None or balanced or dualpipe
    stages = STAGES if middle else tuple(s for s in STAGES if s != "middle")
    dropout = bool(model.dropout) if dropout is None else dropout  # the model's, as hnplan memory reads it
    # ``etp`` (expert tensor parallelism) is optional: without the column it is ``tp`` (Megatron-Core's default)
    has_etp = "etp" in df  # a DataFrame (its columns) or Columns
    zero_working = (zero3_gathered_units, zero_unsharded_grad_bytes, zero3_max_live_params, zero_reduce_bucket_params)
    layout = ["tp", "pp", "dp", "cp", "ep", "zero_stage"] + (["etp"] if has_etp else [])
    o_fixed, o_slope, *states = on_distinct(df, layout, per_layout)
    act_kw = dict(
        sequence_parallel=sequence_parallel,
        flash_attention=flash_attention,
        dropout=dropout,
        fp8_gemm_inputs=fp8,
        recompute_modules=recompute_modules,
        routing_weight=routing_weight,
        attention_output_copy=attention_output_copy,
        eager=eager,
    )
    per_layer = layer_activation_table(model, df, seq_len, cache=cache, **act_kw)
    partial = dict(recompute_num_layers=recompute_num_layers, offload_layers=offload_layers)
    # DualPipe ([4]_): the first rank holds the first and the last stage, two copies' worth of states
    dual = dualpipe_on(pp, column(df, "virtual_stages")) if dualpipe else np.zeros(len(df), dtype=bool)
    best: dict | None = None
    fullest = np.zeros(len(df), dtype=np.int8)  # the fuller stage: codes into STAGES
    for i, stage in enumerate(stages):
        st = dict(zip(TABLE_PARTS[:3], states[3 * i : 3 * i + 3]))
        if dualpipe and stage != "middle":  # the first rank holds the first and the last stage
            st = {k: np.where(dual, states[j] + states[9 + j], st[k]) for j, k in enumerate(TABLE_PARTS[:3])}
        elif dualpipe:  # a middle rank holds two middle stages
            st = {k: np.where(dual, 2 * v, v) for k, v in st.items()}
        st["activations_bytes"] = stage_activation_table(
            model,
            df,
            seq_len,
            "first" if dualpipe and stage == "last" else stage,
            per_layer=per_layer,
            balanced=balanced,
            dualpipe=dualpipe,
            cache=cache,
            **act_kw,
            **partial,
        )
        if dualpipe and stage == "last":  # the last stage alone where DualPipe does not apply
            alone = stage_activation_table(
                model, df, seq_len, "last", per_layer=per_layer, balanced=balanced, cache=cache, **act_kw, **partial
            )
            st["activations_bytes"] = np.where(dual, st["activations_bytes"], alone)
        if eager is not None and eager.fp32_stream:  # autocast's bf16 weight copies live while autograd saves them
            # a fully recomputed layer saves none (its casts are made again in its recompute): the LM head's remains
            full = (np.asarray(column(df, "recompute")) == "full") & (pp == 1)
            head = ACT_BYTES * model.vocab * model.hidden / column(df, "tp")
            st["params_bytes"] = np.where(full, np.minimum(st["params_bytes"], head), st["params_bytes"])
        if grads_in_backward:  # no persistent gradient buffer: the peak is the backward's start or its end
            solo = (column(df, "dp") == 1) & (column(df, "zero_stage") == 0)
            st["grads_bytes"] = np.where(
                solo, np.maximum(st["grads_bytes"] - st["activations_bytes"], 0.0), st["grads_bytes"]
            )
        tensors = st["params_bytes"] + st["grads_bytes"] + st["optimizer_bytes"] + st["activations_bytes"]
        st["overhead_bytes"] = o_fixed + o_slope * tensors
        st["total_bytes"] = tensors + st["overhead_bytes"]
        if best is None:
            best = st
        else:  # the last stage where pp > 1 (not under DualPipe: the first rank holds it); a middle one where pp > 2
            exists = (pp > 2) if stage == "middle" else (pp > 1) & ~dual if dualpipe else pp > 1
            fuller = exists & (st["total_bytes"] > best["total_bytes"])
            fullest[fuller] = STAGES.index(stage)
            best = {k: np.where(fuller, st[k], best[k]) for k in st}
    assert best is not None
    if isinstance(plans, Columns):  # a planner's plain arrays in, plain arrays out
        return Columns(best, {"stage": (fullest, np.array(STAGES, dtype=object))})
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    best["stage"] = pd.Categorical.from_codes(fullest, list(STAGES))
    return pd.DataFrame(best)


def training_memory(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int,
    pp: int,
    dp: int,
    cp: int = 1,
    ep: int = 1,
    zero: int = 1,
    recompute: str = "none",
    num_microbatches: int | None = None,
    flash_attention: bool = True,
    *,
    etp: int | None = None,
    virtual_stages: int = 1,
    recipe: str | StateAccounting = "zero-paper",
    sequence_parallel: bool = True,
    dropout: bool | None = None,
    overheads: bool = True,
    fp8_gemm_inputs: bool | None = None,
    catalog: Catalog | None = None,
    balanced: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    dualpipe: bool = False,
    recompute_num_layers: int | None = None,
    offload_layers: int = 0,
    zero3_gathered_units: int = GATHERED_UNITS,
    zero_unsharded_grad_bytes: float | None = None,
    zero3_max_live_params: float | None = None,
    zero_reduce_bucket_params: float | None = None,
    alltoall_scale: float = 1.0,
    zero3_shard_ranks: int | None = None,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
    grads_in_backward: bool = False,
) -> TrainingMemory:
    """Per-accelerator training memory of the fullest pipeline stage [bytes].

    The one-row case of :func:`training_memory_table` (the model the training planner evaluates over
    its candidates): model states of the stage (:func:`hnplan.memory.model_state_bytes_per_gpu`:
    embeddings on the first stage, LM head on the last) plus its activations (the layers of
    :func:`hnplan.memory.stage_activation_bytes`, micro-batches in flight under 1F1B or the
    interleaved schedule) plus runtime overheads (:func:`training_overheads`); the first and the last
    stage are both evaluated and the larger total is returned.

    Parameters
    ----------
    model : Model
    seq_len : int
        [tokens]
    microbatch : int
        Sequences per micro-batch.
    tp, pp, dp, cp, ep : int
        Parallel degrees (``ep x etp`` divides ``tp x cp x dp``).
    etp : int, optional
        Expert tensor-parallel degree (default ``tp``, Megatron-Core's; ``1`` keeps each expert whole:
        MoE parallel folding, :func:`hnplan.memory.states.expert_dp`).
    zero : {0, 1, 2, 3}
    recompute : {"none", "selective", "full"}
    num_microbatches : int, optional
        Micro-batches per step (limits those in flight); default ``pp``.
    flash_attention, sequence_parallel : bool
    dropout : bool, optional
        Dropout masks kept for the backward (Megatron-LM's attention and hidden dropout); default the model's
        ``dropout`` field (False for the Llama entries), as ``hnplan memory`` and the training planner read it.
    virtual_stages : int
        Model chunks per stage of the interleaved schedule.
    recipe : str or StateAccounting
        Model-state accounting (:data:`hnplan.memory.ACCOUNTINGS` or a stack's).
    balanced : bool
        The embedding and the loss each take one layer's place on the end stages (Llama 3,
        arXiv:2407.21783 Sec. 3.3.2; :func:`hnplan.memory.activations.end_stage_layers`).
    overheads : bool
        Include the runtime overheads (catalog data); ``False`` gives the tensors alone.
    fp8_gemm_inputs : bool, optional
        Save GEMM inputs as fp8 casts; default: when ``recipe == "fp8"``.
    recompute_modules : tuple of str
        What ``recompute="selective"`` re-runs (:data:`hnplan.memory.recompute.RECOMPUTE_MODULES`; default
        the attention core).
    dualpipe : bool
        DeepSeek-V3's DualPipe schedule: where it applies (an even ``pp`` without virtual stages) the first
        rank holds the first and the last stage's model states and ``min(pp, m) + 1`` micro-batches of
        activations ([4]_ Table 2); ``stage`` is then ``first``.
    recompute_num_layers : int, optional
        With ``recompute="full"``, only the first ``N`` layers of each model chunk are recomputed
        (Megatron-Core's block method; :func:`hnplan.memory.recompute.block_recomputed_layers`); default all.
    offload_layers : int
        Layers whose activations go to host memory (with ``pp = 1`` and ``recompute="none"`` only;
        :func:`hnplan.memory.recompute.offload_kept_layers`); default 0.
    zero3_gathered_units : int
        ZeRO 3: units (Transformer layers, the embedding, the head) whose gathered parameters are resident at
        once, counted in ``params`` (:func:`hnplan.memory.zero_working.zero_working_bytes`); default 2.
    zero_unsharded_grad_bytes : float, optional
        ZeRO 2 and 3: bytes per parameter of the largest unit's unsharded gradient buffers alive at once,
        counted in ``grads``; default two units at the accounting's gradient width.
    zero3_shard_ranks : int, optional
        HSDP: ZeRO 3 shards the dense model states over groups of this many data-parallel ranks
        (:func:`hnplan.memory.states.zero_shard_ranks`); default all ``dp x cp``.
    zero3_max_live_params, zero_reduce_bucket_params : float, optional
        DeepSpeed's module-granular ZeRO (``stage3_max_live_parameters``, ``reduce_bucket_size`` [parameters]):
        the gathered weights and the unsharded gradients counted per submodule and bucket in place of the
        units (:func:`hnplan.memory.zero_working.zero_working_bytes`); default None (FSDP's units).
    alltoall_scale : float
        The share of the NCCL all-to-all buffer reading the accelerator allocates (:func:`nccl_alltoall_scale`);
        default 1 (the reading's 8 x H100).
    routing_weight : float
        Bytes of a routed copy's routing weight kept for the backward pass
        (:func:`hnplan.memory.layer_tensors.routing_weight_bytes`); default 2, bf16 (Megatron-Core's default router).

    Returns
    -------
    TrainingMemory

    Raises
    ------
    InputError
        For an unknown ZeRO stage, recompute mode or accounting.
    PlanRuleError
        When ``ep x etp`` does not divide ``tp x cp x dp`` (an :class:`hnplan.errors.InfeasiblePlan`).
    """
    etp = tp if etp is None else etp
    if (tp * cp * dp) % (ep * etp):
        raise PlanRuleError(
            f"expert parallel x expert tensor parallel {ep} x {etp} does not divide tp x cp x dp = {tp * cp * dp}"
        )
    # the one plan as plain one-row columns (the recompute mode as a code, as the planners give it): the table's
    # plain-arrays path, no pandas for one plan
    plan = Columns(
        {
            k: np.array([v])
            for k, v in dict(
                tp=tp,
                pp=pp,
                dp=dp,
                cp=cp,
                ep=ep,
                etp=etp,
                microbatch_size=microbatch,
                num_microbatches=pp if num_microbatches is None else num_microbatches,
                virtual_stages=virtual_stages,
                zero_stage=zero,
            ).items()
        },
        {"recompute": (np.array([0]), np.array([recompute], dtype=object))},
    )
    row = training_memory_table(
        model,
        plan,
        seq_len,
        recipe=recipe,
        flash_attention=flash_attention,
        sequence_parallel=sequence_parallel,
        dropout=dropout,
        fp8_gemm_inputs=fp8_gemm_inputs,
        overheads=overheads,
        catalog=catalog,
        balanced=balanced,
        recompute_modules=recompute_modules,
        dualpipe=dualpipe,
        recompute_num_layers=recompute_num_layers,
        offload_layers=offload_layers,
        zero3_gathered_units=zero3_gathered_units,
        zero_unsharded_grad_bytes=zero_unsharded_grad_bytes,
        zero3_max_live_params=zero3_max_live_params,
        zero_reduce_bucket_params=zero_reduce_bucket_params,
        alltoall_scale=alltoall_scale,
        zero3_shard_ranks=zero3_shard_ranks,
        routing_weight=routing_weight,
        attention_output_copy=attention_output_copy,
        eager=eager,
        grads_in_backward=grads_in_backward,
    )
    params, grads, opt, acts, over = (float(row[k][0]) for k in TABLE_PARTS)
    return TrainingMemory(params, grads, opt, acts, 0.0, over, stage=str(row["stage"][0]))
