"""Print the step-time breakdown of the MoE validation rows (model vs published)."""

from __future__ import annotations

import sys

from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import predict_run

ids = sys.argv[1:] or None
for run in training_runs():
    if ids is not None and run.id not in ids:
        continue
    if ids is None and "deepseek" not in run.model and "mixtral" not in run.model:
        continue
    b = predict_run(run)
    pred = float(b[run.metric])
    parts = {k[2:-2]: float(v) for k, v in b.items() if k.startswith("t_") and k.endswith("_s")}
    print(f"{run.id}: {run.metric} {pred:.1f} vs {run.published} ({100 * (pred / run.published - 1):+.0f} %)")
    print(
        f"  TP{b.tp} PP{b.pp} DP{b.dp} EP{b.ep} mb{b.microbatch_size} v{b.virtual_stages} m{b.num_microbatches} "
        f"rc-{b.recompute} fits={b.fits} mfu={b.mfu:.3f}"
    )
    print("  " + "  ".join(f"{k}={v:.3f}" for k, v in parts.items()))
