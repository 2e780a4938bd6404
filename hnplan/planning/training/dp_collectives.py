"""The exposed data-parallel collectives of a training step over arrays of candidate plans: the gradient
reduction and parameter gather of ZeRO 0-3 (HSDP included) as buckets, the interleaved schedule's per-chunk
gradient reduction, and the embedding-gradient all-reduce between the end pipeline stages.

Each group is placed on the system once (:func:`hnplan.comm.placement.place_group`) and each distinct
message timed once (:func:`hnplan.planning.training.collective_time.collective_s`), once per distinct
layout of the plans (:func:`hnplan.vectorise.factorize`, :func:`hnplan.vectorise.on_distinct`). The TP, CP
and PP traffic per micro-batch is in :mod:`hnplan.planning.training.collectives`; the step model that adds
them up is in :mod:`hnplan.planning.training.components`.

References
----------
.. [1] NVIDIA Megatron-Core, ``distributed/distributed_data_parallel_config.py``: ``overlap_grad_reduce``,
   ``overlap_param_gather`` and the default bucket of ``max(40,000,000, 1,000,000 x dp)`` parameters.
.. [2] Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054, Sec. 7 (stage 3: parameters gathered for
   the forward and the backward of every micro-batch).
.. [3] NVIDIA Megatron-Core, ``distributed/finalize_model_grads.py`` (``finalize_model_grads``: after
   ``finish_grad_sync``, ``_allreduce_word_embedding_grads`` all-reduces the word-embedding gradient over the
   embedding group, the first and last pipeline stages, when ``share_embeddings_and_output_weights`` or
   ``mtp_num_layers``: the last stage keeps a copy of the embedding for the output layer or the multi-token
   prediction module).
.. [4] NVIDIA Megatron-Core, ``pipeline_parallel/schedules.py``
   (``forward_backward_pipelining_with_interleaving``: ``is_last_microbatch_for_model_chunk``,
   ``get_model_chunk_id``, the ``grad_sync_func`` of a model chunk called after its last backward with
   ``grad_sync_virtual_microbatch_id = virtual_microbatch_id - pipeline_parallel_rank``; the remaining
   chunks' syncs launched after the cool-down) and ``distributed/distributed_data_parallel_config.py``
   (``align_grad_reduce``).
.. [5] NVIDIA Megatron-Core, ``distributed/param_and_grad_buffer.py`` (``_ParamAndGradBuffer``: the
   parameters are laid out ``params[::-1]``, in backward order from the output layer to the input embedding,
   and a bucket is closed once it holds ``bucket_size`` elements, after the parameter that fills it: a
   parameter never spans two buckets, so the last bucket of the backward, the first of the forward's
   all-gathers, holds the whole embedding shard).
.. [6] pytorch/pytorch ``torch/distributed/fsdp/_runtime_utils.py`` (``_reduce_grad``: under a hybrid sharding
   strategy ``dist.reduce_scatter_tensor`` over ``state.process_group``, then ``dist.all_reduce(new_sharded_grad,
   group=state._inter_node_pg)`` on ``state._all_reduce_stream``) and ``_init_utils.py``
   (``_init_process_group_state_for_hybrid_shard``: ``_init_intra_and_inter_node_groups(default_group,
   device_count())``, the intra-node group sharding and the inter-node group, one rank of each server, replicating).
.. [7] pytorch/pytorch ``torch/distributed/fsdp/_runtime_utils.py`` @ 3ade90a6aaa9
   (``_post_backward_final_callback``, FSDP1: at the end of each backward the compute stream waits for the
   post-backward stream, where ``_post_backward_hook`` ran each unit's reduce-scatter and, under HSDP, its
   ``default_hooks.allreduce_hook``; later releases run that all-reduce on ``_all_reduce_stream`` and the
   callback waits for it too, ``if root_state._all_reduce_stream is not current_stream:  # uses HSDP``) and
   ``torch/distributed/fsdp/_fully_shard/_fsdp_state.py`` @ 1fd469d0c96e (``_root_post_backward_final_callback``, FSDP2:
   waits for the last ``reduce_scatter_state.event`` and, through ``FSDPParamGroup.finalize_backward``, each
   group's post-reduce event, after its HSDP all-reduce; ``is_last_backward`` is true unless the training
   loop clears it, which torchtitan @ e7c0cae934df ``torchtitan/train.py`` does not).
.. [8] NVIDIA/Megatron-LM @ d98e8a64ddf3, ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py``
   (``_root_post_backward``: ``optim_grads_params`` reduce-scatters in every backward without waiting;
   ``finish_grad_sync`` waits for them, called by ``finalize_model_grads`` once a step, after the last
   micro-batch, ``megatron/core/pipeline_parallel/schedules.py``; ``_process_post_backward_gradients``: the
   all-reduce across the HSDP replicas only with ``is_last_microbatch``, which the schedules' ``no_sync`` clears
   for the other micro-batches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.compute.layout import stage_layers
from hnplan.memory.states import expert_dp, zero_shard_ranks
from hnplan.planning.training.collective_time import collective_s, collectives_s
from hnplan.planning.training.components import (
    BUCKET_MIN_PARAMS,
    BUCKET_PER_DP_PARAMS,
    Job,
    _col,
    local_params,
    overlap_slowdown,
    with_etp,
)
from hnplan.planning.training.dp_buckets import edge_bucket_bytes, param_gather_bytes
from hnplan.vectorise import factorize, gather, on_distinct

if TYPE_CHECKING:
    import pandas as pd

DP_LAYOUT_KEYS = ("tp", "dp", "cp", "ep", "zero_stage", "pp", "etp")  # what the data-parallel collectives depend on


def dp_comm_exposed(job: Job, df: pd.DataFrame, t_fwd_mb, t_bwd_mb, t_compute_mb) -> np.ndarray:
    """Exposed data-parallel communication of one step [s].

    ZeRO 0 all-reduces the gradients; ZeRO 1-2 (distributed optimizer) reduce-scatter them and
    all-gather the updated bf16 parameters (with ``fp8_params`` or ``fp4_params`` the GEMM weights at the
    recipe's bytes, the embedding, head and norms still bf16: :func:`param_gather_bytes`); both over
    ``dp x cp`` ranks (stride ``tp``), expert parameters over their ``tp cp dp / (etp ep)`` replicas
    (stride ``etp ep``: the expert layers' rank order, ETP innermost, then EP, then expert-DP; MoE
    parallel folding, arXiv:2504.14960; ``dp cp / ep`` with stride ``tp ep`` at the default ``etp = tp``).
    Each runs as buckets of the stack's ``dp_bucket_params`` parameters, by default
    Megatron-Core's ``max(40M, 1M x dp cp)`` ([1]_), every bucket a collective with its own latency. With
    bucketed overlap the reduce-scatter hides behind the last micro-batch's backward (each model chunk's
    behind the backwards after its last one under the interleaved schedule,
    :func:`interleaved_grad_exposed`) and the all-gather behind the first forward, exposing at least one
    bucket each: the bucket that holds the input embedding (its ``vocab x hidden / tp`` shard, gathered in
    bf16 whatever the GEMM weights travel at), whose gradient the backward produces last and whose weights
    the forward needs first, so that bucket is at least the embedding shard; with low-precision parameters
    every bf16 parameter (embedding, untied output layer, norms) rides in the last fp8 bucket's group
    (:func:`edge_bucket_bytes`; [5]_). ZeRO 3 gathers
    each layer's parameters for every micro-batch's forward and backward and reduce-scatters its
    gradients ([2]_; one unit per layer, as FSDP wraps them), prefetched under that micro-batch's
    compute; the first gather is exposed. Under HSDP (``zero3_shard_ranks``, PyTorch FSDP ``HYBRID_SHARD``) the
    gathers and reduce-scatters run in the shard group (:func:`hnplan.memory.states.zero_shard_ranks`, stride
    ``tp``) and each layer's gradient shard, ``1 / shard`` of it, is then all-reduced across the ``dp cp / shard``
    replicas (stride ``tp x shard``), on a stream of its own beside the backward ([6]_): after every backward with
    the stack's ``hsdp_all_reduce`` ``microbatch`` (PyTorch FSDP), after the last micro-batch's only with ``step``
    (Megatron-FSDP, [8]_). The last layer's
    reduce-scatter and all-reduce have no backward left to hide behind and the optimizer needs them: with the
    stack's ``zero3_grad_wait`` ``microbatch`` (PyTorch FSDP, which waits for them at the end of every backward,
    [7]_) each micro-batch exposes at least ``AG1 + RS1 + AR1`` (one layer's gather, reduce-scatter and HSDP
    all-reduce), with ``step`` (Megatron-FSDP, which waits once before the optimizer step, [8]_) the last
    micro-batch does and the others ``AG1``. The hidden part is not free: the compute it runs beside is
    slowed per second hidden by the SM share of the DP communicator's NCCL channels where the choices
    give them (``overlap_comm_ctas["dp"]``), else by the stack's ``overlap_gemm_slowdown`` (the
    communication kernels hold SMs and share HBM bandwidth), as for TP and EP overlap
    (:func:`hnplan.planning.training.components.overlap_slowdown`, ``overlapped_comm``). The step's
    embedding-gradient all-reduce between the end stages (:func:`embedding_grad_allreduce_s`) is added.
    """
    ov = job.choices

    def per_layout(u):  # the collectives once per distinct (tp, dp, cp, ep, zero, pp, etp)
        tp, dp, cp, ep, z, pp, etp = (_col(u, c) for c in DP_LAYOUT_KEYS)
        dense, expert = local_params(job, u)
        layers = stage_layers(job.model, pp).per_stage
        if ov.dp_bucket_params is None:  # Megatron-Core's default ([1]_)
            bucket = np.maximum(BUCKET_MIN_PARAMS, BUCKET_PER_DP_PARAMS * dp * cp)
        else:  # the recipe's bucket_size
            bucket = np.full(len(u), float(ov.dp_bucket_params))
        gather_dense, gather_expert = param_gather_bytes(job)
        shard = zero_shard_ranks(dp * cp, z, ov.zero3_shard_ranks)  # dp x cp, or the HSDP group at ZeRO 3
        groups = [(dense, shard, tp, gather_dense)]
        if job.model.moe is not None:
            groups.append((expert, expert_dp(tp, dp, cp, ep, etp), etp * ep, gather_expert))

        # ZeRO 0 all-reduces; ZeRO 1-3 reduce-scatter and all-gather: each over every group for the layouts that
        # run it (a group of one rank for the others, not timed: the times below do not read theirs), as buckets
        # of the group's parameters (``None``: its parameter gather bytes)
        passes = (
            ("allreduce", ov.grad_reduce_bytes, z == 0),
            ("reducescatter", ov.grad_reduce_bytes, z != 0),
            ("allgather", None, z != 0),
        )
        buckets = [np.where(z == 3, layers, np.maximum(1.0, np.ceil(n / bucket))) for n, *_ in groups]
        requests = [
            (op, n / nb * (gather if per_param is None else per_param), np.where(runs, g, 1), s)
            for op, per_param, runs in passes
            for (n, g, s, gather), nb in zip(groups, buckets)
        ]
        # ZeRO 0-2: the exposed bucket of each pass is the one with the embedding shard, at least a bucket
        g_dense = groups[0][1]
        e_grad, e_gather = edge_bucket_bytes(job, tp, pp, bucket, ov.grad_reduce_bytes)
        size = np.where(z == 3, 1, g_dense)
        requests += [
            ("allreduce", e_grad, np.where(z == 0, size, 1), tp),
            ("reducescatter", e_grad, np.where(z == 0, 1, size), tp),
            ("allgather", e_gather, np.where(z == 0, 1, size), tp),
        ]
        times = collectives_s(job, requests)  # each op's requests in one call
        e_ar, e_rs, e_ag = times[-3:]

        def coll(k):
            """(all buckets, one bucket) of pass ``k`` over every group [s]."""
            total, one = np.zeros(len(u)), np.zeros(len(u))
            for nb, t1 in zip(buckets, times[k * len(groups) : (k + 1) * len(groups)]):
                total, one = total + nb * t1, np.maximum(one, t1)
            return total, one

        (ar, ar1), (rs, rs1), (ag, ag1) = coll(0), coll(1), coll(2)
        last_grad = np.where(z == 0, np.maximum(ar1, e_ar), np.where(z == 3, rs1, np.maximum(rs1, e_rs)))
        last_param = np.where(z == 0, 0.0, np.where(z == 3, ag1, np.maximum(ag1, e_ag)))
        t_grad, t_param = np.where(z == 0, ar, rs), np.where(z == 0, 0.0, ag)
        # ZeRO 3: each layer gathered for forward and backward, its gradients reduce-scattered; under HSDP
        # each layer's gradient shard then all-reduced across the replicas (stride tp x shard; 0 without HSDP)
        replicas = np.where(z == 3, dp * cp // shard, 1)
        hsdp1 = collective_s(job, "allreduce", dense / layers * ov.grad_reduce_bytes / shard, replicas, tp * shard)
        # ZeRO 3's floor: the forward's first gather, and where the stack waits for it the backward's last
        # reduce-scatter with its all-reduce across the replicas (zero3_grad_wait; [6]_, [7]_)
        return t_grad, last_grad, t_param, last_param, 2 * ag + rs, ag1, rs1, z == 3, hsdp1, layers * hsdp1

    codes, layouts = factorize(with_etp(df), list(DP_LAYOUT_KEYS))
    per = per_layout(layouts)
    t_grad, last_grad, t_param, last_param = gather(per[:4], codes)  # x[codes], faster
    if ov.dp_grad_reduce:  # per model chunk, behind the backward that follows its last micro-batch
        grad_exp = np.maximum(interleaved_grad_exposed(df, t_grad, t_bwd_mb), last_grad)
    else:
        grad_exp = t_grad
    param_exp = np.maximum(t_param - t_fwd_mb, last_param) if ov.dp_param_gather else t_param
    # what is hidden still slows the compute it runs beside (the NCCL kernels take SMs and HBM bandwidth),
    # at the stack's overlap slowdown, as for TP and EP overlap (components.overlapped_comm)
    hidden = np.maximum(t_grad - grad_exp, 0.0) + np.maximum(t_param - param_exp, 0.0)
    slowdown = overlap_slowdown(job, "dp")  # the DP communicator's CTAs, or the stack's flat value
    exposed = grad_exp + param_exp + slowdown * hidden
    at = np.flatnonzero(per[7][codes])  # the ZeRO 3 candidates
    if len(at):
        rs_ag, ag1, rs1, hsdp1, hsdp = (x[codes[at]] for x in (*per[4:7], *per[8:10]))
        t_c = np.asarray(t_compute_mb)[at]

        def z3_mb(
            load, floor
        ):  # one micro-batch's exposed ZeRO 3 time, at least ``floor``, and the slowdown of the rest
            exp = np.maximum(load - t_c, floor)
            return exp + slowdown * np.maximum(load - exp, 0.0)

        # the last micro-batch's backward all-reduces across the HSDP replicas, the others only where the stack
        # all-reduces every backward (hsdp_all_reduce)
        every = ov.hsdp_all_reduce == "microbatch"
        mid_load, mid_tail = (rs_ag + hsdp, rs1 + hsdp1) if every else (rs_ag, rs1)
        nmb = _col(df, "num_microbatches")[at]
        # zero3_grad_wait: every backward waits for its last gradient collectives, or the step once, after the last
        mid = z3_mb(mid_load, ag1 + mid_tail if ov.zero3_grad_wait == "microbatch" else ag1)
        exposed[at] = (nmb - 1) * mid + z3_mb(rs_ag + hsdp, ag1 + rs1 + hsdp1)
    return exposed + embedding_grad_allreduce_s(job, df)


def interleaved_grad_exposed(df: pd.DataFrame, t_grad, t_bwd_mb) -> np.ndarray:
    """Exposed part [s] of a stage's overlapped gradient reduction ``t_grad`` under the (interleaved) 1F1B
    schedule, before the one-bucket floor.

    Each of the stage's ``v`` model chunks reduces its own gradients (``t_grad / v``) once its last
    micro-batch's backward has run: Megatron-Core enables the chunk's gradient sync for that backward only
    (``is_last_microbatch_for_model_chunk``; with ``align_grad_reduce`` the chunk's ``grad_sync_func`` is
    called right after it, offset by the pipeline rank) ([4]_). The cool-down runs the backwards in groups
    of ``g = min(p, m)`` micro-batches a chunk, the deepest chunk first (``get_model_chunk_id``,
    ``microbatch_group_size_per_vp_stage`` = ``p`` by default), so on the first stage, which finishes last,
    chunk ``j`` (0 the shallowest) ends its backwards ``j g`` chunk backwards (``t_bwd_mb / v`` each)
    before the step's last one. The reductions queue on one communicator, so the last of them ends
    ``max_k ((k + 1) t_grad / v - k g t_bwd_mb / v)`` after that last backward, less the part of the last
    chunk's backward its first buckets hide behind (``t_bwd_mb / v``)::

        exposed = max(t_grad - (1 + (v - 1) g) t_bwd_mb / v, (t_grad - t_bwd_mb) / v)

    (``k = v - 1`` and ``k = 0``). At ``v = 1`` both terms are ``t_grad - t_bwd_mb``, the reduction behind
    the last micro-batch's backward, with or without a pipeline; at ``v > 1`` never more than that. Idle
    time of the cool-down (a stage waiting for a later stage's gradient) would hide more: not counted.

    Examples
    --------
    Hand-derived: 0.214 s of reduce-scatter over 4 chunks of a stage whose micro-batch backward takes
    0.13 s, 8 micro-batches on 4 stages: ``max(0.084, 0.214 - 13 x 0.0325, 0.021) = 0.021`` s; with one
    chunk 0.084 s.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"pp": [4, 4], "virtual_stages": [4, 1], "num_microbatches": [8, 8]})
    >>> [round(float(x), 4) for x in interleaved_grad_exposed(df, 0.214, 0.13)]
    [0.021, 0.084]
    """
    v = np.maximum(_col(df, "virtual_stages"), 1).astype(float)
    g = np.minimum(_col(df, "pp"), _col(df, "num_microbatches")).astype(float)
    t, b = np.asarray(t_grad, dtype=float), np.asarray(t_bwd_mb, dtype=float)
    return np.maximum(t - (1.0 + (v - 1.0) * g) * b / v, (t - b) / v)


def embedding_grad_allreduce_s(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Exposed all-reduce of the word-embedding gradient between the first and last pipeline stages [s].

    With PP > 1 a model whose output layer shares the input embedding (``tied_embeddings``) or whose
    multi-token prediction modules on the last stage use it (``mtp_modules``) keeps the embedding on both
    end stages; Megatron-Core all-reduces its gradient over these two ranks once a step, after the
    data-parallel gradient sync and before the optimizer, with no computation beside it ([3]_). The
    message is the rank's ``vocab / tp x hidden`` gradient buffer at the stack's ``grad_reduce_bytes``; a
    two-rank all-reduce moves half of it each way twice, timed as two point-to-point transfers of ``S / 2`` on
    the pipeline group's placement (stride ``tp cp dp``: across the scale-out fabric wherever adjacent
    stages are, the first and last stages being at least as far apart). 0 without PP or without a shared
    embedding, and under DualPipe, which puts the shallowest layers with the embedding and the deepest with
    the output head on the same rank so that the MTP module shares them physically (arXiv:2412.19437,
    Sec. 2.2).
    """
    m = job.model
    if not (m.tied_embeddings or m.mtp_modules > 0) or job.choices.pipeline_schedule == "dualpipe":
        return np.zeros(len(df))

    def per_layout(u):  # once per distinct (tp, cp, dp, pp)
        tp, cp, dp, pp = (_col(u, c) for c in ("tp", "cp", "dp", "pp"))
        half = m.vocab * m.hidden / tp * job.choices.grad_reduce_bytes / 2
        return (np.where(pp > 1, 2 * collective_s(job, "sendrecv", half, pp, tp * cp * dp), 0.0),)

    return on_distinct(df, ["tp", "cp", "dp", "pp"], per_layout)[0]
