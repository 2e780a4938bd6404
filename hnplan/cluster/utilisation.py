"""The utilisation a design reaches under a job mix, from a short cached simulation, for the cost
planners (``hnplan tco --utilisation simulated``, the procurement what-if) in place of an assumed
figure."""

from __future__ import annotations

import functools

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cluster.simulate import simulate_cluster
from hnplan.cluster.topology import CLUSTER_GPUS

# A larger design is represented by a cluster of CLUSTER_GPUS under the same mix, to keep the answer to seconds.
DEFAULT_JOBS = 3000
"""Jobs simulated per cost figure [-] (assumption: enough for the utilisation to settle past the
start-up transient while the answer stays in seconds; not fitted to any measurement)."""
POLICY = "topology-aware"


@functools.lru_cache(maxsize=64)
def _simulate(system_id: str, gpus: int, mix: str, jobs: int, seed: int, root: str) -> dict:
    cat = load_catalog(root)
    r = simulate_cluster(system_id, gpus, mix=mix, n_jobs=jobs, policy=POLICY, seed=seed, catalog=cat)
    s = r.summary
    return {
        k: s[k]
        for k in ("utilisation", "allocation_rate", "offered_load", "offered_load_window", "steady_state", "gpus")
    }


def simulated_utilisation(
    system, gpus: int, *, mix: str = "default", jobs: int = DEFAULT_JOBS, seed: int = 0, catalog: Catalog | None = None
) -> dict:
    """Useful utilisation of ``gpus`` accelerators of a design under a job mix, simulated.

    Runs :func:`hnplan.cluster.simulate_cluster` (topology-aware placement with backfill,
    preemption and failures) for ``jobs`` jobs of ``mix`` on ``min(gpus, CLUSTER_GPUS)``
    GPUs; cached per argument set.

    Returns
    -------
    dict
        ``utilisation`` (useful GPU-time / installed GPU-time [fraction]), ``allocation_rate``,
        ``offered_load``, ``offered_load_window``, ``steady_state``, ``gpus_simulated``, ``mix``, ``jobs``, ``seed``,
        ``policy`` and ``source`` (one sentence stating the conditions).

    Raises
    ------
    InputError, CatalogError
        For a bad GPU count, system or mix.
    """
    cat = catalog or load_catalog()
    sid = cat.system(system).id
    g = min(int(gpus), CLUSTER_GPUS)
    s = _simulate(sid, g, str(mix), int(jobs), int(seed), str(cat.root))
    out = dict(s, gpus_simulated=s["gpus"], mix=str(mix), jobs=int(jobs), seed=int(seed))
    out.pop("gpus")
    out["policy"] = POLICY
    out["source"] = (
        f"simulated: {jobs:,} jobs of mix '{mix}' at {s['offered_load']:.0%} offered load{_load_note(s)} on {out['gpus_simulated']:,} "
        f"GPUs of {sid}, {POLICY} placement with backfill, preemption and failures, seed {seed}"
    )
    return out


def _load_note(s: dict) -> str:
    notes = ["oversubscribed"] if s["offered_load"] > 1 else []
    if not s["steady_state"]:  # a window shorter than 5 run times, or a load of 100 % or more (load.steady_state_of)
        notes.append("not in steady state")
    return f" ({', '.join(notes)})" if notes else ""
