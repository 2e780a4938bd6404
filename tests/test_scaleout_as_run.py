"""The scale-out fabric each MLPerf Training v6.0 row ran on, and the Ethernet twins of the NVL72 racks.

Every v6.0 submission's ``systems/<system>.json`` (MLCommons training_results_v6.0 @ eabf23a07b2a, read in the
public copy Richardyu114/training_results_v6.0) states its scale-out NICs; the table below transcribes them and
the rows must name a catalog system with that fabric and NIC rate.
"""

import pytest

from hnplan import units
from hnplan.catalog.runs import training_runs
from hnplan.comm.algorithms import collective
from hnplan.comm.placement import place_group

# submission system -> (fabric family, Gb/s per GPU), from its systems file's host_networking
AS_RUN = {
    # NVIDIA Theia-cmh: '4x ConnectX-8 Ethernet NDR 2x400 Gb/s'
    "mlperf-v60-nvidia-gb300-llama31-405b-512": ("roce", 800),
    "mlperf-v60-nvidia-gb300-llama31-405b-2048": ("roce", 800),
    # Azure: '4x ConnectX-8 800 Gb/s Ethernet MRC'
    "mlperf-v60-azure-gb200-llama31-405b-8192": ("roce", 800),
    # NVIDIA Theia: '4x ConnectX-8 IB XDR 800 Gb/s'
    "mlperf-v60-nvidia-gb300-llama31-8b-8": ("ib", 800),
    "mlperf-v60-nvidia-gb300-llama31-8b-512": ("ib", 800),
    "mlperf-v60-nvidia-gb300-deepseek-v3-256": ("ib", 800),
    "mlperf-v60-nvidia-gb300-deepseek-v3-512": ("ib", 800),
    # NVIDIA Tyche-hsg: '4x ConnectX-7 IB NDR 400 Gb/s' (the 8B configuration's NCCL_NET_PLUGIN=spcx is the
    # Spectrum-X NCCL plugin, which HPC-X ships for Spectrum-X and Quantum fabrics alike: not a fabric change)
    "mlperf-v60-nvidia-gb200-llama31-8b-1024": ("ib", 400),
    "mlperf-v60-nvidia-gb200-deepseek-v3-512": ("ib", 400),
    "mlperf-v60-nvidia-gb200-deepseek-v3-2048": ("ib", 400),
    "mlperf-v60-nvidia-gb200-deepseek-v3-4096": ("ib", 400),
    "mlperf-v60-nvidia-gb200-deepseek-v3-8192": ("ib", 400),
    # Google: '4x NVIDIA ConnectX-7 RoCE 400 Gb/s', rail-aligned RoCEv2 fat tree
    "mlperf-v60-google-gb200-deepseek-v3-256": ("roce", 400),
    # CoreWeave GB300: 4 ConnectX-8 a node, each 4 x 200 Gb/s RoCE on Spectrum-X switches (800G a GPU)
    "mlperf-v60-coreweave-gb300-llama31-405b-4096": ("roce", 800),
    "mlperf-v60-coreweave-gb300-deepseek-v3-2048": ("roce", 800),
    "mlperf-v60-coreweave-gb300-deepseek-v3-4096": ("roce", 800),
    "mlperf-v60-coreweave-gb300-deepseek-v3-8192": ("roce", 800),
    # CoreWeave B200: '8x ConnectX-7 NDR 400G InfiniBand'
    "mlperf-v60-coreweave-b200-llama31-8b-64": ("ib", 400),
    # Dell B300: host_networking left empty in its systems file; the catalog's DGX B300 (XDR) stays
    "mlperf-v60-dell-b300-llama31-8b-16": ("ib", 800),
    # Cisco B300, one server: the log's system description leaves host_networking empty; the DGX B300 stays
    "mlperf-v60-cisco-b300-llama31-8b-8": ("ib", 800),
    # Cisco H200: '8x NVIDIA B3140 BlueField-3 DPU 1x400Gb/s' (protocol not stated; the catalog's H200 server at 400G)
    "mlperf-v60-cisco-h200-llama31-8b-16": ("ib", 400),
    # Nebius B300: '8x ConnectX-8 IB XDR 800Gb/s'
    "mlperf-v60-nebius-b300-llama31-8b-64": ("ib", 800),
    # Nebius GB300 n18: host_networking empty; 18 trays of 4 are one NVL72 rack (the catalog's XDR rack)
    "mlperf-v60-nebius-gb300-llama31-8b-72": ("ib", 800),
    # HPE GB300 NVL72: '4x ConnectX-8 IB XDR 800 Gb/s'
    "mlperf-v60-hpe-gb300-llama31-8b-16": ("ib", 800),
    "mlperf-v60-hpe-gb300-llama31-8b-32": ("ib", 800),
    "mlperf-v60-hpe-gb300-llama31-8b-72": ("ib", 800),
    # HPE GB200 NVL72: '4x ConnectX-7 IB NDR 400 Gb/s'
    "mlperf-v60-hpe-gb200-llama31-8b-32": ("ib", 400),
}

TWINS = {
    "gb300-nvl72-roce-800g": "gb300-nvl72",
    "gb200-nvl72-roce-800g": "gb200-nvl72",
    "gb200-nvl72-roce-400g": "gb200-nvl72",
}
NETWORK_FIELDS = {"id", "name", "source", "notes", "field_sources", "assumptions", "price_item"}
NETWORK_FIELDS |= {"scaleout_fabric", "nic_gbps", "scaleout_switch", "scaleout_ring_nics_per_domain"}


def test_every_v60_row_names_the_fabric_it_ran_on(cat):
    rows = {r.id: r for r in training_runs() if r.id.startswith("mlperf-v60-")}
    assert set(rows) == set(AS_RUN)
    for rid, (family, gbps) in AS_RUN.items():
        s = cat.system(rows[rid].system)
        assert s.nic_gbps * s.nics_per_node / s.node_gpus == gbps, rid
        assert s.scaleout_fabric.startswith(family), (rid, s.scaleout_fabric)


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_ethernet_twins_differ_from_their_rack_only_in_the_network(cat, twin):
    a, b = cat.system(twin).model_dump(), cat.system(TWINS[twin]).model_dump()
    assert {k for k in a if a[k] != b.get(k)} <= NETWORK_FIELDS
    assert cat.system(twin).price_item == TWINS[twin]  # the same rack; prices.yaml excludes the scale-out fabric
    assert cat.price(TWINS[twin]).usd > 0
    assert cat.system(twin).scaleout_switch == "spectrum-x-sn5600"
    assert not cat.get("interconnects", cat.system(twin).scaleout_fabric).in_network_reduction


def test_roce_800g_ring_busbw_by_hand(cat):
    # a ring all-reduce of 8 GiB over 8 GPUs, one in each of 8 racks: every step crosses one 800G NIC, so busbw is
    # its line rate times the fabric's efficiency, 100 GB/s x 0.92 = 92 GB/s, less the ring's 2 (p - 1) = 14 step
    # latencies (NCCL's Simple network step, 14 us, plus link and switch hops): under 0.5 % of the 163 ms
    fabric = cat.get("interconnects", "roce-800g")
    by_hand = units.gbps_to_Bps(800) * fabric.bw_efficiency
    assert by_hand == pytest.approx(92e9)
    for sid in ("gb300-nvl72-roce-800g", "gb200-nvl72-roce-800g"):
        r = collective("allreduce", 8 * units.GiB, place_group(cat.design(sid), 8, 72, 8 * 72), "ring")
        busbw = float(r.busbw_Bps[0])
        assert busbw < by_hand
        assert busbw == pytest.approx(by_hand, rel=0.005)
    # the InfiniBand twin of the GB300 rack: the same 800G ConnectX-8 at XDR's 0.94, so 94 GB/s
    ib = collective("allreduce", 8 * units.GiB, place_group(cat.design("gb300-nvl72"), 8, 72, 8 * 72), "ring")
    assert float(ib.busbw_Bps[0]) == pytest.approx(94e9, rel=0.005)
    # Google's GB200 on 400G RoCE: 50 GB/s x 0.92 = 46 GB/s, against NDR's 47
    g = collective("allreduce", 8 * units.GiB, place_group(cat.design("gb200-nvl72-roce-400g"), 8, 72, 8 * 72), "ring")
    assert float(g.busbw_Bps[0]) == pytest.approx(46e9, rel=0.005)
