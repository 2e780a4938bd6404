"""Communication cost model: alpha-beta collectives (:mod:`.collectives`, :mod:`.algorithms`) over
placed groups (:mod:`.placement`) on the links and topologies of a system (:mod:`.topology` closed
forms, :mod:`.graphs` networkx graphs)."""

from hnplan.comm.algorithms import ALGORITHMS, CollectiveResult, algorithm_table, algorithm_time, best_time, collective
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
from hnplan.comm.placement import GroupPlacement, flat_placement, place_group
from hnplan.comm.topology import (
    LinkParams,
    NetworkBOM,
    ScaleupBOM,
    SystemLinks,
    fat_tree_counts,
    max_scaleout_gpus,
    scaleout_bom,
    scaleup_bom,
    split_group,
    system_links,
    whole_units,
)

__all__ = [
    "ALGORITHMS",
    "OPS",
    "CollectiveResult",
    "GroupPlacement",
    "LinkParams",
    "NetworkBOM",
    "ScaleupBOM",
    "SystemLinks",
    "algbw_Bps",
    "algorithm_table",
    "algorithm_time",
    "best_time",
    "busbw_Bps",
    "busbw_factor",
    "collective",
    "fat_tree_counts",
    "flat_placement",
    "hierarchical_allreduce_time",
    "max_scaleout_gpus",
    "pairwise_alltoall_time",
    "place_group",
    "ring_allgather_time",
    "ring_allreduce_time",
    "ring_reducescatter_time",
    "scaleout_bom",
    "scaleup_bom",
    "sendrecv_time",
    "split_group",
    "system_links",
    "whole_units",
]
