"""The Hopper GEMM law on FP8 shapes it was never fitted to, run as the published kernels run them.

Two public tables time FP8 GEMMs on one H800 SXM: DeepGEMM's block-scaled dense and grouped GEMMs
(``data/reference/deepgemm_h800_fp8.csv``) and TileLang's 8192 x 8192 x K sweep (``tilelang_h800_matmul.csv``).
Both differ from the cuBLAS calls the law's chip parameters were fitted to (the H200 bf16 sweep) in how the
kernel is scheduled and in the clock it ran at, and both differences are read from the kernels' code and the
benchmarks' harnesses, not fitted to the rows:

* **DeepGEMM's kernel** (deepseek-ai/DeepGEMM at commit 55ab91f, 2025-03-25): ``deep_gemm/jit_kernels/gemm.py``
  ``get_best_configs`` picks the tile: ``BLOCK_M`` 64 when m <= 64 else 128 (128, the contiguous layout's
  alignment, for the contiguous grouped GEMM), ``BLOCK_N`` among 16, 24, ..., 128, 144, 160 with the fewest
  waves over the SMs, then the fullest last wave, then the narrowest tile; ``BLOCK_K`` 128. The kernel
  (``include/deep_gemm/fp8_gemm.cuh``) is persistent: each SM walks its tiles, so a partial last wave costs a
  whole wave (wave weight 1, no stream-K); it never splits K (below one wave it narrows N instead); the math
  warp groups write each tile through shared memory and a TMA store after its K loop and wait for the store
  before the next tile: the output write is exposed (``gemm_output_exposed`` = 1).
* **TileLang's kernels** (tile-ai/tilelang ``benchmark/matmul*``) are non-persistent: every tile writes its
  output after its K loop (exposed, 1); the tile is the autotuner's, not published, so the law's is kept.
* **Clock.** DeepGEMM's harness flushes L2 with an 8 GB memset before every timed call (``bench_kineto``; by the
  code's comment, to keep the GPU at its highest clocks) and TileLang times single calls: both run at boost
  clock. There FP8 runs at the same fraction of its peak as FP16: TileLang's FP8 / FP16 rate on the same GPU is
  1.99-2.01 at K >= 8,192, the ratio of the peaks. The catalog's FP8 ceiling is the bf16 one times the hot MAMF
  FP8 / bf16 ratio (1.77x: FP8 draws more power and clocks lower at 700 W), so these tables are predicted with
  the FP8 ceiling at the bf16 ceiling's fraction of the peak (:func:`at_boost_clock`); ``hnplan gemm`` and the
  inference planner keep the catalog's ceiling, and the training planner scales both dtypes further by the
  chip's ``sustained_compute_fraction`` (:mod:`hnplan.compute.clocks`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.gemm import gemm_compute_s, gemm_device_time_s
from hnplan.validation.gemm_fit import predict_table, with_params

DEEPGEMM_TABLE = "deepgemm_h800_fp8"
DEEPGEMM_ACCELERATOR = "h800-sxm"  # the GPU the table was measured on (deepseek-ai/DeepGEMM README, 2025-03-25)
TILELANG_TABLE = "tilelang_h800_matmul"
# DeepGEMM @ 55ab91f, deep_gemm/jit_kernels/gemm.py get_best_configs: the N widths of its tiles, its K step, the
# contiguous layout's row alignment (utils.get_m_alignment_for_contiguous_layout)
DEEPGEMM_BLOCK_N = (*range(16, 129, 8), 144, 160)
DEEPGEMM_BLOCK_K = 128
DEEPGEMM_CONTIGUOUS_BLOCK_M = 128
NO_SPLIT_K = 2**31  # a split-K slice longer than any K: the kernel never splits K


def deepgemm_tile(layout: str, m: int, n: int, groups: int, compute_units: int) -> tuple[int, int]:
    """DeepGEMM's tile ``(BLOCK_M, BLOCK_N)`` for a GEMM of ``groups`` x ``m`` rows (per group) x ``n`` columns:
    the fewest waves of tiles over ``compute_units`` SMs, then the fullest last wave, then the narrowest tile (the
    rule of ``get_best_configs`` at 55ab91f; the contiguous layout is one GEMM of ``groups m`` rows).

    Parameters
    ----------
    layout : str
        ``normal`` (dense), ``contiguous`` or ``masked`` (grouped).
    m, n : int
        Rows (tokens) per group and output columns [elements].
    groups : int
        GEMMs in the kernel (experts).
    compute_units : int
        SMs of the GPU (132 on the H800).

    Returns
    -------
    tuple of two ints
        ``(BLOCK_M, BLOCK_N)`` [elements]; ``BLOCK_K`` is always :data:`DEEPGEMM_BLOCK_K`.

    >>> deepgemm_tile("normal", 64, 2112, 1, 132), deepgemm_tile("contiguous", 4096, 7168, 8, 132)
    ((64, 16), (128, 160))
    """
    if layout == "contiguous":
        block_m, m, groups = DEEPGEMM_CONTIGUOUS_BLOCK_M, m * groups, 1
    else:
        block_m = 64 if m <= 64 else 128
    best: tuple | None = None
    for block_n in DEEPGEMM_BLOCK_N:
        tiles = -(-m // block_m) * -(-n // block_n) * groups
        waves = -(-tiles // compute_units)
        key = (waves, -(tiles - (waves - 1) * compute_units), block_n)
        best = key if best is None or key < best else best
    assert best is not None
    return block_m, best[2]


def at_boost_clock(acc: Accelerator) -> Accelerator:
    """``acc`` at boost clock: the FP8 ceiling at the bf16 ceiling's fraction of the peak (module docstring)."""
    return with_params(acc, {"gemm_efficiency.fp8": acc.gemm_efficiency["bf16"]})


def deepgemm_kernel(acc: Accelerator, layout: str, m: int, n: int, groups: int) -> Accelerator:
    """``acc`` with DeepGEMM's kernel for that GEMM: its tile, whole waves, no split-K, the output write exposed."""
    block_m, block_n = deepgemm_tile(layout, m, n, groups, acc.compute_units)
    return with_params(
        acc,
        {
            "gemm_tile_mnk": (block_m, block_n, DEEPGEMM_BLOCK_K),
            "gemm_wave_weight": 1.0,
            "gemm_splitk_min_k": NO_SPLIT_K,
            "gemm_output_exposed": 1.0,
        },
    )


def deepgemm_table(catalog: Catalog | None = None) -> pd.DataFrame:
    """DeepGEMM's FP8 GEMMs on one H800 SXM5 (``data/reference/deepgemm_h800_fp8.csv``) as a GEMM table:
    ``layout`` (normal, contiguous or masked grouped), ``m_tokens`` (rows per group), ``n``, ``k``, ``groups``,
    ``dtype`` ("fp8") and ``time_s`` = 2 groups m n k / the published TFLOP/s [s] (kernel time, kineto)."""
    ref = (catalog or load_catalog()).reference(DEEPGEMM_TABLE)
    return pd.DataFrame(
        {
            "layout": ref["layout"],
            "m_tokens": ref["m"],
            "n": ref["n"],
            "k": ref["k"],
            "groups": ref["groups"],
            "dtype": "fp8",
            "time_s": 2.0 * ref["groups"] * ref["m"] * ref["n"] * ref["k"] / units.tflops_to_flops_per_s(ref["tflops"]),
        }
    )


def deepgemm_errors(catalog: Catalog | None = None, accelerator: Accelerator | None = None) -> pd.DataFrame:
    """The law's device time, with the chip's parameters as the catalog has them, DeepGEMM's kernel
    (:func:`deepgemm_kernel`) at boost clock (:func:`at_boost_clock`), against every row of :func:`deepgemm_table`;
    nothing is fitted to these rows. Adds ``block_m`` and ``block_n`` (DeepGEMM's tile), ``predicted_s``, ``error``
    (predicted / measured - 1) and ``cublas_error``: the law with the catalog's parameters, as ``hnplan gemm``
    and the inference planner run it (the chip's cuBLAS-fitted schedule with split-K, the catalog's FP8 ceiling;
    the training planner also applies ``sustained_compute_fraction``), for comparison."""
    cat = catalog or load_catalog()
    acc = accelerator or cat.accelerator(DEEPGEMM_ACCELERATOR)
    tab = deepgemm_table(cat)
    boost = at_boost_clock(acc)
    pred, block_m, block_n = [], [], []
    for r in tab.itertuples():
        kern = deepgemm_kernel(boost, r.layout, r.m_tokens, r.n, r.groups)
        block_m.append(kern.gemm_tile_mnk[0])
        block_n.append(kern.gemm_tile_mnk[1])
        pred.append(float(predict_table(kern, tab.loc[[r.Index]])[0]))
    pred = np.asarray(pred)
    cublas = predict_table(acc, tab)
    _, split = gemm_compute_s(
        acc, "fp8", *(tab[c].to_numpy(float) for c in ("m_tokens", "n", "k", "groups"))
    )  # where the planners' law splits K
    return tab.assign(
        block_m=block_m,
        block_n=block_n,
        predicted_s=pred,
        error=pred / tab["time_s"] - 1.0,
        cublas_error=cublas / tab["time_s"] - 1.0,
        cublas_split=split,
    )


def tilelang_errors(catalog: Catalog | None = None, accelerator: Accelerator | None = None) -> pd.DataFrame:
    """TileLang's autotuned FP16 and FP8 GEMMs of 8192 x 8192 x K on one H800 SXM
    (``data/reference/tilelang_h800_matmul.csv``; the output in the input's dtype, so FP8 writes 1 byte per element)
    against the law's device time, the output write exposed and at boost clock (module docstring): columns
    ``dtype, m_tokens, n, k, time_s, predicted_s, error``."""
    cat = catalog or load_catalog()
    acc = at_boost_clock(accelerator or cat.accelerator(DEEPGEMM_ACCELERATOR))
    acc = with_params(acc, {"gemm_output_exposed": 1.0})
    ref = cat.reference(TILELANG_TABLE)
    pred = []
    for r in ref.itertuples():
        out_bytes = r.m * r.n * units.dtype_bytes(r.dtype)
        nbytes = (r.m * r.k + r.k * r.n) * units.dtype_bytes(r.dtype) + out_bytes
        pred.append(gemm_device_time_s(acc, r.dtype, r.m, r.n, r.k, nbytes=nbytes, out_bytes=out_bytes)[2])
    out = pd.DataFrame({"dtype": ref["dtype"], "m_tokens": ref["m"], "n": ref["n"], "k": ref["k"]})
    out["time_s"] = units.ms_to_s(ref["latency_ms"].to_numpy(float))
    out["predicted_s"] = np.asarray(pred, dtype=float)
    return out.assign(error=out["predicted_s"] / out["time_s"] - 1.0)
