"""The operator rows of one pass for many batch sizes at once: :func:`hnplan.compute.operator_columns` over a
batch grid, in one vectorised call.

A serving planner times the decode step of each layout at a grid of batch sizes (the maximum-throughput
search, the throughput-latency frontier). The rows of a pass are the same operators at every batch; only their
numbers change. :func:`operator_grid` builds the rows once with the batch as an integer array (the row engine
of :mod:`hnplan.compute.operator_rows` takes arrays over shapes, as the training planner's
:mod:`hnplan.compute.parts` does) and times them in one call of its vectorised timing: the numbers are those of
:func:`hnplan.compute.operator_columns` at each batch, element by element, the same arithmetic in the same order.
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Accelerator, Model
from hnplan.compute.operator_rows import _columns, _times, expert_streams
from hnplan.compute.operators import OperatorOptions, _pass_rows, operator_options
from hnplan.compute.part_sums import _block_columns

#: the number columns of :func:`operator_grid`, each ``[row, batch]``
GRID_NUMBERS = ("count", "flops", "bytes", "compute_time_s", "memory_time_s", "time_s")


def operator_grid(
    model: Model,
    acc: Accelerator,
    phase: str,
    batches,
    seq_len: int,
    options: OperatorOptions | None = None,
    *,
    only: tuple[str, ...] | None = None,
    **overrides,
) -> dict:
    """:func:`hnplan.compute.operator_columns` of one pass at each of ``batches``, in one call.

    Parameters
    ----------
    batches : sequence of int
        Batch sizes [sequences] (each >= 1), one column of the result each.
    model, acc, phase, seq_len, options, only, **overrides
        As :func:`hnplan.compute.operator_columns` (the options: :class:`hnplan.compute.operators.OperatorOptions`):
        the same for every batch.

    Returns
    -------
    dict
        ``name``, ``kind`` (object arrays of shape ``(rows,)``: the pass's rows, the same at every batch, in
        :func:`hnplan.compute.operator_table`'s order) and ``count``, ``flops`` [FLOP], ``bytes`` [bytes],
        ``compute_time_s``, ``memory_time_s``, ``time_s`` [s] (float arrays of shape ``(rows, batches)``):
        column ``j`` holds :func:`hnplan.compute.operator_columns` at ``batches[j]``.

    Raises
    ------
    InputError, PlanRuleError, TypeError
        As :func:`hnplan.compute.operator_columns` (a batch below 1 is named).
    """
    o = operator_options(options, **overrides)
    b = np.asarray(batches, dtype=np.int64).reshape(-1)
    if b.size == 0:
        raise ValueError("operator_grid needs at least one batch")
    smallest = int(b.min())
    # one batch: the scalar path's rows; the inputs checked at the smallest batch
    rows = _pass_rows(model, acc, phase, b if b.size > 1 else smallest, seq_len, o, only, check_batch=smallest)
    n = b.size
    # row by row, the batches of each row together (one batch: the plain rows' columns, the cheaper build)
    cols = _columns(rows) if n == 1 else _block_columns([(rows, np.arange(n), 1.0)])[0]
    compute_s, memory_s, time_s, _ = _times(None, acc, o.dtype, cols, streams=expert_streams(o.stack))
    shape = (len(rows), n)
    out = {
        "name": np.array([r[0] for r in rows], dtype=object),
        "kind": np.array([r[2] for r in rows], dtype=object),
    }
    timed = {"compute_time_s": compute_s, "memory_time_s": memory_s, "time_s": time_s}
    for k in GRID_NUMBERS:
        out[k] = np.asarray(timed[k] if k in timed else cols[k], dtype=float).reshape(shape)
    return out
