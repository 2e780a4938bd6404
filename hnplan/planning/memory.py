"""Memory planner: the answer of ``hnplan memory`` for one plan or replica, and tidy tables over
systems and grids for the memory notebook and :mod:`hnplan.plots.memory`.

It resolves ids through the catalog and calls the memory cost model (:mod:`hnplan.memory`); every
table names its columns' units in ``attrs["units"]`` and the constants its plots need (``parts``,
``statuses``) in ``attrs``, so plots never import the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InputError, check_choice
from hnplan.memory.breakdown import PARTS, MemoryBreakdown
from hnplan.memory.inference import inference_memory, kv_capacity, max_batch
from hnplan.memory.layer_tensors import routing_weight_bytes
from hnplan.memory.states import ACCOUNTINGS
from hnplan.memory.tiers import decode_step_time_s, memory_tiers, spill_plan, tier_latency_s

if TYPE_CHECKING:
    import pandas as pd

# pandas, the training footprint and the training planner are imported by the functions that use them:
# `hnplan memory --help` lists ACCOUNTINGS and PARTS without them (start-up time, benchmarks/bench_startup.py)

MODES = ("train", "inference")
STATUSES = ("fits", "spills", "does-not-fit")

__all__ = [
    "ACCOUNTINGS",
    "MODES",
    "PARTS",
    "STATUSES",
    "breakdown_table",
    "fit_grid",
    "memory_summary",
    "memory_verdict",
    "tiers_frame",
    "training_gradients_note",
]


def _check_degrees(m, mode: str, tp: int, pp: int, ep: int) -> None:
    """Degrees that do not divide the model are an infeasible plan, as in the planners."""
    from hnplan.compute.layout import check_split

    check_split(m, tp, pp if mode == "train" else 1, ep, training=mode == "train")  # PlanRuleError naming the rule


def _gradients_note(held_bytes: float, peak_bytes: float) -> str:
    """What a stack that allocates its gradients in each backward (``grads_in_backward``) counts of them at the
    peak: ``held_bytes`` the step's gradients, ``peak_bytes`` those the peak holds [bytes]."""
    where = (
        "the peak, the backward's start, holds none of them"
        if peak_bytes == 0
        else f"the peak counts {units.to_GiB(peak_bytes):.2f} GiB of them, what they outgrow the "
        "activations by (the backward's end)"
    )
    return (
        f"the step's {units.to_GiB(held_bytes):.2f} GiB of gradients are allocated during its backward as the "
        f"activations are freed (the stack keeps no gradient buffer between steps: grads_in_backward), so {where}"
    )


def training_gradients_note(job, plan) -> str:
    """The gradients note of :func:`memory_summary` for a training planner's job and plan
    (:class:`hnplan.planning.training.ParallelPlan`), as ``hnplan memory`` gives it for the same plan and stack;
    empty where the stack keeps its gradient buffer (the peak counts it whole) or the plan shards it
    (dp > 1 or ZeRO > 0)."""
    if not (job.choices.grads_in_backward and plan.dp == 1 and plan.zero_stage == 0):
        return ""
    d = memory_summary(
        job.model,
        "train",
        job.seq_len,
        tp=plan.tp,
        pp=plan.pp,
        dp=plan.dp,
        ep=plan.ep,
        cp=plan.cp,
        microbatch_size=plan.microbatch_size,
        num_microbatches=job.global_batch_seqs // (plan.dp * plan.microbatch_size),
        virtual_stages=plan.virtual_stages,
        zero=plan.zero_stage,
        recompute=plan.recompute,
        dtype=job.dtype,
        catalog=job.catalog,
        stack=job.stack,
        etp=plan.etp,
    )
    return d.get("gradients_note", "")


def memory_summary(
    model,
    mode: str,
    seq_len: int,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    ep: int = 1,
    cp: int = 1,
    microbatch_size: int = 1,
    num_microbatches: int | None = None,
    virtual_stages: int = 1,
    zero: int | None = 1,
    recompute: str = "none",
    accounting: str | None = None,
    dropout: bool | None = None,
    batch: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    system=None,
    catalog: Catalog | None = None,
    gpu_memory_utilization: float | None = None,
    kv_budget_gib: float | None = None,
    stack=DEFAULT_STACK,
    etp: int | None = None,
) -> dict:
    """Per-GPU memory of a training plan (``mode="train"``) or a serving replica (``"inference"``).

    Sizes are GiB (2**30 bytes) in keys ending ``_gib``: ``params_gib``, ``grads_gib``,
    ``optimizer_gib``, ``activations_gib``, ``kv_cache_gib``, ``overhead_gib``, ``total_gib``. With
    ``system``: ``hbm_gib``, ``fits``, ``status`` (fits / spills / does-not-fit), ``tiers``, ``spill``
    (:meth:`hnplan.memory.SpillPlan.as_dict`) and, for inference, ``kv_capacity`` and ``within_kv_budget`` (whether
    ``batch`` sequences of ``seq_len`` fit the serving engine's KV cache, as ``hnplan infer`` requires; ``status``
    judges the whole HBM). Training under a stack that allocates its gradients in each backward
    (``grads_in_backward``) at dp 1 and ZeRO 0 adds ``gradients_note`` (where they went); one that trains under
    ``torch.autocast`` over fp32 parameters (``autocast_fp32_params``) adds ``weights_note`` (``params_gib`` is then
    autocast's bf16 copies; the fp32 parameters are in ``optimizer_gib`` as master weights).

    ``zero`` None takes 1 (the distributed optimizer) where the stack has that stage, else the stack's lowest
    (``pytorch-eager``: 0), as ``hnplan memory`` does without ``--zero``.

    Training is the training planner's model of the plan (``hnplan train`` with the same plan and
    ``stack``): the footprint of :func:`hnplan.planning.training.components.memory_per_gpu` (the stack's
    bytes per parameter unless ``accounting`` names others, the model's dropout unless ``dropout`` says,
    the stack's attention kernel, sequence parallelism, end-stage split, recomputed modules and pipeline
    schedule), ``dtype`` the training dtype (bf16 or fp8), ``etp`` the expert layers' tensor-parallel degree
    (default ``tp``; 1 keeps each expert whole, :func:`hnplan.memory.states.expert_dp`); with ``system`` the
    plan's step is evaluated
    with ``offload: auto`` and what does not fit moves as the planner moves it
    (:func:`hnplan.memory.tiers.training_offload`, behind that step's compute and optimizer windows):
    ``spill.compute_time_s`` is the step's compute, ``spill.exposed_s`` what ``hnplan train --offload
    auto`` adds to the step. Inference: the compute time is one decode step; ``kv_capacity``
    sized as serving engines size their KV cache: ``gpu_memory_utilization`` of the visible HBM
    (vLLM's; default ``memory.yaml``) or a KV cache of ``kv_budget_gib`` set directly
    (:func:`hnplan.memory.kv_capacity`). ``kv_dtype`` None takes the KV-cache dtype ``hnplan infer``
    serves ``dtype`` with (:func:`hnplan.planning.inference.core.default_kv_dtype`: fp8 for fp8 and fp4
    weights, bf16 otherwise), so both commands size the same replica alike.

    Raises
    ------
    InputError
        For an unknown mode, dtype, accounting, ZeRO stage or recompute mode; CatalogError for ids.
    PlanRuleError
        Training with ``system``: a plan that breaks a training plan rule (an infeasible plan).
    """
    from hnplan.memory.training import nccl_alltoall_scale, training_memory
    from hnplan.planning.training import (
        TRAIN_DTYPES,
        ParallelPlan,
        StackChoices,
        make_job,
        stack_choices,
        validate_plan,
    )
    from hnplan.planning.training.components import memory_recipe
    from hnplan.planning.training.evaluate import plan_row
    from hnplan.planning.training.partial import eager_saved

    check_choice("mode", mode, MODES)
    cat = catalog or load_catalog()
    m = cat.model(model)
    _check_degrees(m, mode, tp, pp, ep)
    if seq_len > m.max_seq:
        raise InputError(f"seq_len {seq_len:,} exceeds {m.id}'s maximum sequence length {m.max_seq:,} (field max_seq)")
    out = {"model": m.id, "mode": mode, "seq_len": seq_len}
    mem: MemoryBreakdown
    if mode == "train":
        check_choice("dtype", dtype, TRAIN_DTYPES)
        st = None if stack is None else (cat.stack(stack) if isinstance(stack, str) else stack)
        ch = StackChoices() if st is None else stack_choices(st)
        if zero is None:  # the distributed optimizer, or the stack's lowest stage where it has none (pytorch-eager: 0)
            stages = (getattr(st, "zero_stages", None) or [1]) if st is not None else [1]
            zero = 1 if 1 in stages else min(stages)
        train_dtype = "fp8" if accounting == "fp8" else dtype
        recipe = memory_recipe(train_dtype, ch) if accounting is None else accounting
        drop = m.dropout if dropout is None else dropout
        m_count = num_microbatches or pp
        tm_args = (m, seq_len, microbatch_size, tp, pp, dp, cp, ep, zero, recompute, m_count)
        tm_kw: dict[str, Any] = dict(
            flash_attention=ch.attention == "flash",
            virtual_stages=virtual_stages,
            recipe=recipe,
            sequence_parallel=ch.sequence_parallel,
            dropout=drop,
            fp8_gemm_inputs=train_dtype in ("fp8", "fp4"),
            catalog=cat,
            balanced=ch.pipeline_balanced_ends,
            recompute_modules=ch.recompute_modules,
            dualpipe=ch.pipeline_schedule == "dualpipe",
            recompute_num_layers=ch.recompute_num_layers,
            offload_layers=ch.cpu_offload_layers,
            zero3_gathered_units=ch.zero3_gathered_units,
            zero_unsharded_grad_bytes=ch.zero_unsharded_grad_bytes,
            zero3_max_live_params=ch.zero3_max_live_params,
            zero_reduce_bucket_params=ch.zero_reduce_bucket_params,
            zero3_shard_ranks=ch.zero3_shard_ranks,
            routing_weight=routing_weight_bytes(ch.moe_router_dtype, ch.ep_dispatcher),
            attention_output_copy=ch.attention_output_copy,
            eager=eager_saved(ch),
            etp=etp,
            # the system's accelerator: its NVLink count sets the all-to-all's NCCL buffers, as in the planner
            alltoall_scale=nccl_alltoall_scale(
                cat.accelerator(cat.system(system).accelerator) if system else None, cat
            ),
        )
        tm = training_memory(*tm_args, **tm_kw, grads_in_backward=ch.grads_in_backward)
        if ch.grads_in_backward and dp == 1 and zero == 0:  # the gradients the peak does not hold, said
            held = training_memory(*tm_args, **tm_kw).grads_bytes
            out["gradients_note"] = _gradients_note(held, tm.grads_bytes)
        if ch.autocast_fp32_params:  # the weights line is autocast's casts; the fp32 parameters sit elsewhere
            out["weights_note"] = (
                f"the {units.to_GiB(tm.params_bytes):.2f} GiB of weights are torch.autocast's bf16 copies of the fp32 "
                "parameters, kept while autograd saves them for the backward"
                + (
                    " (with full recomputation only the LM head's: a recomputed layer casts its weights again)"
                    if recompute == "full" and pp == 1
                    else ""
                )
                + "; the fp32 parameters themselves are counted with the optimizer states (as the fp32 master "
                "weights, beside the Adam moments)"
            )
        out.update(
            parallel=dict(
                tp=tp,
                pp=pp,
                dp=dp,
                cp=cp,
                ep=ep,
                etp=tp if etp is None else etp,
                microbatch_size=microbatch_size,
                num_microbatches=m_count,
                virtual_stages=virtual_stages,
                zero=zero,
                recompute=recompute,
            ),
            accounting=recipe if isinstance(recipe, str) else recipe.name,
            dropout=drop,
            dtype=train_dtype,
            stack=getattr(stack, "id", stack),
            stage=tm.stage,
        )
        mem = tm
    else:
        from hnplan.planning.inference.core import default_kv_dtype

        kv = kv_dtype if kv_dtype is not None else default_kv_dtype(dtype)
        inf = inference_memory(m, batch, seq_len, dtype, kv, tp, ep, overheads=cat.memory_overheads)
        out.update(
            batch=batch,
            dtype=dtype,
            kv_dtype=kv,
            tp=tp,
            ep=ep,
            kv_bytes_per_token=inf.kv_bytes_per_token,
            kv_tokens=inf.tokens,
        )
        mem = inf
    out.update(mem.as_gib())
    if system is None:
        return out
    sys_ = cat.system(system)
    acc = cat.accelerator(sys_.accelerator)
    tiers = memory_tiers(cat.design(sys_))
    if mode == "train":
        # the planner's step of this plan: its compute and optimizer windows, one prefetch per layer
        job = make_job(
            model,
            sys_,
            tp * pp * dp * cp,
            seq_len,
            dp * microbatch_size * m_count,
            train_dtype,
            cat,
            stack=stack,
            overrides={"offload": "auto"},
        )
        p = ParallelPlan(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            microbatch_size=microbatch_size,
            virtual_stages=virtual_stages,
            zero_stage=1 if zero is None else zero,  # resolved above for training
            recompute=recompute,
            etp=etp,
        )
        validate_plan(
            job.model,
            job.gpus,
            p,
            job.global_batch_seqs,
            seq_len,
            balanced_ends=job.choices.pipeline_balanced_ends,
            pipeline_layout=job.choices.pipeline_layout,
            uneven_stages=job.choices.pipeline_uneven_stages,
        )
        row = plan_row(job, p)  # the evaluator's row of the one plan, without a pandas frame
        design = cat.design(sys_)
        plan = spill_plan(
            mem,
            tiers,
            "train",
            compute_time_s=float(row["t_compute_s"]),
            microbatches=m_count,
            prefetches=float(row["offload_prefetches"]),
            window_optimizer_s=float(row["offload_window_optimizer_s"]),
            latency_s={t.name: tier_latency_s(design.system, t.name) for t in tiers},
        )
    else:
        plan = spill_plan(mem, tiers, mode, compute_time_s=decode_step_time_s(mem, acc))
    out.update(
        system=sys_.id,
        accelerator=acc.id,
        hbm_gib=units.to_GiB(tiers[0].capacity_bytes),
        fits=plan.fits,
        status=plan.status,
        tiers=[x.as_dict() for x in tiers],
        spill=plan.as_dict(),
    )
    if mode == "inference":
        budget = None if kv_budget_gib is None else units.GiB_to_bytes(kv_budget_gib)
        cap = kv_capacity(
            m,
            acc,
            dtype,
            kv,
            tp,
            ep,
            utilization=gpu_memory_utilization,
            overheads=cat.memory_overheads,
            kv_budget_bytes=budget,
        )
        most = max_batch(cap, seq_len)
        out["kv_capacity"] = cap.as_dict() | {"max_batch_at_seq_len": most}
        # the serving engine's verdict beside the HBM's: hnplan infer refuses a batch its KV cache does not hold
        out["within_kv_budget"] = batch <= most
    return out


def breakdown_table(model, systems, mode: str = "train", **kw) -> pd.DataFrame:
    """One row per system: the breakdown in GiB, ``hbm_gib``, ``status``, ``spill_time_s`` and
    ``compute_time_s`` [s]. ``kw`` as :func:`memory_summary`. ``attrs``: ``unit`` (``GiB``), ``units``
    (column -> unit), ``parts`` (the breakdown's parts in stacking order)."""
    import pandas as pd

    rows = []
    for s in systems:
        d = memory_summary(model, mode, system=s, **kw)
        rows.append(
            {
                "system": d["system"],
                "accelerator": d["accelerator"],
                **{f"{p}_gib": d[f"{p}_gib"] for p in PARTS},
                "total_gib": d["total_gib"],
                "hbm_gib": d["hbm_gib"],
                "status": d["status"],
                "spill_time_s": d["spill"]["spill_time_s"],
                "compute_time_s": d["spill"]["compute_time_s"],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs.update(
        unit="GiB",
        units={**{f"{p}_gib": "GiB" for p in (*PARTS, "total", "hbm")}, "spill_time_s": "s", "compute_time_s": "s"},
        parts=PARTS,
    )
    return df


def fit_grid(
    model,
    system,
    mode: str = "train",
    gpus: int = 64,
    tps=(1, 2, 4, 8),
    pps=(1, 2, 4, 8),
    batches=(1, 8, 32, 128),
    contexts=(2048, 8192, 32768, 131072),
    **kw,
) -> pd.DataFrame:
    """Status (fits / spills / does-not-fit) over a grid, one row per cell.

    Training: over ``tps x pps`` with ``dp = gpus / (tp x pp)`` (cells that do not divide are left
    out); columns ``tp``, ``pp``, ``dp``. Inference: over ``batches x contexts`` (``seq_len`` is the
    context); columns ``batch``, ``context``. Always ``total_gib``, ``hbm_gib``, ``status``.
    ``attrs``: ``unit``, ``units`` (column -> unit), ``system``, ``mode``, ``statuses`` (in order).
    ``kw`` as :func:`memory_summary` (e.g. ``seq_len`` for training); the grid's own arguments in it
    (``tp``, ``pp``, ``dp`` or ``batch``, ``seq_len``) are ignored.
    """
    import pandas as pd

    rows = []
    drop = ("tp", "pp", "dp") if mode == "train" else ("batch", "seq_len")
    kw = {k: v for k, v in kw.items() if k not in drop}
    if mode == "train":
        for tp in tps:
            for pp in pps:
                if gpus % (tp * pp):
                    continue
                dp = gpus // (tp * pp) // kw.get("cp", 1)
                if dp < 1:
                    continue
                d = memory_summary(model, mode, tp=tp, pp=pp, dp=dp, system=system, **kw)
                rows.append(
                    {
                        "tp": tp,
                        "pp": pp,
                        "dp": dp,
                        "total_gib": d["total_gib"],
                        "hbm_gib": d["hbm_gib"],
                        "status": d["status"],
                    }
                )
    else:
        for b in batches:
            for c in contexts:
                d = memory_summary(model, mode, seq_len=c, batch=b, system=system, **kw)
                rows.append(
                    {
                        "batch": b,
                        "context": c,
                        "total_gib": d["total_gib"],
                        "hbm_gib": d["hbm_gib"],
                        "status": d["status"],
                    }
                )
    df = pd.DataFrame(rows)
    df.attrs.update(
        unit="GiB",
        system=str(system),
        mode=mode,
        statuses=STATUSES,
        units={
            "total_gib": "GiB",
            "hbm_gib": "GiB",
            "tp": "GPUs",
            "pp": "stages",
            "dp": "GPUs",
            "batch": "sequences",
            "context": "tokens",
        },
    )
    return df


def tiers_frame(systems, catalog: Catalog | None = None) -> pd.DataFrame:
    """The memory tiers of each system per GPU: ``system``, ``tier``, ``capacity_gib``, ``bw_GBps``, ``link``."""
    import pandas as pd

    cat = catalog or load_catalog()
    rows = [{"system": s, **t.as_dict()} for s in systems for t in memory_tiers(cat.design(s))]
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"capacity_gib": "GiB", "bw_GBps": "GB/s"}
    return df


def memory_verdict(df: pd.DataFrame) -> str:
    """A few sentences (Markdown) that read a :func:`breakdown_table`: per system, total against HBM
    in GiB and the spill cost per step against the compute time it hides behind."""
    lines = []
    for r in df.itertuples():
        head = f"- **{r.system}**: {r.total_gib:,.1f} GiB per GPU against {r.hbm_gib:,.1f} GiB of HBM"
        if r.status == "fits":
            lines.append(f"{head}: fits, {r.hbm_gib - r.total_gib:,.1f} GiB to spare.")
        elif r.status == "spills":
            hidden = "hidden behind" if r.spill_time_s <= r.compute_time_s else "longer than"
            lines.append(
                f"{head}: spills {r.total_gib - r.hbm_gib:,.1f} GiB; moving it takes "
                f"{r.spill_time_s:.3f} s per step, {hidden} {r.compute_time_s:.3f} s of compute."
            )
        else:
            lines.append(f"{head}: does not fit even after spilling to host memory and NVMe.")
    return "\n".join(lines)
