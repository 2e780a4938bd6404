"""The training planner against published runs: one row per run, model vs published, error in %."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.runs import TrainingRun, run_model, training_runs
from hnplan.compute import RECOMPUTE_MODES
from hnplan.errors import InfeasiblePlan
from hnplan.planning.training import candidate_arrays, evaluate_plans, search_candidates
from hnplan.planning.training import components as c
from hnplan.planning.training.candidates import MICROBATCH_SIZES, VIRTUAL_STAGES
from hnplan.planning.training.evaluate import MEMORY_PARTS, column_row, evaluate_columns, full_column, plan_columns
from hnplan.planning.training.job import make_job
from hnplan.planning.training.plan import PLAN_FIELDS, ZERO_STAGES, valid_mask
from hnplan.planning.training.prune import PRUNE_FROM, prunable, pruned_rows

if TYPE_CHECKING:
    import pandas as pd


def _run_args(run: TrainingRun) -> tuple[str, str, int, int, int, str]:
    """A run's positional job arguments: model, system, GPUs, sequence length [tokens], sequences per step, dtype."""
    return (run.model, run.system, run.gpus, run.seq_len, run.global_batch_seqs, run.dtype)


def run_job(run: TrainingRun, catalog: Catalog | None = None) -> c.Job:
    """The training job a validation run describes (:func:`hnplan.planning.training.job.make_job` with the
    run's model (:func:`hnplan.catalog.runs.run_model`: its own ``mtp_modules`` where it sets one), system,
    size, batch, dtype, stack and overrides), for tools that break its best plan down.

    Raises
    ------
    InputError
        Where the run names an id the catalog lacks or a combination :func:`make_job` rejects.
    """
    model = run_model(run, catalog)  # the run's own multi-token-prediction depth where it sets one
    return make_job(model, *_run_args(run)[1:], catalog, stack=run.stack, overrides=run.overrides or None)


def predict_run(run: TrainingRun, catalog: Catalog | None = None) -> pd.Series:
    """The planner's best plan for a run's stated configuration (the rest searched) with the run's
    software stack, as a Series of :func:`hnplan.planning.training.evaluate_plans` columns plus
    ``tokens_per_s_per_gpu``: the first row of :func:`hnplan.planning.training.rank_plans` (the fastest plan
    that fits, ties in candidate order; the fastest of all when none fits), picked without sorting the table.
    """
    job = run_job(run, catalog)
    df = evaluate_plans(job, search_candidates(job, run.fixed))
    fits = df["fits"].to_numpy(dtype=bool)
    rows = np.flatnonzero(fits) if fits.any() else np.arange(len(df))
    first = rows[np.argsort(df["step_time_s"].to_numpy()[rows], kind="stable")[0]]
    df["tokens_per_s_per_gpu"] = df["tokens_per_s"] / run.gpus
    best = df.iloc[first]
    best.name = 0  # rank_plans' first row
    best.attrs.update(searched=len(df), feasible=int(fits.sum()))
    return best


def best_row(run: TrainingRun, catalog: Catalog | None = None) -> dict:
    """:func:`predict_run`'s plan as ``{column: value}``, the same numbers, without building a frame or importing
    pandas: the candidates' columns evaluated at once (:func:`~hnplan.planning.training.evaluate.evaluate_columns`),
    the fastest that fits (ties in candidate order; the fastest of all when none fits) picked by a stable argsort.
    What :func:`validation_table` reads; the trust notes of ``hnplan compare`` read its metric (:func:`predicted`).

    Raises
    ------
    InputError
        As :func:`run_job`.
    """
    return _best_row(run, catalog, memory=True)


def predicted(run: TrainingRun, catalog: Catalog | None = None) -> float:
    """The value of the run's ``metric`` in :func:`best_row`'s plan, the same number, with less work on a stack
    that offloads nothing (:func:`~hnplan.planning.training.prune.prunable`: memory then decides only ``fits``): a
    run whose stated configuration leaves one candidate is evaluated without its memory per GPU (the one candidate
    is the pick whether it fits or not), and one that leaves more than
    :data:`~hnplan.planning.training.prune.PRUNE_FROM` is searched with the exact pruning of
    :func:`~hnplan.planning.training.prune.pruned_rows` (the fastest plan that fits, ties in candidate order; all
    evaluated when none fits). What the trust notes of ``hnplan compare`` read (:mod:`hnplan.planning.trust`:
    every published run on the compared accelerators, mostly fixed plans).

    Raises
    ------
    InputError
        As :func:`run_job`.
    """
    return float(_best_row(run, catalog, memory=False, metric=run.metric)[run.metric])


def _best_row(run: TrainingRun, catalog: Catalog | None, memory: bool, metric: str | None = None) -> dict:
    """:func:`best_row`; without ``memory``, for a prunable job, the memory columns of a lone candidate are NaN
    (not evaluated) and its ``fits`` False, and many candidates are searched with pruning. With ``metric``, the
    evaluated pick gives only that column, ``{metric: value}`` (the same value, without the row's other 40)."""
    job = run_job(run, catalog)
    cols, modes = stated_candidate(job, run.fixed) or candidate_arrays(job, run.fixed)
    n = len(cols["tp"])
    mem = None
    lean = not memory and prunable(job)
    if lean and n > PRUNE_FROM:
        try:
            (best,), _, _ = pruned_rows(job, cols, modes, 1)
        except InfeasiblePlan:  # none fits: the fastest of all, from every candidate's evaluation below
            pass
        else:
            best["tokens_per_s_per_gpu"] = best["tokens_per_s"] / run.gpus
            return best
    if lean and n == 1:
        mem = {k: np.full(n, np.nan) for k in (*MEMORY_PARTS, "total_bytes")}
    ev = evaluate_columns(job, *plan_columns(job, cols, modes), memory=mem)
    if n == 1:  # the one candidate is the pick
        first = 0
    else:
        fits = full_column(ev["fits"], n, bool)
        rows = np.flatnonzero(fits) if fits.any() else np.arange(n)
        first = int(rows[np.argsort(full_column(ev["step_time_s"], n, float)[rows], kind="stable")[0]])
    if metric is not None:
        per_gpu = metric == "tokens_per_s_per_gpu"
        v = ev["tokens_per_s" if per_gpu else metric]
        v = v[first] if np.ndim(v) else v
        return {metric: v / run.gpus if per_gpu else v}
    best = column_row(ev, first)
    best["tokens_per_s_per_gpu"] = best["tokens_per_s"] / run.gpus
    return best


#: the knobs a stated plan pins for :func:`stated_candidate` (an MoE model's ``ep`` too)
_STATED = ("tp", "pp", "cp", "zero_stage")


def stated_candidate(job: c.Job, fixed: dict | None) -> tuple[dict, list] | None:
    """:func:`~hnplan.planning.training.candidate_arrays` of a run whose source states its plan, where that leaves
    one candidate, without building the search's grid: its columns (int64 arrays of length 1, ``recompute`` as
    code 0 into the mode returned beside them), the same numbers. ``None`` where ``fixed`` leaves more than one
    candidate or none (``candidate_arrays`` then searches them, or says why none runs), and for any ``fixed`` this
    does not read: every knob of :data:`_STATED` and ``recompute`` must be pinned to one known value, ``ep`` too
    for an MoE model and ``etp`` unless ``tp`` is 1; the micro-batch size and the virtual stages may be left free
    (the rules often leave one of each: no interleaving at ``pp = 1``).

    The rules are those of ``candidate_columns``: ``tp x cp x pp`` divides the GPUs, :func:`valid_mask` with the
    stack's pipeline choices over the (micro-batch, virtual stages) pairs, and its pruning pass at one micro-batch
    and one virtual stage, which adds only ``pp <= layers`` to them (its other rules are the same or implied:
    ``dp`` divides the batch where ``dp x micro-batch`` does); a stated ``dp`` must match. The stack's ZeRO
    stages and recompute modes filter only knobs left free. About 0.3 ms where the search's grid of one row takes
    about 1 ms (most published runs state their plan: the trust notes of ``hnplan compare`` plan about 90 such).
    """
    f = {k: v for k, v in (fixed or {}).items() if v is not None}
    moe = job.model.moe
    need = _STATED + (("ep",) if moe is not None else ())
    if not all(type(f.get(k)) is int for k in need) or set(f) - set(PLAN_FIELDS):
        return None
    if not all(type(f.get(k, 1)) is int for k in ("ep", "etp", "dp", "microbatch_size", "virtual_stages")):
        return None
    if type(f.get("recompute")) is not str or f["recompute"] not in RECOMPUTE_MODES:
        return None
    tp, pp, cp, ep = f["tp"], f["pp"], f["cp"], f.get("ep", 1)
    if "etp" in f:
        etp = f["etp"] or tp  # 0 stands for etp = tp
    elif moe is None or tp == 1:  # the folded choice (etp 1) is the default one where tp is 1
        etp = tp
    else:  # an MoE model's etp = tp and etp = 1: two candidates
        return None
    if f["zero_stage"] not in ZERO_STAGES or tp * cp * pp < 1 or job.gpus % (tp * cp * pp) or pp > job.model.layers:
        return None
    dp = job.gpus // (tp * cp * pp)
    if "dp" in f and f["dp"] != dp:
        return None
    mb = [f["microbatch_size"]] if "microbatch_size" in f else MICROBATCH_SIZES
    v = [f["virtual_stages"]] if "virtual_stages" in f else VIRTUAL_STAGES
    pairs = [(a, b) for a in mb for b in v]  # row-major, as the search's grid
    grid = {k: np.array([x], dtype=np.int64) for k, x in dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp).items()}
    grid["microbatch_size"], grid["virtual_stages"] = (np.array(x, dtype=np.int64) for x in zip(*pairs))
    ch = job.choices
    ok = np.flatnonzero(
        valid_mask(
            grid,
            job.model,
            job.gpus,
            job.seq_len,
            job.global_batch_seqs,
            balanced_ends=ch.pipeline_balanced_ends,
            pipeline_layout=ch.pipeline_layout,
            uneven_stages=ch.pipeline_uneven_stages,
        )
    )
    if len(ok) != 1:
        return None
    one = dict(grid)
    one["microbatch_size"], one["virtual_stages"] = (np.array([x], dtype=np.int64) for x in pairs[ok[0]])
    one["etp"] = one.pop("etp")  # the search's column order
    one["zero_stage"] = np.array([f["zero_stage"]], dtype=np.int64)
    one["recompute"] = np.zeros(1, dtype=np.int64)
    one["num_microbatches"] = job.global_batch_seqs // (one["dp"] * one["microbatch_size"])
    return one, list(np.atleast_1d(np.asarray(f["recompute"])))


def validation_table(
    runs: list[TrainingRun] | None = None, catalog: Catalog | None = None, ids: list[str] | None = None
) -> pd.DataFrame:
    """Model vs published for every validation run (or the runs named in ``ids``).

    Returns
    -------
    pandas.DataFrame
        ``id, model, system, gpus, stack, metric, published, predicted, error_pct`` (``100 (predicted /
        published - 1)`` in the run's metric: + is slower for a step time, faster for a throughput),
        ``speed_error_pct`` (the same as a speed, + always faster than measured: a step time's ratio inverted, as
        :func:`hnplan.planning.trust.speed_errors` reads it), ``tolerance_pct``, ``tolerance_reason``, ``within``
        (bool), ``plan`` (the knobs used), ``fits``, ``expect`` (``within`` or ``gap``), ``gap_bound_pct``,
        ``gap_reason``, ``source``.
    """
    import pandas as pd  # here, not at the top: the trust notes read best_row without pandas

    cat = catalog or load_catalog()
    rows = []
    runs = runs if runs is not None else training_runs()
    for run in (r for r in runs if ids is None or r.id in ids):
        b = best_row(run, cat)
        pred = float(b[run.metric])
        err = error_pct(pred, run.published)
        rows.append(
            dict(
                id=run.id,
                model=run.model,
                system=run.system,
                gpus=run.gpus,
                stack=run.stack,
                metric=run.metric,
                published=run.published,
                predicted=pred,
                error_pct=err,
                speed_error_pct=100.0 * speed_error(run.metric, pred, run.published),
                tolerance_pct=run.tolerance_pct,
                tolerance_reason=run.tolerance_reason,
                within=abs(err) <= run.tolerance_pct,
                expect=run.expect,
                gap_bound_pct=run.gap_bound_pct,
                gap_reason=run.gap_reason,
                plan=(
                    f"TP{b['tp']} PP{b['pp']} DP{b['dp']} CP{b['cp']} EP{b['ep']}"
                    + (f" ETP{b['etp']}" if b["ep"] > 1 and b["etp"] != b["tp"] else "")
                    + f" mb{b['microbatch_size']} v{b['virtual_stages']} ZeRO{b['zero_stage']} "
                    f"rc-{b['recompute']}{_layer_choices(run, cat, b)}"
                ),
                fits=bool(b["fits"]),
                source=run.source,
            )
        )
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"error_pct": "%", "speed_error_pct": "%", "tolerance_pct": "%"}
    return df


LEADING_ERROR = re.compile(
    r"^reported, not asserted: (?:the model is (?:optimistic|pessimistic|within \d+ %) |within \d+ % "
    r"|a public run new to the model \(MLPerf v\d\.\d\), )?\(?(?P<err>[+-]\d+(?:\.\d+)?) ?%(?=\s*[(:);,]| at )"
)
"""The leading form in which a ``gap_reason`` states its run's error now: ``reported, not asserted: the model is
optimistic (-36.2 %: 46.0 ms against 72.1 ms ...``, ``reported, not asserted: within 3 % (-2.1 %: ...``,
``reported, not asserted: a public run new to the model (MLPerf v6.0), +6.8 % (slow ...``, ``reported, not
asserted: -13 % (slow) ...``; a figure followed by other words (``-14.3 % until ...``) is history, not this form."""


def leading_error(text: str) -> float | None:
    """The error [%] a ``gap_reason`` states in :data:`LEADING_ERROR`'s form, ``None`` where it has none."""
    m = LEADING_ERROR.match(" ".join(text.split()))
    return float(m.group("err")) if m else None


def error_pct(predicted: float, published: float) -> float:
    """A run's error, ``100 (predicted / published - 1)`` [%]."""
    return 100.0 * (predicted / published - 1.0)


def speed_error(metric: str, predicted: float, published: float) -> float:
    """hnplan's speed against a run, ``predicted throughput / measured - 1`` [-]: a step time's ratio inverted (a
    predicted step 10 % longer is a speed 9.1 % lower), so + is always faster than measured whatever the metric;
    the one place :func:`validation_table`'s ``speed_error_pct`` and :func:`hnplan.planning.trust.speed_errors`
    read it.

    >>> round(speed_error("step_time_s", 1.1, 1.0), 4), round(speed_error("tokens_per_s_per_gpu", 1.1, 1.0), 4)
    (-0.0909, 0.1)
    """
    ratio = predicted / published
    return (1.0 / ratio if metric == "step_time_s" else ratio) - 1.0


def _layer_choices(run: TrainingRun, cat: Catalog, best: dict) -> str:
    """``/N`` for full recomputation of ``N`` layers a chunk, `` offload-N`` for ``N`` layers' activations
    offloaded (the run's or its stack's ``recompute_num_layers`` / ``cpu_offload_layers`` where they apply)."""
    ov = run.overrides or {}
    stack = cat.stack(run.stack) if run.stack else None
    n_rc = ov.get("recompute_num_layers", getattr(stack, "recompute_num_layers", None))
    n_off = ov.get("cpu_offload_layers", getattr(stack, "cpu_offload_layers", 0))
    out = f"/{n_rc}" if n_rc and best["recompute"] == "full" else ""
    return out + (f" offload-{n_off}" if n_off and best["pp"] == 1 and best["recompute"] == "none" else "")


RUNS_BEGIN = "<!-- BEGIN TRAINING RUNS (generated by tools/update_readme_validation.py; tests check it is current) -->"
RUNS_END = "<!-- END TRAINING RUNS -->"


def runs_markdown(table: pd.DataFrame) -> str:
    """A Markdown table of :func:`validation_table` rows: run, plan, stack, metric, published, hnplan,
    error (signed, whole percent) and whether it is within its tolerance or a documented gap."""
    lines = ["| run | GPUs | plan | stack | metric | published | hnplan | error |", "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        fmt = (lambda x: f"{x:,.2f}") if r.metric == "step_time_s" else (lambda x: f"{x:,.0f}")
        verdict = "" if r.within else (" (gap)" if r.expect == "gap" else " (MISS)")
        plan = " ".join(p for p in r.plan.split() if p not in ("CP1", "EP1"))
        lines.append(
            f"| {r.id} | {r.gpus:,} | {plan} | {r.stack} | {r.metric} | {fmt(r.published)} | "
            f"{fmt(r.predicted)} | {r.error_pct:+.0f}%{verdict} |"
        )
    return "\n".join(lines)
