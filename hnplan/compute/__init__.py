"""Compute cost model: parameter and FLOP counts, shape-dependent GEMM throughput, and the
operator-level roofline of a transformer's training step, prefill and decode.

* :mod:`hnplan.compute.counts`: parameter counts, model / hardware FLOPs per token (PaLM, Megatron-LM),
  MFU, peaks and the roofline primitive.
* :mod:`hnplan.compute.gemm`: the GEMM efficiency law (small-M streaming, tiles and waves, K depth, ceiling).
* :mod:`hnplan.compute.grouped_gemm`: the law run as PyTorch's SM90 grouped kernel (``torch._grouped_mm``).
* :mod:`hnplan.compute.attention`: the attention core, FlashAttention or unfused (materialised scores).
* :mod:`hnplan.compute.context_parallel`: context parallelism as Transformer Engine's P2P ring runs it.
* :mod:`hnplan.compute.operators`: the operator table (FLOPs, bytes, intensity, time, bound) per
  phase; :mod:`hnplan.compute.stage_time`: the compute time of one pipeline stage per micro-batch.
* :mod:`hnplan.compute.operator_rows`: the raw rows of a pass and their vectorised times (the engine
  under the operator table); :mod:`hnplan.compute.parts`: the same rows summed per part for many
  micro-batch shapes (the training planner; the table's columns and the sums in :mod:`hnplan.compute.part_sums`).
* :mod:`hnplan.compute.host`: host time of a step (kernel launches, CUDA-graph scopes, device-host syncs).
* :mod:`hnplan.compute.clocks`: the compute rate at the clock a board's power limit sustains in training.

See docs/compute.md.
"""

from typing import TYPE_CHECKING

from hnplan.compute._op import ACT_BYTES  # noqa: F401  (bf16 activations: the one definition)
from hnplan.compute.attention import ATTENTION_IMPLS, ATTENTION_KINDS, ring_pair_times_s, ring_step_times_s  # noqa: F401
from hnplan.compute.counts import (  # noqa: F401
    RECOMPUTE_MODES,
    FlopsPerToken,
    ParamCounts,
    achievable_flops_per_s,
    achievable_hbm_Bps,
    attention_core_flops_per_token,
    head_dim,
    megatron_flops_per_iteration,
    megatron_model_flops_per_iteration,
    megatron_vocab_term,
    mfu,
    param_counts,
    peak_flops_per_s,
    roofline_time_s,
    training_flops_per_token,
)
from hnplan.compute.gemm import (  # noqa: F401
    gemm_compute_s,
    gemm_device_time_s,
    gemm_flops_per_s,
    gemm_roofline,
    gemm_time_s,
    kernel_overhead_s,
    quantisation_efficiency,
    wave_efficiency,
)
from hnplan.compute.layer_ops import attention_op  # noqa: F401

if TYPE_CHECKING:
    from hnplan.compute.operators import (  # noqa: F401
        CONVENTIONS,
        PHASES,
        OperatorOptions,
        operator_columns,
        operator_table,
        roofline_curve,
        totals,
    )
    from hnplan.compute.stage_time import training_stage_time_s  # noqa: F401

# The operator table is a pandas frame: its module is imported on first use of one of its names, so a
# command that needs parameter counts or the GEMM law (`hnplan gemm`) does not import pandas (start-up time, benchmarks/bench_startup.py).
_OPERATORS = (
    "CONVENTIONS",
    "PHASES",
    "OperatorOptions",
    "operator_columns",
    "operator_table",
    "roofline_curve",
    "totals",
)
_LAZY = dict.fromkeys(_OPERATORS, "operators") | {"training_stage_time_s": "stage_time"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"hnplan.compute.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hnplan.compute' has no attribute {name!r}")
