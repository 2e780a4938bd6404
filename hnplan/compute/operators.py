"""Operator-level roofline of a transformer: the operators of one layer, per phase, per GPU.

For a model catalog entry, the operators of one layer (norms, QKV or MLA projections, RoPE,
FlashAttention-style attention, output projection, residual adds, dense MLP or MoE router + routed
and shared experts) and the embedding / LM head, with FLOPs, bytes read and written, arithmetic
intensity and time per GPU for one phase:

* ``train``: forward (``fwd``), backward as data-gradient (``bwd-data``) and weight-gradient
  (``bwd-weight``) GEMMs, ``bwd`` for attention and element-wise operators, and ``recompute`` rows
  for the recompute mode (``full``: the layer stack's forward again; ``selective``: the attention
  core, Korthikanti et al. 2022);
* ``prefill``: the forward pass over the prompt, writing the KV cache; logits of the last token only;
* ``decode``: one new token per sequence against a KV cache of ``kv_len`` tokens.

Time per operator ([4]_): ``max(flops / achievable FLOP/s, bytes / achievable HBM bandwidth) +
kernel overhead``; GEMM throughput depends on the shape (:mod:`hnplan.compute.gemm`).

Sharding follows Megatron-LM ([1]_, [2]_): QKV and MLP-up are column-parallel and output and
MLP-down row-parallel over ``tp`` (heads and FFN columns split); with ``tp > 1`` in training,
norms and residual adds run sequence-parallel on ``tokens / tp`` (``sequence_parallel=False``: on
every token on every TP rank, as before sequence parallelism, [2]_ Sec. 4.2.2); MLA down-projections are
replicated; KV heads fewer than ``tp`` are replicated; context parallelism splits the tokens by
``cp`` (each rank's queries attend to the whole sequence, in Transformer Engine's ring of ``cp`` kernels:
:mod:`hnplan.compute.context_parallel`); expert parallelism places
``experts / ep`` experts per rank and each rank processes ``tokens x top-k`` expert rows; experts
are tensor-parallel like the dense MLP.

Conventions (``convention``):

* ``executed`` (default, for time): causal attention does half the score and value FLOPs; the
  FlashAttention backward does 2.5x the forward ([3]_: five matmuls, the forward's two plus
  the recomputed scores; 2.6x for MLA, :func:`hnplan.compute.attention.flash_bwd_factor`); element-wise FLOPs
  are counted.
* ``model`` (for MFU/HFU, PaLM [5]_): attention without the causal halving, every backward 2x its
  forward, element-wise operators do no FLOPs. Summed over a training step this reproduces
  Megatron-LM Eq. 3 ([1]_) exactly for GPT configs (96 form with full recomputation) and
  ``6 N + 12 l h s`` per token (PaLM) for any dense model.

Attention implementations (``attention``):

* ``flash`` (default): one fused kernel per pass ([3]_, [8]_) reading Q, K, V and writing O (and the
  log-sum-exp); the scores never reach HBM.
* ``unfused``: the scores are materialised, as in Megatron-LM before FlashAttention ([7]_):
  ``attn_scores`` (QK^T) and ``attn_context`` (AV) are batched GEMMs over ``b x heads / tp`` of shape
  ``s_q x s_kv x d_qk`` and ``s_q x d_v x s_kv``, timed by the GEMM model (:mod:`hnplan.compute.gemm`,
  bf16) and computing the full score matrix (no causal skipping: cuBLAS multiplies every tile); their
  backward is two GEMMs each (gradients of both operands); ``attn_softmax`` and, in training,
  ``attn_dropout`` are memory-bound passes over the ``b x heads / tp x s_q x s_kv`` scores with the
  bytes per element of :data:`hnplan.compute.attention.UNFUSED_BYTES`; ``attn_context_copy`` is the permute of the context
  to ``[s, b, h]`` (read + write). Selective recomputation re-runs the core (the two GEMMs, softmax,
  dropout), full recomputation the whole forward.

Modelling assumptions (labelled, not measured): element-wise operators read and write bf16;
their backward moves twice the forward bytes and FLOPs; weight gradients accumulate into fp32
(Megatron-LM ``main_grad``: read + write 4 bytes per weight); routing is balanced, and at small
batch only the experts some token picks are read (expected count ``E (1 - (1 - k/E)^T)`` for
``T`` tokens choosing ``k`` of ``E`` uniformly); the attention core runs at the GEMM efficiency of
bf16 with its work split in query tiles of the GEMM tile height; FP8 applies to GEMM inputs
(weights and activations, 1 byte) with bf16 outputs, attention and element-wise stay bf16.

References
----------
.. [1] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.3 and 5.1 (Eq. 3).
.. [2] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   arXiv:2205.05198, Sec. 4 (sequence parallelism) and 5 (selective recomputation).
.. [3] Dao, "FlashAttention-2", arXiv:2307.08691, Sec. 3.1-3.2 and 4.1 (backward FLOPs = 2.5 x forward).
.. [4] Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009.
.. [5] Chowdhery et al., PaLM, arXiv:2204.02311, Appendix B.
.. [6] DeepSeek-AI, DeepSeek-V2 (arXiv:2405.04434) Sec. 2.1 and V3 (arXiv:2412.19437): MLA, and
   the absorbed form used in decode.
.. [7] NVIDIA Megatron-LM (2020-2021), ``megatron/model/transformer.py`` (``ParallelAttention``:
   ``baddbmm`` for QK^T, ``FusedScaleMaskSoftmax``, attention dropout, ``bmm`` for AV, permute of the
   context) and ``megatron/fused_kernels/scaled_upper_triang_masked_softmax.h``.
.. [8] Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
   arXiv:2205.14135 (2022): the fused kernel that never writes the scores to HBM.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute.counts import achievable_flops_per_s, achievable_hbm_Bps, peak_flops_per_s
from hnplan.compute.layer_ops import (  # noqa: F401  (re-exported: the layer operators and their constants)
    ACT_FLOPS,
    DROPOUT_MASK_BYTES,
    LOSS_FLOPS,
    NORM_FLOPS,
    ROPE_FLOPS,
    _expert_mlp,
    _layer_ops,
    _mlp,
    _once_ops,
)
from hnplan.compute.operator_rows import (  # noqa: F401  (re-exported: the row engine lives there)
    ATTENTION_DTYPE,
    CONVENTIONS,
    GEMM_KINDS,
    PHASES,
    _check,
    _expander,
    _label_is,
    _labels,
    _raw_rows,
    _rows,
    _times,
    expert_streams,
    kernel_class,
    memory_kernel_fractions,
)

if TYPE_CHECKING:
    import pandas as pd

TABLE_COLUMNS = [
    "name",
    "scope",
    "kind",
    "phase",
    "count",
    "flops",
    "bytes",
    "intensity",
    "compute_time_s",
    "memory_time_s",
    "time_s",
    "bound",
    "gemm_efficiency",
    "attained_flops_per_s",
    "m",
    "n",
    "k",
]


@dataclass(frozen=True, slots=True)
class OperatorOptions:
    """The options of one pass's operator rows, beyond the pass itself (model, accelerator, phase, batch, length).

    Every function of the operator table (:func:`operator_table`, :func:`operator_columns`, :func:`table_attrs`,
    :func:`hnplan.compute.operator_grid.operator_grid`) and the roofline planner take one of these, or its
    fields as keywords (:func:`operator_options`). Unchecked here: the table checks them (:func:`_check`).

    Attributes
    ----------
    kv_len : int or None
        Cached tokens per sequence in decode [tokens]; None (default): the pass's ``seq_len``.
    tp, cp, ep : int
        Tensor-, context- and expert-parallel degrees [-], default 1; the shapes are per GPU.
    dtype : str
        GEMM dtype (``bf16`` default, ``fp8``, ``fp4``, ...): GEMMs at that peak, the rest in bf16.
    recompute : {"none", "selective", "full"}
        Activation recomputation, training only; default ``none``.
    convention : {"executed", "model"}
        FLOP convention (module docstring): ``executed`` (default) for time, ``model`` for MFU counts.
    attention : {"flash", "unfused"}
        Attention implementation (module docstring): fused FlashAttention (default) or materialised scores.
    sequence_parallel : bool
        Training with ``tp > 1``: norms, residual adds and the final norm run on ``tokens / tp`` (Megatron
        sequence parallelism, Korthikanti et al. 2022 Sec. 4.2.2; default True) or on every token on every
        TP rank (False: Megatron-LM before 2022).
    stack : StackChoices or None
        The software stack's kernel choices (None: hnplan's default stack): in fp8 training the quantisation
        kernels of its ``fp8_recipe`` follow each fp8 GEMM (phase ``step`` for a weight cast cached across a
        step's micro-batches) and the LM head runs in bf16; ``norm_kernel`` / ``rope_kernel`` ``eager`` turn
        the norms and the rotary embedding into PyTorch eager chains (:mod:`hnplan.compute.fp8_recipes`).
    """

    kv_len: int | None = None
    tp: int = 1
    cp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    recompute: str = "none"
    convention: str = "executed"
    attention: str = "flash"
    sequence_parallel: bool = True
    stack: StackChoices | None = None


def operator_options(options: OperatorOptions | None = None, **overrides) -> OperatorOptions:
    """``options`` (default :class:`OperatorOptions`'s defaults) with the fields named in ``overrides`` replaced.

    Raises
    ------
    TypeError
        For a keyword that is not a field of :class:`OperatorOptions`.
    """
    if options is None:
        return OperatorOptions(**overrides)
    return replace(options, **overrides) if overrides else options


def operator_table(
    model: Model,
    acc: Accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    options: OperatorOptions | None = None,
    **overrides,
) -> pd.DataFrame:
    """The operator table of a model's pass on one GPU of an accelerator.

    Parameters
    ----------
    model : Model
    acc : Accelerator
    phase : {"train", "prefill", "decode"}
    batch : int
        Sequences (micro-batch in training; concurrent requests in decode) [-].
    seq_len : int
        Sequence / prompt length [tokens] (train, prefill).
    options : OperatorOptions, optional
        ``kv_len``, ``tp``, ``cp``, ``ep``, ``dtype``, ``recompute``, ``convention``, ``attention``,
        ``sequence_parallel``, ``stack``: their meanings, units and defaults in :class:`OperatorOptions`.
    **overrides
        Fields of :class:`OperatorOptions` by keyword, replacing those of ``options``
        (``operator_table(model, acc, "train", 1, 4096, tp=8)``).

    Returns
    -------
    pandas.DataFrame
        One row per operator and phase, columns ``name, scope, kind, phase, count`` (occurrences
        per pass: layers of that kind, or 1), and per occurrence ``flops`` [FLOP], ``bytes`` [bytes],
        ``intensity`` [FLOP/byte], ``compute_time_s``, ``memory_time_s``, ``time_s`` [s],
        ``bound`` (``compute``/``memory``), ``gemm_efficiency`` (fraction of the dense peak the
        operator's shape can reach) [-], ``attained_flops_per_s`` [FLOP/s], and the GEMM shape
        ``m, n, k`` [elements]. ``df.attrs`` holds the inputs (:func:`table_attrs`) and units.
        Totals: :func:`totals`.

    Raises
    ------
    InputError
        For an unknown phase, recompute mode, convention, attention implementation or dtype; degrees
        below 1; a dtype the accelerator has no peak for.
    PlanRuleError
        For a ``tp`` that does not divide the heads or an ``ep`` that does not divide the experts
        (:func:`hnplan.compute.layout.check_split`).
    TypeError
        For a keyword that is not a field of :class:`OperatorOptions`.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> df = operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), "decode", 1, 1024)
    >>> set(df["bound"])
    {'memory'}
    """
    opts = operator_options(options, **overrides)
    rows, (compute_s, memory_s, time_s, eff) = _timed_rows(model, acc, phase, batch, seq_len, opts)
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    df = pd.DataFrame(
        [r[:10] for r in rows], columns=["name", "scope", "kind", "phase", "count", "flops", "bytes", "m", "n", "k"]
    )
    df["intensity"] = df["flops"] / df["bytes"]
    df["compute_time_s"], df["memory_time_s"], df["time_s"], df["gemm_efficiency"] = compute_s, memory_s, time_s, eff
    df["bound"] = np.where(compute_s >= memory_s, "compute", "memory")
    df["attained_flops_per_s"] = df["flops"] / df["time_s"]
    df = df[TABLE_COLUMNS]
    df.attrs = dict(
        table_attrs(model, acc, phase, batch, seq_len, opts),
        units={
            "flops": "FLOP",
            "bytes": "bytes",
            "intensity": "FLOP/byte",
            "time_s": "s",
            "attained_flops_per_s": "FLOP/s",
        },
    )
    return df


def table_attrs(
    model: Model,
    acc: Accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    options: OperatorOptions | None = None,
    **overrides,
) -> dict:
    """The inputs :func:`operator_table` keeps in its ``attrs`` for these arguments (less ``units``): the ids of
    the model and accelerator, ``kv_len`` resolved (``seq_len`` when None) and the other options as given, less
    ``stack`` (:class:`OperatorOptions`)."""
    o = operator_options(options, **overrides)
    return dict(
        model=model.id,
        accelerator=acc.id,
        phase=phase,
        batch=batch,
        seq_len=seq_len,
        kv_len=seq_len if o.kv_len is None else o.kv_len,
        tp=o.tp,
        cp=o.cp,
        ep=o.ep,
        dtype=o.dtype,
        recompute=o.recompute,
        convention=o.convention,
        attention=o.attention,
        sequence_parallel=o.sequence_parallel,
    )


def _pass_rows(model, acc, phase, batch, seq_len, o: OperatorOptions, only=None, check_batch=None) -> list:
    """The raw rows of one pass with options ``o`` (:func:`_raw_rows`; ``batch`` an int or an integer array), the
    inputs checked first (:func:`_check`, at ``check_batch``: default ``batch``); ``only``: the rows whose names
    start with one of these prefixes."""
    kv_len = seq_len if o.kv_len is None else o.kv_len
    shared = (seq_len, kv_len, o.tp, o.cp, o.ep, o.dtype, o.recompute, o.convention)  # both signatures' order
    _check(model, phase, batch if check_batch is None else check_batch, *shared, o.attention, o.sequence_parallel)
    prefixes = None if only is None else tuple(only)
    rows = _raw_rows(
        model,
        phase,
        batch,
        *shared,
        attention=o.attention,
        sequence_parallel=o.sequence_parallel,
        acc=acc,
        stack=o.stack,
        only=prefixes,
    )
    if prefixes is not None:  # each row is timed on its own fields, so a subset times as it does in the whole pass
        rows = [r for r in rows if str(r[0]).startswith(prefixes)]
    return rows


def _timed_rows(model, acc, phase, batch, seq_len, o: OperatorOptions, only=None) -> tuple:
    """The one row engine behind :func:`operator_table` and :func:`operator_columns`: the checked rows of one
    pass (:func:`_pass_rows`) and their times (:func:`_times`). Returns
    ``(rows, (compute_s, memory_s, time_s, gemm_efficiency))``."""
    rows = _pass_rows(model, acc, phase, batch, seq_len, o, only)
    return rows, _times(rows, acc, o.dtype, streams=expert_streams(o.stack))


def totals(df: pd.DataFrame | dict) -> dict:
    """Totals of an operator table (or of :func:`operator_columns`) over one pass: each row x its ``count``.

    Returns
    -------
    dict
        ``flops`` [FLOP], ``bytes`` [bytes], ``time_s`` [s], ``compute_bound_time_s`` [s] (time of
        compute-bound rows) and ``attained_flops_per_s`` [FLOP/s].
    """
    c = df["count"]
    t = float((df["time_s"] * c).sum())
    return {
        "flops": float((df["flops"] * c).sum()),
        "bytes": float((df["bytes"] * c).sum()),
        "time_s": t,
        "compute_bound_time_s": float((df["time_s"] * c)[df["bound"] == "compute"].sum()),
        "attained_flops_per_s": float((df["flops"] * c).sum()) / t if t else 0.0,
    }


def operator_columns(
    model: Model,
    acc: Accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    options: OperatorOptions | None = None,
    *,
    only: tuple[str, ...] | None = None,
    **overrides,
) -> dict:
    """The columns of :func:`operator_table` that :func:`totals` reads, as numpy arrays, without the frame.

    The same rows and numbers as the table (the same row engine), for loops that need the totals of many
    passes: the serving planner's search over batch sizes evaluates hundreds, and building a pandas frame
    costs several times the rows themselves.

    Parameters
    ----------
    model, acc, phase, batch, seq_len, options, **overrides
        As :func:`operator_table` (the options: :class:`OperatorOptions`).
    only : tuple of str, optional
        Only the rows whose names start with one of these prefixes (in the table's order), each with the
        numbers it has in the whole pass (every row is timed on its own fields); default every row.

    Returns
    -------
    dict
        ``name``, ``scope``, ``kind``, ``phase``, ``bound`` (str arrays), ``count``, ``flops`` [FLOP], ``bytes``
        [bytes], ``intensity`` [FLOP/byte], ``compute_time_s``, ``memory_time_s``, ``time_s`` [s] (number
        arrays), one element per row of :func:`operator_table` in its order; :func:`totals` accepts it.

    Raises
    ------
    InputError, PlanRuleError, TypeError
        As :func:`operator_table`.
    """
    opts = operator_options(options, **overrides)
    rows, (compute_s, memory_s, time_s, _) = _timed_rows(model, acc, phase, batch, seq_len, opts, only)
    flops, n_bytes = np.array([r[5] for r in rows]), np.array([r[6] for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):  # a row of no bytes: inf, as the frame's division gives
        intensity = flops / n_bytes
    return {
        # the numbers' dtypes inferred from the rows as the frame's are (integers stay integers)
        "name": np.array([r[0] for r in rows], dtype=object),
        "scope": np.array([r[1] for r in rows], dtype=object),
        "kind": np.array([r[2] for r in rows], dtype=object),
        "phase": np.array([r[3] for r in rows], dtype=object),
        "count": np.array([r[4] for r in rows]),
        "flops": flops,
        "bytes": n_bytes,
        "intensity": intensity,
        "compute_time_s": compute_s,
        "memory_time_s": memory_s,
        "time_s": time_s,
        "bound": np.where(compute_s >= memory_s, "compute", "memory"),
    }


def roofline_curve(acc: Accelerator, dtype: str, intensity) -> pd.DataFrame:
    """The roofline of an accelerator over arithmetic intensities (for plotting).

    Returns
    -------
    pandas.DataFrame
        ``intensity`` [FLOP/byte], ``achievable_flops_per_s`` = min(peak x matmul_efficiency,
        HBM bandwidth x hbm_efficiency x intensity) [FLOP/s], ``peak_flops_per_s`` (dense peak)
        [FLOP/s], ``accelerator``, ``dtype``.
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    x = np.asarray(intensity, dtype=float)
    ach = np.minimum(achievable_flops_per_s(acc, dtype), achievable_hbm_Bps(acc) * x)
    return pd.DataFrame(
        {
            "intensity": x,
            "achievable_flops_per_s": ach,
            "peak_flops_per_s": peak_flops_per_s(acc, dtype),
            "accelerator": acc.id,
            "dtype": dtype,
        }
    )


def replace_rows(cols: dict, sub: dict, prefixes: tuple[str, ...]) -> dict:
    """:func:`operator_columns` ``cols`` with the rows whose names start with one of ``prefixes`` replaced by
    ``sub`` (:func:`operator_columns` of another pass with ``only=prefixes``: the same rows in the same order),
    in the timed columns (``flops``, ``bytes``, ``compute_time_s``, ``memory_time_s``, ``time_s``; each in the
    dtype ``numpy.where`` would give).

    Raises
    ------
    ValueError
        When ``sub`` does not hold one row per selected row of ``cols``.
    """
    where = np.array([str(n).startswith(prefixes) for n in cols["name"]], dtype=bool)
    if int(where.sum()) != len(sub["name"]):
        raise ValueError(f"{len(sub['name'])} replacement rows for {int(where.sum())} selected rows")
    out = dict(cols)
    for k in ("flops", "bytes", "compute_time_s", "memory_time_s", "time_s"):
        out[k] = cols[k].astype(np.result_type(cols[k], sub[k]), copy=True)
        out[k][where] = sub[k]
    return out
