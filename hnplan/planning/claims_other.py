"""Claims audit, the experiments outside the training planner: storage, reliability, serving, catalog
arithmetic, the cluster simulations, and the claims that cannot be tested, each naming the missing quantity
(see :mod:`hnplan.planning.claims`); the network transport's (RDMA against TCP) are
:mod:`hnplan.planning.claims_network`'s, listed here with the rest."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan import storage as sto
from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.errors import InfeasiblePlan
from hnplan.planning.claims import (
    AuditSetup,
    Claim,
    cluster_available,
    cluster_utilisation,
    decide,
    doc,
    seed_files,
)
from hnplan.planning.claims_grid import _claim, _untestable, grid_rows, same_chip_baseline
from hnplan.planning.claims_mechanisms import CXL, DEPLOY, HOTSWAP, TIERS, cxl_pool, deploy, hot_swap, tiering
from hnplan.planning.claims_network import GRAD, TCP, grad_sync, rdma_vs_tcp
from hnplan.planning.records import is_na

if TYPE_CHECKING:
    pass

# Data-loading shapes of the IOPS experiment: pre-tokenized text as the storage model reads it
# (hnplan.storage.TEXT_BYTES_PER_TOKEN, TEXT_READ_KIB: Megatron-LM's int32 token shards in large reads) and
# one image per sample: ILSVRC-2012 train, 1.28M JPEG images in about 138 GB (about 108 KB each), each a
# 224 x 224 image in 196 patches of 16 x 16 (ViT, Dosovitskiy et al. 2021).
IMAGE_BYTES = 108e3
IMAGE_TOKENS = 196
IMAGE_READ_KIB = 128.0  # assumption: a ~108 KB JPEG read whole in one request, rounded up to a 128 KiB I/O


SEED_NODE = ("seed-node-40-cards", ("001",), "One node of 40 cards: 28 PFLOPS FP8, 5.76 TB HBM3, 150 kW, PUE below 1.1")


def _seed_derived(acc, field: str) -> bool:
    """True when an accelerator field's value is an assumption or derived from a seed document."""
    head = field.split(".")[0]
    keys = [k for k in (*acc.assumptions, *acc.field_sources) if k in (field, head)]
    if any(k in acc.assumptions for k in keys):
        return True
    cites = " ".join(acc.field_sources.get(k, "") for k in keys) or acc.source
    return "seed" in cites.lower()


def seed_node(cat: Catalog, s: AuditSetup) -> Claim:
    """The node's peak and memory as sums over its cards (40 x dense FP8 peak >= 28 PFLOPS, 40 x HBM >= 5.76
    TB), when the card's figures come from a source other than the seed; the PUE needs a metered value."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    sysm = cat.system(s.seed_supernode)
    acc = cat.accelerator(sysm.accelerator)
    accs = [a for a in cat.entries("accelerators") if a.id != sysm.accelerator]
    nums = {
        "implied_fp8_tflops_per_card": 28e3 / 40,
        "implied_hbm_gb_per_card": 5760 / 40,
        "implied_kw_per_card": 150 / 40,
        "highest_sourced_tdp_kw": units.w_to_kw(max(a.tdp_w for a in accs)),
    }
    derived = [f for f in ("dense_tflops.fp8", "hbm_gb", "tdp_w") if _seed_derived(acc, f)]
    if derived:
        return _untestable(
            *SEED_NODE,
            f"{doc(seed_node)} {acc.id}",
            "missing: a datasheet of the node's "
            f"accelerator independent of the seed's totals: {', '.join(derived)} of {acc.id} are "
            "derived from the seed or assumed, so multiplying them back by 40 would test nothing; and "
            "a metered annual PUE of an installed node",
            nums,
        )
    pts = pd.DataFrame(
        [
            {
                "card": acc.id,
                "node_fp8_pflops": sysm.unit_gpus * acc.dense_tflops.get("fp8", 0) / units.KILO,
                "node_hbm_tb": sysm.unit_gpus * acc.hbm_gb / units.KILO,
            }
        ]
    )
    pts["margin"] = np.minimum(pts["node_fp8_pflops"] / 28.0, pts["node_hbm_tb"] / 5.76) - 1
    return _claim(
        *SEED_NODE,
        f"{doc(seed_node)} {acc.id} (PUE not judged: no metered value)",
        pts,
        ["card"],
        "margin",
        ">=",
        0.0,
        nums,
    )


DENSITY = (
    "compute-density-3x",
    ("001", "002"),
    "FP8 compute density rises 3x (001); node compute density rises 3-5x (002)",
)


def compute_density(cat: Catalog, s: AuditSetup) -> Claim:
    """Dense FP8 PFLOPS per rack of the supernode over the same-generation server design, over the servers
    one rack holds: from one up to what the facility's rack power limit allows air-cooled and liquid-cooled
    (facility.yaml rack_limit_kw_air / rack_limit_kw_liquid over the server's unit power)."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    sup, srv = cat.system(s.supernode), cat.system(s.traditional)
    pf = {sy.id: cat.accelerator(sy.accelerator).dense_tflops.get("fp8", np.nan) / units.KILO for sy in (sup, srv)}
    sup_rack = pf[sup.id] * sup.gpus_per_rack
    fac = cat.facility
    air = int(fac.rack_limit_kw_air.value // srv.unit_power_kw) if fac.rack_limit_kw_air else 1
    most = int(fac.rack_limit_kw_liquid.value // srv.unit_power_kw) if fac.rack_limit_kw_liquid else air
    rows = [
        {
            "servers_per_rack": n,
            "cooling_needed": "air" if n <= air else "liquid",
            "supernode_pflops_per_rack": sup_rack,
            "server_pflops_per_rack": pf[srv.id] * srv.unit_gpus * n,
            "density_ratio": sup_rack / (pf[srv.id] * srv.unit_gpus * n),
        }
        for n in range(1, max(most, 1) + 1)
    ]
    pts = pd.DataFrame(rows)
    return _claim(
        *DENSITY,
        f"{doc(compute_density)} {s.supernode} ({sup.gpus_per_rack} GPUs per rack) "
        f"against {s.traditional} ({srv.unit_gpus} GPUs and {srv.unit_power_kw:g} kW per server)",
        pts,
        ["servers_per_rack"],
        "density_ratio",
        ">=",
        3.0,
        {"servers_per_rack_air": air, "servers_per_rack_liquid": most},
    )


SCORING = (
    "scoring-32k-per-node-8ms",
    ("000",),
    "One node serves 32,000 credit-scoring requests per second within 8 ms",
)


def scoring(cat: Catalog, s: AuditSetup) -> Claim:
    """Requests per second per scale-up domain (the supernode's node; a server for the baseline) with every
    request answered within 8 ms, over model size: one forward pass per request."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    from hnplan.compute import param_counts
    from hnplan.planning.inference.points import scoring_capacity

    base = same_chip_baseline(cat, s.traditional, s.supernode)
    rows = []
    for sy in (cat.system(s.supernode), base):
        for m in s.scoring_models:
            row = {
                "system": sy.id,
                "model": m,
                "params": float(param_counts(cat.model(m)).total),
                "domain_gpus": sy.scaleup_domain_gpus,
            }
            try:
                cap = scoring_capacity(m, sy, s.scoring_tokens, 0.008, catalog=cat)
                row["requests_per_s_per_node"] = cap["requests_per_s_per_gpu"] * sy.scaleup_domain_gpus
            except InfeasiblePlan:
                row["requests_per_s_per_node"] = np.nan
            rows.append(row)
    pts = pd.DataFrame(rows)
    pts["system_is_supernode"] = pts["system"] == s.supernode
    sup = pts[pts["system_is_supernode"]].drop(columns="system_is_supernode").reset_index(drop=True)
    c = _claim(
        *SCORING,
        f"{doc(scoring)} The seed names no model: {', '.join(s.scoring_models)} with "
        f"{s.scoring_tokens}-token requests on {s.supernode} ({cat.system(s.supernode).scaleup_domain_gpus} GPUs "
        f"per node); the {_same(cat, s)} per 8-GPU server beside it",
        sup,
        ["params"],
        "requests_per_s_per_node",
        ">=",
        32000.0,
    )
    c.points = pd.concat(
        [c.points, pts[~pts["system_is_supernode"]].drop(columns="system_is_supernode")], ignore_index=True
    )
    return c


def _same(cat, s):
    return same_chip_baseline(cat, s.traditional, s.supernode).id


IOPS = ("storage-1m-iops", ("000", "002"), "Training needs distributed storage of a million IOPS or more")


def storage_iops(cat: Catalog, s: AuditSetup) -> Claim:
    """Read IOPS the data loader needs at the supernode's best-plan throughput, over model size and GPU count,
    for two data shapes: pre-tokenized text in 1 MiB reads, and one ImageNet-sized JPEG per 196-token image
    (128 KiB reads); with the storage units that serve it."""
    store = cat.get("storage", s.storage)
    rows = []  # plain rows, not a DataFrame: `hnplan claims --only storage-1m-iops` runs without pandas
    for p in grid_rows(cat, s, [s.supernode], s.iops_models, s.gpus):
        for shape, kw in (
            ("text shards", dict(bytes_per_token=sto.TEXT_BYTES_PER_TOKEN, io_kib=sto.TEXT_READ_KIB)),
            ("images", dict(tokens_per_sample=IMAGE_TOKENS, bytes_per_sample=IMAGE_BYTES, io_kib=IMAGE_READ_KIB)),
        ):
            need = sto.loader_need(p["tokens_per_s"], **kw) if math.isfinite(p["tokens_per_s"]) else None
            r = {
                "model": p["model"],
                "params": p["params"],
                "gpus": p["gpus"],
                "data": shape,
                "tokens_per_s": p["tokens_per_s"],
                "read_GBps": math.nan,
                "iops": math.nan,
                "storage_units": math.nan,
            }
            if need is not None:
                r.update(
                    read_GBps=units.Bps_to_GBps(need["read_Bps"]),
                    iops=need["iops"],
                    storage_units=sto.units_needed(store, read_Bps=need["read_Bps"], iops=need["iops"])["units"],
                )
            rows.append(r)
    img = [{k: v for k, v in r.items() if k != "data"} for r in rows if r["data"] == "images"]
    text = [r for r in rows if r["data"] == "text shards"]
    c = _claim(
        *IOPS,
        f"{doc(storage_iops)} {s.supernode}; {s.storage} units; the claim holds where the need "
        "reaches 1M IOPS (image data; text shards are listed beside it)",
        img,
        ["params", "gpus"],
        "iops",
        ">=",
        1e6,
        {
            "text_iops_max": float(max((r["iops"] for r in text if not is_na(r["iops"])), default=math.nan)),
            "units_for_1m_iops": sto.units_needed(store, iops=1e6)["units"],
        },
    )
    # the image rows (with their verdicts), then the text rows: the columns of both, in that order
    c.points = [{**r, "data": "images"} for r in c.point_rows()] + text
    return c


UTIL = (
    "utilisation-40-to-70",
    ("000", "001"),
    "Resource pooling and dynamic scaling raise utilisation from below 40% to 70% or more",
)
FRAG = (
    "fragmentation-below-30",
    ("000",),
    "Business lines building separate clusters leaves overall utilisation below 30%",
)
UTIL50 = ("utilisation-below-50", ("002",), "Fragmented scheduling keeps utilisation below 50% for long periods")
CONC512 = ("concurrent-512-jobs-92", ("000",), "A supernode runs 512 simulation jobs at once at 92% utilisation")
#: the claims decided by the shared-cluster simulation (hnplan.cluster: minutes of CPU), not the planners
CLUSTER_CLAIM_IDS = tuple(spec[0] for spec in (UTIL, FRAG, UTIL50, CONC512))


def _cluster_claim(spec: tuple, text: str):
    def run(cat: Catalog, s: AuditSetup) -> Claim:
        import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

        pts = cluster_utilisation(cat, s, spec[0])
        if pts is None:
            what = "the audit does not run hnplan.cluster's simulation" if cluster_available() else "hnplan has none"
            return _untestable(
                spec[0],
                spec[1],
                spec[2],
                text,
                "needs the shared-cluster simulation (jobs arriving over time, allocated "
                "to pooled or partitioned GPUs, measured as allocated GPU-hours over installed "
                f"GPU-hours): {what}",
            )
        a = pts.attrs
        metric, op, thr = a["metric"], a["op"], a["threshold"]
        verdict, _ = decide(pts, ["offered_load", "design"], metric, op, thr)
        undecided = pts.get("verdict_ci", pd.Series(dtype=object)).eq("undecided")
        if undecided.any():  # a point whose 95 % interval straddles the threshold decides nothing
            verdict = {"not testable": "undecided", "holds": "holds under conditions"}.get(verdict, verdict)
        m = pts.loc[pts["holds"].notna() | undecided, metric].astype(float)
        nums = {
            "threshold": thr,
            f"{metric}_min": float(m.min()),
            f"{metric}_max": float(m.max()),
            "points": int(pts["holds"].notna().sum()),
            "points_holding": int(pts["holds"].eq(True).sum()),
            "points_undecided": int(undecided.sum()),
        }
        exp = f"{text} {s.cluster_jobs:,} jobs of mix '{s.cluster_mix}' per run on {a['gpus']:,} GPUs"
        return Claim(
            spec[0],
            seed_files(*spec[1]),
            spec[2],
            exp,
            verdict,
            a["condition"],
            nums,
            pts,
            metric,
            op,
            ("offered_load", "design"),
        )

    run.__doc__ = text
    return run


EXPERIMENTS = tuple(
    (spec[0], spec[1], spec[2], fn)
    for spec, fn in (
        (TCP, rdma_vs_tcp),
        (GRAD, grad_sync),
        (SEED_NODE, seed_node),
        (DENSITY, compute_density),
        (SCORING, scoring),
        (IOPS, storage_iops),
        (HOTSWAP, hot_swap),
        (DEPLOY, deploy),
        (CXL, cxl_pool),
        (TIERS, tiering),
        (
            UTIL,
            _cluster_claim(
                UTIL,
                "Useful over installed GPU-hours of the server design against the supernode, "
                "both pooled and topology-aware, on the same simulated job stream.",
            ),
        ),
        (
            FRAG,
            _cluster_claim(
                FRAG,
                "Useful over installed GPU-hours of the server design pooled against split into "
                "business lines, each with its own cluster and a random quarter of the jobs, from a "
                "simulated job stream.",
            ),
        ),
        (
            UTIL50,
            _cluster_claim(
                UTIL50,
                "Useful over installed GPU-hours of the server design under first-fit placement with "
                "and without backfilling, against topology-aware placement, from a simulated job stream.",
            ),
        ),
        (
            CONC512,
            _cluster_claim(
                CONC512,
                "Mean number of jobs running at once and useful utilisation of the supernode design, from "
                "a simulated job stream.",
            ),
        ),
    )
)
