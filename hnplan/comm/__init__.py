"""Communication cost model: alpha-beta collectives (:mod:`.collectives`) over the links and
topologies of a system (:mod:`.topology`)."""

from hnplan.comm.collectives import (
    OPS,
    algbw_Bps,
    busbw_Bps,
    busbw_factor,
    hierarchical_allreduce_time,
    pairwise_alltoall_time,
    ring_allgather_time,
    ring_allreduce_time,
    ring_reducescatter_time,
    sendrecv_time,
)
from hnplan.comm.topology import LinkParams, NetworkBOM, SystemLinks, scaleout_bom, split_group, system_links

__all__ = [
    "OPS", "LinkParams", "NetworkBOM", "SystemLinks", "algbw_Bps", "busbw_Bps", "busbw_factor",
    "hierarchical_allreduce_time", "pairwise_alltoall_time", "ring_allgather_time",
    "ring_allreduce_time", "ring_reducescatter_time", "scaleout_bom", "sendrecv_time",
    "split_group", "system_links",
]
