"""Shape-dependent GEMM time: an efficiency law with a handful of physical parameters per chip family.

A GEMM ``C[m, n] = A[m, k] B[k, n]`` (``groups`` of them in one kernel) runs as work units of one output
tile ``tm x tn`` (the accelerator's ``gemm_tile_mnk``) over the chip's ``compute_units`` SMs. Its device
time is ([1]_ Sec. 3, [2]_, docs/compute.md)::

    t = (t_c^p + t_m^p)^(1/p) + t_out + t_launch + [split > 1] t_splitk

    t_c   = waves x 2 rows tn (k / split + k0) / (peak x eta / units)     compute, tile by tile
    t_m   = (bytes - e x out_bytes) / (HBM bandwidth x hbm_efficiency)    streamed while the tiles compute
    t_out = e x out_bytes / (HBM bandwidth x hbm_efficiency)              output written after the K loop

* ``rows``: the tile height ``tm``; below one tile, the rows padded to ``gemm_row_granularity`` (small-M
  kernels put the tokens in the instruction's N dimension, multiples of 8 on Hopper);
* ``split``: split-K slices when there are fewer tiles than SMs, ``max(1, min(units // tiles, k //
  gemm_splitk_min_k))``; each slice pays the reduction ``t_splitk`` (``gemm_splitk_us``);
* ``waves = max(work / units, 1) + w (ceil(work / units) - max(work / units, 1))``, ``work = tiles x split``:
  wave quantisation with the weight ``w`` (``gemm_wave_weight``) of the partial last wave (1: a full wave;
  0: balanced tails as stream-K schedules them [2]_);
* ``k0`` (``gemm_k_overhead``): prologue and epilogue of a tile in K elements of main-loop time, so
  short K pays;
* ``eta`` (``gemm_efficiency``): the large-shape ceiling as a fraction of the dense peak;
* ``p`` (``gemm_overlap_exponent``): how sharply the compute and memory times overlap (infinity: the
  plain roofline ``max``); below the ridge the weights stream from HBM and the launch cost shows;
* ``e`` (``gemm_output_exposed``): the share of the output write that waits for the K loop: a tile writes its
  output once its main loop is done (``tma_store_wait`` before the next tile in DeepGEMM's persistent FP8 kernel
  [3]_; every tile of a non-persistent kernel), so at short K the write adds to the compute instead of hiding
  behind it. TileLang's 8192 x 8192 x K sweep on the H800 [4]_ isolates it: with e = 1 the law's FP16 error
  stays within +7..+14 % from K = 256 to 16,384, with e = 0 it runs from -26 % to +5 %
  (:func:`hnplan.validation.gemm_kernels.tilelang_errors`);
* ``t_launch`` (``kernel_overhead_us``).

An eager framework adds a host floor: back-to-back calls take ``max(t_device, host_dispatch_us)`` plus the
split-K reduction (:func:`gemm_time_s` with ``eager=True``; the planners never use it).

The parameters of the Hopper family are fitted once, by :func:`hnplan.validation.gemm_fit.fit_gemm_law`, to
193 bf16 GEMMs timed on one H200 (``data/reference/h200_gemm_bf16.csv``), and carried to H100 / H800 and to
other dtypes through their peaks, bandwidths and SM counts (the accelerator YAMLs say which values are
carried). An accelerator without a law field gets that term off (the older model): no ``gemm_efficiency``
-> ``matmul_efficiency``; no ``gemm_k_overhead`` -> 0; no ``gemm_overlap_exponent`` -> ``max``; no
``gemm_row_granularity`` -> full tiles; no ``gemm_splitk_min_k`` -> the tile's K step; no ``gemm_wave_weight``
-> 1; no ``gemm_output_exposed`` -> 0 (the output streams with the inputs); no ``compute_units`` -> no wave
term; no ``gemm_tile_mnk`` -> no quantisation at all.

References
----------
.. [1] NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001 (2023), Sec. 2.3
   (typical tiles), 3.1 (tile quantisation), 3.2 (wave quantisation).
.. [2] Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix
   Multiplication on the GPU", PPoPP 2023, arXiv:2301.03598.
.. [3] deepseek-ai/DeepGEMM, ``deep_gemm/include/deep_gemm/fp8_gemm.cuh`` at commit 55ab91f (2025-03-25):
   the math warp groups write the tile through shared memory and a TMA store after the K loop.
.. [4] tile-ai/tilelang, ``benchmark/matmul/README.md`` and ``benchmark/matmul_fp8/README.md`` (H800 SXM,
   2025-10-19; ``data/reference/tilelang_h800_matmul.csv``).
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.counts import achievable_hbm_Bps, peak_flops_per_s


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


def _scalar(a):
    """A 0-d result as a float, arrays unchanged."""
    return float(a) if np.ndim(a) == 0 else a


def _law(acc: Accelerator, dtype: str) -> tuple:
    """The law's parameters for ``dtype`` on ``acc``, with the documented defaults for absent fields."""
    peak = peak_flops_per_s(acc, dtype)
    eta = (acc.gemm_efficiency or {}).get(dtype, acc.matmul_efficiency[dtype])
    return (
        peak,
        eta,
        acc.gemm_k_overhead or 0.0,
        acc.gemm_overlap_exponent,
        acc.gemm_row_granularity,
        acc.gemm_splitk_min_k,
        units.us_to_s(acc.gemm_splitk_us or 0.0),
        1.0 if acc.gemm_wave_weight is None else acc.gemm_wave_weight,
    )


def gemm_compute_s(acc: Accelerator, dtype: str, m, n, k, groups=1.0):
    """Compute time of a GEMM shape under the law, tile by tile (module docstring) [s], and the split-K factor.

    Parameters
    ----------
    m, n, k : float or array
        Shape per group [elements]; ``m`` may be fractional (mean tokens per expert).
    groups : float or array
        GEMMs of that shape in one kernel [-].

    Returns
    -------
    tuple of (float or array, float or array)
        ``(t_c [s], split [-])``.

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.
    """
    peak, eta, k0, _, gran, kmin, _, w = _law(acc, dtype)
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    n, k = np.asarray(n, dtype=float), np.asarray(k, dtype=float)
    g = np.asarray(groups, dtype=float)
    if acc.gemm_tile_mnk is None:
        t = 2.0 * g * m * n * (k + k0) / (peak * eta)
        return t, np.ones_like(t)
    tm, tn, tk = acc.gemm_tile_mnk
    rows = np.where(m < tm, gran * np.ceil(m / gran), tm) if gran else np.full_like(m, float(tm))
    tiles = np.ceil(g) * np.ceil(m / tm) * np.ceil(n / tn)
    if acc.compute_units is None:  # no SM count: tile quantisation only, one long wave
        t = tiles * 2.0 * rows * tn * (k + k0) / (peak * eta)
        return t, np.ones_like(t)
    u = acc.compute_units
    depth = np.floor(k / kmin) if kmin else np.ceil(k / tk)
    split = np.maximum(1.0, np.minimum(u // tiles, depth))
    work = tiles * split
    full = np.maximum(work / u, 1.0)
    waves = full + w * (np.ceil(work / u) - full)
    t = waves * 2.0 * rows * tn * (k / split + k0) / (peak * eta / u)
    return t, split


def gemm_device_time_s(acc: Accelerator, dtype: str, m, n, k, groups=1.0, nbytes=None, out_bytes=None):
    """Device time of GEMMs under the law (module docstring): ``(t_c, t_m, t)`` [s].

    Parameters
    ----------
    m, n, k, groups
        As :func:`gemm_compute_s`.
    nbytes : float or array, optional
        HBM bytes the kernel moves [bytes]; default: inputs in ``dtype`` (``groups (m k + k n)``) and a
        16-bit output (``groups m n``).
    out_bytes : float or array, optional
        Of ``nbytes``, the bytes of the output [bytes]; default: a 16-bit output, ``2 groups m n`` (at most
        ``nbytes``).

    Returns
    -------
    tuple of three floats or arrays
        Compute time ``t_c``, memory time ``t_m`` of all the bytes and device time ``t`` (combined, plus the
        exposed output write, the launch and the split-K reduction) [s].

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.
    """
    tc, split = gemm_compute_s(acc, dtype, m, n, k, groups)
    g, m_ = np.asarray(groups, dtype=float), np.asarray(m, dtype=float)
    if nbytes is None:
        nbytes = g * (m_ * k + np.asarray(k, dtype=float) * n) * units.dtype_bytes(dtype) + 2.0 * g * m_ * n
    nbytes = np.asarray(nbytes, dtype=float)
    out = np.minimum(2.0 * g * m_ * n if out_bytes is None else np.asarray(out_bytes, dtype=float), nbytes)
    bw = achievable_hbm_Bps(acc)
    t_out = (acc.gemm_output_exposed or 0.0) * out / bw
    t = _overlap(acc, tc, nbytes / bw - t_out) + t_out + kernel_overhead_s(acc) + _splitk_s(acc, dtype, split)
    return _scalar(tc), _scalar(nbytes / bw), _scalar(t)


def multi_stream_gemm_time_s(acc: Accelerator, dtype: str, m, n, k, groups, streams: int, nbytes=None):
    """Device time of ``groups`` equal GEMMs launched one per group on ``streams`` CUDA streams [s].

    Transformer Engine's ``GroupedLinear`` runs an MoE layer's local experts through ``general_grouped_gemm``
    -> ``nvte_multi_stream_cublas_gemm``, one cuBLAS GEMM per expert, expert ``i`` on compute stream
    ``i % streams`` ([5]_; ``streams`` = 4). At most ``streams`` expert GEMMs run at once, so the GEMMs
    fill the SMs in rounds of ``streams`` concurrent kernels, each round with its own tile and wave
    quantisation, streamed bytes and kernel overhead, instead of one pool of ``groups`` x tiles as in a
    grouped kernel::

        t = floor(g / S) t_law(S groups) + t_law(g - S floor(g / S) groups)     S = min(streams, g)

    with the bytes split evenly over the groups. The concurrent GEMMs share the SMs as one pool in a round
    (assumption: the hardware scheduler places the blocks of the ``S`` kernels side by side). Never below
    one grouped kernel over all the groups (:func:`gemm_device_time_s` with ``groups``): a split-K that the
    round's few tiles would allow does not make separate kernels faster than the single grouped kernel.

    Parameters
    ----------
    m, n, k : float or array
        Shape per group [elements]; ``m`` may be fractional (mean tokens per expert).
    groups : float or array
        GEMMs (local experts that receive tokens; may be fractional, an expected count) [-], >= 1.
    streams : int
        Concurrent CUDA streams [-], >= 1.
    nbytes : float or array, optional
        HBM bytes of all the groups [bytes]; default as :func:`gemm_device_time_s`.

    Returns
    -------
    float or array
        Device time of all the groups [s].

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.

    References
    ----------
    .. [5] NVIDIA/TransformerEngine, ``transformer_engine/common/gemm/cublaslt_gemm.cu``
       (``nvte_multi_stream_cublas_gemm``: GEMM ``i`` on ``get_compute_stream(i % num_streams)``) and
       ``transformer_engine/common/util/multi_stream.cpp`` (``num_compute_streams = 4``), TE 2.x.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> h200 = load_catalog().accelerator("h200-sxm")
    >>> one = gemm_device_time_s(h200, "bf16", 512, 1536, 2048, 16)[2]
    >>> bool(multi_stream_gemm_time_s(h200, "bf16", 512, 1536, 2048, 16, 4) > one)
    True
    """
    g = np.maximum(np.asarray(groups, dtype=float), 1.0)
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    if nbytes is None:
        nbytes = g * (m * k + k * n) * units.dtype_bytes(dtype) + 2.0 * g * m * n
    per = np.asarray(nbytes, dtype=float) / g  # bytes of one group
    s = np.minimum(float(streams), g)
    rounds = np.floor(g / s)
    rest = g - rounds * s
    t_round = gemm_device_time_s(acc, dtype, m, n, k, s, per * s, 2.0 * s * m * n)[2]
    t_rest = gemm_device_time_s(acc, dtype, m, n, k, np.maximum(rest, 1e-9), per * rest, 2.0 * rest * m * n)[2]
    t = rounds * t_round + np.where(rest > 1e-9, t_rest, 0.0)
    return _scalar(np.maximum(t, gemm_device_time_s(acc, dtype, m, n, k, g, nbytes)[2]))


def _overlap(acc: Accelerator, t_c, t_m):
    """The law's smooth roofline of a compute and a streamed-memory time, ``(t_c^p + t_m^p)^(1/p)`` [s]."""
    p = acc.gemm_overlap_exponent
    return np.maximum(t_c, t_m) if p is None else (t_c**p + t_m**p) ** (1.0 / p)


def _splitk_s(acc: Accelerator, dtype: str, split):
    """The split-K reduction where the law splits K, else 0 [s]."""
    return np.where(np.asarray(split) > 1, _law(acc, dtype)[6], 0.0)


def gemm_time_s(acc: Accelerator, dtype: str, m, n, k, groups=1.0, *, eager: bool = False):
    """Time of a GEMM call [s]: the device time, or with ``eager`` what back-to-back calls from an eager
    framework take, ``max(t_device - t_splitk, host_dispatch_us) + t_splitk`` (the host floor, catalog
    ``host_dispatch_us``; 0 when absent).

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> h200 = load_catalog().accelerator("h200-sxm")
    >>> t = gemm_time_s(h200, "bf16", 16384, 16384, 16384)
    >>> 600 < 2 * 16384 ** 3 / t / 1e12 < 800   # large shapes: the fitted ceiling
    True
    """
    _, _, t = gemm_device_time_s(acc, dtype, m, n, k, groups)
    if not eager or not acc.host_dispatch_us:
        return t
    _, split = gemm_compute_s(acc, dtype, m, n, k, groups)
    extra = np.where(split > 1, units.us_to_s(acc.gemm_splitk_us or 0.0), 0.0)
    out = np.maximum(np.asarray(t) - extra, units.us_to_s(acc.host_dispatch_us)) + extra
    return float(out) if np.ndim(out) == 0 else out


def gemm_flops_per_s(acc: Accelerator, dtype: str, m, n, k, groups=1):
    """Compute-side FLOP rate of a GEMM shape under the law, ``2 groups m n k / t_c`` [FLOP/s].

    Raises
    ------
    InputError
        If the accelerator has no peak for ``dtype``.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> a100 = load_catalog().accelerator("a100-sxm-80gb")
    >>> round(gemm_flops_per_s(a100, "bf16", 8192, 8192, 8192) / 1e12) > 200
    True
    """
    tc, _ = gemm_compute_s(acc, dtype, m, n, k, groups)
    f = 2.0 * np.asarray(groups, dtype=float) * np.maximum(np.asarray(m, dtype=float), 1.0) * n * k / tc
    return float(f) if np.ndim(f) == 0 else f


def with_matmul_efficiency(acc: Accelerator, efficiency: dict) -> Accelerator:
    """A copy of ``acc`` whose ``matmul_efficiency`` has the dtypes of ``efficiency`` (dtype -> fraction
    of the dense peak) replaced; the other dtypes and fields are unchanged. Used for calibrations measured
    elsewhere than the catalog's micro-benchmark (a software stack's in-training value).

    >>> from hnplan.catalog import load_catalog
    >>> a100 = load_catalog().accelerator("a100-sxm-80gb")
    >>> with_matmul_efficiency(a100, {"bf16": 0.7}).matmul_efficiency["bf16"], a100.matmul_efficiency["bf16"]
    (0.7, 0.869)
    """
    update = {"matmul_efficiency": {**acc.matmul_efficiency, **efficiency}}
    if acc.gemm_efficiency is not None:  # the stack's in-training value is the law's large-shape ceiling
        update["gemm_efficiency"] = {**acc.gemm_efficiency, **efficiency}
    return acc.model_copy(update=update)


def kernel_overhead_s(acc: Accelerator) -> float:
    """Fixed time per kernel (catalog ``kernel_overhead_us``; 0 when absent) [s]."""
    return units.us_to_s(acc.kernel_overhead_us or 0.0)


def gemm_roofline(acc: Accelerator, dtype: str, m: int, n: int, k: int, *, eager: bool = False) -> dict:
    """One GEMM ``C[m, n] = A[m, k] B[k, n]`` with inputs in ``dtype`` and a bf16 output, under the law.

    Returns
    -------
    dict
        ``flops`` = 2 m n k [FLOP], ``bytes`` = (m k + k n) x dtype bytes + 2 m n [bytes],
        ``intensity`` [FLOP/byte], ``compute_time_s`` and ``memory_time_s`` (the law's two terms) [s],
        ``time_s`` [s] (:func:`gemm_time_s`), ``tflops`` (attained) [TFLOP/s] and ``bound``
        (``"compute"`` or ``"memory"``: the larger term; ``"launch"`` where the fixed time of the call, the
        launch and split-K reduction and with ``eager`` the host floor, is more than half of ``time_s``:
        a tiny GEMM waits on its launch, not on its FLOPs or bytes).

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> g = gemm_roofline(load_catalog().accelerator("h100-sxm"), "bf16", 1, 8192, 8192)
    >>> g["bound"]
    'memory'
    >>> gemm_roofline(load_catalog().accelerator("h100-sxm"), "bf16", 1, 1, 1)["bound"]
    'launch'
    """
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n) * units.dtype_bytes(dtype) + 2.0 * m * n
    t_c, t_m, t_dev = gemm_device_time_s(acc, dtype, m, n, k)
    t = gemm_time_s(acc, dtype, m, n, k, eager=eager)
    _, split = gemm_compute_s(acc, dtype, m, n, k)
    work = t_dev - kernel_overhead_s(acc) - float(_splitk_s(acc, dtype, split))
    return {
        "flops": flops,
        "bytes": nbytes,
        "intensity": flops / nbytes,
        "compute_time_s": t_c,
        "memory_time_s": t_m,
        "time_s": t,
        "tflops": units.flops_per_s_to_tflops(flops / t),
        "bound": "launch" if t - work > work else ("compute" if t_c >= t_m else "memory"),
    }
