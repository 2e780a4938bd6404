"""Shape-dependent GEMM throughput: tile and wave quantisation over the chip's SMs / cores.

A GEMM ``C[m, n] = A[m, k] B[k, n]`` runs as output tiles of ``tm x tn`` (the accelerator's
``gemm_tile_mnk``), one tile per SM at a time. Two losses follow ([1]_ Sec. 3):

* tile quantisation: partial tiles at the edges compute padding, useful fraction
  ``m n / (ceil(m / tm) tm ceil(n / tn) tn)``;
* wave quantisation: ``tiles`` work units over ``units`` SMs run in ``ceil(tiles / units)`` waves,
  useful fraction ``tiles / (ceil(tiles / units) units)``.

When there are fewer tiles than SMs, libraries split the K dimension across SMs (split-K [1]_,
Stream-K [2]_); we model it as ``split = min(units // tiles, ceil(k / tk))`` slices per tile.
The result multiplies the catalog's measured large-GEMM efficiency (``matmul_efficiency``, measured
on shapes where both losses vanish).

An accelerator without ``compute_units`` (GB200, Ascend 910C in this catalog) gets no wave term; one
without ``gemm_tile_mnk`` gets neither term. Both are stated in :func:`quantisation_efficiency`.

References
----------
.. [1] NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001 (2023), Sec. 2.3
   (typical tiles), 3.1 (tile quantisation), 3.2 (wave quantisation).
.. [2] Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix
   Multiplication on the GPU", PPoPP 2023, arXiv:2301.03598.
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.counts import achievable_flops_per_s, achievable_hbm_Bps


def quantisation_efficiency(m, n, k, groups, tile_mnk, compute_units):
    """Useful fraction of a GEMM's tile work after tile and wave quantisation [-].

    Parameters
    ----------
    m, n, k : float or array
        GEMM shape per group [elements]; ``m`` may be fractional (mean tokens per expert).
    groups : float or array
        Independent GEMMs of that shape run in one kernel (grouped GEMM, batched heads) [-].
    tile_mnk : tuple of 3 int or None
        Output tile and K step [elements]; None: return 1 (no quantisation modelled).
    compute_units : int or None
        SMs / cores; None: tile quantisation only (no wave term).

    Returns
    -------
    float or array
        In (0, 1].

    Examples
    --------
    >>> quantisation_efficiency(8192, 8192, 8192, 1, (128, 128, 64), 132)  # 4096 tiles, 32 waves
    0.9696969696969697
    >>> quantisation_efficiency(200, 128, 4096, 1, (128, 128, 64), None)  # 2 M-tiles, 200 of 256 rows used
    0.78125
    """
    if tile_mnk is None:
        return np.ones_like(np.asarray(m, dtype=float)) if np.ndim(m) else 1.0
    tm, tn, tk = tile_mnk
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    g = np.ceil(np.asarray(groups, dtype=float))
    tiles = g * np.ceil(m / tm) * np.ceil(np.asarray(n, dtype=float) / tn)
    eff = np.asarray(groups, dtype=float) * m * n / (tiles * tm * tn)
    if compute_units is not None:
        eff = eff * wave_efficiency(tiles, k, tk, compute_units)
    return float(eff) if np.ndim(eff) == 0 else eff


def wave_efficiency(tiles, k, tk, compute_units):
    """Useful fraction of the SM-waves that run ``tiles`` work units, with split-K below one wave [-].

    ``split = max(1, min(units // tiles, ceil(k / tk)))``; ``work = tiles x split``;
    ``efficiency = work / (ceil(work / units) x units)`` ([1]_ Sec. 3.2, [2]_).

    >>> wave_efficiency(133, 4096, 64, 132)   # one tile too many: a second, almost empty wave
    0.5037878787878788
    """
    tiles = np.asarray(tiles, dtype=float)
    split = np.maximum(1.0, np.minimum(compute_units // tiles, np.ceil(np.asarray(k, dtype=float) / tk)))
    work = tiles * split
    eff = work / (np.ceil(work / compute_units) * compute_units)
    return float(eff) if np.ndim(eff) == 0 else eff


def gemm_flops_per_s(acc: Accelerator, dtype: str, m, n, k, groups=1):
    """Achievable FLOP/s of a GEMM shape: dense peak x ``matmul_efficiency`` x quantisation [FLOP/s].

    Raises
    ------
    InputError
        If the accelerator has no peak for ``dtype``.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> h100 = load_catalog().accelerator("h100-sxm")
    >>> round(gemm_flops_per_s(h100, "bf16", 8192, 8192, 8192) / 1e12)  # 989.4 x 0.803 x 0.97
    770
    """
    return achievable_flops_per_s(acc, dtype) * quantisation_efficiency(m, n, k, groups, acc.gemm_tile_mnk,
                                                                        acc.compute_units)


def with_matmul_efficiency(acc: Accelerator, efficiency: dict) -> Accelerator:
    """A copy of ``acc`` whose ``matmul_efficiency`` has the dtypes of ``efficiency`` (dtype -> fraction
    of the dense peak) replaced; the other dtypes and fields are unchanged. Used for calibrations measured
    elsewhere than the catalog's micro-benchmark (a software stack's in-training value).

    >>> from hnplan.catalog import load_catalog
    >>> a100 = load_catalog().accelerator("a100-sxm-80gb")
    >>> with_matmul_efficiency(a100, {"bf16": 0.7}).matmul_efficiency["bf16"], a100.matmul_efficiency["bf16"]
    (0.7, 0.869)
    """
    return acc.model_copy(update={"matmul_efficiency": {**acc.matmul_efficiency, **efficiency}})


def kernel_overhead_s(acc: Accelerator) -> float:
    """Fixed time per kernel (catalog ``kernel_overhead_us``; 0 when absent) [s]."""
    return units.us_to_s(acc.kernel_overhead_us or 0.0)


def gemm_roofline(acc: Accelerator, dtype: str, m: int, n: int, k: int) -> dict:
    """Roofline of one GEMM ``C[m, n] = A[m, k] B[k, n]`` with inputs in ``dtype`` and a bf16 output.

    Returns
    -------
    dict
        ``flops`` = 2 m n k [FLOP], ``bytes`` = (m k + k n) x dtype bytes + 2 m n [bytes],
        ``intensity`` [FLOP/byte], ``time_s`` [s] (roofline + kernel overhead) and ``bound``
        (``"compute"`` or ``"memory"``).

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> g = gemm_roofline(load_catalog().accelerator("h100-sxm"), "bf16", 8192, 8192, 8192)
    >>> g["bound"], round(g["time_s"] * 1e3, 3)
    ('compute', 1.429)
    """
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n) * units.dtype_bytes(dtype) + 2.0 * m * n
    t_c = flops / gemm_flops_per_s(acc, dtype, m, n, k)
    t_m = nbytes / achievable_hbm_Bps(acc)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes,
            "time_s": max(t_c, t_m) + kernel_overhead_s(acc), "bound": "compute" if t_c >= t_m else "memory"}
