"""Bytes of the data-parallel buckets the distributed optimizer moves: the parameter gather bytes and the
bucket (group) that stays exposed at the edges of a step.

References
----------
.. [1] NVIDIA Megatron-Core, ``distributed/param_and_grad_buffer.py``. ``_ParamAndGradBuffer`` lays the
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

from hnplan.compute.fp8_recipes import param_gather_bytes_per_weight
from hnplan.planning.training.components import PARAM_GATHER_BYTES

if TYPE_CHECKING:
    from hnplan.planning.training.components import Job


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
    after the backward and the one gather before the forward ([1]_). bf16 parameters (one buffer): the
    embedding shard ``E = vocab x hidden / tp`` with at most a bucket beside it, ``max(B, E)`` parameters,
    ``2 E + max(B - E, 0) x g`` bytes gathered (``g``: :func:`param_gather_bytes`, dense). Low-precision
    parameters (``fp8_params`` in fp8, ``fp4_params`` in fp4 training): the last bucket of the quantised GEMM
    weights, ``B8 = W / ceil(W / B)`` of the stage's ``W = GEMM weights / (tp pp)``, with every bf16
    parameter of the stage: ``E``, the untied output layer (``vocab x hidden / tp``, on the stage only at
    PP 1), the norms of its layers (and the final norm at PP 1); gathered at the recipe's bytes per GEMM
    weight and 2 per bf16 parameter. ``grad_bytes`` per parameter reduced either way.

    Examples
    --------
    Llama 3.1 8B at TP 1 with 134.2M-parameter buckets. bf16 parameters: the 128,256 x 4,096 = 525.3M
    embedding, 1.051 GB each way. fp8 parameters: 32 x 218.1M = 6,979.3M GEMM weights, exactly 52 buckets of
    134.2M, the last with the embedding, the untied output layer (525.3M) and 65 norms of 4,096 (0.27M):
    1,185.2M parameters, 2.370 GB of bf16 gradients; 134.2M x 1 + 1,050.9M x 2 = 2.236 GB gathered.

    >>> from hnplan.planning.training import make_job
    >>> job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16)
    >>> [round(float(b) / 1e9, 3) for b in edge_bucket_bytes(job, 1, 1, 134_217_728, 2.0)]
    [1.051, 1.051]
    >>> fp8 = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16, "fp8", overrides={"fp8_params": True})
    >>> [round(float(b) / 1e9, 3) for b in edge_bucket_bytes(fp8, 1, 1, 134_217_728, 2.0)]
    [2.37, 2.236]
    """
    pc, ch = job.params, job.choices
    tp, pp = np.asarray(tp, dtype=float), np.asarray(pp, dtype=float)
    bucket = np.asarray(bucket_params, dtype=float)
    emb = pc.embedding / tp
    norms = pc.norms_per_layer * (pc.dense_layers + pc.moe_layers)
    gemm = pc.layers_total - pc.expert_params - norms  # dense GEMM weights (param_gather_bytes' split)
    by = param_gather_bytes_per_weight(ch.fp8_recipe, job.dtype, ch.fp8_params, ch.fp4_params)
    lowp = (job.dtype == "fp8" and ch.fp8_params) or (job.dtype == "fp4" and ch.fp4_params)
    if not lowp:
        dense = (pc.total - pc.expert_params) / (tp * pp)  # the fullest stage (components.local_params)
        avg = dense / np.maximum(1.0, np.ceil(dense / bucket))
        big = np.maximum(avg, emb)
        return big * grad_bytes, PARAM_GATHER_BYTES * emb + (big - emb) * param_gather_bytes(job)[0]
    w = gemm / (tp * pp)
    last_lowp = w / np.maximum(1.0, np.ceil(w / bucket))
    bf16 = emb + pc.position + norms / pp + np.where(pp == 1, pc.lm_head / tp + pc.final_norm, 0.0)
    return (last_lowp + bf16) * grad_bytes, last_lowp * by + bf16 * PARAM_GATHER_BYTES
