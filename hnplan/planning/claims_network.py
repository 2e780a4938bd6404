"""Claims audit, the network transport's experiments: AllReduce over RDMA (RoCE) against TCP/IP at 100 Gb/s,
and the gradient synchronisation of a training step on each (see :mod:`hnplan.planning.claims`; listed with
the other experiments in :mod:`hnplan.planning.claims_other`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.comm.collectives import ring_allreduce_time
from hnplan.planning.claims import AuditSetup, Claim, doc
from hnplan.planning.claims_grid import _claim, _untestable

if TYPE_CHECKING:
    import pandas as pd


TCP = ("allreduce-rdma-5-8x-over-tcp", ("000",), "At 100 Gb/s, RDMA makes AllReduce 5-8x more efficient (than TCP/IP)")
GRAD = (
    "grad-sync-rdma-minus-65",
    ("002",),
    "With RDMA, gradient synchronisation time in distributed training falls by 65%",
)
TCP_MISSING = (
    "missing: the bus-bandwidth efficiency and per-message overhead of NCCL over kernel TCP sockets (an "
    "interconnect entry whose technology names TCP, from a published measurement, or "
    "AuditSetup.tcp_interconnect)"
)


def tcp_transport(cat: Catalog, s: AuditSetup):
    """The kernel-TCP transport the RDMA claims compare with: ``s.tcp_interconnect`` (id or YAML path), else
    the first catalog interconnect whose ``technology`` names TCP, else None."""
    if s.tcp_interconnect:
        return cat.interconnect(s.tcp_interconnect)
    return next((ic for ic in cat.entries("interconnects") if "tcp" in ic.technology.lower()), None)


def _alpha_s(ic) -> float:
    """Latency of one ring step over a two-tier network: software overhead, 4 link and 3 switch hops [s]."""
    return units.us_to_s(ic.software_overhead_us) + units.ns_to_s(4 * ic.link_latency_ns + 3 * ic.switch_latency_ns)


def rdma_tcp_grid(cat: Catalog, s: AuditSetup, tcp) -> pd.DataFrame:
    """Ring all-reduce time at 100 Gb/s per rank over RDMA (``roce-400g``'s efficiency and latencies) and
    over ``tcp``, over buffer size (1 MiB to 1 GiB) and ranks (8 to 512): ``speedup`` = TCP / RDMA time."""
    import pandas as pd  # here, not at the top: a claim whose experiment builds plain rows needs no pandas

    rdma = cat.interconnect("roce-400g")
    line = units.gbps_to_Bps(100.0)
    rows = []
    for n in (2.0**20, 2.0**26, 2.0**30):
        for p in (8, 64, 512):
            t = {
                k: ring_allreduce_time(n, p, line * ic.bw_efficiency, _alpha_s(ic))
                for k, ic in (("rdma", rdma), ("tcp", tcp))
            }
            rows.append(
                {
                    "size_bytes": n,
                    "ranks": p,
                    "rdma_s": t["rdma"],
                    "tcp_s": t["tcp"],
                    "speedup": t["tcp"] / t["rdma"],
                    "time_cut": 1 - t["rdma"] / t["tcp"],
                }
            )
    return pd.DataFrame(rows)


def rdma_vs_tcp(cat: Catalog, s: AuditSetup) -> Claim:
    """Ring all-reduce time over kernel TCP / over RDMA at 100 Gb/s per rank, over buffer size and ranks."""
    rdma = cat.interconnect("roce-400g")
    eff = rdma.bw_efficiency
    busbw = units.Bps_to_GBps(units.gbps_to_Bps(100.0)) * eff
    nums = {
        "rdma_busbw_GBps_at_100g": busbw,
        "tcp_busbw_GBps_for_5x": busbw / 5,
        "tcp_busbw_GBps_for_8x": busbw / 8,
        "tcp_efficiency_for_5x": eff / 5,
        "tcp_efficiency_for_8x": eff / 8,
    }
    tcp = tcp_transport(cat, s)
    if tcp is None:
        return _untestable(
            *TCP,
            f"{doc(rdma_vs_tcp)} RoCE bus-bandwidth efficiency {eff:g} (roce-400g).",
            f"{TCP_MISSING}; for large buffers the claim holds if that efficiency is between "
            f"{eff / 8:.3f} and {eff / 5:.3f} of line rate",
            nums,
        )
    return _claim(
        *TCP,
        f"{doc(rdma_vs_tcp)} roce-400g against {tcp.id}",
        rdma_tcp_grid(cat, s, tcp),
        ["size_bytes", "ranks"],
        "speedup",
        ">=",
        5.0,
        nums,
    )


def grad_sync(cat: Catalog, s: AuditSetup) -> Claim:
    """1 - ring all-reduce time over RDMA / over kernel TCP at 100 Gb/s per rank (the gradient
    synchronisation of data parallelism), over buffer size and ranks."""
    eff = cat.interconnect("roce-400g").bw_efficiency
    nums = {"rdma_efficiency": eff, "tcp_efficiency_for_65pct": 0.35 * eff}
    tcp = tcp_transport(cat, s)
    if tcp is None:
        return _untestable(
            *GRAD,
            doc(grad_sync),
            f"{TCP_MISSING}; for bandwidth-bound gradients a 65% cut "
            f"means TCP reaches {0.35 * eff:.3f} of line rate where RoCE reaches {eff:g}",
            nums,
        )
    return _claim(
        *GRAD,
        f"{doc(grad_sync)} roce-400g against {tcp.id}",
        rdma_tcp_grid(cat, s, tcp),
        ["size_bytes", "ranks"],
        "time_cut",
        ">=",
        0.65,
        nums,
    )
