"""Hypothesis properties of the collective model: monotonicity, bounds, p = 1, oversubscription."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.comm.algorithms import ALGORITHMS, _tuner_key, algorithm_table, algorithm_time, collective, fastest_time
from hnplan.comm.placement import flat_placement, place_group
from hnplan.comm.topology import LinkParams

bw = st.floats(1e9, 1e12)
alpha = st.floats(0.0, 2e-5)
eff = st.one_of(st.none(), st.floats(0.5, 1.0))
q_st = st.sampled_from([1, 2, 3, 4, 8, 16, 72])
d_st = st.sampled_from([1, 2, 3, 4, 8, 32])
ops_algs = st.sampled_from([(op, a) for op, algs in ALGORITHMS.items() for a in algs])


def _group(q, d, bu, au, bo, ao, eu=None, eo=None):
    return flat_placement(q * d, q, LinkParams(bu, au, bu, eu), LinkParams(bo, ao, bo, eo))


@settings(max_examples=150, deadline=None)
@given(ops_algs, q_st, d_st, bw, alpha, bw, alpha, eff, eff, st.floats(1, 1e10), st.floats(1.0, 100.0))
def test_time_grows_with_size(oa, q, d, bu, au, bo, ao, eu, eo, s, k):
    op, alg = oa
    g = _group(q, d, bu, au, bo, ao, eu, eo)
    t = algorithm_time(op, alg, np.array([s, s * k]), g)
    if t is None:
        return
    assert t[1] >= t[0]


@settings(max_examples=150, deadline=None)
@given(
    ops_algs,
    q_st,
    d_st,
    bw,
    alpha,
    bw,
    alpha,
    eff,
    eff,
    st.floats(1, 1e10),
    st.floats(1.0, 10.0),
    st.floats(1.0, 10.0),
    st.floats(0.0, 1.0),
)
def test_more_bandwidth_or_less_latency_never_slower(oa, q, d, bu, au, bo, ao, eu, eo, s, fu, fo, fa):
    op, alg = oa
    slow = algorithm_time(op, alg, s, _group(q, d, bu, au, bo, ao, eu, eo))
    fast = algorithm_time(op, alg, s, _group(q, d, bu * fu, au * fa, bo * fo, ao * fa, eu, eo))
    if slow is None:
        return
    assert fast <= slow * (1 + 1e-12)
    # the tuner's choice inherits it
    assert collective(op, s, _group(q, d, bu * fu, au * fa, bo * fo, ao * fa, eu, eo)).time_s[0] <= collective(
        op, s, _group(q, d, bu, au, bo, ao, eu, eo)
    ).time_s[0] * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(ops_algs, q_st, d_st, bw, alpha, bw, alpha, st.floats(1e3, 1e11))
def test_busbw_bounded_by_the_bottleneck_without_inr(oa, q, d, bu, au, bo, ao, s):
    """Without in-network reduction busbw never exceeds the bottleneck line rate: B_u inside one
    domain; across domains the domain's NICs q B_o, times (1 - 1/p) / (1 - 1/D) for all-reduce (only
    (D-1)/D of the data must cross once a domain has reduced locally: the two-node tree effect) and
    (p-1)/(p-q) per NIC for all-to-all."""
    op, alg = oa
    if alg == "inr" or (q * d == 1):
        return
    g = _group(q, d, bu, au, bo, ao)
    if algorithm_time(op, alg, s, g) is None:
        return
    r = collective(op, s, g, alg)
    busbw = float(r.busbw_Bps[0])
    p = q * d
    if d == 1:
        bound = bu
    elif op == "alltoall":
        bound = (p - 1) / (p - q) * bo
    elif op == "sendrecv":
        bound = min(bu, bo)
    elif op == "allreduce":
        bound = max(bu, q * bo) if alg != "ring" else min(bu, q * bo)
        bound *= (1 - 1 / p) / (1 - 1 / d) if alg != "ring" else 1.0
    elif op == "broadcast":
        bound = min(bu, q * bo)
    else:
        bound = q * bo * (1 - 1 / p) / (1 - 1 / d) if alg == "rhd" else min(bu, q * bo)
    assert busbw <= bound * (1 + 1e-9)


@given(ops_algs, bw, alpha, st.floats(0, 1e10))
def test_one_rank_costs_nothing(oa, b, a, s):
    op, alg = oa
    g = _group(1, 1, b, a, b, a, 0.8, 0.8)
    assert algorithm_time(op, alg, s, g) == 0.0
    r = collective(op, s, g)
    assert r.time_s[0] == 0.0 and r.busbw_Bps[0] == 0.0 and r.algorithm[0] == "none"


def test_inr_busbw_can_exceed_the_link_rate():
    g = _group(8, 1, 369e9, 0.0, 47e9, 0.0, 0.85, None)
    r = collective("allreduce", 8e9, g, "inr")
    assert r.busbw_Bps[0] > 450e9


@pytest.mark.parametrize("system", ["hgx-h100-roce-400g", "hgx-h100-ib-ndr"])
def test_two_to_one_oversubscription_halves_cross_pod_alltoall(cat, system):
    """A group spanning several leaves: leaf uplinks at 1/2 the downlinks halve its NIC share."""
    base = cat.system(system)
    over = base.model_copy(update={"scaleout_oversubscription": 2.0})
    gpus = 8 * 512  # 512 nodes: more than one leaf in every variant
    big = 2**30

    def bw_term(system_, n):  # time of the extra gigabyte: the bandwidth term without the latency
        g = place_group(cat.design(system_), n, 1, n)
        t = collective("alltoall", [big, 2 * big], g).time_s
        return t[1] - t[0]

    assert bw_term(over, gpus) / bw_term(base, gpus) == pytest.approx(2.0, rel=1e-9)
    # inside one leaf nothing changes
    assert bw_term(over, 16) == pytest.approx(bw_term(base, 16), rel=1e-12)


def test_tuner_picks_the_fastest_and_reports_it(cat):
    s = cat.system("hgx-h100-ib-ndr")
    g = place_group(cat.design(s), 64, 1, 64)
    sizes = 2.0 ** np.arange(3, 34)
    r = collective("allreduce", sizes, g)
    # what NCCL runs; it has no halving-doubling or hierarchical. The tuner ranks by NCCL's own estimates
    # (tree with its 0.92, per-channel caps and size corrections) and charges hnplan's time of the pick
    times = {a: algorithm_time("allreduce", a, sizes, g) for a in ("ring", "tree", "inr")}
    keys = {
        a: np.broadcast_to(_tuner_key("allreduce", a, g, sizes, t), sizes.shape)
        for a, t in times.items()
        if t is not None
    }
    best_key = np.min(list(keys.values()), axis=0)
    for alg, key in keys.items():
        picked = r.algorithm == alg
        assert np.allclose(r.time_s[picked], times[alg][picked], rtol=1e-12)
        assert np.all(key[picked] <= best_key[picked] * (1 + 1e-12))
    rhd = algorithm_time("allreduce", "rhd", sizes, g)  # forced, it stays available (and faster at 8 kB)
    assert rhd is not None and not set(r.algorithm) & {"rhd", "hierarchical"}
    assert set(r.algorithm) <= set(ALGORITHMS["allreduce"])
    # small messages favour a log-depth algorithm; at 8 GiB on eight nodes NVLS + tree is held to its 8 heads
    # x 45.5 GB/s busbw (NCCL's perChMaxNVLSTreeBws, Hopper, three nodes or more), so the ring through the NICs
    # (NVLink-bound, 369 GB/s less its latency) is as fast or faster
    assert r.algorithm[0] != "ring" and r.algorithm[-1] in ("ring", "tree", "inr")
    inr = algorithm_time("allreduce", "inr", sizes[-1:], g)[0]
    # (less NCCL's NVLS + tree latency, 25 + 2 x 3 x (20.9 + 2 x 1.19) us = 165 us of 47 ms)
    assert sizes[-1] / inr * 2 * 63 / 64 == pytest.approx(8 * 45.5e9, rel=5e-3)


@settings(max_examples=100, deadline=None)
@given(q_st, d_st, bw, alpha, bw, alpha, st.floats(1, 1e10), st.floats(0.5, 80.0), st.floats(0.1, 1.0))
def test_fewer_ring_nics_never_faster(q, d, bu, au, bo, ao, s, lanes, f):
    # rings and trees that cross domains through fewer NICs are never faster; other algorithms ignore it
    from dataclasses import replace

    g = _group(q, d, bu, au, bo, ao)
    wide, narrow = replace(g, ring_lanes=lanes), replace(g, ring_lanes=lanes * f)
    for alg in ALGORITHMS["allreduce"]:
        t_all = algorithm_time("allreduce", alg, s, g)
        if t_all is None:
            continue
        t_wide = algorithm_time("allreduce", alg, s, wide)
        assert t_wide >= t_all * (1 - 1e-12)
        assert algorithm_time("allreduce", alg, s, narrow) >= t_wide * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(ALGORITHMS)), q_st, d_st, bw, alpha, bw, alpha, eff, eff, st.floats(0, 1e10))
def test_fastest_time_is_the_least_of_the_algorithm_table(op, q, d, bu, au, bo, ao, eu, eo, s):
    """The planners' tuner time equals the table's least time, bit for bit, at every size (the float path
    for a few sizes, the array path for more)."""
    g = _group(q, d, bu, au, bo, ao, eu, eo)
    for sizes in (np.array([0.0, s, 2 * s + 1.0]), np.array([0.0, 1.0, s / 3, s, 2 * s + 1.0, 1e11])):
        # a few sizes on floats, more as arrays
        table = algorithm_table(op, sizes, g)
        expected = np.min(np.vstack(list(table.values())), axis=0) if g.size > 1 else np.zeros(len(sizes))
        np.testing.assert_array_equal(fastest_time(op, sizes, g), expected)


@settings(max_examples=100, deadline=None)
@given(
    q_st,
    st.integers(2, 16),
    bw,
    alpha,
    bw,
    alpha,
    st.floats(0.5, 1.0),
    st.floats(1e3, 1e10),
    st.floats(1e9, 1e11),
    st.integers(1, 8),
)
def test_nvls_tree_heads_bound_busbw_and_more_heads_never_slower(q, d, bu, au, bo, ao, eu, s, c, heads):
    """NVLS + tree across domains: busbw never exceeds heads x the per-head busbw (NCCL's
    perChMaxNVLSTreeBws), more heads are never slower, and without the limit the time is the pipelined
    stages' alone."""
    from dataclasses import replace

    if q < 2:
        return
    up = LinkParams(bu, au, bu, eu, None, (c, 0.8 * c))
    g = replace(flat_placement(q * d, q, up, LinkParams(bo, ao, bo)), inr_heads=min(heads, q))
    t = float(algorithm_time("allreduce", "inr", s, g))
    c_d = c if d == 2 else 0.8 * c
    assert s / t * 2 * (q * d - 1) / (q * d) <= min(heads, q) * c_d * (1 + 1e-9)
    more = replace(g, inr_heads=min(heads + 1, q))
    assert float(algorithm_time("allreduce", "inr", s, more)) <= t * (1 + 1e-12)
    free = replace(g, up=replace(up, inr_tree_head_busbw_Bps=None))
    assert float(algorithm_time("allreduce", "inr", s, free)) <= t * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(q_st, d_st, bw, alpha, bw, alpha, st.lists(st.floats(1, 1e10), min_size=1, max_size=8))
def test_reduce_scatter_and_all_gather_take_the_same_time(q, d, bu, au, bo, ao, sizes):
    """One pass of the same algorithms: the planner times a reduce-scatter and an all-gather of one size on one
    group once (hnplan.planning.training.collective_time.SAME_TIME), so their tuner times must agree exactly."""
    from hnplan.comm.algorithms import best_time

    g = _group(q, d, bu, au, bo, ao)
    s = np.array(sizes)
    assert fastest_time("reducescatter", s, g).tolist() == fastest_time("allgather", s, g).tolist()
    assert [best_time("reducescatter", x, g) for x in sizes] == [best_time("allgather", x, g) for x in sizes]


@pytest.mark.parametrize("system", ["hgx-h100-ib-ndr", "gb200-nvl72", "hgx-h100-roce-400g", "dgx-a100-hdr"])
def test_reduce_scatter_and_all_gather_take_the_same_time_on_nccl_fabrics(cat, system):
    """As above on catalog systems (NCCL's latencies and protocols, PAT with one rank per domain)."""
    from hnplan.comm.algorithms import best_time

    s = np.geomspace(1e3, 1e10, 15)
    for size, stride in ((8, 1), (64, 1), (16, 8), (128, 8), (64, 72), (1024, 4)):
        g = place_group(cat.design(system), size, stride, 8192)
        assert fastest_time("reducescatter", s, g).tolist() == fastest_time("allgather", s, g).tolist()
        assert [best_time("reducescatter", x, g) for x in s] == [best_time("allgather", x, g) for x in s]


def test_oversubscription_divides_every_rate_of_a_scale_out_link():
    """A 2:1 leaf divides the ring rate, the line rate and the all-to-all rates (NCCL's and the flex
    dispatcher's) alike; the latency stays."""
    from hnplan.comm.placement import _oversubscribed
    from hnplan.comm.topology import LinkParams

    link = LinkParams(47e9, 5e-6, 50e9, alltoall_bw_Bps=44e9, flex_alltoall_bw_Bps=38e9)
    half = _oversubscribed(link, 2.0)
    assert (half.bw_Bps, half.line_rate_Bps, half.alltoall_bw_Bps, half.flex_alltoall_bw_Bps) == (
        23.5e9,
        25e9,
        22e9,
        19e9,
    )
    assert half.alpha_s == link.alpha_s and half.a2a_Bps == 22e9
    plain = _oversubscribed(LinkParams(47e9, 5e-6, 50e9), 2.0)
    assert plain.alltoall_bw_Bps is None and plain.flex_alltoall_bw_Bps is None and plain.a2a_Bps == 23.5e9
