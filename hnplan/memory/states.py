"""Model states per accelerator: weights, gradients and optimizer states, sharded by ZeRO, TP, PP and EP.

The bytes per parameter of each precision recipe and software stack, and their ZeRO sharding, are
:mod:`hnplan.memory.state_accounting` (re-exported here); this module splits a model's parameters over
pipeline stages and the tensor-, expert- and data-parallel groups, and weighs the first, the fullest middle
and the last stage.

References
----------
.. [5] Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.2 (one layer fewer on
   the first and the last pipeline stage to balance memory).
.. [6] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.2 (multi-token-prediction
   modules), 3.2.3 (embedding and output head shared with the MTP module on one DualPipe rank) and :mod:`hnplan.memory.recompute` (their parameters on the last stage).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute import param_counts
from hnplan.compute.layout import stage_layer_range
from hnplan.errors import InputError, check_choice
from hnplan.memory.recompute import mtp_extra_params
from hnplan.memory.state_accounting import (  # re-exported: the accounting lived here
    ACCOUNTINGS as ACCOUNTINGS,
)
from hnplan.memory.state_accounting import (
    ZERO_STAGES,
    StateAccounting,
    accounting,
)
from hnplan.memory.state_accounting import stack_accounting as stack_accounting
from hnplan.memory.state_accounting import zero_model_state_bytes as zero_model_state_bytes  # re-exported


@dataclass(frozen=True)
class StageParams:
    """Parameters one accelerator of a pipeline stage holds [parameters], split by how they shard."""

    dense: float
    expert: float
    layers: int
    moe_layers: int
    embedding: float = 0.0  # of ``dense``: the word (and position) embeddings the stage holds
    # of ``dense`` (``expert``): outside the quantised GEMMs (embeddings, output head, norms, the MTP modules'
    # extras, the bf16 end layers), which low-precision parameters leave in bf16
    unquantised: float = 0.0
    unquantised_expert: float = 0.0


STAGES = ("first", "middle", "last")  # the pipeline stages the memory model weighs


def end_stage_layer_range(model: Model, pp: int, stage: str, balanced: bool = False) -> range:
    """Layer indices of the first, the fullest middle or the last pipeline stage.

    Without ``balanced``: the split of :func:`hnplan.compute.layout.stage_layer_range` (``ceil(L / pp)``
    layers a stage, the last the rest). With it, the embedding and the loss each take one layer's place
    ([5]_; Megatron-Core's ``account_for_embedding_in_pipeline_split``): ``ceil((L + 2) / pp) - 1``
    layers on each end and ``ceil((L + 2) / pp)`` on the middle stage (126 layers on 16 stages: 7 on
    the first and the last, 8 on the others).
    """
    if not balanced or pp <= 1:
        return stage_layer_range(model, pp, stage)
    n = max(1, -(-(model.layers + 2) // pp) - 1)
    if stage == "middle":
        return range(max(model.layers - 2 * n - 1, 0), model.layers - n) if pp > 2 else range(0, 0)
    return range(0, n) if stage == "first" else range(model.layers - n, model.layers)


def _count_in(rng: range, lo: int, hi: int) -> int:
    """How many layer indices of ``rng`` (a step-1 range) lie in ``[lo, hi)``, by arithmetic (no loop over layers)."""
    return max(0, min(rng.stop, hi) - max(rng.start, lo))


def _end_counts(rng: range, layers: int, b: int, first_moe: int) -> tuple[int, int]:
    """Of the layers in ``rng``, how many are among the first or the last ``b`` of ``layers`` (the union of
    ``[0, b)`` and ``[layers - b, layers)``), and how many of those are MoE layers (index ``>= first_moe``)."""
    if b <= 0:
        return 0, 0

    def union(lo: int) -> int:  # |rng n ([0, b) u [L - b, L)) n [lo, L)|, by inclusion-exclusion
        both = _count_in(rng, max(layers - b, 0, lo), min(b, layers)) if layers - b < b else 0
        return _count_in(rng, lo, b) + _count_in(rng, max(layers - b, lo), layers) - both

    return union(0), union(first_moe)


def stage_params(
    model: Model,
    tp: int,
    pp: int,
    ep: int = 1,
    stage: str = "first",
    balanced: bool = False,
    mtp_embedding: bool = True,
    etp: int | None = None,
    bf16_end_layers: int = 0,
) -> StageParams:
    """Parameters on one accelerator of the first, the fullest middle or the last pipeline stage
    [parameters].

    A stage holds ``ceil(L / pp)`` layers and the last the rest (:func:`end_stage_layer_range`); the
    first stage also holds the input embedding (and learned positions), the last stage the final
    norm and the LM head, and with tied embeddings and ``pp > 1`` its own copy of the embedding, as
    Megatron-LM does. A model's multi-token-prediction modules sit on the last stage: one more layer
    each plus :func:`hnplan.memory.recompute.mtp_extra_params` ([6]_). Everything is split over ``tp``
    (vocabulary-parallel embeddings); routed experts over ``etp x ep`` (``etp``, the expert
    tensor-parallel degree, defaults to ``tp`` as in Megatron-Core; ``etp = 1`` keeps each expert whole,
    MoE parallel folding, Liu et al. 2025, arXiv:2504.14960; shared experts and the router are whole on
    every expert-parallel rank). ``mtp_embedding=False``: the MTP
    modules share an embedding the rank already holds (DualPipe puts the first and the last stage on one
    rank and the MTP module shares the main model's embedding and output head there, [6]_ Sec. 3.2.3), so
    no copy is added.

    Raises
    ------
    InputError
        For a stage other than ``first`` or ``last``.
    """
    if stage not in STAGES:
        raise InputError(f"stage must be 'first', 'middle' or 'last'; got {stage!r}")
    pc = param_counts(model)
    first_moe = model.layers - pc.moe_layers
    rng = end_stage_layer_range(model, pp, stage, balanced)
    moe = _count_in(rng, first_moe, model.layers)
    dense_layers = len(rng) - moe
    per_dense = pc.attention_per_layer + pc.dense_mlp_per_layer + pc.norms_per_layer
    per_moe_shared = pc.attention_per_layer + pc.norms_per_layer + pc.moe_shared_per_layer
    routed = pc.moe_total_per_layer - pc.moe_shared_per_layer  # the expert-parallel part of an MoE layer
    dense = dense_layers * per_dense + moe * per_moe_shared
    unq = len(rng) * pc.norms_per_layer  # outside the GEMMs (the router's few weights are not split off)
    # the layers kept whole in bf16, the first and the last ``bf16_end_layers``, and the MoE layers among them
    n_ends, moe_ends = _end_counts(rng, model.layers, bf16_end_layers, first_moe)
    unq += (n_ends - moe_ends) * (per_dense - pc.norms_per_layer) + moe_ends * (per_moe_shared - pc.norms_per_layer)
    last = stage == "last" or pp == 1
    first = stage == "first" or pp == 1
    if first:
        dense += pc.embedding + pc.position
        unq += pc.embedding + pc.position
    expert = moe * routed
    embedding = (pc.embedding + pc.position) if first else 0.0
    if last and model.tied_embeddings and pp > 1:  # the last stage's copy of a tied embedding
        embedding += pc.embedding
    if last:
        head = pc.final_norm + (pc.lm_head if not model.tied_embeddings else (pc.embedding if pp > 1 else 0.0))
        dense, unq = dense + head, unq + head
        if model.mtp_modules:  # [6]: one more layer each, its projection and norms, the stage's embedding copy
            layer = per_moe_shared if pc.moe_layers else per_dense
            dense += model.mtp_modules * layer + mtp_extra_params(model)
            unq += model.mtp_modules * pc.norms_per_layer + mtp_extra_params(model)
            if (pp == 1 or not mtp_embedding) and not model.tied_embeddings:  # the rank holds it already
                dense -= pc.embedding
                unq -= pc.embedding
            expert += model.mtp_modules * (routed if pc.moe_layers else 0.0)
    return StageParams(
        dense=dense / tp,
        expert=expert / ((tp if etp is None else etp) * ep),
        layers=len(rng),
        moe_layers=moe,
        embedding=embedding / tp,
        unquantised=unq / tp,
        unquantised_expert=moe_ends * routed / ((tp if etp is None else etp) * ep),
    )


def model_state_bytes_per_gpu(
    model: Model,
    tp: int,
    pp: int,
    dp: int,
    ep: int = 1,
    zero: int = 1,
    recipe: str | StateAccounting = "zero-paper",
    cp: int = 1,
    stage: str = "first",
    balanced: bool = False,
    etp: int | None = None,
    hsdp_ranks: int | None = None,
):
    """Weights, gradients and optimizer states on one accelerator of a pipeline stage [bytes]: one plan of
    :func:`model_state_table` (one implementation, which the planners run over arrays of plans).

    Non-expert parameters of the stage (:func:`stage_params`) are sharded by ZeRO over the
    data-parallel group ``dp x cp`` (Megatron-LM reduces gradients over data and context parallel
    ranks together), or at ZeRO 3 under HSDP (``hsdp_ranks``, the stack's ``zero3_shard_ranks``) over the shard
    group (:func:`zero_shard_ranks`); routed-expert parameters over their own data-parallel group
    ``tp x cp x dp / (etp x ep)`` (:func:`expert_dp`; ``dp x cp / ep`` at the default ``etp = tp``).

    Parameters
    ----------
    model : Model
    tp, pp, dp, ep, cp : int
        Tensor, pipeline, data, expert and context parallel degrees.
    etp : int, optional
        Expert tensor-parallel degree (default ``tp``).
    zero : {0, 1, 2, 3}
    recipe : str or StateAccounting
        Accounting name in :data:`ACCOUNTINGS`, or a stack's (:func:`stack_accounting`).
    stage : {"first", "middle", "last"}
    balanced : bool
        Embedding and loss take one layer's place on the end stages (:func:`end_stage_layer_range`).
    hsdp_ranks : int, optional
        Ranks of an HSDP shard group (>= 2); None: ZeRO shards over ``dp x cp``.

    Returns
    -------
    tuple of float
        ``(params_bytes, grads_bytes, optimizer_bytes)`` [bytes].

    Raises
    ------
    InputError
        For a ZeRO stage outside 0-3, an unknown accounting or stage.
    """
    out = model_state_table(model, tp, pp, dp, ep, zero, recipe, cp, stage, balanced, etp=etp, hsdp_ranks=hsdp_ranks)
    return tuple(float(x) for x in out)


def zero_shard_ranks(dp_cp, zero, hsdp_ranks: int | None = None):
    """Ranks ZeRO shards the dense model states over: the ``dp x cp`` data-parallel ranks, or under HSDP
    (``hsdp_ranks``, the stack's ``zero3_shard_ranks``) at ZeRO 3 the shard group of ``hsdp_ranks`` ranks, where
    it divides ``dp x cp`` and is smaller, the states replicated across the ``dp cp / hsdp_ranks`` groups
    (PyTorch FSDP ``ShardingStrategy.HYBRID_SHARD``: the flat parameters sharded over the intra-node process
    group, ``torch/distributed/fsdp/_init_utils.py`` ``_init_process_group_state_for_hybrid_shard``).

    Parameters
    ----------
    dp_cp : array of int
        Data-parallel times context-parallel ranks of each plan, shape ``(plans,)`` (or a scalar).
    zero : array of int
        ZeRO stage of each plan, broadcast against ``dp_cp``.
    hsdp_ranks : int, optional
        Ranks of an HSDP shard group (>= 2, the schema's bound); None or 0: no HSDP.

    Returns
    -------
    ndarray of int
        Ranks the dense model states are sharded over, the broadcast shape of ``dp_cp`` and ``zero``; ``dp_cp``
        itself without HSDP. No error is raised: a group that does not divide ``dp x cp`` falls back to it.

    >>> [int(x) for x in zero_shard_ranks(np.array([128, 128, 12, 4]), np.array([3, 2, 3, 3]), 8)]
    [8, 128, 12, 4]
    """
    dp_cp = np.asarray(dp_cp)
    if not hsdp_ranks:
        return dp_cp
    hybrid = (np.asarray(zero) >= 3) & (dp_cp % hsdp_ranks == 0) & (dp_cp > hsdp_ranks)
    return np.where(hybrid, hsdp_ranks, dp_cp)


def _unquantised_weight_extra(a: StateAccounting, unquantised, shards, sharded):
    """Weight bytes to add for the ``unquantised`` parameters [parameters] an accounting keeps at other
    than its ``weight_bytes`` (low-precision parameters: bf16 embeddings, head and norms) [bytes]."""
    whole = 0.0 if a.unquantised_weight_bytes is None else a.unquantised_weight_bytes - a.weight_bytes
    zero3 = a.zero3_unquantised_bytes(shards) - a.zero3_weight_bytes(shards)  # no cached cast, bf16 shard
    return np.where(sharded, zero3, whole) * unquantised


def model_state_table(
    model: Model,
    tp,
    pp,
    dp,
    ep,
    zero,
    recipe: str | StateAccounting = "zero-paper",
    cp=1,
    stage: str = "first",
    balanced: bool = False,
    mtp_embedding: bool = True,
    etp=None,
    hsdp_ranks: int | None = None,
) -> tuple:
    """The model states of one accelerator of a pipeline stage over arrays of plans [bytes] (one plan:
    :func:`model_state_bytes_per_gpu`); ``hsdp_ranks``: ZeRO 3 dense states sharded over HSDP groups of that many
    ranks (:func:`zero_shard_ranks`).

    The stage's parameters (:func:`stage_params`) are counted once per distinct ``pp`` and split over
    ``tp`` (and ``etp x ep`` for routed experts) as arrays; ZeRO shards them as
    :func:`zero_model_state_bytes` does.

    Parameters
    ----------
    tp, pp, dp, ep, zero, cp : array of int
        One entry per plan (broadcast together).
    etp : array of int, optional
        Expert tensor-parallel degrees (default ``tp``).

    Returns
    -------
    tuple of ndarray
        ``(params_bytes, grads_bytes, optimizer_bytes)`` per plan [bytes].

    Raises
    ------
    InputError
        For a ZeRO stage outside 0-3, an unknown accounting or stage.
    """
    etp = tp if etp is None else etp
    tp, pp, dp, ep, zero, cp, etp = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.int64) for x in (tp, pp, dp, ep, zero, cp, etp))
    )
    for z in sorted(set(zero.ravel().tolist())):  # not numpy.unique: on a plain array it imports numpy.ma (10 ms)
        check_choice("zero stage", z, ZERO_STAGES)
    a = accounting(recipe)
    upp, inv = np.unique(pp.ravel(), return_inverse=True)  # each distinct pp once (no pandas: start-up time)
    inv = inv.reshape(pp.shape)
    # before TP / EP
    per_pp = [stage_params(model, 1, int(p), 1, stage, balanced, mtp_embedding, None, a.bf16_end_layers) for p in upp]
    dense = np.array([s.dense for s in per_pp])[inv] / tp
    unq = np.array([s.unquantised for s in per_pp])[inv] / tp
    expert = np.array([s.expert for s in per_pp])[inv] / (etp * ep)
    unq_e = np.array([s.unquantised_expert for s in per_pp])[inv] / (etp * ep)
    emb = np.array([s.embedding for s in per_pp])[inv] / tp
    edp = expert_dp(tp, dp, cp, ep, etp)
    shard = zero_shard_ranks(dp * cp, zero, hsdp_ranks)  # dp x cp, or the HSDP group at ZeRO 3
    out = []
    for bytes_per_param, emb_extra, sharded in (
        (a.weight_bytes, 0.0, zero >= 3),
        (a.grad_bytes, a.embedding_grad_extra, zero >= 2),
        (a.optimizer_bytes, a.embedding_optimizer_extra, zero >= 1),
    ):
        d = (bytes_per_param * dense + emb_extra * emb) / np.where(sharded, shard, 1)
        e = bytes_per_param * expert / np.where(sharded, edp, 1)
        out.append(d + e)
    z3 = zero >= 3  # ZeRO-3 weights: the sharded part and the caches kept whole (StateAccounting.zero3_weight_bytes)
    out[0] = np.where(z3, a.zero3_weight_bytes(shard) * dense + a.zero3_weight_bytes(edp) * expert, out[0])
    out[0] = out[0] + _unquantised_weight_extra(a, unq, shard, zero >= 3)
    out[0] = out[0] + _unquantised_weight_extra(a, unq_e, edp, zero >= 3)
    return tuple(out)


def expert_dp(tp, dp, cp, ep, etp=None):
    """Ranks of the routed experts' data-parallel group: ``tp x cp x dp / (etp x ep)``, at least 1.

    Megatron-Core builds the expert layers' groups from the same ranks as the dense layers' TP x CP x DP
    of a pipeline stage (``parallel_state.initialize_model_parallel``, its expert ``RankGenerator``
    of order ``tp-ep-dp-pp``): ``etp x ep x expert-dp = tp x cp x dp`` (MoE parallel folding, Liu et al.
    2025, arXiv:2504.14960, Sec. 3). ``etp`` defaults to ``tp`` (Megatron-Core's default), which gives
    ``dp x cp / ep``.

    >>> int(expert_dp(2, 16, 1, 32, 1))   # Qwen3-235B-A22B, TP2 DP16 EP32 ETP1: 32 / 32
    1
    >>> int(expert_dp(4, 8, 1, 8))        # ETP = TP 4: dp x cp / ep = 8 / 8
    1
    >>> int(expert_dp(4, 8, 1, 8, 1))     # ETP 1: 4 x 8 / 8
    4
    """
    etp = tp if etp is None else etp
    return np.maximum(1, (np.asarray(tp) * np.asarray(cp) * np.asarray(dp)) // (np.asarray(etp) * np.asarray(ep)))
