"""Context parallelism as Transformer Engine runs it: the load-balanced P2P ring of causal attention.

Megatron-Core's default context parallelism (``cp_comm_type="p2p"``, [2]_) calls Transformer Engine's
``AttnFuncWithCPAndKVP2P`` ([1]_). With ``cp`` ranks the sequence of ``s`` tokens is cut into ``2 cp``
chunks of ``c = s / (2 cp)`` tokens and rank ``r`` holds chunks ``r`` and ``2 cp - 1 - r`` (causal load
balancing: each rank gets one early and one late chunk). One layer's attention is ``cp`` steps; at step
``i`` the rank's ``2 c`` queries meet the K/V that started on rank ``r - i`` (mod ``cp``):

* step 0, the rank's own K/V: one causal ``2c x 2c`` kernel (a full ``c x c`` block and two diagonal halves);
* steps ``1 .. cp - 1``, no mask: ranks ``r >= i`` attend both query chunks to the first K/V chunk
  (``2c x c``), ranks ``r < i`` the second query chunk to both K/V chunks (``c x 2c``); causality skips
  the other half.

Every rank executes ``2 cp`` blocks of ``c x c``: the FLOPs of one causal ``s/cp x s`` kernel, cut into
``cp`` smaller kernels each at its own efficiency under the attention law
(:func:`hnplan.compute.attention.attention_compute_s`). A step ends on every rank before the K/V it
needs next has arrived, so the slower shape sets each off-diagonal step: ``c x 2c``, half the query
tiles each walking twice the keys (the law's tail term, which grows with the keys), or ``2c x c``, twice
the tiles each paying the law's per-tile prologue over half the keys. Which is slower depends on the chip
and the heads per rank (under the H200 law ``c x 2c`` up to about 26 heads per rank, ``2c x c`` above);
:func:`hnplan.compute.attention.slower_ring_step` picks it on the chip (``_Op.ring_tall``; ``c x 2c`` when
no chip is given).

Around the kernels, memory-bound passes in bf16 ([1]_: ``flash_attn_fwd_out_correction``, the ``dq`` /
``dk`` / ``dv`` corrections of the backward), counted for rank ``cp - 1``, whose every step is full size:

* forward: K and V concatenated into the send buffer (read + write K/V); the output merge, the first step
  ``O = O_0 exp(lse_0 - lse)`` (read O_0, write O) and each later one ``O += O_i exp(lse_i - lse)`` (read
  O, O_i, write O); each later step's fp32 log-sum-exp merge (read two, write one);
* backward: K/V copied into the ring buffer (read + write); dQ copied from the first step and added from
  each later one (read two, write one), dK and dV likewise.

They run as kernels of their own ([1]_), each paying the chip's per-kernel overhead, not as one pass: on rank
``cp - 1`` the forward's critical path holds the K/V concatenation (``torch.cat``), the ``cp`` output merges
after the loop (``flash_attn_fwd_out_correction_init`` and ``flash_attn_fwd_out_correction``, one fused kernel
each under ``jit_fuser``) and the last log-sum-exp merge, which the stream waits for: ``cp + 2`` kernels (the
first ``cp - 1`` log-sum-exp kernels, the clone and the merges of steps ``1 .. cp - 2``, run on the other of
the ring's two streams beside the next step's attention kernel and are not counted); the backward the ring
buffer's ``copy_`` and at each of the ``cp`` steps one ``copy_`` or ``add_`` into dQ and one each into dK and
dV: ``3 cp + 1`` (:func:`ring_correction_kernels`).

The K/V block sent to the next rank at a forward step overlaps that step's kernel; in the backward the
step sends K/V (step 0), K/V and the partial dK/dV travelling the other way round (steps ``1 .. cp - 2``)
or dK/dV alone (step ``cp - 1``), each overlapping that step's backward kernel ([1]_). Which link carries
it and how much shows is the planner's part (:func:`hnplan.planning.training.collectives.cp_comm_per_layer`).

A stack with ``cp_algorithm="allgather"`` (Llama 3, arXiv:2407.21783 Sec. 3.3.2) runs no ring: K/V are
all-gathered first and the rank's ``s / cp`` queries meet all ``s`` keys in one causal kernel
(:mod:`hnplan.compute.layer_ops` keeps the attention operator whole, ``cp = 1`` on the operator).

References
----------
.. [1] NVIDIA Transformer Engine, ``transformer_engine/pytorch/attention/dot_product_attention/
   context_parallel.py`` (``AttnFuncWithCPAndKVP2P``: forward and backward step loops, the output,
   log-sum-exp, dQ and dK/dV corrections, ``flash_attn_p2p_communicate``).
.. [2] NVIDIA Megatron-Core, context parallelism guide (``docs/source/api-guide/context_parallel.rst``):
   ring attention with load-balanced causal chunks, P2P exchange of K/V overlapped with attention.
.. [3] Liu, Zaharia, Abbeel, "Ring Attention with Blockwise Transformers", arXiv:2310.01889.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hnplan import units
from hnplan.compute._op import ACT_BYTES, _Op

LSE_BYTES = units.dtype_bytes("fp32")  # fp32 log-sum-exp per (sequence, head, query) ([1]_)
CORRECTION_FLOPS = 3.0  # exp, multiply, add per output element of a merge (count of the formula's operations)


def ring_steps(op: _Op, cp: int) -> list[_Op]:
    """The ``cp`` attention kernels of one rank's ring (module docstring) for a fused causal attention
    operator ``op`` of ``s / cp`` queries over ``s`` keys.

    Returns
    -------
    list of _Op
        ``attention_cp_diagonal`` (causal, ``2c x 2c``) and ``cp - 1`` times ``attention_cp_step``
        (unmasked, ``c x 2c``, or ``2c x c`` with ``op.ring_tall``), with ``c = s / (2 cp)`` [tokens]; each a
        one-kernel ``attention`` operator.

    Raises
    ------
    ValueError
        ``op`` is not a causal ``attention`` operator with ``s_q = s_kv / cp``.
    """
    diag, step = ring_step_pair(op, cp)
    return [diag] + [step] * (cp - 1)


def ring_step_pair(op: _Op, cp) -> tuple[_Op, _Op]:
    """The two distinct kernels of :func:`ring_steps`: the diagonal and the off-diagonal step (which runs
    ``cp - 1`` times); ``cp`` may be an integer array over shapes (with ``op``'s numbers arrays over the same
    shapes, :mod:`hnplan.compute.parts`).

    Raises
    ------
    ValueError
        As :func:`ring_steps`.
    """
    if op.kind != "attention" or not op.causal or np.any(np.abs(op.s_q * cp - op.s_kv) > 1e-9 * op.s_kv):
        raise ValueError(f"a ring needs a causal attention operator of s/cp queries, got {op.name} {op.kind}")
    c = op.s_kv / (2 * cp)
    diag = replace(op, name="attention_cp_diagonal", s_q=2 * c, s_kv=2 * c, causal=True, cp=1)
    if np.ndim(op.ring_tall) == 0:
        s_q, s_kv = (2 * c, c) if op.ring_tall else (c, 2 * c)
    else:  # one choice per shape (operators holding arrays over shapes, hnplan.compute.parts)
        s_q, s_kv = np.where(op.ring_tall, 2 * c, c), np.where(op.ring_tall, c, 2 * c)
    step = replace(op, name="attention_cp_step", s_q=s_q, s_kv=s_kv, causal=False, cp=1)
    return diag, step


def ring_correction_bytes(op: _Op, cp: int) -> tuple[float, float]:
    """Bytes of the memory-bound passes of one layer's ring on rank ``cp - 1`` (module docstring), (forward,
    backward) [bytes]; ``op`` as :func:`ring_steps`.

    With ``Q``, ``O`` the rank's query and output elements (``b x s/cp x heads x d``) and ``KV`` its K and V
    elements (``b x s/cp x kv_width``), ``L`` its log-sum-exp entries (``b x heads x s/cp``), in bf16 (2 bytes)
    and fp32 (4)::

        forward  = 2 (2 KV + 2 O + 3 O (cp - 1)) + 4 x 3 L (cp - 1)
        backward = 2 (2 KV + 2 Q + 3 Q (cp - 1) + 2 KV + 3 KV (cp - 1))
    """
    q = op.b * op.s_q * op.hq * op.d_qk
    o = op.b * op.s_q * op.hq * op.d_v
    kv = op.b * op.s_q * op.kv_width
    lse = op.b * op.hq * op.s_q
    later = cp - 1
    fwd = ACT_BYTES * (2 * kv + 2 * o + 3 * o * later) + LSE_BYTES * 3 * lse * later
    bwd = ACT_BYTES * (2 * kv + 2 * q + 3 * q * later + 2 * kv + 3 * kv * later)
    return fwd, bwd


def ring_correction_kernels(cp):
    """Kernels of one layer's ring corrections on the critical path of rank ``cp - 1`` (module docstring),
    (forward, backward): ``(cp + 2, 3 cp + 1)``; ``cp`` a number or an integer array over shapes.

    >>> ring_correction_kernels(4)
    (6, 13)
    """
    return cp + 2, 3 * cp + 1


def ring_correction_op(op: _Op, cp: int) -> _Op:
    """The ring's memory-bound passes of one layer as one ``attention-elementwise`` operator
    (``attn_cp_correction``) over the rank's output elements, bytes from :func:`ring_correction_bytes`, each
    pass split over the kernels of :func:`ring_correction_kernels`; it is part of the attention core (selective
    recomputation re-runs it with the kernels)."""
    o = op.b * op.s_q * op.hq * op.d_v
    fwd, bwd = ring_correction_bytes(op, cp)
    n_fwd, n_bwd = ring_correction_kernels(cp)
    return _Op(
        "attn_cp_correction",
        "attention-elementwise",
        op.scope,
        e_out=o,
        fwd_bytes_per_elem=fwd / o,
        bwd_bytes_per_elem=bwd / o,
        flops_per_out=CORRECTION_FLOPS * (cp - 1),
        fwd_kernels=n_fwd,
        bwd_kernels=n_bwd,
    )
