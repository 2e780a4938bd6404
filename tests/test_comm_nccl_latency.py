"""NCCL's latency per algorithm and protocol (NVIDIA/nccl src/graph/tuning.cc @ v2.30.7-1, ncclTopoTuneModel):
hand derivations of the ring and tree formulas, and the collectives that use them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.comm import nccl
from hnplan.comm.algorithms import algorithm_time, collective
from hnplan.comm.placement import flat_placement
from hnplan.comm.topology import LinkParams

US = 1e-6


def test_tables_are_ncclS_v2_30_7():
    # ncclTunerConstantsDefaults: baseLatencies Ring {6.6, 14.0, 8.4}, Tree {6.8, 14.0, 8.4};
    # hwLatencies NVLINK Ring {0.6, 1.9, 3.4}, NET Ring {2.7, 4.0, 14.0}, NET Tree {5.0, 8.5, 14}
    assert nccl.BASE_LATENCY_US["ring"] == (6.6, 14.0, 8.4)
    assert nccl.BASE_LATENCY_US["tree"] == (6.8, 14.0, 8.4)
    assert nccl.HW_LATENCY_US["nvlink"]["ring"] == (0.6, 1.9, 3.4)
    assert nccl.HW_LATENCY_US["net"]["ring"] == (2.7, 4.0, 14.0)
    assert nccl.HW_LATENCY_US["net"]["tree"] == (5.0, 8.5, 14.0)
    assert nccl.hw_latency_s("nvlink", "nvls", "Simple") == pytest.approx(25 * US)


def test_ring_latency_in_one_nvlink_domain():
    # all-reduce on n = 8: 2(n-1) = 14 steps at hwLat NVLINK Ring after baseLat Ring
    for proto, expect in (("LL", 6.6 + 14 * 0.6), ("LL128", 14.0 + 14 * 1.9), ("Simple", 8.4 + 14 * 3.4)):
        assert nccl.ring_latency_s("nvlink", 0.0, 8, 1, 2, proto, True) == pytest.approx(expect * US)
    # reduce-scatter on n = 8: 7 steps, LL128 14 + 7 x 1.9 = 27.3 us
    assert nccl.ring_latency_s("nvlink", 0.0, 8, 1, 1, "LL128", False) == pytest.approx(27.3 * US)


def test_ring_latency_across_domains():
    # all-reduce on 4 domains of 8 (n = 32), network latency of its own 1 us: 62 steps, 2(4-1) = 6 of them
    # between domains.
    # LL: intra max(0.6, 1.0 net overhead) = 1.0; inter 2.7 + 1 = 3.7: 6.6 + 56 x 1.0 + 6 x 3.7 = 84.8 us
    assert nccl.ring_latency_s("nvlink", 1 * US, 32, 4, 2, "LL", True) == pytest.approx(84.8 * US)
    # LL128: intra 1.9, inter 4.0 + 1 = 5.0: 14 + 56 x 1.9 + 6 x 5.0 = 150.4 us
    assert nccl.ring_latency_s("nvlink", 1 * US, 32, 4, 2, "LL128", True) == pytest.approx(150.4 * US)
    # Simple: intra max(3.4, 3 x 1.0) = 3.4, inter 14 + 2 x 1 = 16 (the flush), x 1.4 (plateau):
    # (8.4 + 56 x 3.4 + 6 x 16) x 1.4 = 412.72 us
    assert nccl.ring_latency_s("nvlink", 1 * US, 32, 4, 2, "Simple", True) == pytest.approx(412.72 * US)
    # one rank per domain: the tree's network latency, 8.5 + 1 per LL128 step: 14 + 6 x 9.5 = 71 us (n = 4)
    assert nccl.ring_latency_s("nvlink", 1 * US, 4, 4, 2, "LL128", True) == pytest.approx(71.0 * US)


def test_tree_latency():
    # tree all-reduce, 4 domains of 8, network latency 1 us: baseLat + 2((q-1) intra + log2i(4) inter)
    # LL128: 14 + 2 (7 x 1.25 + 2 x (8.5 + 1)) = 14 + 2 x 27.75 = 69.5 us
    assert nccl.tree_latency_s("nvlink", 1 * US, 8, 4, "LL128") == pytest.approx(69.5 * US)
    # Simple: 8.4 + 2 (7 x 4.0 + 2 x (14 + 2)) = 8.4 + 2 x 60 = 128.4 us
    assert nccl.tree_latency_s("nvlink", 1 * US, 8, 4, "Simple") == pytest.approx(128.4 * US)
    # 3 domains: floor(log2 3) = 1 (NCCL's log2i); LL: 6.8 + 2 (7 x 0.6 + 1 x 6.0) = 27.2 us
    assert nccl.tree_latency_s("nvlink", 1 * US, 8, 3, "LL") == pytest.approx(27.2 * US)


def test_in_network_reduction_latency():
    # NVLS in one domain: 25 us; NVLS + tree on 4 domains: 25 + 2 x 2 x (20.9 + 2 x 1) = 116.6 us;
    # CollNet chain on 4 domains of 8: 2 x 7 x 2.8 + 30 + 2 x 1 = 71.2 us
    assert nccl.inr_latency_s("nvlink", 1 * US, 8, 1, "nvls") == pytest.approx(25 * US)
    assert nccl.inr_latency_s("nvlink", 1 * US, 8, 4, "nvls_tree") == pytest.approx(116.6 * US)
    assert nccl.inr_latency_s("nvlink", 1 * US, 8, 4, "collnet_chain") == pytest.approx(71.2 * US)
    assert nccl.inr_latency_s("nvlink", 1 * US, 8, 4, "nvls") == pytest.approx((25 + 18 + 2) * US)


def _nccl_group(p, q, bu=400e9, bo=50e9, hop=1 * US):
    up = LinkParams(bu, 2.4 * US, bu, nccl_link="nvlink", ll_max_busbw_Bps=141e9)
    out = LinkParams(bo, 5 * US, bo, nccl_link="net", hop_latency_s=hop)
    return flat_placement(p, q, up, out)


def test_ring_allreduce_takes_the_fastest_protocol():
    # 4 domains of 8 ranks, B_u = 400 GB/s, B_o = 50 GB/s per rank, crossing 8 x 50 = 400 GB/s: B_ring 400
    g = _nccl_group(32, 8)
    s = 8.0e3  # 8 kB: 2 x 31/32 x 8 kB = 15.5 kB
    data = 2 * 31 / 32 * s
    ll = 84.8 * US + data / 20.4e9  # llMaxBws across 3+ nodes (Intel/Arm hosts) caps LL at 20.4 GB/s
    ll128 = 150.4 * US + data / (400e9 * 120 / 128)
    simple = 412.72 * US + data / 400e9
    t = float(algorithm_time("allreduce", "ring", s, g))
    assert t == pytest.approx(min(ll, ll128, simple), rel=1e-9) and t == pytest.approx(ll, rel=1e-9)
    # 4 GB: Simple's full bandwidth pays for its latency (LL128 150.4 us + 7.75 ms / 0.9375)
    big = 4e9
    assert float(algorithm_time("allreduce", "ring", big, g)) == pytest.approx(
        412.72 * US + 2 * 31 / 32 * big / 400e9, rel=1e-9
    )


def test_non_nccl_fabrics_keep_alpha_steps():
    up, out = LinkParams(1e11, 2 * US, 1e11), LinkParams(1e10, 5 * US, 1e10)
    g = flat_placement(16, 8, up, out)
    # 2 [(p - D) a_u + (D - 1) a_o] + 2 (p-1)/p S / min(B_u, q B_o) = 2 (14 x 2 + 5) us + ...
    t = float(algorithm_time("allreduce", "ring", 1e6, g))
    assert t == pytest.approx(66 * US + 2 * 15 / 16 * 1e6 / 8e10, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(1, 16), st.sampled_from(nccl.PROTOCOLS), st.floats(0, 5e-6))
def test_ring_latency_grows_with_ranks_and_domains(q, d, proto, hop):
    # more ranks in a domain, or more domains, never shorten NCCL's ring latency (from two ranks per domain:
    # with one, NCCL charges the tree's network latency, its latencies being "fully exposed")
    base = nccl.ring_latency_s("nvlink", hop, q * d, d, 2, proto, True)
    assert nccl.ring_latency_s("nvlink", hop, (q + 1) * d, d, 2, proto, True) >= base
    assert nccl.ring_latency_s("nvlink", hop, q * (d + 1), d + 1, 2, proto, True) >= base


def test_tuner_time_is_monotone_in_size():
    g = _nccl_group(64, 8)
    sizes = 2.0 ** np.arange(3, 34)
    for alg in ("ring", "tree"):
        t = algorithm_time("allreduce", alg, sizes, g)
        assert np.all(np.diff(t) >= 0)


def test_tuner_weighs_only_ncclS_algorithms_on_nccl_fabrics():
    # 16 domains of one rank: NCCL reduces by ring or, one rank per node, PAT; no halving-doubling
    g = _nccl_group(16, 1)
    assert algorithm_time("allgather", "rhd", 1e6, g) is not None
    # PAT, 1 MB: 8 + log2i(16) x (14 + 2 x 1) / 3.5 + 16 x 2.8 us = 71.09 us, + 15/16 x 1 MB / (0.75 x 50 GB/s)
    pat = float(algorithm_time("allgather", "pat", 1e6, g))
    assert pat == pytest.approx((8 + 4 * 16 / 3.5 + 16 * 2.8) * US + 15 / 16 * 1e6 / (0.75 * 50e9), rel=1e-9)
    # ring on LL: 6.6 + 15 x (5.0 + 1) us (the tree's network latency, one rank per node) + 15/16 MB / 20.4 GB/s
    ll = (6.6 + 15 * 6.0) * US + 15 / 16 * 1e6 / 20.4e9
    ring = float(algorithm_time("allgather", "ring", 1e6, g))
    assert ring <= ll * (1 + 1e-12)
    r = collective("allgather", [1e3, 1e6, 1e9], g)
    assert set(r.algorithm) <= {"ring", "pat"} and float(r.time_s[1]) == pytest.approx(min(pat, ring), rel=1e-9)
    # PAT needs one rank per node
    assert algorithm_time("allgather", "pat", 1e6, _nccl_group(32, 8)) is None
