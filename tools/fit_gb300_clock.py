"""Fit of the GB300's ``sustained_compute_fraction`` to every published GB300 training run at once.

Usage::

    python tools/fit_gb300_clock.py [--loo]

The rows: every validation row whose system's accelerator is ``gb300`` (:func:`gb300_rows`; the list is printed
with each row's error), except the public runs added after the fit as unseen checks (:data:`HELD_OUT`), which
the fit must not see. One parameter, the fraction of the short-run compute rate the 1,400 W board sustains
through a training step (:mod:`hnplan.compute.clocks`), fitted once over all of them with
:func:`hnplan.planning.calibrate_fit.fit` (residual ``ln(predicted / published)``, the same for step times and
throughputs), bounded by :data:`BOUNDS`: below, the B300 notes' range for the same die (0.82, the B200 at its
throttled clock; data/accelerators/b300.yaml), above, 1 (the board at its boost clock throughout, the most a
fraction of the short-run rate can be). Every other field of the accelerator and every stack choice stay as
catalogued; each trial plans the rows on a fresh :class:`~hnplan.catalog.Catalog` whose ``gb300`` entry carries
the trial value.

Prints the fitted value, the root-mean-square ln error at the catalog's prior (the power-law value 0.914 of
``hnplan.compute.clocks.power_scaled_fraction``) and at the fit, every row's error, with ``--loo`` the
leave-one-out fit and error of each row, and a scan of the rms over the bounds (the fit's minimum is the scan's,
or the bound it stops at).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from hnplan.catalog import load_catalog
from hnplan.catalog.loader import Catalog
from hnplan.catalog.runs import training_runs
from hnplan.planning.calibrate_fit import METHOD, Parameter, fit
from hnplan.planning.validation import predict_run

ACCELERATOR = "gb300"
#: the power-law value the catalog carried before the fit (hnplan.compute.clocks.power_scaled_fraction)
PRIOR = 0.914
BOUNDS = (0.82, 1.0)
#: GB300 rows added after the fit to test the model on runs it has not seen (MLPerf v5.1 NVIDIA 8B on 72 and
#: 512 GB300, v6.0 Nebius 8B on 72 and HPE 8B on 16, 32 and 72; Megatron-Bridge 26.04.01 Qwen3-30B-A3B on 8, its
#: four 26.08 rows, its 26.08 gpt-oss-120b on 64 and 26.04.01's BF16 one, and 26.06's Llama 3.1 405B on 256 in FP8-CS,
#: MXFP8 and NVFP4):
#: reported by the validation table, kept out of the fit
HELD_OUT = frozenset(
    {
        "mbridge2604-gb300-gpt-oss-120b-64-bf16",
        "mbridge2604-gb300-qwen3-30b-a3b-8-fp8",
        "mbridge2606-gb300-llama31-405b-256-fp8cs",
        "mbridge2606-gb300-llama31-405b-256-mxfp8",
        "mbridge2606-gb300-llama31-405b-256-nvfp4",
        "mbridge2608-gb300-deepseek-v3-256-fp8-fullcg",
        "mbridge2608-gb300-gpt-oss-120b-64-fp8-fullcg",
        "mbridge2608-gb300-qwen3-30b-a3b-8-fp8-fullcg",
        "mbridge2608-gb300-qwen3-30b-a3b-256-fp8-weak",
        "mbridge2608-gb300-qwen3-235b-a22b-256-fp8-fullcg",
        "mlperf-v51-nvidia-gb300-llama31-8b-72",
        "mlperf-v51-nvidia-gb300-llama31-8b-512",
        "mlperf-v60-nebius-gb300-llama31-8b-72",
        "mlperf-v60-hpe-gb300-llama31-8b-16",
        "mlperf-v60-hpe-gb300-llama31-8b-32",
        "mlperf-v60-hpe-gb300-llama31-8b-72",
    }
)


def gb300_rows() -> list:
    """The validation rows the fit uses (module docstring), in catalog order."""
    cat = load_catalog()
    return [r for r in training_runs() if cat.system(r.system).accelerator == ACCELERATOR and r.id not in HELD_OUT]


def catalog_at(fraction: float) -> Catalog:
    """A fresh catalog whose ``gb300`` entry has ``sustained_compute_fraction = fraction``."""
    cat = Catalog()
    acc = cat.accelerator(ACCELERATOR)
    path = cat.path_of("accelerators", ACCELERATOR)
    cat._one[("accelerators", ACCELERATOR)] = (acc.model_copy(update={"sustained_compute_fraction": fraction}), path)
    return cat


def residuals(rows: list, fraction: float) -> np.ndarray:
    """``ln(predicted / published)`` of each row at the trial fraction [-], one per row."""
    cat = catalog_at(fraction)
    return np.array([math.log(float(predict_run(r, cat)[r.metric]) / r.published) for r in rows])


def fit_value(rows: list) -> float:
    """The fraction that minimises the squared :func:`residuals` of ``rows`` within :data:`BOUNDS`."""
    p = Parameter("sustained_compute_fraction", PRIOR, *BOUNDS, fitted=True)
    out, _ = fit(lambda x: residuals(rows, float(x[0])), [p])
    return out[0].value


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e**2)))


def _pct(e: float) -> str:
    return f"{100 * (math.exp(e) - 1):+.1f} %"


def main(argv: list[str]) -> None:
    """Print the fitted value, the rms error at the prior and at the fit, each row's error (``--loo``: its
    leave-one-out fit and error) and a scan of the rms over the bounds."""
    rows = gb300_rows()
    v = fit_value(rows)
    e0, e1 = residuals(rows, PRIOR), residuals(rows, v)
    print(f"{METHOD}; {len(rows)} rows on {ACCELERATOR}; bounds {BOUNDS}")
    print(f"sustained_compute_fraction = {v:.4f}; rms ln error {_rms(e0):.3f} at {PRIOR}, {_rms(e1):.3f} at the fit")
    loo = []
    for i, run in enumerate(rows):
        line = f"  {run.id:48s} {run.metric:22s} {_pct(e0[i]):>8s} -> {_pct(e1[i]):>8s}"
        if "--loo" in argv:
            vi = fit_value(rows[:i] + rows[i + 1 :])
            ei = float(residuals([run], vi)[0])
            loo.append(ei)
            line += f"   left out: fit {vi:.4f}, error {_pct(ei)}"
        print(line)
    if loo:
        print(f"leave-one-out: rms ln error {_rms(np.array(loo)):.3f}")
    scan = {f: _rms(residuals(rows, f)) for f in np.linspace(*BOUNDS, 7)}
    print("scan (fraction: rms): " + ", ".join(f"{f:.3f}: {r:.3f}" for f, r in scan.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
