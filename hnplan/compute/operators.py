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
``cp`` (each rank's queries attend to the whole sequence); expert parallelism places
``experts / ep`` experts per rank and each rank processes ``tokens x top-k`` expert rows; experts
are tensor-parallel like the dense MLP.

Conventions (``convention``):

* ``executed`` (default, for time): causal attention does half the score and value FLOPs; the
  FlashAttention backward does 2.5x the forward ([3]_: five matmuls, the forward's two plus
  the recomputed scores); element-wise FLOPs are counted.
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

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute._op import ACT_BYTES, GRAD_ACCUM_BYTES, _Op
from hnplan.compute.attention import (
    ATTENTION_IMPLS,
    ATTENTION_KINDS,
    attention_compute_s,
    attention_rows,
)
from hnplan.compute.counts import (
    RECOMPUTE_MODES,
    achievable_flops_per_s,
    achievable_hbm_Bps,
    peak_flops_per_s,
)
from hnplan.compute.fp8_recipes import BF16_GEMMS, StepKernels, fp8_gemm_rows
from hnplan.compute.fp8_recipes import kernel_class as _recipe_class
from hnplan.compute.gemm import gemm_device_time_s, kernel_overhead_s
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
from hnplan.compute.layout import check_split, stage_layers
from hnplan.errors import InputError, check_choice

PHASES = ("train", "prefill", "decode")
CONVENTIONS = ("executed", "model")
ATTENTION_DTYPE = "bf16"  # attention core and element-wise operators stay in bf16, also under fp8
GEMM_KINDS = ("gemm", "gemm-bf16")

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


def _check(
    model: Model,
    phase: str,
    batch,
    seq_len,
    kv_len,
    tp,
    cp,
    ep,
    dtype,
    recompute,
    convention,
    attention="flash",
    sequence_parallel=True,
):
    check_choice("attention", attention, ATTENTION_IMPLS)
    if not isinstance(sequence_parallel, (bool, np.bool_)):
        raise InputError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    check_choice("phase", phase, PHASES)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    check_choice("convention", convention, CONVENTIONS)
    for name, v in (("batch", batch), ("seq_len", seq_len), ("tp", tp), ("cp", cp), ("ep", ep)):
        if v is None or v < 1:
            raise InputError(f"{name} must be >= 1, got {v!r}")
    if kv_len is not None and kv_len < 0:
        raise InputError(f"kv_len must be >= 0, got {kv_len!r}")
    check_split(model, tp=tp, ep=ep, training=False)  # PlanRuleError naming the rule
    try:
        units.dtype_bytes(dtype)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _rows(op: _Op, phase: str, recompute: str, convention: str, count: float):
    """Expand one forward operator into its rows for the phase: (name, scope, kind, phase, count,
    flops, bytes, m, n, k, groups)."""
    executed = convention == "executed"
    out = []
    if op.kind in GEMM_KINDS:
        f = 2.0 * op.groups * op.m * op.n * op.k
        act_in = op.groups * op.m * op.k
        act_out = op.groups * op.m * op.n
        wb = op.in_bytes
        fwd = (f, act_in * wb + op.w_bytes + act_out * ACT_BYTES, op.m, op.n, op.k)
        if phase != "train":
            return [(op.name, op.scope, op.kind, phase, count, *fwd, op.groups)]
        w_elems = op.w_bytes / wb
        out.append((op.name, op.scope, op.kind, "fwd", count, *fwd, op.groups))
        out.append(
            (
                op.name,
                op.scope,
                op.kind,
                "bwd-data",
                count,
                f,
                act_out * wb + op.w_bytes + act_in * ACT_BYTES,
                op.m,
                op.k,
                op.n,
                op.groups,
            )
        )
        out.append(
            (
                op.name,
                op.scope,
                op.kind,
                "bwd-weight",
                count,
                f,
                (act_in + act_out) * wb + 2.0 * w_elems * GRAD_ACCUM_BYTES,
                op.k,
                op.n,
                op.m,
                op.groups,
            )
        )
        if recompute == "full" and op.scope.endswith("layer"):
            out.append((op.name, op.scope, op.kind, "recompute", count, *fwd, op.groups))
        return out
    if op.kind in ATTENTION_KINDS:
        return attention_rows(op, phase, recompute, executed, count)
    f = 0.0 if not executed else op.flops_per_out * op.e_out
    by = op.e_out * op.bytes_per_out if op.bytes_per_out else (op.e_in + op.e_out) * ACT_BYTES
    if phase != "train":
        return [(op.name, op.scope, op.kind, phase, count, f, by, 0.0, 0.0, 0.0, 1.0)]
    out.append((op.name, op.scope, op.kind, "fwd", count, f, by, 0.0, 0.0, 0.0, 1.0))
    out.append((op.name, op.scope, op.kind, "bwd", count, 2.0 * f, 2.0 * by, 0.0, 0.0, 0.0, 1.0))
    if recompute == "full" and op.scope.endswith("layer"):
        out.append((op.name, op.scope, op.kind, "recompute", count, f, by, 0.0, 0.0, 0.0, 1.0))
    return out


def _layer_counts(model: Model, layers: range | None = None) -> dict:
    layers = range(model.layers) if layers is None else layers
    first_dense = model.layers if model.moe is None else model.moe.first_dense_layers
    dense = sum(1 for i in layers if i < first_dense)
    return {"dense-layer": dense, "moe-layer": len(layers) - dense}


def _raw_rows(
    model,
    phase,
    batch,
    seq_len,
    kv_len,
    tp,
    cp,
    ep,
    dtype,
    recompute,
    convention,
    layers=None,
    embedding=True,
    head=True,
    attention="flash",
    sequence_parallel=True,
    acc: Accelerator | None = None,
    stack: StackChoices | None = None,
):
    """Raw rows of a pass; with ``acc`` and an fp8 ``dtype`` in training, the quantisation kernels of the
    stack's fp8 recipe follow each fp8 GEMM (:mod:`hnplan.compute.fp8_recipes`)."""
    wb = units.dtype_bytes(dtype)
    kn = StepKernels.of(stack)
    expand = _expander(phase, recompute, convention, tp, dtype, sequence_parallel, acc, kn)

    rows = []
    for scope, count in _layer_counts(model, layers).items():
        if count:
            for op in _layer_ops(
                model, scope, phase, batch, seq_len, kv_len, tp, cp, ep, wb, attention, sequence_parallel, kn
            ):
                rows += expand(op, count)
    emb, hd = _once_ops(model, phase, batch, seq_len, tp, cp, wb, sequence_parallel, kn)
    for op in (emb if embedding else []) + (hd if head else []):
        rows += expand(op, 1)
    return rows


def _expander(phase, recompute, convention, tp, dtype, sequence_parallel, acc, kn: StepKernels):
    """``expand(op, count)``: the rows of one operator in a pass (:func:`_rows`), followed in fp8
    training by the quantisation rows of the stack's fp8 recipe for an fp8 GEMM."""
    fp8 = acc is not None and phase == "train" and units.dtype_bytes(dtype) < ACT_BYTES
    sp_tp = tp if (phase == "train" and tp > 1 and sequence_parallel) else 1

    def expand(op, count):
        out = _rows(op, phase, recompute, convention, count)
        if fp8 and op.kind == "gemm" and op.name not in BF16_GEMMS:
            out += fp8_gemm_rows(op, acc, kn, recompute, count, sp_tp)
        return out

    return expand


def kernel_class(name: str, kind: str) -> str | None:
    """The memory-bound kernel class of an element-wise operator (keys of the accelerator's
    ``memory_kernel_efficiency``), or None for plain copies (embedding lookup, KV-cache write, MoE permute)."""
    if kind != "elementwise":
        return None
    recipe = _recipe_class(name)
    if recipe is not None:
        return recipe
    if name.endswith("_norm"):
        return "norm"
    if name.endswith("_act") or name == "rope":
        return "activation"
    if name.endswith("_residual"):
        return "residual"
    if name == "loss":
        return "cross_entropy"
    return None


def memory_kernel_fractions(acc: Accelerator, names, kinds) -> np.ndarray:
    """Bandwidth fraction of each row's kernel class on ``acc`` (1 for copies and classes not in the catalog)."""
    eff = acc.memory_kernel_efficiency or {}
    per: dict = {}  # a few dozen distinct operators

    def fraction(name, kind) -> float:
        key = (name, kind)
        if key not in per:
            per[key] = eff.get(kernel_class(str(name), str(kind)), 1.0)
        return per[key]

    for key in set(zip(names, kinds)):  # a few dozen distinct operators; then a lookup per row
        fraction(*key)
    return np.fromiter(map(per.__getitem__, zip(names, kinds)), dtype=float, count=len(names))


def _labels(values) -> tuple[np.ndarray, dict]:
    """Integer codes of a column of labels and the code of each label (a few distinct labels)."""
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), index


def _label_is(labels: tuple[np.ndarray, dict], *values: str) -> np.ndarray:
    """Rows whose label (:func:`_labels`) is one of ``values`` [bool array]."""
    codes, index = labels
    return np.isin(codes, [index[v] for v in values if v in index])


def _times(rows, acc: Accelerator, dtype: str):
    """Vectorised times of raw rows: (compute_s, memory_s, time_s, gemm_eff) arrays. GEMMs (and the unfused
    attention's batched GEMMs, in bf16) follow the GEMM law of :mod:`hnplan.compute.gemm` on the row's bytes;
    the other operators ``max(compute, memory) + kernel overhead``."""
    cols = list(zip(*rows))  # one pass over the rows, then a column at a time
    kind, phase = _labels(cols[2]), _labels(cols[3])
    flops, nbytes, m, n, k, g = (np.array(cols[i], dtype=float) for i in (5, 6, 7, 8, 9, 10))
    is_gemm, is_attn = _label_is(kind, "gemm"), _label_is(kind, "attention")
    is_bmm = _label_is(kind, "attention-gemm", "gemm-bf16")  # bf16 GEMMs of any pass
    eff = np.ones_like(flops)
    rate = np.full_like(flops, peak_flops_per_s(acc, "fp32" if "fp32" in acc.dense_tflops else ATTENTION_DTYPE))
    compute_s = flops / rate
    if is_attn.any():
        compute_s[is_attn] = attention_compute_s(
            acc, flops[is_attn], m[is_attn], n[is_attn], k[is_attn], g[is_attn], _label_is(phase, "bwd")[is_attn]
        )
        eff[is_attn] = flops[is_attn] / compute_s[is_attn] / peak_flops_per_s(acc, ATTENTION_DTYPE)
    memory_s = nbytes / achievable_hbm_Bps(acc)
    if acc.memory_kernel_efficiency:
        memory_s = memory_s / memory_kernel_fractions(acc, cols[0], cols[2])
    total = np.maximum(compute_s, memory_s) + kernel_overhead_s(acc)
    for sel, dt in ((is_gemm, dtype), (is_bmm, ATTENTION_DTYPE)):
        if sel.any():
            tc, tm_, t = gemm_device_time_s(acc, dt, m[sel], n[sel], k[sel], g[sel], nbytes[sel])
            compute_s[sel], memory_s[sel], total[sel] = tc, tm_, t
            eff[sel] = flops[sel] / tc / peak_flops_per_s(acc, dt)
    return compute_s, memory_s, total, eff


def operator_table(
    model: Model,
    acc: Accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    *,
    kv_len: int | None = None,
    tp: int = 1,
    cp: int = 1,
    ep: int = 1,
    dtype: str = "bf16",
    recompute: str = "none",
    convention: str = "executed",
    attention: str = "flash",
    sequence_parallel: bool = True,
    stack: StackChoices | None = None,
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
    kv_len : int, optional
        Cached tokens per sequence in decode [tokens]; defaults to ``seq_len``.
    tp, cp, ep : int
        Tensor, context and expert parallel degrees (shapes are per GPU).
    dtype : str
        GEMM dtype (``bf16``, ``fp8``, ...): GEMMs at that peak, the rest in bf16.
    recompute : {"none", "selective", "full"}
        Training only.
    convention : {"executed", "model"}
        FLOP convention (see module docstring): ``executed`` for time, ``model`` for MFU counts.
    attention : {"flash", "unfused"}
        Attention implementation (see module docstring): fused FlashAttention, or materialised scores.
    sequence_parallel : bool
        Training with ``tp > 1``: norms, residual adds and the final norm run on ``tokens / tp``
        (Megatron sequence parallelism, Korthikanti et al. 2022 Sec. 4.2.2; default) or on every token
        on every TP rank (``False``: Megatron-LM before 2022).
    stack : StackChoices, optional
        The software stack's kernel choices (default: hnplan's default stack): in fp8 training the
        quantisation kernels of its ``fp8_recipe`` follow each fp8 GEMM (phase ``step`` for a weight cast
        cached across a step's micro-batches) and the LM head runs in bf16; ``norm_kernel`` /
        ``rope_kernel`` ``eager`` turn the norms and the rotary embedding into PyTorch eager chains
        (:mod:`hnplan.compute.fp8_recipes`).

    Returns
    -------
    pandas.DataFrame
        One row per operator and phase, columns ``name, scope, kind, phase, count`` (occurrences
        per pass: layers of that kind, or 1), and per occurrence ``flops`` [FLOP], ``bytes`` [bytes],
        ``intensity`` [FLOP/byte], ``compute_time_s``, ``memory_time_s``, ``time_s`` [s],
        ``bound`` (``compute``/``memory``), ``gemm_efficiency`` (fraction of the dense peak the
        operator's shape can reach) [-], ``attained_flops_per_s`` [FLOP/s], and the GEMM shape
        ``m, n, k`` [elements]. ``df.attrs`` holds the inputs and units. Totals: :func:`totals`.

    Raises
    ------
    InputError
        For an unknown phase, recompute mode, convention, attention implementation or dtype; degrees
        below 1; a dtype the accelerator has no peak for.
    PlanRuleError
        For a ``tp`` that does not divide the heads or an ``ep`` that does not divide the experts
        (:func:`hnplan.compute.layout.check_split`).

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> df = operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), "decode", 1, 1024)
    >>> set(df["bound"])
    {'memory'}
    """
    kv_len = seq_len if kv_len is None else kv_len
    _check(model, phase, batch, seq_len, kv_len, tp, cp, ep, dtype, recompute, convention, attention, sequence_parallel)
    rows = _raw_rows(
        model,
        phase,
        batch,
        seq_len,
        kv_len,
        tp,
        cp,
        ep,
        dtype,
        recompute,
        convention,
        attention=attention,
        sequence_parallel=sequence_parallel,
        acc=acc,
        stack=stack,
    )
    compute_s, memory_s, time_s, eff = _times(rows, acc, dtype)
    df = pd.DataFrame(
        [r[:10] for r in rows], columns=["name", "scope", "kind", "phase", "count", "flops", "bytes", "m", "n", "k"]
    )
    df["intensity"] = df["flops"] / df["bytes"]
    df["compute_time_s"], df["memory_time_s"], df["time_s"], df["gemm_efficiency"] = compute_s, memory_s, time_s, eff
    df["bound"] = np.where(compute_s >= memory_s, "compute", "memory")
    df["attained_flops_per_s"] = df["flops"] / df["time_s"]
    df = df[TABLE_COLUMNS]
    df.attrs = dict(
        model=model.id,
        accelerator=acc.id,
        phase=phase,
        batch=batch,
        seq_len=seq_len,
        kv_len=kv_len,
        tp=tp,
        cp=cp,
        ep=ep,
        dtype=dtype,
        recompute=recompute,
        convention=convention,
        attention=attention,
        sequence_parallel=sequence_parallel,
        units={
            "flops": "FLOP",
            "bytes": "bytes",
            "intensity": "FLOP/byte",
            "time_s": "s",
            "attained_flops_per_s": "FLOP/s",
        },
    )
    return df


def totals(df: pd.DataFrame) -> dict:
    """Totals of an operator table over one pass: each row x its ``count``.

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


def training_stage_time_s(
    model: Model,
    acc: Accelerator,
    microbatch: int,
    seq_len: int,
    *,
    tp: int = 1,
    cp: int = 1,
    ep: int = 1,
    pp: int = 1,
    dtype: str = "bf16",
    recompute: str = "none",
    attention: str = "flash",
    sequence_parallel: bool = True,
    stack: StackChoices | None = None,
) -> float:
    """Compute time of one micro-batch (forward + backward + recomputation) on the slowest pipeline stage [s].

    Stages hold ``ceil(layers / pp)`` consecutive layers (the last stage the rest); the first adds the
    embedding, the last the final norm, LM head and loss. Communication is not included. ``attention``:
    ``flash`` or ``unfused``, ``sequence_parallel``, ``stack``: as :func:`operator_table` (a weight cast done
    once per optimizer step is not part of a micro-batch).

    Raises
    ------
    InputError
        As :func:`operator_table`.
    """
    _check(model, "train", microbatch, seq_len, 0, tp, cp, ep, dtype, recompute, "executed", attention)
    per = stage_layers(model, pp).per_stage
    slowest = 0.0
    seen = set()
    for i in range(pp):
        start = i * per
        layers = range(start, min(start + per, model.layers))
        key = (tuple(_layer_counts(model, layers).values()), i == 0, i == pp - 1)
        if key in seen:
            continue
        seen.add(key)
        rows = _raw_rows(
            model,
            "train",
            microbatch,
            seq_len,
            0,
            tp,
            cp,
            ep,
            dtype,
            recompute,
            "executed",
            layers=layers,
            embedding=i == 0,
            head=i == pp - 1,
            attention=attention,
            sequence_parallel=sequence_parallel,
            acc=acc,
            stack=stack,
        )
        rows = [r for r in rows if r[3] != "step"]
        if rows:
            _, _, t, _ = _times(rows, acc, dtype)
            slowest = max(slowest, float(np.dot(t, [r[4] for r in rows])))
    return slowest


def roofline_curve(acc: Accelerator, dtype: str, intensity) -> pd.DataFrame:
    """The roofline of an accelerator over arithmetic intensities (for plotting).

    Returns
    -------
    pandas.DataFrame
        ``intensity`` [FLOP/byte], ``achievable_flops_per_s`` = min(peak x matmul_efficiency,
        HBM bandwidth x hbm_efficiency x intensity) [FLOP/s], ``peak_flops_per_s`` (dense peak)
        [FLOP/s], ``accelerator``, ``dtype``.
    """
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
