"""Closed-form fat-tree and scale-up sizing, cross-checked with networkx graphs on small instances."""

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan.comm.graphs import (
    add_fat_tree,
    add_scaleup_domain,
    cut_bandwidth_Bps,
    gpu_diameter,
    hop_count,
    system_graph,
)
from hnplan.comm.topology import fat_tree_counts, scaleout_bom, scaleup_bom
from hnplan.errors import InputError
from hnplan.planning.network import network_summary


@given(st.integers(2, 64).map(lambda h: 2 * h))
def test_three_tier_fat_tree_closed_form(k):
    # Al-Fares et al. 2008: k-port three-tier fat-tree: k^3/4 hosts, 5k^2/4 switches, 3 x k^3/4 links
    c = fat_tree_counts(k**3 // 4, k)
    assert c["tiers"] == 3
    assert c["switches"] == 5 * k * k // 4
    assert c["per_tier"] == (k * k // 2, k * k // 2, k * k // 4)
    assert c["links"] == 3 * k**3 // 4
    assert c["max_endpoints"] == k**3 // 4


@given(st.integers(2, 64).map(lambda h: 2 * h))
def test_two_tier_leaf_spine_closed_form(k):
    c = fat_tree_counts(k * k // 2, k)  # k leaves of k/2 hosts, k/2 spines
    assert (c["tiers"], c["per_tier"], c["links"], c["max_endpoints"]) == (2, (k, k // 2), k * k, k * k // 2)


def _fat_tree_graph(e, k, o=1.0, rails=1):
    g = nx.Graph()
    hosts = [f"gpu{i}" for i in range(e)]
    for i, h in enumerate(hosts):
        g.add_node(h, kind="gpu", layer=0, gpu=i, node=i, domain=i)
    add_fat_tree(g, hosts, k, 1.0, o, rails)
    return g


@pytest.mark.parametrize(
    "e,k,o", [(16, 4, 1.0), (128, 8, 1.0), (32, 8, 1.0), (48, 8, 3.0), (64, 16, 1.0), (96, 16, 3.0)]
)
def test_graph_matches_closed_form(e, k, o):
    g = _fat_tree_graph(e, k, o)
    c = fat_tree_counts(e, k, o)
    switches = [n for n, d in g.nodes(data=True) if d["kind"] != "gpu"]
    assert len(switches) == c["switches"]
    assert sum(d["links"] for _, _, d in g.edges(data=True)) == c["links"]
    # max-flow min-cut between the halves equals E/2 x port rate / o
    assert cut_bandwidth_Bps(g) == pytest.approx(e / 2 / (o if c["tiers"] > 1 else 1.0))
    assert gpu_diameter(g) == 2 * c["tiers"]


def test_k4_fat_tree_hop_counts():
    g = _fat_tree_graph(16, 4)
    # same edge switch: 2 links; same pod: 4; across pods: 6 (host-edge-agg-core-agg-edge-host)
    assert (hop_count(g, 0, 1), hop_count(g, 0, 2), hop_count(g, 0, 15)) == (2, 4, 6)


def test_rail_optimised_same_rail_shares_a_leaf():
    g = _fat_tree_graph(8 * 40, 64, rails=8)  # 40 nodes x 8 NICs, 2 tiers
    # rail 3 has 40 NICs on two 32-port-down leaves: NIC 3 of nodes 0 and 31 share a leaf (2 links);
    # node 39 is on the rail's second leaf, and rail 4 on other leaves: both through a spine (4)
    assert hop_count(g, 3, 31 * 8 + 3) == 2
    assert hop_count(g, 3, 39 * 8 + 3) == 4
    assert hop_count(g, 3, 4) == 4


def test_scaleup_domains():
    g = nx.Graph()
    ids = [f"gpu{i}" for i in range(16)]
    for i, n in enumerate(ids):
        g.add_node(n, kind="gpu", layer=0, gpu=i, node=0, domain=0)
    add_scaleup_domain(g, ids, "torus-2d", 4.0)  # 4 x 4 torus, 1 per link
    assert g.number_of_edges() == 32 and gpu_diameter(g) == 4
    assert cut_bandwidth_Bps(g) == pytest.approx(8.0)  # 2 x 4 links cut
    with pytest.raises(InputError):
        add_scaleup_domain(g, ids[:6], "torus-2d", 4.0)


@pytest.mark.parametrize(
    "system,gpus",
    [
        ("hgx-h100-ib-ndr", 16),
        ("hgx-h100-ib-ndr", 256),
        ("gb200-nvl72", 144),
        ("gb200-nvl72", 72),
        ("dgx-a100-hdr", 64),
        ("hgx-b200-ib-xdr", 64),
        ("cloudmatrix-384", 384),
        ("hgx-h100-roce-400g", 512),
    ],
)
def test_system_graph_agrees_with_summary(cat, system, gpus):
    s = cat.system(system)
    g = system_graph(cat.design(s), gpus)
    d = network_summary(cat.design(s), gpus)
    assert gpu_diameter(g) == d["diameter_hops"]
    assert cut_bandwidth_Bps(g) / 1e9 == pytest.approx(d["bisection_GBps"], rel=1e-9)
    kinds = [k for _, k in g.nodes(data="kind")]
    assert sum(k in ("leaf", "spine", "aggregation", "core") for k in kinds) == d["switches"]["scaleout"]


def test_nvl72_and_hgx_h100_bom(cat):
    # NVL72: 18 NVLink 5 switch chips, 72 x 18 = 1,296 GPU-switch links (nvlink5-switch: 72 ports)
    up = scaleup_bom(cat.design("gb200-nvl72"), 72)
    assert (up.switches, up.links, up.switch_model) == (18, 1296, "nvlink5-switch")
    assert up.links == up.switches * cat.switch("nvlink5-switch").ports
    # 16,384 H100 on 64-port NDR: 16,384 NICs > 64^2/2 -> 3 tiers; 8 rails x 64 leaves, 512 aggregation,
    # 256 core = 1,280 switches; 3 x 16,384 links, two transceivers each
    b = scaleout_bom(cat.design("hgx-h100-ib-ndr"), 16384)
    assert (b.tiers, b.switches_per_tier, b.switches) == (3, (512, 512, 256), 1280)
    assert (b.links, b.transceivers, b.cables) == (49152, 98304, 49152)
    assert b.bisection_Bps == pytest.approx(16384 / 2 * 50e9)


def test_graph_refuses_huge_instances(cat):
    with pytest.raises(InputError, match="closed forms"):
        system_graph(cat.design("hgx-h100-ib-ndr"), 100000)


def test_topology_wires_the_whole_units_tco_buys(cat):
    # 100 GB200 GPUs: tco buys two whole NVL72 racks (144 GPUs); topology wires the same two racks:
    # 2 x 18 NVLink switch chips, 144 x 18 GPU-switch links, and the scale-out fabric of 36 trays x 4 NICs
    from hnplan.planning.design import tco_summary

    d = network_summary(cat.design("gb200-nvl72"), 100)
    t = tco_summary("gb200-nvl72", 100, cat)
    assert (d["gpus"], d["gpus_built"], d["unit_gpus"]) == (100, 144, 72) and t["gpus_bought"] == 144
    assert d["domains"] == 2 and d["switches"]["scaleup"] == 36 and d["links"]["scaleup"] == 144 * 18
    assert d["bom"]["scaleout"] == scaleout_bom(cat.design("gb200-nvl72"), 144).as_dict()
    assert {k: v for k, v in d.items() if k != "gpus"} == {
        k: v for k, v in network_summary(cat.design("gb200-nvl72"), 144).items() if k != "gpus"
    }
    # an 8-GPU server: 12 GPUs are two servers on both commands
    assert network_summary(cat.design("hgx-h100-ib-ndr"), 12)["gpus_built"] == 16
    assert tco_summary("hgx-h100-ib-ndr", 12, cat)["gpus_bought"] == 16


def test_largest_fabric_is_one_limit(cat):
    from hnplan.comm.topology import max_scaleout_gpus

    # 64-port NDR, three tiers: 64^3/4 = 65,536 ports; HGX H100 has 8 NICs per 8 GPUs -> 65,536 GPUs;
    # GB200 NVL72 trays have 4 NICs per 4 GPUs -> 65,536, down to whole 72-GPU racks: 910 x 72 = 65,520
    assert max_scaleout_gpus(cat.design("hgx-h100-ib-ndr")) == 65536
    assert max_scaleout_gpus(cat.design("gb200-nvl72")) == 910 * 72
    scaleout_bom(cat.design("gb200-nvl72"), 65520)  # the largest is buildable
    with pytest.raises(InputError, match="the most it joins is 65,520 GPUs"):
        scaleout_bom(cat.design("gb200-nvl72"), 65592)


def test_baseboard_links_are_not_cables(cat):
    # 16,384 H100 on HGX servers: 294,912 NVLink links (18 per GPU to the baseboard's NVSwitch chips) are board
    # traces, so the cables are the scale-out fabric's 49,152; NVL72's NVLink spine is cabled copper
    hgx = network_summary("hgx-h100-ib-ndr", 16384, catalog=cat)
    assert hgx["links"]["scaleup"] == 16384 * 18 == 294912
    assert hgx["cables"] == {"scaleup": 0, "scaleout": 49152, "total": 49152}
    nvl = network_summary("gb200-nvl72", 16416, catalog=cat)
    assert nvl["cables"]["scaleup"] == nvl["links"]["scaleup"] == 16416 * 18
