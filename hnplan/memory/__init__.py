"""Memory cost model: training and inference footprints per accelerator, and the memory tiers.

* :mod:`~hnplan.memory.states` - weights, gradients, optimizer states under ZeRO / TP / PP / EP, with
  named accountings (``zero-paper`` 2 + 2 + 12, ``fp32-grad-accum``, ``megatron-bf16``, ``fp32``, ``fp8``);
* :mod:`~hnplan.memory.activations` - per-layer activations from the model's shapes (Korthikanti et al.
  2022, generalised to GQA, SwiGLU, MoE and MLA), per pipeline stage;
* :mod:`~hnplan.memory.pipeline` - the end stages' layers and the micro-batches each holds in flight;
* :mod:`~hnplan.memory.training` - :func:`training_memory`, runtime overheads from ``data/memory.yaml``;
* :mod:`~hnplan.memory.inference` - KV cache (MHA/GQA/MQA/MLA), weights at the serving dtype, the
  largest KV cache that fits;
* :mod:`~hnplan.memory.tiers` - HBM, host, pooled and NVMe tiers per accelerator and spill placement.

The answer of ``hnplan memory`` and the tables of the memory notebook are a planner's:
:mod:`hnplan.planning.memory`.
"""

from typing import TYPE_CHECKING

from hnplan.memory.breakdown import PARTS, MemoryBreakdown, hbm_capacity_bytes
from hnplan.memory.inference import (
    InferenceMemory,
    KVCapacity,
    inference_memory,
    kv_cache_bytes_per_token,
    kv_cache_tokens,
    kv_capacity,
    max_batch,
    weight_bytes_per_gpu,
    workspace_bytes,
)
from hnplan.memory.pipeline import microbatches_in_flight
from hnplan.memory.states import (
    ACCOUNTINGS,
    ZERO_STAGES,
    StateAccounting,
    accounting,
    model_state_bytes_per_gpu,
    stage_params,
    zero_model_state_bytes,
)
from hnplan.memory.tiers import (
    SPILL_ORDER,
    SpillPlan,
    Tier,
    decode_step_time_s,
    memory_tiers,
    spill_plan,
)

if TYPE_CHECKING:
    from hnplan.memory.activations import (
        activation_bytes_per_layer,
        embedding_activation_bytes,
        layer_activation_table,
        layer_activations,
        output_activation_bytes,
        stage_activation_bytes,
        stage_activation_table,
    )
    from hnplan.memory.training import TrainingMemory, training_memory, training_memory_table, training_overheads

# The activation tables and the training footprint work on pandas frames of plans: their modules are
# imported on first use of one of their names, so a command that needs model states, KV caches or the
# tiers (`hnplan reliability`, `hnplan tco`) does not import pandas (start-up time, benchmarks/bench_startup.py).
_LAZY = {
    **dict.fromkeys(
        (
            "activation_bytes_per_layer",
            "embedding_activation_bytes",
            "layer_activation_table",
            "layer_activations",
            "output_activation_bytes",
            "stage_activation_bytes",
            "stage_activation_table",
        ),
        "activations",
    ),
    **dict.fromkeys(("TrainingMemory", "training_memory", "training_memory_table", "training_overheads"), "training"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"hnplan.memory.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hnplan.memory' has no attribute {name!r}")


__all__ = [
    "ACCOUNTINGS",
    "PARTS",
    "SPILL_ORDER",
    "ZERO_STAGES",
    "InferenceMemory",
    "KVCapacity",
    "MemoryBreakdown",
    "SpillPlan",
    "StateAccounting",
    "Tier",
    "TrainingMemory",
    "accounting",
    "activation_bytes_per_layer",
    "decode_step_time_s",
    "embedding_activation_bytes",
    "hbm_capacity_bytes",
    "inference_memory",
    "kv_cache_bytes_per_token",
    "kv_cache_tokens",
    "kv_capacity",
    "layer_activations",
    "max_batch",
    "memory_tiers",
    "microbatches_in_flight",
    "model_state_bytes_per_gpu",
    "output_activation_bytes",
    "spill_plan",
    "stage_activation_bytes",
    "stage_activation_table",
    "layer_activation_table",
    "stage_params",
    "training_memory",
    "training_memory_table",
    "training_overheads",
    "weight_bytes_per_gpu",
    "workspace_bytes",
    "zero_model_state_bytes",
]
