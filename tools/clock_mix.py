"""How compute-bound each validation row's step is, next to its error: the mix a power-limited clock would follow.

Usage::

    python tools/clock_mix.py [RUN_ID ...]

Without ids: every validation row on an accelerator with a ``sustained_compute_fraction`` below 1. For each
row, at the planner's best plan for the row's stated configuration:

* ``f``: the accelerator's ``sustained_compute_fraction`` (:mod:`hnplan.compute.clocks`);
* ``err_%``: the row's error as the README table gives it (``100 (predicted / published - 1)``; for
  ``step_time_s`` rows a negative error means hnplan is faster than measured, for throughput rows slower);
* ``cb_of_compute``: the compute-bound operators' share of one micro-batch's kernel time, forward, backward
  and recomputation (:func:`hnplan.compute.operators.totals` ``compute_bound_time_s / time_s`` of the
  operator table at the plan's ``microbatch_size, tp, cp, ep`` and the step's clock, ``Job.kernel_acc``);
* ``compute_of_step``: ``t_compute_s / step_time_s`` (the rest: exposed communication, pipeline bubble,
  optimizer, offload);
* ``cb_of_step``: the product, the compute-bound share of the whole step.

A clock set by the board's average power over the governor's window (tens of milliseconds, flashinfer-ai/
flashinfer pull request 2899) would follow ``cb_of_compute`` during the forward and backward passes, or
``cb_of_step`` if the window spanned whole steps; docs/compute.md ("Does the sustained clock follow the
step's mix?") reads the table. A diagnostic: nothing here changes a prediction.
"""

from __future__ import annotations

import sys

import pandas as pd

from hnplan.catalog import load_catalog
from hnplan.catalog.runs import training_runs
from hnplan.compute.operators import operator_table, totals
from hnplan.planning.validation import predict_run, run_job


def row(run, cat) -> dict:
    """The columns of the module docstring for one validation run."""
    best = predict_run(run, cat)
    job = run_job(run, cat)
    ops = operator_table(
        job.model,
        job.kernel_acc,
        "train",
        int(best.microbatch_size),
        run.seq_len,
        tp=int(best.tp),
        cp=int(best.cp),
        ep=int(best.ep),
        dtype=run.dtype,
        recompute=str(best.recompute),
        sequence_parallel=job.choices.sequence_parallel,
        stack=job.choices,
    )
    t = totals(ops)
    cb = t["compute_bound_time_s"] / t["time_s"]
    of_step = float(best.t_compute_s) / float(best.step_time_s)
    return {
        "id": run.id,
        "accelerator": job.acc.id,
        "f": job.acc.sustained_compute_fraction,
        "metric": run.metric,
        "err_%": round(100.0 * (float(best[run.metric]) / run.published - 1.0), 1),
        "cb_of_compute": round(cb, 3),
        "compute_of_step": round(of_step, 3),
        "cb_of_step": round(cb * of_step, 3),
    }


def main(ids: list[str]) -> None:
    cat = load_catalog()
    runs = training_runs()
    if ids:
        chosen = [r for r in runs if r.id in ids]
    else:
        chosen = [
            r
            for r in runs
            if (cat.accelerator(cat.system(r.system).accelerator).sustained_compute_fraction or 1.0) != 1.0
        ]
    pd.set_option("display.width", 200)
    print(pd.DataFrame([row(r, cat) for r in chosen]).to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
