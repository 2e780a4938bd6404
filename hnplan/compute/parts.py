"""Operator-level training times of a model's parts for many micro-batch shapes at once.

The training planner needs, for every distinct ``(micro-batch, tp, cp, ep)`` among its candidate
plans, the time of one dense layer, one MoE layer, the embedding and the head, split by phase. This
builds the operator rows of :mod:`hnplan.compute.operators` for all shapes and times them in one
vectorised roofline call (every operator but the routed experts, which alone depend on EP, once per
``(micro-batch, tp, cp)``; the routed experts once per shape), so the result equals summing
:func:`hnplan.compute.operator_table` rows shape by shape (to rounding; tested), at a fraction of the
cost. The rows are built once per group of shapes that share a row set: the attention cores' once for
``cp = 1`` and once for all ``cp > 1`` (whose ring is one diagonal step, one off-diagonal step run ``cp - 1``
times and the corrections), the other operators' once for every ``cp`` (the same rows at the shape's
``b s / cp`` tokens), interleaved in each shape's order; and ``tp = 1`` apart from ``tp > 1`` where a
sequence-sharded fp8 input needs its own transpose kernel: the names, kinds and phases once, each number an
array over the group's shapes (the same expressions as for one shape, element by element: every number
equals the one-shape row bit for bit; tested). The rows
are those of one occurrence of each part; a row's ``count`` is the times its kernel runs there (``cp - 1``
for the ring's off-diagonal step, 1 otherwise), by which its time and host launches are multiplied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute._op import ACT_BYTES
from hnplan.compute.attention import ATTENTION_KINDS
from hnplan.compute.fp8_recipes import StepKernels, needs_transpose
from hnplan.compute.host import router_host_s, row_host_s
from hnplan.compute.layer_ops import _expert_mlp
from hnplan.compute.layout import split_rules
from hnplan.compute.operator_rows import (
    ROW_FIELDS,
    _check,
    _expander,
    _label_is,
    _labels,
    _raw_rows,
    _times,
    expert_streams,
)

if TYPE_CHECKING:
    import pandas as pd

PARTS = {"dense-layer": "dense", "moe-layer": "moe", "embedding": "emb", "head": "head"}
GROUPS = ("fwd", "bwd", "rc_full", "rc_sel", "rc_attn", "attn", "routed_fwd", "routed_bwd", "routed_rc", "wgrad")
GROUPS += ("attn_bwd",)  # the attention core's backward alone: a backward's last GPU work (host.stage_times)
HOST_GROUPS = ("host_fwd", "host_bwd", "host_rc_full", "host_rc_sel")
ROUTED_OPS = (
    "moe_permute",
    "expert_up",
    "expert_act",
    "expert_act_eager",
    "expert_down",
)  # what scales with the tokens a rank gets
#: the fields of the stack's choices (:class:`~hnplan.catalog.schemas.StackChoices`) that :func:`part_time_table`
#: reads, itself or through the kernel and host models of this package (every field named in ``hnplan/compute``:
#: tests/test_training_content_memo.py): the others (communication, memory, schedule, optimizer) leave its numbers as
#: they are, so a memo of its tables (:func:`hnplan.planning.training.stage_compute.part_times`) keys on these alone
KERNEL_CHOICES = (
    "act_kernel",
    "amax_passes",
    "attention",
    "autograd_grad_sums",
    "cp_algorithm",
    "cuda_graph_scope",
    "ep_dispatcher",
    "expert_gemm_launch",
    "expert_gemm_streams",
    "fp4_params",
    "fp8_act_cast_fusion",
    "fp8_cast_transpose_fusion",
    "fp8_current_amax_fusion",
    "fp8_norm_cast_fusion",
    "fp8_output_proj",
    "fp8_params",
    "fp8_recipe",
    "fp8_weight_cache",
    "gqa_kv_copy",
    "kernel_launch_us",
    "moe_host_syncs_per_layer",
    "moe_host_us_per_kernel",
    "norm_cudnn",
    "norm_kernel",
    "nvfp4_rht",
    "recompute_modules",
    "rope_kernel",
    "sequence_parallel",
    "tp_comm",
    "tp_overlap_cfg",
)
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
        (the weight-gradient GEMMs, part of ``_bwd``) and ``<part>_attn_bwd`` (the attention core's backward, part
        of ``_bwd`` and ``_attn``) [s]; ``<part>_rc_sel`` re-runs the stack's
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
    cols = ["microbatch_size", "tp", "cp", "ep"] + (["etp"] if "etp" in shapes else [])
    shp = list(zip(*(shapes[k].to_numpy().astype(np.int64).tolist() for k in cols)))
    names, table = part_time_table(model, acc, shp, seq_len, dtype, attention, sequence_parallel, stack)
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    return pd.DataFrame(table, columns=names)  # one float block


def part_time_table(
    model: Model,
    acc: Accelerator,
    shp: list[tuple[int, ...]],
    seq_len: int,
    dtype: str = "bf16",
    attention: str = "flash",
    sequence_parallel: bool = True,
    stack: StackChoices | None = None,
    ring_kernels: dict | None = None,
) -> tuple[list[str], np.ndarray]:
    """:func:`training_part_times` for a list of ``(microbatch_size, tp, cp, ep[, etp])`` integer tuples, without
    the frames (the planner's path): the column names and the ``[shape, column]`` float array [s].

    ``ring_kernels`` (optional): a dict to which the kernel times of the context-parallel ring's steps are added,
    ``{(microbatch_size, tp, cp): (diagonal fwd, off-diagonal fwd, diagonal bwd, off-diagonal bwd)}`` [s] for
    each ``(microbatch_size, tp, cp)`` whose attention runs as a ring of fused kernels (:func:`_ring_step_times`):
    the numbers :func:`hnplan.compute.attention.ring_pair_times_s` gives for that shape's attention operator, read
    from the rows timed here (the same kernels, rows and law), so that a planner that also needs the ring's
    steps one by one (:func:`hnplan.planning.training.collectives.cp_comm_per_layer`) does not time them again.

    ``etp`` (default ``tp``) is the expert layers' tensor parallelism: the routed experts of a rank run the
    ``b s / cp x etp / tp`` tokens of its expert-TP group through ``1 / etp`` of each expert (``etp = tp``:
    the TP group's tokens through ``1 / tp``; ``etp = 1``, MoE parallel folding, arXiv:2504.14960: the
    rank's own sequence-parallel tokens through whole experts; the same FLOPs, other GEMM shapes).

    Raises
    ------
    InputError
        As :func:`training_part_times`.
    """
    shp = [s if len(s) > 4 else (*s, s[1]) for s in shp]  # etp defaults to tp
    _check_shapes(model, shp, seq_len, dtype, attention)
    kw = dict(attention=attention, sequence_parallel=sequence_parallel, acc=acc, stack=stack)
    moe = model.moe is not None and model.moe.first_dense_layers < model.layers
    kn = StepKernels.of(stack, dtype)
    ch = stack if stack is not None else StackChoices()
    # a sequence-sharded fp8 input is transposed in its own kernel, an unsharded one with its cast
    # (hnplan.compute.fp8_recipes.quantise): the rows of tp = 1 and tp > 1 differ there only
    by_tp = units.dtype_bytes(dtype) < ACT_BYTES and needs_transpose(acc, kn.fp8_recipe) and kn.cast_transpose_fusion
    # everything but the routed experts is independent of EP: those rows once per (mb, tp, cp), built for
    # all the shapes of a group at once (one row set for cp = 1, one for all cp > 1; the numbers as arrays
    # over shapes)
    sub = {s[:3]: None for s in shp}
    index = {k: i for i, k in enumerate(sub)}
    sub_of = np.array([index[s[:3]] for s in shp], dtype=np.int64)
    subs = list(sub)
    sub_cols = np.array(subs, dtype=np.int64).reshape(-1, 3).T.copy()  # [(mb, tp, cp), sub-shape]

    def rows(owners, core: bool, ring: bool = False) -> list:
        """The row segments (``_raw_rows``'s ``core``) of the sub-shapes ``owners``."""
        mb, tp, cp = (sub_cols[j].take(owners) for j in (0, 1, 2))
        cp = cp if ring or not core else 1  # the ring's rows (diagonal, off-diagonal x (cp - 1), corrections)
        r = _raw_rows(
            model, "train", mb, seq_len, 0, tp, cp, 1, dtype, "full", "executed", **kw, occurrence=True, core=core
        )
        if moe and not core:
            routed = {x[0] for x in _expert_rows(model, mb, seq_len, tp, cp, 1, dtype, sequence_parallel, acc, kn)}
            r = [[x for x in seg if x[0] not in routed] for seg in r]
        return r

    # the attention cores once per group of shapes that share their row set (cp = 1; any cp > 1, as a ring), the
    # other operators once over all the shapes (their rows have the same structure at every cp), interleaved in
    # the order of each shape's rows (each shape's sums below add its rows in that order)
    tp_split = sub_cols[1] > 1 if by_tp else np.zeros(len(subs), dtype=bool)
    cores = [(rows(owners, True, ring), owners) for (ring, _), owners in _split_groups(sub_cols[2] > 1, tp_split)]
    others = [(rows(owners, False), owners) for _, owners in _split_groups(np.zeros(len(subs), dtype=bool), tp_split)]
    shared = []
    for i in range(len(others[0][0]) if others else 0):  # no shapes: no rows
        shared += [(seg[i], owners, 1.0) for seg, owners in (others if i % 2 == 0 else cores) if seg[i]]

    modules = ("core_attn",) if stack is None else stack.recompute_modules
    timed: list | None = None if ring_kernels is None else []
    per_sub = _grouped(shared, len(sub), acc, dtype, modules, ch, timed=timed)  # [part, group, sub-shape]
    if timed and ring_kernels is not None:
        # the attention operator the ring's kernels are read from (hnplan.compute.layer_ops.attention_op): an
        # MoE model's MoE layer, else the dense layer
        scope = "moe-layer" if model.moe is not None else "dense-layer"
        ring_kernels.update(_ring_step_times(*timed[0], subs, scope))
    # every (part, group) column gathered to the shapes at once
    table = per_sub[:, :, sub_of] + 0.0
    if moe:  # the MoE layer's routed experts added (a model without MoE layers has none: its moe columns are 0)
        _add_routed(table, model, shp, seq_len, dtype, sequence_parallel, acc, kn, by_tp, modules, ch, stack)
    names = [f"{part}_{g}" for part in PARTS.values() for g in GROUPS + HOST_GROUPS]
    return names, np.ascontiguousarray(table.reshape(len(names), len(shp)).T)


def _add_routed(table, model, shp, seq_len, dtype, sequence_parallel, acc, kn, by_tp, modules, ch, stack) -> None:
    """Add to the MoE layer's columns of ``table`` (``[part, group, shape]``, :func:`part_time_table`) the times of
    its routed experts and, in every pass that runs them, the router and dispatcher-preprocess kernels the rows do
    not list (:func:`hnplan.compute.host.router_host_s`)."""

    # the routed experts' rows depend on the shape through the tokens of an expert-TP group, etp and ep: once each
    def routed(mb, tp, cp, ep, etp):
        return (mb * seq_len / cp if etp == tp else mb * seq_len / cp * etp / tp), etp, ep

    routed_key = {routed(*s): s for s in shp}
    routed_index = {k: i for i, k in enumerate(routed_key)}
    routed_of = np.array([routed_index[routed(*s)] for s in shp], dtype=np.int64)
    experts = []
    keys = list(routed_key)
    none = np.zeros(len(keys), dtype=bool)
    for _, owners in _split_groups(none, np.array([k[1] > 1 for k in keys], dtype=bool) if by_tp else none):
        tokens = np.array([keys[i][0] for i in owners])
        etp, ep = (np.array([keys[i][j] for i in owners], dtype=np.int64) for j in (1, 2))
        r = _expert_rows(model, tokens, 1, etp, 1, ep, dtype, sequence_parallel, acc, kn)
        experts.append((r, owners, model.moe.experts / ep))  # the expert rows' host time: local experts
    streams = expert_streams(stack)  # the routed experts' GEMMs as the stack launches them
    per_routed = _grouped(experts, len(routed_key), acc, dtype, modules, ch, streams)  # [part, group, routed key]
    i_moe = list(PARTS.values()).index("moe")
    table[i_moe] += per_routed[i_moe][:, routed_of]
    extra = router_host_s(ch)
    for g in ("host_fwd", "host_bwd", "host_rc_full"):
        table[i_moe, (GROUPS + HOST_GROUPS).index(g)] += extra


def _split_groups(split: np.ndarray, tp_split: np.ndarray) -> list:
    """Indices of keys grouped by ``split`` and ``tp_split`` (boolean arrays over the keys: e.g. whether cp > 1,
    and whether tp > 1 where the rows of tp = 1 and tp > 1 differ): the shapes whose operator rows share one row
    set, ``[((split, tp_split), int array)]`` in the order of each group's first key."""
    code = 2 * split.astype(np.int64) + tp_split
    firsts = np.sort(np.unique(code, return_index=True)[1]).tolist()
    return [((bool(split[f]), bool(tp_split[f])), np.flatnonzero(code == code[f])) for f in firsts]


def _check_shapes(model: Model, shapes: list, seq_len: int, dtype: str, attention: str) -> None:
    """:func:`hnplan.compute.operators._check` of every ``(micro-batch, tp, cp, ep, etp)`` shape: the choices
    once, the degrees of all shapes at once (the first shape that breaks a rule raises its error)."""
    if not shapes:
        return
    mb, tp, cp, ep, etp = (np.array(x) for x in zip(*shapes))
    ok = np.minimum.reduce([mb, tp, cp, ep, etp]) >= 1
    ok &= np.logical_and.reduce(np.broadcast_arrays(*split_rules(model, tp, 1, ep, training=False).values()))
    broken = not ok.all()
    first = shapes[int(np.argmin(ok))] if broken else shapes[0]
    # the split rules of every shape are checked above: again only for the shape that breaks one (its message)
    _check(
        model,
        "train",
        first[0],
        seq_len,
        0,
        first[1],
        first[2],
        first[3],
        dtype,
        "full",
        "executed",
        attention,
        split=broken,
    )


def _expert_rows(model, mb, seq_len, tp, cp, ep, dtype, sequence_parallel, acc, kn) -> list:
    """Raw training rows of the routed experts of one MoE layer (the operators of
    :func:`hnplan.compute.layer_ops._expert_mlp` with their fp8 quantisation rows)."""
    expand = _expander("train", "full", "executed", tp, dtype, sequence_parallel, acc, kn)
    tokens = mb * seq_len / cp  # tokens of a micro-batch on one CP rank, as the layer's other operators
    ops = _expert_mlp(model, "moe-layer", tokens, tp, ep, units.dtype_bytes(dtype), kn)
    return [row for op in ops for row in expand(op, 1)]


def _block_columns(blocks) -> tuple[dict, np.ndarray]:
    """The columns of :func:`hnplan.compute.operator_rows._columns` and the owner of each row for blocks
    ``[(rows, owners, local_experts)]``: each block's rows hold numbers or arrays over its ``owners``
    (shapes), flattened row by row (a shape's rows stay in their order)."""
    every = [r for rows, *_ in blocks for r in rows]
    labels = list(zip(*every))[:4] if every else [()] * 4
    reps = np.repeat([len(own) for _, own, _ in blocks], [len(rows) for rows, *_ in blocks])
    cols: dict = {}
    for f, values in zip(ROW_FIELDS[:4], labels):
        codes, index = _labels(values)
        cols[f] = (np.repeat(codes, reps), index)
    width = len(ROW_FIELDS) - 4
    ndarray = np.ndarray
    # [field, row x owner]: each block's rows field by field (a field's rows, each over its owners, side by side)
    nums = np.empty((width, int(np.dot([len(rows) for rows, *_ in blocks], [len(own) for _, own, _ in blocks]))))
    at = 0
    for rows, own, _ in blocks:
        n = len(own)
        # field by field, row by row: a number or an array over the owners
        values = [v for field in list(zip(*rows))[4:] for v in field]
        # the numbers that are arrays over the owners (as _wide), the rest broadcast over them
        wide = [i for i, v in enumerate(values) if isinstance(v, ndarray) and v.ndim > 0]
        a = np.empty((len(values), n))
        if wide:
            narrow = np.ones(len(values), dtype=bool)
            narrow[wide] = False
            a[wide] = np.concatenate([values[i] for i in wide]).reshape(-1, n)
            a[narrow] = np.array([v for v, keep in zip(values, narrow.tolist()) if keep], dtype=float)[:, None]
        else:
            a[:] = np.array(values, dtype=float)[:, None]
        nums[:, at : at + len(rows) * n] = a.reshape(width, -1)
        at += len(rows) * n
    cols.update(zip(ROW_FIELDS[4:], nums))
    owner = [np.tile(own, len(rows)) for rows, own, _ in blocks if rows]
    return cols, (np.concatenate(owner) if owner else np.zeros(0, dtype=np.int64))


def _grouped(
    blocks, n: int, acc: Accelerator, dtype: str, modules=("core_attn",), ch=None, streams=None, timed=None
) -> np.ndarray:
    """Times of raw rows summed per owner (``0..n-1``), for each part and group: the array ``[part (PARTS),
    group (GROUPS then HOST_GROUPS), owner]`` [s];
    ``blocks``: ``[(rows, owners, local_experts)]`` as :func:`_block_columns`; ``modules``: what selective
    recomputation re-runs (:data:`MODULE_OPS`); ``ch``: the stack's choices, whose host time of each row
    (:func:`hnplan.compute.host.row_host_s`) is summed into :data:`HOST_GROUPS` (0 without); ``streams``: the
    routed experts' GEMMs one per expert on that many streams (:func:`hnplan.compute.operator_rows.expert_streams`);
    ``timed`` (a list, optional): ``(columns, time of one kernel [s], owner)`` of the rows appended to it."""
    if not any(b[0] for b in blocks):
        return np.zeros((len(PARTS), len(GROUPS + HOST_GROUPS), n))
    cols, owner = _block_columns(blocks)
    _, _, t, _ = _times(None, acc, dtype, cols, streams)
    if timed is not None:
        timed.append((cols, t, owner))
    # the routed experts' fp8 splits in Transformer Engine's fused multi-tensor cast-transpose (host.py)
    multi = (
        ch is not None
        and ch.fp8_recipe == "delayed"
        and ch.fp8_cast_transpose_fusion
        and needs_transpose(acc, "delayed")
    )
    host = np.zeros(len(t)) if ch is None else _host_s(blocks, cols, ch, multi)
    # a row's kernel runs ``count`` times in one occurrence of its part (a ring's off-diagonal steps)
    t, host = t * cols["count"], host * cols["count"]
    name, scope, kind, phase = (cols[f] for f in ("name", "scope", "kind", "phase"))
    rc, attn = _label_is(phase, "recompute"), _label_is(kind, *ATTENTION_KINDS)
    routed = _label_is(name, *ROUTED_OPS)
    bwd = _label_is(phase, "bwd", "bwd-data", "bwd-weight")
    fwd = _label_is(phase, "fwd")
    prefixes = tuple(p for m in modules for p in MODULE_OPS[m])
    rerun = _label_is(name, *(v for v in name[1] if prefixes and str(v).startswith(prefixes)))
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
        "attn_bwd": attn & bwd & ~rc,
    }
    # one sum per group over (part, owner) bins; rows of scopes outside PARTS fall in a last bin
    part_of = np.array([list(PARTS).index(sc) if sc in PARTS else len(PARTS) for sc in scope[1]], dtype=np.int64)
    bins = part_of.take(scope[0]) * n + np.asarray(owner, dtype=np.int64)
    groups = GROUPS + HOST_GROUPS
    out = np.empty((len(PARTS), len(groups), n))
    sel_bins: dict = {}  # a host group's rows are those of its GPU group: their bins selected once
    for i, g in enumerate(groups):
        key = g.removeprefix("host_")
        sel = masks[key]
        if key not in sel_bins:
            sel_bins[key] = bins[sel]
        w = (t if i < len(GROUPS) else host)[sel]  # host groups: the host time
        out[:, i] = np.bincount(sel_bins[key], weights=w, minlength=(len(PARTS) + 1) * n).reshape(-1, n)[: len(PARTS)]
    return out


#: the kernels of a context-parallel ring's steps, ``(row name, phase)``, in the order
#: :func:`hnplan.compute.attention.ring_pair_times_s` returns their times
RING_KERNELS = (
    ("attention_cp_diagonal", "fwd"),
    ("attention_cp_step", "fwd"),
    ("attention_cp_diagonal", "bwd"),
    ("attention_cp_step", "bwd"),
)


def _ring_step_times(cols: dict, t: np.ndarray, owner: np.ndarray, keys: list, scope: str) -> dict:
    """``{keys[owner]: (diagonal fwd, off-diagonal fwd, diagonal bwd, off-diagonal bwd)}`` [s]: the time of one
    kernel of each of the ring's steps (:data:`RING_KERNELS`) in ``scope``'s rows of :func:`_grouped` (``cols``,
    ``t`` and ``owner`` as it times them), for each owner with exactly one row of each. A ring's rows are those of
    :func:`hnplan.compute.attention.attention_rows` over :func:`hnplan.compute.context_parallel.ring_step_pair` of
    the operator in the chip's slower step shape (:func:`hnplan.compute.attention.slower_ring_step`), timed as
    ``max(attention law, bytes / HBM bandwidth) + kernel overhead`` (:func:`hnplan.compute.operator_rows._times`;
    an attention row has no memory-kernel class): element by element the numbers of
    :func:`hnplan.compute.attention.ring_pair_times_s` (tested)."""
    name, sc, phase, kind = cols["name"], cols["scope"], cols["phase"], cols["kind"]
    rows = np.flatnonzero(_label_is(sc, scope) & _label_is(kind, "attention"))
    # the name and phase codes of those rows only (a few hundred of the thousands), compared code by code
    names, phases = name[0].take(rows), phase[0].take(rows)
    per = []
    for nm, ph in RING_KERNELS:
        i, j = name[1].get(nm), phase[1].get(ph)
        at = rows[(names == i) & (phases == j)] if i is not None and j is not None else rows[:0]
        own = owner[at].tolist()
        if len(set(own)) != len(own):  # not one kernel of the step per owner: leave the ring to its own timing
            return {}
        per.append(dict(zip(own, t[at].tolist())))
    both = set(per[0]).intersection(*per[1:])
    return {keys[o]: (per[0][o], per[1][o], per[2][o], per[3][o]) for o in sorted(both)}


def _wide(x) -> bool:
    """Whether ``x`` is an array over shapes (not a number or a 0-d array): ``np.ndim(x) > 0`` for the
    numbers and arrays of the rows, without its per-call overhead."""
    return isinstance(x, np.ndarray) and x.ndim > 0


_ZEROS_7 = (0.0,) * 7  # a host-time row's counts (row_host_s reads its labels and groups only)


def _host_s(blocks, cols: dict, ch: StackChoices, multi_cast_transpose: bool = False) -> np.ndarray:
    """:func:`hnplan.compute.host.row_host_s` of every row of :func:`_block_columns` (each row over its block's
    owners, row by row): once per distinct (name, scope, kind, groups of a GEMM or the local experts of another
    row), a few dozen; a row whose number is the same for all its owners is repeated over them."""
    # each row's key (name, scope, kind, groups or local experts, local experts), or a list of keys over its owners
    keys: list = []
    reps = []
    for rows, own, le in blocks:
        n = len(own)
        le_wide = _wide(le)
        for r in rows:
            per = r[10] if r[2] == "gemm" else le  # what the host time of the row depends on besides its labels
            if not (le_wide or _wide(per)):
                keys.append((r[0], r[1], r[2], float(per), float(le)))
            else:  # groups or local experts over the owners
                p, lo = (np.broadcast_to(np.asarray(x, dtype=float), (n,)).tolist() for x in (per, le))
                keys.append([(r[0], r[1], r[2], a, b) for a, b in zip(p, lo)])
            reps.append(n)
    # the distinct keys timed in one call per number of local experts (row_host_s times each row alone)
    by_local: dict = {}
    for key in dict.fromkeys(k for e in keys for k in (e if isinstance(e, list) else (e,))):
        by_local.setdefault(key[4], []).append(key)
    memo: dict = {}
    for local, ks in by_local.items():
        rows = [(k[0], k[1], k[2], *_ZEROS_7, k[3]) for k in ks]
        memo.update(zip(ks, row_host_s(rows, ch, local, multi_cast_transpose=multi_cast_transpose).tolist()))
    values = [memo[e] if not isinstance(e, list) else np.array([memo[k] for k in e]) for e in keys]
    if all(isinstance(v, float) for v in values):
        return np.repeat(np.array(values, dtype=float), reps)
    return np.concatenate([np.full(k, v) if isinstance(v, float) else v for v, k in zip(values, reps)])
