"""The search over a job's candidate plans, built on the vectorised evaluator
(:mod:`hnplan.planning.training.evaluate`): :func:`rank_plans` ranks every candidate, :func:`search_best`
returns the fastest that fit (through the compute-only bound of :mod:`hnplan.planning.training.prune` on large
candidate sets), and :func:`estimate_training_step`, :func:`search_plans` and :func:`best_plan` take ids
and build the job once (:func:`hnplan.planning.training.job.make_job`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.catalog.schemas import StackChoices
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.formatting import counted
from hnplan.planning.training import components as c
from hnplan.planning.training import prune
from hnplan.planning.training.candidates import candidate_columns, candidate_table, explain_empty
from hnplan.planning.training.evaluate import (
    UNITS,
    column_row,
    estimate_from_row,
    estimate_plan,
    evaluate_columns,
    evaluate_plans,
    full_column,
    plan_columns,
)
from hnplan.planning.training.job import make_job
from hnplan.planning.training.plan import PLAN_FIELDS, ParallelPlan, TrainingEstimate, check_knobs

if TYPE_CHECKING:
    import pandas as pd

    from hnplan.vectorise import Columns


def rank_plans(job: c.Job, fixed: dict | None = None) -> pd.DataFrame:
    """Evaluate every candidate plan of a job (:func:`candidate_frame`: only plans that obey the
    rules) and rank them: the ones that fit first, each group by step time.

    Parameters
    ----------
    job : Job
        From :func:`make_job`; its stack (if any) limits the ZeRO stages and recomputation modes
        searched (a pinned one is kept).
    fixed : dict, optional
        Knobs to pin (any of :data:`PLAN_FIELDS`; ``None`` values ignored); the rest are searched.

    Returns
    -------
    pandas.DataFrame
        :func:`evaluate_plans` rows; ``attrs["searched"]`` (candidates evaluated) and
        ``attrs["feasible"]`` (those that fit).

    Raises
    ------
    PlanRuleError
        If no candidate obeys the rules: the message names the rule the pinned knobs break.
    InputError
        For unknown plan fields, recompute modes or ZeRO stages.
    """
    df = evaluate_plans(job, _search_candidates(job, fixed))
    df = df.sort_values(["fits", "step_time_s"], ascending=[False, True], kind="stable").reset_index(drop=True)
    df.attrs.update(searched=len(df), feasible=int(df["fits"].sum()), units=UNITS)
    return df


def fitting_plans(job: c.Job, fixed: dict | None = None) -> tuple[dict, Columns]:
    """The candidates of :func:`rank_plans` that fit, in its order (by step time, the first of equal ones
    first), as :func:`~hnplan.planning.training.evaluate.plan_table` gives them, without pandas: for a
    caller that evaluates the same candidates many times (:func:`evaluate_columns`; a calibration's trials).

    Returns
    -------
    (dict, Columns)
        The plan's output columns (``recompute`` as an object array of mode names) and the plan table;
        no rows when no candidate fits.

    Raises
    ------
    PlanRuleError, InputError
        As :func:`rank_plans`.
    """
    cols, modes = _candidate_columns(job, fixed)
    ev = evaluate_columns(job, *plan_columns(job, cols, modes))
    n = len(cols["tp"])
    fits = np.broadcast_to(np.asarray(ev["fits"], dtype=bool), (n,))
    step = np.broadcast_to(np.asarray(ev["step_time_s"], dtype=float), (n,))
    rows = np.flatnonzero(fits)
    rows = rows[np.argsort(step[rows], kind="stable")]  # rank_plans' order of the fitting rows
    return plan_columns(job, {k: a[rows] for k, a in cols.items()}, modes)


def _search_candidates(job: c.Job, fixed: dict | None) -> pd.DataFrame:
    """The candidates :func:`rank_plans` evaluates (errors as there)."""
    return candidate_table(*_candidate_columns(job, fixed))


search_candidates = _search_candidates  # public: the candidates a caller evaluates itself (validation.predict_run)


def candidate_arrays(job: c.Job, fixed: dict | None) -> tuple[dict, list]:
    """:func:`search_candidates` as the arrays of :func:`candidate_columns` (``recompute`` as codes into the
    modes returned beside them), without pandas: for :func:`plan_columns` (errors as :func:`rank_plans`)."""
    return _candidate_columns(job, fixed)


def _candidate_columns(job: c.Job, fixed: dict | None) -> tuple[dict, list]:
    """:func:`_search_candidates` as the arrays of :func:`candidate_columns` (errors as there)."""
    fixed = {k: v for k, v in (fixed or {}).items() if v is not None}
    unknown = set(fixed) - set(PLAN_FIELDS)
    if unknown:
        raise InputError(f"unknown plan fields {sorted(unknown)}; allowed: {', '.join(PLAN_FIELDS)}")
    check_knobs(fixed.get("recompute", "none"), fixed.get("zero_stage", 1))
    cols, modes = candidate_columns(
        job.model,
        job.system,
        job.gpus,
        job.seq_len,
        job.global_batch_seqs,
        fixed,
        zero_with_pipeline=job.stack is not None and job.stack.zero_with_pipeline,
        balanced_ends=job.choices.pipeline_balanced_ends,
        pipeline_layout=job.choices.pipeline_layout,
        uneven_stages=job.choices.pipeline_uneven_stages,
    )
    if job.stack is not None:  # knobs the stack does not implement are not searched (a pinned one is kept)
        for knob, allowed in (("zero_stage", job.stack.zero_stages), ("recompute", job.stack.recompute_modes)):
            if allowed is not None and knob not in fixed:
                values = [i for i, m in enumerate(modes) if m in allowed] if knob == "recompute" else allowed
                keep = np.isin(cols[knob], values)  # recompute: codes into the modes searched
                cols = {k: a[keep] for k, a in cols.items()}
    if "zero_stage" not in fixed and len(cols["tp"]):
        # ZeRO shards over dp x cp ranks: where that is one, every stage is the same plan with other buffers (FSDP
        # on one GPU); only the lowest stage searched is kept, so a one-GPU search does not list it three times
        lowest = int(cols["zero_stage"].min())
        keep = (cols["dp"] * cols["cp"] > 1) | (cols["zero_stage"] == lowest)
        cols = {k: a[keep] for k, a in cols.items()}
    if not len(cols["tp"]):
        explain_empty(job, fixed)
    return cols, modes


def unimplemented_pins(stack, fixed: dict) -> str:
    """One sentence naming the knobs pinned in ``fixed`` (``zero_stage``, ``recompute``) that ``stack`` does not
    implement (:attr:`~hnplan.catalog.schemas.SoftwareStack.zero_stages`, ``recompute_modes``), or ``""``. A search
    leaves them out, but a pinned one is planned as asked (a published run's configuration, or a user's own
    extension of the stack): the sentence says so.

    >>> from hnplan.catalog import load_catalog
    >>> unimplemented_pins(load_catalog().stack("pytorch-eager"), {"recompute": "selective", "zero_stage": 0})
    'pytorch-eager does not implement recompute selective (it implements none, full): planned as asked, as if it did'
    """
    if stack is None:
        return ""
    said = []
    for knob, name, allowed in (
        ("zero_stage", "ZeRO", stack.zero_stages),
        ("recompute", "recompute", stack.recompute_modes),
    ):
        value = fixed.get(knob)
        if value is not None and allowed is not None and value not in allowed:
            said.append(f"{name} {value} (it implements {', '.join(str(a) for a in allowed)})")
    if not said:
        return ""
    return f"{stack.id} does not implement {' or '.join(said)}: planned as asked, as if it did"


def search_best(job: c.Job, fixed: dict | None = None, top: int = 1):
    """The ``top`` fastest plans of a job that fit, best first (one search, one job).

    Returns
    -------
    tuple
        ``(list of TrainingEstimate, searched, feasible)``: the estimates and the candidate counts.

    Raises
    ------
    InfeasiblePlan
        If no candidate obeys the rules (a :class:`PlanRuleError`) or none fits in memory.
    """
    cols, modes = _candidate_columns(job, fixed)
    if prune.prunable(job) and len(cols["tp"]) > prune.PRUNE_FROM:
        return prune.search_pruned(job, cols, modes, top)
    # the candidates as plain columns (as rank_plans' frame holds them, without pandas)
    ev = evaluate_columns(job, *plan_columns(job, cols, modes))
    searched = len(cols["tp"])
    fits = full_column(ev["fits"], searched, bool)
    feasible = int(fits.sum())
    if not feasible:
        least = full_column(ev["memory_per_gpu_bytes"], searched, float).min()
        raise InfeasiblePlan(
            f"no plan of {job.model.id} on {counted(job.gpus, 'GPU')} fits in memory "
            f"({counted(searched, 'candidate')} searched; the smallest needs "
            f"{units.to_GiB(least):,.1f} GiB per GPU)"
        )
    # the first rows of rank_plans' order (fitting plans by step time, ties in candidate order) without
    # sorting the whole table: a stable argsort of the fitting rows' step times
    rows = np.flatnonzero(fits)
    rows = rows[np.argsort(full_column(ev["step_time_s"], searched, float)[rows], kind="stable")[:top]]
    ests = [estimate_from_row(job, column_row(ev, int(i))) for i in rows]
    return ests, searched, feasible


# The id-level entry points: each assembles the job once (make_job) and hands it to the function above.


def estimate_training_step(
    model,
    system,
    gpus: int,
    plan: ParallelPlan,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    *,
    stack=None,
    choices: StackChoices | None = None,
    overrides: dict | None = None,
) -> TrainingEstimate:
    """Estimate step time, throughput, MFU/HFU and memory of one training plan:
    :func:`estimate_plan` of :func:`make_job`.

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
    stack, choices, overrides : optional
        The software stack and explicit choices (:func:`make_job`).

    Returns
    -------
    TrainingEstimate

    Raises
    ------
    PlanRuleError
        If the plan breaks a rule (:func:`validate_plan` names it; an :class:`InfeasiblePlan`).
    InputError
        For an unknown dtype, recompute mode or ZeRO stage, or fp8 on an accelerator without an fp8 peak.
    CatalogError
        For unknown ids.

    Examples
    --------
    >>> plan = ParallelPlan(dp=8, zero_stage=2, recompute="selective")
    >>> est = estimate_training_step("llama3.1-8b", "hgx-h100-ib-ndr", 8, plan, 4096, 64)
    >>> est.num_microbatches, est.fits, est.breakdown_s["pp_bubble"], est.placement["dp"]["level"]
    (8, True, 0.0, 'domain')
    """
    job = make_job(
        model,
        system,
        gpus,
        seq_len,
        global_batch_seqs,
        dtype,
        catalog,
        stack=stack,
        choices=choices,
        overrides=overrides,
    )
    return estimate_plan(job, plan)


def search_plans(
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    fixed: dict | None = None,
    catalog: Catalog | None = None,
    *,
    stack=None,
    choices: StackChoices | None = None,
    overrides: dict | None = None,
) -> pd.DataFrame:
    """:func:`rank_plans` of :func:`make_job` (``stack, choices, overrides``: as there).

    Examples
    --------
    >>> df = search_plans("llama3.1-8b", "hgx-h100-ib-ndr", 8, 4096, 64, fixed=dict(tp=1, pp=1))
    >>> df.attrs["searched"] >= df.attrs["feasible"] > 0, bool(df["step_time_s"].iloc[0] <= df["step_time_s"].max())
    (True, True)
    """
    job = make_job(
        model,
        system,
        gpus,
        seq_len,
        global_batch_seqs,
        dtype,
        catalog,
        stack=stack,
        choices=choices,
        overrides=overrides,
    )
    return rank_plans(job, fixed)


def best_plan(
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    fixed: dict | None = None,
    catalog: Catalog | None = None,
    top: int = 1,
    *,
    stack=None,
    choices: StackChoices | None = None,
    overrides: dict | None = None,
):
    """:func:`search_best` of :func:`make_job`: ``(list of TrainingEstimate, searched, feasible)``.

    Raises
    ------
    InfeasiblePlan
        If no candidate obeys the rules or fits in memory.
    """
    job = make_job(
        model,
        system,
        gpus,
        seq_len,
        global_batch_seqs,
        dtype,
        catalog,
        stack=stack,
        choices=choices,
        overrides=overrides,
    )
    return search_best(job, fixed, top)
