"""Inference memory per accelerator: weights at the serving dtype, KV cache, workspace, overheads.

References
----------
.. [1] Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, arXiv:2211.05102,
   Sec. 2 (KV cache ``2 x layers x kv_heads x head_dim`` elements per token; MQA).
.. [2] Ainslie et al., "GQA", EMNLP 2023, arXiv:2305.13245 (grouped KV heads).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.1.1 (MLA caches the
   ``kv_lora_rank`` latent and the ``qk_rope_head_dim`` decoupled key per token and layer).
.. [4] Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention", SOSP 2023,
   arXiv:2309.06180, and the vLLM memory profiler (``gpu_memory_utilization``; weights, non-torch
   memory and the activation peak of a ``max_num_batched_tokens`` forward pass come off first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hnplan import units
from hnplan.catalog.schemas import Accelerator, MemoryOverheads, Model
from hnplan.compute import head_dim, param_counts
from hnplan.compute.counts import mean_layer_context
from hnplan.errors import InputError, check_choice
from hnplan.memory.breakdown import MemoryBreakdown, hbm_capacity_bytes

SERVING_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


def _dtype_bytes(dtype: str, allowed) -> float:
    check_choice("dtype", dtype, allowed)
    return units.dtype_bytes(dtype)


def kv_cache_bytes_per_token(model: Model, kv_dtype: str = "bf16", tp: int = 1) -> float:
    """KV-cache bytes of one token on one accelerator of a ``tp``-way replica [bytes/token].

    MHA / GQA / MQA: ``2 x layers x kv_heads x head_dim x bytes`` ([1]_, [2]_), the KV heads split
    over ``tp`` (at least one per rank). MLA: ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``,
    the latent replicated on every tensor-parallel rank ([3]_).

    Raises
    ------
    InputError
        For an unknown KV dtype.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> kv_cache_bytes_per_token(cat.model("llama2-7b")) / 2**20        # MiB
    0.5
    >>> kv_cache_bytes_per_token(cat.model("deepseek-v3"))               # 61 x (512 + 64) x 2
    70272.0
    """
    b = _dtype_bytes(kv_dtype, KV_DTYPES)
    if model.mla is not None:
        return model.layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b
    kv_per_rank = max(model.kv_heads / tp, 1.0)
    return 2.0 * model.layers * kv_per_rank * head_dim(model) * b


def kv_cache_tokens(model: Model, context_tokens):
    """Tokens of one sequence's KV cache, in tokens of every layer [tokens]: ``context_tokens`` for a model
    attending to the whole sequence in every layer; with a sliding window ``w`` on ``L_s`` of the ``L`` layers
    (:attr:`~hnplan.catalog.schemas.Model.sliding_window`), whose layers keep only the last ``w`` tokens
    (Hugging Face transformers ``SlidingWindowCache``; vLLM's hybrid KV-cache manager gives sliding-window
    layers ``ceil(w / block)`` blocks a sequence), ``((L - L_s) ctx + L_s min(ctx, w)) / L``. Times
    :func:`kv_cache_bytes_per_token` it gives a sequence's KV bytes. ``context_tokens`` may be an array.

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("gpt-oss-20b")  # 12 of 24 layers keep 128 tokens
    >>> float(kv_cache_tokens(m, 8192)), float(kv_cache_tokens(m, 100))
    (4160.0, 100.0)
    """
    return mean_layer_context(model, context_tokens)


def weight_bytes_per_gpu(model: Model, dtype: str = "bf16", tp: int = 1, ep: int = 1) -> float:
    """Weights of a serving replica on one accelerator [bytes]: the parameters at ``dtype``, split
    over ``tp``; routed experts over ``tp x ep``.

    Below 2 bytes (fp8, int8, int4, fp4) the token embedding and the LM head stay in bf16: low-precision
    serving checkpoints quantise the weights of the linear layers inside the transformer blocks only
    (NVIDIA's ModelOpt checkpoints, e.g. the Hugging Face model cards of nvidia/Llama-3.1-405B-Instruct-FP8
    and -FP4: "Only the weights and activations of the linear operators within transformers blocks are
    quantized", their ``hf_quant_config.json`` listing ``lm_head`` under ``exclude_modules``; DeepSeek-V3's
    FP8 release keeps ``embed`` and ``head`` in bf16, deepseek-ai/DeepSeek-V3 inference/model.py).

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("llama3.1-8b")
    >>> round(weight_bytes_per_gpu(m) / 2**30, 2)   # GiB
    14.96
    >>> round((weight_bytes_per_gpu(m, "fp8") - weight_bytes_per_gpu(m) / 2) / 2**30, 3)  # 2 x 128256 x 4096 bytes
    0.979
    """
    b = _dtype_bytes(dtype, SERVING_DTYPES)
    pc = param_counts(model)
    vocab = pc.embedding + pc.lm_head
    vocab_b = max(b, units.dtype_bytes("bf16"))
    return b * ((pc.total - vocab - pc.expert_params) / tp + pc.expert_params / (tp * ep)) + vocab_b * vocab / tp


def workspace_bytes(model: Model, tokens: int, sequences: int, tp: int = 1) -> float:
    """Activation workspace of one forward pass of ``tokens`` tokens over ``sequences`` sequences [bytes].

    The largest tensors alive together in a layer: the residual stream and its normed copy
    (``2 x 2h`` bytes per token) and the MLP intermediate (``6f`` SwiGLU, ``4f`` GELU; an MoE layer's
    ``top-k`` expert intermediates), split over ``tp``; plus fp32 logits of the last token of each
    sequence. Inference keeps nothing for a backward pass, so one layer's peak is the workspace.
    """
    h = model.hidden
    if model.moe is not None:
        inter = model.moe.active_experts * (3 if model.activation == "swiglu" else 2) * model.moe.expert_ffn_hidden
        inter = max(inter, (3 if model.activation == "swiglu" else 2) * model.ffn_hidden)
    else:
        inter = (3 if model.activation == "swiglu" else 2) * model.ffn_hidden
    per_token = 2.0 * (2 * h) + 2.0 * inter / tp
    return tokens * per_token + 4.0 * sequences * model.vocab / tp


def serving_overhead_bytes(tp: int, overheads: MemoryOverheads) -> float:
    """CUDA context, plus one NCCL communicator when ``tp > 1`` (``overheads``: the catalog's
    ``memory.yaml``) [bytes]."""
    o = overheads
    gib = o.cuda_context_gib.value + (o.nccl_gib_per_communicator.value if tp > 1 else 0.0)
    return units.GiB_to_bytes(gib)


@dataclass(frozen=True)
class InferenceMemory(MemoryBreakdown):
    """Per-accelerator memory of a serving replica [bytes], with the tokens its KV cache holds."""

    kv_bytes_per_token: float = 0.0
    tokens: int = 0


def inference_memory(
    model: Model,
    batch: int,
    seq_len: int,
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tp: int = 1,
    ep: int = 1,
    max_batched_tokens: int | None = None,
    *,
    overheads: MemoryOverheads,
) -> InferenceMemory:
    """Memory of a replica serving ``batch`` sequences of ``seq_len`` tokens (prompt + output) [bytes].

    Weights (:func:`weight_bytes_per_gpu`), KV cache of ``batch x seq_len`` tokens
    (:func:`kv_cache_bytes_per_token`; sliding-window layers keep ``min(seq_len, window)`` of them,
    :func:`kv_cache_tokens`), workspace of a forward pass of ``min(batch x seq_len,
    max_batched_tokens)`` tokens (:func:`workspace_bytes`; default the catalog's serving value) and
    runtime overheads (:func:`serving_overhead_bytes`); ``overheads`` is the catalog's
    :class:`~hnplan.catalog.schemas.MemoryOverheads` (``memory.yaml``).

    Raises
    ------
    InputError
        For unknown dtypes or non-positive sizes.
    """
    if batch < 1 or seq_len < 1:
        raise InputError(f"batch and seq_len must be positive; got batch={batch}, seq_len={seq_len}")
    mbt = int(max_batched_tokens or overheads.serving_max_batched_tokens.value)
    per_tok = kv_cache_bytes_per_token(model, kv_dtype, tp)
    tokens = batch * seq_len
    return InferenceMemory(
        params_bytes=weight_bytes_per_gpu(model, dtype, tp, ep),
        grads_bytes=0.0,
        optimizer_bytes=0.0,
        activations_bytes=workspace_bytes(model, min(tokens, mbt), min(batch, mbt), tp),
        kv_cache_bytes=per_tok * batch * kv_cache_tokens(model, seq_len),
        overhead_bytes=serving_overhead_bytes(tp, overheads),
        kv_bytes_per_token=per_tok,
        tokens=tokens,
    )


@dataclass(frozen=True)
class KVCapacity:
    """How many tokens a replica's KV cache holds on one accelerator."""

    usable_bytes: float
    weights_bytes: float
    workspace_bytes: float
    overhead_bytes: float
    kv_bytes: float
    kv_bytes_per_token: float
    tokens: int

    def as_dict(self) -> dict:
        g = units.to_GiB
        return {
            "usable_gib": g(self.usable_bytes),
            "weights_gib": g(self.weights_bytes),
            "workspace_gib": g(self.workspace_bytes),
            "overhead_gib": g(self.overhead_bytes),
            "kv_cache_gib": g(self.kv_bytes),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "max_tokens": self.tokens,
        }


def kv_capacity(
    model: Model,
    acc: Accelerator,
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tp: int = 1,
    ep: int = 1,
    utilization: float | None = None,
    max_batched_tokens: int | None = None,
    max_sequences: int = 256,
    *,
    overheads: MemoryOverheads,
    kv_budget_bytes: float | None = None,
) -> KVCapacity:
    """Tokens of KV cache that fit on one accelerator of a replica, the vLLM way ([4]_).

    ``usable = device memory x utilization`` (vLLM's ``gpu_memory_utilization``, SGLang's
    ``mem_fraction_static``); weights, the workspace of a ``max_batched_tokens`` forward pass (logits
    for ``max_sequences``, vLLM's default ``max_num_seqs`` 256) and the runtime overheads come off; the
    rest holds ``floor(rest / KV bytes per token)`` tokens. ``overheads`` is the catalog's
    :class:`~hnplan.catalog.schemas.MemoryOverheads` (``memory.yaml``): utilization, batched tokens and
    runtime overheads by default.

    ``kv_budget_bytes`` sets the KV cache directly, as vLLM's ``kv_cache_memory_bytes`` and
    TensorRT-LLM's ``max_tokens`` do, in place of the utilization rule; it is capped at what the device
    holds after weights, workspace and overheads (the whole visible HBM), so it never creates memory.

    A replica whose weights do not fit gets 0 tokens (``kv_bytes`` negative).

    Raises
    ------
    InputError
        For a utilization outside (0, 1], a negative KV budget or unknown dtypes.
    """
    o = overheads
    util = o.serving_memory_utilization.value if utilization is None else utilization
    if not 0 < util <= 1:
        raise InputError(f"utilization must be in (0, 1]; got {util}")
    if kv_budget_bytes is not None and kv_budget_bytes < 0:
        raise InputError(f"KV budget must be >= 0; got {kv_budget_bytes:g} bytes")
    mbt = int(max_batched_tokens or o.serving_max_batched_tokens.value)
    hbm = hbm_capacity_bytes(acc)
    usable = hbm * util
    w = weight_bytes_per_gpu(model, dtype, tp, ep)
    ws = workspace_bytes(model, mbt, min(max_sequences, mbt), tp)
    over = serving_overhead_bytes(tp, o)
    kv = usable - w - ws - over
    if kv_budget_bytes is not None:
        usable = hbm
        kv = min(kv_budget_bytes, hbm - w - ws - over)
    per_tok = kv_cache_bytes_per_token(model, kv_dtype, tp)
    return KVCapacity(usable, w, ws, over, kv, per_tok, max(0, math.floor(kv / per_tok)))


def max_batch(capacity: KVCapacity, seq_len: int) -> int:
    """Largest number of ``seq_len``-token sequences the KV cache holds at once."""
    return capacity.tokens // seq_len
