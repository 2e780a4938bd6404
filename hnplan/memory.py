"""Memory cost model: training footprint per accelerator (first-order).

References
----------
.. [1] Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
   SC20, arXiv:1910.02054, Sec. 3.1 and Fig. 1 (2 + 2 + 12 bytes per parameter; stages 1-3).
.. [2] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   arXiv:2205.05198, Sec. 4, Table 2 (activations per layer ``s b h (34 + 5 a s / h)`` bytes and the
   tensor/sequence parallel and recomputation variants).
.. [3] Narayanan et al., SC21, Sec. 2.2 (1F1B keeps up to p micro-batches in flight on the first stage).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.schemas import Model
from hnplan.compute import RECOMPUTE_MODES, param_counts
from hnplan.errors import InputError

ZERO_STAGES = (0, 1, 2, 3)

# Mixed-precision Adam ([1]_ Sec. 3.1): 2-byte weights, 2-byte gradients, and 12 bytes of fp32
# master weights, momentum and variance per parameter.
WEIGHT_BYTES = 2.0
GRAD_BYTES = 2.0
OPTIMIZER_BYTES = 12.0


@dataclass(frozen=True)
class TrainingMemory:
    """Per-accelerator training memory [bytes], by part."""

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes

    def as_gib(self) -> dict:
        """The breakdown in GiB (2**30 bytes) with keys ``params_gib`` ... ``total_gib``."""
        d = {k.replace("_bytes", "_gib"): units.to_GiB(v) for k, v in asdict(self).items()}
        d["total_gib"] = units.to_GiB(self.total_bytes)
        return d


def zero_model_state_bytes(n_params, dp: int, zero: int) -> tuple[float, float, float]:
    """Mixed-precision Adam model states per data-parallel rank, ``(weights, grads, optimizer)``
    [bytes], for ``n_params`` parameters replicated over ``dp`` ranks at a ZeRO stage ([1]_ Sec. 5):
    stage 0 keeps ``2 + 2 + 12`` bytes per parameter, stage 1 shards the 12, stage 2 also the
    gradients, stage 3 also the weights.

    >>> [round(sum(zero_model_state_bytes(7.5e9, 64, z)) / 1e9, 1) for z in (0, 1, 2, 3)]
    [120.0, 31.4, 16.6, 1.9]
    """
    if zero not in ZERO_STAGES:
        raise InputError(f"zero stage must be one of 0, 1, 2, 3; got {zero!r}")
    return (WEIGHT_BYTES * n_params / (dp if zero >= 3 else 1),
            GRAD_BYTES * n_params / (dp if zero >= 2 else 1),
            OPTIMIZER_BYTES * n_params / (dp if zero >= 1 else 1))


def model_state_bytes_per_gpu(model: Model, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1):
    """Weights, gradients and optimizer states per accelerator [bytes] ([1]_).

    Non-expert parameters are split over ``tp x pp``; routed-expert parameters over ``tp x pp x ep``.
    ZeRO stage 1 shards optimizer states over the data-parallel group, stage 2 also gradients,
    stage 3 also weights. Expert parameters are sharded over ``dp / ep`` (their own data-parallel
    group). The even split over pipeline stages is an average; the embedding stages hold more.

    Returns
    -------
    tuple of float
        ``(params_bytes, grads_bytes, optimizer_bytes)``.

    Raises
    ------
    InputError
        For a ZeRO stage outside 0-3.
    """
    pc = param_counts(model)
    dense = zero_model_state_bytes((pc.total - pc.expert_params) / (tp * pp), dp, zero)
    expert = zero_model_state_bytes(pc.expert_params / (tp * pp * ep), max(1, dp // ep), zero)
    return tuple(d + e for d, e in zip(dense, expert))


def activation_bytes_per_layer(model: Model, seq_len: int, microbatch: int, tp: int = 1, cp: int = 1,
                               sequence_parallel: bool = True, recompute: str = "none",
                               flash_attention: bool = True) -> float:
    """Activation memory of one transformer layer for one micro-batch [bytes] ([2]_ Table 2).

    ``s b h (34 + 5 a s / h)`` without parallelism; with tensor parallelism ``t`` and sequence
    parallelism every term is divided by ``t``, without it ``10 s b h`` stays replicated; selective
    recomputation drops the ``5 a s / h`` attention-score term; full recomputation keeps only the
    layer input, ``2 s b h / t``. FlashAttention stores no ``s x s`` scores, so the score term is
    dropped too. Context parallelism divides ``s`` by ``cp``.
    """
    if recompute not in RECOMPUTE_MODES:
        raise InputError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}; got {recompute!r}")
    s = seq_len / cp
    b, h, a = microbatch, model.hidden, model.heads
    if recompute == "full":
        return 2.0 * s * b * h / (tp if sequence_parallel else 1)
    score = 0.0 if (flash_attention or recompute == "selective") else 5.0 * a * s / h
    if sequence_parallel:
        return s * b * h * (34.0 + score) / tp
    return s * b * h * (10.0 + (24.0 + score) / tp)


def training_memory(model: Model, seq_len: int, microbatch: int, tp: int, pp: int, dp: int,
                    cp: int = 1, ep: int = 1, zero: int = 1, recompute: str = "none",
                    num_microbatches: int | None = None, flash_attention: bool = True) -> TrainingMemory:
    """Per-accelerator training memory of the first pipeline stage (the fullest under 1F1B) [bytes].

    Activations: ``ceil(L / pp)`` layers x ``min(pp, m)`` micro-batches in flight ([3]_).
    """
    params, grads, opt = model_state_bytes_per_gpu(model, tp, pp, dp, ep, zero)
    per_layer = activation_bytes_per_layer(model, seq_len, microbatch, tp, cp, True, recompute, flash_attention)
    layers_per_stage = -(-model.layers // pp)
    in_flight = pp if num_microbatches is None else min(pp, num_microbatches)
    return TrainingMemory(params, grads, opt, per_layer * layers_per_stage * in_flight)


# --- inference footprint: minimal stand-ins for issue 5 --------------------------------------------
# The inference planner (issue 7) needs these before the memory model of issue 5 lands; names and
# signatures follow issue 5's ``hnplan.memory.inference`` so the merge replaces them one for one.
# Runtime overheads and the activation workspace are issue 5's; here the whole HBM is usable.

def kv_cache_bytes_per_token(model: Model, kv_dtype: str = "bf16", tp: int = 1) -> float:
    """KV-cache bytes of one token on one accelerator of a ``tp``-way replica [bytes/token].

    MHA / GQA / MQA: ``2 x layers x kv_heads x head_dim x bytes`` (Pope et al., MLSys 2023,
    arXiv:2211.05102, Sec. 2), KV heads split over ``tp`` (at least one per rank). MLA:
    ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``, replicated on every TP rank (DeepSeek-V3
    report, arXiv:2412.19437, Sec. 2.1.1).

    Raises
    ------
    InputError
        For an unknown KV dtype.

    >>> from hnplan.catalog import load_catalog
    >>> kv_cache_bytes_per_token(load_catalog().model("deepseek-v3"))   # 61 x (512 + 64) x 2
    70272.0
    """
    try:
        b = units.dtype_bytes(kv_dtype)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if model.mla is not None:
        return model.layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b
    hd = model.head_dim or model.hidden // model.heads
    return 2.0 * model.layers * max(model.kv_heads / tp, 1.0) * hd * b


def weight_bytes_per_gpu(model: Model, dtype: str = "bf16", tp: int = 1, ep: int = 1) -> float:
    """Weights of a serving replica on one accelerator [bytes]: every parameter at ``dtype``, split
    over ``tp``; routed experts over ``tp x ep``.

    >>> from hnplan.catalog import load_catalog
    >>> round(weight_bytes_per_gpu(load_catalog().model("llama3.1-8b")) / 2**30, 2)   # GiB
    14.96
    """
    try:
        b = units.dtype_bytes(dtype)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    pc = param_counts(model)
    return b * ((pc.total - pc.expert_params) / tp + pc.expert_params / (tp * ep))
