"""The collectives of a training step over arrays of candidate plans: TP, CP and PP traffic per
micro-batch and the exposed data-parallel gradient and parameter collectives of a step.

Each group is placed on the system once (:func:`hnplan.comm.placement.place_group`) and each distinct
message timed once (:func:`hnplan.planning.training.collective_time.collective_s`); each function evaluates
its arithmetic once per distinct sub-key of the plans it depends on (:func:`hnplan.vectorise.on_distinct`)
and gathers it back. The step model that adds them up is in :mod:`hnplan.planning.training.components`.

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, arXiv:2104.04473, Sec. 4.1 (scatter/gather of the pipeline messages across
   the TP ranks).
.. [2] Korthikanti et al., arXiv:2205.05198: sequence parallelism replaces each TP all-reduce with a
   reduce-scatter and an all-gather of the same total volume; full recomputation repeats the forward
   collectives.
.. [3] Liu, Zaharia, Abbeel, "Ring Attention with Blockwise Transformers", arXiv:2310.01889: the K/V
   block exchange of each ring step overlaps the attention of the current block.
.. [4] NVIDIA Megatron-Core, ``distributed/distributed_data_parallel_config.py``: ``overlap_grad_reduce``,
   ``overlap_param_gather`` and the default bucket of ``max(40,000,000, 1,000,000 x dp)`` parameters.
.. [5] NVIDIA Transformer Engine, ``transformer_engine/pytorch/attention/dot_product_attention/
   context_parallel.py`` (``AttnFuncWithCPAndKVP2P``: one send/receive per ring step, overlapped with
   that step's attention kernel).
.. [6] Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054, Sec. 7 (stage 3: parameters gathered for
   the forward and the backward of every micro-batch).
.. [7] Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.2 (context parallelism:
   K and V all-gathered before the attention of the local query chunks, the all-gather exposed on the
   critical path, small because GQA makes K/V much smaller than Q).
.. [8] NVIDIA Transformer Engine, ``transformer_engine/pytorch/module/linear.py``, ``layernorm_linear.py``
   and ``layernorm_mlp.py`` (``_customize_quantizers_float8_current_scaling``: with sequence parallelism
   the column-parallel input quantizer and the row-parallel grad-output quantizer get
   ``with_amax_reduction = True`` over ``tp_group``), ``tensor/float8_tensor.py``
   (``Float8CurrentScalingQuantizer``: amax, all-reduce over ``amax_reduction_group``, then the cast).
.. [9] NVIDIA Megatron-Core, ``distributed/finalize_model_grads.py`` (``finalize_model_grads``: after
   ``finish_grad_sync``, ``_allreduce_word_embedding_grads`` all-reduces the word-embedding gradient over the
   embedding group, the first and last pipeline stages, when ``share_embeddings_and_output_weights`` or
   ``mtp_num_layers``: the last stage keeps a copy of the embedding for the output layer or the multi-token
   prediction module).
.. [10] NVIDIA Megatron-Core, ``pipeline_parallel/schedules.py``
   (``forward_backward_pipelining_with_interleaving``: ``is_last_microbatch_for_model_chunk``,
   ``get_model_chunk_id``, the ``grad_sync_func`` of a model chunk called after its last backward with
   ``grad_sync_virtual_microbatch_id = virtual_microbatch_id - pipeline_parallel_rank``; the remaining
   chunks' syncs launched after the cool-down) and ``distributed/distributed_data_parallel_config.py``
   (``align_grad_reduce``).
.. [11] NVIDIA Megatron-Core, ``distributed/param_and_grad_buffer.py`` (``_ParamAndGradBuffer``: the
   parameters are laid out ``params[::-1]``, in backward order from the output layer to the input embedding,
   and a bucket is closed once it holds ``bucket_size`` elements, after the parameter that fills it: a
   parameter never spans two buckets, so the last bucket of the backward, the first of the forward's
   all-gathers, holds the whole embedding shard).
.. [12] pytorch/pytorch ``torch/distributed/fsdp/_runtime_utils.py`` (``_reduce_grad``: under a hybrid sharding
   strategy ``dist.reduce_scatter_tensor`` over ``state.process_group``, then ``dist.all_reduce(new_sharded_grad,
   group=state._inter_node_pg)`` on ``state._all_reduce_stream``) and ``_init_utils.py``
   (``_init_process_group_state_for_hybrid_shard``: ``_init_intra_and_inter_node_groups(default_group,
   device_count())``, the intra-node group sharding and the inter-node group, one rank of each server, replicating).
.. [13] pytorch/pytorch ``torch/distributed/fsdp/_runtime_utils.py`` @ 3ade90a6aaa9
   (``_post_backward_final_callback``, FSDP1: at the end of each backward the compute stream waits for the
   post-backward stream, where ``_post_backward_hook`` ran each unit's reduce-scatter and, under HSDP, its
   ``default_hooks.allreduce_hook``; later releases run that all-reduce on ``_all_reduce_stream`` and the
   callback waits for it too, ``if root_state._all_reduce_stream is not current_stream:  # uses HSDP``) and
   ``torch/distributed/fsdp/_fully_shard/_fsdp_state.py`` @ 1fd469d0c96e (``_root_post_backward_final_callback``, FSDP2:
   waits for the last ``reduce_scatter_state.event`` and, through ``FSDPParamGroup.finalize_backward``, each
   group's post-reduce event, after its HSDP all-reduce; ``is_last_backward`` is true unless the training
   loop clears it, which torchtitan @ e7c0cae934df ``torchtitan/train.py`` does not).
.. [14] NVIDIA/Megatron-LM @ d98e8a64ddf3, ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py``
   (``_root_post_backward``: ``optim_grads_params`` reduce-scatters in every backward without waiting;
   ``finish_grad_sync`` waits for them, called by ``finalize_model_grads`` once a step, after the last
   micro-batch, ``megatron/core/pipeline_parallel/schedules.py``; ``_process_post_backward_gradients``: the
   all-reduce across the HSDP replicas only with ``is_last_microbatch``, which the schedules' ``no_sync`` clears
   for the other micro-batches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.comm.messages import tp_message_bytes  # the one definition (inference uses it too)
from hnplan.compute import ACT_BYTES, attention_op, head_dim, ring_pair_times_s
from hnplan.compute.fp8_recipes import sp_gather_bytes
from hnplan.compute.layout import stage_layers
from hnplan.memory.states import expert_dp, zero_shard_ranks
from hnplan.planning.training.collective_time import SAME_TIME, collective_s, collectives_s  # noqa: F401  (re-exported)
from hnplan.planning.training.components import (
    BUCKET_MIN_PARAMS,
    BUCKET_PER_DP_PARAMS,
    TP_COLLECTIVES_PER_PASS,
    Job,
    _col,
    local_params,
    overlap_slowdown,
    recompute_is,
    with_etp,
)
from hnplan.planning.training.dp_buckets import edge_bucket_bytes, param_gather_bytes  # noqa: F401  (re-exported)
from hnplan.planning.training.stage_compute import ring_kernel_memo
from hnplan.vectorise import factorize, gather, on_distinct

if TYPE_CHECKING:
    import pandas as pd

COMM_SHAPE_KEYS = ["tp", "cp", "microbatch_size", "recompute"]  # what TP and CP traffic depends on
DP_LAYOUT_KEYS = ("tp", "dp", "cp", "ep", "zero_stage", "pp", "etp")  # what the data-parallel collectives depend on


def tp_comm_per_microbatch(job: Job, df: pd.DataFrame, layers, quantised: bool = True) -> np.ndarray:
    """TP collectives of one micro-batch on a stage of ``layers`` layers [s].

    Per layer two all-reduces forward and two backward of ``b s / cp x h`` bf16 activations (with
    sequence parallelism each is a reduce-scatter plus an all-gather of the same volume [2]_); full
    recomputation repeats the two forward ones. TP ranks are innermost (stride 1).

    In fp8 or fp4 training with sequence parallelism Transformer Engine gathers the quantised tensors
    ([8]_, :func:`hnplan.compute.fp8_recipes.sp_gather_bytes`): forward the inputs of the QKV and MLP-up
    GEMMs, backward the output gradients of the output projection and MLP down, at the recipe's bytes
    per element, the reduce-scatters staying bf16. Each pair is then timed as the all-reduce scaled by
    ``(RS(S) + AG(S q / 2)) / (RS(S) + AG(S))``, the reduce-scatter and the all-gather of the message
    ``S`` timed on the same group (bf16 times unchanged where hnplan counts the pair as one all-reduce).
    An MoE layer's MLP pair is the token dispatcher's bf16 gather, not a Transformer Engine GEMM input:
    only its attention pair is quantised. ``quantised=False``: every pair in bf16 (the layers an fp8
    stack keeps in bf16, ``fp8_bf16_end_layers``).
    """
    q = _sp_gather_bytes(job) if quantised else None
    share = 0.5 if job.model.moe is not None else 1.0  # the pairs per layer whose all-gather is quantised

    def per_shape(u):  # once per distinct (tp, cp, micro-batch, recompute)
        tp, cp, mb = _col(u, "tp"), _col(u, "cp"), _col(u, "microbatch_size")
        again = recompute_is(u, "full")  # the forward again under full recomputation
        msg = tp_message_bytes(job.model, mb, job.seq_len, cp)
        ar = collective_s(job, "allreduce", msg, tp, 1)
        if q is None:
            return (TP_COLLECTIVES_PER_PASS * (2 + again) * ar,)
        rs, ag = collective_s(job, "reducescatter", msg, tp, 1), collective_s(job, "allgather", msg, tp, 1)
        pair = rs + ag
        fwd, bwd = (
            np.where(
                pair > 0,
                (rs + collective_s(job, "allgather", msg * b / ACT_BYTES, tp, 1)) / np.where(pair > 0, pair, 1.0),
                1.0,
            )
            for b in q
        )
        fwd, bwd = (share * r + (1.0 - share) for r in (fwd, bwd))
        return (TP_COLLECTIVES_PER_PASS * ((1 + again) * fwd + bwd) * ar,)

    return layers * on_distinct(df, COMM_SHAPE_KEYS, per_shape)[0]


def _sp_gather_bytes(job: Job) -> tuple[float, float] | None:
    """The bytes per element of the job's quantised sequence-parallel all-gathers (forward, backward), or
    None where they are bf16 (bf16 training, no sequence parallelism)."""
    if not (job.choices.sequence_parallel and units.dtype_bytes(job.dtype) < ACT_BYTES):
        return None
    return sp_gather_bytes(job.choices.fp8_recipe)


AMAX_REDUCTIONS_PER_PASS = 2  # per layer and pass: the two GEMM inputs gathered over the TP ranks ([8]_)
AMAX_BYTES = 4.0  # one fp32 amax per tensor


def fp8_amax_per_microbatch(job: Job, df: pd.DataFrame, layers) -> np.ndarray:
    """TP amax all-reduces of fp8 current (per-tensor) scaling in one micro-batch on a stage of ``layers``
    layers [s].

    With sequence parallelism a column-parallel GEMM's input and a row-parallel GEMM's output gradient are
    all-gathered over the TP ranks in fp8, so every rank must cast them with one scale: Transformer Engine's
    current-scaling quantizer computes the local amax, all-reduces it (max) over the TP group and only
    then casts ([8]_). Per layer that is the QKV and MLP-up inputs forward and the output-projection and
    MLP-down output gradients backward (two per pass; the forward two again under full recomputation),
    each a 4-byte all-reduce between the amax kernel and the cast, on the compute stream: its latency is
    exposed (no GEMM runs beside it). NVFP4 does the same for its per-tensor scale
    (``_customize_quantizers_nvfp4``, [8]_). 0 without TP, without sequence parallelism, or with another
    recipe (delayed scaling reduces its amax history once per step; MXFP8 and blockwise scales are local).
    """
    ch = job.choices
    if not (
        ch.fp8_recipe in ("current", "nvfp4") and ch.sequence_parallel and units.dtype_bytes(job.dtype) < ACT_BYTES
    ):
        return np.zeros(len(df))

    def per_shape(u):  # once per distinct (tp, cp, micro-batch, recompute)
        tp = _col(u, "tp")
        n = AMAX_REDUCTIONS_PER_PASS * (2 + recompute_is(u, "full"))
        return (n * collective_s(job, "allreduce", np.full(len(u), AMAX_BYTES), tp, 1),)

    return layers * on_distinct(df, COMM_SHAPE_KEYS, per_shape)[0]


def cp_comm_per_layer(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Exposed context-parallel ring exchange of one layer and micro-batch [s].

    Transformer Engine's P2P ring ([5]_, :mod:`hnplan.compute.context_parallel`) sends, at each of the
    ``cp`` steps of a pass, one message to the next CP rank while that step's attention kernel runs: forward
    the K/V block at steps ``0 .. cp - 2``; backward the K/V block at step 0, K/V with the partial dK/dV
    (two blocks, one message) at steps ``1 .. cp - 2`` and the dK/dV block at step ``cp - 1``. With the
    stack's ``cp_comm`` overlap a step exposes ``max(transfer - kernel, 0)`` (kernel times of
    :func:`hnplan.compute.ring_step_times_s`: the causal diagonal step, then the off-diagonal ones);
    without it every transfer is exposed. A recomputed attention core (full, or selective with
    ``core_attn``) runs the forward ring again.

    A block is the local K and V of ``b s / cp`` tokens for the rank's ``ceil(kv_heads / tp)`` heads
    (MLA: the up-projected per-head K and V, as Megatron-Core exchanges them), in bf16 (dK/dV too); the
    CP group has stride ``tp`` (Megatron rank order), so with TP filling a server it crosses the
    scale-out fabric and inside an NVLink domain it stays on NVLink (:func:`collective_s`).

    With the stack's ``cp_algorithm="allgather"`` (Llama 3, [7]_) the forward all-gathers the layer's K/V
    over the CP group (the nccl-tests size is the gathered ``b s`` tokens' K and V) before its attention
    kernel, its latency exposed on the critical path ([7]_); the
    backward gathers K/V again and reduce-scatters dK/dV (the same size), both exposed: ``t = AG (1 +
    again) + AG + RS``. That the backward re-gathers rather than keeps the gathered K/V is an assumption
    (the paper does not say; keeping them would hold ``cp`` times the rank's K/V per layer in memory).
    """
    if job.choices.cp_algorithm == "allgather":
        return _cp_allgather_per_layer(job, df)
    overlap = job.choices.cp_comm
    rerun = tuple(job.choices.recompute_modules)
    # the ring's kernel times once per (micro-batch, tp, cp), kept under the numbers they depend on for repeated
    # searches (content_memo); those of the shapes whose part times a search computed come with them
    kernels = ring_kernel_memo(job)

    def per_shape(u):  # once per distinct (tp, cp, micro-batch, recompute)
        tp, cp, mb = _col(u, "tp"), _col(u, "cp"), _col(u, "microbatch_size")
        block = mb * job.seq_len / cp * _kv_width(job, tp) * ACT_BYTES
        # the one-block and two-block messages timed in one call
        t1, t2 = collective_s(
            job, "sendrecv", np.concatenate([block, 2 * block]), np.tile(cp, 2), np.tile(tp, 2)
        ).reshape(2, -1)
        again = recompute_is(u, "full") | (recompute_is(u, "selective") & ("core_attn" in rerun))
        out = np.zeros(len(u))
        if overlap:
            _ring_kernels(job, kernels, mb[cp > 1], tp[cp > 1], cp[cp > 1])
        # the shapes of one ring length at once: [shape, step] (the lengths sorted as numpy.unique gives them, which
        # on a plain array imports numpy.ma, about 10 ms of a command's start-up)
        for n in sorted(set(cp[cp > 1].tolist())):
            at = np.flatnonzero(cp == n)
            fwd_msgs = np.zeros((len(at), n))
            fwd_msgs[:, : n - 1] = t1[at, None]
            bwd_msgs = np.empty((len(at), n))
            bwd_msgs[:, 1 : n - 1] = t2[at, None]
            bwd_msgs[:, 0], bwd_msgs[:, n - 1] = t1[at], t1[at]
            if overlap:  # each shape's diagonal step, then its cp - 1 off-diagonal ones
                keys = zip(mb[at].astype(int).tolist(), tp[at].astype(int).tolist(), [n] * len(at))
                fd, fs, bd, bs = np.array([kernels[key] for key in keys]).T
                kf, kb = np.empty((len(at), n)), np.empty((len(at), n))
                kf[:, 0], kf[:, 1:], kb[:, 0], kb[:, 1:] = fd, fs[:, None], bd, bs[:, None]
                f, b = np.maximum(fwd_msgs - kf, 0.0).sum(axis=1), np.maximum(bwd_msgs - kb, 0.0).sum(axis=1)
            else:
                f, b = fwd_msgs.sum(axis=1), bwd_msgs.sum(axis=1)
            out[at] = f * (1 + again[at]) + b
        return (out,)

    return on_distinct(df, COMM_SHAPE_KEYS, per_shape)[0]


def _kv_width(job: Job, tp):
    """Elements of K and V per token on one TP rank (MLA: the up-projected per-head K and V)."""
    m = job.model
    if m.mla is not None:
        return m.heads / tp * (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim + m.mla.v_head_dim)
    return 2 * np.ceil(m.kv_heads / tp) * head_dim(m)


def _cp_allgather_per_layer(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Exposed all-gather context parallelism of one layer and micro-batch [s] (:func:`cp_comm_per_layer`)."""

    def per_shape(u):  # once per distinct (tp, cp, micro-batch, recompute)
        tp, cp, mb = _col(u, "tp"), _col(u, "cp"), _col(u, "microbatch_size")
        gathered = mb * job.seq_len * _kv_width(job, tp) * ACT_BYTES  # the whole sequence's K/V
        ag = collective_s(job, "allgather", gathered, cp, tp)
        rs = collective_s(job, "reducescatter", gathered, cp, tp)
        rerun = tuple(job.choices.recompute_modules)
        again = recompute_is(u, "full") | (recompute_is(u, "selective") & ("core_attn" in rerun))
        return (ag * (1 + again) + ag + rs,)

    return on_distinct(df, COMM_SHAPE_KEYS, per_shape)[0]


def _ring_kernels(job: Job, kernels: dict, mb, tp, cp) -> None:
    """Add to ``kernels`` the ring's step kernel times (:func:`hnplan.compute.ring_step_times_s`) of each
    ``(micro-batch, tp, cp)`` it lacks, ``{key: (diagonal fwd, off-diagonal fwd, diagonal bwd, off-diagonal
    bwd)}`` [s]: all shapes at once (one attention operator holding arrays over them,
    :func:`hnplan.compute.attention.ring_pair_times_s`)."""
    missing = list(
        dict.fromkeys(k for k in zip(*(np.asarray(a).astype(int).tolist() for a in (mb, tp, cp))) if k not in kernels)
    )
    if not missing:
        return
    b, t, n = (np.array([k[i] for k in missing], dtype=np.int64) for i in (0, 1, 2))
    op = attention_op(job.model, b, job.seq_len, t, n)
    times = (np.broadcast_to(x, (len(missing),)).tolist() for x in ring_pair_times_s(job.kernel_acc, op))
    kernels.update(zip(missing, zip(*times)))


def pp_comm_per_microbatch(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Pipeline point-to-point of one micro-batch [s]: activation forward and gradient backward at each
    of the ``v`` chunk boundaries, ``b s / (cp tp) x h`` bf16 (scatter/gather across TP ranks,
    [1]_ Sec. 4.1); the PP group is outermost (stride ``tp cp dp``).

    Without sequence parallelism the next layer needs the whole tensor on every TP rank, so the receiver
    rebuilds it with an all-gather of ``b s / cp x h`` over the TP group after each transfer ([1]_ Sec.
    4.1 and Fig. 9: the full tensor is re-materialised at the receiver by an all-gather over NVLink;
    Megatron-LM's ``p2p_communication._communicate`` gathers the received chunk with
    ``gather_split_1d_tensor`` before returning it to the schedule, so it is on the critical path). With
    sequence parallelism the received shard is what the layer takes ([2]_): no gather.
    """
    gather = not job.choices.sequence_parallel

    def per_shape(u):  # one transfer once per distinct layout and micro-batch
        tp, cp, dp, pp = _col(u, "tp"), _col(u, "cp"), _col(u, "dp"), _col(u, "pp")
        whole = _col(u, "microbatch_size") * job.seq_len / cp * job.model.hidden * ACT_BYTES
        t = collective_s(job, "sendrecv", whole / tp, pp, tp * cp * dp)
        if gather:  # the TP group is innermost (stride 1); 0 at tp 1
            t = t + np.where(pp > 1, collective_s(job, "allgather", whole, tp, 1), 0.0)
        return (t,)

    t = on_distinct(df, ["tp", "cp", "dp", "pp", "microbatch_size"], per_shape)[0]
    return np.where(_col(df, "pp") > 1, 2 * _col(df, "virtual_stages") * t, 0.0)


def dp_comm_exposed(job: Job, df: pd.DataFrame, t_fwd_mb, t_bwd_mb, t_compute_mb) -> np.ndarray:
    """Exposed data-parallel communication of one step [s].

    ZeRO 0 all-reduces the gradients; ZeRO 1-2 (distributed optimizer) reduce-scatter them and
    all-gather the updated bf16 parameters (with ``fp8_params`` or ``fp4_params`` the GEMM weights at the
    recipe's bytes, the embedding, head and norms still bf16: :func:`param_gather_bytes`); both over
    ``dp x cp`` ranks (stride ``tp``), expert parameters over their ``tp cp dp / (etp ep)`` replicas
    (stride ``etp ep``: the expert layers' rank order, ETP innermost, then EP, then expert-DP; MoE
    parallel folding, arXiv:2504.14960; ``dp cp / ep`` with stride ``tp ep`` at the default ``etp = tp``).
    Each runs as buckets of the stack's ``dp_bucket_params`` parameters, by default
    Megatron-Core's ``max(40M, 1M x dp cp)`` ([4]_), every bucket a collective with its own latency. With
    bucketed overlap the reduce-scatter hides behind the last micro-batch's backward (each model chunk's
    behind the backwards after its last one under the interleaved schedule,
    :func:`interleaved_grad_exposed`) and the all-gather behind the first forward, exposing at least one
    bucket each: the bucket that holds the input embedding (its ``vocab x hidden / tp`` shard, gathered in
    bf16 whatever the GEMM weights travel at), whose gradient the backward produces last and whose weights
    the forward needs first, so that bucket is at least the embedding shard; with low-precision parameters
    every bf16 parameter (embedding, untied output layer, norms) rides in the last fp8 bucket's group
    (:func:`edge_bucket_bytes`; [11]_). ZeRO 3 gathers
    each layer's parameters for every micro-batch's forward and backward and reduce-scatters its
    gradients ([6]_; one unit per layer, as FSDP wraps them), prefetched under that micro-batch's
    compute; the first gather is exposed. Under HSDP (``zero3_shard_ranks``, PyTorch FSDP ``HYBRID_SHARD``) the
    gathers and reduce-scatters run in the shard group (:func:`hnplan.memory.states.zero_shard_ranks`, stride
    ``tp``) and each layer's gradient shard, ``1 / shard`` of it, is then all-reduced across the ``dp cp / shard``
    replicas (stride ``tp x shard``), on a stream of its own beside the backward ([12]_): after every backward with
    the stack's ``hsdp_all_reduce`` ``microbatch`` (PyTorch FSDP), after the last micro-batch's only with ``step``
    (Megatron-FSDP, [14]_). The last layer's
    reduce-scatter and all-reduce have no backward left to hide behind and the optimizer needs them: with the
    stack's ``zero3_grad_wait`` ``microbatch`` (PyTorch FSDP, which waits for them at the end of every backward,
    [13]_) each micro-batch exposes at least ``AG1 + RS1 + AR1`` (one layer's gather, reduce-scatter and HSDP
    all-reduce), with ``step`` (Megatron-FSDP, which waits once before the optimizer step, [14]_) the last
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
        if ov.dp_bucket_params is None:  # Megatron-Core's default ([4]_)
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
        # reduce-scatter with its all-reduce across the replicas (zero3_grad_wait; [12]_, [13]_)
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
    called right after it, offset by the pipeline rank) ([10]_). The cool-down runs the backwards in groups
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
    data-parallel gradient sync and before the optimizer, with no computation beside it ([9]_). The
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
