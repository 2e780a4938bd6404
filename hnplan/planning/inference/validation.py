"""Published serving measurements and the planner's prediction of each, with the error (the rows themselves:
:mod:`hnplan.planning.inference.measurements`).

Every row names its source; the quantity compared is the one the source measured:

* ``tokens_per_s``: output tokens/s of the whole replica at an unbounded request rate (the
  maximum-throughput point), TensorRT-LLM ``trtllm-bench`` on H100 and H200, FP8 (NVIDIA/TensorRT-LLM
  docs/source/performance/perf-overview.md at commit 00f37686; the H100 column as in ``data/reference/
  inference_measurements.csv``; each the finite run of its dataset's requests, ``num_requests``), and
  Llama 3.1 405B on 8 x H200 up to 120K-token prompts (NVIDIA technical blog).
* ``tokens_per_s_per_gpu_at_batch``: decode output tokens/s per GPU of a disaggregated decode pool
  at the concurrency the source ran (published, or by Little's law: concurrency = throughput x TPOT).
* ``tokens_per_s_per_gpu_at_concurrency``: output tokens/s per GPU of a server run (prefills in the
  iterations) at the sequences it held in flight, by Little's law on its log (MLPerf Server scenario).
* ``prefill_s``: time of one prefill pass.

Tolerances are stated per row (``tol_lo_pct``, ``tol_hi_pct``): the band the current model is known
to fall in, so that a test fails when accuracy drifts. They are not fitted; see docs/inference.md for
why each family errs the way it does.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.compute import param_counts
from hnplan.formatting import counted
from hnplan.memory import hbm_capacity_bytes, kv_cache_bytes_per_token, kv_cache_tokens
from hnplan.planning.inference.core import (
    Replica,
    Setup,
    max_batch,
    resolve,
)
from hnplan.planning.inference.measurements import (  # noqa: F401 - the rows, re-exported where they were
    MLPERF_LLAMA2_INPUT_TOKENS,
    MLPERF_ROWS,
    MLPERF_V41,
    TRTLLM_ROWS,
    TRTLLM_SOURCE,
    TRTLLM_TOLERANCE_PCT,
    Measurement,
    measurements,
)
from hnplan.planning.inference.steady import (
    OperatingPoint,
    max_throughput_point,
    prefill_pass,
    queue_run_tokens_per_s,
    reserved_context_tokens,
    steady_state,
)

if TYPE_CHECKING:
    import pandas as pd


def trtllm_bench_limits(s: Setup, input_tokens: int, output_tokens: int) -> tuple[int, int]:
    """``max_batch_size`` and ``max_num_tokens`` that ``trtllm-bench throughput`` sets for a run.

    From NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py (``calc_engine_setting``,
    ``finetune_setting``): 95 % of the device memory of all GPUs (NVML's total, the visible HBM) less
    every parameter at the weight dtype, over the KV cache of one ``I + O`` sequence (at least one KV head
    per TP rank), at most 4,096 sequences per pipeline stage, rounded up to a multiple of 32 below 256 (at
    least 64), of 128 below 1,024 and of 256 above; ``max_num_tokens`` is that batch x ``(1 + I / O)``, at
    most 32,768, rounded up to 256 below 4,096 (at least 2,048), to 512 below 8,192 and to 1,024 above.
    Without chunked prefill (an engine whose ``chunked_prefill`` is off: ``trtllm-bench throughput`` runs
    without ``--enable_chunked_context`` unless asked) a whole prompt must fit one iteration, so
    ``max_num_tokens`` is raised to at least ``I + max_batch_size`` (tensorrt_llm/bench/benchmark/utils/
    general.py ``get_settings``); the engine then reserves the activations of that many tokens.
    The runtime then holds what its KV cache takes (:func:`predict` with ``engine_fills``).
    """
    r, gib = s.replica, float(2**30)
    weights = param_counts(s.model).total * units.dtype_bytes(r.dtype) / gib
    free = hbm_capacity_bytes(s.acc) / gib * r.tp * r.pp - weights
    kept = kv_cache_tokens(s.model, input_tokens + output_tokens)  # sliding-window layers keep their window
    per_seq = kv_cache_bytes_per_token(s.model, r.kv, r.tp) * r.tp / gib * kept
    raw_bs = min(0.95 * free / per_seq, 4096.0) / r.pp
    raw_tokens = min(raw_bs * (1 + input_tokens / output_tokens), 32768.0)

    def up(x: float, step: int) -> int:
        return step * math.ceil(x / step)

    bs = max(64, up(raw_bs, 32)) if raw_bs < 256 else up(raw_bs, 128) if raw_bs < 1024 else up(raw_bs, 256)
    if raw_tokens < 4096:
        tokens = max(2048, up(raw_tokens, 256))
    else:
        tokens = up(raw_tokens, 512) if raw_tokens < 8192 else up(raw_tokens, 1024)
    if s.engine is None or not s.engine.chunked_prefill:  # a whole prompt must fit one iteration
        tokens = max(tokens, input_tokens + bs)
    return bs, tokens


def throughput_point(m: Measurement, catalog: Catalog | None = None) -> tuple[Setup, OperatingPoint]:
    """The replica and operating point a ``tokens_per_s`` row is predicted at: with ``engine_fills``, the
    batch the engine holds at an unbounded request rate (its KV cache full, GUARANTEED_NO_EVICT reserving
    ``I + O`` tokens per sequence) under the limits the benchmark set (:func:`trtllm_bench_limits`),
    otherwise the planner's maximum-throughput point."""
    cat = catalog or load_catalog()
    s = resolve(m.model, m.system, Replica(tp=m.tp, ep=m.ep, dtype=m.dtype, overlap=m.overlap, engine=m.engine), cat)
    if not (m.engine_fills and s.engine is not None):
        return s, max_throughput_point(s, m.input_tokens, m.output_tokens)
    bs, tokens = trtllm_bench_limits(s, m.input_tokens, m.output_tokens)
    s = dataclasses.replace(
        s, engine=s.engine.model_copy(update={"max_num_seqs": bs, "max_num_batched_tokens": tokens})
    )
    return s, steady_state(s, max_batch(s, m.input_tokens + m.output_tokens), m.input_tokens, m.output_tokens)


def concurrency_point(s: Setup, batch_per_gpu: int, input_tokens: float, output_tokens: float) -> OperatingPoint:
    """The steady state of a server run that held ``batch_per_gpu`` sequences in flight on each GPU (Little's law
    on its log: completed samples/s x mean latency / GPUs), prefills sharing the iterations with the decodes.

    The KV cache is sized for the mean in-flight length ``I + O/2``, as the MLPerf prompt bound is
    (:data:`~hnplan.planning.inference.measurements.MLPERF_LLAMA2_INPUT_TOKENS`), not the ``I + O`` a no-evict
    scheduler reserves for equal requests. ``I + O/2`` is the time average of one request of the mean lengths;
    with variable lengths a sequence in flight is longer on average (``E[O (I + O/2)] / E[O]``, as the traffic
    model has it), a bias the assumed ``I`` absorbs only because the Offline batch bounded it with the same
    ``I + O/2``.

    Raises
    ------
    InfeasiblePlan
        When that many sequences of ``I + O/2`` tokens do not fit the KV cache.
    """
    ctx = reserved_context_tokens(input_tokens, output_tokens, "mean")  # as `hnplan infer --kv-reserve mean`
    return steady_state(s, batch_per_gpu * s.replica.gpus, input_tokens, output_tokens, max_context_tokens=ctx)


def predict(m: Measurement, catalog: Catalog | None = None) -> float:
    """The planner's value of a measurement's quantity, in its unit: a ``tokens_per_s`` row with
    ``num_requests`` is the throughput of that finite run at the row's operating point
    (:func:`hnplan.planning.inference.steady.queue_run_tokens_per_s`), otherwise the steady state's."""
    cat = catalog or load_catalog()
    if m.quantity == "tokens_per_s":
        s, point = throughput_point(m, cat)
        if m.num_requests is None:
            return point.tokens_per_s
        return queue_run_tokens_per_s(s, point, m.num_requests)  # the run's ramp and its last, partial batch
    s = resolve(m.model, m.system, Replica(tp=m.tp, ep=m.ep, dtype=m.dtype, overlap=m.overlap, engine=m.engine), cat)
    if m.quantity == "tokens_per_s_ratio":
        if m.ref_system is None or m.ref_dtype is None:
            raise ValueError(f"{m.id}: a tokens_per_s_ratio row needs ref_system and ref_dtype")
        ref = resolve(m.model, m.ref_system, Replica(tp=m.tp, ep=m.ep, dtype=m.ref_dtype, engine=m.engine), cat)
        ref_o = m.ref_output_tokens or m.output_tokens
        if m.batch is not None and m.ref_batch is not None:  # two Server runs, each at its own concurrency
            num = concurrency_point(s, m.batch, m.input_tokens, m.output_tokens).tokens_per_s_per_gpu
            den = concurrency_point(ref, m.ref_batch, m.input_tokens, ref_o).tokens_per_s_per_gpu
            return num / den
        num = max_throughput_point(s, m.input_tokens, m.output_tokens).tokens_per_s_per_gpu
        den = max_throughput_point(ref, m.input_tokens, ref_o).tokens_per_s_per_gpu
        return num / den
    if m.quantity == "tokens_per_s_per_gpu_at_concurrency":
        return concurrency_point(s, m.batch or 1, m.input_tokens, m.output_tokens).tokens_per_s_per_gpu
    if m.quantity == "prefill_s":
        return prefill_pass(s, m.batch or 1, m.input_tokens)["time_s"]
    if m.quantity == "tokens_per_s_per_gpu_at_batch":
        ctx = m.context_tokens or m.input_tokens + m.output_tokens / 2
        p = steady_state(
            s,
            m.batch or 1,
            m.input_tokens,
            m.output_tokens,
            context_tokens=ctx,
            max_context_tokens=ctx,
            disaggregated=True,
        )
        return p.tokens_per_s_per_gpu
    raise ValueError(f"unknown quantity {m.quantity!r}")


def validation_table(rows: list[Measurement] | None = None, catalog: Catalog | None = None) -> pd.DataFrame:
    """Published vs modelled values, one row per measurement.

    Returns
    -------
    pandas.DataFrame
        The :class:`Measurement` fields plus ``modelled`` and ``error_pct`` (``100 (model -
        published) / published``) and ``within_tolerance``.
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    cat = catalog or load_catalog()
    out = []
    for m in rows if rows is not None else measurements():
        d = asdict(m)
        d["modelled"] = predict(m, cat)
        d["error_pct"] = 100.0 * (d["modelled"] - m.published) / m.published
        d["within_tolerance"] = m.tol_lo_pct <= d["error_pct"] <= m.tol_hi_pct
        out.append(d)
    df = pd.DataFrame(out)
    df.attrs["units"] = {"error_pct": "%"}
    return df


#: an error beyond which a row "within its stated band" is a documented gap, said as such, not a fit [%]: a
#: reporting threshold, a choice and not a measurement (every training run's tolerance is 15 %)
KNOWN_GAP_PCT = 20.0


def validation_summary(df: pd.DataFrame) -> str:
    """Markdown: mean absolute error and range per source family of a :func:`validation_table`, and how many rows
    are within their stated band only because the band was widened over a documented gap (error beyond
    :data:`KNOWN_GAP_PCT`: DeepSeek's production decode at -49 % is "within" its band, and a reader must not take
    that for a fit)."""
    out = []
    for f, g in df.groupby("family", sort=False):
        gaps = int((g["within_tolerance"] & (g["error_pct"].abs() > KNOWN_GAP_PCT)).sum())
        gap_text = (
            f" ({gaps} of them a known gap over {KNOWN_GAP_PCT:.0f} %, its band widened to hold it: the note says why)"
            if gaps
            else ""
        )
        out.append(
            f"- **{f}** ({counted(len(g), 'row')}): mean |error| {g['error_pct'].abs().mean():.1f}%, "
            f"from {g['error_pct'].min():+.1f}% to {g['error_pct'].max():+.1f}%; "
            f"{int(g['within_tolerance'].sum())} of {len(g)} within the stated band{gap_text}."
        )
    return "\n".join(out)
