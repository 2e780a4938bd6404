"""PyTorch's SM90 grouped GEMM (``torch._grouped_mm``) as its CUTLASS kernel runs it, under the GEMM law.

``torch._grouped_mm`` on Hopper with CUDA before 13.2 runs one CUTLASS 3.x grouped kernel
(``aten/src/ATen/native/cuda/GroupMM.cu`` at pytorch/pytorch commit 117b863; the cuBLAS grouped path of
``CublasGroupedArgs.cu`` needs CUDA >= 13.2). Read from that file and CUTLASS's grouped tile scheduler, the
kernel differs from the cuBLAS GEMMs the Hopper law was fitted to (:mod:`hnplan.compute.gemm`) in five ways,
each taken from the code, not fitted:

* **the tile**, chosen once per call from the mean group shape: ``M <= 128 or N <= 128`` (``small``):
  64 x 128 x 128 (M x N x K), ping-pong schedule (``KernelPtrArrayTmaWarpSpecializedPingpong``); otherwise
  128 x 256 x 64, cooperative schedule (``KernelPtrArrayTmaWarpSpecializedCooperative``);
* **the rows**: the tokens of a group sit in the tile's M (no swap-AB), so a group of ``m`` tokens computes
  ``ceil(m / tm)`` whole tiles of ``tm`` rows, and the 2 x 1 x 1 thread-block cluster rounds that count up to a
  multiple of 2 (NVIDIA/cutlass ``include/cutlass/gemm/kernel/sm90_tile_scheduler_group.hpp`` at commit 9588870,
  ``PersistentTileSchedulerSm90Group``: ``problem_blocks_m = round_up(ctas_along_m, cluster_shape.m())``): at 32
  tokens a group, 128 rows of MMA per 32 rows of output (the law's cuBLAS calls: 32 rows, swap-AB);
* **no split-K, whole waves**: the persistent grouped scheduler walks the tiles of all the groups over one CTA per
  SM (PyTorch gives it no host problem shapes, so the grid is the SM count) without stream-K or split-K, so a
  partial last wave costs a whole one (``gemm_wave_weight`` 1);
* **the output write**: the cooperative schedule's two math warp groups share one tile and store it after its K
  loop, before the next tile (exposed, ``gemm_output_exposed`` 1); the ping-pong schedule stores one warp
  group's tile while the other runs its K loop (hidden, 0);
* **two kernels**: ``prepare_grouped_gemm_data<<<1, groups>>>`` writes the per-group pointers, shapes and
  strides before the GEMM: one more kernel overhead.

One parameter is the kernel family's own: ``grouped_gemm_overlap_exponent``, the law's ``p`` (how sharply the
weights' stream and the tiles' compute overlap), fitted to the DeepSeek-V3 expert shapes of
``data/reference/h200_kernels.csv`` and checked on the Mixtral ones (docs/compute.md, "PyTorch's grouped
GEMM"); an accelerator without it keeps ``gemm_overlap_exponent``. Bytes are the inputs and output of the real
rows (the padded rows are zero-filled by TMA, not read).
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.gemm import gemm_device_time_s, kernel_overhead_s
from hnplan.compute.lowp_bytes import BF16

# GroupMM.cu @ 117b863, dispatch_bf16_grouped_kernel_on_tile_size (SM90): (tile M, N, K), the schedule
SMALL_TILE = (64, 128, 128)  # ping-pong, M <= 128 or N <= 128
LARGE_TILE = (128, 256, 64)  # cooperative
SMALL_LIMIT = 128  # the dispatch's ``small`` bound on M or N [elements]
CLUSTER_M = 2  # ClusterShape = Shape<_2, _1, _1>
NO_SPLIT_K = 2**31  # a split-K slice longer than any K: the kernel never splits K


def grouped_mm_tile(m, n) -> tuple[tuple[int, int, int], bool]:
    """The tile ``(tm, tn, tk)`` PyTorch's SM90 grouped kernel picks for groups of ``m x n`` and whether its
    schedule is cooperative (output write exposed).

    >>> grouped_mm_tile(32, 4096)
    ((64, 128, 128), False)
    >>> grouped_mm_tile(512, 4096)
    ((128, 256, 64), True)
    """
    small = m <= SMALL_LIMIT or n <= SMALL_LIMIT
    return (SMALL_TILE, False) if small else (LARGE_TILE, True)


def grouped_mm_rows(m, tm: int):
    """Rows of MMA one group of ``m`` tokens computes: ``ceil(ceil(m / tm) / 2) x 2 x tm`` (whole tiles, M
    blocks rounded up to the 2 x 1 cluster) [elements].

    >>> grouped_mm_rows(32, 64), grouped_mm_rows(128, 64), grouped_mm_rows(520, 128)
    (128.0, 128.0, 768.0)
    """
    blocks = np.ceil(np.maximum(np.asarray(m, dtype=float), 1.0) / tm)
    out = np.ceil(blocks / CLUSTER_M) * CLUSTER_M * tm
    return float(out) if np.ndim(out) == 0 else out


def grouped_mm_accelerator(acc: Accelerator, m, n) -> Accelerator:
    """``acc`` with the law's parameters set to the grouped kernel's for groups of ``m x n``: its tile, full
    tiles (no row granularity), whole waves, no split-K, its output exposure and the family's overlap exponent."""
    tile, cooperative = grouped_mm_tile(m, n)
    p = acc.grouped_gemm_overlap_exponent or acc.gemm_overlap_exponent
    return acc.model_copy(
        update={
            "gemm_tile_mnk": list(tile),
            "gemm_row_granularity": None,
            "gemm_wave_weight": 1.0,
            "gemm_splitk_min_k": NO_SPLIT_K,
            "gemm_output_exposed": 1.0 if cooperative else 0.0,
            "gemm_overlap_exponent": p,
        }
    )


def grouped_mm_time_s(acc: Accelerator, dtype: str, groups: int, m: int, n: int, k: int, *, eager: bool = False):
    """Time of one ``torch._grouped_mm`` call over ``groups`` GEMMs of ``m x n x k`` (``m`` tokens per group)
    on an SM90 GPU [s] (module docstring).

    Parameters
    ----------
    acc : Accelerator
        A Hopper accelerator with the GEMM law's fields.
    dtype : str
        Input dtype (``bf16``: the kernel's only one); the output is bf16.
    groups, m, n, k : int
        Groups, tokens per group, output columns, reduction depth [-, elements].
    eager : bool
        Back-to-back calls from eager PyTorch: ``max(t_device, host_dispatch_us)`` (the kernel never splits K).

    Returns
    -------
    float
        Device time of the preparation kernel and the GEMM, or the eager call time [s].

    Raises
    ------
    InputError
        If the accelerator has no ``dtype`` peak.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> h200 = load_catalog().accelerator("h200-sxm")
    >>> t32, t128 = (grouped_mm_time_s(h200, "bf16", 8, m, 4096, 7168) for m in (32, 128))
    >>> 0.9 < t32 / t128 < 1.0   # the same 128 rows of MMA a group, 3 % fewer bytes
    True
    """
    a = grouped_mm_accelerator(acc, m, n)
    rows = grouped_mm_rows(m, a.gemm_tile_mnk[0])
    out_bytes = BF16 * groups * m * n  # the kernel writes bf16 whatever the input
    nbytes = groups * (m * k + k * n) * units.dtype_bytes(dtype) + out_bytes
    t = float(gemm_device_time_s(a, dtype, rows, n, k, groups, nbytes, out_bytes)[2]) + kernel_overhead_s(acc)
    return max(t, units.us_to_s(acc.host_dispatch_us or 0.0)) if eager else t
