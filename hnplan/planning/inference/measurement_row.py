"""The record of one published serving measurement the inference planner is validated against
(:class:`Measurement`): the quantity, the setting that reproduces it, the source and the stated error band.
The rows themselves are :mod:`hnplan.planning.inference.measurements`' (the MLPerf Inference ones
:mod:`hnplan.planning.inference.measurements_mlperf`'s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    """One published serving figure and how to reproduce its setting."""

    id: str
    quantity: str
    model: str
    system: str
    tp: int
    ep: int
    dtype: str
    input_tokens: int
    output_tokens: int
    published: float
    unit: str
    source: str
    tol_lo_pct: float
    tol_hi_pct: float
    context_tokens: float | None = None
    tpot_bound_s: float | None = None
    batch: int | None = None
    note: str = ""
    family: str = ""
    overlap: bool = False
    engine: str | None = None
    ref_system: str | None = None  # tokens_per_s_ratio: the baseline's system, dtype and output length
    ref_dtype: str | None = None
    ref_output_tokens: int | None = None
    ref_batch: int | None = None  # tokens_per_s_ratio of Server runs: the baseline's concurrency per GPU
    engine_fills: bool = False  # the engine runs all the sequences its KV cache holds (trtllm-bench's limits)
    num_requests: int | None = None  # requests of the benchmark's run, all queued at once (None: steady state)
