"""Compute time of one micro-batch on each pipeline stage of every candidate plan, over numpy arrays.

The operator-level part times of a layer, the embedding and the head (:func:`hnplan.compute.parts.part_time_table`)
depend on a few distinct ``(micro-batch, tp, cp, ep)`` shapes; they are evaluated once per shape (memoised by the
numbers they depend on, :func:`content_memo`, :func:`part_times`) and combined with the layers each stage holds (:func:`stage_kinds`),
the recomputation mode, the busiest expert-parallel rank's load and the host model
(:mod:`hnplan.compute.host`) into :func:`compute_per_microbatch`, the ``t_mb`` compute term of the step model
of :mod:`hnplan.planning.training.components` (Narayanan et al. SC21, arXiv:2104.04473, Sec. 3.3).
The names are re-exported by :mod:`hnplan.planning.training.components`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.schemas.userbuffers import frozen
from hnplan.comm.messages import random_routing_peak
from hnplan.compute import ACT_BYTES
from hnplan.compute.host import stage_times, sync_s
from hnplan.compute.layout import stage_layers
from hnplan.compute.parts import KERNEL_CHOICES, part_time_table
from hnplan.planning.training.partial import block_mix
from hnplan.vectorise import Columns, column, factorize, gather

if TYPE_CHECKING:
    import pandas as pd

    from hnplan.planning.training.components import Job


def _col(df, name):
    return column(df, name)


#: at most this many keys in :func:`content_memo` (a few per model, accelerator, sequence and stack in use)
CONTENT_MEMO_KEYS = 256
_CONTENT_MEMO: OrderedDict = OrderedDict()
_CONTENT_LOCK = threading.Lock()  # a sweep's threads may search at once


def content_memo(key: tuple) -> dict:
    """The dict of results stored under ``key``, a tuple naming what they are and everything they depend on (the
    model's and accelerator's fields as JSON, the sequence, the dtype, the stack's choices), shared by every job
    of the process: the operator-level part times (:func:`part_times`), the context-parallel ring's kernel times,
    the per-shape activation bytes and the collective tuner's times by group placement. Another job, a new
    catalog of the same data, or another system with the same accelerator reuses what an earlier search
    computed; the first search in a process computes it (:func:`clear_content_memo` forgets it all). Holds the
    :data:`CONTENT_MEMO_KEYS` keys used last."""
    with _CONTENT_LOCK:
        d = _CONTENT_MEMO.get(key)
        if d is None:
            d = _CONTENT_MEMO[key] = {}
            while len(_CONTENT_MEMO) > CONTENT_MEMO_KEYS:
                _CONTENT_MEMO.popitem(last=False)
        else:
            _CONTENT_MEMO.move_to_end(key)
        return d


def clear_content_memo() -> None:
    """Forget every :func:`content_memo` entry (the next search computes everything afresh, as a process's first)."""
    with _CONTENT_LOCK:
        _CONTENT_MEMO.clear()


def recompute_is(df: pd.DataFrame | Columns, mode: str) -> np.ndarray:
    """Which plans of a table recompute with ``mode`` [bool array]: from the codes of a categorical
    ``recompute`` column (:func:`hnplan.planning.training.evaluate_plans` keeps one), else by value."""
    if isinstance(df, Columns):
        codes, values = df.codes("recompute")
        hit = np.flatnonzero(values == mode)
        return codes == hit[0] if len(hit) else np.zeros(len(codes), dtype=bool)
    rc = df["recompute"]
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    if isinstance(rc.dtype, pd.CategoricalDtype):
        cats = list(rc.cat.categories)
        codes = rc.cat.codes.to_numpy()
        return codes == cats.index(mode) if mode in cats else np.zeros(len(codes), dtype=bool)
    return rc.to_numpy() == mode


# ----------------------------------------------------------------------------------------------
# compute
# ----------------------------------------------------------------------------------------------


def stage_kinds(job: Job, pp):
    """Layers of the first, a middle and the last pipeline stage, split by kind [arrays of counts].

    Stages hold ``ceil(L / pp)`` consecutive layers and the last one the rest
    (:func:`hnplan.compute.layout.stage_layers`); an MoE model's leading dense layers sit on the
    first stage. With the stack's ``pipeline_balanced_ends`` (``pp > 1``) the input embedding and the loss
    each take one layer's place in the split, as Megatron-Core builds them
    (``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``:
    ``get_num_layers_to_build`` in ``megatron/core/transformer/transformer_block.py`` splits ``L + 2``
    places and builds one layer fewer in the first model chunk of the first stage and the last chunk of
    the last): ``ceil((L + 2) / pp)`` layers a middle stage, one fewer on the first and the rest on the
    last (Llama 3.1 405B on 16 stages: 7, 8, 7), the split the memory model weighs
    (:func:`hnplan.memory.states.end_stage_layer_range`). Returns ``{stage: (dense layers, moe layers)}``.
    """
    L = job.model.layers
    first_dense = L if job.model.moe is None else job.model.moe.first_dense_layers
    pp = np.asarray(pp)
    n_first, n, last = _stage_split(job, pp)
    d_first = np.minimum(n_first, first_dense)
    mid_dense = np.clip(first_dense - n_first, 0, n)  # the second stage's dense layers (worst middle stage)
    d_last = np.where(pp == 1, first_dense, np.clip(first_dense - (L - last), 0, last))
    return {
        "first": (d_first, n_first - d_first),
        "middle": (mid_dense, n - mid_dense),
        "last": (d_last, last - d_last),
    }


def _stage_split(job: Job, pp: np.ndarray) -> tuple:
    """Layers of the first, a middle and the last stage of :func:`stage_kinds`'s split [arrays of counts]."""
    L = job.model.layers
    split = stage_layers(job.model, pp)
    n_first, n, last = split.per_stage, split.per_stage, np.maximum(split.last, 0)
    if job.choices.pipeline_balanced_ends:
        multi = pp > 1
        per = -(-(L + 2) // np.maximum(pp, 1))  # places a stage: L layers + the embedding + the loss
        n_first = np.where(multi, np.minimum(per - 1, L), n_first)
        n = np.where(multi, per, n)
        last = np.where(multi, np.maximum(L - n_first - np.maximum(pp - 2, 0) * per, 0), last)
    return n_first, n, last


def bf16_end_layers_held(job: Job, pp) -> dict:
    """The layers an fp8 (or fp4) stack keeps in bf16 (``fp8_bf16_end_layers`` = ``n``: the model's first ``n``
    and last ``n`` layers, Transformer Engine's ``first_last_layers_bf16``) that the first, a middle and the last
    pipeline stage hold, on :func:`stage_kinds`'s split [arrays of counts].

    Stage ``k`` holds a run of consecutive layers; its bf16 layers are the overlaps of that run with
    ``[0, n)`` and ``[L - n, L)`` (``2 n <= L``, checked where the job is made). With ``pp = 1`` the one stage
    (``first``) holds both ends and ``last`` none; the middle stage is the middle one holding the most of them
    (the second stage, into which a first end longer than the first stage runs, or the last but one, into which
    the last end runs; both the same stage at ``pp = 3``), none below ``pp = 3``. Returns
    ``{stage: (layers of the first end, layers of the last end)}``; all zero in bf16 or with ``n = 0``.

    Examples
    --------
    Llama 3.1 8B (32 layers) on 4 stages of 8 with ``n = 10``: the first stage holds 8 of the first end, the
    second 2, the third 2 of the last end and the last stage 8; the middle stage reported is the second
    (2 = 2, the earlier on a tie).
    """
    n = job.choices.fp8_bf16_end_layers if units.dtype_bytes(job.dtype) < ACT_BYTES else 0
    pp = np.asarray(pp)
    zero = np.zeros(pp.shape, dtype=np.int64)
    if not n:
        return {"first": (zero, zero), "middle": (zero, zero), "last": (zero, zero)}
    L = job.model.layers
    n_first, n_mid, last = _stage_split(job, pp)
    one = pp == 1
    n_first = np.where(one, L, n_first)  # the one stage holds every layer

    def held(lo, hi):  # (first-end, last-end) layers of the run [lo, hi)
        first_end = np.maximum(np.minimum(hi, n) - np.maximum(lo, 0), 0)
        last_end = np.maximum(np.minimum(hi, L) - np.maximum(lo, L - n), 0)
        return first_end, last_end

    second = held(n_first, n_first + n_mid)
    lo = n_first + np.maximum(pp - 3, 0) * n_mid
    but_last = held(lo, lo + n_mid)
    take_second = second[0] + second[1] >= but_last[0] + but_last[1]
    mid = tuple(np.where(pp > 2, np.where(take_second, a, b), 0) for a, b in zip(second, but_last))
    end = held(L - last, np.full(pp.shape, L))
    return {
        "first": held(zero, n_first),
        "middle": mid,
        "last": tuple(np.where(one, 0, x) for x in end),
    }


SHAPE_KEYS = ["microbatch_size", "tp", "cp", "ep", "etp"]  # what the operator-level part times depend on


def with_etp(df):
    """``df`` with an ``etp`` column (expert tensor parallelism): as it is where it has one, else ``etp = tp``,
    Megatron-Core's default (a table built before the column existed, or by hand)."""
    if "etp" in df:
        return df
    if isinstance(df, Columns):
        return Columns({**{k: df[k] for k in df}, "etp": df["tp"]})
    return df.assign(etp=np.asarray(df["tp"]))


def part_times(job: Job, shapes: pd.DataFrame | Columns, dtype: str) -> Columns:
    """:func:`hnplan.compute.parts.training_part_times` of the job's model, accelerator, sequence and
    stack choices for each row of ``shapes`` (columns :data:`SHAPE_KEYS`), memoised per shape under the
    numbers they depend on (:func:`content_memo`; not the system's network, and of the stack only the choices
    the table reads, :data:`hnplan.compute.parts.KERNEL_CHOICES`): a repeated search (sizing loops, sweeps over
    designs with the same accelerator, a new catalog of the same data, published runs on stacks that differ in
    their communication alone) times only the shapes it has not seen. Each shape's row is
    independent of the others, so the result equals one call over ``shapes``.

    Returns
    -------
    Columns
        Aligned with ``shapes``: the columns of :func:`~hnplan.compute.parts.training_part_times` [s].
    """
    ch = job.choices
    if ("part_times_key", dtype) not in job.memo:
        # the stack by the choices the table reads (KERNEL_CHOICES) and whether the ring's kernels come with it: two
        # stacks that differ in communication or memory choices alone share their tables
        read = tuple(frozen(v) if type(v) in (dict, list) else v for v in map(ch.__getattribute__, KERNEL_CHOICES))
        job.memo["part_times_key", dtype] = (
            "training_part_times",
            job.model_json,
            job.kernel_acc_json,
            job.seq_len,
            dtype,
            read,
            ch.cp_comm,
        )
    cache = content_memo(job.memo["part_times_key", dtype])
    cols = [column(shapes, k).tolist() for k in SHAPE_KEYS]
    wanted = list(zip(*cols))
    missing = list(dict.fromkeys(s for s in wanted if s not in cache))
    if missing:
        # the ring's step kernels come with the rows that time them, for the exposed CP exchange to read
        ring: dict | None = {} if ch.cp_comm and ch.cp_algorithm != "allgather" else None
        names, new = part_time_table(
            job.model,
            job.kernel_acc,
            [(int(b), int(t), int(c), int(e), int(x)) for b, t, c, e, x in missing],
            job.seq_len,
            dtype,
            ch.attention,
            ch.sequence_parallel,
            ch,
            ring_kernels=ring,
        )
        cache.setdefault("columns", names)
        cache.update(zip(missing, new))
        if ring:
            kernels = ring_kernel_memo(job)
            for key, times in ring.items():
                kernels.setdefault(key, times)
    names = cache.get("columns", [])
    table = np.array([cache[s] for s in wanted]).reshape(len(wanted), len(names))
    return Columns({k: table[:, i] for i, k in enumerate(names)})


def ring_kernel_memo(job: Job) -> dict:
    """The context-parallel ring's step kernel times of the job's model, accelerator and sequence, ``{(micro-batch,
    tp, cp): (diagonal fwd, off-diagonal fwd, diagonal bwd, off-diagonal bwd)}`` [s]
    (:func:`hnplan.compute.attention.ring_pair_times_s` of the layer's attention operator), shared by every job
    of the process (:func:`content_memo`): :func:`part_times` adds those of the shapes it times (read from the
    same rows), :func:`hnplan.planning.training.collectives.cp_comm_per_layer` times the rest."""
    if "cp_ring_key" not in job.memo:  # the entries serialised once per job
        job.memo["cp_ring_key"] = ("cp_ring_kernels", job.model_json, job.kernel_acc_json, job.seq_len)
    return content_memo(job.memo["cp_ring_key"])


def busiest_rank_load(job: Job, df: pd.DataFrame) -> np.ndarray:
    """Routed token copies of the busiest expert-parallel rank over the mean, per plan [-]: the stack's
    ``moe_load_imbalance`` (routing that is not random) times the peak random routing leaves with the
    plan's ``T = b s / (cp tp)`` tokens a rank (:func:`hnplan.comm.messages.random_routing_peak`; 1 for a
    dense model or ``ep = 1``)."""
    moe = job.model.moe
    if moe is None:
        return np.ones(len(df))
    tokens = _col(df, "microbatch_size") * job.seq_len / (_col(df, "cp") * _col(df, "tp"))
    peak = random_routing_peak(tokens, moe.active_experts, moe.experts, _col(df, "ep"))
    return job.choices.moe_load_imbalance * peak


def compute_per_microbatch(job: Job, df: pd.DataFrame, per_stage: bool = False):
    """Compute time of one micro-batch on the slowest pipeline stage, with its parts [s].

    Operator-level times per layer, embedding and head (:func:`hnplan.compute.parts.training_part_times`,
    once per distinct ``(micro-batch, tp, cp, ep, etp)``) times the layers of each stage
    (:func:`stage_kinds`); recomputation adds the re-run forward (``full``) or attention core
    (``selective``).

    Returns a frame with ``t_compute_mb`` (forward + backward + recomputation), ``t_fwd_mb``,
    ``t_bwd_mb``, ``attn_per_layer`` (attention core forward + backward + recomputed, one layer) and
    ``layers`` / ``moe_layers`` (of that stage). With ``per_stage``, the array
    ``[stage (first, middle, last), quantity (STAGE_QUANTITIES), candidate]`` instead, for a caller that
    adds each stage's communication before picking the slowest (an MoE model's last stage holds fewer
    MoE layers and their all-to-alls than its compute alone suggests). A model's multi-token-prediction
    modules (``mtp_modules``) sit on the last stage: one more layer and one more pass through the
    output head and loss each. The routed-expert work of an MoE layer (:data:`hnplan.compute.part_sums.ROUTED_OPS`)
    grows by :func:`busiest_rank_load`: the busiest EP rank sets the pace.
    Every quantity is evaluated once per distinct ``(micro-batch, tp, cp, ep, recompute, pp)`` (and
    ``virtual_stages`` where the stack recomputes only some layers: :mod:`.partial`).
    """
    codes, _, table = stage_table(job, df)
    stack = table.take(codes, axis=2)  # [stage, quantity, candidate]
    if per_stage:
        return stack
    slowest = np.argmax(stack[:, 0, :], axis=0)
    pick = stack[slowest, :, np.arange(stack.shape[2])]  # [candidate, quantity]
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    return pd.DataFrame(pick, columns=list(STAGE_QUANTITIES))


def stage_table(job: Job, df: pd.DataFrame | Columns) -> tuple[np.ndarray, pd.DataFrame | Columns, np.ndarray]:
    """:func:`compute_per_microbatch`'s per-stage quantities once per distinct ``(micro-batch, tp, cp, ep, etp,
    recompute, pp)`` (and ``virtual_stages`` where the stack recomputes only some layers) of ``df`` (without an
    ``etp`` column: ``etp = tp``).

    Returns
    -------
    tuple
        ``(codes, distinct, table)``: row ``i`` of ``df`` is row ``codes[i]`` of the ``distinct`` table
        (a DataFrame or :class:`~hnplan.vectorise.Columns`, as ``df``), and ``table`` the array
        ``[stage (first, middle, last), quantity (STAGE_QUANTITIES), distinct row]``; so
        ``compute_per_microbatch(job, df, per_stage=True)`` is ``table.take(codes, axis=2)``.
    """
    df, keys = with_etp(df), [*SHAPE_KEYS, "recompute", "pp"]
    if job.choices.recompute_num_layers is not None:  # its share is per chunk
        keys.append("virtual_stages")
    elif _p2p_matters(job) and "virtual_stages" in df:  # the P2P syncs: pipelines without interleaving
        flag = (np.asarray(_col(df, "pp")) > 1) & (np.asarray(_col(df, "virtual_stages")) <= 1)
        df = _with_column(df, "p2p_sync", flag, keys)
        keys.append("p2p_sync")
    codes, uniq = factorize(df, keys)
    return codes, uniq, _stage_table(job, uniq)


def _p2p_terms(nd, nm, synced_rc, dense, moe, h_dense, h_moe):
    """What a stage's P2P syncs expose: the GPU time its backward runs after its host work (the attention core
    backward of its first layer, launched last) and the recomputation outside the synced stretches, GPU and host,
    which runs inside the backward layer by layer (``synced_rc``: an MoE layer's full recomputation, already in its
    synced forward stretches) [s]."""
    tail = np.where(nd > 0, dense[4], moe[4])  # an MoE model's dense layers come first
    rc = (
        nd * dense[5] + nm * np.where(synced_rc, 0.0, moe[5]),
        nd * h_dense[2] + nm * np.where(synced_rc, 0.0, h_moe[2]),
    )
    return tail, rc


def _p2p_matters(job: Job) -> bool:
    """Whether the pipeline's P2P syncs (stack choice ``pp_p2p_sync``) are timed: for MoE models, whose layers'
    host work can match their GPU work; a dense layer's kernels run far longer than they take to launch, so the
    syncs cost it two idles of ``sync_s`` a micro-batch (about 50 us of a micro-batch of 100 ms or more), left out
    (the search's extra distinct rows would cost it more than they tell)."""
    return job.choices.pp_p2p_sync and job.model.moe is not None


def _with_column(df, name: str, values, keys: list[str]):
    """``df`` (a DataFrame or :class:`~hnplan.vectorise.Columns`) with the boolean column ``name`` added; a
    Columns table finds the codes of ``keys`` on ``df`` first, where the planner's other factorisations of the
    same plans read them (:meth:`~hnplan.vectorise.Columns.with_flag`)."""
    if isinstance(df, Columns):
        return df.with_flag(name, values, tuple(keys))
    return df.assign(**{name: values})


def _stage_table(job: Job, df: pd.DataFrame) -> np.ndarray:
    """:func:`compute_per_microbatch`'s ``[stage, quantity, plan]`` array for the plans of ``df``."""
    codes, uniq = factorize(df, SHAPE_KEYS)
    lt = _taken(part_times(job, uniq, job.dtype), codes)
    pp = _col(df, "pp")
    full, selective = recompute_is(df, "full"), recompute_is(df, "selective")
    rerun_attn = full | (selective & ("core_attn" in job.choices.recompute_modules))

    extra = busiest_rank_load(job, df) - 1.0  # the busiest EP rank's surplus of routed tokens

    def part(name, lt=lt, full=full):
        rc = np.where(full, lt(f"{name}_rc_full"), np.where(selective, lt(f"{name}_rc_sel"), 0.0))
        fwd = lt(f"{name}_fwd") + rc
        bwd = lt(f"{name}_bwd")
        if np.any(extra > 0):
            # routed-expert work (GEMMs at their tokens per expert, permutation) grows with the tokens
            fwd = fwd + extra * (lt(f"{name}_routed_fwd") + np.where(full, lt(f"{name}_routed_rc"), 0))
            bwd = bwd + extra * lt(f"{name}_routed_bwd")
        # the attention core runs again when recomputed: the ring exchange can hide behind that too
        attn = lt(f"{name}_attn") + np.where(rerun_attn, lt(f"{name}_rc_attn"), 0.0)
        return fwd, bwd, attn, lt(f"{name}_wgrad"), lt(f"{name}_attn_bwd"), rc

    dense, moe, emb, head = part("dense"), part("moe"), part("emb"), part("head")

    def host(name, lt=lt, full=full):  # host time (fwd with recomputation, bwd) of a part [s], hnplan.compute.host
        rc = np.where(full, lt(f"{name}_host_rc_full"), np.where(selective, lt(f"{name}_host_rc_sel"), 0.0))
        return lt(f"{name}_host_fwd") + rc, lt(f"{name}_host_bwd"), rc

    h_dense, h_moe, h_emb, h_head = host("dense"), host("moe"), host("emb"), host("head")
    # an MoE layer's forward (and its full recomputation) runs between device-host syncs
    syncs = job.choices.moe_host_syncs_per_layer * (1.0 + full)
    synced = float(job.choices.moe_host_syncs_per_layer > 0)  # without syncs the MoE forward joins the rest
    g_sync = synced * (moe[0] - np.where(selective & ~full, lt("moe_rc_sel"), 0.0))
    h_sync = synced * (h_moe[0] - np.where(selective & ~full, lt("moe_host_rc_sel"), 0.0))
    ends = _bf16_end_layers(job, uniq, codes, part, dense, moe)  # (first, last): extra (fwd, bwd) of a bf16 layer
    held_bf16 = bf16_end_layers_held(job, pp)
    mtp = job.model.mtp_modules  # each one more layer and one more output head + loss, on the last stage
    if mtp:
        layer = moe if job.model.moe is not None else dense
        head = tuple(h + (0.0 if i == 2 else mtp * (x + h)) for i, (h, x) in enumerate(zip(head, layer)))
    stages = stage_kinds(job, pp)
    # Megatron-Core's non-interleaved schedule syncs the device after each batched P2P exchange (stack choice)
    if "p2p_sync" in df:
        p2p = np.asarray(_col(df, "p2p_sync"), dtype=bool)
    else:
        vp = np.asarray(_col(df, "virtual_stages")) if "virtual_stages" in df else np.ones_like(pp)
        p2p = _p2p_matters(job) & (pp > 1) & (vp <= 1)
    whole = None  # block recomputation: the layers not recomputed, as without recomputation
    if job.choices.recompute_num_layers is not None and np.any(full):
        no = np.zeros_like(full)
        whole = part("dense", full=no), part("moe", full=no), host("dense", full=no), host("moe", full=no)
    layer_parts = (dense, moe, h_dense, h_moe, g_sync, h_sync, syncs)
    cols = []
    for name, (nd, nm) in stages.items():
        dense, moe, h_dense, h_moe, g_sync, h_sync, syncs = block_mix(
            job.choices, df, nd + nm, full, whole, *layer_parts
        )
        fwd = nd * dense[0] + nm * moe[0]
        bwd = nd * dense[1] + nm * moe[1]
        wgrad = nd * dense[3] + nm * moe[3]
        attn = np.where(nm > 0, moe[2], dense[2])
        hf, hb = nd * h_dense[0] + nm * h_moe[0], nd * h_dense[1] + nm * h_moe[1]
        if name == "first":
            fwd, bwd, wgrad = fwd + emb[0], bwd + emb[1], wgrad + emb[3]
            hf, hb = hf + h_emb[0], hb + h_emb[1]
        if name == "last":
            fwd, bwd, wgrad = fwd + head[0], bwd + head[1], wgrad + head[3]
            hf, hb = hf + h_head[0], hb + h_head[1]
        if name == "first":  # pp = 1: the one stage holds the embedding and the head
            fwd = fwd + np.where(pp == 1, head[0], 0.0)
            bwd = bwd + np.where(pp == 1, head[1], 0.0)
            wgrad = wgrad + np.where(pp == 1, head[3], 0.0)
            hf, hb = hf + np.where(pp == 1, h_head[0], 0.0), hb + np.where(pp == 1, h_head[1], 0.0)
        if name == "middle":  # no middle stage below pp = 3: nothing of it (nor its communication) counts
            fwd, bwd, wgrad, hf, hb = (np.where(pp > 2, x, 0.0) for x in (fwd, bwd, wgrad, hf, hb))
            nd, nm = np.where(pp > 2, nd, 0), np.where(pp > 2, nm, 0)
        nm_sync = nm  # the stage's MoE layers (the multi-token-prediction layers below are left out of the host model)
        if ends is not None:  # the bf16 layers of each end that the stage holds, each at its bf16 time
            (ff, fb), (lf, lb) = ends
            a, b = held_bf16[name]
            fwd, bwd = fwd + a * ff + b * lf, bwd + a * fb + b * lb
        if mtp and name != "middle":  # the multi-token-prediction layers communicate as the others do
            here = mtp * (np.ones_like(pp) if name == "last" else (pp == 1))
            if name == "last":
                here = here * (pp > 1)
            nd, nm = (nd, nm + here) if job.model.moe is not None else (nd + here, nm)
        # the host in the loop: launches slower than kernels, and the GPU idle after each device-host sync; a
        # backward that ends in a P2P sync ends with its first layer's attention core, launched last
        tail, rc = (
            (0.0, (0.0, 0.0)) if not p2p.any() else _p2p_terms(nd, nm, full & bool(synced), dense, moe, h_dense, h_moe)
        )
        fwd, bwd = stage_times(
            fwd, bwd, hf, hb, nm_sync * g_sync, nm_sync * h_sync, nm_sync * syncs, sync_s(job.choices), p2p, tail, rc
        )
        cols.append(np.broadcast_arrays(fwd + bwd, fwd, bwd, attn, nd + nm, nm, wgrad))
    return np.array(cols, dtype=float)  # [stage, quantity, plan]


def _taken(table: Columns, codes: np.ndarray):
    """A column reader of ``table`` broadcast to the candidates (row ``codes[i]`` for candidate ``i``): every column
    gathered at once (:func:`~hnplan.vectorise.gather`, the same values as ``table[col][codes]``), each read by name."""
    names = list(table)
    return dict(zip(names, gather([table[k] for k in names], codes))).__getitem__


STAGE_QUANTITIES = ("t_compute_mb", "t_fwd_mb", "t_bwd_mb", "attn_per_layer", "layers", "moe_layers", "t_wgrad_mb")


def _bf16_end_layers(job: Job, uniq, codes, part, dense, moe):
    """Extra time of the layers an fp8 stack keeps in bf16 at each end of the model
    (``fp8_bf16_end_layers``), one layer of each end: ``((fwd, bwd) at the first end, (fwd, bwd) at the last
    end)`` [s], or None; each stage pays them for the layers it holds (:func:`bf16_end_layers_held`)."""
    n = job.choices.fp8_bf16_end_layers
    if not n or units.dtype_bytes(job.dtype) >= ACT_BYTES:
        return None
    lt16 = _taken(part_times(job, uniq, "bf16"), codes)
    moe_cfg = job.model.moe
    first_kind = "moe" if moe_cfg is not None and moe_cfg.first_dense_layers == 0 else "dense"
    last_kind = "dense" if moe_cfg is None else "moe"
    fp8 = {"dense": dense, "moe": moe}
    out = []
    for kind in (first_kind, last_kind):
        f16, b16 = part(kind, lt16)[:2]
        out.append((f16 - fp8[kind][0], b16 - fp8[kind][1]))
    return tuple(out)
