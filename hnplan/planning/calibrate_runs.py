"""One measured run's prediction as a function of the fitted parameters, for :mod:`hnplan.planning.calibrate`.

:class:`_RunModel` builds a run's job and the plans that fit in memory once and evaluates them again for each
trial of the solver (memoised on the parameter values and link scales), the way the validation predicts a run
(:func:`hnplan.planning.validation.predict_run`: the fastest fitting plan with the run's ``fixed`` knobs
pinned). :func:`_check_scale` refuses a published figure that no fitted efficiency can reach (a likely unit
slip) with one line naming the runs file, the run and the field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.loader import Catalog
from hnplan.catalog.runs import TrainingRun, run_model
from hnplan.catalog.schemas import SoftwareStack
from hnplan.compute.gemm import with_matmul_efficiency
from hnplan.errors import CatalogError, InputError
from hnplan.planning.training import PLAN_FIELDS, make_job
from hnplan.planning.training.components import memory_per_gpu
from hnplan.planning.training.evaluate import evaluate_columns
from hnplan.planning.training.search import fitting_plans
from hnplan.vectorise import frame_of

if TYPE_CHECKING:
    import pandas as pd

#: stack choices a calibration may fit, with the stack switch that makes each matter
CHOICE_PARAMS = (("tp_comm_overlap_fraction", "tp_comm"), ("ep_comm_overlap_fraction", "ep_comm"))


class _RunModel:
    """One run's prediction as a function of the parameters: the job and its fitting candidates
    built once (:func:`~hnplan.planning.training.search.fitting_plans`: :func:`rank_plans`' fitting rows
    without pandas), the planner's evaluator per trial (:func:`evaluate_columns`: the columns of
    :func:`~hnplan.planning.training.evaluate_plans` without the DataFrame; memoised on the values)."""

    def __init__(self, run: TrainingRun, stack: SoftwareStack, cat: Catalog):
        self.run = run
        # the run's GPU count is its field ``gpus``, not the --gpus flag of train: messages name the field
        job = make_job(
            run_model(run, cat), run.system, run.gpus, run.seq_len, run.global_batch_seqs, run.dtype, cat, stack=stack
        )
        self.job = replace(job, gpus_name="its gpus")
        self._table = fitting_plans(self.job, run.fixed)  # the plan columns, read by every trial
        if not len(self._table[1]):
            raise InputError(
                f"no plan of {run.model} on {run.gpus:,} x {run.system} with {run.fixed or 'nothing'} "
                "pinned fits in memory in hnplan's model, so it cannot be calibrated against"
            )
        # the candidates' memory: the same in every trial that keeps the stack's choices (GEMM efficiencies
        # and link bandwidths do not change what a GPU holds)
        self._memory = memory_per_gpu(self.job, self._table[1])
        acc = self.job.acc
        self.matmul_key = f"matmul_efficiency.{acc.id}.{run.dtype}"
        self.matmul_initial = (acc.gemm_efficiency or {}).get(run.dtype, acc.matmul_efficiency[run.dtype])
        self._memo: dict = {}

    @property
    def candidates(self) -> pd.DataFrame:
        """The fitting candidates as a table (columns :data:`PLAN_FIELDS`), fastest first at the stack's values."""
        cols = self._table[0]
        return frame_of({k: cols[k] for k in PLAN_FIELDS}, len(cols["tp"]))

    def best(self, values: dict[str, float], link_scales: dict[tuple[str, str], float]) -> dict:
        """The fastest fitting plan's row at these parameter values and link scales: ``{column: value}``
        of :func:`~hnplan.planning.training.evaluate_plans` plus ``tokens_per_s_per_gpu``."""
        key = (tuple(sorted(values.items())), tuple(sorted(link_scales.items())))
        if key not in self._memo:
            job = self.job
            upd: dict = {}
            if self.matmul_key in values:
                eff = values[self.matmul_key]
                upd["acc"] = with_matmul_efficiency(job.acc, {self.run.dtype: eff})
                if job.stack is not None:  # an in-training efficiency, as the written stack will hold it: its
                    # clock included, so this dtype's GEMMs run at it (Job.kernel_acc), attention at the fraction
                    mm = dict(job.stack.matmul_efficiency or {})
                    mm[job.acc.id] = {**mm.get(job.acc.id, {}), self.run.dtype: eff}
                    upd["stack"] = job.stack.model_copy(update={"matmul_efficiency": mm})
            choice: dict[str, float | None] = {k: values[k] for k, _ in CHOICE_PARAMS if k in values}
            if "ep_comm_overlap_fraction" in choice:  # one share for the user's runs, inside a domain or across
                choice["ep_comm_overlap_fraction_scale_out"] = None
            if choice:
                upd["choices"] = job.choices.model_copy(update=choice)
            s_up = link_scales.get((job.system.id, "scaleup"), 1.0)
            s_out = link_scales.get((job.system.id, "scaleout"), 1.0)
            if (s_up, s_out) != (1.0, 1.0):
                lk = job.links
                upd["links"] = replace(
                    lk,
                    scaleup=replace(lk.scaleup, bw_Bps=lk.scaleup.bw_Bps * s_up),
                    scaleout=replace(lk.scaleout, bw_Bps=lk.scaleout.bw_Bps * s_out),
                )
                upd["_groups"] = {}  # placements hold the links: place again
            trial = replace(job, **upd) if upd else job
            if upd:
                _share_memo(job, trial, links="links" in upd, choices="choices" in upd)
            cols = evaluate_columns(trial, *self._table, memory=None if "choices" in upd else self._memory)
            i = int(np.nanargmin(cols["step_time_s"]))  # the first of equal step times, as idxmin
            row = {k: v[i] if np.ndim(v) else v for k, v in cols.items()}
            row["tokens_per_s_per_gpu"] = row["tokens_per_s"] / self.run.gpus
            self._memo[key] = row
        return self._memo[key]

    def predict(self, values: dict[str, float], link_scales: dict) -> float:
        return float(self.best(values, link_scales)[self.run.metric])


#: the most a measured run may differ from the model at the stack's own values (either way) before its
#: figure is taken for another unit: the fitted GEMM efficiency moves the GEMMs at most 1 / 0.2 = 5x from a
#: perfect kernel (MATMUL_BOUNDS), and a figure in ms for s, per job or node for per GPU, or in percent is
#: 8-1,000x off
UNIT_FACTOR = 5.0
#: the unit each metric is read in, named when a figure looks like another one
METRIC_UNITS = {
    "step_time_s": "seconds per step (not ms)",
    "tokens_per_s_per_gpu": "tokens/s of one GPU (not of a node or the job)",
    "model_tflops_per_gpu": "TFLOP/s of one GPU (not of a node or the job)",
    "hardware_tflops_per_gpu": "TFLOP/s of one GPU (not of a node or the job)",
    "mfu": "a fraction of the dense peak (0.42, not 42)",
    "hfu": "a fraction of the dense peak (0.42, not 42)",
}


def _check_scale(m: _RunModel, runs_path, link_scales: dict) -> None:
    """A run's published figure within :data:`UNIT_FACTOR` of the model's at the stack's own values (on the
    fabric a sweep fitted, ``link_scales``); beyond it no fitted efficiency reaches it and the fit would stop
    at a bound, so it is refused as a likely unit slip, naming the file, the run, the field and the unit the
    metric is read in.

    Raises
    ------
    CatalogError
        When published / predicted is above UNIT_FACTOR or below its inverse (an input error naming the
        runs file, the run and the field).
    """
    run, before = m.run, m.predict({}, link_scales)
    ratio = run.published / before
    if 1.0 / UNIT_FACTOR <= ratio <= UNIT_FACTOR:
        return
    raise CatalogError(
        f"{runs_path}: run {run.id}: field published: {run.metric} {_figure(run.published)} is "
        f"{f'{ratio:,.0f}' if ratio >= 10 else f'{ratio:.2g}'}x hnplan's "
        f"{_figure(before)} for this run at stack {m.run.stack}'s own values, beyond the {UNIT_FACTOR:g}x a "
        f"calibration can move it; {run.metric} is {METRIC_UNITS[run.metric]}",
        path=runs_path,
        entry=run.id,
        field="published",
    )


def _figure(x: float) -> str:
    """A measured or predicted figure as a message gives it: 2,804, 93,498, 2.804, 0.42."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def _share_memo(job, trial, links: bool, choices: bool) -> None:
    """Hand ``trial`` (``job`` with fitted values) the parts of ``job.memo`` that do not depend on what
    changed, so that a trial does not redo them: the collective times (functions of the message, the
    group's placement and the links only: kept unless the links are scaled). The entries are shared dicts
    (``job``'s ranking made them): what one trial adds, the next ones read. The kernel times and the
    activation-memory tables are kept under the numbers they depend on for every job
    (``stage_compute.content_memo``: the accelerator with its GEMM efficiency, the model, the stack's choices),
    so a trial finds them there where those are the same. ``choices``: whether a stack choice is fitted. A trial
    keeps ``job``'s model, so it takes the model's parameter counts and JSON (the key of those shared tables) as
    ``job`` computed them (:class:`~hnplan.planning.training.components.Job`'s cached ``params`` and
    ``model_json``) rather than counting and serialising the model again in every trial."""
    for key, entry in job.memo.items():
        if not links and isinstance(key, tuple) and key[0] == "collective_s":
            trial.memo[key] = entry
    if trial.model is job.model:
        for name in ("params", "model_json"):  # functools.cached_property values, kept in the instance's __dict__
            vars(trial)[name] = getattr(job, name)
