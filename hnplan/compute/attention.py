"""The attention core of the operator table: FlashAttention, or the unfused form with materialised scores.

* ``flash`` ([1]_, [2]_): one fused kernel per pass reading Q, K, V and writing O (and the fp32
  log-sum-exp); the ``s x s`` scores never reach HBM. Causal attention executes half the score and
  value FLOPs; the backward executes 2.5x the forward ([2]_: five matmuls, the forward's two plus the
  recomputed scores; :func:`flash_bwd_factor`, 2.6x for MLA's Q/K heads of 192 against V heads of 128).
* ``unfused`` ([3]_, Megatron-LM before FlashAttention): ``attn_scores`` (QK^T, ``torch.baddbmm``) and
  ``attn_context`` (AV, ``torch.bmm``) are batched GEMMs over ``b x heads / tp`` (sequence, head)
  pairs that compute the full score matrix (cuBLAS multiplies every tile: no causal skipping); each
  backward is two GEMMs (the gradients of both operands, same FLOPs and bytes as the forward);
  ``attn_softmax`` (the fused scale + causal-mask + softmax kernel) and, in training, ``attn_dropout``
  are passes over the scores with the bytes of :data:`UNFUSED_BYTES`; ``attn_context_copy`` is the
  permute of the context to ``[s, b, h]``. Selective recomputation ([4]_) re-runs the core (both GEMMs,
  softmax, dropout), full recomputation the whole forward.
* context parallelism (``cp > 1``, flash): Transformer Engine's load-balanced P2P ring, ``cp`` kernels per
  pass and their output / gradient corrections (:mod:`hnplan.compute.context_parallel`).

References
----------
.. [1] Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
   arXiv:2205.14135 (2022).
.. [2] Dao, "FlashAttention-2", arXiv:2307.08691, Sec. 3.1-3.2 and 4.1 (backward FLOPs = 2.5 x forward).
.. [3] NVIDIA Megatron-LM (2020-2021), ``megatron/model/transformer.py`` (``ParallelAttention``:
   ``baddbmm`` for QK^T, ``FusedScaleMaskSoftmax``, attention dropout, ``bmm`` for AV, permute of the
   context) and ``megatron/fused_kernels/scaled_upper_triang_masked_softmax.h``.
.. [4] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   arXiv:2205.05198, Sec. 4.1 (1-byte dropout masks) and 5 (selective recomputation).
.. [5] :mod:`hnplan.compute.attention_law` holds the references of the kernel-time law (cuDNN's FLOP count, tensor
   memory and the register file, FlashAttention's backward tilings).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hnplan.catalog.schemas import Accelerator
from hnplan.compute._op import ACT_BYTES, _ew, _Op
from hnplan.compute.attention_law import (  # noqa: F401 - the law, re-exported: it lived here
    FLASH_BWD_FACTOR,
    attention_compute_s,
    attention_kernel_s,
    band_keys,
    causal_attention_flops,
    exp_pipeline_factor,
    exp_share,
    flash_bwd_factor,
    fp8_tensor_ratio,
    query_tile,
    sliding_bwd_as_causal_s,
    sliding_tile_ratio,
)
from hnplan.compute.context_parallel import ring_correction_op, ring_step_pair, ring_steps
from hnplan.compute.counts import achievable_hbm_Bps
from hnplan.compute.gemm import kernel_overhead_s

ATTENTION_IMPLS = ("flash", "unfused")
# operator kinds of the attention core: the fused FlashAttention kernel, or the unfused form's batched
# GEMMs (QK^T, AV) and its passes over the materialised scores (softmax, dropout)
ATTENTION_KINDS = ("attention", "attention-gemm", "attention-elementwise")
SOFTMAX_FLOPS = 5.0  # scale, max, subtract, exp, sum/divide per score (assumption, as the counts above)
DROPOUT_FLOPS = 2.0  # compare with the random draw, scale
MASK_BYTES = 1.0  # torch dropout keeps a 1-byte (bool) mask per element ([4]_ Sec. 4.1)
CAUSAL_READ_FRACTION = 0.5  # the fused causal softmax reads only the lower triangle (see UNFUSED_BYTES)
# Unfused attention ([3]_, Megatron-LM 2021 ``ParallelAttention``): bytes per score element (one (sequence,
# head, query, key) entry) of each pass over the materialised ``s_q x s_kv`` scores, (forward, backward).
# * softmax: Megatron's fused scale + causal-mask + softmax kernel (``scaled_upper_triang_masked_softmax``)
#   reads the lower triangle and writes the full row (zeros above the diagonal); its backward reads the
#   incoming gradient and the saved softmax output on the lower triangle and writes the full row;
# * dropout (training only): torch dropout reads the probabilities and writes the output and the 1-byte
#   mask; its backward reads the gradient and the mask and writes the input gradient.
# ``r`` = read fraction (CAUSAL_READ_FRACTION for causal masks, 1 otherwise).
UNFUSED_BYTES = {
    "attn_softmax": (lambda r: r * ACT_BYTES + ACT_BYTES, lambda r: r * 2 * ACT_BYTES + ACT_BYTES),
    "attn_dropout": (lambda r: 2 * ACT_BYTES + MASK_BYTES, lambda r: 2 * ACT_BYTES + MASK_BYTES),
}


def unfused_attention(op: _Op, phase: str) -> list[_Op]:
    """The unfused form ([3]_) of a fused attention operator: QK^T, softmax, dropout (training), AV and
    the permute of the context (see the module docstring); ``op`` is a fused ``attention`` operator."""
    g = op.b * op.hq
    elems = g * op.s_q * op.s_kv
    r = CAUSAL_READ_FRACTION if op.causal else 1.0
    ops = [
        _Op(
            "attn_scores",
            "attention-gemm",
            op.scope,
            m=op.s_q,
            n=op.s_kv,
            k=op.d_qk,
            groups=g,
            w_bytes=g * op.d_qk * op.s_kv * ACT_BYTES,
            grad_names=("attn_scores_grad_q", "attn_scores_grad_k"),
        )
    ]
    for name in ("attn_softmax", "attn_dropout") if phase == "train" else ("attn_softmax",):
        fwd, bwd = UNFUSED_BYTES[name]
        ops.append(
            _Op(
                name,
                "attention-elementwise",
                op.scope,
                e_out=elems,
                fwd_bytes_per_elem=fwd(r),
                bwd_bytes_per_elem=bwd(r),
                flops_per_out=SOFTMAX_FLOPS if name == "attn_softmax" else DROPOUT_FLOPS,
            )
        )
    ops.append(
        _Op(
            "attn_context",
            "attention-gemm",
            op.scope,
            m=op.s_q,
            n=op.d_v,
            k=op.s_kv,
            groups=g,
            w_bytes=g * op.s_kv * op.d_v * ACT_BYTES,
            grad_names=("attn_context_grad_p", "attn_context_grad_v"),
        )
    )
    ctx = g * op.s_q * op.d_v
    ops.append(_ew("attn_context_copy", op.scope, ctx, ctx, 0.0))
    return ops


def _attention_fwd_flops(op: _Op, executed: bool) -> float:
    """Forward FLOPs of a fused attention kernel: ``2 b hq (d_qk + d_v)`` per (query, key) pair it counts [FLOP].

    Full attention counts ``s_q s_kv`` pairs, half of them executed when causal. A sliding window ``w``
    (``op.window``, ``w' = min(w, s_kv)``) counts ``s_q w'`` pairs (``model``: every query against a whole
    window, as the full count takes every query against every key) and executes, causal, the band of the
    ``s_q x s_kv`` triangle: ``s_q (w' - w'^2 / (2 s_kv))``, the continuous area, as the full causal count's
    ``s_q s_kv / 2`` is (``w' = s_kv`` gives it; the exact count of whole pairs, ``s w - w (w - 1) / 2`` for
    ``s_q = s_kv = s``, is ``w / 2`` pairs a sequence above, below 0.05 % at gpt-oss's 128 over 4,096 tokens).
    Megatron-Bridge's MFU counts the same band per query, ``w - w (w - 1) / (2 s)`` (``flop_utils.py``
    ``calculate_swa_context`` at 067f987df03b); hnplan's ``model`` convention keeps PaLM's count without the
    causal halving (:mod:`hnplan.compute.operators`), ``w`` a query."""
    if op.window:
        keys = band_keys(op.window, op.s_kv) if (executed and op.causal) else np.minimum(op.window, op.s_kv)
        return 2.0 * op.b * op.hq * op.s_q * keys * (op.d_qk + op.d_v)
    full = 2.0 * op.b * op.hq * op.s_q * op.s_kv * (op.d_qk + op.d_v)
    return full * (0.5 if (executed and op.causal) else 1.0)


def _attention_fwd_bytes(op: _Op) -> float:
    q_o = op.b * op.s_q * op.hq * (op.d_qk + op.d_v)
    kv = op.b * op.s_kv * op.kv_width
    return (q_o + kv) * ACT_BYTES + op.b * op.hq * op.s_q * 4.0  # + fp32 log-sum-exp


def attention_rows(
    op: _Op, phase: str, recompute: str, executed: bool, count: float, ring_once: bool = False
) -> list[tuple]:
    """Rows of an attention-core operator (kind in :data:`ATTENTION_KINDS`) for a phase: ``(name, scope,
    kind, phase, count, flops, bytes, m, n, k, groups)``, as :func:`hnplan.compute.operators._rows`. A
    context-parallel ring lists its ``cp - 1`` identical off-diagonal steps one by one, or with ``ring_once``
    the rows of one step with ``count`` times ``cp - 1`` (the same kernels, counted instead of listed)."""
    out = []
    if op.kind == "attention-gemm":  # C = A B of two activations: no weights, no fp32 accumulation
        f = 2.0 * op.groups * op.m * op.n * op.k
        a, b_, c = op.groups * op.m * op.k, op.w_bytes / ACT_BYTES, op.groups * op.m * op.n
        fwd = (
            op.name,
            op.scope,
            op.kind,
            phase if phase != "train" else "fwd",
            count,
            f,
            (a + b_ + c) * ACT_BYTES,
            op.m,
            op.n,
            op.k,
            op.groups,
        )
        if phase != "train":
            return [fwd]
        ga, gb = op.grad_names
        out += [
            fwd,
            (ga, op.scope, op.kind, "bwd", count, f, (c + b_ + a) * ACT_BYTES, op.m, op.k, op.n, op.groups),
            (gb, op.scope, op.kind, "bwd", count, f, (a + c + b_) * ACT_BYTES, op.k, op.n, op.m, op.groups),
        ]
        if recompute in ("full", "selective"):
            out.append((op.name, op.scope, op.kind, "recompute", *fwd[4:]))
        return out
    if op.kind == "attention-elementwise":  # each pass as its kernels (fwd_kernels, bwd_kernels), sharing its bytes
        f = op.flops_per_out * op.e_out if executed else 0.0
        nf, nb = op.fwd_kernels, op.bwd_kernels
        fwd = (
            op.name,
            op.scope,
            op.kind,
            phase if phase != "train" else "fwd",
            count * nf,
            f / nf,
            op.e_out * op.fwd_bytes_per_elem / nf,
            0.0,
            0.0,
            0.0,
            1.0,
        )
        if phase != "train":
            return [fwd]
        bwd_by = op.e_out * op.bwd_bytes_per_elem / nb
        out += [fwd, (op.name, op.scope, op.kind, "bwd", count * nb, 2.0 * f / nb, bwd_by, 0.0, 0.0, 0.0, 1.0)]
        if recompute in ("full", "selective"):
            out.append((op.name, op.scope, op.kind, "recompute", *fwd[4:]))
        return out
    if executed and np.any(op.cp > 1):  # Transformer Engine's P2P ring: cp kernels and their corrections
        if ring_once:  # the diagonal, one off-diagonal step counted cp - 1 times, the corrections
            pair = ring_step_pair(op, op.cp)
            kernels = zip((*pair, ring_correction_op(op, op.cp)), (count, count * (op.cp - 1), count))
            return [r for s, n in kernels for r in attention_rows(s, phase, recompute, executed, n)]
        steps = [*ring_steps(op, op.cp), ring_correction_op(op, op.cp)]
        return [r for s in steps for r in attention_rows(s, phase, recompute, executed, count)]
    # the fused FlashAttention kernel (kind "attention"); k: the mean head dimension (see attention_compute_s)
    f = _attention_fwd_flops(op, executed)
    by = _attention_fwd_bytes(op)
    # a sliding window's longest work unit walks the window's keys, not the sequence's (attention_compute_s)
    s_kv = np.minimum(op.s_kv, op.window) if op.window else op.s_kv
    shape = (op.s_q, s_kv, 0.5 * (op.d_qk + op.d_v))
    if phase != "train":
        return [(op.name, op.scope, op.kind, phase, count, f, by, *shape, op.b * op.hq)]
    out.append((op.name, op.scope, op.kind, "fwd", count, f, by, *shape, op.b * op.hq))
    out.append(
        (
            op.name,
            op.scope,
            op.kind,
            "bwd",
            count,
            f * (flash_bwd_factor(op.d_qk, op.d_v) if executed else 2.0),
            2.0 * by,
            *shape,
            op.b * op.hq,
        )
    )
    if recompute in ("full", "selective"):
        out.append((op.name, op.scope, op.kind, "recompute", count, f, by, *shape, op.b * op.hq))
    return out


_FWD_BWD_2 = np.array([False, True, False, True])  # (forward, backward) of two kernel shapes


def slower_ring_step(acc: Accelerator, op: _Op) -> _Op:
    """``op`` (a causal attention operator run as a ring over ``op.cp`` ranks) with ``ring_tall`` set to the
    slower shape of the ring's off-diagonal steps on ``acc`` (:mod:`hnplan.compute.context_parallel`): ``2c x c``
    (both query chunks against one K/V chunk) or ``c x 2c`` (one query chunk against both), ``c = s / (2 cp)``,
    compared under :func:`attention_compute_s` forward and backward together; the ring waits for its
    slowest rank at every step. Returns ``op`` unchanged for ``cp = 1``; ``op.cp`` may be an array over
    shapes, all above 1."""
    if np.all(op.cp <= 1):
        return op
    c = op.s_kv / (2 * op.cp)
    one = np.ones((4,) + np.shape(op.b * op.hq))  # one column per shape when the operator holds arrays over shapes
    col = (slice(None),) + (None,) * (one.ndim - 1)
    f = (
        2.0
        * op.b
        * op.hq
        * 2
        * c
        * c
        * (op.d_qk + op.d_v)
        * np.array([1.0, flash_bwd_factor(op.d_qk, op.d_v)] * 2)[col]
    )
    cs = np.broadcast_to(c, one.shape[1:])  # cp (and so c) a number or an array over the shapes
    s_q, s_kv = np.stack([cs, cs, 2 * cs, 2 * cs]) * one, np.stack([2 * cs, 2 * cs, cs, cs]) * one
    d = 0.5 * (op.d_qk + op.d_v)
    t = attention_compute_s(acc, f, s_q, s_kv, d * one, op.b * op.hq * one, _FWD_BWD_2[col])
    tall = t[2] + t[3] > t[0] + t[1]  # (c x 2c, 2c x c) x (fwd, bwd)
    return replace(op, ring_tall=bool(tall) if one.ndim == 1 else tall)


def ring_step_times_s(acc: Accelerator, op: _Op) -> tuple[np.ndarray, np.ndarray]:
    """Kernel time of each step of a context-parallel ring (:func:`hnplan.compute.context_parallel.ring_steps`
    of the causal attention operator ``op``, ``op.cp`` ranks), forward and backward [s].

    The off-diagonal steps in the chip's slower shape (:func:`slower_ring_step`); each step as the operator
    table times an attention row: ``max(attention law, bytes / HBM bandwidth) +
    kernel overhead`` (:func:`attention_compute_s`, :func:`hnplan.compute.counts.achievable_hbm_Bps`,
    :func:`hnplan.compute.gemm.kernel_overhead_s`); the step's K/V or dK/dV transfer hides behind it.

    Returns
    -------
    (fwd, bwd) : arrays of shape (cp,)
        Step 0 (the causal diagonal) first [s].
    """
    fd, fs, bd, bs = ring_pair_times_s(acc, op)
    k = op.cp - 1
    return np.array([fd] + [fs] * k), np.array([bd] + [bs] * k)


def ring_pair_times_s(acc: Accelerator, op: _Op) -> tuple:
    """The two distinct kernel times of :func:`ring_step_times_s`: ``(diagonal forward, off-diagonal forward,
    diagonal backward, off-diagonal backward)`` [s], each a number, or an array over shapes when ``op``'s
    sizes and ``op.cp`` are arrays over shapes (every ``cp > 1``)."""
    diag, step = ring_step_pair(slower_ring_step(acc, op), op.cp)
    rows = [r for s in (diag, step) for r in attention_rows(s, "train", "none", True, 1.0)]
    # one row per (step, pass); with arrays over shapes one column per shape
    bwd = np.array([r[3] == "bwd" for r in rows])
    cols = [np.array(np.broadcast_arrays(*c), dtype=float) for c in list(zip(*rows))[5:]]
    wide = max(c.ndim for c in cols) == 2
    f, by, s_q, s_kv, d, g = np.broadcast_arrays(*(c[:, None] if wide and c.ndim == 1 else c for c in cols))
    col = (slice(None),) + (None,) * (f.ndim - 1)
    t_c = attention_compute_s(acc, f, s_q, s_kv, d, g, bwd[col])
    t = np.maximum(t_c, by / achievable_hbm_Bps(acc)) + kernel_overhead_s(acc)
    (fd, fs), (bd, bs) = t[~bwd], t[bwd]  # (diagonal, off-diagonal) of each pass
    return fd, fs, bd, bs
