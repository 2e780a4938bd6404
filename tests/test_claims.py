"""The claims audit: every seed claim an experiment, verdicts computed from the numbers, hand-derived values."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.compute import param_counts
from hnplan.planning import claims_training as ct
from hnplan.planning.claims import (
    JSON_KEYS,
    SEED_FILES,
    VERDICTS,
    AuditSetup,
    audit,
    audit_summary,
    claim_ids,
    claims_table,
    decide,
    verdict_points,
)
from hnplan.planning.training import ParallelPlan, estimate_training_step

from nbparams import SMALL_PARAMS
from nbutil import plotly_divs, run_notebook, table_problems

CAT = load_catalog()
SMALL = AuditSetup(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in SMALL_PARAMS["claims_audit"].items()})


@pytest.fixture(scope="module")
def claims():
    return {c.id: c for c in audit(SMALL)}


# every numeric claim of shared/seeds/README.md, and those issue 15 names, with its seed file
REQUIRED = {
    "comm-share-traditional": "000",
    "comm-share-supernode": "000",
    "comm-reduction-80": "001",
    "grad-sync-rdma-minus-65": "002",
    "allreduce-rdma-5-8x-over-tcp": "000",
    "utilisation-40-to-70": "000",
    "fragmentation-below-30": "000",
    "vision-10t-45-to-9-days": "000",
    "trillion-llm-1280-gpus-7-days": "001",
    "seed-node-40-cards": "001",
    "scoring-32k-per-node-8ms": "000",
    "nic-200g-enough": "000",
    "nic-100g-pfc-enough": "002",
    "storage-1m-iops": "000",
    "vision-10t-comm-62-to-15": "000",
    "vision-10t-mfu-38-to-72": "000",
    "compute-density-3x": "001",
    # named by issue 15
    "cross-node-share-30": "002",
    "comm-loss-100b-40": "002",
    "comm-compute-1-9-at-10k": "001",
    "training-cost-60": "001",
    "hot-swap-no-downtime": "001",
    "deploy-hours-not-weeks": "001",
    "cxl-pool-128tb-32-nodes": "002",
    "tiering-hbm-ddr-ssd-prefetch": "001",
}


def test_every_seed_claim_is_audited_with_its_seed_file(claims):
    assert set(REQUIRED) <= set(claim_ids()) == set(claims)
    for cid, seed in REQUIRED.items():
        assert SEED_FILES[seed] in claims[cid].seed_file
    assert SEED_FILES["002"] in claims["storage-1m-iops"].seed_file  # 1M IOPS is in 000 and 002


def test_every_claim_has_an_experiment_a_verdict_and_a_condition(claims):
    for c in claims.values():
        assert c.verdict in VERDICTS and c.experiment and c.condition and c.claim, c.id
        if c.verdict == "not testable":
            assert c.condition.startswith(("missing:", "needs")), c.id  # names what prevents the test
        else:
            assert c.metric in c.points, c.id
            # a point decides, or (cluster claims over replications) every interval straddles the threshold
            assert c.points["holds"].notna().any() or c.verdict == "undecided", c.id


def test_json_shape(claims):
    for c in claims.values():
        d = json.loads(json.dumps(c.as_dict()))
        assert tuple(d) == JSON_KEYS
        if c.verdict != "not testable":
            assert all("holds" in p for p in d["points"])
    assert list(claims_table(list(claims.values())).columns) == list(JSON_KEYS[:6])


# -- the verdict machinery -------------------------------------------------------------------------
def _grid(values):
    rows = [{"params": p, "gpus": g, "m": v} for (p, g), v in values.items()]
    return verdict_points(pd.DataFrame(rows), "m", ">=", 0.5)


def test_decide_holds_fails_and_names_the_flip():
    full = _grid({(1e9, 8): 0.6, (1e9, 64): 0.7, (1e12, 8): 0.8, (1e12, 64): 0.9})
    assert decide(full, ["params", "gpus"], "m", ">=", 0.5)[0] == "holds"
    none = _grid({(1e9, 8): 0.1, (1e9, 64): 0.2, (1e12, 8): 0.3, (1e12, 64): 0.4})
    v, cond = decide(none, ["params", "gpus"], "m", ">=", 0.5)
    assert v == "does not hold" and "closest at 1T parameters, 64 GPUs: m = 0.4" in cond
    # holds only for the large model at the large GPU count: one threshold per axis
    some = _grid({(1e9, 8): 0.1, (1e9, 64): 0.2, (1e12, 8): 0.3, (1e12, 64): 0.9})
    v, cond = decide(some, ["params", "gpus"], "m", ">=", 0.5)
    assert v == "holds under conditions"
    assert "models of at least 1T parameters and at least 64 GPUs" in cond
    # a region no single threshold describes is listed point by point
    diag = _grid({(1e9, 8): 0.9, (1e9, 64): 0.2, (1e12, 8): 0.3, (1e12, 64): 0.9})
    assert "holds only at 1B: 8 GPUs; 1T: 64 GPUs" in decide(diag, ["params", "gpus"], "m", ">=", 0.5)[1]
    # points that could not be evaluated are left out; none at all: not testable
    nan = _grid({(1e9, 8): np.nan})
    assert decide(nan, ["params", "gpus"], "m", ">=", 0.5)[0] == "not testable"


def test_conditions_name_the_metric_in_words_with_its_unit():
    """A condition reads 'communication share >= 0.5', not the column name 'comm_share >= 0.5'."""

    def grid(metric, op, thr, values):
        rows = [{"params": p, "gpus": g, metric: v} for (p, g), v in values.items()]
        return verdict_points(pd.DataFrame(rows), metric, op, thr)

    g = grid("comm_share", ">=", 0.5, {(1e9, 8): 0.1, (1e12, 64): 0.4})
    _, cond = decide(g, ["params", "gpus"], "comm_share", ">=", 0.5)
    assert cond.startswith("communication share >= 0.5 at none") and "communication share = 0.4" in cond
    assert "comm_share" not in cond
    from hnplan.planning.claims import Claim
    from hnplan.plots.claims import claim_figure

    c = Claim(
        "x", "000", "text", "exp", "does not hold", cond, {"threshold": 0.5}, g, "comm_share", ">=", ("params", "gpus")
    )
    fig = claim_figure(c)
    assert fig.layout.yaxis.title.text == "communication share [-]"
    assert fig.layout.annotations[0].text == "claim: communication share >= 0.5"
    d = grid("days", "<=", 7.0, {(1e9, 8): 75.3})
    _, cond = decide(d, ["params", "gpus"], "days", "<=", 7.0, " days")
    assert cond.startswith("time to train <= 7 days at none") and "time to train = 75.3 days" in cond
    i = grid("iops", ">=", 1e6, {(1e9, 8): 389e3})
    assert decide(i, ["params", "gpus"], "iops", ">=", 1e6)[1].startswith("IOPS >= 1M operations/s at none")


def test_summary_is_generated_from_the_verdicts(claims):
    text = audit_summary(list(claims.values()))
    assert text.startswith(f"Of {len(claims)} claims:")
    for v in VERDICTS:
        n = sum(c.verdict == v for c in claims.values())
        assert (f"{n} {v}" in text) == (n > 0)


def test_a_verdict_flips_where_the_numbers_say():
    # the NIC claim: the same slowdowns, judged at a tolerance above the largest and below the smallest
    base = ct._nic(CAT, SMALL)
    at200 = base[base["nic_gbps"] == 200]["slowdown"]
    loose = ct.nic_200(CAT, AuditSetup(**{**SMALL.__dict__, "nic_tolerance": float(at200.max()) + 0.01}))
    tight = ct.nic_200(CAT, AuditSetup(**{**SMALL.__dict__, "nic_tolerance": float(at200.min()) - 0.01}))
    assert (loose.verdict, tight.verdict) == ("holds", "does not hold")


# -- same-chip baseline ----------------------------------------------------------------------------
def test_same_chip_baseline_differs_from_the_supernode_only_in_the_scaleup_domain():
    b = ct.same_chip_baseline(CAT, "hgx-b200-ib-xdr", "gb200-nvl72")
    s = CAT.system("gb200-nvl72")
    assert b.accelerator == s.accelerator == "gb200"
    assert (b.scaleout_fabric, b.scaleout_switch) == (s.scaleout_fabric, s.scaleout_switch)
    # 400 Gb/s per GPU on both: NVL72 4 NICs x 400 per 4-GPU tray, the server 8 NICs per 8 GPUs
    assert b.nic_gbps * b.nics_per_node / b.node_gpus == pytest.approx(400.0)
    assert (b.scaleup_domain_gpus, s.scaleup_domain_gpus) == (8, 72)


def test_traditional_claims_run_over_the_nic_rate(claims):
    pts = claims["comm-share-traditional"].points
    assert sorted(pts["nic_gbps"].unique()) == [100.0, 400.0]
    # at the baseline's own rate the grid point is the baseline itself
    base = ct.same_chip_baseline(CAT, "hgx-b200-ib-xdr", "gb200-nvl72")
    assert ct.with_nic(base, 400) is base
    row = pts[(pts["nic_gbps"] == 400) & (pts["gpus"] == 576) & (pts["model"] == "megatron-18.4b")].iloc[0]
    assert row["comm_share"] == pytest.approx(ct.plan_point(CAT, "megatron-18.4b", base, 576, SMALL)["comm_share"])


def test_comm_reduction_reports_the_chip_separately(claims):
    n = claims["comm-reduction-80"].numbers
    # against an older chip the supernode looks much faster than against the same chip
    assert n["chip_and_fabric_speedup"] > n["same_chip_speedup"] > 0.9


# -- hand-derived numbers --------------------------------------------------------------------------
def test_plan_point_shares_are_the_breakdown_fractions():
    p = ct.plan_point(CAT, "megatron-18.4b", "hgx-b200-ib-xdr", 576, SMALL)
    assert p["comm_share"] == pytest.approx(p["comm_s"] / p["step_time_s"])
    assert p["scaleout_share"] <= p["comm_share"] + 1e-12
    assert p["tokens_per_s"] == pytest.approx(576 * 2048 / p["step_time_s"])


def test_trillion_claim_numbers(claims):
    c = claims["trillion-llm-1280-gpus-7-days"]
    # (4,096 GPUs x 30 days) / (1,280 GPUs x 7 days) = 13.71x more work per GPU per day
    assert c.numbers["needed_per_gpu_ratio"] == pytest.approx(4096 * 30 / (1280 * 7))
    # the token budget takes the baseline 30 days; days on the supernode = budget / its tokens/s
    assert c.numbers["token_budget"] == pytest.approx(c.numbers["baseline_tokens_per_s_4096"] * 30 * units.DAY)
    row = c.points.iloc[0]
    assert row["days"] == pytest.approx(c.numbers["token_budget"] / row["tokens_per_s"] / units.DAY)
    assert c.verdict == ("holds" if row["days"] <= 7 else "does not hold")


def test_seed_node_is_not_checked_against_itself(claims):
    c = claims["seed-node-40-cards"]
    assert c.verdict == "not testable" and "datasheet" in c.condition
    # the seed's totals over 40 cards: 28 PFLOPS -> 700 TFLOPS, 5.76 TB -> 144 GB, 150 kW -> 3.75 kW
    assert (
        c.numbers["implied_fp8_tflops_per_card"],
        c.numbers["implied_hbm_gb_per_card"],
        c.numbers["implied_kw_per_card"],
    ) == pytest.approx((700, 144, 3.75))


def test_seed_node_becomes_testable_only_with_sourced_card_figures():
    from hnplan.planning.claims_other import _seed_derived

    seed, b200 = CAT.accelerator("seed-40card-accelerator"), CAT.accelerator("b200")
    assert [_seed_derived(seed, f) for f in ("dense_tflops.fp8", "hbm_gb", "tdp_w")] == [True, True, True]
    assert [_seed_derived(b200, f) for f in ("dense_tflops.fp8", "hbm_gb", "tdp_w")] == [False, False, False]


def test_density_rdma_and_cxl_numbers(claims):
    # NVL72: 72 GPUs x 5,000 TFLOPS fp8 = 360 PFLOPS per rack; an HGX B200 server: 8 x 4,500 = 36 PFLOPS
    # at 14.3 kW, so 2 per 40 kW air-cooled rack (ratio 5.0) and 9 per 140 kW liquid-cooled rack (1.11)
    c = claims["compute-density-3x"]
    assert c.points["density_ratio"].tolist() == pytest.approx([360 / (36 * n) for n in range(1, 10)])
    assert (c.numbers["servers_per_rack_air"], c.numbers["servers_per_rack_liquid"]) == (2, 9)
    assert c.verdict == "holds under conditions" and "at most 3 servers per rack" in c.condition
    # RoCE at 100 Gb/s: 12.5 GB/s x 0.92 = 11.5 GB/s; 5x over TCP needs TCP at 2.3 GB/s
    n = claims["allreduce-rdma-5-8x-over-tcp"].numbers
    assert (n["rdma_busbw_GBps_at_100g"], n["tcp_busbw_GBps_for_5x"]) == pytest.approx((11.5, 2.3))
    # 128 TB at 16 bytes of training state per parameter holds 8e12 parameters; 4 TB per node
    n = claims["cxl-pool-128tb-32-nodes"].numbers
    assert (n["largest_model_params_whose_state_fits"], n["pool_tb_per_node"]) == pytest.approx((8e12, 4.0))


def test_rdma_claims_become_testable_with_a_tcp_transport(tmp_path):
    # a TCP transport at a sixth of RoCE's efficiency and the same latencies: large buffers run 6x slower
    path = tmp_path / "tcp-100g.yaml"
    path.write_text(
        "id: tcp-100g\nname: NCCL over kernel TCP (test)\nkind: scale-out\ntechnology: kernel TCP\n"
        f"bw_efficiency: {0.92 / 6}\nlink_latency_ns: 200\nswitch_latency_ns: 600\n"
        "software_overhead_us: 4.0\nsource: test entry of the claims audit\n"
        "assumptions: {bw_efficiency: test value, software_overhead_us: test value}\n"
    )
    setup = AuditSetup(tcp_interconnect=str(path))
    c5, c65 = audit(setup, only=["allreduce-rdma-5-8x-over-tcp", "grad-sync-rdma-minus-65"])
    # ring: 2(p-1) alpha + 2(p-1)/p n / (12.5 GB/s x eff); alpha = 4 us + 4 x 200 ns + 3 x 600 ns = 6.6 us
    for _, r in c5.points.iterrows():
        n, p = r["size_bytes"], r["ranks"]
        t = [2 * (p - 1) * 6.6e-6 + 2 * (p - 1) / p * n / (12.5e9 * e) for e in (0.92, 0.92 / 6)]
        assert (r["rdma_s"], r["tcp_s"], r["speedup"]) == pytest.approx((t[0], t[1], t[1] / t[0]))
    assert np.allclose(c65.points["time_cut"], 1 - 1 / c5.points["speedup"])
    assert c5.verdict in ("holds", "holds under conditions") and c65.verdict in ("holds", "holds under conditions")


def test_standin_10t_has_ten_trillion_parameters():
    m = ct.standin_10t(CAT)
    # 12 L h^2 = 12 x 320 x 51,200^2 = 1.0066e13, plus embeddings (51,200 + 2,048) x 51,200
    assert param_counts(m).total == pytest.approx(12 * 320 * 51200**2 + (51200 + 2048) * 51200, rel=1e-3)


def test_iops_claim_numbers(claims):
    c = claims["storage-1m-iops"]
    img = c.points[c.points["data"] == "images"].dropna(subset=["tokens_per_s"])
    # one 108 KB image (one 128 KiB read) per 196 tokens
    assert np.allclose(img["iops"], img["tokens_per_s"] / 196)
    assert np.allclose(img["read_GBps"], img["tokens_per_s"] / 196 * 108e3 / 1e9)
    # AI400X2: 90 GB/s and 3M IOPS per appliance
    need = np.maximum(img["read_GBps"] / 90, img["iops"] / 3e6)
    assert np.array_equal(img["storage_units"].to_numpy(), np.maximum(1, np.ceil(need)).to_numpy())
    assert c.numbers["units_for_1m_iops"] == 1
    assert (c.verdict == "does not hold") == bool((img["iops"] < 1e6).all())


def test_scoring_and_cost_numbers(claims):
    c = claims["scoring-32k-per-node-8ms"]
    sup = c.points[c.points["system"] == "gb200-nvl72"]
    assert (sup["holds"] == (sup["requests_per_s_per_node"] >= 32000)).all()
    c = claims["training-cost-60"]
    r = c.points.iloc[0]
    # $ per million tokens = $/GPU-hour x GPUs / (tokens/s x 3,600) x 1e6
    assert r["usd_per_mtok_super"] == pytest.approx(
        r["usd_per_gpu_hour_super"] * r["gpus"] / (r["tokens_per_s_super"] * 3600) * 1e6
    )
    assert r["cost_reduction"] == pytest.approx(1 - r["usd_per_mtok_super"] / r["usd_per_mtok_base"])


def test_hot_swap_changes_spares_not_the_jobs_downtime(claims):
    c = claims["hot-swap-no-downtime"]
    hot, cold = c.points.iloc[0], c.points.iloc[1]
    assert hot["hot_swap"] and not cold["hot_swap"] and hot["failure_unit_gpus"] == 1
    assert hot["spare_gpus"] < cold["spare_gpus"]
    assert c.verdict == ("holds" if (c.points["downtime_per_failure_s"] <= 0).all() else "does not hold")


def test_cluster_claims_come_from_the_simulation(claims):
    """The utilisation and fragmentation verdicts read the simulated grid over independent job streams:
    a point holds when its whole 95 % interval is on the claim's side, fails when it is wholly on the
    other, and is undecided when it straddles the threshold; the condition names the job mix, the
    policy, the offered loads and the undecided points."""
    ids = ("utilisation-40-to-70", "fragmentation-below-30", "utilisation-below-50", "concurrent-512-jobs-92")
    for cid in ids:
        c = claims[cid]
        p = c.points
        assert c.verdict in ("holds", "does not hold", "holds under conditions", "undecided"), c.condition
        assert "job mix 'default'" in c.condition and "topology-aware" in c.condition
        assert f"the mean of {SMALL.cluster_replications} independent streams" in c.condition
        assert (
            set(p["offered_load"]) == set(SMALL.cluster_loads)
            and (p["replications"] == SMALL.cluster_replications).all()
        )
        assert p["utilisation"].between(0, 1).all()
        assert (p["utilisation_low"] <= p["utilisation"]).all() and (p["utilisation"] <= p["utilisation_high"]).all()
        ev = p["holds"].dropna().astype(bool)
        undecided = p["verdict_ci"].eq("undecided")
        assert (p.loc[undecided, "holds"].isna()).all() and c.numbers["points_undecided"] == int(undecided.sum())
        if undecided.any():
            assert "undecided (the interval straddles the threshold)" in c.condition
        if ev.empty:
            assert c.verdict == "undecided"
        elif ev.all():
            assert c.verdict == ("holds under conditions" if undecided.any() else "holds")
        else:
            assert c.verdict == ("does not hold" if not ev.any() else "holds under conditions")
    p = claims["utilisation-40-to-70"].points
    for _, g in p.groupby("offered_load"):
        t, s = (g[g["design"] == d].iloc[0] for d in (SMALL.cluster_traditional, SMALL.supernode))
        want = (
            True
            if t["utilisation_high"] < 0.40 and s["utilisation_low"] >= 0.70
            else False
            if t["utilisation_low"] >= 0.40 or s["utilisation_high"] < 0.70
            else None
        )
        assert (g["verdict_ci"] == {True: "holds", False: "fails", None: "undecided"}[want]).all()
    p = claims["fragmentation-below-30"].points
    part = p[p["design"].str.endswith("lines")]
    want = np.where(
        part["utilisation_high"] < 0.30, "holds", np.where(part["utilisation_low"] >= 0.30, "fails", "undecided")
    )
    assert (part["verdict_ci"] == want).all() and p.loc[~p.index.isin(part.index), "holds"].isna().all()
    p = claims["utilisation-below-50"].points
    want = np.where(p["utilisation_high"] < 0.50, "holds", np.where(p["utilisation_low"] >= 0.50, "fails", "undecided"))
    assert (p["verdict_ci"] == want).all()
    p = claims["concurrent-512-jobs-92"].points
    fails = (p["concurrent_jobs_high"] < 512) | (p["utilisation_high"] < 0.92)
    assert (p.loc[fails, "verdict_ci"] == "fails").all()


# -- properties ------------------------------------------------------------------------------------
@settings(max_examples=6, deadline=None)
@given(st.sampled_from([50.0, 100.0, 200.0, 400.0, 800.0]), st.sampled_from([0.25, 0.5]))
def test_less_scaleout_bandwidth_never_lowers_the_communication_share(nic, factor):
    base = ct.same_chip_baseline(CAT, "hgx-b200-ib-xdr", "gb200-nvl72")
    plan = ParallelPlan(tp=8, pp=4, dp=18, zero_stage=1, recompute="selective")
    fast, slow = (
        estimate_training_step("megatron-18.4b", ct.with_nic(base, r), 576, plan, 2048, 576, catalog=CAT)
        for r in (nic, nic * factor)
    )
    share = [sum(e.breakdown_s[k] for k in ct.COMM_PARTS) / e.step_time_s for e in (fast, slow)]
    assert share[1] >= share[0] - 1e-12 and slow.step_time_s >= fast.step_time_s - 1e-12


def test_best_plan_step_never_shortens_with_slower_nics():
    base = ct.same_chip_baseline(CAT, "hgx-b200-ib-xdr", "gb200-nvl72")
    steps = [
        ct.plan_point(CAT, "megatron-18.4b", ct.with_nic(base, r), 576, SMALL)["step_time_s"] for r in (400, 200, 100)
    ]
    assert steps == sorted(steps)


# -- command line and notebook ---------------------------------------------------------------------
def test_cli_json_and_bad_id():
    r = CliRunner().invoke(
        app, ["claims", "--only", "compute-density-3x", "--only", "cxl-pool-128tb-32-nodes", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [d["id"] for d in out] == ["compute-density-3x", "cxl-pool-128tb-32-nodes"]
    assert all(tuple(d) == JSON_KEYS for d in out)
    r = CliRunner().invoke(app, ["claims", "--only", "comm-share"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["claims", "--only", "compute-density-3x"])  # in words, whatever the width
    assert r.exit_code == 0 and "density_ratio" not in r.output and "servers_per_rack" not in r.output
    assert out[0]["condition"].startswith("density ratio >= 3: ")


@pytest.mark.notebook
def test_claims_notebook(tmp_path, claims):
    _, html = run_notebook("claims_audit", SMALL_PARAMS["claims_audit"], tmp_path)
    assert 'id="key-table"' in html and "What this means" in html
    assert plotly_divs(html) == sum(len(c.points) > 0 for c in claims.values())
    for c in claims.values():
        assert c.id in html
    assert f"Of {len(claims)} claims" in html
    assert table_problems(html) == []  # headers in words with units ("step time, supernode [s]"), no nan cells


def test_hot_swap_goodput_charges_the_gpus_in_repair(claims):
    p = claims["hot-swap-no-downtime"].points
    # same job goodput; hot swap keeps fewer GPUs out of service, so more goodput per GPU held
    assert p["job_goodput"].iloc[0] == pytest.approx(p["job_goodput"].iloc[1])
    assert np.allclose(p["goodput"], p["job_goodput"] * 1280 / (1280 + p["gpus_in_repair"]))
    assert p["goodput"].iloc[0] > p["goodput"].iloc[1]


def test_deploy_claim_comes_from_the_bill_of_materials(claims):
    from hnplan.planning.design import deployment_time

    c = claims["deploy-hours-not-weeks"]
    p = c.points
    assert c.verdict != "not testable" and {"seed-40card", "gb200-nvl72"} <= set(p["system"])
    assert np.allclose(p["deploy_days"], p["install_days"] + p["commission_days"])
    row = p.iloc[0]
    assert row["deploy_days"] == pytest.approx(deployment_time(row["system"], int(row["gpus"]))["deploy_days"])
    assert (c.verdict == "does not hold") == bool((p["deploy_days"] > 1).all())


def test_cxl_pool_claim_runs_the_planner_with_and_without_the_pool(claims):
    c = claims["cxl-pool-128tb-32-nodes"]
    p = c.points
    assert c.verdict != "not testable"
    assert c.numbers["pool_GBps_per_gpu"] == pytest.approx(64 / 40)  # one x16 CXL 2.0 port per 40-card node
    both = p["fits_hbm"].astype(bool) & p["fits_pool"].astype(bool)
    assert (p.loc[both, "step_s_pool"] <= p.loc[both, "step_s_hbm"] + 1e-9).all()  # a pool never slows a plan
    assert np.allclose(p.loc[both, "pool_speedup"], p.loc[both, "step_s_hbm"] / p.loc[both, "step_s_pool"])


def test_tiering_claim_is_the_exposed_offload_share(claims):
    c = claims["tiering-hbm-ddr-ssd-prefetch"]
    p = c.points.dropna(subset=["exposed_share"])
    assert c.verdict != "not testable" and len(p)
    assert (p["offloaded_gib"] > 0).all()
    assert np.allclose(p["exposed_share"], p["offload_exposed_s"] / p["step_time_s"])
