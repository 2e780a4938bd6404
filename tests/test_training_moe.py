"""MoE as it runs: all-to-all bytes per token, routing imbalance, EP placement, multi-token prediction."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.comm.messages import ep_alltoall_bytes, ep_token_bytes, random_routing_peak
from hnplan.planning.training import ParallelPlan, estimate_training_step, make_job, moe
from hnplan.planning.training import collectives as coll
from hnplan.planning.training import components as c


def _plans(**kw):
    base = dict(tp=1, cp=1, ep=8, dp=8, pp=1, microbatch_size=1, recompute="none", virtual_stages=1, zero_stage=1)
    base.update(kw)
    return pd.DataFrame({k: [v] for k, v in base.items()})


def test_deepseek_v3_dispatch_and_combine_bytes_by_hand(cat):
    # hidden 7168: FP8 dispatch is 7168 x 1 B + 7168 / 128 = 56 fp32 scales x 4 B = 7,392 B a token copy,
    # the bf16 combine 7168 x 2 = 14,336 B (DeepSeek-V3 report Sec. 3.3.2; DeepEP: FP8 dispatch, BF16 combine)
    assert ep_token_bytes(7168, fp8=True) == 7392.0
    assert ep_token_bytes(7168) == 14336.0
    # a 4,096-token micro-batch, top-8: 32,768 copies; the busiest rank at 1.2 x the mean gets 39,321.6
    d, comb = ep_alltoall_bytes(cat.model("deepseek-v3"), 4096, fp8_dispatch=True, imbalance=1.2)
    assert d == pytest.approx(4096 * 8 * 1.2 * 7392)
    assert comb == pytest.approx(4096 * 8 * 1.2 * 14336)
    # Mixtral 8x7B (hidden 4096, top-2) in bf16: 4096 x 2 x 8192 B = 64 MiB each way
    d, comb = ep_alltoall_bytes(cat.model("mixtral-8x7b"), 4096)
    assert d == comb == 64 * 2**20


def test_fp8_dispatch_only_in_fp8_training_and_cheaper(cat):
    df = _plans()
    t = {}
    for dtype in ("bf16", "fp8"):
        for fp8 in (False, True):
            job = make_job("deepseek-v3", "hgx-h800-ib", 64, 4096, 64, dtype, cat, overrides={"ep_dispatch_fp8": fp8})
            t[dtype, fp8] = float(moe.ep_comm_per_microbatch(job, df, np.array([1]))[0])
    assert t["bf16", True] == t["bf16", False]  # no FP8 dispatch in a bf16 run
    # the dispatch shrinks to 7,392 / 14,336 of its bytes, the combine does not: between 1/2 and 1 of the time
    assert 0.5 * t["fp8", False] < t["fp8", True] < t["fp8", False]


def test_all_to_all_passes_per_layer(cat):
    # dispatch + combine forward, their mirrors backward, and the forward pair again with full recomputation
    job = make_job("mixtral-8x7b", "hgx-h100-ib-ndr", 64, 4096, 64, "bf16", cat)
    none = float(moe.ep_comm_per_microbatch(job, _plans(), np.array([1]))[0])
    full = float(moe.ep_comm_per_microbatch(job, _plans(recompute="full"), np.array([1]))[0])
    peak = float(random_routing_peak(4096, 2, 8, 8)[0])  # the busiest of 8 ranks under random routing
    one = float(
        coll.collective_s(job, "alltoall", np.array([4096 * peak * 2 * 8192.0]), np.array([8]), np.array([1]))[0]
    )
    assert none == pytest.approx(4 * one, rel=1e-12)
    assert full == pytest.approx(6 * one, rel=1e-12)
    assert float(moe.ep_comm_per_microbatch(job, _plans(), np.array([3]))[0]) == pytest.approx(3 * none)


@settings(max_examples=12, deadline=None)
@given(lo=st.floats(1.0, 2.0), step=st.floats(0.0, 1.0))
def test_more_imbalance_is_never_faster(cat, lo, step):
    plan = ParallelPlan(tp=1, pp=2, dp=8, ep=8, microbatch_size=1)
    out = [
        estimate_training_step(
            "mixtral-8x7b", "hgx-h100-ib-ndr", 16, plan, 4096, 64, catalog=cat, overrides={"moe_load_imbalance": x}
        )
        for x in (lo, lo + step)
    ]
    assert out[1].step_time_s >= out[0].step_time_s
    assert out[1].breakdown_s["ep_comm_exposed"] >= out[0].breakdown_s["ep_comm_exposed"]
    assert out[1].breakdown_s["compute"] >= out[0].breakdown_s["compute"]


def test_imbalance_scales_the_routed_experts_only(cat):
    # at 1.5 x the mean tokens the busiest rank's routed-expert GEMMs and permutation take 1.5 x as long;
    # attention, router, shared expert, embedding and head do not change
    df = _plans(pp=1, dp=8)
    jobs = {
        x: make_job("deepseek-v3", "hgx-h800-ib", 64, 4096, 64, "fp8", cat, overrides={"moe_load_imbalance": x})
        for x in (1.0, 1.5)
    }
    from hnplan.compute.parts import training_part_times

    lt = training_part_times(
        cat.model("deepseek-v3"),
        jobs[1.0].kernel_acc,
        df[["microbatch_size", "tp", "cp", "ep"]],
        4096,
        "fp8",
        stack=jobs[1.0].choices,  # the job's stack: its expert GEMMs per expert on four streams
    )
    routed = float(lt["moe_routed_fwd"].iloc[0] + lt["moe_routed_bwd"].iloc[0])
    assert 0 < routed < float(lt["moe_fwd"].iloc[0] + lt["moe_bwd"].iloc[0])
    base = c.compute_per_microbatch(jobs[1.0], df)
    more = c.compute_per_microbatch(jobs[1.5], df)
    # pp = 1: the one stage holds the 58 MoE layers and the multi-token-prediction module's MoE layer
    moe_layers = float(base["moe_layers"].iloc[0])
    assert moe_layers == 59
    # both on top of the busiest rank's random-routing peak (4,096 tokens, top-8 of 256 over 8 ranks)
    peak = float(random_routing_peak(4096, 8, 256, 8)[0])
    assert float(more["t_compute_mb"].iloc[0] - base["t_compute_mb"].iloc[0]) == pytest.approx(
        0.5 * peak * moe_layers * routed
    )
    # and the all-to-all of the busiest rank carries 1.5 x the bytes
    t1 = moe.ep_comm_per_microbatch(jobs[1.0], df, np.array([1]))[0]
    t15 = moe.ep_comm_per_microbatch(jobs[1.5], df, np.array([1]))[0]
    # the all-to-all is bandwidth-bound (the per-peer latency is 0.6 % of it), so its
    # time grows as its bytes: 1.5 x, less the fixed latency share (1.497 x here)
    assert t15 == pytest.approx(1.5 * t1, rel=0.005) and t15 < 1.5 * t1


@pytest.mark.parametrize("ep", [8, 16, 32, 64])
def test_ep_inside_nvl72_never_slower_than_across_infiniband(cat, ep):
    # the same EP group of B200-class GPUs: inside one NVL72 NVLink domain vs over 400G NICs between
    # 8-GPU servers (one NVLink 5 server for EP 8)
    df = _plans(ep=ep, dp=ep)
    t = {
        s: float(moe.ep_comm_per_microbatch(make_job("deepseek-v3", s, 64, 4096, 64, "fp8", cat), df, np.array([1]))[0])
        for s in ("gb200-nvl72", "dgx-b200-ib-ndr")
    }
    assert t["gb200-nvl72"] <= t["dgx-b200-ib-ndr"] * (1 + 1e-9)
    if ep > 8:  # across servers the 50 GB/s NICs, not NVLink, set the pace: strictly slower
        assert t["gb200-nvl72"] < 0.7 * t["dgx-b200-ib-ndr"]


def test_mtp_module_sits_on_the_last_stage(cat):
    # DeepSeek-V3 trains one multi-token-prediction module: on the last stage, one more MoE layer and
    # one more pass through the output head and loss
    model = cat.model("deepseek-v3")
    assert model.mtp_modules == 1
    job = make_job(model, "hgx-h800-ib", 256, 4096, 256, "fp8", cat)
    plain = make_job(model.model_copy(update={"mtp_modules": 0}), "hgx-h800-ib", 256, 4096, 256, "fp8", cat)
    df = _plans(pp=16, dp=16, ep=16)
    with_mtp = c.compute_per_microbatch(job, df, per_stage=True)
    without = c.compute_per_microbatch(plain, df, per_stage=True)
    assert np.allclose(with_mtp[:2], without[:2])  # first and middle stages unchanged
    assert with_mtp[2, 0, 0] > without[2, 0, 0]


def test_overlap_hides_only_the_steady_state_and_never_all(cat):
    # Mixtral 8x7B on 4 x 8 H100, EP 8 inside each server, PP 4: the 1F1B all-to-all overlap hides at most the
    # steady-state share 1 - (pp - 1) / m of the all-to-all, and what it hides still slows the compute beside it
    plan = ParallelPlan(tp=1, pp=4, dp=8, ep=8, microbatch_size=1)
    est = {
        s: estimate_training_step("mixtral-8x7b", "hgx-h100-ib-ndr", 32, plan, 4096, 64, catalog=cat, stack=s)
        for s in ("megatron-core", "megatron-core-ep-overlap")
    }
    exposed, overlapped = (est[s].breakdown_s["ep_comm_exposed"] for s in ("megatron-core", "megatron-core-ep-overlap"))
    m = est["megatron-core"].num_microbatches
    share = 1 - 3 / m
    assert share == pytest.approx(float(moe.ep_overlap_share(_plans(pp=4), m)[0]))
    # hidden = 0.36 (the stack's fitted fraction) x share x exposed (each half of the all-to-all is shorter than
    # the partner's compute beside it here); exposed: the rest + 0.18 x hidden
    hidden = 0.36 * share * exposed
    assert overlapped == pytest.approx(exposed - hidden + 0.18 * hidden, rel=1e-9)
    assert 0 < overlapped < exposed


def test_alltoall_runs_at_the_library_bandwidth(cat):
    # 8 B200 in one server, EP 8: the pairwise all-to-all of S bytes moves 7/8 S per rank over NVLink 5 at
    # the catalog's alltoall_efficiency (DeepEP V2 on SM100: 0.64 x 900 GB/s), not at the ring's 0.772
    job = make_job("mixtral-8x7b", "dgx-b200-ib-ndr", 8, 4096, 8, "bf16", cat)
    g = job.group(8, 1)
    assert g.up.alltoall_bw_Bps == pytest.approx(0.64 * 900e9)
    s = 4096 * 2 * 8192.0  # Mixtral: 4,096 tokens x top-2 x 8,192 B
    t = float(coll.collective_s(job, "alltoall", np.array([s]), np.array([8]), np.array([1]))[0])
    assert t == pytest.approx(7 * g.up.alpha_s + 7 / 8 * s / (0.64 * 900e9), rel=1e-9)


def test_dualpipe_bubble_by_its_formula(cat):
    # arXiv:2412.19437 Table 2: 1F1B bubble (PP - 1)(F + B), DualPipe (PP/2 - 1)(F&B + B - 3W); PP 4, no virtual
    # stages: DualPipe's bubble is 1 x (t_mb + B - 3 W) where 1F1B's is the other 3 stages' micro-batch times
    plan = ParallelPlan(tp=1, pp=4, dp=8, ep=8, microbatch_size=1)
    est = {
        s: estimate_training_step(
            "mixtral-8x7b", "hgx-h100-ib-ndr", 32, plan, 4096, 64, catalog=cat, overrides={"pipeline_schedule": s}
        )
        for s in ("1f1b", "dualpipe")
    }
    one = est["1f1b"]  # step = m t_mb + bubble + t_dp + t_opt, t_mb the slowest stage's
    rest = sum(one.breakdown_s[k] for k in ("pp_bubble", "dp_comm_exposed", "optimizer", "offload_exposed"))
    t_mb = (one.step_time_s - rest) / one.num_microbatches
    job = make_job("mixtral-8x7b", "hgx-h100-ib-ndr", 32, 4096, 64, "bf16", cat)
    stages = c.compute_per_microbatch(job, _plans(pp=4, dp=8, ep=8), per_stage=True)
    # Mixtral: 32 MoE layers, 8 a stage; the middle stage holds neither embedding nor head
    last = stages[2, :, 0]  # the last stage (8 layers + head) is the slowest in compute and communication alike
    b, w = last[2], last[6]
    assert 0 < w < b
    assert est["dualpipe"].breakdown_s["pp_bubble"] == pytest.approx(1 * (t_mb + b - 3 * w), rel=1e-9)
    assert est["dualpipe"].step_time_s < est["1f1b"].step_time_s
    # odd PP: the 1F1B bubble
    odd = ParallelPlan(tp=1, pp=1, dp=32, ep=8, microbatch_size=1)
    a, d = (
        estimate_training_step(
            "mixtral-8x7b", "hgx-h100-ib-ndr", 32, odd, 4096, 64, catalog=cat, overrides={"pipeline_schedule": s}
        ).step_time_s
        for s in ("1f1b", "dualpipe")
    )
    assert a == d


def _router_domains(rng, tokens, experts, k, groups, g, per_domain):
    """Distinct domains per token under group-limited top-k on random scores (Megatron-Core's
    ``group_limited_topk`` with force-balanced random logits), experts placed contiguously."""
    s = rng.standard_normal((tokens, experts))
    group_score = np.sort(s.reshape(tokens, groups, -1), axis=2)[:, :, -(k // g) :].sum(axis=2)
    chosen = np.argsort(-group_score, axis=1)[:, :g]
    mask = np.full((tokens, groups), -np.inf)
    np.put_along_axis(mask, chosen, 0.0, axis=1)
    top = np.argsort(-(s + np.repeat(mask, experts // groups, axis=1)), axis=1)[:, :k]
    dom = np.sort(top // per_domain, axis=1)
    return float(np.mean(1 + (np.diff(dom, axis=1) > 0).sum(axis=1)))


def test_comb_is_scipys_to_the_last_bit():
    # the generalised binomial coefficient of expected_domains, multiplied up as scipy.special.comb does for a
    # whole k under 20: the same floats over whole and fractional n (experts less experts a domain, groups less
    # groups a domain), n below k (0) and negative n (0); C(256, 8) = 409,663,695,276,000 by hand
    from scipy.special import comb as scipy_comb

    assert float(moe.comb(256.0, 8.0)[0]) == 409_663_695_276_000.0
    rng = np.random.default_rng(3)
    n = np.concatenate(
        [np.arange(0.0, 520.0), rng.uniform(0, 520, 2000), 256 - 256 / np.arange(1, 300), 8 - np.arange(300) / 37]
    )
    n = np.append(n, [-1.0, -2.5])
    for k in range(20):
        assert np.array_equal(moe.comb(n, float(k)), scipy_comb(n, float(k)))
    assert np.array_equal(moe.comb(n, 2.5), scipy_comb(n, 2.5))  # not a whole k: scipy's own answer


def test_random_routing_quantile_is_scipys_within_rounding():
    # Blom's normal quantile of the busiest of ep ranks, by the standard library (AS 241) rather than
    # scipy.special.ndtri: within a few units in the last place for every EP size up to 4,096
    from scipy.special import ndtri

    from hnplan.comm.messages import _blom_probability, _normal_quantile, random_routing_peak_one

    ep = np.arange(2.0, 4097.0)
    p = _blom_probability(ep)
    assert np.allclose(_normal_quantile(p), ndtri(p), rtol=1e-14, atol=0)
    for e in (2, 8, 64, 256):  # the scalar form the serving path takes gives the same numbers
        assert random_routing_peak_one(4096.0, 8, 256, e) == float(random_routing_peak(4096.0, 8, 256, e)[0])


@pytest.mark.parametrize("domains", [2, 4, 8, 16, 32])
def test_expected_domains_against_the_router(domains):
    # DeepSeek-V3's router: 256 experts in 8 groups, top-8 from the best 4 groups; the closed form is within
    # 8 % of a simulation of the router and never below it (the cross-domain traffic is not under-counted)
    rng = np.random.default_rng(7)
    sim = _router_domains(rng, 4000, 256, 8, 8, 4, 256 // domains)
    model = float(moe.expected_domains(256, 8, 8, 4, domains)[0])
    assert sim * 0.995 <= model <= sim * 1.08
    assert model <= min(8, domains, 4 * -(-domains // 8))  # within the node-limited maximum


def test_cross_domain_all_to_all_carries_the_expected_domains(cat):
    # DeepSeek-V3 at TP 2, EP 64 on 8-GPU H100 servers: the EP group spans 16 servers, 4 ranks a server,
    # 16 experts a server, each group of 32 experts on 2 servers; a token with 2 experts in each of its 4
    # groups reaches 4 x 2 x (1 - C(16, 2) / C(32, 2)) = 4 x 2 x (1 - 120 / 496) = 6.065 servers on average
    # (the maximum, 8, only when every pair splits), so the RDMA leg carries 6.065 copies of each token
    job = make_job("deepseek-v3", "hgx-h100-ib-ndr", 1024, 4096, 1024, "fp8", cat, stack="megatron-core-ep-overlap")
    df = _plans(tp=2, ep=64, dp=64, pp=8)
    assert job.group(64, 2).domains == 16 and job.group(64, 2).per_domain == 4
    reach = 4 * 2 * (1 - 120 / 496)
    # and its 2 experts in each chosen group of 32 experts (8 ranks of 4) sit on 4 x 8 x (1 - C(28, 2) / C(32, 2))
    # = 7.61 of the 64 ranks, each of which receives the token once over NVLink
    ranks = 4 * 8 * (1 - 378 / 496)
    assert float(moe.expected_domains(256, 8, 8, 4, 64)[0]) == pytest.approx(ranks)
    tokens = 4096 / 2 * float(random_routing_peak(2048, 8, 256, 64)[0])  # the busiest rank's random-routing peak
    # the flex dispatcher crosses InfiniBand at 0.76 of the line rate where NCCL's all-to-all runs at 0.94
    # (ib-ndr-400 flex_alltoall_efficiency, bw_efficiency): NCCL's time of 0.94 / 0.76 times the bytes
    rdma = 0.94 / 0.76
    cross = sum(
        float(
            coll.collective_s(job, "alltoall", np.array([tokens * reach * b * rdma]), np.array([16]), np.array([8]))[0]
        )
        for b in (ep_token_bytes(7168), ep_token_bytes(7168))
    )
    inside = sum(
        float(coll.collective_s(job, "alltoall", np.array([tokens * ranks * b]), np.array([4]), np.array([2]))[0])
        for b in (ep_token_bytes(7168), ep_token_bytes(7168))
    )
    assert cross > inside  # the 50 GB/s NICs set the pace
    t = float(moe.ep_comm_per_microbatch(job, df, np.array([1]))[0])
    assert t == pytest.approx(2 * cross, rel=1e-9)  # forward and backward (no recomputation), dispatch + combine each


def test_permutation_bytes_by_dispatcher(cat):
    # DeepSeek-V3, 4,096 tokens a micro-batch, top-8: a = 32,768 copies of 7,168 bf16 elements. The flex dispatcher
    # (DeepEP / HybridEP) keeps only the local permute and its inverse: 2a h read and written; Megatron-Core's NCCL
    # all-to-all dispatcher adds the global permute (k copies written) and the global unpermute (summed into
    # 4,096 rows): 4a h read, (3a + 4096) h written; in bytes (x 2) the ratio is (7 x 8 + 1) / (4 x 8) = 57 / 32
    from hnplan.compute import operator_table

    model, acc = cat.model("deepseek-v3"), cat.accelerator("h800-sxm")
    fwd = {}
    for s in ("megatron-core", "megatron-core-ep-overlap"):
        t = operator_table(model, acc, "train", 1, 4096, ep=64, stack=cat.stack(s))
        row = t[(t["name"] == "moe_permute") & (t["phase"] == "fwd")]
        fwd[cat.stack(s).ep_dispatcher] = float(row["bytes"].sum())
    a, h = 4096 * 8, 7168
    assert fwd["flex"] == pytest.approx(2 * (2 * a * h + 2 * a * h))
    assert fwd["alltoall"] == pytest.approx(2 * (4 * a * h + (3 * a + 4096) * h))
    assert fwd["alltoall"] / fwd["flex"] == pytest.approx(57 / 32)


def test_flex_dispatch_merges_copies_per_node_and_rank_without_group_limits(cat):
    # Qwen3-30B-A3B (128 experts, top-8, no expert groups) at EP 32 over four 8-GPU H100 servers, 32 experts a
    # server and 4 a rank. Flex (DeepEP): a token crosses InfiniBand once per server its 8 experts sit on,
    # 4 (1 - C(96, 8) / C(128, 8)) = 3.63 servers, and reaches 32 (1 - C(124, 8) / C(128, 8)) = 7.37 ranks once
    # each; Megatron-Core's NCCL all-to-all sends all 8 copies, 3/4 of them off-server
    from math import comb

    domains = 4 * (1 - comb(96, 8) / comb(128, 8))
    ranks = 32 * (1 - comb(124, 8) / comb(128, 8))
    assert float(moe.expected_domains(128, 8, None, None, 4)[0]) == pytest.approx(domains)
    assert float(moe.expected_domains(128, 8, None, None, 32)[0]) == pytest.approx(ranks)
    df = _plans(ep=32, dp=32)
    jobs = {
        d: make_job("qwen3-30b-a3b", "hgx-h100-ib-ndr", 32, 4096, 32, "bf16", cat, overrides={"ep_dispatcher": d})
        for d in ("alltoall", "flex")
    }
    t = {d: float(moe.ep_comm_per_microbatch(j, df, np.array([1]))[0]) for d, j in jobs.items()}
    row = ep_token_bytes(2048) * float(random_routing_peak(4096, 8, 128, 32)[0])  # the busiest rank's share
    g = jobs["flex"].group(32, 1)
    assert (g.domains, g.per_domain) == (4, 8)
    # across InfiniBand at the flex dispatcher's 0.76 of the line rate, NCCL's 0.94 for the NCCL dispatcher
    cross = coll.collective_s(jobs["flex"], "alltoall", np.array([4096 * domains * row * 0.94 / 0.76]), [4], [8])[0]
    inside = coll.collective_s(jobs["flex"], "alltoall", np.array([4096 * ranks * row]), [8], [1])[0]
    assert t["flex"] == pytest.approx(4 * max(cross, inside), rel=1e-9)  # 2 passes x (dispatch + combine)
    flat = coll.collective_s(jobs["alltoall"], "alltoall", np.array([4096 * 8 * row]), [32], [1])[0]
    assert t["alltoall"] == pytest.approx(4 * flat, rel=1e-9)
    assert t["flex"] < 0.6 * t["alltoall"]


def test_flex_dispatch_inside_one_server_sends_a_token_once_per_rank(cat):
    # DeepSeek-V3 at EP 8 in one B200 server: each rank holds one expert group of 32, a token's 8 experts sit in 4
    # groups, so DeepEP / HybridEP send it to 4 ranks (DeepEP counts its NVLink bandwidth on these rows); the NCCL
    # all-to-all sends 8 copies
    df = _plans(ep=8, dp=8)
    assert float(moe.expected_domains(256, 8, 8, 4, 8)[0]) == 4.0
    row = ep_token_bytes(7168) * float(random_routing_peak(4096, 8, 256, 8)[0])  # the busiest rank's share
    for d, copies in (("alltoall", 8), ("flex", 4)):
        job = make_job("deepseek-v3", "dgx-b200-ib-ndr", 8, 4096, 8, "bf16", cat, overrides={"ep_dispatcher": d})
        one = float(coll.collective_s(job, "alltoall", np.array([4096 * copies * row]), [8], [1])[0])
        t = float(moe.ep_comm_per_microbatch(job, df, np.array([1]))[0])
        assert t == pytest.approx(4 * one, rel=1e-9)  # forward and backward, dispatch and combine


def test_random_routing_peak_against_a_simulation():
    # 64 ranks route 256 tokens each, top-8 of 256 experts at random (4 experts a rank): the busiest rank's
    # copies over the mean, averaged over 12 micro-batches, against the normal-order-statistics form; and the
    # properties: 1 at EP 1, smaller with more tokens a rank
    rng = np.random.default_rng(3)
    ep, tokens, k, experts = 64, 256, 8, 256
    peaks = []
    for _ in range(12):
        top = np.argpartition(rng.random((ep * tokens, experts)), k, axis=1)[:, :k]
        load = np.bincount((top // (experts // ep)).ravel(), minlength=ep)
        peaks.append(load.max() / load.mean())
    model = float(random_routing_peak(tokens, k, experts, ep)[0])
    assert model - 1 == pytest.approx(np.mean(peaks) - 1, rel=0.2)
    assert float(random_routing_peak(4096, 8, 256, 1)[0]) == 1.0
    assert random_routing_peak(16384, 8, 256, 64)[0] < random_routing_peak(4096, 8, 256, 64)[0]


def test_paired_halves_by_hand():
    # one stage, one micro-batch: 6 ms of all-to-all (3 ms forward half, 3 ms backward half); the partner pass
    # computes F = 2 ms forward and B = 5 ms backward, of which W = 1.5 ms weight gradient
    f, b, w = 2e-3, 5e-3, 1.5e-3
    # all paired, no slowdown: the forward half hides behind B - W = 3.5 ms (all of it), the backward half
    # behind F + W = 3.5 ms (all of it)
    assert float(moe.ep_paired_exposed(6e-3, f, b, w, 1.0, 0.0)) == pytest.approx(0.0, abs=1e-15)
    # with W = 0 the forward half still hides (B = 5 ms), the backward half only behind F = 2 ms: 1 ms out
    assert float(moe.ep_paired_exposed(6e-3, f, b, 0.0, 1.0, 0.0)) == pytest.approx(1e-3)
    # and at the 18 % slowdown the 3 + 2 ms hidden cost 0.18 x 5 ms of compute: 1 + 0.9 ms
    assert float(moe.ep_paired_exposed(6e-3, f, b, 0.0, 1.0, 0.18)) == pytest.approx(1e-3 + 0.18 * 5e-3)
    # fraction 0.44 x share 0.5 = 0.22 of each half (0.66 ms) hides: 2 x (3 - 0.82 x 0.66) ms exposed
    assert float(moe.ep_paired_exposed(6e-3, f, b, w, 0.22, 0.18)) == pytest.approx(2 * (3e-3 - 0.82 * 0.66e-3))
    # a pass's compute is not shared between the halves: one 6 ms half-pair against 7 ms of compute in all
    # hides less than min(6, 7) when the partner's backward is mostly weight gradient (B - W = 0.5 ms)
    assert float(moe.ep_paired_exposed(6e-3, f, b, 4.5e-3, 1.0, 0.0)) == pytest.approx(2.5e-3)


@settings(max_examples=60, deadline=None)
@given(
    t_ep=st.floats(0.0, 1e-2),
    f=st.floats(1e-4, 1e-2),
    b=st.floats(1e-4, 2e-2),
    w_share=st.floats(0.0, 1.0),
    share=st.floats(0.0, 1.0),
    slow=st.floats(0.0, 0.5),
)
def test_paired_exposure_bounded_and_falls_with_the_share(t_ep, f, b, w_share, share, slow):
    w = w_share * b
    out = float(moe.ep_paired_exposed(t_ep, f, b, w, share, slow))
    # never more than the whole all-to-all, never less than its slowdown cost, and more sharing never slower
    # (slowdown < 1)
    assert slow * t_ep * share - 1e-15 <= out <= t_ep + 1e-15
    assert float(moe.ep_paired_exposed(t_ep, f, b, w, min(1.0, share + 0.1), slow)) <= out + 1e-15


def test_one_f_one_b_overlap_gains_what_the_published_pair_gained():
    # Megatron-MoE-ModelZoo best_practice/Qwen3/readme.md: Qwen3-235B-A22B on 256 H100, the same layout at 19.7 s a
    # step without the 1F1B all-to-all overlap and 17.6 s with it (2.1 s, 2.0-2.2 s for the 0.1 s rounding); the
    # stack's ep_comm_overlap_fraction is fitted to it (data/stacks/megatron-core-ep-overlap.yaml)
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predict_run

    runs = {r.id: r for r in training_runs()}
    step = {
        k: float(predict_run(runs[f"moezoo-h100-qwen3-235b-a22b-256-deepep{k}"])["step_time_s"]) for k in ("", "-1f1b")
    }
    assert 2.0 <= step[""] - step["-1f1b"] <= 2.2
