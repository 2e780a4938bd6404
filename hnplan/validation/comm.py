"""Collectives against nccl-tests measurements (``data/reference/comm_measurements.csv`` and, at scale,
``data/reference/comm_at_scale.csv``).

Large messages (8 GiB, the top of nccl-tests' usual sweep) on the catalog systems; the ring rows on one
8-GPU node are where the NVLink ``bw_efficiency`` values come from, so they are calibrations. At scale
(64 H100 with IB SHARP, GB200 NVL72 on 1, 2 and 20 racks) each row is predicted with the NCCL settings
the run used (NVLS and CollNet on or off, a forced algorithm), from the catalog system with its
in-network-reduction switches set accordingly.
"""

from __future__ import annotations

import re

from hnplan import units
from hnplan.comm.algorithms import collective
from hnplan.comm.placement import place_group
from hnplan.validation.comm_mid_size import h200_rows, mid_size_rows
from hnplan.validation.rows import Row, area

LARGE = 8 * units.GiB
TOL = 0.15  # the communication issue's tolerance on large-message busbw


def _num(text) -> float:
    return float(re.search(r"[0-9]+(?:\.[0-9]+)?", str(text)).group(0))


def _busbw(cat, system, gpus, op="allreduce", algorithm=None, size=LARGE, **update):
    s = cat.system(system)
    if update:
        s = s.model_copy(update=update)
    r = collective(op, size, place_group(cat.design(s), gpus, 1, gpus), algorithm)
    return units.Bps_to_GBps(float(r.busbw_Bps[0])), units.Bps_to_GBps(float(r.algbw_Bps[0]))


def _algorithm(cat, system, gpus, size, **update):
    s = cat.system(system).model_copy(update=update) if update else cat.system(system)
    return str(collective("allreduce", size, place_group(cat.design(s), gpus, 1, gpus)).algorithm[0])


NO_INR = dict(scaleup_in_network_reduction=False, scaleout_in_network_reduction=False)


def nvl72_nvls_efficiency(cat=None) -> float:
    """The NVLS efficiency of a GB200 NVL72 rack solved from its measured all-reduce (brentq).

    The efficiency ``e`` of the in-network-reduction algorithm (:mod:`hnplan.comm.algorithms`, ``inr``)
    at which 72 GPUs of ``gb200-nvl72`` reach the busbw CoreWeave measured with NVLS on at 8 GiB
    (834.57 GB/s, NCCL 2.25.1; ``data/reference/comm_at_scale.csv`` row ``cw_gb200_72_8192MiB``, the
    plateau of its 4-8 GiB sweep). ``data/systems/gb200-nvl72.yaml`` carries the result as
    ``scaleup_inr_efficiency``; a test holds the two together. NCCL's tuner constant (nvlsEfficiency
    0.74 for Blackwell, src/graph/tuning.cc) reproduces 8 x B300 but not the rack: at q = 72 ranks the
    measured busbw is no higher than at q = 8.

    Returns
    -------
    float
        The efficiency [fraction of the NVLink bandwidth after ``bw_efficiency``].
    """
    from scipy.optimize import brentq

    from hnplan.catalog import load_catalog

    cat = cat or load_catalog()
    target = _num(cat.reference("comm_at_scale").set_index("id").loc["cw_gb200_72_8192MiB", "busbw_GBps"])
    return float(
        brentq(
            lambda e: _busbw(cat, "gb200-nvl72", 72, algorithm="inr", scaleup_inr_efficiency=e)[0] - target,
            0.2,
            1.0,
            xtol=1e-6,
        )
    )


def nvl72_ring_nics(cat=None) -> int:
    """The NICs per GB200 NVL72 rack through which NCCL 2.26.2's rings crossed 20 racks, solved from the
    measured ring all-reduce.

    The whole number of NICs (``scaleout_ring_nics_per_domain``) at which the ring all-reduce of 1,440
    GPUs of ``gb200-nvl72`` (NVLS off) comes nearest the busbw CoreWeave measured at 16 GiB (405.74 GB/s,
    NCCL 2.26.2; ``data/reference/comm_at_scale.csv`` row ``cw_gb200_1440_16384MiB``, the top of a sweep
    whose busbw levels off near 430 GB/s). Each ring flow leaves and enters a rack through one NIC
    (NVIDIA/nccl src/graph/search.cc), so the rack-crossing bandwidth is the NICs the rings use times the
    per-NIC rate; NCCL 2.27.3 raised that number to 16 on GB200 (its release notes).
    ``data/systems/gb200-nvl72.yaml`` carries the result; a test holds the two together.

    Returns
    -------
    int
        NICs per rack (1 to the rack's 72).
    """
    from hnplan.catalog import load_catalog

    cat = cat or load_catalog()
    ref = cat.reference("comm_at_scale").set_index("id")
    target = _num(ref.loc["cw_gb200_1440_16384MiB", "busbw_GBps"])

    def miss(n: int) -> float:
        b, _ = _busbw(
            cat, "gb200-nvl72", 1440, "allreduce", "ring", 16 * units.GiB, scaleout_ring_nics_per_domain=n, **NO_INR
        )
        return abs(b - target)

    return min(range(1, 73), key=miss)


def _at_scale(cat) -> list[Row]:
    """Rows of ``comm_at_scale.csv``: IB SHARP on 64 H100, NVLink 5 on B300, GB200 NVL72 at 72-1,440 GPUs."""
    ref = cat.reference("comm_at_scale").set_index("id")
    out = []

    def row(rid, case, predicted, role, tol, note):
        r = ref.loc[rid]
        out.append(
            Row(
                "communication",
                case,
                "busbw",
                "GB/s",
                _num(r["busbw_GBps"]),
                predicted,
                role,
                tol,
                f"{r['source']} ({r['nccl_setting']}, NCCL {r['nccl_version']})",
                note,
            )
        )

    b, _ = _busbw(
        cat,
        "hgx-h100-ib-ndr",
        64,
        algorithm="inr",
        scaleup_in_network_reduction=False,
        scaleout_in_network_reduction=True,
    )
    row(
        "cw_h100_64_sharp_8192MiB",
        "8 x 8 H100, IB SHARP (CollNet chain), all-reduce 8 GiB",
        b,
        "prediction",
        TOL,
        "in-network reduction across nodes at the IB fabric's inr_efficiency (NCCL's CollNet 0.85); NVLink "
        "reduce-scatter/all-gather inside the node limits it",
    )
    b, _ = _busbw(cat, "dgx-b300", 8, algorithm="ring")
    row(
        "nccl2140_b300_8_ring",
        "8 x B300, NVLink 5 ring all-reduce",
        b,
        "calibration",
        TOL,
        "nvlink5 bw_efficiency = 695/900 is read from this figure (B300 has B200's NVLink 5; modelled on dgx-b300)",
    )
    b, _ = _busbw(cat, "dgx-b300", 8)
    row(
        "nccl2140_b300_8_nvls",
        "8 x B300, NVLink SHARP all-reduce (default)",
        b,
        "prediction",
        TOL,
        "ring efficiency x NCCL's Blackwell nvlsEfficiency 0.74 (B300 modelled on dgx-b300)",
    )
    nvls_q = (
        "NVLS at the rack's measured efficiency (scaleup_inr_efficiency, read from the one-rack row) "
        "inside each rack, InfiniBand between racks"
    )
    b, _ = _busbw(cat, "gb200-nvl72", 72)
    row(
        "cw_gb200_72_8192MiB",
        "GB200 NVL72, one rack (72), NVLS all-reduce 8 GiB (default)",
        b,
        "calibration",
        TOL,
        "gb200-nvl72 scaleup_inr_efficiency is solved from this figure (nvl72_nvls_efficiency); NCCL's "
        "single-node Blackwell constant 0.74 gave +20 %: at q = 72 the measured busbw is no higher than at q = 8",
    )
    b, _ = _busbw(cat, "gb200-nvl72", 144, size=16 * units.GiB)
    alg = _algorithm(cat, "gb200-nvl72", 144, 16 * units.GiB)
    row(
        "cw_gb200_144_16384MiB",
        "GB200 NVL72, two racks (144), all-reduce 16 GiB (default)",
        b,
        "prediction",
        TOL,
        f"hnplan's tuner picks {alg}; {nvls_q}; the NVLS + tree heads (the 10 GPU:NIC pairs the rack's graph uses "
        "x 96 GB/s, NCCL's perChMaxNVLSTreeBws for Blackwell on two nodes = 960 GB/s) do not limit it",
    )
    ring_note = (
        "NCCL's ring with NVLS off (NVIDIA/nccl issue 1801): 2(p-1) steps of latency, 2(D-1) of them across "
        "racks, on NCCL's LL128 protocol (latency 14 + 2,840 x 1.9 + 38 x 5.2 us = 5.6 ms, against Simple's "
        "14.4 ms; 120 data bytes per 128-byte line), so busbw rises with size; each ring flow crosses a rack "
        "boundary through one NIC, and NCCL 2.26.2's rings used 10 of the rack's 72 NICs (gb200-nvl72 "
        "scaleout_ring_nics_per_domain, solved from the 16 GiB figure by nvl72_ring_nics): 10 x 47 x 120/128 "
        "= 441 GB/s, below NVLink 5's 695"
    )
    for mib in (512, 1024, 2048, 4096, 8192, 16384):
        b, _ = _busbw(cat, "gb200-nvl72", 1440, algorithm="ring", size=mib * units.MiB, **NO_INR)
        row(
            f"cw_gb200_1440_{mib}MiB",
            f"GB200 NVL72, 20 racks (1,440), ring all-reduce {units.to_GiB(mib * units.MiB):g} GiB, NVLS off",
            b,
            "calibration" if mib == 16384 else "prediction",
            TOL,
            ring_note,
        )
    b, _ = _busbw(cat, "gb200-nvl72", 1440, size=16 * units.GiB, **NO_INR)
    alg = _algorithm(cat, "gb200-nvl72", 1440, 16 * units.GiB, **NO_INR)
    row(
        "cw_gb200_1440_16384MiB",
        "GB200 NVL72, 20 racks (1,440), all-reduce 16 GiB, NVLS off (hnplan's tuner)",
        b,
        "reported",
        None,
        f"hnplan's tuner picks {alg}; its tree and hierarchical all-reduce cross the racks through the same 10 NICs "
        "per rack as the ring, with fewer steps of latency (Simple: 0.7 ms); NCCL picks the ring (its tuner caps tree bandwidth "
        "per channel, tuning.cc perChMaxTreeBw)",
    )
    for nvl, rid in ((4, "nccl1801_gb200_nvl4x3"), (8, "nccl1801_gb200_nvl8x3")):
        # a partition of nvl GPUs is its own NVLink domain whose rings use all its NICs (NCCL 2.27.3)
        part = dict(NO_INR, scaleup_domain_gpus=nvl, scaleout_ring_nics_per_domain=None)
        b, _ = _busbw(cat, "gb200-nvl72", 3 * nvl, algorithm="ring", size=16 * units.GiB, **part)
        row(
            rid,
            f"GB200, 3 NVLink partitions of {nvl} on different racks ({3 * nvl}), ring all-reduce 16 GiB",
            b,
            "prediction",
            TOL,
            f"an NVLink domain of {nvl} GPUs (the NVL72 tray's hardware) with its {nvl} NICs: the ring crosses "
            f"each partition through all of them, {nvl} x 47 GB/s (NDR's per-NIC ring rate); measured {nvl} x 49",
        )
        b, _ = _busbw(cat, "gb200-nvl72", 3 * nvl, algorithm="tree", size=16 * units.GiB, **part)
        r = ref.loc[rid]
        out.append(
            Row(
                "communication",
                f"GB200, 3 NVLink partitions of {nvl} on different racks ({3 * nvl}), tree all-reduce 16 GiB",
                "busbw",
                "GB/s",
                _num(str(r["busbw_GBps"]).split("/")[1]),
                b,
                "prediction",
                TOL,
                f"{r['source']} (NVLS off, NCCL_ALGO=tree, NCCL {r['nccl_version']})",
                "NCCL's double binary tree on three domains: each tree is a chain, so the busiest partition "
                f"moves 1.5 S through its {nvl} NICs (2 S from four domains on; NVIDIA/nccl src/graph/trees.cc); "
                "faster than the ring NCCL's tuner picks, as measured",
            )
        )
    return out


NVLS_TREE_NOTE = (
    "NVLS + tree (NCCL's NVLS_TREE): one thread block per channel reduces each head's share through the "
    "NVSwitch, hands it to its NIC, takes the other node's sum back and multicasts it, so the stages pipeline no "
    "faster than the heads: 8 heads (one per GPU:NIC pair) x 57.7 GB/s busbw each on two nodes (the fabric's "
    "inr_tree_head_busbw_GBps, NCCL's perChMaxNVLSTreeBws for Hopper) = 462, below the NVLS stage alone (522: "
    "algbw 278.7 x 2(p-1)/p) and the 8 NICs (376 GB/s algbw)"
)


def _two_and_four_nodes(cat, ref) -> list[Row]:
    """All-reduce with NCCL's default algorithms on 2 and 4 HGX H100 nodes (8 GiB), as users measured them."""
    src = ref["source"]
    out = []
    for rid, system, gpus, published, update, case, role, note in (
        (
            "h100_2x8_default_user",
            "hgx-h100-ib-ndr",
            16,
            470.0,
            {},
            "2 x 8 H100, all-reduce, NCCL default (NVLS + tree)",
            "prediction",
            NVLS_TREE_NOTE,
        ),
        (
            "h100_2x8_default_user",
            "hgx-h100-ib-ndr",
            32,
            365.84,  # the same thread's 4-host figure (other_value)
            {},
            "4 x 8 H100, all-reduce, NCCL default",
            "prediction",
            "the ring through the nodes' NICs (NVLink 369 and 8 NICs x 47 = 376 GB/s per node) is the fastest "
            "from four nodes: the tree's interior nodes carry 2S, and NVLS + tree is held to 8 heads x 45.5 GB/s "
            "= 364 GB/s (NCCL's perChMaxNVLSTreeBws for Hopper on three or more nodes)",
        ),
        (
            "h100_2x8_nvls_roce_user",
            "hgx-h100-roce-400g",
            16,
            430.0,
            {},
            "2 x 8 H100, 8 x 400G RoCE, all-reduce, NVLS on (NCCL 2.19.3)",
            "prediction",
            NVLS_TREE_NOTE + "; this cluster's NVLS-off and four-node points sit 11-15 % below hnplan",
        ),
        (
            "h100_2x8_nvls_roce_user",
            "hgx-h100-roce-400g",
            16,
            330.0,  # NCCL_NVLS_ENABLE=0 (other_value)
            {"scaleup_in_network_reduction": False},
            "2 x 8 H100, 8 x 400G RoCE, all-reduce, NVLS off (NCCL 2.19.3)",
            "prediction",
            "NVLink (369 GB/s) and the 8 NICs (376 GB/s) bound the node; this cluster's points all sit "
            "11-15 % below a healthy fabric",
        ),
        (
            "h100_2x8_nvls_roce_user",
            "hgx-h100-roce-400g",
            32,
            320.0,  # 4 nodes, NVLS on or off (other_value)
            {},
            "4 x 8 H100, 8 x 400G RoCE, all-reduce (NCCL 2.19.3)",
            "prediction",
            "the ring through the NICs, as on InfiniBand",
        ),
    ):
        b, _ = _busbw(cat, system, gpus, **update)
        out.append(Row("communication", case, "busbw", "GB/s", published, b, role, TOL, src[rid], note))
    return out


@area("communication")
def rows(cat) -> list[Row]:
    ref = cat.reference("comm_measurements").set_index("id")
    src = ref["source"]
    out = []
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 8, algorithm="ring")
    out.append(
        Row(
            "communication",
            "8 x H100, NVLink 4, ring all-reduce",
            "busbw",
            "GB/s",
            _num(ref.loc["h100_8gpu_ring_expected", "busbw_GBps"]),
            b,
            "calibration",
            TOL,
            src["h100_8gpu_ring_expected"],
            "nvlink4 bw_efficiency = 370/450 is read from this figure",
        )
    )
    b, a = _busbw(cat, "hgx-h100-ib-ndr", 8)
    out.append(
        Row(
            "communication",
            "8 x H100, NVLink SHARP all-reduce (default)",
            "busbw",
            "GB/s",
            _num(ref.loc["h100_8gpu_nvls_expected", "busbw_GBps"]),
            b,
            "prediction",
            TOL,
            src["h100_8gpu_nvls_expected"],
            "ring efficiency x NCCL's NVLS efficiency; busbw above the 450 GB/s line rate because the switch reduces",
        )
    )
    out.append(
        Row(
            "communication",
            "8 x H100, NVLink SHARP all-reduce (default)",
            "algbw",
            "GB/s",
            _num(ref.loc["h100_8gpu_nvls_expected", "algbw_GBps"]),
            a,
            "prediction",
            TOL,
            src["h100_8gpu_nvls_expected"],
        )
    )
    b, _ = _busbw(cat, "dgx-a100-hdr", 8, algorithm="ring")
    out.append(
        Row(
            "communication",
            "8 x A100, NVLink 3, all-reduce",
            "busbw",
            "GB/s",
            _num(ref.loc["a100_8gpu_allreduce", "busbw_GBps"]),
            b,
            "calibration",
            TOL,
            src["a100_8gpu_allreduce"],
            "nvlink3 bw_efficiency = 208/300 is read from this thread",
        )
    )
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 16, algorithm="ring")
    out.append(
        Row(
            "communication",
            "2 x 8 H100, NDR 400G, ring all-reduce",
            "busbw per NIC",
            "GB/s",
            47.0,
            b / 8,
            "prediction",
            TOL,
            src["ndr400_per_nic_expected"],
            "published 46-48 per NIC; NVLink (369), not the NICs (376), limits the node",
        )
    )
    out += _two_and_four_nodes(cat, ref)
    b, _ = _busbw(cat, "dgx-a100-hdr", 16, algorithm="ring")
    out.append(
        Row(
            "communication",
            "2 x DGX A100, 8 x HDR 200G, ring all-reduce",
            "busbw per node",
            "GB/s",
            192.0,
            b,
            "prediction",
            TOL,
            "NVIDIA (AddyLaddy) in github.com/NVIDIA/nccl/issues/812",
            "rests on the labelled HDR efficiency assumption (0.96)",
        )
    )
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 16, algorithm="ring", nics_per_node=1, nic_gbps=100)
    out.append(
        Row(
            "communication",
            "one 100 Gb/s NIC per node, ring all-reduce",
            "busbw",
            "GB/s",
            _num(ref.loc["ib_edr_100g", "busbw_GBps"]),
            b,
            "prediction",
            TOL,
            src["ib_edr_100g"],
            "NDR's measured efficiency carried to EDR",
        )
    )
    out += _at_scale(cat)
    out += mid_size_rows(cat)
    out += h200_rows(cat)
    return out
