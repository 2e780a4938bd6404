"""Activation memory of training: per layer from the model's shapes, per pipeline stage in flight.

Korthikanti et al. ([1]_ Sec. 4.1) count the 16-bit tensors a GPT layer keeps for its backward pass,
per token of a micro-batch (``s b`` tokens), in bytes:

* attention: layer-norm input ``2h``, QKV-projection input ``2h``, Q and K ``4h``, V ``2h``,
  output-projection input ``2h``, dropout mask ``h``; plus the ``s x s`` scores ``5 a s``
  (softmax output ``2as``, dropout mask ``as``, dropout output ``2as``);
* MLP: layer-norm input ``2h``, first linear input ``2h``, GELU input ``2f`` and output ``2f``
  (``f = 4h``), dropout mask ``h``;

which sum to ``s b h (34 + 5 a s / h)``. This module keeps that accounting but reads each tensor's
width from the model: Q is ``heads x d_qk`` wide and K, V ``kv_heads x d`` (GQA, MQA); a SwiGLU
MLP keeps its gate and up outputs and their product (``6f``); an MoE layer keeps, per token, the
router input and probabilities, ``top-k`` dispatched copies of the input, their expert intermediates
and routing weights (applied in the activation: the combine keeps nothing, [5]_), and the shared
experts' intermediates; MLA keeps its latent down-projections and the per-head Q, K, V it expands to
([3]_). With ``dropout=False`` (Llama-style training) masks and the dropout output are not stored.

Without sequence parallelism the tensors before the column-parallel GEMMs (norm inputs, GEMM
inputs, masks: ``10 s b h`` for GPT) are replicated over the ``t`` tensor-parallel ranks and the
rest is split; with it everything is split ([1]_ Table 2). Selective recomputation and
FlashAttention keep no ``s x s`` term; full recomputation keeps only the layer input ``2 s b h``
(``/ t`` with sequence parallelism). Context parallelism splits the sequence over ``cp`` ranks. In fp8
training the inputs of weight GEMMs are kept as 1-byte casts ([4]_).

References
----------
.. [1] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   MLSys 2023, arXiv:2205.05198, Sec. 4.1, 4.2, 4.2.3, 4.3 and Table 2.
.. [2] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.2 (1F1B and the interleaved schedule).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.1.1 (MLA).
.. [4] NVIDIA Transformer Engine, ``transformer_engine/pytorch/module/linear.py`` (fp8: the forward saves
   the fp8-cast GEMM input for the weight-gradient GEMM).
.. [5] NVIDIA Megatron-LM @ 92c8482e6dcd (since commit 2659630, core r0.12), ``transformer/moe/experts.py``
   (``TEGroupedMLP``: ``weighted_bias_swiglu_impl`` saves its input and the weights) and ``token_dispatcher.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES, RECOMPUTE_MODES, head_dim
from hnplan.errors import check_choice
from hnplan.memory.pipeline import balanced_in_flight, end_stage_layers, microbatches_in_flight
from hnplan.memory.recompute import (
    DEFAULT_MODULES,
    check_modules,
    dualpipe_on,
    freed_bytes,
    mlp_intermediate,
    mtp_activation_bytes,
    offload_kept_layers,
    recomputed_share,
)
from hnplan.vectorise import Columns, column, distinct_values, memo_batched, on_distinct

MASK_BYTES = 1.0  # one byte per dropout-mask element ([1]_ Sec. 4.1)
LOGIT_BYTES = 4.0  # fp32 logits for the cross-entropy loss ([1]_ Sec. 4.3)
# Assumption: fp32 router scores and routing weights, as the fine-grained MoE recipes run them
# (``--moe-router-dtype fp32``, e.g. radixark/miles scripts/models/qwen3-30B-A3B.sh @122af30);
# Megatron-Core's default (``moe_router_dtype`` None, ``transformer_config.py``) keeps the activations'
# dtype, 2 bytes, so for such a run this over-counts the router's small share.
ROUTER_BYTES = 4.0


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one token of a micro-batch leaves in one layer for the backward pass [bytes/token].

    ``replicated`` is what tensor parallelism without sequence parallelism keeps on every rank,
    ``split`` what it divides over ``t``, ``score_per_key`` the ``s x s`` attention term per key
    position (multiply by the sequence length). ``gemm_inputs_*`` are the parts of ``replicated`` and
    ``split`` that are inputs of weight GEMMs: with fp8 training, Transformer Engine saves those as
    their 1-byte fp8 casts for the weight-gradient GEMM, halving them.
    """

    replicated: float
    split: float
    score_per_key: float
    gemm_inputs_replicated: float = 0.0
    gemm_inputs_split: float = 0.0


def layer_activations(model: Model, moe_layer: bool = False, dropout: bool = True, tp: int = 1) -> LayerActivations:
    """Per-token activation bytes of one layer, split by how tensor parallelism shards them.

    Parameters
    ----------
    model : Model
    moe_layer : bool
        The layer's MLP is the model's mixture of experts (else its dense MLP).
    dropout : bool
        Dropout is on (masks and dropout outputs are stored), as in [1]_; Llama-style recipes turn it off.
    tp : int or array of int
        Tensor-parallel degree, only to keep at least one K/V head per rank when ``kv_heads < tp`` (an array
        gives arrays of the same shape).

    Returns
    -------
    LayerActivations
    """
    h, a = model.hidden, model.heads
    mask = MASK_BYTES * h if dropout else 0.0
    rep = ACT_BYTES * h * 2 + mask  # layer-norm input, QKV (or down-projection) input, mask
    g_rep = ACT_BYTES * h  # QKV / down-projection input
    if model.mla is not None:
        m = model.mla
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        q_lat = 2 * m.q_lora_rank if m.q_lora_rank else 0  # latent-norm input and up-projection input
        rep += ACT_BYTES * (q_lat + 2 * m.kv_lora_rank + m.qk_rope_head_dim)
        g_rep += ACT_BYTES * (q_lat / 2 + m.kv_lora_rank)  # up-projection inputs
        split = ACT_BYTES * (a * d_qk * 2 + a * d_v * 2)  # per-head Q, K, V, attention output
        g_split = ACT_BYTES * a * d_v  # output-projection input
    else:
        d = head_dim(model)
        # fewer KV heads than ranks: each rank keeps one (tp may be an array over plans)
        kv = np.maximum(model.kv_heads, tp) if np.ndim(tp) else max(model.kv_heads, tp)
        split = ACT_BYTES * (a * d + kv * d * 2 + a * d)  # Q, K, V, attention output
        g_split = ACT_BYTES * a * d
    rep += ACT_BYTES * h * 2 + mask  # MLP: layer-norm input, first GEMM / router input, mask
    g_rep += ACT_BYTES * h
    if moe_layer and model.moe is not None:
        e = model.moe
        rep += ROUTER_BYTES * e.experts
        inter = mlp_intermediate(e.expert_ffn_hidden, model.activation)
        # per routed copy: input 2h, intermediates, fp32 weight (scales the activation; the combine keeps none, [5]_)
        split += e.active_experts * (ACT_BYTES * h + inter + ROUTER_BYTES) + e.shared_experts * inter
        g_split += ACT_BYTES * ((e.active_experts + e.shared_experts) * e.expert_ffn_hidden + e.active_experts * h)
    else:
        split += mlp_intermediate(model.ffn_hidden, model.activation)
        g_split += ACT_BYTES * model.ffn_hidden  # second-GEMM input (GELU output / SwiGLU product)
    score = (ACT_BYTES + MASK_BYTES + ACT_BYTES if dropout else ACT_BYTES) * a
    return LayerActivations(
        replicated=rep, split=split, score_per_key=score, gemm_inputs_replicated=g_rep, gemm_inputs_split=g_split
    )


def _check_recompute(recompute: str):
    check_choice("recompute", recompute, RECOMPUTE_MODES)


def activation_bytes_per_layer(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = True,
    recompute: str = "none",
    flash_attention: bool = True,
    dropout: bool = True,
    moe_layer: bool | None = None,
    fp8_gemm_inputs: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
) -> float:
    """Activation memory of one transformer layer for one micro-batch on one accelerator [bytes].

    For a GPT layer (MHA, GELU, ``f = 4h``, dropout) this is Korthikanti's ``s b h (34 + 5 a s / h)``
    and its Table 2 variants ([1]_); other shapes follow :func:`layer_activations`.

    Parameters
    ----------
    model : Model
    seq_len : int
        Sequence length ``s`` [tokens].
    microbatch : int
        Sequences per micro-batch ``b``.
    tp, cp : int
        Tensor- and context-parallel degrees.
    sequence_parallel : bool
        Megatron sequence parallelism (splits the replicated part over ``tp`` too).
    recompute : {"none", "selective", "full"}
    flash_attention : bool
        FlashAttention stores no ``s x s`` scores.
    dropout : bool
        Dropout masks are stored ([1]_ assumes dropout; Llama-style recipes have none).
    moe_layer : bool, optional
        Count an MoE layer; default: the model's MoE layers if it has any.
    fp8_gemm_inputs : bool
        fp8 training: GEMM inputs are saved as 1-byte fp8 casts (Transformer Engine).
    recompute_modules : tuple of str
        With ``recompute="selective"``, the modules re-run (:data:`hnplan.memory.recompute.RECOMPUTE_MODULES`);
        their internal tensors are not kept (:func:`hnplan.memory.recompute.freed_bytes`). Default the
        attention core.

    Returns
    -------
    float
        [bytes]

    Raises
    ------
    InputError
        For an unknown recompute mode or module.

    Examples
    --------
    GPT-3 175B (s = 2048, b = 1, t = 8, sequence parallel, selective): ``34 s b h / t`` bytes.

    >>> from hnplan.catalog import load_catalog
    >>> gpt3 = load_catalog().model("gpt3-175b")
    >>> activation_bytes_per_layer(gpt3, 2048, 1, tp=8, recompute="selective") == 34 * 2048 * 12288 / 8
    True
    """
    _check_recompute(recompute)
    s = seq_len / cp
    tokens = s * microbatch
    if recompute == "full":
        return ACT_BYTES * tokens * model.hidden / (tp if sequence_parallel else 1)
    moe = (model.moe is not None) if moe_layer is None else moe_layer
    la = layer_activations(model, moe, dropout, tp)
    modules = check_modules(recompute_modules) if recompute == "selective" else ()
    score = 0.0 if (flash_attention or "core_attn" in modules) else la.score_per_key * s
    f_rep, f_split, fg_rep, fg_split = freed_bytes(model, moe, modules)
    half = 0.5 if fp8_gemm_inputs else 0.0
    split = (la.split - f_split - half * (la.gemm_inputs_split - fg_split) + score) / tp
    rep = (la.replicated - f_rep - half * (la.gemm_inputs_replicated - fg_rep)) / (tp if sequence_parallel else 1)
    return tokens * (rep + split)


def embedding_activation_bytes(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = True,
    dropout: bool = True,
) -> float:
    """Input-embedding activations of one micro-batch on the first stage: the dropout mask ``s b h``
    (``/ t`` with sequence parallelism) ([1]_ Sec. 4.3); nothing without dropout [bytes]."""
    if not dropout:
        return 0.0
    return MASK_BYTES * seq_len / cp * microbatch * model.hidden / (tp if sequence_parallel else 1)


def output_activation_bytes(
    model: Model, seq_len: int, microbatch: int, tp: int = 1, cp: int = 1, sequence_parallel: bool = True
) -> float:
    """Final norm, LM head and loss of one micro-batch on the last stage: ``4 s b h / t (1 + v / h)``
    ([1]_ Sec. 4.3: norm input and LM-head input ``2 s b h`` each, fp32 logits ``4 s b v``) [bytes]."""
    tokens = seq_len / cp * microbatch
    norm_and_head = 2 * ACT_BYTES * tokens * model.hidden / (tp if sequence_parallel else 1)
    return norm_and_head + LOGIT_BYTES * tokens * model.vocab / tp


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
) -> pd.DataFrame:
    """Per micro-batch, for every plan of a table: the activations of one dense and one MoE layer
    (:func:`activation_bytes_per_layer`), the embedding (:func:`embedding_activation_bytes`) and the
    output layer (:func:`output_activation_bytes`), each evaluated once per distinct
    ``(microbatch_size, tp, cp, recompute)`` [bytes].

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
    )
    return memo_batched(  # mb, tp and cp as arrays over the shapes of one recompute mode
        plans.reset_index(drop=True) if isinstance(plans, pd.DataFrame) else plans,
        ["microbatch_size", "tp", "cp", "recompute"],
        lambda mb, tp, cp, rc: {
            "dense": activation_bytes_per_layer(model, seq_len, mb, tp, cp, recompute=rc, moe_layer=False, **kw),
            "moe": 0.0
            if model.moe is None
            else activation_bytes_per_layer(model, seq_len, mb, tp, cp, recompute=rc, moe_layer=True, **kw),
            "emb": embedding_activation_bytes(model, seq_len, mb, tp, cp, sequence_parallel, dropout),
            "out": output_activation_bytes(model, seq_len, mb, tp, cp, sequence_parallel),
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
) -> np.ndarray:
    """Peak activation memory of one accelerator of the first or last pipeline stage, for every plan
    of a table [bytes]: the one stage-activation model (:func:`stage_activation_bytes` is its one-row
    case, :func:`hnplan.memory.training_memory_table` its user).

    The stage's ``ceil(L / pp)`` layers (:func:`hnplan.compute.layout.stage_layer_range`: the first or
    the last ones, so a DeepSeek-style model's leading dense layers sit on the first stage) times
    :func:`hnplan.memory.pipeline.microbatches_in_flight`, plus the embedding dropout mask of every
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

    Raises
    ------
    InputError
        For an unknown recompute mode or stage.
    """
    check_choice("stage", stage, ("first", "last"))
    df = plans.reset_index(drop=True) if isinstance(plans, pd.DataFrame) else plans
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
        )
    a_dense, a_moe, emb, out = (column(per_layer, k) for k in ("dense", "moe", "emb", "out"))
    pp = column(df, "pp")
    L = model.layers
    n = end_stage_layers(model, pp, balanced)
    dense_layers = L if model.moe is None else model.moe.first_dense_layers

    def per_mb_of(where, a_dense=a_dense, a_moe=a_moe):  # one micro-batch of the stage's layers
        nd = np.minimum(n, dense_layers) if where == "first" else np.clip(dense_layers - (L - n), 0, n)
        return (n - nd) * a_moe + nd * a_dense

    per_mb = per_mb_of(stage)
    if recompute_num_layers is not None or offload_layers:
        kw = dict(
            sequence_parallel=sequence_parallel,
            flash_attention=flash_attention,
            dropout=dropout,
            fp8_gemm_inputs=fp8_gemm_inputs,
            recompute_modules=recompute_modules,
        )
        per_mb = _partial_layers(
            model, df, seq_len, n, per_mb, per_mb_of, stage, (recompute_num_layers, offload_layers), kw, cache
        )
    if model.mtp_modules:  # on the last stage: the MTP layers, their inputs and output heads, one micro-batch
        tokens = seq_len / column(df, "cp") * column(df, "microbatch_size")
        tp_sp = column(df, "tp") if sequence_parallel else 1
        out = out + mtp_activation_bytes(model, tokens, tp_sp, a_moe if model.moe is not None else a_dense, out)
    if dualpipe and stage == "first":
        dual = dualpipe_on(pp, column(df, "virtual_stages"))
        held = np.minimum(pp, column(df, "num_microbatches")) + 1.0
        both = np.maximum(per_mb_of("first"), per_mb_of("last")) * held + held * emb + out
    if balanced and stage == "first":
        in_flight = balanced_in_flight(n, pp, column(df, "num_microbatches"), column(df, "virtual_stages"))
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
    total = per_mb * in_flight
    total = total + np.where((stage == "first") | (pp == 1), in_flight * emb, 0.0)
    total = total + np.where((stage == "last") | (pp == 1), out, 0.0)
    if dualpipe and stage == "first":
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
) -> float:
    """Peak activation memory of one accelerator of the first or last pipeline stage [bytes]: the
    one-row case of :func:`stage_activation_table` (``num_microbatches`` default ``pp``).

    Raises
    ------
    InputError
        For an unknown recompute mode or stage.
    """
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
        )[0]
    )
