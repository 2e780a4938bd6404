"""Collectives against nccl-tests measurements (``data/reference/comm_measurements.csv``).

Large messages (8 GiB, the top of nccl-tests' usual sweep) on the catalog systems; the ring rows on one
8-GPU node are where the NVLink ``bw_efficiency`` values come from, so they are calibrations.
"""

from __future__ import annotations

import re

from hnplan.comm.algorithms import collective
from hnplan.comm.placement import place_group
from hnplan.validation import Row, area

LARGE = 8 * 2**30
TOL = 0.15  # the communication issue's tolerance on large-message busbw


def _num(text) -> float:
    return float(re.search(r"[0-9]+(?:\.[0-9]+)?", str(text)).group(0))


def _busbw(cat, system, gpus, op="allreduce", algorithm=None, **update):
    s = cat.system(system)
    if update:
        s = s.model_copy(update=update)
    r = collective(op, LARGE, place_group(cat.design(s), gpus, 1, gpus), algorithm)
    return float(r.busbw_Bps[0]) / 1e9, float(r.algbw_Bps[0]) / 1e9


@area("communication")
def rows(cat) -> list[Row]:
    ref = cat.reference("comm_measurements").set_index("id")
    src = ref["source"]
    out = []
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 8, algorithm="ring")
    out.append(Row("communication", "8 x H100, NVLink 4, ring all-reduce", "busbw", "GB/s",
                   _num(ref.loc["h100_8gpu_ring_expected", "busbw_GBps"]), b, "calibration", TOL,
                   src["h100_8gpu_ring_expected"], "nvlink4 bw_efficiency = 370/450 is read from this figure"))
    b, a = _busbw(cat, "hgx-h100-ib-ndr", 8)
    out.append(Row("communication", "8 x H100, NVLink SHARP all-reduce (default)", "busbw", "GB/s",
                   _num(ref.loc["h100_8gpu_nvls_expected", "busbw_GBps"]), b, "prediction", TOL,
                   src["h100_8gpu_nvls_expected"], "ring efficiency x NCCL's NVLS efficiency; busbw above the "
                   "450 GB/s line rate because the switch reduces"))
    out.append(Row("communication", "8 x H100, NVLink SHARP all-reduce (default)", "algbw", "GB/s",
                   _num(ref.loc["h100_8gpu_nvls_expected", "algbw_GBps"]), a, "prediction", TOL,
                   src["h100_8gpu_nvls_expected"]))
    b, _ = _busbw(cat, "dgx-a100-hdr", 8, algorithm="ring")
    out.append(Row("communication", "8 x A100, NVLink 3, all-reduce", "busbw", "GB/s",
                   _num(ref.loc["a100_8gpu_allreduce", "busbw_GBps"]), b, "calibration", TOL,
                   src["a100_8gpu_allreduce"], "nvlink3 bw_efficiency = 208/300 is read from this thread"))
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 16, algorithm="ring")
    out.append(Row("communication", "2 x 8 H100, NDR 400G, ring all-reduce", "busbw per NIC", "GB/s", 47.0, b / 8,
                   "prediction", TOL, src["ndr400_per_nic_expected"],
                   "published 46-48 per NIC; NVLink (369), not the NICs (376), limits the node"))
    b, _ = _busbw(cat, "dgx-a100-hdr", 16, algorithm="ring")
    out.append(Row("communication", "2 x DGX A100, 8 x HDR 200G, ring all-reduce", "busbw per node", "GB/s", 192.0, b,
                   "prediction", TOL, "NVIDIA (AddyLaddy) in github.com/NVIDIA/nccl/issues/812",
                   "rests on the labelled HDR efficiency assumption (0.96)"))
    b, _ = _busbw(cat, "hgx-h100-ib-ndr", 16, algorithm="ring", nics_per_node=1, nic_gbps=100)
    out.append(Row("communication", "one 100 Gb/s NIC per node, ring all-reduce", "busbw", "GB/s",
                   _num(ref.loc["ib_edr_100g", "busbw_GBps"]), b, "prediction", TOL, src["ib_edr_100g"],
                   "NDR's measured efficiency carried to EDR"))
    return out
