"""MXFP8 GEMMs on Blackwell: their rate against per-tensor FP8 and bf16 as published kernels run them.

The GEMM law's FP8 ceiling of a Blackwell chip is a per-tensor FP8 measurement (the chip's FP8 MAMF through
``torch._scaled_mm``, data/accelerators). An MXFP8 GEMM (``MXFP8BlockScaling``: an E8M0 scale per 32 elements of
each operand, the block-scaled ``tcgen05.mma`` kinds) loads and stages those scale factors in every K step and
runs slower than a per-tensor one of the same shape. Two public measurements time it:

* **Transformer Engine's GEMM benchmark on a B300** (``data/reference/te_gemm_profiling.csv``; NVIDIA/
  TransformerEngine ``docs/examples/gemm_profiling/gemm_profiling.rst`` @ 8f2e635, ``benchmarks/gemm/
  benchmark_gemm.py``): the 12 GEMMs of a hidden-4,096, FFN-16,384 layer at 15,872 tokens (forward, data- and
  weight-gradient), cuBLASLt, operands quantised before the timed loop (``--pre-quantize``): bf16 13.102 ms,
  per-tensor FP8 (current scaling) 6.812 ms, MXFP8 7.161 ms per layer. The three rates come from one run, so
  clock and harness divide out of their ratios. :func:`mxfp8_gemm_ratio_fit` finds the FP8 ceilings at which the
  law reproduces the measured bf16 / FP8 and bf16 / MXFP8 ratios over the 12 shapes; their quotient is the
  MXFP8 penalty, the catalog's ``mxfp8_gemm_ratio`` of the Blackwell chips (B200, B300, GB200, GB300: one
  tensor-core generation and one library).
* **torchao's MXFP8 grouped GEMMs on a B200** (``data/reference/torchao_b200_mxfp8_moe.csv``; pytorch/ao
  ``torchao/prototype/moe_training/README.md`` @ 2c2d402): ``torch._scaled_grouped_mm`` at DeepSeek-V3's expert
  shapes, 8 groups of 16,384 tokens. :func:`torchao_grouped_gemm_check` holds the law (fp8 ceiling times
  ``mxfp8_gemm_ratio``, short-run clock as the benchmark ran) against them: a check of another library's
  kernels, not fitted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.gemm import gemm_device_time_s
from hnplan.validation.gemm_fit import with_params
from hnplan.validation.rows import Row

TE_TABLE = "te_gemm_profiling"
TE_GPU = "B300 SXM6 AC"
TE_ACCELERATOR = "b300"  # the chip the benchmark ran on (gemm_profiling.rst: "NVIDIA B300 SXM6 AC")
#: the benchmark's layer (gemm_profiling.rst, model-config mode): tokens M = 31 x 512, hidden, FFN, QKV width
TE_LAYER = {"tokens": 15872, "hidden": 4096, "ffn": 16384, "qkv": 3 * 4096}
TORCHAO_TABLE = "torchao_b200_mxfp8_moe"
TORCHAO_ACCELERATOR = "b200"


def te_layer_gemms(tokens: int, hidden: int, ffn: int, qkv: int) -> list[tuple[int, int, int]]:
    """The 12 GEMMs ``(m, n, k)`` of the benchmark's layer: for each projection ``[tokens, K] x [K, N]`` (QKV,
    attention output, MLP up, MLP down) the forward ``(tokens, N, K)``, the data gradient ``(tokens, K, N)`` and
    the weight gradient ``(N, K, tokens)`` (benchmark_gemm.py: Fprop, Dgrad and Wgrad shapes).

    >>> len(te_layer_gemms(15872, 4096, 16384, 12288)), te_layer_gemms(15872, 4096, 16384, 12288)[0]
    (12, (15872, 12288, 4096))
    """
    out = []
    for k, n in ((hidden, qkv), (hidden, hidden), (hidden, ffn), (ffn, hidden)):
        out += [(tokens, n, k), (tokens, k, n), (n, k, tokens)]
    return out


def te_prequant_layer_s(catalog: Catalog | None = None) -> dict[str, float]:
    """The B300 run's per-layer GEMM time with pre-quantised operands, by recipe (``bf16``, ``fp8_current``,
    ``mxfp8``, ``nvfp4``, ``fp8_delayed``; the last quantises inside the timed loop even so) [s]."""
    ref = (catalog or load_catalog()).reference(TE_TABLE)
    sel = ref[(ref["gpu"] == TE_GPU) & (ref["mode"] == "prequant") & (ref["pass"] == "total")]
    return {r.recipe: units.ms_to_s(float(r.time_ms)) for r in sel.itertuples()}


def law_layer_s(acc: Accelerator, dtype: str) -> float:
    """The law's device time of the benchmark layer's 12 GEMMs (:func:`te_layer_gemms`), one call each [s]."""
    return float(sum(gemm_device_time_s(acc, dtype, m, n, k)[2] for m, n, k in te_layer_gemms(**TE_LAYER)))


def fp8_ceiling_for_ratio(acc: Accelerator, bf16_over_fp8: float) -> float:
    """The FP8 ceiling (``gemm_efficiency.fp8``) at which the law's bf16 / FP8 time ratio over the benchmark
    layer equals ``bf16_over_fp8``, the chip's other law parameters as catalogued [-].

    Raises
    ------
    ValueError
        If no ceiling in (0.2, 1.0] reproduces the ratio.
    """
    t_bf16 = law_layer_s(acc, "bf16")
    return float(
        brentq(
            lambda e: t_bf16 / law_layer_s(with_params(acc, {"gemm_efficiency.fp8": e}), "fp8") - bf16_over_fp8,
            0.2,
            1.0,
        )
    )


def mxfp8_gemm_ratio_fit(catalog: Catalog | None = None) -> dict[str, float]:
    """The MXFP8 / per-tensor FP8 GEMM rate ratio from Transformer Engine's B300 run (module docstring).

    Returns
    -------
    dict
        ``bf16_over_current`` and ``bf16_over_mxfp8`` (the measured time ratios), ``ceiling_current`` and
        ``ceiling_mxfp8`` (the FP8 ceilings that reproduce them under the law on the B300), ``ratio`` =
        ceiling_mxfp8 / ceiling_current, and ``time_ratio`` = 6.812 / 7.161 ms (the same without the law).
    """
    cat = catalog or load_catalog()
    t = te_prequant_layer_s(cat)
    acc = cat.accelerator(TE_ACCELERATOR)
    out = {"bf16_over_current": t["bf16"] / t["fp8_current"], "bf16_over_mxfp8": t["bf16"] / t["mxfp8"]}
    out["ceiling_current"] = fp8_ceiling_for_ratio(acc, out["bf16_over_current"])
    out["ceiling_mxfp8"] = fp8_ceiling_for_ratio(acc, out["bf16_over_mxfp8"])
    out["ratio"] = out["ceiling_mxfp8"] / out["ceiling_current"]
    out["time_ratio"] = t["fp8_current"] / t["mxfp8"]
    return out


def torchao_grouped_gemm_check(catalog: Catalog | None = None, accelerator: Accelerator | None = None) -> pd.DataFrame:
    """torchao's MXFP8 grouped GEMMs on a B200 (``torch._scaled_grouped_mm``, DeepSeek-V3 expert shapes) against
    the law: the chip's fp8 ceiling times its ``mxfp8_gemm_ratio``, at the short-run clock of the benchmark;
    columns ``pass, groups, m, n, k, time_s, predicted_s, error`` (predicted / measured - 1) and ``tflops``
    (measured)."""
    cat = catalog or load_catalog()
    acc = accelerator or cat.accelerator(TORCHAO_ACCELERATOR)
    acc = with_params(acc, {"gemm_efficiency.fp8": acc.gemm_efficiency["fp8"] * (acc.mxfp8_gemm_ratio or 1.0)})
    ref = cat.reference(TORCHAO_TABLE)
    ref = ref[ref["gemm_groups_m_n_k"].notna()]
    g, m, n, k = (np.array(v, dtype=float) for v in zip(*(s.split(",") for s in ref["gemm_groups_m_n_k"])))
    out = pd.DataFrame({"pass": ref["pass"].to_numpy(), "groups": g, "m": m, "n": n, "k": k})
    out["time_s"] = units.us_to_s(ref["time_us"].to_numpy(float))
    out["predicted_s"] = np.asarray(gemm_device_time_s(acc, "fp8", m, n, k, g)[2], dtype=float)
    out["tflops"] = units.flops_per_s_to_tflops(2.0 * g * m * n * k / out["time_s"])
    return out.assign(error=out["predicted_s"] / out["time_s"] - 1.0)


TE_SRC = (
    "data/reference/te_gemm_profiling.csv: NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst "
    "@ 8f2e635 (B300 SXM6 AC, benchmarks/gemm/benchmark_gemm.py --pre-quantize: the 12 cuBLASLt GEMMs of a "
    "hidden-4,096, FFN-16,384 layer at 15,872 tokens, one run)"
)
TORCHAO_SRC = (
    "data/reference/torchao_b200_mxfp8_moe.csv: pytorch/ao torchao/prototype/moe_training/README.md @ 2c2d402 "
    "(B200 at 1,000 W, torch._scaled_grouped_mm, DeepSeek-V3 expert shapes, 8 groups of 16,384 tokens)"
)


def mxfp8_rows(cat: Catalog) -> list[Row]:
    """MXFP8 GEMMs on Blackwell as rows of the compute area (this module's fit and check): Transformer Engine's
    same-run MXFP8 / per-tensor FP8 rate on a B300 (the row ``mxfp8_gemm_ratio`` is read from) and bf16 / MXFP8 rate
    (the B300's per-tensor fp8 ceiling, its MAMF, times that ratio: a prediction of the bf16 frame), then torchao's
    MXFP8 grouped GEMMs on a B200 (reported: another library's kernels)."""
    t = te_prequant_layer_s(cat)
    acc = cat.accelerator(TE_ACCELERATOR)
    # a catalog without the ratio (absent: 1, as the planners read it) reports its rows, not a TypeError
    mx = with_params(acc, {"gemm_efficiency.fp8": acc.gemm_efficiency["fp8"] * (acc.mxfp8_gemm_ratio or 1.0)})
    law_bf16, law_cs, law_mx = law_layer_s(acc, "bf16"), law_layer_s(acc, "fp8"), law_layer_s(mx, "fp8")
    name = acc.name.split(" (")[0]
    out = [
        Row(
            "compute",
            f"MXFP8 / per-tensor FP8 GEMM throughput, Transformer Engine layer on {name}",
            "throughput ratio",
            "-",
            t["fp8_current"] / t["mxfp8"],
            law_cs / law_mx,
            "calibration",
            0.02,
            TE_SRC,
            "mxfp8_gemm_ratio of the Blackwell chips is read from this row (hnplan.validation.mxfp8_gemm)",
        ),
        Row(
            "compute",
            f"bf16 / MXFP8 GEMM throughput, Transformer Engine layer on {name}",
            "throughput ratio",
            "-",
            t["bf16"] / t["mxfp8"],
            law_bf16 / law_mx,
            "prediction",
            0.05,
            TE_SRC,
            "the chip's per-tensor fp8 ceiling (its FP8 MAMF) times mxfp8_gemm_ratio, against its bf16 ceiling",
        ),
    ]
    b200 = cat.accelerator("b200").name.split(" (")[0]
    for _, r in torchao_grouped_gemm_check(cat).iterrows():
        out.append(
            Row(
                "compute",
                f"MXFP8 grouped GEMM torchao {int(r.groups)}x{int(r.m)}x{int(r.n)}x{int(r.k)} ({r['pass']}) on {b200}",
                "kernel time",
                "us",
                units.s_to_us(r["time_s"]),
                units.s_to_us(r["predicted_s"]),
                "reported",
                None,
                TORCHAO_SRC,
                "another library's grouped kernels than the cuBLASLt GEMMs Transformer Engine runs per expert; the "
                "law at the B200's fp8 ceiling times mxfp8_gemm_ratio, short-run clock as the benchmark ran",
            )
        )
    return out
