"""Activation memory of training per pipeline stage, for every plan of a table: the layers a stage holds
times the micro-batches it keeps in flight, with the embedding and the output layer, block recomputation,
activation offloading and DualPipe.

The per-layer accounting (Korthikanti et al.'s tensors, read from the model's shapes) is in
:mod:`hnplan.memory.layer_tensors`; its names are importable from here as before.

References
----------
.. [1] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   MLSys 2023, arXiv:2205.05198, Sec. 4.2.3 and 4.3.
.. [2] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.2 (1F1B and the interleaved schedule).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Table 2 (DualPipe's activation memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES
from hnplan.errors import check_choice
from hnplan.memory.layer_tensors import (  # noqa: F401  (public names of hnplan.memory.activations)
    LOGIT_BYTES,
    MASK_BYTES,
    ROUTER_BYTES,
    ROUTING_WEIGHT_BYTES,
    EagerSaved,
    LayerActivations,
    _check_recompute,
    activation_bytes_per_layer,
    embedding_activation_bytes,
    layer_activations,
    output_activation_bytes,
    routing_weight_bytes,
)
from hnplan.memory.pipeline import balanced_in_flight, end_stage_layers, microbatches_in_flight  # noqa: F401
from hnplan.memory.recompute import (
    DEFAULT_MODULES,
    dualpipe_on,
    mtp_activation_bytes,
    offload_kept_layers,
    recomputed_share,
)
from hnplan.vectorise import Columns, column, distinct_values, is_frame, memo_batched, on_distinct

if TYPE_CHECKING:
    import pandas as pd

# the columns of a plan table the activation functions read
ACTIVATION_COLUMNS = ("tp", "pp", "cp", "microbatch_size", "num_microbatches", "virtual_stages", "recompute")


def layer_activation_table(
    model: Model,
    plans: pd.DataFrame,
    seq_len: int,
    *,
    sequence_parallel: bool = True,
    flash_attention: bool = True,
    dropout: bool = True,
    fp8_gemm_inputs: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    cache: dict | None = None,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
) -> pd.DataFrame:
    """Per micro-batch, for every plan of a table: the activations of one dense and one MoE layer
    (:func:`activation_bytes_per_layer`), the embedding (:func:`embedding_activation_bytes`) and the
    output layer (:func:`output_activation_bytes`), each evaluated once per distinct
    ``(microbatch_size, tp, cp, recompute)`` [bytes].

    ``routing_weight``: bytes of a routed copy's routing weight
    (:func:`hnplan.memory.layer_tensors.routing_weight_bytes`; default 2, bf16). ``eager``: what the stack's eager
    code keeps beyond the fused accounting (:class:`hnplan.memory.layer_tensors.EagerSaved`).

    ``cache`` (optional): a dict that keeps the per-shape values across calls for the same model,
    sequence and flags (:func:`hnplan.vectorise.memo_batched`).

    Returns
    -------
    DataFrame
        ``dense, moe, emb, out`` aligned with ``plans`` (``moe`` 0 for a dense model; a
        :class:`hnplan.vectorise.Columns` for one).
    """
    kw = dict(
        sequence_parallel=sequence_parallel,
        flash_attention=flash_attention,
        dropout=dropout,
        fp8_gemm_inputs=fp8_gemm_inputs,
        recompute_modules=recompute_modules,
        routing_weight=routing_weight,
        attention_output_copy=attention_output_copy,
        eager=eager,
    )
    return memo_batched(  # mb, tp and cp as arrays over the shapes of one recompute mode
        plans.reset_index(drop=True) if is_frame(plans) else plans,
        ["microbatch_size", "tp", "cp", "recompute"],
        lambda mb, tp, cp, rc: {
            "dense": activation_bytes_per_layer(model, seq_len, mb, tp, cp, recompute=rc, moe_layer=False, **kw),
            "moe": 0.0
            if model.moe is None
            else activation_bytes_per_layer(model, seq_len, mb, tp, cp, recompute=rc, moe_layer=True, **kw),
            "emb": embedding_activation_bytes(model, seq_len, mb, tp, cp, sequence_parallel, dropout),
            "out": output_activation_bytes(model, seq_len, mb, tp, cp, sequence_parallel, eager),
        },
        None if cache is None else cache.setdefault(("layer", seq_len, *kw.values()), {}),
        by=("recompute",),
    )


def stage_activation_table(
    model: Model,
    plans: pd.DataFrame,
    seq_len: int,
    stage: str = "first",
    *,
    sequence_parallel: bool = True,
    flash_attention: bool = True,
    dropout: bool = True,
    fp8_gemm_inputs: bool = False,
    per_layer: pd.DataFrame | None = None,
    balanced: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    dualpipe: bool = False,
    cache: dict | None = None,
    recompute_num_layers: int | None = None,
    offload_layers: int = 0,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
) -> np.ndarray:
    """Peak activation memory of one accelerator of the first, the fullest middle or the last pipeline stage, for every plan
    of a table [bytes]: the one stage-activation model (:func:`stage_activation_bytes` is its one-row
    case, :func:`hnplan.memory.training_memory_table` its user).

    The stage's layers (:func:`hnplan.memory.pipeline.end_stage_layers`: ``ceil(L / pp)`` on the first and
    the fullest middle stage, the rest on the last; a DeepSeek-style model's leading dense layers sit on
    the first stage, the middle stage is the one before the last) times
    :func:`hnplan.memory.pipeline.microbatches_in_flight` (the middle stage: the second rank's count; with
    ``balanced``, whose schedule evens the stages out, the first stage's layer-micro-batches), plus the embedding dropout mask of every
    micro-batch in flight on the first stage and the output layer of one micro-batch on the last ([1]_
    Sec. 4.3). With
    ``pp = 1`` the one stage holds both. A model's multi-token-prediction modules add their layer,
    inputs and output head on the last stage (:func:`hnplan.memory.recompute.mtp_activation_bytes`).

    Parameters
    ----------
    plans : DataFrame
        Columns :data:`ACTIVATION_COLUMNS` (``num_microbatches``: micro-batches per step).
    per_layer : DataFrame, optional
        :func:`layer_activation_table` of the same plans, when the caller has it.
    balanced : bool
        The stack puts the embedding and the loss in one layer's place each
        (:func:`hnplan.memory.pipeline.end_stage_layers`, :func:`hnplan.memory.pipeline.balanced_in_flight`).
    recompute_modules : tuple of str
        What selective recomputation re-runs (:func:`activation_bytes_per_layer`).
    dualpipe : bool
        DeepSeek-V3's DualPipe schedule where it applies (:func:`hnplan.memory.recompute.dualpipe_on`):
        the first rank also holds the last stage, and ``min(pp, m) + 1`` micro-batches of the fuller
        stage's layers ([3]_ Table 2: ``PP + 1`` against 1F1B's ``PP``) plus the output layer (and MTP
        modules) of one micro-batch; ``stage`` is then that rank either way.
    cache : dict, optional
        Keeps per-shape values across calls (:func:`layer_activation_table`).
    recompute_num_layers : int, optional
        Plans with ``recompute="full"`` recompute only the first ``N`` layers of each model chunk
        (Megatron-Core's block method): the stage's layers are at the ``full`` level in the share
        :func:`hnplan.memory.recompute.recomputed_share` and at the ``none`` level otherwise.
    offload_layers : int
        Activations of that many layers go to host memory in plans with ``pp = 1`` and
        ``recompute="none"`` (the only ones Megatron-Core offloads): HBM keeps
        :func:`hnplan.memory.recompute.offload_kept_layers` of the stage's layers.
    routing_weight : float
        Bytes of a routed copy's routing weight (:func:`layer_activation_table`).

    Raises
    ------
    InputError
        For an unknown recompute mode or stage.
    """
    check_choice("stage", stage, ("first", "middle", "last"))
    df = plans.reset_index(drop=True) if is_frame(plans) else plans
    for rc in distinct_values(df, "recompute"):
        _check_recompute(rc)
    if per_layer is None:
        per_layer = layer_activation_table(
            model,
            df,
            seq_len,
            sequence_parallel=sequence_parallel,
            flash_attention=flash_attention,
            dropout=dropout,
            fp8_gemm_inputs=fp8_gemm_inputs,
            recompute_modules=recompute_modules,
            cache=cache,
            routing_weight=routing_weight,
            attention_output_copy=attention_output_copy,
            eager=eager,
        )
    a_dense, a_moe, emb, out = (column(per_layer, k) for k in ("dense", "moe", "emb", "out"))
    pp = column(df, "pp")
    L = model.layers
    n = end_stage_layers(model, pp, balanced, stage)
    dense_layers = L if model.moe is None else model.moe.first_dense_layers

    def per_mb_of(where, a_dense=a_dense, a_moe=a_moe):  # one micro-batch of the stage's layers
        k = n if where == stage else end_stage_layers(model, pp, balanced, where)
        if model.moe is None:  # every layer dense (k - nd = 0 MoE layers of 0 bytes): the same numbers
            return k * a_dense
        if where == "first":
            nd = np.minimum(k, dense_layers)
        elif where == "last":  # the stage's layers end at the model's end
            nd = np.clip(dense_layers - (L - k), 0, k)
        else:  # the middle stage's layers end where the last stage's begin
            end = L - np.where(pp > 1, end_stage_layers(model, pp, balanced, "last"), 0)
            nd = np.clip(dense_layers - (end - k), 0, k)
        return (k - nd) * a_moe + nd * a_dense

    per_mb = per_mb_of(stage)
    if recompute_num_layers is not None or offload_layers:
        kw = dict(
            sequence_parallel=sequence_parallel,
            flash_attention=flash_attention,
            dropout=dropout,
            fp8_gemm_inputs=fp8_gemm_inputs,
            recompute_modules=recompute_modules,
            routing_weight=routing_weight,
            attention_output_copy=attention_output_copy,
            eager=eager,
        )
        per_mb = _partial_layers(
            model, df, seq_len, n, per_mb, per_mb_of, stage, (recompute_num_layers, offload_layers), kw, cache
        )
    if model.mtp_modules:  # on the last stage: the MTP layers, their inputs and output heads, one micro-batch
        tokens = seq_len / column(df, "cp") * column(df, "microbatch_size")
        tp_sp = column(df, "tp") if sequence_parallel else 1
        out = out + mtp_activation_bytes(model, tokens, tp_sp, a_moe if model.moe is not None else a_dense, out)
    if dualpipe and stage in ("first", "middle"):
        dual = dualpipe_on(pp, column(df, "virtual_stages"))
        held = np.minimum(pp, column(df, "num_microbatches")) + 1.0
        if stage == "first":
            both = np.maximum(per_mb_of("first"), per_mb_of("last")) * held + held * emb + out
        else:  # a middle rank holds two middle stages, PP + 1 micro-batches of one ([3]_ Table 2)
            both = per_mb * held
    if balanced and stage == "first":
        in_flight = balanced_in_flight(n, pp, column(df, "num_microbatches"), column(df, "virtual_stages"))
    elif balanced and stage == "middle":  # the schedule balances the stages' activations: the first stage's
        # layer-micro-batches (Llama 3 arXiv:2407.21783 Sec. 3.3.2), of the middle stage's layers
        n_first = end_stage_layers(model, pp, balanced, "first")
        held = balanced_in_flight(n_first, pp, column(df, "num_microbatches"), column(df, "virtual_stages"))
        in_flight = held * n_first / np.maximum(n, 1)
    else:
        in_flight = on_distinct(  # once over arrays of the distinct (pp, micro-batches, virtual stages)
            df,
            ["pp", "num_microbatches", "virtual_stages"],
            lambda u: (
                microbatches_in_flight(
                    column(u, "pp"), column(u, "num_microbatches"), column(u, "virtual_stages"), stage
                ),
            ),
        )[0]
    total = per_mb * in_flight  # the embedding's on the first stage, the output layer's on the last (pp = 1: both)
    total = total + (in_flight * emb if stage == "first" else np.where(pp == 1, in_flight * emb, 0.0))
    total = total + (out if stage == "last" else np.where(pp == 1, out, 0.0))
    if dualpipe and stage in ("first", "middle"):
        total = np.where(dual, both, total)
    return total


def _partial_layers(model, df, seq_len, n, per_mb, per_mb_of, stage, layers, kw, cache):
    """One micro-batch of a stage's layers with block recomputation or activation offloading
    (:func:`stage_activation_table`'s ``layers = (recompute_num_layers, offload_layers)``) [bytes]."""
    recompute_num_layers, offload_layers = layers
    mode = np.asarray(column(df, "recompute"))
    full, none = mode == "full", mode == "none"
    if recompute_num_layers is not None and np.any(full):
        rows = len(df)
        kept = Columns(
            {k: column(df, k) for k in ("microbatch_size", "tp", "cp")},
            {"recompute": (np.zeros(rows, dtype=np.int64), np.array(["none"], dtype=object))},
        )
        lt = layer_activation_table(model, kept, seq_len, **kw, cache=cache)
        whole = per_mb_of(stage, column(lt, "dense"), column(lt, "moe"))
        share = recomputed_share(n, column(df, "virtual_stages"), recompute_num_layers)
        per_mb = np.where(full, share * per_mb + (1.0 - share) * whole, per_mb)
    if offload_layers:
        on = none & (column(df, "pp") == 1)
        kept_share = offload_kept_layers(n, offload_layers) / np.maximum(n, 1)
        per_mb = np.where(on, per_mb * kept_share, per_mb)
    return per_mb


def stage_activation_bytes(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    recompute: str = "none",
    num_microbatches: int | None = None,
    virtual_stages: int = 1,
    sequence_parallel: bool = True,
    flash_attention: bool = True,
    dropout: bool = True,
    stage: str = "first",
    fp8_gemm_inputs: bool = False,
    balanced: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    dualpipe: bool = False,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
) -> float:
    """Peak activation memory of one accelerator of the first or last pipeline stage [bytes]: the
    one-row case of :func:`stage_activation_table` (``num_microbatches`` default ``pp``).

    Raises
    ------
    InputError
        For an unknown recompute mode or stage.
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    plan = pd.DataFrame(
        [
            dict(
                tp=tp,
                pp=pp,
                cp=cp,
                microbatch_size=microbatch,
                num_microbatches=pp if num_microbatches is None else num_microbatches,
                virtual_stages=virtual_stages,
                recompute=recompute,
            )
        ]
    )
    return float(
        stage_activation_table(
            model,
            plan,
            seq_len,
            stage,
            sequence_parallel=sequence_parallel,
            flash_attention=flash_attention,
            dropout=dropout,
            fp8_gemm_inputs=fp8_gemm_inputs,
            balanced=balanced,
            recompute_modules=recompute_modules,
            dualpipe=dualpipe,
            routing_weight=routing_weight,
            attention_output_copy=attention_output_copy,
            eager=eager,
        )[0]
    )
