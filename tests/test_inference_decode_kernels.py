"""Large-EP decode as serving engines run it: the one-shot expert all-to-all and speculative decoding (MTP)."""

import dataclasses

import pytest
from hypothesis import given
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
