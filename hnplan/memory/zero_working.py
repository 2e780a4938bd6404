"""The working set of sharded data parallelism: the gathered units and their unsharded gradients in flight.

ZeRO stage 3 (FSDP) keeps ``1 / N`` of each parameter on a rank, but a unit (an FSDP-wrapped module: one
Transformer layer, the embedding, the output head) computes on its whole parameters, all-gathered before its
forward and again before its backward; the next unit's all-gather is issued while the current one computes
(prefetching), so two units' gathered parameters are resident at once ([1]_ Sec. 3.3 and the rate limiter,
Sec. 4.4; [2]_ ``limit_all_gathers``: "GPU memory usage from only two consecutive FSDP instances (the current
instance running computation and the next instance whose all-gather is prefetched)"; [3]_ Megatron-FSDP
``SchedulePolicy``: one successor prefetched by default; [4]_ DeepSpeed caps the gathered parameters at
``stage3_max_live_parameters``, default 1e9). In the backward pass the unit's gradients exist whole before its
reduce-scatter shards them (stages 2 and 3), and the reduce-scatter of one unit overlaps the backward of the
next, so two units' unsharded gradients coexist ([1]_ Sec. 3.3, Fig. 5; [3]_).

The model states of :mod:`hnplan.memory.state_accounting` count the shards alone; this module adds, for the
largest unit a rank computes (a Transformer layer's parameters after TP / EP splitting, or the embedding or
the output head on the stages that hold them):

* stage 3: ``gathered_units x unit x weight_bytes`` (bf16, or the quantised weights of an fp8 parameter
  gather with the transpose made after the gather; the embedding and head units at the unquantised width),
  less ``StateAccounting.zero3_whole_bytes``, the cached casts the model states keep whole already; at most the
  rank's whole stage ``S`` (:func:`rank_stage_params`, at the wider of the two widths): the units gathered at once
  are distinct modules, each gathered once (PyTorch FSDP1 ``torch/distributed/fsdp/_flat_param.py``
  ``FlatParamHandle.unshard``: a handle whose ``needs_unshard()`` is false, its unsharded storage already allocated,
  reuses it and allocates nothing), so a deep pipeline's stage of one layer, or of one layer beside the embedding,
  holds that stage gathered and no more;
* stages 2 and 3: ``unit x unsharded_grad_bytes``, the bytes per parameter of the unit-sized gradient
  buffers alive at the backward's peak, summed over the units (default two units at the reduce width).

The largest unit stands for every unit (conservative by the difference between it and its neighbour).

DeepSpeed's ZeRO 3 gathers finer: a submodule's own parameters (one linear layer, an embedding) before it runs,
released after it ([5]_ ``PartitionedParameterCoordinator.fetch_sub_module`` / ``release_sub_module``), the
next submodules' prefetched only while fewer than ``stage3_max_live_parameters`` are gathered
(``prefetch_next_sub_modules``: the last parameter of a prefetch may overshoot the cap by a whole module), and
reduces the gradients through buckets of ``reduce_bucket_size`` elements (``reduce_independent_p_g_buckets_and_
remove_grads``; with ``overlap_comm``, on by default for stage 3, two buckets, one filling while the other
reduces; a parameter larger than the bucket is reduced alone). A stack that sets ``zero3_max_live_params``
and ``zero_reduce_bucket_params`` counts, with ``M`` the largest submodule (:func:`largest_module_params`):

* stage 3: ``(2 M + max_live) x weight_bytes`` gathered (the module computing, the cap, one module over it), at
  most the rank's whole stage ``S`` (:func:`rank_stage_params`): ``fetch_sub_module`` and
  ``prefetch_next_sub_modules`` gather only parameters whose ``ds_status`` is ``NOT_AVAILABLE`` and count each
  gathered parameter once in ``total_available_parameter_numel`` ([5]_), so a small model or a deep pipeline's
  stage, smaller than the cap, is gathered whole and no more;
* stages 2 and 3: ``(M + 2 max(bucket, M)) x weight_bytes`` of unsharded gradients (the module's own, in the
  training dtype as autograd makes them, and the two buckets, ``torch.half`` in [5]_).

References
----------
.. [1] Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB 2023,
   arXiv:2304.11277, Sec. 3.3 (backward and forward prefetching), Sec. 4.4 (the rate limiter: at most two
   in-flight all-gathers), Fig. 5.
.. [2] PyTorch documentation, ``torch.distributed.fsdp.FullyShardedDataParallel`` (``limit_all_gathers``,
   ``backward_prefetch``) and "FSDP Notes" (implicit forward prefetching); FSDP2 ``fully_shard``
   (``reshard_after_forward``, ``MixedPrecisionPolicy(param_dtype, reduce_dtype)``).
.. [3] NVIDIA Megatron-LM, ``megatron/core/distributed/fsdp/src/megatron_fsdp`` (``fsdp_unit_modules``: one
   Transformer layer per unit; ``SchedulePolicy.forward_prefetch_size`` / ``backward_prefetch_size``: "None
   prefetches one successor"; ``fp8_param_gather``: the all-gather in fp8).
.. [4] DeepSpeed configuration documentation, ZeRO: ``stage3_max_live_parameters`` (1e9),
   ``stage3_prefetch_bucket_size`` (5e8 parameters on the page; the code's default is 5e7, [5]_ ``constants.py``;
   hnplan models the prefetch through ``stage3_max_live_parameters`` and reads neither).
.. [5] microsoft/DeepSpeed ``deepspeed/runtime/zero/stage3.py`` and ``constants.py`` @ v0.3.15 (2c2a7f31bcc2,
   April 2021; the same defaults in v0.5.0): ``stage3_max_live_parameters`` 1e9, ``stage3_prefetch_bucket_size``
   5e7, ``reduce_bucket_size`` 5e8, ``overlap_comm`` on for stage 3; ``PartitionedParameterCoordinator``
   (``fetch_sub_module`` all-gathers a module's parameters whose ``ds_status`` is ``NOT_AVAILABLE`` and skips those
   ``AVAILABLE`` or ``INFLIGHT``, ``prefetch_next_sub_modules`` prefetches while ``total_available_parameter_numel``
   is below the cap, each gathered parameter counted once).
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute import head_dim, param_counts
from hnplan.memory.state_accounting import StateAccounting, accounting
from hnplan.memory.states import stage_params

GATHERED_UNITS = 2  # the unit computing and the next one prefetched ([1]_ Sec. 4.4, [2]_, [3]_)
GRAD_UNITS = 2  # the unit whose gradients are computed and the one being reduce-scattered ([1]_ Fig. 5, [3]_)
DEEPSPEED_MAX_LIVE_PARAMS = 1_000_000_000  # stage3_max_live_parameters default ([5]_ constants.py)
DEEPSPEED_REDUCE_BUCKET_PARAMS = 500_000_000  # reduce_bucket_size default, elements ([5]_ constants.py)


def largest_unit_params(model: Model, tp, ep, etp, stage: str, pp) -> tuple[np.ndarray, np.ndarray]:
    """Parameters of the largest FSDP unit one rank computes, ``(layer, end)`` [parameters].

    ``layer``: the largest Transformer layer after TP (``tp``) and expert (``etp x ep``) splitting (a dense
    layer, or an MoE layer's attention, norms and shared experts over ``tp`` plus its routed experts over
    ``etp x ep``); ``end``: the embedding on the first stage (and with ``pp = 1``), the output head on the last,
    over ``tp`` (vocabulary-parallel); 0 elsewhere. Arrays broadcast over the plans.

    >>> from hnplan.catalog.loader import load_catalog
    >>> m = load_catalog().model("llama3.1-8b")
    >>> layer, end = largest_unit_params(m, 1, 1, 1, "first", 1)
    >>> round(float(layer[()]) / 1e6, 1), round(float(end[()]) / 1e6, 1)  # 4096 x (2 x 4096 + 2 x 1024) + 3 x 4096 x 14336
    (218.1, 525.3)
    """
    pc = param_counts(model)
    tp, ep, etp, pp = (np.asarray(x, dtype=np.float64) for x in (tp, ep, etp, pp))
    dense = (pc.attention_per_layer + pc.dense_mlp_per_layer + pc.norms_per_layer) / tp
    dense = np.where(model.layers > pc.moe_layers, dense, 0.0)
    routed = pc.moe_total_per_layer - pc.moe_shared_per_layer
    moe = (pc.attention_per_layer + pc.norms_per_layer + pc.moe_shared_per_layer) / tp + routed / (etp * ep)
    layer = np.maximum(dense, np.where(pc.moe_layers > 0, moe, 0.0))
    first = (stage == "first") | (pp == 1)
    last = (stage == "last") | (pp == 1)
    head = pc.final_norm + (pc.lm_head if not model.tied_embeddings else 0.0)
    end = np.maximum(np.where(first, pc.embedding + pc.position, 0.0), np.where(last, head, 0.0)) / tp
    return layer, end


def largest_module_params(model: Model, tp, ep, etp, stage: str, pp) -> np.ndarray:
    """Parameters of the largest submodule with parameters of its own one rank computes [parameters].

    The modules of a Megatron-style layer after TP (``tp``) and expert (``etp x ep``) splitting: the fused QKV
    projection ``h (a + 2 a_kv) d / tp``, the output projection ``a d h / tp``, the MLP's first linear layer
    ``h f / tp`` (``2 h f / tp`` gated: gate and up fused) and its second ``f h / tp``; an MoE layer's local
    experts as one grouped module (``(E / ep) x`` an expert's first linear layer over ``etp``), its shared
    experts' and the router ``h E``; an MLA model's attention as one module (an upper bound). The word
    embedding on the first stage and the output head on the last, over ``tp`` (vocabulary-parallel), and a
    learned position embedding. Arrays broadcast over the plans.

    >>> from hnplan.catalog.loader import load_catalog
    >>> m = load_catalog().model("megatron-529.6b")  # h 20,480, f 81,920 (GELU), V 51,200, tied
    >>> int(largest_module_params(m, 1, 1, 1, "first", 1)[()])  # the MLP's first linear layer, 20,480 x 81,920
    1677721600
    """
    pc = param_counts(model)
    tp, ep, etp, pp = (np.asarray(x, dtype=np.float64) for x in (tp, ep, etp, pp))
    h, gated = model.hidden, 2 if model.activation == "swiglu" else 1
    if model.mla is not None:
        attention = pc.attention_per_layer
    else:
        d = head_dim(model)
        attention = max(h * (model.heads + 2 * model.kv_heads) * d, model.heads * d * h)
    largest = attention / tp
    if model.layers > pc.moe_layers:  # a dense MLP
        largest = np.maximum(largest, gated * h * model.ffn_hidden / tp)
    if model.moe is not None:
        moe = model.moe
        experts = moe.experts / ep * gated * h * moe.expert_ffn_hidden / etp
        shared = moe.shared_experts * gated * h * moe.expert_ffn_hidden / tp
        largest = np.maximum.reduce([largest, experts, shared, np.full(np.shape(largest), h * moe.experts)])
    first = (stage == "first") | (pp == 1)
    last = (stage == "last") | (pp == 1)
    ends = np.maximum(np.where(first, max(pc.embedding, pc.position), 0.0), np.where(last, pc.lm_head, 0.0))
    return np.maximum(largest, ends / tp)


def rank_stage_params(model: Model, tp, ep, etp, stage: str, pp) -> np.ndarray:
    """Parameters of the pipeline stage one rank holds whole before ZeRO shards them [parameters]: the
    stage's dense parameters over ``tp`` and its routed experts over ``etp x ep``
    (:func:`hnplan.memory.states.stage_params`, unbalanced ends, the first stage's ``ceil(L / pp)`` layers).
    Arrays broadcast over the plans.

    >>> from hnplan.catalog.loader import load_catalog
    >>> m = load_catalog().model("llama3.1-8b")  # 32 x 218.1M layers, 525.3M embedding, on 4 stages: 8 layers
    >>> round(float(rank_stage_params(m, 1, 1, 1, "first", 4)[()]) / 1e9, 3)  # 8 x 218.1e6 + 525.3e6
    2.27
    """
    tp, ep, etp, pp = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (tp, ep, etp, pp)))
    upp, inv = np.unique(pp.ravel(), return_inverse=True)  # each distinct pp once
    per_pp = [stage_params(model, 1, int(p), 1, stage) for p in upp]
    dense = np.array([sp.dense for sp in per_pp])[inv].reshape(pp.shape)
    expert = np.array([sp.expert for sp in per_pp])[inv].reshape(pp.shape)
    return dense / tp + expert / (etp * ep)


def zero_working_bytes(
    model: Model,
    tp,
    pp,
    ep,
    zero,
    recipe: str | StateAccounting,
    stage: str = "first",
    etp=None,
    gathered_units: int = GATHERED_UNITS,
    unsharded_grad_bytes: float | None = None,
    max_live_params: float | None = None,
    reduce_bucket_params: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Working set of ZeRO stages 2 and 3 on one rank, ``(gathered weights, unsharded gradients)`` [bytes].

    Stage 3: ``gathered_units`` units' whole parameters at the gathered width (``weight_bytes`` of the
    accounting for a layer, ``unquantised_weight_bytes`` for the embedding or head unit), at most the rank's whole
    stage (:func:`rank_stage_params`) at the wider of those widths; stages 2 and 3: one
    unit's parameters times ``unsharded_grad_bytes`` (default ``2 x grad_bytes``: two units' gradients at the
    reduce width). Stages 0 and 1 keep whole weights and gradients already (the model states count them):
    zero. The larger of the layer unit and the end unit (:func:`largest_unit_params`) is taken by bytes.

    Parameters
    ----------
    tp, pp, ep, zero, etp : array of int
        One entry per plan (broadcast); ``etp`` defaults to ``tp``.
    recipe : str or StateAccounting
    stage : {"first", "middle", "last"}
    gathered_units : int
        Units whose gathered parameters are resident at once (the stack's ``zero3_gathered_units``).
    unsharded_grad_bytes : float, optional
        Bytes per parameter of the unit-sized gradient buffers alive at the backward's peak, summed.
    max_live_params, reduce_bucket_params : float, optional
        DeepSpeed's module-granular ZeRO 3 (the stack's ``zero3_max_live_params`` and
        ``zero_reduce_bucket_params``, [parameters]): when set, the gathered weights are
        ``min(2 M + max_live_params, S) x weight_bytes`` (``S``: the rank's whole stage,
        :func:`rank_stage_params`) and the unsharded gradients
        ``(M + 2 max(reduce_bucket_params, M)) x weight_bytes`` (``M``: :func:`largest_module_params`) in place
        of the units' counts; each applies alone.

    Returns
    -------
    tuple of ndarray
        ``(weights, grads)`` [bytes] per plan.

    Examples
    --------
    Llama 3.1 8B, bf16 weights, fp32 gradients, ZeRO-3 without TP or PP: the largest unit is the embedding
    (128,256 x 4,096 = 525.3 M parameters), two units gathered at 2 bytes, two units' gradients at 4 bytes:

    >>> from hnplan.catalog.loader import load_catalog
    >>> from hnplan.memory.state_accounting import stack_accounting
    >>> m = load_catalog().model("llama3.1-8b")
    >>> w, g = zero_working_bytes(m, 1, 1, 1, 3, stack_accounting("bf16", 4.0))
    >>> round(float(w[()]) / 1e9, 2), round(float(g[()]) / 1e9, 2)  # 2 x 525.3e6 x 2, 525.3e6 x 8
    (2.1, 4.2)

    DeepSpeed's defaults on the 529.6B GPT without model parallelism: ``M`` = 1.678e9 (the MLP's first linear
    layer), fp16 weights and gradients:

    >>> m = load_catalog().model("megatron-529.6b")
    >>> w, g = zero_working_bytes(m, 1, 1, 1, 3, stack_accounting("bf16", 4.0), max_live_params=1e9,
    ...                           reduce_bucket_params=5e8)
    >>> round(float(w[()]) / 1e9, 2), round(float(g[()]) / 1e9, 2)  # (2 M + 1e9) x 2, (M + 2 M) x 2
    (8.71, 10.07)
    """
    a = accounting(recipe)
    etp = tp if etp is None else etp
    zero = np.asarray(zero)
    layer, end = largest_unit_params(model, tp, ep, etp, stage, pp)
    w_end = a.weight_bytes if a.unquantised_weight_bytes is None else a.unquantised_weight_bytes
    if a.unquantised_weight_bytes is None and a.name.startswith(("stack-fp8", "stack-fp4")):
        w_end = min(w_end, 2.0)  # the embedding and head are no low-precision GEMMs: bf16, no cached cast
    g = 2.0 * a.grad_bytes if unsharded_grad_bytes is None else float(unsharded_grad_bytes)
    w_layer = a.zero3_gathered_bytes  # the caches kept whole are in the model states already
    units = gathered_units * np.maximum(w_layer * layer, w_end * end)
    # never more than the rank's whole stage (at the wider width): a unit is gathered once, as DeepSpeed's cap below
    z3 = zero >= 3
    if np.any(z3):  # the stage's parameters only where ZeRO 3 gathers (pp 1 elsewhere: one stage_params call)
        whole = rank_stage_params(model, tp, ep, etp, stage, np.where(z3, pp, 1)) * max(w_layer, w_end)
        weights = np.where(z3, np.minimum(units, whole), 0.0)
    else:
        weights = np.zeros(np.broadcast(units, zero).shape)
    grads = np.where(zero >= 2, g * np.maximum(layer, end), 0.0)
    if max_live_params is not None or reduce_bucket_params is not None:  # DeepSpeed: submodules and buckets ([5]_)
        module = largest_module_params(model, tp, ep, etp, stage, pp)
        if max_live_params is not None:  # never more than the rank's whole stage: a parameter is gathered once
            live = np.minimum(2.0 * module + max_live_params, rank_stage_params(model, tp, ep, etp, stage, pp))
            weights = np.where(zero >= 3, live * a.weight_bytes, 0.0)
        if reduce_bucket_params is not None:
            grads = np.where(zero >= 2, (module + 2.0 * np.maximum(reduce_bucket_params, module)) * a.weight_bytes, 0.0)
    return weights, grads
