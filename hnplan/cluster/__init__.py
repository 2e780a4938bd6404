"""Shared-cluster operations: a discrete-event simulation (SimPy) of a job mix on a catalog system.

* :mod:`.topology`: nodes, scale-up domains, leaves and pods of a system at a GPU count.
* :mod:`.jobs`: the job table, the Alibaba GPU-sharing trace loader, the synthetic generator.
* :mod:`.traces`: the Helios, Acme and Philly training-cluster trace loaders; :func:`read_trace` picks one.
* :mod:`.policies`: placement policies as pure numpy functions (first-fit, best-fit,
  topology-aware, fragmentation-aware).
* :mod:`.runtime`: the adapter to the training planner and the reliability model.
* :mod:`.occupancy`: the running jobs' GPUs as one list and the free GPUs' counts the scheduler pass reads.
* :mod:`.engine`: the event simulation (:mod:`.backfill`: EASY backfilling's reservation);
  :mod:`.simulate`: :func:`simulate_cluster` and its result; :mod:`.load`: offered load and steady state;
  :mod:`.replicate`: :func:`replicate_cluster`, independent replications with 95 % confidence intervals.

See docs/cluster.md.
"""

from hnplan.cluster.jobs import CLASSES, check_jobs, read_openb  # noqa: F401
from hnplan.cluster.policies import POLICIES, place  # noqa: F401
from hnplan.cluster.replicate import ReplicatedResult, mean_ci, replicate_cluster  # noqa: F401
from hnplan.cluster.simulate import ClusterResult, load_text, offered_load_of, resolve_jobs, simulate_cluster  # noqa: F401
from hnplan.cluster.synthetic import synthetic_jobs  # noqa: F401
from hnplan.cluster.topology import ClusterTopology, build_topology  # noqa: F401

_TRACE_READERS = ("read_acme", "read_helios", "read_philly", "read_trace")


def __getattr__(name: str):
    """The trace readers of :mod:`.traces` on first use: they read CSV files with pandas, which a simulated
    mix does without (about 0.2 s of start-up)."""
    if name in _TRACE_READERS:
        from hnplan.cluster import traces

        return getattr(traces, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
