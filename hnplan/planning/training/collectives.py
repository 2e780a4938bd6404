"""The collectives of a training step's micro-batches over arrays of candidate plans: the TP, CP and PP traffic of
one micro-batch (or one layer of it) and the fp8 amax all-reduces.

Each group is placed on the system once (:func:`hnplan.comm.placement.place_group`) and each distinct
message timed once (:func:`hnplan.planning.training.collective_time.collective_s`); each function evaluates
its arithmetic once per distinct sub-key of the plans it depends on (:func:`hnplan.vectorise.on_distinct`)
and gathers it back. The exposed data-parallel gradient and parameter collectives of a step are in
:mod:`hnplan.planning.training.dp_collectives`; the step model that adds them up is in
:mod:`hnplan.planning.training.components`.

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
.. [4] NVIDIA Transformer Engine, ``transformer_engine/pytorch/attention/dot_product_attention/
   context_parallel.py`` (``AttnFuncWithCPAndKVP2P``: one send/receive per ring step, overlapped with
   that step's attention kernel).
.. [5] Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.2 (context parallelism:
   K and V all-gathered before the attention of the local query chunks, the all-gather exposed on the
   critical path, small because GQA makes K/V much smaller than Q).
.. [6] NVIDIA Transformer Engine, ``transformer_engine/pytorch/module/linear.py``, ``layernorm_linear.py``
   and ``layernorm_mlp.py`` (``_customize_quantizers_float8_current_scaling``: with sequence parallelism
   the column-parallel input quantizer and the row-parallel grad-output quantizer get
   ``with_amax_reduction = True`` over ``tp_group``), ``tensor/float8_tensor.py``
   (``Float8CurrentScalingQuantizer``: amax, all-reduce over ``amax_reduction_group``, then the cast).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.comm.messages import tp_message_bytes  # the one definition (inference uses it too)
from hnplan.compute import ACT_BYTES, attention_op, head_dim, ring_pair_times_s
from hnplan.compute.fp8_recipes import sp_gather_bytes
from hnplan.planning.training.collective_time import collective_s
from hnplan.planning.training.components import TP_COLLECTIVES_PER_PASS, Job, _col, recompute_is
from hnplan.planning.training.stage_compute import ring_kernel_memo
from hnplan.vectorise import on_distinct

if TYPE_CHECKING:
    import pandas as pd

COMM_SHAPE_KEYS = ["tp", "cp", "microbatch_size", "recompute"]  # what TP and CP traffic depends on


def tp_comm_per_microbatch(job: Job, df: pd.DataFrame, layers, quantised: bool = True) -> np.ndarray:
    """TP collectives of one micro-batch on a stage of ``layers`` layers [s].

    Per layer two all-reduces forward and two backward of ``b s / cp x h`` bf16 activations (with
    sequence parallelism each is a reduce-scatter plus an all-gather of the same volume [2]_); full
    recomputation repeats the two forward ones. TP ranks are innermost (stride 1).

    In fp8 or fp4 training with sequence parallelism Transformer Engine gathers the quantised tensors
    ([6]_, :func:`hnplan.compute.fp8_recipes.sp_gather_bytes`): forward the inputs of the QKV and MLP-up
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


AMAX_REDUCTIONS_PER_PASS = 2  # per layer and pass: the two GEMM inputs gathered over the TP ranks ([6]_)
AMAX_BYTES = 4.0  # one fp32 amax per tensor


def fp8_amax_per_microbatch(job: Job, df: pd.DataFrame, layers) -> np.ndarray:
    """TP amax all-reduces of fp8 current (per-tensor) scaling in one micro-batch on a stage of ``layers``
    layers [s].

    With sequence parallelism a column-parallel GEMM's input and a row-parallel GEMM's output gradient are
    all-gathered over the TP ranks in fp8, so every rank must cast them with one scale: Transformer Engine's
    current-scaling quantizer computes the local amax, all-reduces it (max) over the TP group and only
    then casts ([6]_). Per layer that is the QKV and MLP-up inputs forward and the output-projection and
    MLP-down output gradients backward (two per pass; the forward two again under full recomputation),
    each a 4-byte all-reduce between the amax kernel and the cast, on the compute stream: its latency is
    exposed (no GEMM runs beside it). NVFP4 does the same for its per-tensor scale
    (``_customize_quantizers_nvfp4``, [6]_). 0 without TP, without sequence parallelism, or with another
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

    Transformer Engine's P2P ring ([4]_, :mod:`hnplan.compute.context_parallel`) sends, at each of the
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

    With the stack's ``cp_algorithm="allgather"`` (Llama 3, [5]_) the forward all-gathers the layer's K/V
    over the CP group (the nccl-tests size is the gathered ``b s`` tokens' K and V) before its attention
    kernel, its latency exposed on the critical path ([5]_); the
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
