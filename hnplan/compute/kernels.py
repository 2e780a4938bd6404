"""Single kernels as the operator model times them: one attention call, one grouped expert GEMM, one
memory-bound pass. For the validation rows (``hnplan.validation.compute``) and the ``hnplan gemm`` command, so
that a measured kernel is compared with exactly what the planners use inside a step.

* attention: the FlashAttention operator of :mod:`hnplan.compute.attention` (forward, or forward + backward)
  timed by :func:`hnplan.compute.operators._times`;
* decode attention: the same operator with one query token against a KV cache;
* grouped expert GEMMs: ``groups`` GEMMs of ``m`` tokens each in one kernel under the GEMM law
  (:mod:`hnplan.compute.gemm`), as the MoE operators run them;
* memory-bound passes: bytes over the achievable HBM bandwidth plus the kernel overhead.

All functions return seconds and take ``eager`` where a framework's host floor (``host_dispatch_us``) applies
to back-to-back calls (measurement conditions); the planners never apply it.
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator
from hnplan.compute._op import _Op
from hnplan.compute.attention import attention_rows
from hnplan.compute.counts import achievable_hbm_Bps
from hnplan.compute.gemm import gemm_time_s, kernel_overhead_s

ATTENTION_PASSES = ("fwd", "fwd+bwd")


def _floor(acc: Accelerator, t, eager: bool):
    return max(t, units.us_to_s(acc.host_dispatch_us or 0.0)) if eager else t


def attention_time_s(
    acc: Accelerator,
    batch: int,
    heads: int,
    kv_heads: int,
    seq_len: int,
    head_dim: int,
    *,
    passes: str = "fwd",
    causal: bool = True,
    eager: bool = False,
    head_dim_v: int | None = None,
) -> float:
    """Time of one FlashAttention call over ``batch`` sequences of ``seq_len`` tokens [s].

    Parameters
    ----------
    batch, heads, kv_heads, seq_len, head_dim : int
        Sequences, query heads, KV heads (grouped-query), tokens, head dimension of Q and K [-].
    passes : {"fwd", "fwd+bwd"}
        The forward kernel, or forward plus backward (two kernels).
    head_dim_v : int, optional
        Head dimension of V and the output (MLA: 128 against Q/K's 192); default ``head_dim``.

    Raises
    ------
    InputError
        For an unknown ``passes``.
    """
    from hnplan.compute.operators import _times
    from hnplan.errors import check_choice

    check_choice("passes", passes, ATTENTION_PASSES)
    d_v = head_dim if head_dim_v is None else head_dim_v
    op = _Op(
        "attention",
        "attention",
        "dense-layer",
        b=batch,
        hq=heads,
        s_q=seq_len,
        s_kv=seq_len,
        d_qk=head_dim,
        d_v=d_v,
        kv_width=kv_heads * (head_dim + d_v),
        causal=causal,
    )
    rows = attention_rows(op, "train", "none", True, 1.0)
    _, _, t, _ = _times(rows, acc, "bf16")
    fwd, bwd = float(t[0]), float(t[1])
    return _floor(acc, fwd, eager) + (_floor(acc, bwd, eager) if passes == "fwd+bwd" else 0.0)


def decode_attention_time_s(
    acc: Accelerator, batch: int, heads: int, kv_heads: int, kv_len: int, head_dim: int, *, eager: bool = False
) -> float:
    """Time of one decode-attention call: one query token per sequence against ``kv_len`` cached tokens [s]."""
    from hnplan.compute.operators import _times

    op = _Op(
        "attention",
        "attention",
        "dense-layer",
        b=batch,
        hq=heads,
        s_q=1,
        s_kv=kv_len,
        d_qk=head_dim,
        d_v=head_dim,
        kv_width=2 * kv_heads * head_dim,
    )
    _, _, t, _ = _times(attention_rows(op, "decode", "none", True, 1.0), acc, "bf16")
    return _floor(acc, float(t[0]), eager)


def grouped_gemm_time_s(acc: Accelerator, dtype: str, groups: int, m, n: int, k: int, *, eager: bool = False):
    """Time of ``groups`` GEMMs of ``m x n x k`` (tokens per expert ``m``) in one kernel under the GEMM law [s]."""
    return gemm_time_s(acc, dtype, m, n, k, groups, eager=eager)


def memory_pass_time_s(acc: Accelerator, nbytes, *, bandwidth_fraction: float = 1.0, eager: bool = False):
    """Time of a memory-bound kernel moving ``nbytes`` [bytes]: ``nbytes / (HBM x hbm_efficiency x
    bandwidth_fraction) + kernel overhead`` [s]; ``bandwidth_fraction`` scales the streaming bandwidth for
    kernels that reach less of it (reductions, unfused chains)."""
    t = np.asarray(nbytes, dtype=float) / (achievable_hbm_Bps(acc) * bandwidth_fraction) + kernel_overhead_s(acc)
    t = float(t) if np.ndim(t) == 0 else t
    return _floor(acc, t, eager) if np.ndim(t) == 0 else t
