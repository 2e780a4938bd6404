"""The training planner against published runs: one row per run, model vs published, error in %."""

from __future__ import annotations

import pandas as pd

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.runs import TrainingRun, training_runs
from hnplan.planning.training import search_plans


def predict_run(run: TrainingRun, catalog: Catalog | None = None) -> pd.Series:
    """The planner's best plan for a run's stated configuration (the rest searched) with the run's
    software stack, as a Series of :func:`hnplan.planning.training.evaluate_plans` columns plus
    ``tokens_per_s_per_gpu``."""
    df = search_plans(run.model, run.system, run.gpus, run.seq_len, run.global_batch_seqs, run.dtype,
                      fixed=run.fixed, catalog=catalog, stack=run.stack)
    best = df.iloc[0].copy()
    best["tokens_per_s_per_gpu"] = best["tokens_per_s"] / run.gpus
    return best


def validation_table(runs: list[TrainingRun] | None = None, catalog: Catalog | None = None,
                     ids: list[str] | None = None) -> pd.DataFrame:
    """Model vs published for every validation run (or the runs named in ``ids``).

    Returns
    -------
    pandas.DataFrame
        ``id, model, system, gpus, stack, metric, published, predicted, error_pct`` (``100 (predicted /
        published - 1)``), ``tolerance_pct``, ``within`` (bool), ``plan`` (the knobs used),
        ``fits``, ``expect`` (``within`` or ``gap``), ``gap_bound_pct``, ``gap_reason``, ``source``.
    """
    cat = catalog or load_catalog()
    rows = []
    runs = runs if runs is not None else training_runs()
    for run in (r for r in runs if ids is None or r.id in ids):
        b = predict_run(run, cat)
        pred = float(b[run.metric])
        err = 100.0 * (pred / run.published - 1.0)
        rows.append(dict(id=run.id, model=run.model, system=run.system, gpus=run.gpus, stack=run.stack, metric=run.metric,
                         published=run.published, predicted=pred, error_pct=err, tolerance_pct=run.tolerance_pct,
                         within=abs(err) <= run.tolerance_pct, expect=run.expect,
                         gap_bound_pct=run.gap_bound_pct, gap_reason=run.gap_reason,
                         plan=(f"TP{b.tp} PP{b.pp} DP{b.dp} CP{b.cp} EP{b.ep} mb{b.microbatch_size} "
                               f"v{b.virtual_stages} ZeRO{b.zero_stage} rc-{b.recompute}"),
                         fits=bool(b.fits), source=run.source))
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"error_pct": "%", "tolerance_pct": "%"}
    return df
