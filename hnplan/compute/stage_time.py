"""Compute time of one micro-batch on the slowest pipeline stage of a training step.

The rows of :mod:`hnplan.compute.operator_rows` (the operators, conventions and sources of
:mod:`hnplan.compute.operators`) over the layers of each pipeline stage (:func:`hnplan.compute.layout.stage_layers`),
the first stage with the embedding and the last with the final norm, LM head and loss.
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute.layout import stage_layers
from hnplan.compute.operator_rows import _check, _layer_counts, _raw_rows, _times, expert_streams


def training_stage_time_s(
    model: Model,
    acc: Accelerator,
    microbatch: int,
    seq_len: int,
    *,
    tp: int = 1,
    cp: int = 1,
    ep: int = 1,
    pp: int = 1,
    dtype: str = "bf16",
    recompute: str = "none",
    attention: str = "flash",
    sequence_parallel: bool = True,
    stack: StackChoices | None = None,
) -> float:
    """Compute time of one micro-batch (forward + backward + recomputation) on the slowest pipeline stage [s].

    Stages hold ``ceil(layers / pp)`` consecutive layers (the last stage the rest); the first adds the
    embedding, the last the final norm, LM head and loss. Communication is not included. ``attention``:
    ``flash`` or ``unfused``, ``sequence_parallel``, ``stack``: as :func:`operator_table` (a weight cast done
    once per optimizer step is not part of a micro-batch).

    Raises
    ------
    InputError
        As :func:`operator_table`.
    """
    _check(model, "train", microbatch, seq_len, 0, tp, cp, ep, dtype, recompute, "executed", attention)
    per = stage_layers(model, pp).per_stage
    slowest = 0.0
    seen = set()
    for i in range(pp):
        start = i * per
        layers = range(start, min(start + per, model.layers))
        # stages of the same layer kinds, sliding-window layers and ends time alike
        key = (tuple(_layer_counts(model, layers).values()), model.sliding_layer_count(layers), i == 0, i == pp - 1)
        if key in seen:
            continue
        seen.add(key)
        rows = _raw_rows(
            model,
            "train",
            microbatch,
            seq_len,
            0,
            tp,
            cp,
            ep,
            dtype,
            recompute,
            "executed",
            layers=layers,
            embedding=i == 0,
            head=i == pp - 1,
            attention=attention,
            sequence_parallel=sequence_parallel,
            acc=acc,
            stack=stack,
        )
        rows = [r for r in rows if r[3] != "step"]
        if rows:
            _, _, t, _ = _times(rows, acc, dtype, streams=expert_streams(stack))
            slowest = max(slowest, float(np.dot(t, [r[4] for r in rows])))
    return slowest
