"""Claims audit, the shared pieces of the planner-based experiments (:mod:`hnplan.planning.claims_training`):
the designs they compare (the same-chip baseline, a NIC rate, the 10T stand-in model), one planner call per
grid point (:func:`plan_point`, cached per model, design and GPU count, in memory and on disk by
:func:`hnplan.planning.prediction_cache.cached_point`) and its grids, and a claim from a
grid of points (:func:`_claim`).

Every point is planned with :func:`hnplan.planning.training.best_plan` (each design its own fastest plan
that fits) and its step-time breakdown read: *exposed* communication (what the step pays after overlap)
over step time is the communication share; the part of it on groups that leave the scale-up domain is
the cross-node share.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.loader import Catalog
from hnplan.catalog.schemas import Model, System
from hnplan.compute import param_counts
from hnplan.errors import InfeasiblePlan
from hnplan.planning.claims import AuditSetup, Claim, decide, seed_files, verdict_points
from hnplan.planning.prediction_cache import cached_point, point_digest
from hnplan.planning.records import as_records, is_na

if TYPE_CHECKING:
    import pandas as pd

COMM_PARTS = {
    "tp_comm_exposed": "tp",
    "cp_comm_exposed": "cp",
    "ep_comm_exposed": "ep",
    "pp_comm_exposed": "pp",
    "dp_comm_exposed": "dp",
}
_CACHE: dict = {}


# -- designs ---------------------------------------------------------------------------------------
def same_chip_baseline(cat: Catalog, traditional: str, supernode: str) -> System:
    """The server design ``traditional`` carrying the supernode's accelerator and scale-out network
    (fabric, switch and NIC rate per GPU): only the scale-up domain differs from ``supernode``.

    Raises
    ------
    CatalogError
        For unknown ids.
    """
    t, s = cat.system(traditional), cat.system(supernode)
    nic_per_gpu = s.nic_gbps * s.nics_per_node / s.node_gpus
    return t.model_copy(
        update=dict(
            id=f"{t.id}-as-{s.id}",
            name=f"{t.name}, with the {s.accelerator} chip and {nic_per_gpu:g} Gb/s per GPU of {s.scaleout_fabric}",
            accelerator=s.accelerator,
            scaleout_fabric=s.scaleout_fabric,
            scaleout_switch=s.scaleout_switch,
            nic_gbps=nic_per_gpu * t.node_gpus / t.nics_per_node,
        )
    )


def with_nic(system: System, nic_gbps: float) -> System:
    """``system`` with every scale-out NIC at ``nic_gbps`` [Gb/s] (the same entry at its own rate)."""
    if float(nic_gbps) == system.nic_gbps:
        return system
    return system.model_copy(update=dict(id=f"{system.id}-nic{nic_gbps:g}", nic_gbps=float(nic_gbps)))


def standin_10t(cat: Catalog) -> Model:
    """A 10-trillion-parameter dense transformer (the seed names no architecture): Megatron-LM's 1T
    configuration (SC21 Table 1) with hidden size and heads doubled and layers x2.5 (320 layers,
    hidden 51,200, 320 heads of 160): 12 L h^2 = 1.007e13 parameters. A vision transformer of that
    size has the same blocks; its sequence is the image's patches."""
    m = cat.model("megatron-1t")
    return m.model_copy(
        update=dict(
            id="standin-10t",
            name="10T dense transformer (stand-in, 320 x 51,200)",
            layers=320,
            hidden=51200,
            ffn_hidden=204800,
            heads=320,
            kv_heads=320,
            params_b_published=None,
        )
    )


# -- planner calls ---------------------------------------------------------------------------------
def plan_point(cat: Catalog, model, system, gpus: int, s: AuditSetup) -> dict:
    """Best plan of one grid point, summarised (cached in this process and on disk, under the catalog's and the
    code's hashes: :func:`hnplan.planning.prediction_cache.cached_point`): step time, tokens/s, MFU, compute and exposed
    communication seconds, their shares, the cross-node (outside the scale-up domain) share and the plan.
    NaN metrics when no plan divides or fits."""
    model, system = cat.model(model), cat.system(system)
    key = (str(cat.root), model.id, system.id, int(gpus), s.seq_len, s.seqs_per_gpu, s.dtype)
    if key not in _CACHE:
        digest = point_digest(model, system, int(gpus), s.seq_len, s.seqs_per_gpu, s.dtype)
        row = cached_point(digest, cat, lambda: _plan_point_row(cat, model, system, int(gpus), s))
        _CACHE[key] = row
    return dict(_CACHE[key])


def _plan_point_row(cat: Catalog, model: Model, system: System, gpus: int, s: AuditSetup) -> dict:
    """:func:`plan_point`'s row, planned now (the training planner imported here: a cached point needs none)."""
    from hnplan.planning.training import best_plan

    row = {"model": model.id, "params": float(param_counts(model).total), "system": system.id, "gpus": int(gpus)}
    try:
        (est,), _, _ = best_plan(model, system, int(gpus), s.seq_len, int(gpus) * s.seqs_per_gpu, s.dtype, catalog=cat)
    except InfeasiblePlan:
        est = None
    if est is None:
        row.update(
            {
                k: np.nan
                for k in (
                    "step_time_s",
                    "tokens_per_s",
                    "mfu",
                    "compute_s",
                    "comm_s",
                    "scaleout_comm_s",
                    "comm_share",
                    "scaleout_share",
                    "comm_to_compute",
                )
            }
        )
        row["plan"] = "none fits"
    else:
        b = est.breakdown_s
        comm = sum(b[k] for k in COMM_PARTS)
        out = sum(b[k] for k, g in COMM_PARTS.items() if est.placement[g]["domains"] > 1)
        p = est.plan
        row.update(
            step_time_s=est.step_time_s,
            tokens_per_s=est.tokens_per_s,
            mfu=est.mfu,
            compute_s=b["compute"],
            comm_s=comm,
            scaleout_comm_s=out,
            comm_share=comm / est.step_time_s,
            scaleout_share=out / est.step_time_s,
            comm_to_compute=comm / b["compute"],
            plan=plan_text(p),
        )
    return row


def plan_text(p) -> str:
    """A claim point's plan in words: ``TP8 PP4 DP16 ZeRO-1 full``; EP where experts are split, and the experts'
    tensor parallelism where it is not TP (MoE parallel folding, :class:`hnplan.planning.training.ParallelPlan`).

    >>> from hnplan.planning.training.plan import ParallelPlan
    >>> plan_text(ParallelPlan(tp=2, pp=4, dp=16, ep=8, etp=1, recompute="selective"))
    'TP2 PP4 DP16 EP8 ETP1 ZeRO-1 selective'
    >>> plan_text(ParallelPlan(tp=2, pp=4, dp=16, ep=8))
    'TP2 PP4 DP16 EP8 ZeRO-1 none'
    """
    return (
        f"TP{p.tp} PP{p.pp} DP{p.dp}"
        + (f" EP{p.ep}" if p.ep > 1 else "")
        + (f" ETP{p.etp}" if p.ep > 1 and p.etp != p.tp else "")
        + f" ZeRO-{p.zero_stage} {p.recompute}"
    )


def grid(cat: Catalog, s: AuditSetup, systems, models, gpus) -> pd.DataFrame:
    """:func:`plan_point` over ``systems x models x gpus``."""
    import pandas as pd  # here, not at the top: an experiment on plain rows (grid_rows) needs no pandas

    return pd.DataFrame(grid_rows(cat, s, systems, models, gpus))


def grid_rows(cat: Catalog, s: AuditSetup, systems, models, gpus) -> list[dict]:
    """:func:`grid`'s rows: :func:`plan_point` over ``systems x models x gpus``, as a list of dicts."""
    return [plan_point(cat, m, sy, g, s) for sy in systems for m in models for g in gpus]


def traditional_grid(cat: Catalog, s: AuditSetup, models, gpus) -> pd.DataFrame:
    """:func:`plan_point` of the same-chip server baseline over ``models x gpus x s.traditional_nic_gbps``
    (the NIC rate per GPU as the fabric axis), with a ``nic_gbps`` column."""
    base = same_chip_baseline(cat, s.traditional, s.supernode)
    out = []
    for r in s.traditional_nic_gbps:
        g = grid(cat, s, [with_nic(base, r)], models, gpus)
        g["nic_gbps"] = float(r)
        out.append(g)
    import pandas as pd  # here, not at the top: an experiment on plain rows (grid_rows) needs no pandas

    return pd.concat(out, ignore_index=True)


def pair_grid(cat: Catalog, s: AuditSetup, models, gpus, baseline=None) -> pd.DataFrame:
    """Supernode and same-chip baseline side by side per (model, GPU count): columns suffixed
    ``_super`` and ``_base``."""
    base = baseline or same_chip_baseline(cat, s.traditional, s.supernode)
    a = grid(cat, s, [s.supernode], models, gpus)
    b = grid(cat, s, [base], models, gpus)
    keys = ["model", "params", "gpus"]
    return a.drop(columns="system").merge(b.drop(columns="system"), on=keys, suffixes=("_super", "_base"))


def _claim(cid, seeds, text, experiment, pts, axes, metric, op, thr, numbers=None, unit="") -> Claim:
    """A claim from its grid (a DataFrame, or its rows as a list of dicts: the claim's points are then those
    rows, read as a DataFrame only when asked for): the ``holds`` column, the verdict and the headline numbers."""
    pts = verdict_points(pts, metric, op, thr)
    verdict, cond = decide(pts, axes, metric, op, thr, unit)
    rows = as_records(pts)
    m = [float(r[metric]) for r in rows if not is_na(r[metric])]  # NaN skipped (Series.min, max)
    holds = [r["holds"] for r in rows if not is_na(r["holds"])]
    nums = {
        "threshold": thr,
        f"{metric}_min": min(m) if m else math.nan,
        f"{metric}_max": max(m) if m else math.nan,
        "points": len(holds),
        "points_holding": sum(bool(h) for h in holds),
    }
    nums.update(numbers or {})
    return Claim(
        cid, seed_files(*seeds), text, " ".join(experiment.split()), verdict, cond, nums, pts, metric, op, tuple(axes)
    )


def _grid_text(s: AuditSetup, models, gpus) -> str:
    return (
        f"models {', '.join(models)}; {', '.join(f'{g:,}' for g in gpus)} GPUs; sequence {s.seq_len}, "
        f"{s.seqs_per_gpu} sequence(s) per GPU per step, {s.dtype}; each design its own best plan"
    )


def _base_text(cat, s, nics: bool = False) -> str:
    b = same_chip_baseline(cat, s.traditional, s.supernode)
    text = f"same-chip baseline {b.id} ({s.traditional} with the {b.accelerator} chip and the supernode's scale-out NIC"
    if nics:
        text += f", then every NIC at {', '.join(f'{r:g}' for r in s.traditional_nic_gbps)} Gb/s per GPU"
    return text + ")"


NOT_TESTABLE = "not testable"


def _untestable(cid, seeds, text, experiment, missing, numbers=None, points=None) -> Claim:
    return Claim(
        cid,
        seed_files(*seeds),
        text,
        " ".join(experiment.split()),
        NOT_TESTABLE,
        missing,
        numbers or {},
        points if points is not None else [],  # no rows: an empty DataFrame when read
    )
