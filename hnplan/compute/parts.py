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

This module holds the planner's entry points and the row sets they build (the shape groups, the routed experts, the
shapes' checks) and :data:`KERNEL_CHOICES`; the table's columns (:data:`~hnplan.compute.part_sums.PARTS`,
:data:`~hnplan.compute.part_sums.GROUPS`) and the timing and summing of the rows into them are in
:mod:`hnplan.compute.part_sums`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute._op import ACT_BYTES
from hnplan.compute.fp8_recipes import StepKernels, needs_transpose
from hnplan.compute.host import router_host_s
from hnplan.compute.layer_ops import _expert_mlp
from hnplan.compute.layout import split_rules
from hnplan.compute.operator_rows import _check, _expander, _raw_rows, expert_streams
from hnplan.compute.part_sums import GROUPS, HOST_GROUPS, PARTS, _grouped, _ring_step_times

if TYPE_CHECKING:
    import pandas as pd

#: the fields of the stack's choices (:class:`~hnplan.catalog.schemas.StackChoices`) that :func:`part_time_table`
#: reads, itself or through the kernel and host models of this package (every field named in ``hnplan/compute``:
#: tests/test_training_content_memo.py): the others (communication, memory, schedule, optimizer) leave its numbers as
#: they are, so a memo of its tables (:func:`hnplan.planning.training.stage_compute.part_times`) keys on these alone
KERNEL_CHOICES = (
    "act_kernel",
    "amax_passes",
    "attention",
    "autocast_fp32_params",
    "autograd_grad_sums",
    "cp_algorithm",
    "cuda_graph_scope",
    "ep_dispatcher",
    "expert_bias_kernel",
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
    "fused_grouped_mlp",
    "gqa_kv_copy",
    "kernel_launch_us",
    "moe_host_syncs_per_layer",
    "moe_host_us_per_kernel",
    "norm_cudnn",
    "norm_kernel",
    "nvfp4_rht",
    "recompute_modules",
    "rope_attention_factor_fused",
    "rope_kernel",
    "sequence_parallel",
    "tp_comm",
    "tp_overlap_cfg",
)


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
        :data:`~hnplan.compute.part_sums.ROUTED_OPS`: the work that grows with the tokens routed to a rank) and
        ``<part>_wgrad`` (the weight-gradient GEMMs, part of ``_bwd``) and ``<part>_attn_bwd`` (the attention core's
        backward, part of ``_bwd`` and ``_attn``) [s]; ``<part>_rc_sel`` re-runs the stack's ``recompute_modules``
        (:data:`~hnplan.compute.part_sums.MODULE_OPS`; default the attention core) and ``<part>_rc_attn`` is
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
    each ``(microbatch_size, tp, cp)`` whose attention runs as a ring of fused kernels
    (:func:`~hnplan.compute.part_sums._ring_step_times`): the numbers
    :func:`hnplan.compute.attention.ring_pair_times_s` gives for that shape's attention operator, read from the rows
    timed here (the same kernels, rows and law), so that a planner that also needs the ring's steps one by one
    (:func:`hnplan.planning.training.collectives.cp_comm_per_layer`) does not time them again.

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
