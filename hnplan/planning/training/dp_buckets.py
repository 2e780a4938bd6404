"""Bytes of the data-parallel buckets the distributed optimizer moves: the parameter gather bytes and the
bucket (group) that stays exposed at the edges of a step.

References
----------
.. [1] NVIDIA Megatron-Core, ``megatron/core/distributed/param_and_grad_buffer.py`` (NVIDIA/Megatron-LM commit
   0011998). ``_ParamAndGradBuffer`` lays the
   parameters out ``params[::-1]``, in backward order from the output layer to the input embedding, and
   closes a bucket once it holds ``bucket_size`` elements, after the parameter that fills it: a parameter
   never spans two buckets. ``DistributedDataParallel`` keeps one buffer per (parameter, gradient) dtype,
   Transformer Engine's quantised weights (``is_float8tensor``: ``isinstance`` of Transformer Engine's
   ``QuantizedTensor`` in ``megatron/core/fp8_utils.py``, so per-tensor fp8, MXFP8 and NVFP4 weights alike) in a
   ``torch.uint8`` buffer of their own, and
   ``partition_buckets`` (case 3, "when using fp8 params, merge all non-fp8 buckets into the last fp8
   bucket group") puts every bucket of the other buffers (the bf16 embedding, output layer and norms) into
   the group of the last fp8 bucket: that group is reduced once its last gradient, the embedding's, is ready
   and gathered first before the next forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.params import _attention_params, head_dim
from hnplan.compute.fp8_recipes import param_gather_bytes_per_weight
from hnplan.compute.layout import stage_layer_range
from hnplan.planning.training.components import PARAM_GATHER_BYTES

if TYPE_CHECKING:
    from hnplan.catalog.schemas import Model
    from hnplan.planning.training.components import Job

PARAM_ALIGN = 64  # elements: ``_pad_start_of_param_if_needed`` starts every parameter 128-byte aligned ([1]_)
_WALKS: dict[
    tuple, dict[tuple, tuple[float, float]]
] = {}  # (model dimensions, low precision) -> (tp, pp, bucket) -> walk


def param_gather_bytes(job: Job) -> tuple[float, float]:
    """Bytes per parameter the distributed optimizer all-gathers: ``(dense, expert)``.

    bf16 (:data:`~hnplan.planning.training.components.PARAM_GATHER_BYTES`, 2) unless the stack keeps
    low-precision weights (``fp8_params`` in fp8 training, ``fp4_params`` in fp4 training): then the GEMM
    weights of the layers travel at the recipe's bytes
    (:func:`hnplan.compute.fp8_recipes.param_gather_bytes_per_weight`: fp8 1 byte, MXFP8 2 as it is gathered
    in bf16, NVFP4 packed) and the rest of the dense parameters (embedding, output layer, norms: not
    Transformer Engine GEMM weights) as bf16, so the dense group averages
    ``2 - (GEMM weights / dense parameters) x (2 - gathered bytes)`` and the routed experts the gathered
    bytes (Megatron-Core ``DistributedDataParallelConfig.fp8_param_gather`` / ``fp4_param_gather``;
    Transformer Engine ``fp8_model_init`` makes low-precision weights of its GEMM modules only).
    """
    ch = job.choices
    by = param_gather_bytes_per_weight(ch.fp8_recipe, job.dtype, ch.fp8_params, ch.fp4_params)
    if by == PARAM_GATHER_BYTES:
        return PARAM_GATHER_BYTES, PARAM_GATHER_BYTES
    pc = job.params
    dense = pc.total - pc.expert_params
    gemm_dense = pc.layers_total - pc.expert_params - pc.norms_per_layer * (pc.dense_layers + pc.moe_layers)
    lowp_share = gemm_dense / dense if dense > 0 else 0.0
    return PARAM_GATHER_BYTES - lowp_share * (PARAM_GATHER_BYTES - by), by


def edge_bucket_bytes(job: Job, tp, pp, bucket_params, grad_bytes: float):
    """Bytes of the data-parallel bucket (group) of the first pipeline stage that holds the input embedding:
    ``(reduced, gathered)`` per rank [bytes]; arrays over ``tp``, ``pp`` and ``bucket_params`` (``B``).

    Its gradient is the backward's last and its weights the forward's first, so it is the one reduction left
    after the backward and the one gather before the forward ([1]_). The buckets are laid out as
    ``_ParamAndGradBuffer`` does from the stage's parameters (:func:`_layer_tensors`; embedding, the first
    ``ceil(L / pp)`` layers, at PP 1 the final norm and untied output layer), walked from the last
    registered to the first, each starting 64-element aligned, a bucket closed after the parameter that
    brings it to ``B`` elements. bf16 parameters (one buffer): the last bucket, the embedding shard
    ``vocab x hidden / tp`` and the layer-0 parameters walked after the previous bucket closed (a tied
    embedding at PP > 1, ``shared_embedding``, is a bucket of its own), gathered at 2 bytes. Low-precision
    parameters (``fp8_params`` in fp8, ``fp4_params`` in fp4 training): the last bucket of the quantised
    GEMM weights' buffer with every bf16 parameter of the stage (embedding, norms, routers, at PP 1 the
    output layer), gathered at the recipe's bytes per GEMM weight and 2 per bf16 parameter. ``grad_bytes``
    per parameter reduced either way. Not modelled: the end-of-bucket padding to ``lcm(dp cp, 128)``
    elements (below 0.1 % of a bucket), NVFP4's packed element count in the walk, the interleaved
    schedule's first model chunk (the whole stage is walked).

    Examples
    --------
    Llama 3.1 8B at TP 1 with 134,217,728-parameter buckets, walked from the output layer: per layer
    ``linear_fc2`` 58.72M, ``linear_fc1`` 117.44M (+4,096 norm), ``linear_qkv`` 25.17M (+4,096),
    ``linear_proj`` 16.78M. bf16 parameters: the output layer (525.3M) closes a bucket of its own; layer 31's
    ``linear_fc2`` and ``linear_fc1`` close the next (176.2M), then buckets of (qkv, proj, fc2, fc1) 218.1M and
    (qkv, proj, fc2, fc1)... the walk leaves layer 0's ``linear_qkv`` and ``linear_proj`` (41.9M) with the
    embedding (525.3M): 567.3M, 1.135 GB each way. fp8 parameters: the GEMM weights alone,
    ``fc2 + fc1`` (176.2M) then ``qkv + proj + fc2 + fc1`` (218.1M) per bucket leave layer 0's qkv and proj
    (41.9M) last, with 1,050.9M bf16 parameters (embedding, output layer, 65 norms): 2.186 GB of bf16
    gradients, 41.9M x 1 + 1,050.9M x 2 = 2.144 GB gathered.

    >>> from hnplan.planning.training import make_job
    >>> job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16)
    >>> [round(float(b) / 1e9, 3) for b in edge_bucket_bytes(job, 1, 1, 134_217_728, 2.0)]
    [1.135, 1.135]
    >>> fp8 = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16, "fp8", overrides={"fp8_params": True})
    >>> [round(float(b) / 1e9, 3) for b in edge_bucket_bytes(fp8, 1, 1, 134_217_728, 2.0)]
    [2.186, 2.144]
    """
    ch, m = job.choices, job.model
    by = param_gather_bytes_per_weight(ch.fp8_recipe, job.dtype, ch.fp8_params, ch.fp4_params)
    lowp = bool((job.dtype == "fp8" and ch.fp8_params) or (job.dtype == "fp4" and ch.fp4_params))
    tp_a, pp_a, b_a = np.broadcast_arrays(
        np.asarray(tp, dtype=float), np.asarray(pp, dtype=float), np.asarray(bucket_params, dtype=float)
    )
    dims = (m.layers, m.hidden, m.ffn_hidden, m.heads, m.kv_heads, m.head_dim, m.vocab, m.max_seq, m.activation)
    walks = _WALKS.setdefault((dims, m.position_embedding, m.tied_embeddings, m.moe, m.mla, lowp), {})
    if len(walks) > 4096:
        walks.clear()
    # one walk per distinct (bucket, tp, pp), packed in one integer (tp and pp below 2^16: heads and layers are)
    sizes, b_idx = np.unique(b_a.ravel(), return_inverse=True)
    code = (b_idx.astype(np.int64) << 32) | (np.rint(tp_a.ravel()).astype(np.int64) << 16)
    code |= np.rint(pp_a.ravel()).astype(np.int64)
    keys, inv = np.unique(code, return_inverse=True)
    q, bf = np.empty(len(keys)), np.empty(len(keys))
    for j, k in enumerate(keys.tolist()):
        t, p, b = (k >> 16) & 0xFFFF, k & 0xFFFF, float(sizes[k >> 32])
        if (t, p, b) not in walks:
            walks[t, p, b] = _edge_walk(m, t, p, b, lowp)
        q[j], bf[j] = walks[t, p, b]
    lowp_n, bf16_n = q[inv.ravel()].reshape(tp_a.shape), bf[inv.ravel()].reshape(tp_a.shape)
    return (lowp_n + bf16_n) * grad_bytes, lowp_n * by + bf16_n * PARAM_GATHER_BYTES


def _layer_tensors(model: Model, moe_layer: bool, tp: int) -> tuple[list[float], list[bool]]:
    """One transformer layer's parameters in Megatron-Core's registration order (Transformer Engine layer
    spec) on one tensor-parallel rank: element counts and whether each is a quantisable GEMM weight.

    ``self_attention.linear_proj.weight``, ``linear_qkv.layer_norm_weight``, ``linear_qkv.weight`` (``Attention``
    builds ``linear_proj`` before ``SelfAttention`` adds ``linear_qkv``); dense: ``mlp.linear_fc1.layer_norm_weight``,
    ``linear_fc1.weight``, ``linear_fc2.weight``; MoE: ``pre_mlp_layernorm.weight``, ``mlp.router.weight`` (a plain
    parameter, not a Transformer Engine module, whole on every rank), the shared experts' ``linear_fc1`` and
    ``linear_fc2``; the routed experts are in the expert buffers. MLA's projections and latent norms count as
    one tensor beside ``linear_proj``.
    """
    h = float(model.hidden)
    if model.mla is not None:
        o = model.heads * model.mla.v_head_dim * h
    else:
        o = model.heads * head_dim(model) * h
    attn = _attention_params(model)
    sizes = [o / tp, h, (attn - o) / tp, h]
    gemm = [True, False, True, False]
    gated = 3 if model.activation == "swiglu" else 2
    moe = model.moe
    if moe_layer and moe is not None:
        sizes.append(h * moe.experts)
        gemm.append(False)
        ffn = moe.shared_experts * moe.expert_ffn_hidden
    else:
        ffn = model.ffn_hidden
    if ffn:
        sizes += [(gated - 1) * h * ffn / tp, h * ffn / tp]
        gemm += [True, True]
    return sizes, gemm


def _edge_walk(model: Model, tp: int, pp: int, bucket: float, lowp: bool) -> tuple[float, float]:
    """``(quantised, bf16)`` parameters of the first stage's edge bucket group ([1]_): the bucket holding the
    input embedding (bf16 weights; ``quantised`` 0), or the last bucket of the quantised GEMM weights and every
    bf16 parameter of the stage (``lowp``) [parameters]."""
    first = stage_layer_range(model, pp, "first")
    n_dense = 0 if model.moe is None else model.moe.first_dense_layers
    sizes: list[float] = [model.vocab * model.hidden / tp]  # embedding.word_embeddings.weight
    gemm = [False]
    if model.position_embedding == "learned":
        sizes.append(float(model.max_seq * model.hidden))
        gemm.append(False)
    per = {k: _layer_tensors(model, k, tp) for k in (False, True)}
    for i in first:
        s, g = per[model.moe is not None and i >= n_dense]
        sizes += s
        gemm += g
    if pp == 1:  # decoder.final_layernorm.weight, output_layer.weight (untied)
        sizes.append(float(model.hidden))
        gemm.append(False)
        if not model.tied_embeddings:
            sizes.append(model.vocab * model.hidden / tp)
            gemm.append(False)
    n = np.asarray(sizes)[::-1]  # the buffer walks params[::-1]
    is_gemm = np.asarray(gemm)[::-1]
    if lowp:
        return _last_bucket(n[is_gemm], bucket), float(n[~is_gemm].sum())
    if model.tied_embeddings and pp > 1:  # ``shared_embedding``: a bucket of its own
        return 0.0, float(n[-1])
    return 0.0, _last_bucket(n, bucket)


def _last_bucket(n: np.ndarray, bucket: float) -> float:
    """Elements of the last bucket of a buffer walked in the order ``n`` (element counts): each parameter
    starts 64-element aligned, a bucket closes after the parameter that brings it to ``bucket`` elements
    (``_ParamAndGradBuffer``, [1]_) [elements]."""
    if n.size == 0:
        return 0.0
    start = np.concatenate(([0.0], np.cumsum(np.ceil(n / PARAM_ALIGN) * PARAM_ALIGN)[:-1]))
    end = start + n
    b0 = 0
    while True:
        k = int(np.searchsorted(end, start[b0] + bucket, side="left"))
        if k >= n.size - 1:  # the last parameter closes or ends this bucket
            return float(end[-1] - start[b0])
        b0 = k + 1
