"""Claims audit, the experiments on the mechanisms the seeds rely on: hot swap and the failure unit
(reliability model), deployment time from the bill of materials, a CXL memory pool and tiered offload
in the training planner (see :mod:`hnplan.planning.claims`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.errors import InfeasiblePlan
from hnplan.planning.claims import AuditSetup, Claim, doc
from hnplan.planning.claims_grid import _claim

HOTSWAP = (
    "hot-swap-no-downtime",
    ("001",),
    "A failed card is replaced without stopping: hot swap and online expansion",
)

if TYPE_CHECKING:
    pass


def hot_swap(cat: Catalog, s: AuditSetup) -> Claim:
    """Downtime a synchronous training job suffers per hardware interruption (restart + half a checkpoint
    interval of lost work, reliability model) on the seed's node with hot swap and one-card failure unit,
    and the same node without them (a failure drains the 40-card node for the default repair time); with
    the GPUs held in repair on the job's behalf, the goodput that charges them, and the spare GPUs each
    keeps for 99% availability."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    from hnplan.planning.design import estimate_reliability

    sy = cat.system(s.seed_supernode)
    cold = sy.model_copy(
        update=dict(
            id=f"{sy.id}-no-hot-swap",
            hot_swap=False,
            failure_unit_gpus=sy.node_gpus,
            repair_hours=cat.reliability.repair_hours.value,
        )
    )
    rows = []
    for v in (sy, cold):
        r = estimate_reliability(v, s.reliability_gpus, s.trillion_model, catalog=cat)
        rows.append(
            {
                "system": v.id,
                "hot_swap": v.hot_swap,
                "failure_unit_gpus": r.failure_unit_gpus,
                "downtime_per_failure_s": r.restart_s + r.checkpoint_interval_s / 2,
                "goodput": r.goodput,
                "job_goodput": r.job_goodput,
                "gpus_in_repair": r.gpus_in_repair,
                "spare_gpus": r.spare_gpus,
            }
        )
    pts = pd.DataFrame(rows)
    c = _claim(
        *HOTSWAP,
        f"{doc(hot_swap)} {s.trillion_model} on {s.reliability_gpus:,} GPUs of {sy.id}",
        pts,
        ["system"],
        "downtime_per_failure_s",
        "<=",
        0.0,
        {
            "goodput_hot_swap": rows[0]["goodput"],
            "goodput_without": rows[1]["goodput"],
            "spare_gpus_hot_swap": rows[0]["spare_gpus"],
            "spare_gpus_without": rows[1]["spare_gpus"],
            "gpus_in_repair_hot_swap": rows[0]["gpus_in_repair"],
            "gpus_in_repair_without": rows[1]["gpus_in_repair"],
        },
        unit=" s",
    )
    return c


DEPLOY = ("deploy-hours-not-weeks", ("001",), "A cable-less backplane cuts deployment from weeks (or months) to hours")


def deploy(cat: Catalog, s: AuditSetup) -> Claim:
    """Deployment time derived from each design's bill of materials (racks, coolant loops, units, cables,
    optical modules, switches at the install rates of reliability.yaml, crews by IT power, then burn-in;
    hnplan.deployment), at the GPU counts of the trillion-parameter grid; the claim holds where it is at most
    one day."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    from hnplan.planning.design import deployment_time

    rows = []
    for sid in (s.seed_supernode, s.supernode, s.traditional):
        sy = cat.system(sid)
        for g in s.trillion_gpus:
            n = sy.unit_gpus * max(1, round(g / sy.unit_gpus))
            d = deployment_time(sy, n, cat)
            rows.append(
                {
                    "system": sid,
                    "gpus": n,
                    "deploy_days": d["deploy_days"],
                    "install_days": d["install_days"],
                    "commission_days": d["commission_days"],
                    "technician_hours": d["technician_hours_total"],
                    "cables_per_gpu": d["items"]["cable"] / n,
                }
            )
    pts = pd.DataFrame(rows)
    seed = pts[pts["system"] == s.seed_supernode]
    trad = pts[pts["system"] == s.traditional]
    return _claim(
        *DEPLOY,
        f"{doc(deploy)} Designs {s.seed_supernode}, {s.supernode}, {s.traditional}. The install rates are "
        "labelled assumptions (data/reliability.yaml); the seed's own figure is not an input.",
        pts,
        ["system", "gpus"],
        "deploy_days",
        "<=",
        1.0,
        {
            "seed_install_days_min": float(seed["install_days"].min()),
            "traditional_install_days_min": float(trad["install_days"].min()),
            "commission_days": float(pts["commission_days"].iloc[0]),
        },
        unit=" days",
    )


CXL = ("cxl-pool-128tb-32-nodes", ("002",), "Over CXL, a 32-node cluster shares a 128 TB unified memory pool")
# The pool the claim describes, on the seed's 40-card nodes: 128 TB shared by 32 nodes, each node on one
# CXL 2.0 x16 port (PCIe 5.0 signalling, 32 GT/s x 16 lanes = 64 GB/s per direction, CXL 2.0 specification)
# shared by its 40 cards; load latency of a switched, rack-scale pool about 180 ns above local DRAM, ~270 ns
# in all (Li et al., "Pond: CXL-Based Memory Pooling Systems for Cloud Platforms", ASPLOS 2023, Sec. 2-3).
CXL_POOL_TB, CXL_POOL_NODES, CXL_NODE_GBPS, CXL_LATENCY_NS = 128.0, 32, 64.0, 270.0


def cxl_pool(cat: Catalog, s: AuditSetup) -> Claim:
    """Best training plan of the trillion-parameter model and the 10T stand-in on 32 of the seed's 40-card
    nodes, with the stack choice offload=auto, without and with a 128 TB CXL pool shared by the 32 nodes (one
    x16 CXL 2.0 port of 64 GB/s per node, ~270 ns); the claim holds where the pool makes the model
    trainable or its best plan at least 5 % faster (a pool that changes nothing is not "shared memory" for
    training; the 5 % is an assumption: about the planner's own step-time uncertainty, not a seed figure)."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    from hnplan.planning.claims_grid import standin_10t
    from hnplan.planning.training import best_plan

    sy = cat.system(s.seed_supernode)
    pooled = sy.model_copy(
        update=dict(
            id=f"{sy.id}-cxl-pool",
            pooled_memory_tb=CXL_POOL_TB,
            pooled_memory_nodes=CXL_POOL_NODES,
            pooled_memory_GBps_per_gpu=CXL_NODE_GBPS / sy.node_gpus,
            pooled_memory_latency_ns=CXL_LATENCY_NS,
        )
    )
    gpus = CXL_POOL_NODES * sy.node_gpus
    rows = []
    for model in (cat.model(s.trillion_model), standin_10t(cat)):
        r: dict = {"model": model.id, "params": float(_params(model)), "gpus": gpus}
        for tag, system in (("hbm", sy), ("pool", pooled)):
            try:
                (est,), _, _ = best_plan(
                    model,
                    system,
                    gpus,
                    s.seq_len,
                    gpus * s.seqs_per_gpu,
                    s.dtype,
                    catalog=cat,
                    overrides={"offload": "auto"},
                )
                r[f"step_s_{tag}"] = est.step_time_s
                r[f"offload_exposed_s_{tag}"] = est.breakdown_s.get("offload_exposed", 0.0)
                r[f"pooled_gib_{tag}"] = est.memory_breakdown_gib.get("offload_pooled_gib", 0.0)
                r[f"fits_{tag}"] = 1.0
            except InfeasiblePlan:
                r[f"step_s_{tag}"], r[f"fits_{tag}"] = np.nan, 0.0
        # pool speed-up: step without / with the pool (inf where only the pool makes the model trainable)
        r["pool_speedup"] = (
            r["step_s_hbm"] / r["step_s_pool"]
            if r["fits_hbm"] and r["fits_pool"]
            else (np.inf if r["fits_pool"] else np.nan)
        )
        rows.append(r)
    pts = pd.DataFrame(rows)
    return _claim(
        *CXL,
        f"{doc(cxl_pool)} Sequence {s.seq_len}, {s.seqs_per_gpu} sequence(s) per GPU per step, {s.dtype}.",
        pts,
        ["params"],
        "pool_speedup",
        ">=",
        1.05,
        {
            "pool_tb_per_node": CXL_POOL_TB / CXL_POOL_NODES,
            "pool_GBps_per_gpu": CXL_NODE_GBPS / sy.node_gpus,
            "largest_model_params_whose_state_fits": units.TB_to_bytes(CXL_POOL_TB) / 16.0,
        },
    )


def _params(model) -> float:
    from hnplan.compute import param_counts

    return param_counts(model).total


TIERS = (
    "tiering-hbm-ddr-ssd-prefetch",
    ("001",),
    "An HBM -> DDR -> SSD hierarchy with smart prefetching hides the data movement",
)


def tiering(cat: Catalog, s: AuditSetup) -> Claim:
    """Best plan with the stack choice offload=auto at GPU counts too small for the model's state in HBM
    (``AuditSetup.tiering_points``: 100B-class models on one or two H100 servers, the 1T model on one or
    two NVL72 racks), on a PCIe-host server (DDR) and an NVLink-C2C superchip rack (LPDDR): share of the step the offload
    transfers leave exposed after layer-by-layer prefetch behind compute. The claim holds where that share is
    at most 5 % (assumption: "hides" read as within the planner's own step-time uncertainty). SSD is not a
    training offload target (NVMe is a tier of inference spills only)."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    from hnplan.planning.training import best_plan

    rows = []
    for sid, m, g in s.tiering_points:
        sy, model = cat.system(sid), cat.model(m)
        r = {"system": sid, "model": m, "params": float(_params(model)), "gpus": g}
        try:
            (est,), _, _ = best_plan(
                model,
                sy,
                g,
                s.seq_len,
                g * s.seqs_per_gpu,
                s.dtype,
                catalog=cat,
                overrides={"offload": "auto"},
            )
            off = sum(v for k, v in est.memory_breakdown_gib.items() if k.startswith("offload_"))
            exposed = est.breakdown_s.get("offload_exposed", 0.0)
            r.update(
                offloaded_gib=off,
                offload_exposed_s=exposed,
                step_time_s=est.step_time_s,
                exposed_share=exposed / est.step_time_s if off > 0 else np.nan,
            )
        except InfeasiblePlan:
            r.update(offloaded_gib=np.nan, exposed_share=np.nan)
        rows.append(r)
    pts = pd.DataFrame(rows)
    return _claim(
        *TIERS,
        f"{doc(tiering)} Sequence {s.seq_len}, {s.seqs_per_gpu} sequence(s) per GPU per step, {s.dtype}; only "
        "points whose best plan offloads count.",
        pts,
        ["system", "params", "gpus"],
        "exposed_share",
        "<=",
        0.05,
    )
