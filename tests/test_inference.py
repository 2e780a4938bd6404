"""Inference planner: hand-derived decode time, monotonicity, memory limits, SLO search, queueing."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hnplan.compute import achievable_hbm_Bps, gemm_compute_s, kernel_overhead_s, operator_table, param_counts
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.planning.inference import (
    Replica,
    Traffic,
    best_under_tpot,
    decode_step,
    erlang_c,
    frontier,
    max_batch,
    max_throughput_point,
    memory_per_gpu_bytes,
    mgc_wait_s,
    operating_point,
    plan_for_rate,
    resolve,
    scoring_capacity,
    steady_state,
    usable_bytes_per_gpu,
    usd_per_million_tokens,
)

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def h100_8b(cat):
    return resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="bf16"), cat)


def test_decode_batch1_is_weights_plus_kv_over_bandwidth(cat, h100_8b):
    # Llama 3.1 8B, bf16, one H100, 1024 cached tokens.
    # weights read per step: 8.03e9 parameters x 2 bytes = 16.06 GB, less the input embedding table
    # (128256 x 4096 x 2 B = 1.05 GB: a decode step looks up one row, it does not stream the table)
    # = 15.01 GB; KV: 1024 tokens x 32 layers x 2 (K,V) x 8 heads x 128 x 2 B = 1024 x 131072 B = 134.2 MB;
    # achievable HBM 3.35 TB/s x 0.9 = 3.015 TB/s -> 5.03 ms, plus the fixed per-kernel term of every
    # operator launch (issue 3's kernel_overhead_us).
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    pc = param_counts(m)
    weights = 2.0 * (pc.total - pc.embedding)
    kv = 1024 * 131072.0
    assert weights == pytest.approx(15.01e9, rel=1e-3)
    d = decode_step(h100_8b, 1, 1024)
    assert d["bytes"] == pytest.approx(weights + kv, rel=0.01)  # activations are < 1% at batch 1
    df = operator_table(m, acc, "decode", 1, 1024, kv_len=1024)
    launches = df["count"].sum()
    # and the GEMM law's split-K reduction (3.09 us) on the GEMMs with fewer 64 x 128 tiles than SMs and K >= 2048
    gemms = df[df["kind"] == "gemm"]
    _, split = gemm_compute_s(acc, "bf16", gemms["m"], gemms["n"], gemms["k"])
    splitk = float((gemms["count"] * (split > 1)).sum()) * acc.gemm_splitk_us * 1e-6
    expected = (weights + kv) / achievable_hbm_Bps(acc) + launches * kernel_overhead_s(acc) + splitk
    assert d["compute_s"] == pytest.approx(expected, rel=0.01)
    assert d["time_s"] == d["compute_s"]  # tp = 1: no collectives


def test_fp8_kv_cache_halves_the_kv_reads(cat):
    bf = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="fp8", kv_dtype="bf16"), cat)
    f8 = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="fp8", kv_dtype="fp8"), cat)
    b, ctx = 64, 4096
    kv_bf16 = b * ctx * 131072.0
    assert decode_step(bf, b, ctx)["bytes"] - decode_step(f8, b, ctx)["bytes"] == pytest.approx(kv_bf16 / 2, rel=1e-6)


@FAST
@given(b1=st.integers(1, 250), b2=st.integers(1, 250))
def test_tpot_never_falls_as_batch_grows(h100_8b, b1, b2):
    lo, hi = sorted((b1, b2))
    p_lo = steady_state(h100_8b, lo, 1000, 500)
    p_hi = steady_state(h100_8b, hi, 1000, 500)
    assert p_hi.tpot_s >= p_lo.tpot_s
    assert p_hi.decode_s >= p_lo.decode_s


def test_frontier_is_monotone_in_tpot_and_memory(cat):
    df = frontier("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=4, dtype="fp8"), 2000, 500, catalog=cat)
    assert df["batch"].is_monotonic_increasing and len(df) > 5
    assert df["tpot_s"].is_monotonic_increasing
    assert df["memory_per_gpu_gib"].is_monotonic_increasing
    assert (df["memory_per_gpu_gib"] <= df["hbm_gib"]).all()


@pytest.mark.parametrize(
    "model,system,replica,ctx",
    [
        ("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="bf16"), 4096),
        ("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=2, dtype="fp8"), 2048),
        ("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, pp=2, dtype="fp8"), 8192),
        ("deepseek-v3", "gb200-nvl72", Replica(tp=1, ep=16, dtype="fp8"), 6000),
        ("mixtral-8x7b", "hgx-h100-ib-ndr", Replica(tp=2, ep=4, dtype="bf16"), 3000),
    ],
)
def test_memory_never_exceeds_hbm_at_max_batch(cat, model, system, replica, ctx):
    s = resolve(model, system, replica, cat)
    mb = max_batch(s, ctx)
    usable = usable_bytes_per_gpu(s)
    assert memory_per_gpu_bytes(s, mb, ctx) <= usable
    assert memory_per_gpu_bytes(s, mb + replica.groups, ctx) > usable  # and it is the largest
    p = steady_state(s, mb, ctx // 2, ctx // 2)
    assert p.memory_per_gpu_bytes <= p.hbm_bytes
    with pytest.raises(InfeasiblePlan, match="exceeds"):
        steady_state(s, mb + replica.groups, ctx // 2, ctx // 2)


def test_weights_that_do_not_fit_are_infeasible(cat):
    s = resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="bf16"), cat)
    with pytest.raises(InfeasiblePlan, match="weights"):
        max_batch(s, 1000)


def test_dtypes_bf16_fp8_fp4(cat):
    times = {}
    for dt in ("bf16", "fp8", "fp4"):
        s = resolve("llama3.1-70b", "gb200-nvl72", Replica(tp=1, dtype=dt), cat)
        times[dt] = decode_step(s, 1, 1000)["time_s"]
    # memory-bound at batch 1: halving the weight bytes halves the streaming part of the step; the fixed launch
    # and split-K costs of the GEMM law (about 2.8 ms over 80 layers) do not shrink with the bytes
    assert times["bf16"] / times["fp8"] == pytest.approx(2.0, rel=0.15)
    assert (times["bf16"] - times["fp8"]) / (times["fp8"] - times["fp4"]) == pytest.approx(2.0, rel=0.05)
    with pytest.raises(InputError, match="has no fp4 peak.*bf16, fp16, fp8"):
        resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=2, dtype="fp4"), cat)
    with pytest.raises(InputError, match="bf16, fp8, int8, fp4"):
        resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=2, dtype="int3"), cat)


def test_max_throughput_point_beats_its_neighbours(cat):
    s = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="fp8"), cat)
    best = max_throughput_point(s, 1000, 1000)
    for b in (max(1, best.batch // 2), best.batch - 1, best.batch + 1, 2 * best.batch):
        if b <= best.max_batch:
            assert steady_state(s, b, 1000, 1000).tokens_per_s <= best.tokens_per_s


def test_erlang_c_and_mgc_wait_closed_forms():
    # M/M/1: P(wait) = rho; W_q = rho S / (1 - rho). M/M/2: C = 2 rho^2 / (1 + rho) (Kleinrock Sec. 3.5)
    assert erlang_c(1, 0.7) == pytest.approx(0.7)
    rho = 0.6
    assert erlang_c(2, 2 * rho) == pytest.approx(2 * rho**2 / (1 + rho))
    assert mgc_wait_s(0.7, 1, 1.0, cs2=1.0) == pytest.approx(0.7 / 0.3)
    assert mgc_wait_s(0.7, 1, 1.0, cs2=0.0) == pytest.approx(0.5 * 0.7 / 0.3)  # M/D/1, Pollaczek-Khinchine
    assert math.isinf(mgc_wait_s(2.0, 1, 1.0))
    assert erlang_c(256, 200.0) < erlang_c(256, 250.0) < 1.0  # large c stays finite


def test_traffic_summary_fixed_and_sampled():
    from scipy import stats

    fixed = Traffic(1000, 200).summary()
    assert fixed == {
        "input_mean": 1000.0,
        "output_mean": 200.0,
        "context_mean": 1100.0,
        "context_p99": 1200.0,
        "output_cs2": 0.0,
    }
    sampled = Traffic(stats.randint(500, 1501), stats.randint(100, 301), seed=1).summary()
    assert sampled["input_mean"] == pytest.approx(1000, rel=0.02)
    assert sampled["output_mean"] == pytest.approx(200, rel=0.02)
    assert sampled["output_cs2"] == pytest.approx((201**2 - 1) / 12 / 200**2, rel=0.1)  # discrete uniform
    assert sampled == Traffic(stats.randint(500, 1501), stats.randint(100, 301), seed=1).summary()


SLO_CASE = dict(model="llama3.1-8b", system="hgx-h100-ib-ndr", traffic=Traffic(1000, 200), dtype="fp8", fixed={"tp": 1})


@FAST
@given(ttft=st.floats(0.1, 2.0), tpot=st.floats(0.01, 0.06), f_ttft=st.floats(0.3, 1.0), f_tpot=st.floats(0.3, 1.0))
def test_tighter_slo_never_needs_fewer_gpus(ttft, tpot, f_ttft, f_tpot):
    c = SLO_CASE
    try:
        loose = plan_for_rate(
            c["model"], c["system"], 200.0, c["traffic"], ttft, tpot, dtype=c["dtype"], fixed=c["fixed"]
        )
    except InfeasiblePlan:
        loose = None
    try:
        tight = plan_for_rate(
            c["model"],
            c["system"],
            200.0,
            c["traffic"],
            ttft * f_ttft,
            tpot * f_tpot,
            dtype=c["dtype"],
            fixed=c["fixed"],
        )
    except InfeasiblePlan:
        return  # infeasible is "more GPUs than any"
    assert loose is not None and tight.gpus >= loose.gpus
    assert tight.ttft_s <= ttft * f_ttft and tight.tpot_s <= tpot * f_tpot


def test_plan_for_rate_meets_its_slos_and_counts_gpus(cat):
    p = plan_for_rate(
        "llama3.1-70b",
        "hgx-h100-ib-ndr",
        30.0,
        Traffic(1000, 200),
        1.0,
        0.05,
        dtype="fp8",
        fixed={"tp": 2},
        catalog=cat,
    )
    assert p.ttft_s <= 1.0 and p.tpot_s <= 0.05
    assert p.gpus == p.replicas * 2 and p.utilisation < 1.0
    # one fewer replica either overloads it or misses the TTFT SLO
    hold = 200 * p.tpot_s
    assert (
        30.0 / (p.replicas - 1) * hold >= p.batch
        or mgc_wait_s(30.0 / (p.replicas - 1), p.batch, hold)
        + (p.ttft_s - mgc_wait_s(30.0 / p.replicas, p.batch, hold))
        > 1.0
    )
    assert p.usd_per_million_tokens == pytest.approx(usd_per_million_tokens(p.gpus, 30.0 * 200, p.usd_per_gpu_hour))
    more = plan_for_rate(
        "llama3.1-70b",
        "hgx-h100-ib-ndr",
        120.0,
        Traffic(1000, 200),
        1.0,
        0.05,
        dtype="fp8",
        fixed={"tp": 2},
        catalog=cat,
    )
    assert more.gpus > p.gpus


def test_disaggregated_pools(cat):
    p = plan_for_rate(
        "llama3.1-70b",
        "gb200-nvl72",
        40.0,
        Traffic(2000, 300),
        1.5,
        0.03,
        dtype="fp8",
        fixed={"tp": 2},
        disaggregated=True,
        catalog=cat,
    )
    d = p.to_dict()
    assert d["disaggregated"] and d["prefill"]["replicas"] >= 1 and d["decode_replicas"] >= 1
    assert p.gpus == d["prefill"]["replicas"] * d["prefill"]["gpus_per_replica"] + d["decode_replicas"] * 2
    assert 0 < p.kv_transfer_s < 0.01 and p.ttft_s <= 1.5 and p.tpot_s <= 0.03
    s = resolve("llama3.1-70b", "gb200-nvl72", Replica(tp=2, dtype="fp8"), cat)
    # the same batch decodes faster without prefills in its iterations
    assert steady_state(s, 64, 2000, 300, disaggregated=True).tpot_s < steady_state(s, 64, 2000, 300).tpot_s


def test_best_under_tpot_is_the_largest_batch_within_the_bound(h100_8b):
    p = best_under_tpot(h100_8b, 1000, 500, 0.02)
    assert p.tpot_s <= 0.02
    assert steady_state(h100_8b, p.batch + 1, 1000, 500).tpot_s > 0.02
    assert best_under_tpot(h100_8b, 1000, 500, 1e-4) is None


def test_scoring_capacity_per_node(cat):
    r = scoring_capacity("llama3.1-8b", "hgx-h100-ib-ndr", 256, 0.05, Replica(tp=1), cat)
    assert r["latency_s"] <= 0.05 and r["batch"] >= 1
    assert r["requests_per_s_per_node"] == pytest.approx(8 * r["batch"] / r["pass_s"])
    looser = scoring_capacity("llama3.1-8b", "hgx-h100-ib-ndr", 256, 0.2, Replica(tp=1), cat)
    assert looser["requests_per_s_per_node"] >= r["requests_per_s_per_node"]
    with pytest.raises(InfeasiblePlan):
        scoring_capacity("llama3.1-8b", "hgx-h100-ib-ndr", 8192, 1e-3, Replica(tp=1), cat)


def test_operating_point_keys_and_cost(cat):
    d = operating_point("llama3.1-8b", "hgx-h100-ib-ndr", 1000, 1000, replica=Replica(tp=1, dtype="fp8"), catalog=cat)
    for k in ("ttft_s", "tpot_s", "tokens_per_s_per_gpu", "max_batch", "replicas", "gpus", "usd_per_million_tokens"):
        assert k in d
    assert d["usd_per_million_tokens"] == pytest.approx(d["usd_per_gpu_hour"] / (d["tokens_per_s"] * 3600) * 1e6)


def test_chunked_prefill_spreads_the_first_token_over_chunks(h100_8b):
    whole = steady_state(h100_8b, 64, 2000, 500)
    chunked = steady_state(h100_8b, 64, 2000, 500, chunked_prefill=512)
    assert chunked.tpot_s == whole.tpot_s  # same work per iteration on average
    # the decode of the 63 others in an iteration that carries a prefill: the step at 64 less a lone sequence's (the
    # weights stream once for the prefill and the decodes)
    others = whole.decode_s - steady_state(h100_8b, 1, 2000, 500).decode_s
    assert 0 < others < whole.decode_s
    # the prompt's prefill plus the others' decode in each of the ceil(2000 / 512) = 4 iterations carrying a chunk
    assert chunked.ttft_s == pytest.approx(chunked.prefill_single_s + 4 * others)
    # whole prompt: its prefill plus the others' decode in the one iteration that carries it
    assert whole.ttft_s == pytest.approx(whole.prefill_single_s + others)
    # alone on the replica the prefill emits the first token: no decode step is added (it was, 2 x TPOT at 1 token)
    alone = steady_state(h100_8b, 1, 2000, 500)
    assert alone.ttft_s == pytest.approx(alone.prefill_single_s)
    with pytest.raises(InfeasiblePlan, match="chunk"):
        steady_state(h100_8b, 160, 2000, 500, chunked_prefill=512)  # 160 x 2000 / 500 = 640 tokens > 512


@FAST
@given(ctx=st.integers(128, 60000), tp=st.sampled_from([1, 2, 4, 8]), dtype=st.sampled_from(["bf16", "fp8"]))
def test_max_batch_memory_property(cat, ctx, tp, dtype):
    s = resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=tp, dtype=dtype), cat)
    try:
        mb = max_batch(s, ctx)
    except InfeasiblePlan:
        return
    assert memory_per_gpu_bytes(s, mb, ctx) <= usable_bytes_per_gpu(s) < memory_per_gpu_bytes(s, mb + 1, ctx)


def test_candidate_replicas_pick_the_smallest_pipeline_that_fits(cat):
    from hnplan.planning.inference import candidate_replicas

    reps = candidate_replicas("llama3.1-405b", "hgx-h100-ib-ndr", "bf16", catalog=cat)
    by_tp = {r.tp: r.pp for r in reps}
    # 405B in bf16 is 812 GB of weights, an H100 offers 79.11 GiB x 0.9 = 76.4 GB: 16 GPUs as TP8 x PP2,
    # TP4 x PP4 or TP2 x PP8; TP1 would need PP16, beyond the PP 1-8 searched
    assert by_tp == {2: 8, 4: 4, 8: 2}
    assert all(r.tp <= 8 for r in reps)  # TP stays inside the 8-GPU NVLink domain
    moe = candidate_replicas("mixtral-8x7b", "gb200-nvl72", "bf16", fixed={"tp": 1}, catalog=cat)
    assert [r.ep for r in moe] == [1, 2, 4, 8] and all(r.tp == 1 for r in moe)


def test_gpus_vs_rate_keeps_infeasible_designs(cat):
    from hnplan.planning.inference import gpus_vs_rate

    df = gpus_vs_rate(
        "llama3.1-8b",
        ["hgx-h100-ib-ndr"],
        [10.0],
        Traffic(1000, 200),
        1.0,
        1e-4,
        dtype="fp8",
        fixed={"tp": 1},
        catalog=cat,
    )
    assert list(df["status"].str.contains("no configuration")) == [True]


def test_overlap_takes_the_larger_of_compute_and_communication(cat):
    plain = resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8"), cat)
    both = resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", overlap=True), cat)
    a, b = decode_step(plain, 256, 2000), decode_step(both, 256, 2000)
    assert a["time_s"] == pytest.approx(a["compute_s"] + a["tp_allreduce_s"])
    assert b["time_s"] == pytest.approx(max(b["compute_s"], b["tp_allreduce_s"]))
    p = steady_state(both, 256, 2000, 500, disaggregated=True)
    assert sum(p.breakdown_s.values()) == pytest.approx(p.iteration_s)  # the hidden part is booked negative


def test_erlang_c_equals_the_scipy_stats_form():
    """Erlang C from scipy.special's Poisson terms equals the textbook form written with scipy.stats.poisson
    (pmf and cdf), over small and large server counts and loads below and above capacity."""
    import numpy as np
    from scipy import stats

    c = np.array([1, 2, 8, 64, 256, 256, 1024, 4096, 16], dtype=float)
    a = np.array([0.0, 1.5, 7.9, 50.0, 200.0, 255.9, 1000.0, 4000.0, 20.0])
    ok = a < c
    tail = stats.poisson.pmf(c, a) * c / np.where(ok, c - a, 1.0)
    expected = np.where(ok, tail / (stats.poisson.cdf(c - 1, a) + tail), 1.0)
    np.testing.assert_allclose(erlang_c(c, a), expected, rtol=1e-12, atol=0)
