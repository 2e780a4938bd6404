"""Operator-level training times of a model's parts for many micro-batch shapes at once.

The training planner needs, for every distinct ``(micro-batch, tp, cp, ep)`` among its candidate
plans, the time of one dense layer, one MoE layer, the embedding and the head, split by phase. This
builds the operator rows of :mod:`hnplan.compute.operators` for all shapes and times them in one
vectorised roofline call (every operator but the routed experts, which alone depend on EP, once per
``(micro-batch, tp, cp)``; the routed experts once per shape), so the result equals summing
:func:`hnplan.compute.operator_table` rows shape by shape (to rounding; tested), at a fraction of the
cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute.attention import ATTENTION_KINDS
from hnplan.compute.fp8_recipes import StepKernels
from hnplan.compute.host import router_host_s, row_host_s
from hnplan.compute.layer_ops import _expert_mlp
from hnplan.compute.layout import split_rules
from hnplan.compute.operator_rows import _check, _columns, _expander, _label_is, _raw_rows, _times

PARTS = {"dense-layer": "dense", "moe-layer": "moe", "embedding": "emb", "head": "head"}
GROUPS = ("fwd", "bwd", "rc_full", "rc_sel", "rc_attn", "attn", "routed_fwd", "routed_bwd", "routed_rc", "wgrad")
#: host time launching the kernels of a part (:mod:`hnplan.compute.host`), per group of the same name
HOST_GROUPS = ("host_fwd", "host_bwd", "host_rc_full", "host_rc_sel")
ROUTED_OPS = ("moe_permute", "expert_up", "expert_act", "expert_down")  # what scales with the tokens a rank gets
#: the operators (row-name prefixes, their fp8 input casts included) each recompute module re-runs
#: (Megatron-Core ``recompute_modules``, :mod:`hnplan.memory.recompute`); ``core_attn``: the attention rows
MODULE_OPS = {
    "core_attn": (),
    "layernorm": ("attn_norm", "mlp_norm"),
    "mla_up_proj": ("q_up", "kv_up", "rope"),
    "mlp": ("mlp_up", "mlp_act", "mlp_down"),
    "moe_act": ("expert_act",),
    "shared_experts": ("shared_expert_up", "shared_expert_act", "shared_expert_down"),
}


def training_part_times(
    model: Model,
    acc: Accelerator,
    shapes: pd.DataFrame,
    seq_len: int,
    dtype: str = "bf16",
    attention: str = "flash",
    sequence_parallel: bool = True,
    stack: StackChoices | None = None,
) -> pd.DataFrame:
    """Per-occurrence times of a model's parts in training, for each micro-batch shape [s].

    Parameters
    ----------
    model : Model
    acc : Accelerator
    shapes : DataFrame
        Columns ``microbatch_size, tp, cp, ep``, one row per shape.
    seq_len : int
        [tokens]
    dtype : str
        GEMM dtype.
    attention : {"flash", "unfused"}
        Attention implementation (:func:`hnplan.compute.operator_table`); with ``unfused`` the attention
        core is the QK^T and AV GEMMs and the softmax and dropout passes over the scores.
    stack : StackChoices, optional
        Kernel choices (fp8 recipe, fusions, eager norms) as :func:`hnplan.compute.operator_table`; a weight
        cast cached for the whole step (phase ``step``) is left to the planner's per-step terms.

    Returns
    -------
    pandas.DataFrame
        Aligned with ``shapes``; for each part ``dense`` (one dense layer), ``moe`` (one MoE
        layer), ``emb`` and ``head`` the columns ``<part>_fwd`` (forward), ``<part>_bwd`` (data and
        weight gradients), ``<part>_rc_full`` (what full recomputation re-runs), ``<part>_rc_sel``
        (what selective recomputation re-runs: the attention core) and ``<part>_attn`` (attention core
        forward + backward), and ``<part>_routed_fwd`` / ``_routed_bwd`` / ``_routed_rc`` (the share of
        forward, backward and full recomputation spent in the routed experts and their permutation,
        :data:`ROUTED_OPS`: the work that grows with the tokens routed to a rank) and ``<part>_wgrad``
        (the weight-gradient GEMMs, part of ``_bwd``) [s]; ``<part>_rc_sel`` re-runs the stack's
        ``recompute_modules`` (:data:`MODULE_OPS`; default the attention core) and ``<part>_rc_attn`` is
        the attention core's share of a recomputation [s]; ``<part>_host_fwd`` / ``_host_bwd`` / ``_host_rc_full``
        / ``_host_rc_sel``: the host time launching those kernels (:mod:`hnplan.compute.host`, with the stack's
        launch cost and CUDA-graph scopes; an MoE layer's router and preprocess kernels included) [s]. Parts a
        model does not have are 0.

    Raises
    ------
    InputError
        As :func:`hnplan.compute.operator_table` for a shape (tp not dividing the heads, ...).
    """
    cols = ["microbatch_size", "tp", "cp", "ep"]
    shp = list(zip(*(shapes[k].to_numpy().astype(np.int64).tolist() for k in cols)))
    _check_shapes(model, shp, seq_len, dtype, attention)
    kw = dict(attention=attention, sequence_parallel=sequence_parallel, acc=acc, stack=stack)
    # everything but the routed experts is independent of EP: those rows once per (mb, tp, cp)
    sub = {s[:3]: None for s in shp}
    index = {k: i for i, k in enumerate(sub)}
    sub_of = np.array([index[s[:3]] for s in shp], dtype=np.int64)
    moe = model.moe is not None and model.moe.first_dense_layers < model.layers
    kn = StepKernels.of(stack)
    ch = stack if stack is not None else StackChoices()
    host_memo: dict = {}  # host time per distinct row (hnplan.compute.host.row_host_s)
    shared, shared_owner = [], []
    for i, (mb, tp, cp) in enumerate(sub):
        r = _raw_rows(model, "train", mb, seq_len, 0, tp, cp, 1, dtype, "full", "executed", **kw)
        if moe:
            routed = {x[0] for x in _expert_rows(model, mb, seq_len, tp, cp, 1, dtype, sequence_parallel, acc, kn)}
            r = [x for x in r if x[0] not in routed]
        shared += r
        shared_owner += [i] * len(r)
    experts, experts_owner, experts_host = [], [], []
    # the routed experts' rows depend on the shape through the tokens of a CP rank, tp and ep: once each
    routed_key = {(mb * seq_len / cp, tp, ep): (mb, cp) for mb, tp, cp, ep in shp}
    routed_index = {k: i for i, k in enumerate(routed_key)}
    routed_of = np.array([routed_index[mb * seq_len / cp, tp, ep] for mb, tp, cp, ep in shp], dtype=np.int64)
    if moe:
        for i, ((_, tp, ep), (mb, cp)) in enumerate(routed_key.items()):
            r = _expert_rows(model, mb, seq_len, tp, cp, ep, dtype, sequence_parallel, acc, kn)
            experts += r
            experts_owner += [i] * len(r)
            experts_host.append(row_host_s(r, ch, model.moe.experts / ep, host_memo))
    modules = ("core_attn",) if stack is None else stack.recompute_modules
    per_sub = _grouped(shared, shared_owner, len(sub), acc, dtype, modules, row_host_s(shared, ch, memo=host_memo))
    host_e = np.concatenate(experts_host) if experts_host else np.zeros(0)
    per_routed = _grouped(experts, experts_owner, len(routed_key), acc, dtype, modules, host_e)
    out = {}
    for part in PARTS.values():
        for g in GROUPS + HOST_GROUPS:
            key = f"{part}_{g}"
            out[key] = per_sub[key][sub_of] + (per_routed[key][routed_of] if part == "moe" else 0.0)
    if moe:  # the router and dispatcher-preprocess kernels the rows do not list, in every pass that runs them
        extra = router_host_s(ch)
        for g in ("host_fwd", "host_bwd", "host_rc_full"):
            out[f"moe_{g}"] = out[f"moe_{g}"] + extra
    return pd.DataFrame(out)


def _check_shapes(model: Model, shapes: list, seq_len: int, dtype: str, attention: str) -> None:
    """:func:`hnplan.compute.operators._check` of every ``(micro-batch, tp, cp, ep)`` shape: the choices
    once, the degrees of all shapes at once (the first shape that breaks a rule raises its error)."""
    if not shapes:
        return
    mb, tp, cp, ep = (np.array(x) for x in zip(*shapes))
    ok = np.minimum.reduce([mb, tp, cp, ep]) >= 1
    ok &= np.logical_and.reduce(np.broadcast_arrays(*split_rules(model, tp, 1, ep, training=False).values()))
    first = shapes[int(np.argmin(ok))] if not ok.all() else shapes[0]
    _check(model, "train", first[0], seq_len, 0, first[1], first[2], first[3], dtype, "full", "executed", attention)


def _expert_rows(model, mb, seq_len, tp, cp, ep, dtype, sequence_parallel, acc, kn) -> list:
    """Raw training rows of the routed experts of one MoE layer (the operators of
    :func:`hnplan.compute.layer_ops._expert_mlp` with their fp8 quantisation rows)."""
    expand = _expander("train", "full", "executed", tp, dtype, sequence_parallel, acc, kn)
    tokens = mb * seq_len / cp  # tokens of a micro-batch on one CP rank, as the layer's other operators
    ops = _expert_mlp(model, "moe-layer", tokens, tp, ep, units.dtype_bytes(dtype))
    return [row for op in ops for row in expand(op, 1)]


def _grouped(rows, owner, n: int, acc: Accelerator, dtype: str, modules=("core_attn",), host=None) -> dict:
    """Times of raw rows summed per owner (``0..n-1``), for each part and group: ``{"<part>_<group>": array}``;
    ``modules``: what selective recomputation re-runs (:data:`MODULE_OPS`); ``host``: each row's host time
    [s], summed into :data:`HOST_GROUPS` (0 without)."""
    if not rows:
        return {f"{part}_{g}": np.zeros(n) for part in PARTS.values() for g in GROUPS + HOST_GROUPS}
    cols = _columns(rows)
    _, _, t, _ = _times(rows, acc, dtype, cols)
    name, scope, kind, phase = (cols[f] for f in ("name", "scope", "kind", "phase"))
    rc, attn = _label_is(phase, "recompute"), _label_is(kind, *ATTENTION_KINDS)
    routed = _label_is(name, *ROUTED_OPS)
    bwd = _label_is(phase, "bwd", "bwd-data", "bwd-weight")
    fwd = _label_is(phase, "fwd")
    prefixes = tuple(p for m in modules for p in MODULE_OPS[m])
    rerun = _label_is(name, *(v for v in name[1] if prefixes and str(v).startswith(prefixes)))
    host = np.zeros(len(t)) if host is None else np.asarray(host, dtype=float)
    masks = {
        "fwd": fwd,
        "bwd": bwd,
        "rc_full": rc,
        "rc_sel": rc & ((attn & ("core_attn" in modules)) | rerun),
        "rc_attn": rc & attn,
        "attn": attn & ~rc,
        "routed_fwd": routed & fwd,
        "routed_bwd": routed & bwd,
        "routed_rc": routed & rc,
        "wgrad": _label_is(phase, "bwd-weight"),
    }
    # one sum per group over (part, owner) bins; rows of scopes outside PARTS fall in a last bin
    part_of = np.array([list(PARTS).index(sc) if sc in PARTS else len(PARTS) for sc in scope[1]], dtype=np.int64)
    bins = part_of[scope[0]] * n + np.asarray(owner, dtype=np.int64)
    out = {}
    for g in GROUPS:
        sel = masks[g]
        sums = np.bincount(bins[sel], weights=t[sel], minlength=(len(PARTS) + 1) * n)
        for i, part in enumerate(PARTS.values()):
            out[f"{part}_{g}"] = sums[i * n : (i + 1) * n]
    for g in HOST_GROUPS:
        sel = masks[g.removeprefix("host_")]
        sums = np.bincount(bins[sel], weights=host[sel], minlength=(len(PARTS) + 1) * n)
        for i, part in enumerate(PARTS.values()):
            out[f"{part}_{g}"] = sums[i * n : (i + 1) * n]
    return out
