"""NCCL's per-channel bandwidth caps and tree corrections (NVIDIA/nccl src/graph/tuning.cc @ v2.30.7-1,
ncclTopoTuneModel and ncclTopoGetAlgoTime): the tables, hand derivations of the tuner's estimates, and the
rule that they pick the algorithm while hnplan's own model times it."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan import units
from hnplan.comm import nccl, nccl_bw
from hnplan.comm.algorithms import _tuner_key, algorithm_time, best_time, collective, fastest_time
from hnplan.comm.placement import flat_placement, place_group
from hnplan.comm.topology import LinkParams

GB = 1e9
US = 1e-6


def test_tables_are_ncclS_v2_30_7():
    # ncclTunerConstantsDefaults: perChMaxTreeBws Blackwell {70.0, 42.8, 24.0}, Hopper {38.7, 41.4, 36.0};
    # perChMaxRingLL128Bws Blackwell 40.0, Hopper 36.7; perChMaxTreeLL128Bws Blackwell {55.6, 31.67, 20.0}
    assert nccl_bw.PER_CHANNEL_TREE_GBps["blackwell"] == (70.0, 42.8, 24.0)
    assert nccl_bw.PER_CHANNEL_TREE_GBps["hopper"] == (38.7, 41.4, 36.0)
    assert nccl_bw.PER_CHANNEL_RING_LL128_GBps["blackwell"] == (40.0, 40.0, 40.0)
    assert nccl_bw.PER_CHANNEL_RING_LL128_GBps["hopper"] == (36.7, 36.7, 36.7)
    assert nccl_bw.PER_CHANNEL_TREE_LL128_GBps["blackwell"] == (55.6, 31.67, 20.0)
    assert nccl_bw.TREE_ALLREDUCE_FRACTION == 0.92
    # node index: one node, two, three or more (index2 = nNodes <= 2 ? nNodes - 1 : 2)
    assert [nccl_bw.node_index(d) for d in (1, 2, 3, 20)] == [0, 1, 2, 2]
    assert nccl_bw.per_channel_Bps(nccl_bw.PER_CHANNEL_TREE_GBps, "hopper", 2) == pytest.approx(41.4 * GB)


def test_tree_correction_by_size():
    # treeCorrectionFactor[proto][log2i(nBytes >> 6)] for 0 <= index < 23
    assert nccl_bw.tree_correction(2, 63.0) == 1.0  # nBytes >> 6 = 0: no entry
    assert nccl_bw.tree_correction(2, 64.0) == 0.9  # index 0, Simple
    assert nccl_bw.tree_correction(0, 2.0**20) == 0.5  # 1 MiB: 2^14 lines of 64 B, index 14, LL
    assert nccl_bw.tree_correction(1, 2.0**20) == 0.6  # LL128
    assert nccl_bw.tree_correction(2, 2.0**29 - 1) == 0.9  # index 22, the last NCCL uses
    assert nccl_bw.tree_correction(2, 2.0**29) == 1.0  # index 23: outside the size test
    sizes = np.array([63.0, 64.0, 2.0**20, 2.0**29 - 1, 2.0**29, 2.0**34])
    assert nccl_bw.tree_correction(2, sizes).tolist() == [1.0, 0.9, 0.5, 0.9, 1.0, 1.0]


def _group(channels, generation="blackwell", domains=20, per_domain=72):
    up = LinkParams(700 * GB, 0.0, 900 * GB, nccl_link="nvlink", nccl_generation=generation)
    out = LinkParams(47 * GB, 0.0, 50 * GB, nccl_link="net", hop_latency_s=2 * US)
    g = flat_placement(domains * per_domain, per_domain, up, out)
    return replace(g, ring_lanes=float(channels), channels=channels)


def test_tree_estimate_by_hand():
    # 20 domains of 72, rings and trees through 10 NICs per domain at 47 GB/s, 8 GiB per rank.
    g = _group(10)
    s = 8.0 * units.GiB
    # hnplan's tree: the busiest domain moves 2 S through 10 x 47 GB/s (q > 2 chain: 2 S / 700 GB/s is less)
    data = 2 * s / (10 * 47 * GB)
    # NCCL's Simple estimate: max(data / 0.92, 2 S / (10 channels x 24 GB/s)) = the cap, 71.6 ms;
    # correction 1 (8 GiB is past 512 MiB)
    simple = max(data / 0.92, 2 * s / (10 * 24 * GB))
    assert simple == pytest.approx(2 * s / (240 * GB))
    lat = nccl.tree_latency_s("nvlink", 2 * US, 72, 20, "Simple")
    # LL128: 120/128 of the tree, at most 10 x 20.0 GB/s: 2 S / 200 GB/s, slower than Simple here
    ll128 = max(simple / (120 / 128), 2 * s / (200 * GB))
    expect = min(lat + simple, nccl.tree_latency_s("nvlink", 2 * US, 72, 20, "LL128") + ll128)
    assert nccl_bw.tree_estimate_s(g, s, data) == pytest.approx(expect)
    # hnplan's own time of the tree (forced) keeps the physical bandwidth: no cap, no 0.92
    forced = float(algorithm_time("allreduce", "tree", s, g))
    assert forced == pytest.approx(lat + data, rel=1e-9)


def test_the_tuner_ranks_by_ncclS_estimate_and_charges_hnplanS_time():
    # Physically the tree is faster than the ring here (2 S / 470 GB/s against the ring's 2,878 steps), but
    # NCCL's estimate caps the tree at 10 x 24 GB/s, so the tuner runs the ring and the time is the ring's.
    g = _group(10)
    s = 16.0 * units.GiB
    tree = float(algorithm_time("allreduce", "tree", s, g))
    ring = float(algorithm_time("allreduce", "ring", s, g))
    assert tree < ring
    r = collective("allreduce", s, g)
    assert r.algorithm[0] == "ring" and float(r.time_s[0]) == pytest.approx(ring)
    assert best_time("allreduce", s, g) == (pytest.approx(ring), "ring")
    # without a channel count (one domain, or not known) the tree is uncapped and wins
    free = replace(g, channels=None)
    assert best_time("allreduce", s, free)[1] == "tree"


def test_ring_ll128_channel_cap_in_the_estimate_only():
    # 10 channels x 40 GB/s (Blackwell perChMaxRingLL128Bws) = 400 GB/s < 120/128 x 470 = 440.6 GB/s
    g = _group(10)
    s = 4.0 * units.GiB
    p = g.size
    est = _tuner_key("allreduce", "ring", g, s, None)
    lats = nccl.ring_latencies_s("nvlink", 2 * US, p, 20, 2, True)
    data = 2 * (p - 1) / p * s
    assert est == pytest.approx(min(lats[1] + data / (400 * GB), lats[2] + data / (470 * GB)))
    phys = float(algorithm_time("allreduce", "ring", s, g))
    assert phys == pytest.approx(min(lats[1] + data / (120 / 128 * 470 * GB), lats[2] + data / (470 * GB)))


def test_gb200_1440_tuner_picks_the_ring_nccl_ran(cat):
    # CoreWeave's 1,440 GB200 (20 NVL72 racks, NVLS off): NCCL ran the ring (comm_at_scale.csv); with
    # NCCL's per-channel tree cap (10 channels x 24 GB/s on Blackwell, three or more nodes) the tuner does too.
    s = cat.system("gb200-nvl72").model_copy(
        update=dict(scaleup_in_network_reduction=False, scaleout_in_network_reduction=False)
    )
    g = place_group(cat.design(s), 1440, 1, 1440)
    assert g.channels == 10 and g.up.nccl_generation == "blackwell"
    r = collective("allreduce", 16 * units.GiB, g)
    assert r.algorithm[0] == "ring"
    assert float(r.time_s[0]) == pytest.approx(float(algorithm_time("allreduce", "ring", 16 * units.GiB, g)))


def test_channels_are_the_nics_a_domain_uses(cat):
    # H100 nodes of 8 GPUs and 8 NICs: a DP group of 16 ranks, 8 per node, uses 8 channels; one rank per
    # node: 1; inside one node: no channel count
    d = cat.design(cat.system("hgx-h100-ib-ndr"))
    assert place_group(d, 16, 1, 16).channels == 8
    assert place_group(d, 16, 8, 128).channels == 1
    assert place_group(d, 8, 1, 8).channels is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1.0, 2.0**36), min_size=5, max_size=8), st.sampled_from([1, 4, 10]))
def test_array_and_scalar_tuners_agree(sizes, channels):
    g = _group(channels)
    arr = fastest_time("allreduce", np.array(sizes), g)
    one = [best_time("allreduce", x, g)[0] for x in sizes]
    assert arr.tolist() == pytest.approx(one, rel=1e-12)
    assert collective("allreduce", np.array(sizes), g).time_s.tolist() == pytest.approx(one, rel=1e-12)


@pytest.mark.parametrize("nvl", [4, 8])
def test_three_gb200_partitions_run_the_ring_as_nccl_chose(cat, nvl):
    # NVIDIA/nccl issue 1801 (NCCL 2.27.3, NVLS off): on three NVLink partitions of 4 and 8 GB200 on different
    # racks NCCL's default ran the ring (196.7 / 393.7 GB/s busbw at 16 GiB) although the forced tree was
    # faster (234.4 / 485.7). NCCL's estimate caps the tree at nvl channels x 24 GB/s (Blackwell, three
    # nodes) = 96 / 192 GB/s busbw, below the ring's nvl x 47 GB/s, so hnplan's tuner runs the ring too.
    update = dict(
        scaleup_in_network_reduction=False,
        scaleout_in_network_reduction=False,
        scaleup_domain_gpus=nvl,
        scaleout_ring_nics_per_domain=None,
    )
    g = place_group(cat.design(cat.system("gb200-nvl72").model_copy(update=update)), 3 * nvl, 1, 3 * nvl)
    assert g.channels == nvl
    s = 16 * units.GiB
    assert float(algorithm_time("allreduce", "tree", s, g)) < float(algorithm_time("allreduce", "ring", s, g))
    assert best_time("allreduce", s, g)[1] == "ring"
