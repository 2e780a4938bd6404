"""Pipeline schedules in memory: the layers of the end stages and the micro-batches each holds in flight.

References
----------
.. [1] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   MLSys 2023, arXiv:2205.05198, Sec. 4.2.3 (the interleaved schedule's first stage).
.. [2] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.2 (1F1B and the interleaved schedule); NVIDIA
   Megatron-LM ``megatron/core/pipeline_parallel/schedules.py`` (``get_pp_rank_microbatches``: the warm-up
   forwards of each rank).
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute.layout import stage_layers


def microbatches_in_flight(pp, num_microbatches=None, virtual_stages=1, stage: str = "first"):
    """Micro-batches whose activations a pipeline stage holds at its peak [micro-batches of its layers].

    1F1B: the first stage ``min(p, m)``, the second (``middle``: the middle stage holding the most)
    ``min(p - 1, m)``, the last 1 ([2]_ Sec. 2.2). Interleaved, ``v`` chunks a stage: rank ``r`` holds one
    chunk more than its ``2 (p - r - 1) + (v - 1) p`` warm-up forwards (Megatron-Core ``schedules.py``),
    the first stage ``p (1 + (p - 1) / (p v))`` micro-batches of its layers ([1]_ Sec. 4.2.3), the second
    ``((v + 1) p - 3) / v``, the last ``((v - 1) p + 1) / v`` (``p`` read as ``min(p, m)``). ``pp``,
    ``num_microbatches`` and ``virtual_stages`` may be integer arrays of one shape (a float array back;
    numbers give a number).

    >>> microbatches_in_flight(8), microbatches_in_flight(8, 4), microbatches_in_flight(8, virtual_stages=2)
    (8, 4, 11.5)
    >>> microbatches_in_flight(4, 64, 4, "last"), microbatches_in_flight(4, 64, 1, "last")
    (3.25, 1)
    >>> microbatches_in_flight(np.array([1, 8, 8]), np.array([64, 4, 64]), np.array([1, 1, 2])).tolist()
    [1.0, 4.0, 11.5]
    >>> microbatches_in_flight(8, 64, 1, "middle"), microbatches_in_flight(8, 64, 2, "middle")
    (7, 10.5)
    """
    if np.ndim(pp) or np.ndim(num_microbatches) or np.ndim(virtual_stages):  # the same cases as arrays
        p, v = np.broadcast_arrays(np.asarray(pp, dtype=np.int64), np.asarray(virtual_stages, dtype=np.int64))
        m = p if num_microbatches is None else np.minimum(p, np.asarray(num_microbatches, dtype=np.int64))
        if stage == "last":
            held = np.where(v > 1, ((v - 1) * m + 1) / v, 1.0)
        elif stage == "middle":  # the second rank: two warm-up forwards fewer than the first
            held = np.where(v > 1, m * ((v + 1) * p - 3) / (p * v), np.minimum(p - 1, m))
        else:
            held = np.where(v > 1, m * (1 + (p - 1) / (p * v)), m)
        return np.where(p <= 1, 1.0, held).astype(float)
    if pp <= 1:
        return 1
    m = pp if num_microbatches is None else min(pp, num_microbatches)
    if stage == "last":
        return ((virtual_stages - 1) * m + 1) / virtual_stages if virtual_stages > 1 else 1
    if stage == "middle":
        v = virtual_stages
        return m * ((v + 1) * pp - 3) / (pp * v) if v > 1 else min(pp - 1, m)
    if virtual_stages > 1:
        return m * (1 + (pp - 1) / (pp * virtual_stages))
    return m


def end_stage_layers(model: Model, pp, balanced: bool = False, stage: str = "first"):
    """Layers on the first, the fullest middle or the last pipeline stage, for an array of ``pp`` [layers].

    ``ceil(L / pp)`` on the first and the middle stage and the rest, ``L - (pp - 1) ceil(L / pp)``, on the
    last (:func:`hnplan.compute.layout.stage_layers`; all ``L`` at ``pp = 1``), or with ``balanced``
    (embedding and loss each taking one layer's place, Llama 3 arXiv:2407.21783 Sec. 3.3.2)
    ``ceil((L + 2) / pp) - 1`` on each end and ``ceil((L + 2) / pp)`` on the middle where ``pp > 1``.
    """
    if np.ndim(pp):  # few distinct degrees among many plans: the split of each degree up to the largest, looked up
        safe = np.maximum(np.asarray(pp, dtype=np.int64), 1)
        top = int(safe.max()) if safe.size else 1
        if safe.size > 64 and top <= max(4 * safe.size, 4096):  # a speed choice: both paths give the same numbers
            return np.asarray(_end_stage_layers(model, np.arange(1, top + 1), balanced, stage))[safe - 1]
    return _end_stage_layers(model, pp, balanced, stage)


def _end_stage_layers(model: Model, pp, balanced: bool, stage: str):
    """:func:`end_stage_layers` computed element by element."""
    split = stage_layers(model, pp)
    n = split.per_stage
    p = np.maximum(np.asarray(pp, dtype=np.int64), 1)
    if not balanced:
        return np.where(p > 1, np.maximum(split.last, 0), n) if stage == "last" else n
    end = np.maximum(-(-(model.layers + 2) // p) - 1, 1)
    return np.where(p > 1, end + (1 if stage == "middle" else 0), n)


def balanced_in_flight(n, pp, m, v):
    """Micro-batches of its ``n`` layers the first stage holds under the interleaved 1F1B schedule
    when its first model chunk is one layer short (the embedding takes that layer's place).

    Megatron-Core's interleaved schedule runs ``2 (p - 1) + (v - 1) p`` warm-up forwards on the first
    stage before its first backward ([2]_; ``get_forward_backward_func`` in
    ``megatron/core/pipeline_parallel/schedules.py``); with ``m' = min(p, m)`` that is ``m'`` forwards of
    every chunk plus ``(p - 1) m' / p`` extra ones of the first chunk, whose ``c0 = c - 1`` layers
    (``c = ceil((L + 2) / (p v))`` a chunk) are one fewer. Uniform chunks give Korthikanti's
    ``m' (1 + (p - 1) / (p v))`` ([1]_ Sec. 4.2.3). Llama 3 405B, p = 16, v = 8, one layer a chunk:
    ``c0 = 0``, so the first stage holds 16 micro-batches of its 7 layers.
    """
    p = np.maximum(np.asarray(pp, dtype=np.int64), 1)
    v = np.maximum(np.asarray(v, dtype=np.int64), 1)
    mm = np.minimum(p, np.asarray(m, dtype=np.int64))
    c = np.ceil((n + 1) / v)  # layer places of a chunk (n + 1 places on the stage)
    extra = np.where(v > 1, (p - 1) * mm / p * (c - 1) / np.maximum(n, 1), 0.0)
    return np.where(p > 1, mm + extra, 1.0)
