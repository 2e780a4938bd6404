"""The operator record of :mod:`hnplan.compute.operators`: one operator of a forward pass, per GPU."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan import units

# 16-bit (bf16) activations and activation messages, the one definition every model uses
# (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1: activations are stored in 16 bits)
ACT_BYTES = units.dtype_bytes("bf16")
GRAD_ACCUM_BYTES = units.dtype_bytes("fp32")  # fp32 main-grad accumulation of weight gradients (Megatron-LM)


@dataclass(slots=True)  # read-only by convention; not frozen, which makes it ~5x slower to build
class _Op:
    """One operator of the forward pass, per GPU (shapes in elements); never modified once built
    (:func:`dataclasses.replace` makes a changed copy)."""

    name: str
    kind: str  # "gemm", "gemm-bf16" (a bf16 GEMM in an fp8 pass), "attention", "attention-gemm", "attention-elementwise", "elementwise"
    scope: str  # "dense-layer", "moe-layer", "embedding", "head"
    # gemm: C[m, n] = A[m, k] W[k, n], ``groups`` of them; w_bytes: weight bytes read
    m: float = 0.0
    n: float = 0.0
    k: float = 0.0
    groups: float = 1.0
    w_bytes: float = 0.0
    in_bytes: float = ACT_BYTES  # bytes per input element (GEMM dtype)
    # attention: sequences, local query / kv heads, query and key lengths, head dims, cached width
    b: float = 0.0
    hq: float = 0.0
    s_q: float = 0.0
    s_kv: float = 0.0
    d_qk: float = 0.0
    d_v: float = 0.0
    kv_width: float = 0.0  # elements per key token of K and V together (GQA: hkv (d_qk + d_v))
    causal: bool = False
    window: float = 0.0  # > 0: sliding-window attention, a query attends to at most this many keys [tokens]
    share: float = 1.0  # share of the layers counted that run this operator (sliding or full attention) [-]
    cp: int = 1  # context-parallel ranks the attention runs as a ring over (hnplan.compute.context_parallel)
    ring_tall: bool = False  # the ring's off-diagonal steps as 2c x c kernels (else c x 2c): the slower on the chip
    # element-wise: elements read, written, FLOPs per written element
    e_in: float = 0.0
    e_out: float = 0.0
    flops_per_out: float = 0.0
    bytes_per_out: float = 0.0  # > 0: bytes moved per written element (kernel chains), instead of (e_in + e_out) x 2
    bwd_bytes_per_out: float = 0.0  # > 0: backward bytes per forward-written element (derived chains), instead of 2x
    # attention-elementwise: bytes per element of the forward and of the backward pass
    fwd_bytes_per_elem: float = 0.0
    bwd_bytes_per_elem: float = 0.0
    # attention-elementwise: kernels each pass's bytes and FLOPs are split over (each pays the kernel overhead)
    fwd_kernels: float = 1.0
    bwd_kernels: float = 1.0
    # attention-gemm: names of the two backward GEMMs (gradients of the first and second operand)
    grad_names: tuple = ()
    # element-wise: a kernel of the backward only (autograd's gradient sums): no forward or recomputation row
    bwd_only: bool = False


def _gemm(name, scope, m, n, k, wb, groups=1.0, w_elems=None) -> _Op:
    w = (k * n * groups if w_elems is None else w_elems) * wb
    return _Op(name, "gemm", scope, m=m, n=n, k=k, groups=groups, w_bytes=w, in_bytes=wb)


def _ew(name, scope, e_in, e_out, flops_per_out, bytes_per_out=0.0, bwd_bytes_per_out=0.0) -> _Op:
    return _Op(
        name,
        "elementwise",
        scope,
        e_in=e_in,
        e_out=e_out,
        flops_per_out=flops_per_out,
        bytes_per_out=bytes_per_out,
        bwd_bytes_per_out=bwd_bytes_per_out,
    )


def above_one(degree) -> bool:
    """Whether a parallel degree is above 1: a number, or an array of degrees over micro-batch shapes
    built together (:mod:`hnplan.compute.parts`), which must then be all 1 or all above 1 (the rows of
    such a group have one structure; only their numbers differ).

    Raises
    ------
    ValueError
        For an array that mixes degrees of 1 and above.
    """
    if np.ndim(degree) == 0:
        return bool(degree > 1)
    gt = np.asarray(degree) > 1
    if gt.any() != gt.all():
        raise ValueError("operator rows built over shapes need degrees all 1 or all above 1")
    return bool(gt.all())
