"""Collectives at scale (issue 13 part 4): in-network reduction only where the system enables it, ring and
tree latency that grow with the number of ranks and domains, busbw that keeps rising with the message size
at thousands of ranks."""

import numpy as np
import pytest

from hnplan.comm.algorithms import algorithm_table, collective
from hnplan.comm.placement import flat_placement, place_group
from hnplan.comm.topology import LinkParams, system_links


def test_ring_latency_counts_intra_and_inter_domain_steps():
    # 4 domains of 8 ranks, zero-byte all-reduce: 2 (p - D) = 56 steps on the scale-up link (1 us) and
    # 2 (D - 1) = 6 across domains (10 us) -> 56 + 60 = 116 us (NCCL tuning.cc ring latency)
    up, out = LinkParams(1e11, 1e-6, 1e11), LinkParams(1e10, 1e-5, 1e10)
    g = flat_placement(32, 8, up, out)
    t = float(algorithm_table("allreduce", 0.0, g)["ring"])
    assert t == pytest.approx(116e-6)
    # reduce-scatter: half the steps
    r = collective("reducescatter", 0.0, g, "ring")
    assert float(r.time_s[0]) == pytest.approx(58e-6)


def test_tree_latency_is_a_chain_inside_the_domain_and_a_log_tree_across():
    # 2 ((q - 1) a_u + ceil(log2 D) a_o) = 2 (7 x 1 + 3 x 10) = 74 us for 8 domains of 8
    up, out = LinkParams(1e11, 1e-6, 1e11), LinkParams(1e10, 1e-5, 1e10)
    g = flat_placement(64, 8, up, out)
    assert float(algorithm_table("allreduce", 0.0, g)["tree"]) == pytest.approx(74e-6)


def test_in_network_reduction_only_where_the_system_enables_it(cat):
    s = cat.system("hgx-h100-ib-ndr")
    assert s.scaleup_in_network_reduction and not s.scaleout_in_network_reduction
    links = system_links(cat.design(s), gpus=64)
    assert links.scaleup.inr_efficiency == 0.85 and links.scaleout.inr_efficiency is None
    off = s.model_copy(update={"scaleup_in_network_reduction": False})
    g = place_group(cat.design(off), 8, 1, 8)
    assert "inr" not in algorithm_table("allreduce", 2.0**30, g)
    # a fabric that cannot reduce stays without it whatever the system says
    a100 = cat.system("dgx-a100-hdr").model_copy(update={"scaleup_in_network_reduction": True})
    assert system_links(cat.design(a100)).scaleup.inr_efficiency is None


def test_rings_cross_a_domain_through_the_nics_the_library_uses():
    # 4 domains of 8 ranks, 100 GB/s scale-up, 10 GB/s NIC share per rank, no latency. Every NIC:
    # B_ring = min(100, 8 x 10) = 80 GB/s; rings through 3 NICs per domain: min(100, 3 x 10) = 30 GB/s.
    # Ring all-reduce of 1 GB: 2 x 31/32 x 1e9 / 30e9 = 64.58 ms; busbw = the ring bandwidth, 30 GB/s.
    # The tree's crossing (2 S through the domain's NICs for D > 2) is capped the same way: 2e9 / 30e9.
    from dataclasses import replace

    up, out = LinkParams(1e11, 0.0, 1e11), LinkParams(1e10, 0.0, 1e10)
    g = flat_placement(32, 8, up, out)
    assert float(collective("allreduce", 1e9, g, "ring").busbw_Bps[0]) == pytest.approx(80e9)
    g3 = replace(g, ring_lanes=3.0)
    r = collective("allreduce", 1e9, g3, "ring")
    assert float(r.time_s[0]) == pytest.approx(2 * 31 / 32 * 1e9 / 30e9)
    assert float(r.busbw_Bps[0]) == pytest.approx(30e9)
    assert float(algorithm_table("allreduce", 1e9, g3)["tree"]) == pytest.approx(2e9 / 30e9)
    # hierarchical: reduce-scatter + all-gather in the domain, 2 x 7/8 x 1e9 / 100e9 = 17.5 ms; the 8 rings of
    # S/8 across the 4 domains share the 3 NICs: 2 x 3/4 x 1e9 / 30e9 = 50 ms; 67.5 ms in all
    assert float(algorithm_table("allreduce", 1e9, g3)["hierarchical"]) == pytest.approx(17.5e-3 + 50e-3)
    # a cap above the domain's ranks changes nothing; inside one domain no NIC is crossed
    assert float(collective("allreduce", 1e9, replace(g, ring_lanes=16.0), "ring").busbw_Bps[0]) == pytest.approx(80e9)
    one = replace(flat_placement(8, 8, up, out), ring_lanes=1.0)
    assert float(collective("allreduce", 1e9, one, "ring").busbw_Bps[0]) == pytest.approx(100e9)


@pytest.mark.parametrize("domains, factor", [(2, 1.0), (3, 1.5), (4, 2.0), (8, 2.0)])
def test_double_binary_tree_crossing_traffic(domains, factor):
    # NCCL trees.cc: each of the two trees carries S/2. Two domains: root of one, leaf of the other -> S per
    # direction; three: each tree is a chain, the middle of one and an end of the other -> 1.5 S; from four:
    # two children and a parent in one tree, a leaf in the other -> 2 S. 8 ranks per domain at 10 GB/s each
    # (80 GB/s per domain), a fast NVLink chain (2 S / 1 TB/s = 2 ms) and no latency: t = factor x 1e9 / 80e9
    up, out = LinkParams(1e12, 0.0, 1e12), LinkParams(1e10, 0.0, 1e10)
    g = flat_placement(8 * domains, 8, up, out)
    assert float(algorithm_table("allreduce", 1e9, g)["tree"]) == pytest.approx(factor * 1e9 / 80e9)


def test_ring_nics_per_domain_in_rank_shares(cat):
    # gb200-nvl72: 10 NICs per rack, 4 NICs per 4-GPU tray -> 10 rank shares; a server with one NIC per two
    # GPUs (4 NICs, 8 GPUs) using 2 NICs per domain -> 4 rank shares of half a NIC each
    s = cat.system("gb200-nvl72")
    assert place_group(cat.design(s), 144, 1, 144).ring_lanes == 10.0
    h = cat.system("hgx-h100-ib-ndr")
    assert place_group(cat.design(h), 16, 1, 16).ring_lanes is None
    half = h.model_copy(update={"nics_per_node": 4, "scaleout_ring_nics_per_domain": 2})
    assert place_group(cat.design(half), 16, 1, 16).ring_lanes == 4.0


def test_ring_nics_beyond_the_domain_are_refused(cat):
    from pydantic import ValidationError

    from hnplan.catalog.schemas import System

    data = cat.system("gb200-nvl72").model_dump()
    data["scaleout_ring_nics_per_domain"] = 73  # 18 trays x 4 NICs = 72
    with pytest.raises(ValidationError, match="exceeds the NICs of one scale-up domain"):
        System.model_validate(data)


@pytest.mark.parametrize(
    "sid",
    [
        "cloudmatrix-384",
        "dgx-a100-hdr",
        "dgx-b200-ib-ndr",
        "gb200-nvl72",
        "hgx-b200-ib-xdr",
        "hgx-h100-ib-ndr",
        "hgx-h100-roce-400g",
        "hgx-h200-ib-ndr",
        "hgx-h800-ib",
        "seed-40card",
    ],
)
def test_in_network_reduction_follows_the_catalog_on_every_tier(cat, sid):
    # the inr algorithm exists for a group only on a tier whose fabric reduces and whose system enables it
    s = cat.system(sid)
    d = cat.design(s)
    links = system_links(d, 144)
    up_ok = d.scaleup_fabric.in_network_reduction and s.scaleup_in_network_reduction
    out_ok = d.scaleout_fabric.in_network_reduction and s.scaleout_in_network_reduction
    assert (links.scaleup.inr_efficiency is not None) == up_ok
    assert (links.scaleout.inr_efficiency is not None) == out_ok
    one_domain = place_group(d, s.scaleup_domain_gpus, 1, s.scaleup_domain_gpus)
    assert ("inr" in algorithm_table("allreduce", 2.0**30, one_domain)) == up_ok
    n = s.scaleup_domain_gpus
    across = place_group(d, 2, n, 2 * n)  # 2 ranks, one in each of two domains
    assert across.domains == 2
    assert ("inr" in algorithm_table("allreduce", 2.0**30, across)) == out_ok


def test_nvl72_ring_nics_is_the_1440_gpu_measurement():
    # data/systems/gb200-nvl72.yaml scaleout_ring_nics_per_domain is solved from CoreWeave's 1,440-GPU ring
    # all-reduce at 16 GiB (NCCL 2.26.2); fewer than the 16 NICs NCCL 2.27.3 uses between NVLink domains
    from hnplan.catalog import load_catalog
    from hnplan.validation.comm import nvl72_ring_nics

    cat = load_catalog()
    n = nvl72_ring_nics(cat)
    assert n == cat.system("gb200-nvl72").scaleout_ring_nics_per_domain == 10


def test_busbw_keeps_rising_into_the_gib_range_at_1440_ranks(cat):
    # nccl-tests on 20 GB200 NVL72 racks (data/reference/comm_at_scale.csv): busbw 219 -> 346 -> 406 GB/s
    # from 1 to 4 to 16 GiB; the ring's 2(p-1) steps of latency make the model rise the same way
    s = cat.system("gb200-nvl72").model_copy(update={"scaleup_in_network_reduction": False})
    g = place_group(cat.design(s), 1440, 1, 1440)
    sizes = 2.0 ** np.arange(30, 35)
    bus = collective("allreduce", sizes, g, "ring").busbw_Bps
    assert np.all(np.diff(bus) > 0) and bus[2] / bus[0] > 1.5
    ref = cat.reference("comm_at_scale").set_index("id")
    assert float(bus[0]) / 1e9 == pytest.approx(float(ref.loc["cw_gb200_1440_1024MiB", "busbw_GBps"]), rel=0.15)
    # the asymptote: Simple's 10 NICs x 47 GB/s = 470 GB/s, not NVLink 5's 695; up to tens of GiB NCCL's
    # LL128 (latency 14 + 2,840 x 1.9 + 38 x (4.0 + 1.19) us = 5.6 ms, against Simple's 14.5 ms) moves
    # 120/128 of it, 440.6 GB/s (measured 405.7 at 16 GiB, levelling off near 430)
    huge = collective("allreduce", 2.0**40, g, "ring").busbw_Bps[0]
    assert float(huge) / 1e9 == pytest.approx(10 * 47.0, rel=0.01)


def test_ring_latency_grows_with_the_number_of_domains(cat):
    s = cat.system("hgx-h100-ib-ndr")
    d = cat.design(s)
    t = [float(collective("allreduce", 1e6, place_group(d, n, 1, n), "ring").time_s[0]) for n in (16, 256, 2048)]
    assert t[0] < t[1] < t[2]


def test_nvl72_nvls_efficiency_is_the_one_rack_measurement():
    # data/systems/gb200-nvl72.yaml scaleup_inr_efficiency is solved from CoreWeave's one-rack NVLS
    # all-reduce (834.57 GB/s busbw at 8 GiB); the YAML holds the solution to 3 decimals
    from hnplan.catalog import load_catalog
    from hnplan.validation.comm import nvl72_nvls_efficiency

    cat = load_catalog()
    e = nvl72_nvls_efficiency(cat)
    assert 0.55 < e < 0.74  # below NCCL's single-node Blackwell constant
    assert cat.system("gb200-nvl72").scaleup_inr_efficiency == pytest.approx(e, abs=6e-4)


def test_system_inr_efficiency_overrides_the_fabric_constant():
    from hnplan.catalog import load_catalog
    from hnplan.comm.topology import system_links

    cat = load_catalog()
    s = cat.system("gb200-nvl72")
    assert system_links(cat.design(s), 72).scaleup.inr_efficiency == pytest.approx(0.618)
    plain = s.model_copy(update={"scaleup_inr_efficiency": None})
    assert system_links(cat.design(plain), 72).scaleup.inr_efficiency == pytest.approx(0.74)  # nvlink5 (NCCL tuner)
