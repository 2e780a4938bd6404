"""The fused attention kernel's time law: work units of query tiles walking their keys, a prologue and a tail,
the pass's ceiling, the softmax exponentials on their own pipeline, FP8's gain on the tensor pipeline, and the key
tiles a sliding window walks (docs/compute.md, "Attention"). Split from :mod:`hnplan.compute.attention`, which builds
the operator rows and re-exports these.

References
----------
.. [2] Dao, "FlashAttention-2", arXiv:2307.08691, Sec. 3.1-3.2 and 4.1 (backward FLOPs = 2.5 x forward).
.. [5] NVIDIA/cudnn-frontend, ``benchmark/sdpa_benchmark_training/benchmark_single_sdpa.py`` (``flops``:
   forward ``d_qk + d_v``, backward ``3 d_qk + 2 d_v`` per score element, times two).
.. [6] NVIDIA PTX ISA, Tensor Memory of ``tcgen05`` (sm_100): 128 lanes x 512 columns of 32-bit cells per CTA;
   NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 256 KB register file per SM.
.. [7] Dao-AILab/flash-attention, ``flash_attn/cute/flash_bwd_sm100.py`` (tensor-memory layout of the
   head-dimension-192 / 128 backward, pull request 2270).
.. [8] Dao-AILab/flash-attention, ``hopper/flash_bwd_launch_template.h`` (``run_mha_bwd_hdim128``: 64 x 128
   blocks; ``run_mha_bwd_hdim192``: 64 x 96).
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Accelerator
from hnplan.compute.counts import achievable_flops_per_s, peak_flops_per_s
from hnplan.compute.gemm import wave_efficiency

FLASH_BWD_FACTOR = 2.5  # FlashAttention-2 [2]_: backward = 2.5 x forward FLOPs (5 matmuls vs 2)


def flash_bwd_factor(d_qk, d_v):
    """Executed FLOPs of the FlashAttention backward over its forward [-]: the forward's two matmuls per score
    (``Q K^T`` over ``d_qk``, ``P V`` over ``d_v``) against the backward's five ([2]_ Algorithm 2: ``S = Q K^T``
    recomputed, ``dQ = dS K`` and ``dK = dS^T Q`` over ``d_qk``; ``dP = dO V^T`` and ``dV = P^T dO`` over ``d_v``),
    ``(3 d_qk + 2 d_v) / (d_qk + d_v)``: :data:`FLASH_BWD_FACTOR` (2.5) for equal head dimensions, 2.6 for
    DeepSeek-V3's MLA (192 / 128), as NVIDIA's cuDNN SDPA benchmark counts them ([5]_)."""
    return (3.0 * d_qk + 2.0 * d_v) / (d_qk + d_v)


def band_keys(window, s_kv):
    """Keys a query of a causal band attends to on average [keys]: ``w - w^2 / (2 s_kv)`` with ``w = min(window,
    s_kv)``, the continuous area of a window ``w`` wide under the diagonal of the ``s_kv x s_kv`` causal triangle
    over its rows (``s_kv / 2`` for a window of the whole sequence). The one place the band is counted: the sliding
    kernels' FLOPs (:func:`_attention_fwd_flops`), their walked key tiles (:func:`sliding_tile_ratio`) and the
    validation rows of cuDNN's kernels (:mod:`hnplan.validation.attention_d64`).

    >>> [float(band_keys(w, 4096)) for w in (128, 4096, 9000)]
    [126.0, 2048.0, 2048.0]
    """
    s = np.asarray(s_kv, dtype=float)
    w = np.minimum(np.asarray(window, dtype=float), s)
    return w - w * w / (2.0 * s)


def causal_attention_flops(groups, s, d, window=None, backward=False):
    """Executed FLOPs of a causal self-attention kernel over ``s`` queries and keys of ``groups`` (sequence, head)
    pairs at mean head dimension ``d`` [FLOP]: ``4 d`` per score of the band (:func:`band_keys`; ``window`` None:
    the whole sequence, ``s / 2`` keys a query), times :data:`FLASH_BWD_FACTOR` backward (equal head dimensions).

    >>> float(causal_attention_flops(256, 4096, 64)) == 4 * 64 * 256 * 4096 * 2048
    True
    """
    keys = band_keys(s if window is None else window, s)
    fwd = 4.0 * np.asarray(d, dtype=float) * np.asarray(groups, dtype=float) * np.asarray(s, dtype=float) * keys
    return fwd * np.where(backward, FLASH_BWD_FACTOR, 1.0)


def query_tile(acc: Accelerator):
    """Query rows of a fused attention kernel's work unit on ``acc`` [rows]: ``attention_tile_q``, else the GEMM
    law's tile rows; None without either."""
    return acc.attention_tile_q or (acc.gemm_tile_mnk[0] if acc.gemm_tile_mnk else None)


def attention_compute_s(acc: Accelerator, flops, s_q, s_kv, d, groups, backward):
    """Compute time of fused attention kernels under the attention law (docs/compute.md) [s].

    Work units are query tiles of ``tq`` rows (``attention_tile_q``) of every (sequence, head) pair
    (``groups``); each walks its keys (all of them, or up to the diagonal when causal) and pays a prologue /
    epilogue of ``c0`` keys (``attention_kv_overhead``). The units share the SMs; the longest one (the last
    query tile, ``s_kv`` keys) leaves a tail of weight ``tau`` (``attention_tail_weight``)::

        t = flops (1 + c0 / keys) / (peak x eta_pass x wave) + tau x 2 tq 2 d (s_kv + c0) x f_pass / (peak x eta_pass / units)

    with ``keys`` the mean keys per query row (from the executed FLOPs, ``flops / (4 d s_q groups f_pass)``),
    ``f_pass`` = 1 forward, 2.5 backward ([2]_; the backward's keys and tail take 2.5 for MLA's 2.6 too, 4 %
    in these small terms), ``eta_pass`` the pass's ceiling (``attention_efficiency``) and ``wave`` the split
    along the keys when there are fewer units than SMs (decode; :func:`wave_efficiency`). Without the law's
    fields: the bf16 GEMM ceiling, ``c0 = tau = 0``. The softmax exponentials run on their own pipeline: ``t``
    is multiplied by :func:`exp_pipeline_factor` (1 without the chip's SFU rate) and, for FP8 kernels, divided by
    the pass's ``attention_fp8_ratio``.

    The backward keeps four fp32 accumulators per work unit on chip: the scores ``S``/``P`` and their gradient
    ``dP``/``dS`` (``tq`` columns each) and ``dK``, ``dV`` (``d_qk + d_v = 2 d`` columns), in the SM's
    ``C`` = ``attention_bwd_accumulator_columns`` (Blackwell's tensor memory: 128 lanes x 512 columns of 32 bits
    [6]_; Hopper's register file, the same 256 KB). The ceilings were measured at head dimension 128, where
    ``2 tq + 2 d`` = 512 fills it; wider heads overflow it, the kernel shares columns between accumulators
    and serialises the MMAs that write them (FlashAttention-4's head-dimension-192 backward overlaps ``S``/``P``
    with ``dP``/``dS`` [7]_; FlashAttention-3's shrinks its key block from 128 to 96 [8]_), and the backward
    ceiling scales by ``min(1, C / (2 tq + 2 d))``: 0.889 for DeepSeek-V3's MLA (192 / 128).

    Parameters
    ----------
    flops : array
        Executed FLOPs of each kernel [FLOP].
    s_q, s_kv, d, groups : array
        Query and key lengths [tokens], mean head dimension ``(d_qk + d_v) / 2`` [-], (sequence, head)
        pairs [-].
    backward : array of bool
        Whether the row is a backward kernel.
    """
    s_q, s_kv, d, g = (np.asarray(a, dtype=float) for a in (s_q, s_kv, d, groups))
    backward = np.asarray(backward, dtype=bool)
    peak = peak_flops_per_s(acc, "bf16")
    ae = acc.attention_efficiency or {}
    base = achievable_flops_per_s(acc, "bf16") / peak
    f_pass = np.where(backward, FLASH_BWD_FACTOR, 1.0)
    c0, tau = acc.attention_kv_overhead or 0.0, acc.attention_tail_weight or 0.0
    wave = np.ones_like(s_q)
    tq = query_tile(acc)
    eta_bwd = ae.get("bwd", base)
    if acc.attention_bwd_accumulator_columns and tq is not None:  # accumulators beyond the SM's capacity
        eta_bwd = eta_bwd * np.minimum(1.0, acc.attention_bwd_accumulator_columns / (2.0 * tq + 2.0 * d))
    eta = np.where(backward, eta_bwd, ae.get("fwd", base))
    if tq is not None and acc.compute_units is not None and acc.gemm_tile_mnk is not None:
        tiles = np.ceil(g) * np.ceil(np.maximum(s_q, 1.0) / tq)
        wave = wave_efficiency(tiles, s_kv, acc.gemm_tile_mnk[1], acc.compute_units)
    keys = np.maximum(np.asarray(flops, dtype=float) / (4.0 * d * np.maximum(s_q, 1.0) * g * f_pass), 1.0)
    t = np.asarray(flops, dtype=float) * (1.0 + c0 / keys) / (peak * eta * wave)
    if tau and tq is not None and acc.compute_units is not None:
        rows = np.minimum(np.maximum(s_q, 1.0), tq)
        t = t + tau * 4.0 * rows * d * (s_kv + c0) * f_pass / (peak * eta / acc.compute_units)
    r8 = acc.attention_fp8_ratio
    if not r8:
        return t * exp_pipeline_factor(acc, d, backward, eta)
    # FP8 kernels: the measured FP8 / bf16 rate of the whole kernel at the head dimension it was measured at
    ratio = np.where(backward, r8.get("bwd", 1.0), r8.get("fwd", 1.0))
    d_ref = acc.attention_fp8_ratio_head_dim
    if not d_ref:
        return t * exp_pipeline_factor(acc, d, backward, eta) / ratio
    r_mma = fp8_tensor_ratio(acc, ratio, d_ref, backward, eta)
    # the tensor-core pipeline r_mma times as fast, the exponentials not: their share grows by r_mma
    return t / r_mma * exp_pipeline_factor(acc, d, backward, eta * r_mma)


def fp8_tensor_ratio(acc: Accelerator, ratio, d_ref, backward, eta):
    """The FP8 / bf16 rate of a fused attention kernel's tensor-core pipeline alone [-], from the whole kernel's
    measured ``ratio`` at head dimension ``d_ref``: FP8 halves the matmuls' time, not the softmax exponentials'
    (their MUFU rate is the same in either precision), so the whole kernel gains ``F(rho) r / F(rho r)`` where ``F``
    is :func:`exp_pipeline_factor` and ``rho`` the exponential share at ``d_ref`` (:func:`exp_share`). Solved for
    ``r`` by bisection per element; where the law's exponentials cannot reach ``ratio`` (it exceeds ``F(rho) / rho``,
    the gain of an infinitely fast tensor pipeline) or the chip has no SFU rate, the whole kernel's ratio is the
    tensor one. At head dimension 64 the exponentials weigh twice as much, so the kernel gains less: GB300 forward
    1.334 at 128 (``megatron-bridge-2608-mxfp8``) is a tensor ratio of 1.42 and a whole-kernel 1.18 at 64, GB200
    1.197 a tensor 1.49 and 1.06 at 64, against cuDNN's MXFP8 / bf16 sliding-window forward at gpt-oss's shape,
    1.15 and 1.03 (NVIDIA/cudnn-frontend results/gpt_oss, 4,096 tokens; data/reference/cudnn_sdpa_gpt_oss.csv)."""
    ratio, eta, d_ref = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (ratio, eta, d_ref)))
    backward = np.broadcast_to(np.asarray(backward, dtype=bool), np.broadcast_shapes(np.shape(backward), ratio.shape))
    ratio, eta, d_ref = (np.broadcast_to(a, backward.shape) for a in (ratio, eta, d_ref))

    def gain(r):
        return exp_pipeline_factor(acc, d_ref, backward, eta) * r / exp_pipeline_factor(acc, d_ref, backward, eta * r)

    lo, hi = np.full(ratio.shape, 0.05), np.full(ratio.shape, 50.0)
    reachable = (gain(lo) <= ratio) & (gain(hi) >= ratio)
    for _ in range(48):  # the gain grows with r: bisection to ~1e-13 of the bracket
        mid = 0.5 * (lo + hi)
        below = gain(mid) < ratio
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.where(reachable, 0.5 * (lo + hi), ratio)


def attention_kernel_s(acc: Accelerator, flops, s_q, s_kv, d, groups, backward, sliding=False):
    """Compute time of fused attention kernels as the operator table times them [s]: :func:`attention_compute_s`,
    a sliding-window kernel's work taken at the key tiles it walks (:func:`sliding_tile_ratio`, over ``s_q`` queries
    with the window ``s_kv``), and its backward as the full causal one where the accelerator's FP8 attention does not
    skip the tiles outside the window (``attention_fp8_sliding_bwd_causal``, :func:`sliding_bwd_as_causal_s`).

    Parameters
    ----------
    flops, s_q, s_kv, d, groups, backward : array
        As :func:`attention_compute_s` (``flops`` the band's FLOPs for a sliding kernel).
    sliding : array of bool or bool
        Whether the kernel is a sliding-window one over its own queries (training or prefill; not decode).
    """
    flops, s_q, s_kv, d, groups = (np.asarray(a, dtype=float) for a in (flops, s_q, s_kv, d, groups))
    backward = np.asarray(backward, dtype=bool)
    sliding = np.broadcast_to(np.asarray(sliding, dtype=bool), flops.shape)
    executed = flops
    tile = query_tile(acc)
    if sliding.any() and tile:  # the key tiles a sliding work unit walks, masked elements multiplied too
        executed = np.where(sliding, flops * sliding_tile_ratio(s_q, s_kv, tile), flops)
    t = attention_compute_s(acc, executed, s_q, s_kv, d, groups, backward)
    if acc.attention_fp8_sliding_bwd_causal and (causal := sliding & backward).any():  # the whole causal triangle
        t = np.where(causal, sliding_bwd_as_causal_s(acc, s_q, d, groups), t)
    return t


def sliding_tile_ratio(s_q, window, tile):
    """Keys a sliding-window kernel multiplies per query row over the keys its band holds [-] (>= 1).

    A work unit of ``tile`` query rows walks whole key tiles of ``tile`` keys: the tiles that overlap its rows'
    windows, ``ceil((w - 1 + tile) / tile)`` of them once the window has filled (``w`` = ``min(window, s_q)``), its
    masked elements multiplied with the rest (FlashAttention-2/3 and cuDNN skip only the tiles wholly outside the mask,
    arXiv:2307.08691 Sec. 3.1.1); the query tiles where the sequence starts walk the tiles up to their own, as a causal
    kernel's do (query tile ``j`` walks ``min(F, j + 1)`` key tiles), so no window walks more than the causal kernel and
    a smaller one never more than a larger. The band holds
    ``w - w^2 / (2 s_q)`` keys a row (:func:`_attention_fwd_flops`). The ratio is taken over the full causal kernel's
    own (its diagonal tiles, in the law's fitted ceilings): 1 for a window of the whole sequence. At gpt-oss's window of
    128 and tiles of 128, 4,096 tokens: two tiles once filled, 252 keys a row on average against 126 (2.00), over the
    causal 1.03: 1.94; a window of 1,024: nine tiles, 1.09. Measured, cuDNN's bf16 sliding-window kernels
    (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training results/gpt_oss and h200_919_only_cudnn) run 36-41 %
    faster in the attention law without this on GB200 and 27-33 % on the H200, 20-30 % and 22-31 % with it (the rest
    the head-dimension-64 rate, docs/compute.md)."""
    s = np.maximum(np.asarray(s_q, dtype=float), 1.0)

    def walked_over_band(w):
        band = band_keys(w, s)
        # the query tile j (of n) walks min(F, j + 1) key tiles: the F a window of w keys overlaps once it has
        # filled, fewer where the sequence starts
        n = np.ceil(s / tile)
        f = np.minimum(np.ceil((w - 1.0 + tile) / tile), n)
        walked = tile * (f * (f + 1.0) / 2.0 + f * (n - f)) / n
        return walked / band

    # over the full causal kernel's own ratio (the law's ceilings were fitted on causal kernels, their diagonal
    # tiles included): 1 for a window of the whole sequence
    # tiles, not a continuum: capped at the causal kernel's own band (a window within a tile of the sequence)
    w = np.minimum(np.asarray(window, dtype=float), s)
    cap = band_keys(s, s) / band_keys(w, s)
    return np.clip(walked_over_band(w) / walked_over_band(s), 1.0, np.maximum(cap, 1.0))


def sliding_bwd_as_causal_s(acc: Accelerator, s_q, d, groups):
    """Compute time of the backward of a sliding-window attention kernel that walks the whole causal triangle,
    its key tiles outside the window not skipped [s]: the full causal backward of ``s_q`` queries (self-attention,
    ``s_kv = s_q``), :func:`causal_attention_flops` (``d`` the mean head dimension), under
    :func:`attention_compute_s` with the accelerator's FP8 ratio. The FP8 and MXFP8 backward of cuDNN 9.22-9.27 on
    GB200 and GB300 at gpt-oss's shape (head dimension 64, window 128; NVIDIA/cudnn-frontend
    benchmark/sdpa_benchmark_training results/gpt_oss) grows with the square of the sequence where the bf16 one
    grows with the sequence: 1.871 ms MXFP8 against 0.442 ms bf16 at 4,096 tokens, 96.9 against 3.45 ms at
    32,768 (GB300, cuDNN 9.22). ``accelerator.attention_fp8_sliding_bwd_causal`` (from the stack's
    ``attention_fp8_sliding_bwd_causal``) turns it on; arrays broadcast."""
    flops = causal_attention_flops(groups, s_q, d, backward=True)
    return attention_compute_s(acc, flops, s_q, s_q, d, groups, np.ones(np.shape(flops), dtype=bool))


def exp_share(acc: Accelerator, d, backward, eta):
    """Time of a fused attention kernel's softmax exponentials over its tensor-core time [-], per score.

    A forward score element costs ``2 (d_qk + d_v) = 4 d`` tensor FLOPs and one exponential, a backward one
    ``2.5 x 4 d`` FLOPs ([2]_) and one exponential (``P`` recomputed from the saved log-sum-exp; FlashAttention-2
    Algorithm 2, FlashAttention-3 arXiv:2407.08608 Sec. 3): with ``F`` = ``tensor_flops_per_clk_per_sm`` and
    ``X`` = ``sfu_exp_per_clk_per_sm`` (the same clock and SMs)::

        rho = (1 / X) / (4 d f_pass / (F eta))  =  F eta / (4 d f_pass X)

    with ``eta`` the pass's tensor ceiling (fraction of the peak); where the chip has ``softmax_fp32_ops_per_score``,
    ``1 / X`` is the score's scalar clocks of :func:`scalar_clk_per_score` (its exponential and FP32 instructions). Hopper at head dimension 128 forward: ``4096 x
    eta / (512 x 16)`` = ``0.5 eta``; Blackwell ``8192 / (512 x 16)`` = ``eta``, Blackwell Ultra ``0.5 eta``
    (twice the MUFU.EX2 rate). Zero without the two rates."""
    f_tc, x = acc.tensor_flops_per_clk_per_sm, acc.sfu_exp_per_clk_per_sm
    if not (f_tc and x):
        return np.zeros(np.shape(d))
    f_pass = np.where(backward, FLASH_BWD_FACTOR, 1.0)
    return (
        f_tc
        * np.asarray(eta, dtype=float)
        * scalar_clk_per_score(acc, backward)
        / (4.0 * np.asarray(d, dtype=float) * f_pass)
    )


def scalar_clk_per_score(acc: Accelerator, backward):
    """Clocks of one SM's scalar pipelines per attention score element [clk]: the exponential at the MUFU rate
    (``1 / sfu_exp_per_clk_per_sm``) plus the pass's other FP32 instructions per score
    (``softmax_fp32_ops_per_score``: the scaling, running max and subtraction, conversions and row sums of the
    online softmax forward, FlashAttention-2 Algorithm 1; the recomputed ``P`` and ``dS = P (dP - D)`` backward,
    Algorithm 2) at ``fp32_ops_per_clk_per_sm``; 0 without a MUFU rate. Hopper runs both on the same SM sub-partitions
    beside the tensor cores (NVIDIA H100 Tensor Core GPU Architecture whitepaper: 128 FP32 lanes and 16 MUFU results
    per clock per SM), so at head dimension 64, where a score carries half the tensor work of 128, the scalar share
    doubles."""
    x = acc.sfu_exp_per_clk_per_sm
    if not x:
        return np.zeros(np.shape(backward))
    ops = acc.softmax_fp32_ops_per_score or {}
    fp32 = acc.fp32_ops_per_clk_per_sm
    extra = np.where(backward, ops.get("bwd", 0.0), ops.get("fwd", 0.0)) / fp32 if (ops and fp32) else 0.0
    return 1.0 / x + extra


def exp_pipeline_factor(acc: Accelerator, d, backward, eta):
    """Time of the tensor-core and exponential pipelines of a fused attention kernel over the tensor time alone
    [-]: ``(1 + rho^p)^(1/p)`` with ``rho`` = :func:`exp_share` and ``p`` the pass's
    ``attention_exp_overlap_exponent`` (absent: ``max(1, rho)``, the exponentials fully hidden below the tensor
    time). Both pipelines run each score element once; FlashAttention-3/4 and cuDNN overlap the softmax of one
    tile with the MMAs of another (arXiv:2407.08608 Sec. 3.1-3.2, arXiv:2603.05451), the forward more
    fully than the backward, whose recomputed ``P`` sits between the ``S`` and ``dV``/``dS`` matmuls."""
    rho = exp_share(acc, d, backward, eta)
    p_by_pass = acc.attention_exp_overlap_exponent
    if not p_by_pass:
        return np.maximum(1.0, rho)
    p = np.where(backward, p_by_pass.get("bwd", np.inf), p_by_pass.get("fwd", np.inf))
    with np.errstate(over="ignore"):
        return np.where(np.isinf(p), np.maximum(1.0, rho), (1.0 + rho**p) ** (1.0 / np.where(np.isinf(p), 1.0, p)))
