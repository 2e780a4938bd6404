"""Operator-level training times of a model's parts for many micro-batch shapes at once.

The training planner needs, for every distinct ``(micro-batch, tp, cp, ep)`` among its candidate
plans, the time of one dense layer, one MoE layer, the embedding and the head, split by phase. This
builds the operator rows of :mod:`hnplan.compute.operators` for all shapes and times them in one
vectorised roofline call, so the result equals summing :func:`hnplan.compute.operator_table` rows
shape by shape (tested), at a fraction of the cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute.attention import ATTENTION_KINDS
from hnplan.compute.operators import _check, _raw_rows, _times

PARTS = {"dense-layer": "dense", "moe-layer": "moe", "embedding": "emb", "head": "head"}
GROUPS = ("fwd", "bwd", "rc_full", "rc_sel", "attn", "routed_fwd", "routed_bwd", "routed_rc", "wgrad")
ROUTED_OPS = ("moe_permute", "expert_up", "expert_act", "expert_down")  # what scales with the tokens a rank gets


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
        (the weight-gradient GEMMs, part of ``_bwd``) [s]. Parts a model does not have are 0.

    Raises
    ------
    InputError
        As :func:`hnplan.compute.operator_table` for a shape (tp not dividing the heads, ...).
    """
    rows, owner = [], []
    for i, (mb, tp, cp, ep) in enumerate(shapes[["microbatch_size", "tp", "cp", "ep"]].itertuples(index=False)):
        _check(model, "train", int(mb), seq_len, 0, int(tp), int(cp), int(ep), dtype, "full", "executed", attention)
        r = _raw_rows(
            model,
            "train",
            int(mb),
            seq_len,
            0,
            int(tp),
            int(cp),
            int(ep),
            dtype,
            "full",
            "executed",
            attention=attention,
            sequence_parallel=sequence_parallel,
            acc=acc,
            stack=stack,
        )
        rows += r
        owner += [i] * len(r)
    _, _, t, _ = _times(rows, acc, dtype)
    owner = np.asarray(owner)
    scope = np.array([r[1] for r in rows])
    kind = np.array([r[2] for r in rows])
    phase = np.array([r[3] for r in rows])
    rc, attn = phase == "recompute", np.isin(kind, ATTENTION_KINDS)
    routed = np.isin(np.array([r[0] for r in rows]), ROUTED_OPS)
    bwd = np.isin(phase, ("bwd", "bwd-data", "bwd-weight"))
    masks = {
        "fwd": phase == "fwd",
        "bwd": bwd,
        "rc_full": rc,
        "rc_sel": rc & attn,
        "attn": attn & ~rc,
        "routed_fwd": routed & (phase == "fwd"),
        "routed_bwd": routed & bwd,
        "routed_rc": routed & rc,
        "wgrad": phase == "bwd-weight",
    }
    n = len(shapes)
    out = {}
    for sc, part in PARTS.items():
        here = scope == sc
        for g in GROUPS:
            sel = here & masks[g]
            out[f"{part}_{g}"] = np.bincount(owner[sel], weights=t[sel], minlength=n)
    return pd.DataFrame(out)
