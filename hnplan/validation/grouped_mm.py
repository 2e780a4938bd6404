"""The fit of PyTorch's SM90 grouped GEMM (``torch._grouped_mm``, :mod:`hnplan.compute.grouped_gemm`) to the expert
GEMMs timed on one H200 (``data/reference/h200_kernels.csv``, ``moe_gemm`` rows).

The kernel's tile, cluster rounding, whole waves, output exposure and preparation kernel are read from its code;
one parameter, the law's overlap exponent for this kernel family (``grouped_gemm_overlap_exponent``), is fitted
by least squares on log time to the DeepSeek-V3 shapes (:data:`FIT_MODELS`) and the Mixtral shapes are predicted.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.compute.grouped_gemm import grouped_mm_time_s

GROUPED_OP = "torch._grouped_mm"
FIT_MODELS = ("deepseek-v3",)  # the rows the overlap exponent is fitted to; the others are predicted


def grouped_mm_table(catalog: Catalog | None = None, op: str = GROUPED_OP) -> pd.DataFrame:
    """The ``moe_gemm`` rows of ``h200_kernels`` timed with ``op``: ``model``, ``groups``, ``m_tokens`` (per group),
    ``n``, ``k`` [-, elements] and ``time_s`` [s] (eager back-to-back calls)."""
    cat = catalog or load_catalog()
    ref = cat.reference("h200_kernels")
    ref = ref[(ref["kind"] == "moe_gemm") & (ref["op"] == op)]
    out = []
    for shape, t in zip(ref["shape"], ref["time_s"]):
        d = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", shape)}
        out.append((shape.split()[0], d["experts"], d["tokens_per_expert"], d["n"], d["k"], float(t)))
    return pd.DataFrame(out, columns=["model", "groups", "m_tokens", "n", "k", "time_s"])


def grouped_mm_errors(catalog: Catalog | None = None, overlap_exponent: float | None = None) -> pd.DataFrame:
    """:func:`grouped_mm_table` with the model's eager time ``predicted_s`` [s] and ``error`` (predicted /
    measured - 1) on the H200, at the catalog's overlap exponent or ``overlap_exponent``."""
    cat = catalog or load_catalog()
    acc = cat.accelerator("h200-sxm")
    if overlap_exponent is not None:
        acc = acc.model_copy(update={"grouped_gemm_overlap_exponent": overlap_exponent})
    tab = grouped_mm_table(cat)
    tab["predicted_s"] = [
        grouped_mm_time_s(acc, "bf16", int(r.groups), int(r.m_tokens), int(r.n), int(r.k), eager=True)
        for r in tab.itertuples()
    ]
    tab["error"] = tab["predicted_s"] / tab["time_s"] - 1.0
    return tab


def fit_grouped_overlap(catalog: Catalog | None = None, models: tuple[str, ...] = FIT_MODELS) -> float:
    """The overlap exponent [-] that minimises the squared log error of the grouped kernel on the rows of
    ``models`` (scipy ``least_squares``, bounded to [1, 20])."""
    cat = catalog or load_catalog()
    fit_rows = grouped_mm_table(cat)["model"].isin(models).to_numpy()

    def residuals(x):
        e = grouped_mm_errors(cat, float(x[0]))
        return np.log1p(e["error"].to_numpy()[fit_rows])

    return float(least_squares(residuals, [3.0], bounds=([1.0], [20.0])).x[0])
