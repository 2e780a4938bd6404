"""Pruning of the best-plan search (:func:`hnplan.planning.training.search_best`): a lower bound on each
candidate's step time from its compute alone, so that the full evaluation (collectives, pipeline bubble,
data-parallel overlap) runs only on the candidates that could still be among the fastest.

The bound follows from the step of :func:`hnplan.planning.training.evaluate_plans`,
``step = m t_mb + t_others / v + t_dp + t_opt + t_offload``, where ``t_mb`` is the slowest stage's compute
plus its exposed TP/CP/EP/PP communication and ``t_others`` the other stages' micro-batch times summed
(the first, ``p - 2`` middle ones, the last, less the slowest): every communication part is non-negative
(:func:`hnplan.planning.training.components.overlapped_comm` hides at most the whole transfer), so each
stage's micro-batch is at least its compute, and both ``max`` and "the sum less the largest" grow with
every stage's time: ``step >= m max_stage t_comp + (sum_stage t_comp - max_stage t_comp) / v``.
Under DualPipe the bubble is another expression (arXiv:2412.19437 Table 2), so the bound keeps only
``m max_stage t_comp``. Pruning is exact: a pruned candidate's step time is above a step time some
evaluated candidate reaches, so the search returns the same plans, in the same order, as a full one.
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.errors import InfeasiblePlan
from hnplan.formatting import counted
from hnplan.planning.training import components as c
from hnplan.planning.training import evaluate as ev
from hnplan.planning.training.stage_compute import stage_table

#: relative slack on the bound, so that rounding in the sum of the step's parts never prunes a tie
BOUND_SLACK = 1e-9
PRUNE_FROM = 2000  # candidates from which search_best prunes (below that one evaluation is cheaper)
PRUNE_PROBE = 2048  # fitting candidates of least bound evaluated first, to set the cut


def prunable(job: c.Job) -> bool:
    """Whether the bound applies: ``fits`` is then the HBM test alone (no training offload, no activation
    offloading, which could make a plan fit after its times are known)."""
    return job.choices.offload == "none" and not job.choices.cpu_offload_layers


def step_lower_bound(job: c.Job, plans) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A lower bound on each candidate's step time [s], its memory per GPU [bytes] and whether it fits.

    Parameters
    ----------
    job : Job
    plans : Columns
        The plan table of :func:`hnplan.planning.training.evaluate._plan_columns` (with ``num_microbatches``).

    Returns
    -------
    tuple of numpy.ndarray
        ``(bound_s, memory_per_gpu_bytes, fits)``, one entry per candidate.
    """
    bound, mem = _bound_and_memory(job, plans)
    total = np.asarray(mem["total_bytes"], dtype=float)
    return bound, total, total <= c.hbm_bytes(job.acc)


def _bound_and_memory(job: c.Job, plans) -> tuple[np.ndarray, dict]:
    """:func:`step_lower_bound`'s bound [s] and each candidate's memory per GPU by part
    (:data:`~hnplan.planning.training.evaluate.MEMORY_PARTS` and ``total_bytes`` [bytes], as
    :func:`~hnplan.planning.training.components.memory_per_gpu` gives them: each candidate's own numbers, so
    :func:`search_pruned` hands the rows it evaluates to :func:`~hnplan.planning.training.evaluate.evaluate_columns`
    rather than have it compute them again)."""
    codes, _, stages = stage_table(job, plans)  # [stage, quantity, distinct row]
    per_stage = stages[:, 0, :][:, codes]  # first, middle, last stage's compute per candidate
    t_comp = np.max(per_stage, axis=0)
    m = np.asarray(plans["num_microbatches"], dtype=float)
    if job.choices.pipeline_schedule == "dualpipe":
        bound = m * t_comp
    else:  # the bubble through the other stages, as slowest_stage sums it, on their compute alone
        pp, v = np.asarray(plans["pp"], dtype=float), np.asarray(plans["virtual_stages"], dtype=float)
        every = per_stage[0] + np.maximum(pp - 2, 0) * per_stage[1] + per_stage[2]
        others = np.where(pp > 1, np.maximum(every - t_comp, 0.0), 0.0)
        bound = m * t_comp + others / v
    per_gpu = c.memory_per_gpu(job, plans)
    n = len(m)
    mem = {k: np.broadcast_to(np.asarray(per_gpu[k]), (n,)) for k in (*ev.MEMORY_PARTS, "total_bytes")}
    return bound * (1.0 - BOUND_SLACK), mem


def search_pruned(job: c.Job, cols: dict, modes, top: int):
    """:func:`~hnplan.planning.training.search_best` with the bound of :func:`step_lower_bound` (the same
    plans, the same counts): the :data:`PRUNE_PROBE` (at least ``top``) fitting candidates of least bound
    are evaluated; a candidate whose bound exceeds the ``top``-th step time among them cannot be among the
    ``top`` fastest; the fitting ones left below it are evaluated too, and all ranked by step time, ties in
    candidate order. The candidates stay plain columns throughout (no pandas frame).

    Parameters
    ----------
    job : Job
    cols, modes : dict, list
        The search's candidates as the arrays of
        :func:`~hnplan.planning.training.candidates.candidate_columns` (``search._candidate_columns``).
    top : int

    Returns
    -------
    tuple
        ``(list of TrainingEstimate, searched, feasible)`` as :func:`~hnplan.planning.training.search_best`.

    Raises
    ------
    InfeasiblePlan
        If no candidate fits in memory (the message of the full search).
    """
    rows, searched, feasible = pruned_rows(job, cols, modes, top)
    return [ev.estimate_from_row(job, row) for row in rows], searched, feasible


def pruned_rows(job: c.Job, cols: dict, modes, top: int) -> tuple[list[dict], int, int]:
    """:func:`search_pruned`'s plans as rows of :func:`~hnplan.planning.training.evaluate.evaluate_columns`'
    columns (:func:`~hnplan.planning.training.evaluate.column_row`), best first, with the counts
    ``searched, feasible``: for a caller that reads a few numbers of the best plan (the trust notes' published
    runs, :func:`hnplan.planning.validation.predicted`). Parameters and errors as :func:`search_pruned`."""
    _, plans = ev.plan_columns(job, cols, modes)
    bound, memory = _bound_and_memory(job, plans)
    mem = np.asarray(memory["total_bytes"], dtype=float)
    fits = mem <= c.hbm_bytes(job.acc)
    searched, feasible = len(cols["tp"]), int(fits.sum())
    if not feasible:
        raise InfeasiblePlan(
            f"no plan of {job.model.id} on {counted(job.gpus, 'GPU')} fits in memory "
            f"({counted(searched, 'candidate')} searched; the smallest needs "
            f"{units.to_GiB(float(mem.min())):,.1f} GiB per GPU)"
        )
    rows = np.flatnonzero(fits)
    order = np.argsort(bound[rows], kind="stable")
    n_probe = max(PRUNE_PROBE, top)
    probe = np.sort(rows[order[:n_probe]])
    parts = [_evaluate(job, cols, modes, probe, memory)]
    cut = np.sort(ev.full_column(parts[0]["step_time_s"], len(probe), float))[min(top, len(probe)) - 1]
    rest = np.sort(rows[order[n_probe:]])
    rest = rest[bound[rest] <= cut]  # the others are slower than ``top`` evaluated plans
    if len(rest):
        parts.append(_evaluate(job, cols, modes, rest, memory))
    at = np.concatenate([probe, rest])  # each row's place among the candidates: ties go to the earlier
    step = np.concatenate(
        [ev.full_column(parts[0]["step_time_s"], len(probe), float)]
        + ([ev.full_column(parts[1]["step_time_s"], len(rest), float)] if len(rest) else [])
    )
    best = np.lexsort((at, step))[:top]
    picked = [ev.column_row(parts[0], i) if i < len(probe) else ev.column_row(parts[1], i - len(probe)) for i in best]
    return picked, searched, feasible


def _evaluate(job: c.Job, cols: dict, modes, rows: np.ndarray, memory: dict) -> dict:
    """:func:`~hnplan.planning.training.evaluate.evaluate_columns` of the candidates at ``rows``, with their
    memory per GPU taken from ``memory`` (:func:`_bound_and_memory` of all the candidates)."""
    picked = {k: a[rows] for k, a in memory.items()}
    return ev.evaluate_columns(job, *ev.plan_columns(job, {k: a[rows] for k, a in cols.items()}, modes), memory=picked)
