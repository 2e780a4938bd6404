"""The vectorised evaluator of training plans and the one-plan estimate (the job they take:
:mod:`hnplan.planning.training.job`; the search built on them: :mod:`hnplan.planning.training.search`)."""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.compute import RECOMPUTE_MODES, peak_flops_per_s
from hnplan.planning.training import collectives as coll
from hnplan.planning.training import components as c
from hnplan.planning.training import dp_collectives, moe, partial
from hnplan.planning.training.candidates import recompute_codes
from hnplan.planning.training.job import make_job, resolve_choices  # noqa: F401  (the job is assembled there)
from hnplan.planning.training.offload import apply_offload
from hnplan.planning.training.plan import (
    PLAN_FIELDS,
    ParallelPlan,
    TrainingEstimate,
    validate_plan,
)
from hnplan.planning.training.slowest import slowest_stage
from hnplan.vectorise import Columns, frame_of, on_distinct

if TYPE_CHECKING:
    import pandas as pd

BREAKDOWN = (
    "compute",
    "tp_comm_exposed",
    "cp_comm_exposed",
    "ep_comm_exposed",
    "pp_comm_exposed",
    "pp_bubble",
    "dp_comm_exposed",
    "optimizer",
    "offload_exposed",
)
MEMORY_PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "overhead_bytes")
UNITS = {
    "step_time_s": "s",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction",
    "hfu": "fraction",
    "model_tflops_per_gpu": "TFLOP/s",
    "hardware_tflops_per_gpu": "TFLOP/s",
    "memory_per_gpu_gib": "GiB",
    "memory_per_gpu_bytes": "bytes",
    "model_flops_per_token": "FLOP/token",
    "hardware_flops_per_token": "FLOP/token",
    "offload_transfer_s": "s",
    **{f"t_{k}_s": "s" for k in BREAKDOWN},
    **dict.fromkeys(MEMORY_PARTS, "bytes"),
    **dict.fromkeys(("offloaded_bytes", "offload_host_bytes", "offload_pooled_bytes"), "bytes"),
}


@functools.cache
def _arrow_modes():
    """The recompute modes as an Arrow set (:func:`_mode_codes`)."""
    import pyarrow as pa

    return pa.array(RECOMPUTE_MODES, pa.large_string())


def evaluate_plans(job: c.Job, candidates: pd.DataFrame) -> pd.DataFrame:
    """Step time, throughput, MFU/HFU and memory of every candidate plan, vectorised.

    Parameters
    ----------
    job : Job
        From :func:`make_job`.
    candidates : DataFrame
        Columns :data:`PLAN_FIELDS` (e.g. from :func:`candidate_frame`); the rows must obey the
        plan rules (:func:`hnplan.planning.training.plan.valid_mask`).

    Returns
    -------
    pandas.DataFrame
        The candidates plus ``num_microbatches``; the step-time parts ``t_<part>_s`` for
        :data:`BREAKDOWN` [s] (summing to ``step_time_s``); ``step_time_s`` [s], ``tokens_per_s``,
        ``model_flops_per_token`` / ``hardware_flops_per_token`` [FLOP], ``mfu``, ``hfu`` (of the
        dtype's dense peak), ``model_tflops_per_gpu``, ``hardware_tflops_per_gpu`` [TFLOP/s],
        memory parts :data:`MEMORY_PARTS` and ``memory_per_gpu_bytes`` [bytes], ``fits``.
        ``df.attrs["units"]`` names the units.

    Notes
    -----
    ``step = m t_mb + t_others / v + t_dp + t_opt + t_offload`` (``t_others``: the other stages'
    micro-batch times, ``(p - 1) t_mb`` where they are alike) with the components of
    :mod:`hnplan.planning.training.components` and the exposed offload transfers of
    :mod:`hnplan.planning.training.offload` (0 unless the stack choice ``offload`` is ``auto``).
    """
    cols, plans = _plan_columns(job, candidates)
    if not len(plans):
        import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

        return pd.DataFrame(cols)
    cols = evaluate_columns(job, cols, plans)
    df = frame_of(cols, len(plans))
    df.attrs["units"] = UNITS
    return df


def plan_table(job: c.Job, candidates: pd.DataFrame) -> tuple[dict, Columns]:
    """The candidates as :func:`evaluate_columns` reads them: the output columns of the plan and the plan
    table the cost models read (built once by a caller that evaluates the same candidates many times)."""
    return _plan_columns(job, candidates)


def plan_columns(job: c.Job, cols: dict, modes) -> tuple[dict, Columns]:
    """:func:`plan_table` of candidates given as plain arrays, without pandas: ``cols`` holds
    :data:`PLAN_FIELDS` as arrays with ``recompute`` as codes into ``modes`` (as
    :func:`~hnplan.planning.training.candidates.candidate_columns` gives them, checked modes of
    :data:`~hnplan.compute.RECOMPUTE_MODES`); the output's ``recompute`` column is an object array of the mode
    names."""
    at = np.array([RECOMPUTE_MODES.index(str(m)) for m in modes], dtype=np.int64)  # codes as _mode_codes gives
    codes = at[np.asarray(cols["recompute"], dtype=np.int64)]
    names = np.asarray(RECOMPUTE_MODES, dtype=object)
    out: dict = {k: names[codes] if k == "recompute" else np.array(cols[k], copy=True) for k in PLAN_FIELDS}
    out["num_microbatches"] = job.global_batch_seqs // (out["dp"] * out["microbatch_size"])
    plans = Columns({k: x for k, x in out.items() if k != "recompute"}, {"recompute": (codes, names)})
    return out, plans


def evaluate_columns(job: c.Job, cols: dict, plans: Columns, memory=None) -> dict:
    """The columns of :func:`evaluate_plans` as plain arrays (or scalars for a column equal in every
    row), without building the DataFrame: for a caller that reads a few numbers of many evaluations
    (a calibration's trials).

    Parameters
    ----------
    job : Job
    cols, plans : dict, Columns
        :func:`plan_table` of the candidates (not modified: a repeated evaluation may pass the same ones).
    memory : Columns, optional
        :func:`~hnplan.planning.training.components.memory_per_gpu` of these plans and this job, when the
        caller has it (it depends on the model, the plans, the dtype and the stack choices, not on the GEMM
        efficiencies or the links a calibration's trials change; not modified); computed here otherwise.

    Returns
    -------
    dict of str to array or scalar
        The columns of :func:`evaluate_plans`, in its order.
    """
    cols = dict(cols)
    m = np.asarray(cols["num_microbatches"], dtype=float)  # cast once: each product below would cast it again
    ch = job.choices
    t_pp = coll.pp_comm_per_microbatch(job, plans)
    if job.model.moe is None:  # no expert all-to-all to hide
        ep_share = (np.zeros(len(plans)),) * 3
    else:  # once per distinct (pp, micro-batches, virtual stages); the first, middle and last stage's warm-up
        frac = moe.ep_overlap_fraction(job, plans)  # inside one domain or across the scale-out network
        ep_share = tuple(
            frac * share
            for share in on_distinct(
                plans,
                ["pp", "num_microbatches", "virtual_stages"],
                lambda u: tuple(moe.ep_overlap_share(u, u["num_microbatches"], s) for s in ("first", "middle", "last")),
            )
        )
    pick = slowest_stage(job, plans, t_pp, ep_share)
    t_mb, t_comp, t_tp, t_cp, t_ep, t_fwd_mb, t_bwd_mb, t_wgrad_mb, stage_layers, t_others = pick
    full = c.recompute_is(plans, "full")
    comp = dict(layers=stage_layers, t_bwd_mb=t_bwd_mb)  # the slowest stage, for the offload model
    pp, v = plans["pp"], plans["virtual_stages"]
    bubble = t_others / v  # the fill and drain through the other stages, (pp - 1) / v t_mb where they are alike
    if ch.pipeline_schedule == "dualpipe":  # arXiv:2412.19437 Table 2: (PP/2 - 1)(F&B + B - 3W)
        dual = np.maximum(pp / 2 - 1, 0) * np.maximum(t_mb + t_bwd_mb - 3 * t_wgrad_mb, 0.0)
        bubble = np.where((pp % 2 == 0) & (v == 1), dual, bubble)
    t_dp = dp_collectives.dp_comm_exposed(job, plans, t_fwd_mb, t_bwd_mb, t_comp)
    t_opt = c.optimizer_s(job, plans)
    parts = dict(
        compute=m * t_comp,
        tp_comm_exposed=m * t_tp,
        cp_comm_exposed=m * t_cp,
        ep_comm_exposed=m * t_ep,
        pp_comm_exposed=m * t_pp,
        pp_bubble=bubble,
        dp_comm_exposed=t_dp,
        optimizer=t_opt,
    )
    mem = c.memory_per_gpu(job, plans) if memory is None else memory
    cols.update({f"t_{k}_s": parts[k] for k in BREAKDOWN[:-1]})
    cols.update({k: mem[k] for k in MEMORY_PARTS})
    cols["memory_per_gpu_bytes"] = mem["total_bytes"]
    cols["fits"] = cols["memory_per_gpu_bytes"] <= c.hbm_bytes(job.acc)
    apply_offload(job, cols, comp)  # t_offload_exposed_s; offloaded plans that now fit (stack choice offload)
    if ch.cpu_offload_layers:  # activation offloading of some layers (stack choice cpu_offload_layers)
        memo = c.memory_cache(job)
        t_act, host = partial.activation_offload(job, plans, stage_layers, t_fwd_mb, t_bwd_mb, memo)
        cols["t_offload_exposed_s"] = cols["t_offload_exposed_s"] + m * t_act
        cols["fits"] = cols["fits"] & (host <= partial.host_bytes_per_gpu(job))
    step = sum(np.asarray(cols[f"t_{k}_s"]) for k in BREAKDOWN)
    tokens_per_s = job.global_batch_seqs * job.seq_len / step
    model_f, hw_f = c.flops_per_token(job, plans)
    hw_f = partial.block_hardware_flops(job, plans, hw_f, full)
    peak = peak_flops_per_s(job.acc, job.dtype)
    model_rate, hw_rate = model_f * tokens_per_s / job.gpus, hw_f * tokens_per_s / job.gpus  # [FLOP/s per GPU]
    cols.update(
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        model_flops_per_token=model_f,
        hardware_flops_per_token=hw_f,
        mfu=model_rate / peak,
        hfu=hw_rate / peak,
        model_tflops_per_gpu=model_rate / units.TERA,
        hardware_tflops_per_gpu=hw_rate / units.TERA,
    )
    return cols


def _plan_columns(job: c.Job, candidates: pd.DataFrame) -> tuple[dict, Columns]:
    """The output columns of the plan (:data:`PLAN_FIELDS`, ``recompute`` as strings, and
    ``num_microbatches``) and the plan table the cost models read (the recompute mode as codes)."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    cols: dict = {}
    for k in PLAN_FIELDS:
        if k == "etp" and k not in candidates:  # a table without it: Megatron-Core's default, etp = tp
            cols[k] = candidates["tp"].to_numpy(copy=True)
        else:
            cols[k] = candidates[k].astype(str).array if k == "recompute" else candidates[k].to_numpy(copy=True)
    rc = candidates["recompute"]
    if isinstance(rc.dtype, pd.CategoricalDtype):
        codes, modes = rc.cat.codes.to_numpy(), np.asarray(rc.cat.categories, dtype=object)
    else:
        codes, modes = _mode_codes(rc)
    cols["num_microbatches"] = job.global_batch_seqs // (cols["dp"] * cols["microbatch_size"])
    plans = Columns({k: x for k, x in cols.items() if k != "recompute"}, {"recompute": (codes, modes)})
    return cols, plans


def _mode_codes(rc: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes of a recompute column and the modes they index: into :data:`hnplan.compute.RECOMPUTE_MODES`, those
    :func:`candidate_frame` kept for the very Arrow array it built
    (:func:`~hnplan.planning.training.candidates.recompute_codes`), else by pyarrow's ``index_in`` for an
    Arrow-backed string column of known modes (pandas' default string dtype), else by :func:`pandas.factorize`
    (an unknown mode is reported by the cost models)."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas
    import pyarrow as pa
    import pyarrow.compute as pc

    if hasattr(rc.array, "__arrow_array__"):
        known = recompute_codes(rc.array.__arrow_array__())  # the column candidate_frame built: its codes
        if known is not None:
            return known, np.asarray(RECOMPUTE_MODES, dtype=object)
        try:
            at = pc.index_in(rc.array.__arrow_array__(), value_set=_arrow_modes())
        except (pa.ArrowException, TypeError):  # not strings: pandas' codes (the cost models name the error)
            at = None
        if at is not None and at.null_count == 0:
            return np.asarray(at), np.asarray(RECOMPUTE_MODES, dtype=object)
    codes, modes = pd.factorize(rc, sort=False)
    return codes, np.asarray(modes, dtype=object)


def full_column(values, n: int, dtype) -> np.ndarray:
    """A column of :func:`evaluate_columns` (an array, or a scalar for a column equal in every row) as ``n``
    values of ``dtype``, as the frame of :func:`evaluate_plans` holds it."""
    return np.broadcast_to(np.asarray(values, dtype=dtype), (n,))


def column_row(cols: dict, i: int) -> dict:
    """Row ``i`` of the columns of :func:`evaluate_columns` as ``{column: value}`` (a scalar column's value in
    every row): what :func:`estimate_from_row` reads, without a frame."""
    return {k: v[i] if np.ndim(v) else v for k, v in cols.items()}


def estimate_from_row(job: c.Job, row) -> TrainingEstimate:
    """A :class:`TrainingEstimate` from one row of :func:`evaluate_plans` (a Series, or a dict of
    :func:`column_row`)."""
    plan = ParallelPlan(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        dp=int(row["dp"]),
        cp=int(row["cp"]),
        ep=int(row["ep"]),
        microbatch_size=int(row["microbatch_size"]),
        virtual_stages=int(row["virtual_stages"]),
        zero_stage=int(row["zero_stage"]),
        recompute=str(row["recompute"]),
        etp=int(row["etp"]) if "etp" in row else None,
    )
    mem = {k.replace("_bytes", "_gib"): units.to_GiB(float(row[k])) for k in MEMORY_PARTS}
    mem["total_gib"] = units.to_GiB(float(row["memory_per_gpu_bytes"]))
    for k in ("offload_host_bytes", "offload_pooled_bytes"):  # parts of the footprint moved off HBM
        if float(row.get(k, 0.0)) > 0:
            mem[k.replace("_bytes", "_gib")] = units.to_GiB(float(row[k]))
    return TrainingEstimate(
        model=job.model.id,
        system=job.system.id,
        gpus=job.gpus,
        seq_len=job.seq_len,
        global_batch_seqs=job.global_batch_seqs,
        dtype=job.dtype,
        plan=plan,
        num_microbatches=int(row["num_microbatches"]),
        step_time_s=float(row["step_time_s"]),
        tokens_per_s=float(row["tokens_per_s"]),
        model_flops_per_token=float(row["model_flops_per_token"]),
        hardware_flops_per_token=float(row["hardware_flops_per_token"]),
        mfu=float(row["mfu"]),
        hfu=float(row["hfu"]),
        model_tflops_per_gpu=float(row["model_tflops_per_gpu"]),
        hardware_tflops_per_gpu=float(row["hardware_tflops_per_gpu"]),
        memory_per_gpu_bytes=float(row["memory_per_gpu_bytes"]),
        memory_breakdown_gib=mem,
        hbm_bytes=c.hbm_bytes(job.acc),
        fits=bool(row["fits"]),
        breakdown_s={k: float(row[f"t_{k}_s"]) for k in BREAKDOWN},
        placement=c.placement_summary(job, plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, plan.etp),
    )


def estimate_plan(job: c.Job, plan: ParallelPlan) -> TrainingEstimate:
    """The estimate of one plan of a job (:func:`make_job`): the one-row case of :func:`evaluate_plans`.

    Raises
    ------
    PlanRuleError
        If the plan breaks a rule (:func:`validate_plan` names it; an :class:`InfeasiblePlan`).
    InputError
        For an unknown recompute mode or ZeRO stage.
    """
    validate_plan(
        job.model,
        job.gpus,
        plan,
        job.global_batch_seqs,
        job.seq_len,
        balanced_ends=job.choices.pipeline_balanced_ends,
        pipeline_layout=job.choices.pipeline_layout,
        uneven_stages=job.choices.pipeline_uneven_stages,
    )
    return estimate_from_row(job, plan_row(job, plan))


def plan_row(job: c.Job, plan: ParallelPlan) -> dict:
    """The row of :func:`evaluate_plans` for one plan (that obeys the plan rules), ``{column: value}``, from plain
    one-row columns (:func:`plan_columns`, :func:`evaluate_columns`): the same numbers as the frame's row, without
    importing pandas for one plan (a fully given ``hnplan train``, ``hnplan memory --system``)."""
    fields = asdict(plan)
    cols = {k: np.array([0 if k == "recompute" else fields[k]]) for k in PLAN_FIELDS}
    out, plans = plan_columns(job, cols, [plan.recompute])
    return column_row(evaluate_columns(job, out, plans), 0)
