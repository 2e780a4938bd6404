"""Claims audit, the experiments that run the training planner (see :mod:`hnplan.planning.claims`).

Every experiment plans each grid point with :func:`hnplan.planning.training.best_plan` (each design its
own fastest plan that fits) and reads the step-time breakdown: *exposed* communication (what the step
pays after overlap) over step time is the communication share; the part of it on groups that leave the
scale-up domain is the cross-node share. Results are cached per (model, design, GPU count), so the
claims that share a grid share the planner calls. The designs, the planner call per point and its grids
are in :mod:`hnplan.planning.claims_grid`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.planning.claims import AuditSetup, Claim, doc
from hnplan.planning.claims_grid import (  # noqa: F401  (the designs and grids are public here too)
    COMM_PARTS,
    _base_text,
    _claim,
    _grid_text,
    grid,
    pair_grid,
    plan_point,
    same_chip_baseline,
    standin_10t,
    traditional_grid,
    with_nic,
)

# -- the experiments -------------------------------------------------------------------------------
COMM_TRAD = (
    "comm-share-traditional",
    ("000",),
    "Training a trillion-parameter model on a traditional design, communication is more than 60% of the time",
)

if TYPE_CHECKING:
    pass


def comm_share_traditional(cat: Catalog, s: AuditSetup) -> Claim:
    """Exposed communication / step time of the server design's best plan, over model size and GPU count."""
    pts = traditional_grid(cat, s, s.models, s.gpus)
    return _claim(
        *COMM_TRAD,
        f"{doc(comm_share_traditional)} {_base_text(cat, s, nics=True)}; {_grid_text(s, s.models, s.gpus)}",
        pts,
        ["params", "gpus", "nic_gbps"],
        "comm_share",
        ">=",
        0.60,
    )


COMM_SUPER = ("comm-share-supernode", ("000",), "On a supernode communication falls below 10% of the time")


def comm_share_supernode(cat: Catalog, s: AuditSetup) -> Claim:
    """Exposed communication / step time of the supernode's best plan, over model size and GPU count."""
    pts = grid(cat, s, [s.supernode], s.models, s.gpus)
    return _claim(
        *COMM_SUPER,
        f"{doc(comm_share_supernode)} {s.supernode}; {_grid_text(s, s.models, s.gpus)}",
        pts,
        ["params", "gpus"],
        "comm_share",
        "<=",
        0.10,
    )


COMM_RED = ("comm-reduction-80", ("001",), "The all-to-all low-latency design cuts communication overhead by 80%")


def comm_reduction(cat: Catalog, s: AuditSetup) -> Claim:
    """1 - exposed communication seconds per step on the supernode / on the same-chip baseline, same model,
    GPU count and batch."""
    pts = pair_grid(cat, s, s.models, s.gpus)
    pts["comm_reduction"] = 1 - pts["comm_s_super"] / pts["comm_s_base"]
    pts["speedup"] = pts["step_time_s_base"] / pts["step_time_s_super"]
    old = grid(cat, s, [s.older], s.models, s.gpus)
    both = pts.merge(
        old[["model", "gpus", "step_time_s", "comm_s"]].rename(
            columns={"step_time_s": "step_time_s_older", "comm_s": "comm_s_older"}
        ),
        on=["model", "gpus"],
    )
    both["comm_reduction_vs_older"] = 1 - both["comm_s_super"] / both["comm_s_older"]
    both["speedup_vs_older"] = both["step_time_s_older"] / both["step_time_s_super"]
    keep = both.dropna(subset=["speedup", "speedup_vs_older"])
    nums = {
        "same_chip_speedup": float(keep["speedup"].median()) if len(keep) else np.nan,
        "chip_and_fabric_speedup": float(keep["speedup_vs_older"].median()) if len(keep) else np.nan,
    }
    return _claim(
        *COMM_RED,
        f"{doc(comm_reduction)} {s.supernode} against the {_base_text(cat, s)}; "
        f"{s.older} shown beside (chip and fabric together, not the verdict); {_grid_text(s, s.models, s.gpus)}",
        both,
        ["params", "gpus"],
        "comm_reduction",
        ">=",
        0.80,
        nums,
    )


CROSS = (
    "cross-node-share-30",
    ("002",),
    "On traditional clusters cross-node communication latency is more than 30% of the time",
)


def cross_node_share(cat: Catalog, s: AuditSetup) -> Claim:
    """Exposed communication of the groups that leave the scale-up domain (the scale-out network) / step
    time, server design's best plan."""
    pts = traditional_grid(cat, s, s.models, s.gpus)
    return _claim(
        *CROSS,
        f"{doc(cross_node_share)} {_base_text(cat, s, nics=True)}; {_grid_text(s, s.models, s.gpus)}",
        pts,
        ["params", "gpus", "nic_gbps"],
        "scaleout_share",
        ">=",
        0.30,
    )


LOSS = (
    "comm-loss-100b-40",
    ("002",),
    "Training 100B-parameter models, traditional clusters lose more than 40% of performance to communication",
)


def comm_loss_100b(cat: Catalog, s: AuditSetup) -> Claim:
    """Performance lost to communication = exposed communication / step time (the step without it is that
    much shorter), 100B-class models on the server design."""
    pts = traditional_grid(cat, s, s.hundred_b_models, s.hundred_b_gpus)
    return _claim(
        *LOSS,
        f"{doc(comm_loss_100b)} {_base_text(cat, s, nics=True)}; {_grid_text(s, s.hundred_b_models, s.hundred_b_gpus)}",
        pts,
        ["params", "gpus", "nic_gbps"],
        "comm_share",
        ">=",
        0.40,
    )


MFU100 = (
    "mfu-100b-below-40",
    ("000",),
    "Training 100B-parameter models on hundreds of GPUs, communication delay keeps utilisation below 40% on traditional designs",
)


def mfu_100b(cat: Catalog, s: AuditSetup) -> Claim:
    """Model FLOPs utilisation (MFU) of the server design's best plan, 100B-class models on hundreds to
    thousands of GPUs."""
    pts = traditional_grid(cat, s, s.hundred_b_models, s.hundred_b_gpus)
    return _claim(
        *MFU100,
        f"{doc(mfu_100b)} {_base_text(cat, s, nics=True)}; {_grid_text(s, s.hundred_b_models, s.hundred_b_gpus)}",
        pts,
        ["params", "gpus", "nic_gbps"],
        "mfu",
        "<=",
        0.40,
    )


FLIP = (
    "comm-compute-1-9-at-10k",
    ("001",),
    "In a 10,000-card cluster the compute:communication time ratio can reach 1:9",
)


def comm_flip_10k(cat: Catalog, s: AuditSetup) -> Claim:
    """Exposed communication / (compute + exposed communication) of the server design's best plan at about
    10,000 GPUs, over model size (1:9 is a share of 0.9)."""
    pts = traditional_grid(cat, s, s.models, [s.ten_k_gpus])
    pts["comm_fraction"] = pts["comm_s"] / (pts["comm_s"] + pts["compute_s"])
    return _claim(
        *FLIP,
        f"{doc(comm_flip_10k)} {_base_text(cat, s, nics=True)}; {_grid_text(s, s.models, [s.ten_k_gpus])}",
        pts,
        ["params", "nic_gbps"],
        "comm_fraction",
        ">=",
        0.90,
    )


def _vision(cat, s):
    m = standin_10t(cat)
    pts = pair_grid(cat, s, [m], s.vision_gpus)
    pts["speedup"] = pts["step_time_s_base"] / pts["step_time_s_super"]
    return pts


def _vision_text(cat, s, what):
    return (
        f"{what} The seed names no architecture: a 10T dense transformer stand-in ({doc(standin_10t).split(':')[1].strip()}); "
        f"{s.supernode} against the {_base_text(cat, s)} on {', '.join(f'{g:,}' for g in s.vision_gpus)} GPUs each; "
        f"sequence {s.seq_len}, {s.seqs_per_gpu} per GPU per step"
    )


V_DAYS = (
    "vision-10t-45-to-9-days",
    ("000",),
    "A 10-trillion-parameter vision model trains in 9 days instead of 45 (5x)",
)


def vision_days(cat: Catalog, s: AuditSetup) -> Claim:
    """Speed-up (baseline step time / supernode step time) at equal GPU counts."""
    return _claim(*V_DAYS, _vision_text(cat, s, doc(vision_days)), _vision(cat, s), ["gpus"], "speedup", ">=", 5.0)


V_MFU = ("vision-10t-mfu-38-to-72", ("000",), "The same case: utilisation rises from 38% to 72%")


def vision_mfu(cat: Catalog, s: AuditSetup) -> Claim:
    """Supernode MFU at least 72% where the baseline's is at most 38% (the lower of the two margins is the metric)."""
    pts = _vision(cat, s)
    pts["mfu_margin"] = np.minimum(pts["mfu_super"] - 0.72, 0.38 - pts["mfu_base"])
    return _claim(*V_MFU, _vision_text(cat, s, doc(vision_mfu)), pts, ["gpus"], "mfu_margin", ">=", 0.0)


V_COMM = ("vision-10t-comm-62-to-15", ("000",), "The same case: communication share falls from 62% to 15%")


def vision_comm(cat: Catalog, s: AuditSetup) -> Claim:
    """Baseline communication share at least 62% and supernode share at most 15% (the lower margin is the metric)."""
    pts = _vision(cat, s)
    pts["share_margin"] = np.minimum(pts["comm_share_base"] - 0.62, 0.15 - pts["comm_share_super"])
    return _claim(*V_COMM, _vision_text(cat, s, doc(vision_comm)), pts, ["gpus"], "share_margin", ">=", 0.0)


TRILLION = (
    "trillion-llm-1280-gpus-7-days",
    ("001",),
    "A trillion-parameter LLM: 128 nodes / 4,096 GPUs / 30 days traditionally, 32 nodes / 1,280 GPUs / 7 days on supernodes",
)


def trillion_llm(cat: Catalog, s: AuditSetup) -> Claim:
    """Days on the supernode for the token budget that takes the same-chip baseline 30 days on 4,096 GPUs,
    over supernode GPU counts (1,296 = 18 racks is the nearest to the seed's 1,280)."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    base = same_chip_baseline(cat, s.traditional, s.supernode)
    ref = plan_point(cat, s.trillion_model, base, 4096, s)
    tokens = ref["tokens_per_s"] * units.days_to_s(30)
    pts = grid(cat, s, [s.supernode], [s.trillion_model], s.trillion_gpus)
    pts["days"] = units.s_to_days(tokens / pts["tokens_per_s"])
    seed = plan_point(cat, s.trillion_model, s.seed_supernode, 1280, s)  # the seed's own design: context only
    seed_days = units.s_to_days(tokens / seed["tokens_per_s"])
    nums = {
        "baseline_tokens_per_s_4096": ref["tokens_per_s"],
        "token_budget": tokens,
        "needed_per_gpu_ratio": 4096 * 30 / (1280 * 7),
    }
    at = pts[pts["gpus"] == min(s.trillion_gpus)]
    if len(at):
        nums["modelled_per_gpu_ratio"] = float(
            at["tokens_per_s"].iloc[0] / at["gpus"].iloc[0] / (ref["tokens_per_s"] / 4096)
        )
    nums["seed_design_days_1280"] = seed_days
    c = _claim(
        *TRILLION,
        f"{doc(trillion_llm)} {s.trillion_model}; {_base_text(cat, s)} at 4,096 GPUs; "
        f"{s.supernode} at {', '.join(f'{g:,}' for g in s.trillion_gpus)} GPUs; the seed's own {s.seed_supernode} "
        "at 1,280 GPUs shown beside (its card's figures are the seed's, not a datasheet's: not judged)",
        pts,
        ["gpus"],
        "days",
        "<=",
        7.0,
        nums,
        unit=" days",
    )
    c.points = pd.concat([c.points, pd.DataFrame([{**seed, "days": seed_days, "holds": None}])], ignore_index=True)
    return c


def _nic(cat, s):
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    base = same_chip_baseline(cat, s.traditional, s.supernode)
    rows = []
    top = max(s.nic_gbps)
    for m in s.nic_models:
        for g in s.nic_gpus:
            ref = plan_point(cat, m, with_nic(base, top), g, s)
            for r in s.nic_gbps:
                p = plan_point(cat, m, with_nic(base, r), g, s)
                rows.append(
                    {
                        "model": p["model"],
                        "params": p["params"],
                        "gpus": g,
                        "nic_gbps": r,
                        "step_time_s": p["step_time_s"],
                        "comm_share": p["comm_share"],
                        "slowdown": p["step_time_s"] / ref["step_time_s"] - 1,
                        "plan": p["plan"],
                    }
                )
    return pd.DataFrame(rows)


def _nic_text(cat, s, what):
    return (
        f"{what} {_base_text(cat, s)} with every NIC at {', '.join(f'{r:g}' for r in s.nic_gbps)} Gb/s (re-planned at "
        f"each rate); models {', '.join(s.nic_models)}; {', '.join(f'{g:,}' for g in s.nic_gpus)} GPUs; a rate is enough "
        f"when the step is within {s.nic_tolerance:.0%} of the step at {max(s.nic_gbps):g} Gb/s"
    )


NIC200 = ("nic-200g-enough", ("000",), "Choose an RDMA network of at least 200 Gb/s")


def nic_200(cat: Catalog, s: AuditSetup) -> Claim:
    """Step-time slowdown at 200 Gb/s per GPU relative to the fastest rate tested."""
    pts = _nic(cat, s)
    pts = pts[pts["nic_gbps"] == 200].reset_index(drop=True)
    return _claim(*NIC200, _nic_text(cat, s, doc(nic_200)), pts, ["params", "gpus"], "slowdown", "<=", s.nic_tolerance)


NIC100 = (
    "nic-100g-pfc-enough",
    ("002",),
    "Nodes need at least 100 Gb/s bidirectional bandwidth with a lossless (PFC) network",
)


def nic_100(cat: Catalog, s: AuditSetup) -> Claim:
    """Step-time slowdown at 100 Gb/s per GPU relative to the fastest rate tested (the fabric model is
    lossless, as with PFC)."""
    pts = _nic(cat, s)
    pts = pts[pts["nic_gbps"] == 100].reset_index(drop=True)
    return _claim(*NIC100, _nic_text(cat, s, doc(nic_100)), pts, ["params", "gpus"], "slowdown", "<=", s.nic_tolerance)


COST = ("training-cost-60", ("001",), "An internet company cut model training cost by 60% with supernodes")


def training_cost(cat: Catalog, s: AuditSetup) -> Claim:
    """1 - cost per token on the supernode / cost per token on the same-generation server design (both
    catalog systems with their prices: $/GPU-hour from the TCO model x GPUs / tokens per hour)."""
    from hnplan.planning.design import tco_summary

    rows = []
    for sid in (s.supernode, s.traditional):
        pts = grid(cat, s, [sid], s.models, s.gpus)
        pts["usd_per_gpu_hour"] = [tco_summary(cat.system(sid), int(g), cat)["usd_per_gpu_hour"] for g in pts["gpus"]]
        pts["usd_per_mtok"] = pts["usd_per_gpu_hour"] * pts["gpus"] / (pts["tokens_per_s"] * units.HOUR) * units.MEGA
        rows.append(pts[["model", "params", "gpus", "usd_per_gpu_hour", "usd_per_mtok", "tokens_per_s"]])
    pts = rows[0].merge(rows[1], on=["model", "params", "gpus"], suffixes=("_super", "_base"))
    pts["cost_reduction"] = 1 - pts["usd_per_mtok_super"] / pts["usd_per_mtok_base"]
    return _claim(
        *COST,
        f"{doc(training_cost)} {s.supernode} against {s.traditional} (both Blackwell); "
        f"{_grid_text(s, s.models, s.gpus)}",
        pts,
        ["params", "gpus"],
        "cost_reduction",
        ">=",
        0.60,
    )


EXPERIMENTS = tuple(
    (spec[0], spec[1], spec[2], fn)
    for spec, fn in (
        (COMM_TRAD, comm_share_traditional),
        (COMM_SUPER, comm_share_supernode),
        (COMM_RED, comm_reduction),
        (CROSS, cross_node_share),
        (LOSS, comm_loss_100b),
        (MFU100, mfu_100b),
        (FLIP, comm_flip_10k),
        (V_DAYS, vision_days),
        (V_MFU, vision_mfu),
        (V_COMM, vision_comm),
        (TRILLION, trillion_llm),
        (NIC200, nic_200),
        (NIC100, nic_100),
        (COST, training_cost),
    )
)
