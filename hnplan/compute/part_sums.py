"""The columns of the part-time table and the sums that fill them: operator rows timed and summed per part and group.

:func:`hnplan.compute.parts.part_time_table` hands this module blocks of raw training rows (those of
:mod:`hnplan.compute.operator_rows`, each number a scalar or an array over the shapes that own the block); they are
laid out as the columns of one vectorised roofline call (:func:`_block_columns`), timed once, and summed per owner
into the table's ``[part, group]`` columns (:func:`_grouped`): :data:`PARTS` by the rows' scope, :data:`GROUPS` by
their phase, kind and name (the routed experts, :data:`ROUTED_OPS`; what each recompute module re-runs,
:data:`MODULE_OPS`) and :data:`HOST_GROUPS` with the host time launching the same rows (:func:`_host_s`,
:func:`hnplan.compute.host.row_host_s`). The kernel times of a context-parallel ring's steps are read back from
the same timed rows (:func:`_ring_step_times`). :mod:`hnplan.compute.operator_grid` lays out its rows through
:func:`_block_columns` too.
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Accelerator, StackChoices
from hnplan.compute.attention import ATTENTION_KINDS
from hnplan.compute.fp8_recipes import needs_transpose
from hnplan.compute.host import row_host_s
from hnplan.compute.operator_rows import ROW_FIELDS, _label_is, _labels, _times

PARTS = {"dense-layer": "dense", "moe-layer": "moe", "embedding": "emb", "head": "head"}
GROUPS = ("fwd", "bwd", "rc_full", "rc_sel", "rc_attn", "attn", "routed_fwd", "routed_bwd", "routed_rc", "wgrad")
GROUPS += ("attn_bwd",)  # the attention core's backward alone: a backward's last GPU work (host.stage_times)
HOST_GROUPS = ("host_fwd", "host_bwd", "host_rc_full", "host_rc_sel")
ROUTED_OPS = (
    "moe_permute",
    "expert_up",
    "expert_act",
    "expert_act_eager",
    "expert_act_clamp_eager",
    "expert_down",
    "expert_bias_eager",
)  # what scales with the tokens a rank gets
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
