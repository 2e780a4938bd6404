"""The slowest pipeline stage of each candidate plan: each stage's micro-batch time (its compute plus its
exposed TP, CP, EP and pipeline communication) and the quantities of the stage that sets the pace, for
:func:`hnplan.planning.training.evaluate_plans`."""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.compute import ACT_BYTES
from hnplan.planning.training import collectives as coll
from hnplan.planning.training import components as c
from hnplan.planning.training import moe, partial
from hnplan.planning.training.stage_compute import bf16_end_layers_held, stage_table
from hnplan.vectorise import Columns, gather


def slowest_stage(job: c.Job, plans: Columns, t_pp: np.ndarray, ep_share) -> list[np.ndarray]:
    """Per candidate, the slowest pipeline stage's (largest micro-batch time; the earlier stage on a tie)
    ``t_mb, t_comp, t_tp, t_cp, t_ep, t_fwd_mb, t_bwd_mb, t_wgrad_mb, layers`` [s, layers], and ``t_others``
    [s], the micro-batch times of the other ``pp - 1`` stages summed (the first, ``pp - 2`` times the
    fullest middle one and the last, less the slowest): the pipeline's fill and drain run through each of
    them once a model chunk, so the bubble is ``t_others / v`` (Narayanan et al., arXiv:2104.04473
    Sec. 2.2.2: ``(p - 1)`` model-chunk times where the stages are alike; here each stage's own).

    A stage's micro-batch is its compute plus its exposed TP (with fp8 current scaling's amax
    all-reduces, :func:`hnplan.planning.training.collectives.fp8_amax_per_microbatch`), CP and EP collectives (per layer, each
    times the layers it holds, those of the layers it re-runs included) plus the pipeline transfers
    ``t_pp``. An MoE layer whose experts are whole on each rank (``etp = 1`` with ``tp > 1``, MoE
    parallel folding, arXiv:2504.14960) and that has no shared expert pays only its attention's TP
    collectives: the router and the token dispatcher work on the rank's own sequence-parallel tokens, so
    the MLP's all-gather and reduce-scatter (one of the two per pass) do not run (Megatron-Core's
    ``MoEAlltoAllTokenDispatcher`` gathers over the expert TP group only when ``etp > 1``); a shared expert
    is a TP-split MLP and keeps them. The EP all-to-all hides in the share ``ep_share`` of the passes that
    have a partner pass (:func:`hnplan.planning.training.moe.ep_overlap_share`), its forward half behind the
    partner's backward and its backward half behind the partner's forward
    (:func:`hnplan.planning.training.moe.ep_paired_exposed`). Everything but the EP
    overlap and ``t_pp`` depends only on the rows of
    :func:`hnplan.planning.training.stage_compute.stage_table`, so it is evaluated once per such row
    and gathered (element by element the same numbers as over the candidates).

    Parameters
    ----------
    job : Job
    plans : Columns
        The plan table of :func:`hnplan.planning.training.evaluate_plans` (``n`` candidates).
    t_pp : numpy.ndarray
        Pipeline point-to-point time of one micro-batch, shape ``(n,)`` [s].
    ep_share : tuple of three numpy.ndarray
        Overlapped share of the EP all-to-all on the first, the middle and the last stage (each its own
        pipeline rank's warm-up, :func:`hnplan.planning.training.moe.ep_overlap_share`), shape ``(n,)`` [0-1].

    Returns
    -------
    list of numpy.ndarray
        Ten float arrays of shape ``(n,)``, in the order above.
    """
    ch = job.choices
    codes, uniq, table = stage_table(job, plans)  # [stage, quantity, distinct row]
    # per layer (TP, CP) and per MoE layer (EP); each stage pays them for the layers it holds
    t_tp_layer = coll.tp_comm_per_microbatch(job, uniq, 1)
    n_end = ch.fp8_bf16_end_layers if units.dtype_bytes(job.dtype) < ACT_BYTES else 0
    # the layers an fp8 stack keeps in bf16 gather their inputs in bf16: the extra time of one such layer
    t_tp_end = coll.tp_comm_per_microbatch(job, uniq, 1, quantised=False) - t_tp_layer if n_end else 0.0
    held = bf16_end_layers_held(job, c._col(uniq, "pp"))  # those each stage holds, of either end
    ends = tuple(a + b for a, b in (held[s] for s in ("first", "middle", "last")))
    t_amax_layer = coll.fp8_amax_per_microbatch(job, uniq, 1)  # on the compute stream: never hidden
    t_cp_layer = coll.cp_comm_per_layer(job, uniq)
    full_share = 1.0 - job.model.sliding_layer_share()  # layers whose attention runs over CP
    t_ep_layer = moe.ep_comm_per_microbatch(job, uniq, 1)
    full = c.recompute_is(uniq, "full")
    dense = job.model.moe is None  # no EP traffic: t_ep is 0 on every row
    # an MoE layer whose experts fold (etp 1) has no MLP pair of TP collectives: its bf16 time comes off
    t_tp_folded = np.zeros(len(full))
    if job.model.moe is not None and not job.model.moe.shared_experts and "etp" in uniq:
        folded = (c._col(uniq, "etp") == 1) & (c._col(uniq, "tp") > 1)
        if folded.any():  # one of the layer's TP_COLLECTIVES_PER_PASS pairs, in bf16
            pair = coll.tp_comm_per_microbatch(job, uniq, 1, quantised=False) / coll.TP_COLLECTIVES_PER_PASS
            t_tp_folded = np.where(folded, pair, 0.0)
    per_stage, t_mb = [], []
    for st, n_bf16, share in zip(table, ends, ep_share):
        t_comp, layers, moe_layers = st[0], st[4], st[5]
        again = partial.rerun_scale(ch, uniq, layers, full)  # block recomputation re-runs some layers' collectives
        t_tp = (layers * t_tp_layer + n_bf16 * t_tp_end - moe_layers * t_tp_folded) * again
        if ch.tp_comm:
            t_tp = c.overlapped_comm(t_tp, t_comp, ch.tp_comm_overlap_fraction, c.overlap_slowdown(job, "tp"))
        t_tp = t_tp + layers * t_amax_layer * again
        # exposed per ring step (collectives.cp_comm_per_layer), in the full-attention layers: a sliding-window layer's
        # attention runs on the rank's own queries and their windows (hnplan.compute.layer_ops._sliding_split)
        t_cp = layers * full_share * t_cp_layer
        t_ep = moe_layers * t_ep_layer * again
        if dense:  # t_ep 0: the overlap hides nothing (0 - (1 - slowdown) min(0, t_comp))
            t_mb.append(t_comp + t_tp + t_cp + t_ep)  # per distinct row: gathered below, the stages together
        else:  # warm-up/cool-down passes run alone: the overlap share is per candidate
            if ch.ep_comm:  # each half beside the partner pass's compute (moe.ep_paired_exposed)
                t_ep, fwd, bwd, wgrad, rest = gather([t_ep, st[1], st[2], st[6], t_comp + t_tp + t_cp], codes)
                t_ep = moe.ep_paired_exposed(t_ep, fwd, bwd, wgrad, share, c.overlap_slowdown(job, "ep"))
            else:
                t_ep, rest = gather([t_ep, t_comp + t_tp + t_cp], codes)
            t_mb.append(rest + t_ep + t_pp)
        per_stage.append((t_comp, t_tp, t_cp, t_ep, st[1], st[2], st[6], layers))
    if dense:  # x[codes] + t_pp, each stage's (one gather of the three)
        t_mb = [t + t_pp for t in gather(t_mb, codes)]
    slowest, t_slowest = _slowest(t_mb)
    at = slowest * table.shape[2] + codes  # the slowest stage's row in a [stage, distinct row] array
    quantities = list(zip(*per_stage))
    per_row = [i for i in range(len(quantities)) if i != 3 or dense]  # t_ep of an MoE model is per candidate
    taken = dict(zip(per_row, gather([np.array(quantities[i], dtype=float).reshape(-1) for i in per_row], at)))
    out = [t_slowest]
    for i, q in enumerate(quantities):
        if i in taken:
            out.append(taken[i])
        else:  # t_ep, per candidate
            out.append(np.take_along_axis(np.array(q, dtype=float), slowest[None, :], axis=0)[0])
    p = c._col(plans, "pp")
    every = t_mb[0] + np.maximum(p - 2, 0) * t_mb[1] + t_mb[2]  # first, pp - 2 middle ones (the fullest), last
    out.append(np.where(p > 1, np.maximum(every - t_slowest, 0.0), 0.0))
    return out


def _slowest(t_mb: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(np.argmax(t, axis=0), t.max(axis=0))`` of ``t = np.array(t_mb)`` ([stage, candidate]; the earlier
    stage on a tie), by element-wise comparisons of the few stages (an arg-max down the columns of a wide
    array is slow); with a NaN, ``np.argmax`` itself (which takes the first NaN)."""
    best = np.asarray(t_mb[0], dtype=float)
    stage = np.zeros(best.shape, dtype=np.intp)
    for i, t in enumerate(t_mb[1:], start=1):
        later = t > best
        np.copyto(stage, i, where=later)
        best = np.maximum(best, t) if i == 1 else np.maximum(best, t, out=best)  # never written into t_mb[0]
    if np.isnan(best).any():
        both = np.array(t_mb, dtype=float)
        stage = np.argmax(both, axis=0)
        best = np.take_along_axis(both, stage[None, :], axis=0)[0]
    return stage, best
