"""Fit of the Megatron-Core stacks' ``moe_host_us_per_kernel`` to their published eager MoE runs.

Usage::

    python tools/fit_moe_host.py [--loo] [--grace-scaled]

The rows: every validation row of an MoE model whose stack is one of :data:`FAMILY` and whose MoE layer runs
outside CUDA graphs (neither ``moe`` nor ``full_iteration`` in the row's ``cuda_graph_scope``; a row that
captures only the router and preprocess keeps its experts, permutes and dispatcher eager), less
:data:`EXCLUDED` (a published figure that is not a Megatron-Core run). One parameter, fitted once over all of
them with :func:`hnplan.planning.calibrate_fit.fit` (residual ``ln(predicted / published)``, bounds
:data:`BOUNDS_US`, started inside the bounds: a start on the lower bound, where the rows are still
GPU-bound or barely host-bound, leaves the solver's first step no slope), each row's prediction with the
stack's other choices as catalogued.

Prints the value, the root-mean-square residual without and with it, every row's error, with ``--loo`` the
leave-one-out fit and error of each row, a scan of the root-mean-square residual over the bounds (the fit's
minimum is the scan's), and with ``--grace-scaled`` the same fit with the term scaled by the system's
``host_dispatch_factor`` on Grace hosts (the alternative the catalog does not take).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from hnplan.catalog.runs import training_runs
from hnplan.planning.calibrate_fit import METHOD, Parameter, fit
from hnplan.planning.validation import predict_run, run_job

#: the Megatron-Core family stacks that share the fitted value
FAMILY = (
    "megatron-core",
    "megatron-core-ep-overlap",
    "megatron-bridge-2511",
    "megatron-bridge-2511-mxfp8",
    "megatron-bridge-2608-mxfp8",
    "megatron-bridge-2604-mxfp8",
    "pai-megatron-patch-2504",
)
#: rows left out, with the reason
EXCLUDED = {
    "deepseek-v3-2048": "DeepSeek's own run (DualPipe, its own framework) held against megatron-core as a "
    "counterfactual: the published figure is not a Megatron-Core run",
}
#: the gpt-oss-120b rows with an eager MoE layer (Megatron-Bridge 26.04.01 BF16 on five chips, 26.06 MXFP8 on B300):
#: every gpt-oss row leans fast by +17 to +38 % whatever its chip, precision or graphs (the 26.08 full-iteration rows
#: too), a model-level gap not yet broken down, which a fit of the host time would absorb as host work
EXCLUDED.update(
    {
        rid: "a gpt-oss-120b row: a model-level gap (+17 to +38 % on every chip and recipe) not yet broken down"
        for rid in (
            "mbridge2604-gb300-gpt-oss-120b-64-bf16",
            "mbridge2604-gb200-gpt-oss-120b-64-bf16",
            "mbridge2604-b300-gpt-oss-120b-64-bf16",
            "mbridge2604-b200-gpt-oss-120b-64-bf16",
            "mbridge2604-h100-gpt-oss-120b-64-bf16",
            "mbridge2606-b300-gpt-oss-120b-64-fp8",
        )
    }
)
BOUNDS_US = (0.0, 200.0)
START_US = 50.0


def eager_moe_rows() -> list:
    """The validation rows the fit uses (module docstring), in catalog order."""
    out = []
    for run in training_runs():
        if run.stack not in FAMILY or run.id in EXCLUDED:
            continue
        job = run_job(run)
        if job.model.moe is None or {"moe", "full_iteration"} & set(job.choices.cuda_graph_scope):
            continue
        out.append(run)
    return out


def _factor(run) -> float:
    return run_job(run).system.host_dispatch_factor or 1.0


def predict(run, us: float, grace_scaled: bool = False) -> float:
    """The row's predicted metric with ``moe_host_us_per_kernel = us`` (times the host factor if asked)."""
    v = us * (_factor(run) if grace_scaled else 1.0)
    r = run.model_copy(update={"overrides": {**(run.overrides or {}), "moe_host_us_per_kernel": float(v)}})
    return float(predict_run(r)[run.metric])


def residuals(rows: list, us: float, grace_scaled: bool = False) -> np.ndarray:
    """``ln(predicted / published)`` of each row at ``moe_host_us_per_kernel = us`` [-], one per row."""
    return np.array([math.log(predict(r, us, grace_scaled) / r.published) for r in rows])


def fit_value(rows: list, grace_scaled: bool = False) -> float:
    """The ``moe_host_us_per_kernel`` [us] that minimises the squared :func:`residuals` of ``rows``."""
    p = Parameter("moe_host_us_per_kernel", START_US, *BOUNDS_US, fitted=True)
    out, _ = fit(lambda x: residuals(rows, float(x[0]), grace_scaled), [p])
    return out[0].value


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e**2)))


def _pct(e: float) -> str:
    return f"{100 * (math.exp(e) - 1):+.0f} %"


def main(argv: list[str]) -> None:
    """Print the fitted value, the rms error without and with it, each row's error (``--loo``: its leave-one-out
    fit), a scan over the bounds and the rows left out; ``--grace-scaled`` scales the value by the host factor."""
    grace = "--grace-scaled" in argv
    rows = eager_moe_rows()
    v = fit_value(rows, grace)
    e0, e1 = residuals(rows, 0.0), residuals(rows, v, grace)
    print(f"{METHOD}; {len(rows)} rows; grace-scaled: {grace}")
    print(f"moe_host_us_per_kernel = {v:.1f} us; rms ln error {_rms(e0):.3f} without, {_rms(e1):.3f} with")
    loo = []
    for i, run in enumerate(rows):
        line = f"  {run.id:48s} {_factor(run):4.2f}  {_pct(e0[i]):>7s} -> {_pct(e1[i]):>7s}"
        if "--loo" in argv:
            vi = fit_value(rows[:i] + rows[i + 1 :], grace)
            ei = math.log(predict(run, vi, grace) / run.published)
            loo.append(ei)
            line += f"   left out: fit {vi:.1f} us, error {_pct(ei)}"
        print(line)
    if loo:
        print(f"leave-one-out: rms ln error {_rms(np.array(loo)):.3f}")
    scan = {us: _rms(residuals(rows, us, grace)) for us in np.linspace(*BOUNDS_US, 11)}
    print("scan (us: rms): " + ", ".join(f"{us:.0f}: {r:.3f}" for us, r in scan.items()))
    for run_id, why in EXCLUDED.items():
        print(f"excluded {run_id}: {why}")


if __name__ == "__main__":
    main(sys.argv[1:])
