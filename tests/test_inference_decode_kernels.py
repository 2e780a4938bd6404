"""Large-EP decode as serving engines run it: the one-shot expert all-to-all and speculative decoding (MTP)."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog.schemas.serving import ServingEngine
from hnplan.comm import best_time, collective
from hnplan.comm.algorithms import algorithm_time
from hnplan.comm.collectives import oneshot_alltoall_time
from hnplan.comm.placement import flat_placement
from hnplan.comm.topology import LinkParams
from hnplan.planning.inference import Replica, decode_step, resolve, steady_state
from hnplan.planning.inference.speculative import expected_accepted, tokens_per_step

# deepseek-ai/DeepEP docs/legacy.md, low-latency kernels on H800 + CX7 400 Gb/s IB, 128 tokens per rank,
# hidden 7,168, top-8, FP8 dispatch (7,168 B + 56 fp32 scales per copy), BF16 combine: EP128 192 / 369 us
DEEPEP_LL_EP128_US = (192.0, 369.0)
DISPATCH_BYTES = 128 * 8 * (7168 + 7168 / 128 * 4)
COMBINE_BYTES = 128 * 8 * 7168 * 2


def test_oneshot_alltoall_hand_derived():
    # 128 ranks, 8 per domain, 6 MB per rank, 150 GB/s up, 40 GB/s out, 5 us:
    # intra 7/128 x 6e6 / 1.5e11 = 2.1875 us; cross 120/128 x 6e6 / 4e10 = 140.625 us -> 5 + 140.625 us
    t = oneshot_alltoall_time(6e6, 128, 8, 1.5e11, 4e10, 5e-6)
    assert t == pytest.approx(145.625e-6, rel=1e-12)
    # one domain: intra only, 7/8 x 6e6 / 1.5e11 = 35 us + 5 us
    assert oneshot_alltoall_time(6e6, 8, 8, 1.5e11, 4e10, 5e-6) == pytest.approx(40e-6, rel=1e-12)
    assert oneshot_alltoall_time(6e6, 1, 1, 1.5e11, 4e10, 5e-6) == 0.0


def test_oneshot_pays_one_latency_where_pairwise_pays_p_minus_1():
    up, out = LinkParams(1.5e11, 2e-6, 2e11), LinkParams(4e10, 5e-6, 5e10)
    g = flat_placement(128, 8, up, out)
    pair = float(algorithm_time("alltoall", "pairwise", 6e6, g))
    one = float(algorithm_time("alltoall", "oneshot", 6e6, g))
    # the same bandwidth term; pairwise adds (q - 1) a_u + (p - q) a_o = 7 x 2 + 120 x 5 = 614 us, one-shot 5 us
    assert pair - one == pytest.approx((7 * 2e-6 + 120 * 5e-6) - 5e-6, rel=1e-9)


def test_tuner_never_picks_oneshot(cat):
    """NCCL has no one-shot all-to-all: only a serving engine selects it, so training and `hnplan comm` keep
    the pairwise exchange."""
    g = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), cat).placements["ep"]
    assert best_time("alltoall", 6e6, g)[1] == "pairwise"
    assert set(collective("alltoall", [1e3, 6e6, 1e9], g).algorithm) == {"pairwise"}


def _engine(cat, **upd):
    base = cat.get("engines", "sglang")
    return base.model_copy(update={"weight_dtypes": ["fp8", "bf16"], "max_num_seqs": 100_000, **upd})


def test_oneshot_decode_matches_deepep_low_latency_at_ep128(cat):
    """At 0.76 of the CX7 line rate (the efficiency the EP128 row gives), the one-shot model reproduces
    DeepEP's low-latency dispatch and combine on 16 H800 nodes within 1 %."""
    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), cat)
    g = s.placements["ep"]
    assert (g.size, g.per_domain) == (128, 8)
    fast = flat_placement(128, 8, g.up, dataclasses.replace(g.out, alltoall_bw_Bps=0.76 * g.out.line_rate_Bps))
    for n, us in zip((DISPATCH_BYTES, COMBINE_BYTES), DEEPEP_LL_EP128_US, strict=True):
        assert float(algorithm_time("alltoall", "oneshot", n, fast)) * 1e6 == pytest.approx(us, rel=0.01)


def test_engine_needs_calibrations_with_provenance(cat):
    base = cat.get("engines", "sglang").model_dump()
    with pytest.raises(ValueError, match="oneshot_alltoall_efficiency"):
        ServingEngine(**{**base, "ep_decode_alltoall": "oneshot"})
    with pytest.raises(ValueError, match="acceptance_rate"):
        ServingEngine(**{**base, "speculative_tokens": 1})
    with pytest.raises(ValueError, match="provenance"):
        ServingEngine(**{**base, "speculative_tokens": 1, "acceptance_rate": 0.85})
    with pytest.raises(ValueError, match="provenance"):
        ServingEngine(**{**base, "expert_load_imbalance": 1.18})
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ServingEngine(**{**base, "expert_load_imbalance": 0.9, "assumptions": {"expert_load_imbalance": "a guess"}})


def test_expected_accepted_chained():
    # DeepSeek-V3 (arXiv:2412.19437 Sec. 5.4.3): one MTP token accepted 85-90 % of the time -> 1.85-1.9 per step
    assert expected_accepted(1, 0.85) == pytest.approx(0.85)
    assert expected_accepted(3, 0.5) == pytest.approx(0.5 + 0.25 + 0.125)
    assert expected_accepted(0, 0.9) == 0.0


@given(st.integers(0, 8), st.floats(0.0, 1.0))
def test_expected_accepted_bounded_and_closed_form(k, a):
    e = expected_accepted(k, a)
    assert 0.0 <= e <= k + 1e-12
    if 0.0 < a < 1.0:
        assert e == pytest.approx(a * (1 - a**k) / (1 - a), rel=1e-9, abs=1e-12)


def test_mtp_decode_step_reads_kv_once_and_emits_more_tokens(cat):
    """DeepSeek-V3 at EP128, 64 sequences per rank: verifying 1 + 1 tokens per sequence reads the KV cache
    once (bytes grow only by the GEMM activations), runs twice the attention FLOPs, and a step emits
    1.85 tokens per sequence (a = 0.85); the draft layer costs one layer's share (1/61) of the step."""
    plain = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), cat)
    mtp = dataclasses.replace(plain, engine=_engine(cat, speculative_tokens=1, acceptance_rate=0.85))
    assert tokens_per_step(plain) == 1.0 and tokens_per_step(mtp) == pytest.approx(1.85)
    b, ctx = 64, 4096
    one, two = decode_step(plain, b, ctx), decode_step(mtp, b, ctx)
    kv = b * ctx * 61 * (512 + 64) * 1  # MLA latent + rope key, fp8 KV cache, all layers: 9.2 GB
    # the second token adds its activations (about 6 GB of MoE permutes and GEMM inputs), not a second KV read
    assert 0 < two["bytes"] / (1 + 1 / 61) - one["bytes"] < kv
    assert two["flops"] / (1 + 1 / 61) == pytest.approx(2 * one["flops"], rel=0.02)
    p1 = steady_state(plain, 128 * b, 4096, 1024, disaggregated=True)
    p2 = steady_state(mtp, 128 * b, 4096, 1024, disaggregated=True)
    assert p2.tokens_per_s == pytest.approx(128 * b * 1.85 / p2.iteration_s, rel=1e-12)
    assert p2.tpot_s == pytest.approx(p2.iteration_s / 1.85, rel=1e-12)
    assert p1.tpot_s == p1.iteration_s


def test_oneshot_engine_changes_decode_not_prefill(cat):
    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8", overlap=True), cat)
    fast = dataclasses.replace(s, engine=_engine(cat, ep_decode_alltoall="oneshot", oneshot_alltoall_efficiency=0.76))
    slow = dataclasses.replace(s, engine=_engine(cat))
    assert decode_step(fast, 92, 4096)["ep_alltoall_s"] < 0.5 * decode_step(slow, 92, 4096)["ep_alltoall_s"]
    from hnplan.planning.inference import prefill_pass

    assert prefill_pass(fast, 2, 4096)["ep_alltoall_s"] == prefill_pass(slow, 2, 4096)["ep_alltoall_s"]


def test_overlapped_step_hand_derived():
    from hnplan.planning.inference.speculative import overlapped_step_s

    # C = 40 ms, A = 60 ms: perfect overlap max = 60; half hidden 40 + 60 - 0.5 x 40 = 80; none 100
    assert overlapped_step_s(0.04, 0.06) == pytest.approx(0.06)
    assert overlapped_step_s(0.04, 0.06, 0.5) == pytest.approx(0.08)
    assert overlapped_step_s(0.04, 0.06, 0.0) == pytest.approx(0.10)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_overlapped_step_between_max_and_sum(c, a, e):
    from hnplan.planning.inference.speculative import overlapped_step_s

    t = overlapped_step_s(c, a, e)
    assert max(c, a) - 1e-12 <= t <= c + a + 1e-12


def _large_ep(cat, **upd):
    """SGLang as LMSYS ran large-EP DeepSeek-V3 (sglang-large-ep.yaml), without the scheduler's cap."""
    return cat.get("engines", "sglang-large-ep").model_copy(update={"max_num_seqs": 100_000, **upd})


def _tbo(cat, b, ctx, k, overlap, **upd):
    """SGLang's large-EP decode on 8 H100 nodes (EP64): DeepEP low-latency kernels at 0.76 of the line rate,
    two-batch overlap, the busiest rank under EPLB's real routing; MTP at the blog's assumed 60 %."""
    s = resolve("deepseek-v3", "hgx-h100-ib-ndr", Replica(tp=1, ep=64, dtype="fp8", overlap=overlap), cat)
    if k:
        upd = {"speculative_tokens": k, "acceptance_rate": 0.6, **upd}
    return decode_step(dataclasses.replace(s, engine=_large_ep(cat, **upd)), b, ctx)


def test_two_micro_batches_read_the_weights_twice(cat):
    """With overlap a decode step runs as two half batches: more compute (each reads the weights), the same
    collectives; and one sequence cannot be split (the serial sum)."""
    one, two = _tbo(cat, 256, 2000, 0, False), _tbo(cat, 256, 2000, 0, True)
    half = _tbo(cat, 128, 2000, 0, False)
    assert two["compute_s"] == pytest.approx(2 * half["compute_s"], rel=1e-12)
    assert one["compute_s"] < two["compute_s"] < 1.5 * one["compute_s"]
    assert two["ep_alltoall_s"] == pytest.approx(one["ep_alltoall_s"], rel=1e-12)
    c, a = two["compute_s"], two["ep_alltoall_s"]
    assert two["time_s"] == pytest.approx(c + a - 0.67 * min(c, a), rel=1e-12)
    single = _tbo(cat, 1, 2000, 0, True)
    assert single["time_s"] == pytest.approx(single["compute_s"] + single["ep_alltoall_s"], rel=1e-12)


def test_sglang_overlap_efficiency_reproduces_the_tbo_ablation(cat):
    """sglang-large-ep.yaml's 0.67 is fitted to the LMSYS 96 x H100 blog's decode ablation (two-batch overlap
    25.5 % faster at 256 tokens per GPU); the same blog's other cases are held out: simulated MTP (128
    sequences x 2 tokens, 4K KV) 17,552 vs 12,929 tokens/s (1.358x) and 32 tokens per GPU -27 %."""
    assert cat.get("engines", "sglang-large-ep").decode_overlap_efficiency == 0.67
    assert cat.get("engines", "sglang").decode_overlap_efficiency == 0.67  # the same two-batch overlap

    def speedup(b, ctx, k=0):
        return _tbo(cat, b, ctx, k, False)["time_s"] / _tbo(cat, b, ctx, k, True)["time_s"]

    assert speedup(256, 2000) == pytest.approx(1.255, abs=0.005)
    assert speedup(128, 4000, k=1) == pytest.approx(17552 / 12929, rel=0.03)
    # 0.85 against 0.73 measured, and break-even below 64 tokens where it was measured between 64 and 128: the
    # low-latency kernels' fixed cost per call, which shows at small batches, is not modelled
    assert speedup(32, 2000) == pytest.approx(0.73, abs=0.13)
    assert speedup(32, 2000) < 1.0 < speedup(128, 2000)


def test_sglang_large_ep_steps_as_measured(cat):
    """The absolute steps of the LMSYS 96 x H100 runs, not only their ratios: 256 sequences per GPU at 2K KV,
    22,310 tokens/s per node with two-batch overlap (256 x 8 / 22,310 = 91.8 ms) and 25.5 % slower without
    (115.2 ms); simulated MTP, 128 sequences x 2 tokens at 4K KV and 60 % acceptance, 17,373 and 12,929 tokens/s
    per node (128 x 1.6 x 8 / 17,373 = 94.3 ms, 126.7 ms without overlap). All within 3 %."""
    assert _tbo(cat, 256, 2000, 0, True)["time_s"] == pytest.approx(256 * 8 / 22310, rel=0.03)
    assert _tbo(cat, 256, 2000, 0, False)["time_s"] == pytest.approx(256 * 8 / 22310 * 1.255, rel=0.03)
    assert _tbo(cat, 128, 4000, 1, True)["time_s"] == pytest.approx(128 * 1.6 * 8 / 17373, rel=0.03)
    assert _tbo(cat, 128, 4000, 1, False)["time_s"] == pytest.approx(128 * 1.6 * 8 / 12929, rel=0.03)


def test_real_routing_imbalance_from_the_prefill_comparison(cat):
    """EPLB's real routing against random expert choice, where random fluctuation vanishes: SGLang's prefill of
    16,384 tokens per GPU on EP32 (4 x 4K prompts) runs 50,302 tokens/s per node with the model's routing and
    59,337 with simulated perfect EPLB (LMSYS, Overall Throughput). The pass is bound by the all-to-all the
    busiest rank receives, so the engine's 1.18 reproduces the ratio; random routing's own peak there is 1.006."""
    from hnplan.planning.inference import prefill_pass
    from hnplan.planning.inference.speculative import routing_peak

    s = resolve("deepseek-v3", "hgx-h100-ib-ndr", Replica(tp=1, ep=32, dtype="fp8", overlap=True), cat)
    real = dataclasses.replace(s, engine=_large_ep(cat))
    rand = dataclasses.replace(s, engine=_large_ep(cat, expert_load_imbalance=None))
    assert routing_peak(rand, 16384) == pytest.approx(1.0055, abs=1e-3)
    assert routing_peak(real, 16384) == pytest.approx(1.18 * routing_peak(rand, 16384), rel=1e-12)
    one, other = prefill_pass(real, 4, 4096), prefill_pass(rand, 4, 4096)
    assert one["time_s"] == pytest.approx(one["ep_alltoall_s"], rel=1e-12)  # all-to-all bound
    assert one["time_s"] / other["time_s"] == pytest.approx(59337 / 50302, rel=0.01)


def test_deepseek_profile_decode_reproduced_with_balanced_routing(cat):
    """DeepSeek's own decode profile (deepseek-ai/profile-data: EP128 on H800, 128 requests per GPU, 4K
    prompts, two micro-batches, MTP, absolutely balanced routing simulated) runs 18,598 tokens/s per node as
    LMSYS converted it (at the 60 % acceptance it assumed for MTP). With random routing (the profile's balanced
    routing: no real router's imbalance) the planner's large-EP step gives it within 3 %."""
    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8", overlap=True), cat)
    eng = _large_ep(cat, expert_load_imbalance=None, speculative_tokens=1, acceptance_rate=0.6)
    p = steady_state(
        dataclasses.replace(s, engine=eng),
        128 * 128,
        4096,
        1000,
        context_tokens=4096,
        max_context_tokens=4096,
        disaggregated=True,
    )
    assert p.tokens_per_s_per_gpu * 8 == pytest.approx(18598, rel=0.03)


def test_oneshot_and_mtp_stay_optimistic_on_the_large_ep_rows(cat):
    """Why the H800 reports keep the pairwise stand-in (docs/inference.md): with every modelled mechanism of
    the SGLang runs (one-shot kernels, two-batch overlap, EPLB's real routing) and MTP at the DeepSeek-V3
    report's 85 % acceptance, RTP-LLM's 92 sequences per GPU on its H800 RoCE servers (about 92 ms published) come
    out 77 ms, +20 %; at 60-70 % acceptance (not published for these runs) the same step is within 4-10 % of the
    report."""
    s = resolve("deepseek-v3", "hgx-h800-roce-400g", Replica(tp=1, ep=128, dtype="fp8", overlap=True), cat)
    eng = _large_ep(cat, speculative_tokens=1, acceptance_rate=0.85)
    t = decode_step(dataclasses.replace(s, engine=eng), 92, 4096 + 1024)["time_s"]
    assert 0.072 < t < 0.082
    assert 92 * 1.85 / t > 1850 * 1.15  # tokens/s per GPU: optimistic with the report's acceptance
    assert 1850 * 0.99 < 92 * 1.6 / t < 1850 * 1.05


def test_busiest_rank_sets_the_decode_step(cat):
    """DeepSeek-V3 at EP128, 92 tokens per rank: random routing puts 1 + z sigma / mu on the busiest rank,
    mu = 92 x 8 = 736 copies, sigma = sqrt(128 x 92 x v), v = 8 (1/128)(127/128)(248/255) = 0.0603,
    sigma = 26.6, z = Phi^-1(127.625 / 128.25) = 2.59: 1.094. Its all-to-all bytes and its routed experts' tokens grow by
    that; the dense layers and the attention do not."""
    from hnplan.planning.inference.speculative import routing_peak

    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), cat)
    assert routing_peak(s, 92) == pytest.approx(1.0935, abs=5e-4)
    # an engine's real router puts its expert_load_imbalance on top: SGLang with EPLB 1.18 x 1.0935 = 1.2903
    eplb = dataclasses.replace(s, engine=_large_ep(cat))
    assert routing_peak(eplb, 92) == pytest.approx(1.18 * 1.0935, abs=6e-4)
    from hnplan.comm.messages import random_routing_peak

    for t, ep in ((92, 128), (8, 128), (2000, 64)):  # the training planner's vectorised formula
        r = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=ep, dtype="fp8"), cat)
        assert routing_peak(r, t) == pytest.approx(float(random_routing_peak(t, 8, 256, ep)[0]), rel=1e-12)
    assert routing_peak(resolve("llama3.1-8b", "hgx-h800-ib", Replica(dtype="fp8"), cat), 92) == 1.0
    one = dataclasses.replace(s, engine=_engine(cat, ep_decode_alltoall="oneshot", oneshot_alltoall_efficiency=0.76))
    g = one.placements["ep"]
    fast = flat_placement(128, 8, g.up, dataclasses.replace(g.out, alltoall_bw_Bps=0.76 * g.out.line_rate_Bps))
    copies = 92 * 8 * 7168 * routing_peak(s, 92)
    per_layer = sum(float(algorithm_time("alltoall", "oneshot", copies * w, fast)) for w in (1, 2))
    assert decode_step(one, 92, 4096)["ep_alltoall_s"] == pytest.approx(58 * per_layer, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(st.floats(1.0, 2.0), st.floats(0.0, 0.5), st.sampled_from([8, 92, 256]))
def test_more_expert_imbalance_never_speeds_a_step(cat, g, dg, b):
    """The busiest rank's share only adds work: a larger expert_load_imbalance never shortens a decode step."""
    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8", overlap=True), cat)
    t = [
        decode_step(dataclasses.replace(s, engine=_large_ep(cat, expert_load_imbalance=x)), b, 4096)["time_s"]
        for x in (g, g + dg)
    ]
    assert t[1] >= t[0] * (1 - 1e-12)
