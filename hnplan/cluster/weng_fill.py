"""The fill experiment of Weng et al. (USENIX ATC 2023, Sec. 6) as their simulator runs it, with their
five baseline schedulers beside hnplan's FGD.

Source of every rule here: hkust-adsl/kubernetes-scheduler-simulator @ 8f3d6417353c5083c6d56617f255fadd8dc306bc
(the paper's artifact):

* **Workload** (``pkg/simulator/core.go``, ``simulator.go``: ``SortClusterPods``, ``tuneUpPods``): every pod of
  the pod list, CPU-only ones included, shuffled (``--shuffle-pod=true``); then copies of pods drawn with
  replacement from the list are appended until the GPUs requested reach ``tune`` (1.3) x the cluster's.
  Pods never leave. A pod that fits nowhere fails and is not retried.
* **Measure** (``scripts/analysis.py``, ``experiments/analysis/merge_alloc_discrete.py``): after every pod,
  the milli-GPUs allocated and the milli-GPUs of all pods arrived so far (failed ones included), both over
  the cluster's; the allocation at arrived point ``X`` % is the mean over the pods whose arrived share
  rounds to ``X`` (the paper's Fig. 9(a); unallocated = 100 % - allocation).
* **Filter** (Kubernetes ``NodeResourcesFit`` and ``Open-Gpu-Share``): a node takes a pod when its free CPU
  and memory cover the pod's, its GPU model is one the pod accepts, and its GPUs fit the request (a share:
  one GPU with that much left; ``k`` whole GPUs: ``k`` fully free).
* **Scores** (``pkg/simulator/plugin/*_score.go``), integers in [0, 100]; the node with the highest score
  wins, ties to the node of the lowest name (the artifact's patched ``selectHost``,
  ``vendor/k8s.io/kubernetes/pkg/scheduler/core/generic_scheduler.go``: "for reproducibility"). ``cpu``/``gpu`` below are the node's free milli-CPU and
  its total free milli-GPU, ``c``/``r`` the pod's milli-CPU and milli-GPU (GPUs x share); 128,000 and 8,000
  are their ``MaxSpecCpu``/``MaxSpecGpu``:

  - ``Random``: a uniformly random feasible node; the GPU of a share at random among those that fit.
  - ``DotProd`` (``-dimext merge -norm max``): ``100 (1 - (cpu c / 128000^2 + gpu r / 8000^2) / 2)``.
  - ``GpuClustering``: ``25 (8000 - gpu) / 8000`` plus 75 on a node whose GPU pods all have the pod's
    kind (share, 1-, 2-, 4- or 8-GPU), 50 on one that has that kind among others, 25 on a node with no GPU
    pod, 0 otherwise; 0 for a CPU-only pod.
  - ``GpuPacking``: a node with every GPU free ``max(33 - free GPUs, free GPUs)``; one whose placement
    takes fully free GPUs ``max(50 - those taken, 33)``; else ``max(100 - sum(free of the GPUs used) // 10,
    50)`` [free before the placement, in whole percent of a GPU: ``milli x 100 // 1000``]; 0 for a CPU-only
    pod (``getPackingScore``, ``gpu_packing_score.go``).
  - ``BestFit``: ``100 (1 - ((cpu - c) / 128000 + (gpu - r) / 8000) / 2)`` (its min-max normalisation keeps
    the same best nodes).
  - ``FGD``: hnplan's fragmentation-aware placement (:func:`hnplan.cluster.policies.place`, scored by
    :func:`hnplan.cluster.policies.fgd_score`) over the paper's typical pods
    (:meth:`hnplan.cluster.policies.Workload.typical`: CPU-only ones included, CPU but not memory in the
    measure); a CPU-only pod is scored the same way on the growth its CPU causes.

  The GPU of a share (all but Random and FGD): the one with the least left that fits (``-gpusel best``);
  whole GPUs: the lowest-numbered fully free ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan.cluster.policies import Workload, fgd_score, node_fragmentation, place, type_ok
from hnplan.cluster.topology import MILLI
from hnplan.errors import InputError

WENG_POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
"""The paper's six schedulers (``experiments/run_scripts/generate_run_scripts.py``), its names."""

TASK_COLUMNS = ("num_gpu", "gpu_milli", "cpu_milli", "memory_mib")
"""The pod-list columns :func:`weng_fill` reads (``gpu_spec`` optional)."""

MAX_SPEC_CPU = 128_000  # milli-CPU, MaxSpecCpu (pkg/type/open-gpu-share/utils/const.go)
MAX_SPEC_GPU = 8_000  # milli-GPU, MaxSpecGpu
TUNE = 1.3  # GPUs requested / cluster GPUs when arrivals stop (-tune 1.3)
_KINDS = {1: 1, 2: 2, 4: 3, 8: 4}  # whole-GPU pod kind (GpuAffinity tag "<k>-gpu") by GPUs; a share is kind 0


def arrival_order(tasks: pd.DataFrame, capacity_milli: float, rng: np.random.Generator, tune: float = TUNE):
    """Row indices of ``tasks`` in arrival order: all rows shuffled, then rows drawn with replacement
    until the GPUs requested would pass ``tune`` x ``capacity_milli`` (``tuneUpPods``)."""
    demand = (tasks["num_gpu"] * tasks["gpu_milli"]).to_numpy()
    order = rng.permutation(len(tasks))
    room = tune * capacity_milli - demand.sum()
    if room <= 0:
        return order
    mean = max(demand.mean(), 1.0)
    # draw three times the expected count (+64) and cut at the room: a bound on the draws, not a calibration
    # (assumption); a draw that stays short of the room would end arrivals early, with odds of about zero
    extra = rng.integers(len(tasks), size=int(3 * room / mean) + 64)
    over = np.flatnonzero(np.cumsum(demand[extra]) > room)
    return np.concatenate([order, extra[: over[0] if len(over) else len(extra)]])


def _fits(free: np.ndarray, g: int, m: int) -> np.ndarray:
    if g == 0:
        return np.ones(len(free), bool)
    if m < MILLI:
        return (free >= m).any(1)
    return (free == MILLI).sum(1) >= g


def _scores(policy, free, cpu, c, g, m, kinds, nodes, slots) -> np.ndarray:
    """Integer scores of the feasible ``nodes`` for a pod of ``g`` GPUs at ``m`` milli and ``c`` milli-CPU."""
    gpu = free[nodes].sum(1).astype(float)
    r = g * m
    if policy == "BestFit":
        return np.trunc((1 - (0.5 * (cpu[nodes] - c) / MAX_SPEC_CPU + 0.5 * (gpu - r) / MAX_SPEC_GPU)) * 100)
    if policy == "DotProd":
        dot = cpu[nodes] / MAX_SPEC_CPU * c / MAX_SPEC_CPU + gpu / MAX_SPEC_GPU * r / MAX_SPEC_GPU
        return np.trunc(100 * (1 - dot / 2))
    if g == 0:  # GpuPacking and GpuClustering give a CPU-only pod the minimum everywhere
        return np.zeros(len(nodes))
    if policy == "GpuClustering":
        k = 0 if m < MILLI else _KINDS.get(g, 5)
        base = (25 * (MAX_SPEC_GPU - gpu.astype(np.int64))) // MAX_SPEC_GPU
        have = kinds[nodes] > 0
        n_kinds = have.sum(1)
        mine = have[:, k] if k < kinds.shape[1] else np.zeros(len(nodes), bool)
        bonus = np.where(mine, np.where(n_kinds == 1, 75, 50), np.where(n_kinds == 0, 25, 0))
        return (base + bonus).astype(float)
    if policy == "GpuPacking":
        sub = free[nodes]
        full = (sub == MILLI).sum(1)
        all_free = full == slots[nodes]
        srt = np.sort(np.where(sub >= m, sub, MILLI + 1), axis=1)  # fitting GPUs, least left first
        used = srt[:, :g]
        taken_full = (used == MILLI).sum(1)
        left_pct = (used * 100 // MILLI).sum(1)
        score = np.where(taken_full > 0, np.maximum(50 - taken_full, 33), np.maximum(100 - left_pct // 10, 50))
        return np.where(all_free, np.maximum(33 - full, full), score).astype(float)
    raise InputError(f"unknown policy {policy!r}; expected one of {', '.join(WENG_POLICIES)}")


def _gpus(free_row: np.ndarray, g: int, m: int, rng, random_share: bool) -> np.ndarray:
    if g == 0:
        return np.array([], np.int64)
    if m < MILLI:
        fit = np.flatnonzero(free_row >= m)
        if random_share:
            return np.array([rng.choice(fit)])
        return np.array([fit[np.argmin(free_row[fit])]])
    return np.flatnonzero(free_row == MILLI)[:g]


def weng_fill(
    tasks: pd.DataFrame,
    policies=WENG_POLICIES,
    seed: int = 42,
    scale: float = 1.0,
    tune: float = TUNE,
    gpu_types: bool = True,
) -> pd.DataFrame:
    """Run the paper's fill on the trace's cluster and return the allocation after every pod.

    Parameters
    ----------
    tasks : DataFrame
        An openb pod list (columns ``num_gpu, gpu_milli, cpu_milli, memory_mib``, optionally ``gpu_spec``),
        every row a pod (CPU-only ones count).
    policies : sequence of str
        Names from :data:`WENG_POLICIES`.
    seed : int
        One arrival sequence for every policy; the same seed gives the same run.
    scale : float
        Node counts of :data:`hnplan.cluster.validation.OPENB_NODES` times this.
    tune : float
        GPUs requested / cluster GPUs when arrivals stop.
    gpu_types : bool
        Honour ``gpu_spec`` when the column is there.

    Returns
    -------
    DataFrame
        One row per policy and pod: ``policy, arrived, allocated, failed`` (``arrived`` and ``allocated``:
        milli-GPUs requested by all pods so far / allocated, over the cluster's [fraction]; ``failed``:
        pods that fitted nowhere so far). ``attrs["cluster_gpus"]`` holds the cluster's GPUs.

    Raises
    ------
    InputError
        For a policy not in :data:`WENG_POLICIES`, or ``tasks`` without one of the columns
        :data:`TASK_COLUMNS`.
    """
    from hnplan.cluster.validation import gpu_spec_mask, openb_nodes, openb_topology

    bad = [p for p in policies if p not in WENG_POLICIES]
    if bad:
        raise InputError(f"unknown policy {bad[0]!r}; expected one of {', '.join(WENG_POLICIES)}")
    lack = [c for c in TASK_COLUMNS if c not in tasks.columns]
    if lack:
        raise InputError(f"pod list: column {lack[0]} missing; the fill reads {', '.join(TASK_COLUMNS)}")
    topo, free0, cpu0, mem0, model = openb_topology(scale, openb_nodes() if scale == 1 else None)
    # pods of more than 8 GPUs (the largest node's) are left out, where the artifact would count them as
    # arrived and failed; the default pod list has none (its largest asks for 8)
    t = tasks[tasks["num_gpu"] <= 8].reset_index(drop=True)
    gpus = t["num_gpu"].to_numpy(np.int64)
    milli = np.where(gpus > 1, MILLI, np.where(gpus == 0, 0, t["gpu_milli"].to_numpy(np.int64)))
    cpus, mems = t["cpu_milli"].to_numpy(float), t["memory_mib"].to_numpy(float)
    has_spec = gpu_types and "gpu_spec" in t.columns
    spec = gpu_spec_mask(t["gpu_spec"]) if has_spec else np.zeros(len(t), np.int64)
    cap = float(free0.sum())
    rng = np.random.default_rng(seed)
    order = arrival_order(t, cap, rng, tune)
    arrived = np.cumsum(gpus[order] * milli[order]) / cap
    wl = Workload.typical(gpus, milli, cpus, spec if has_spec else None)
    up = np.ones(topo.nodes, bool)
    frames = []
    for policy in policies:
        prng = np.random.default_rng([seed, WENG_POLICIES.index(policy)])
        free, cpu, mem = free0.copy(), cpu0.copy(), mem0.copy()
        kinds = np.zeros((topo.nodes, 5), np.int64)
        alloc = np.empty(len(order))
        failed = np.empty(len(order), np.int64)
        used, nfail = 0.0, 0
        for j, i in enumerate(order.tolist()):
            g, m, c, me, s = int(gpus[i]), int(milli[i]), cpus[i], mems[i], int(spec[i])
            ok = (cpu >= c) & (mem >= me) & _fits(free, g, m)
            if s and g:
                ok &= type_ok(s, model)
            nodes = np.flatnonzero(ok)
            got = None
            if len(nodes):
                if policy == "FGD" and g:
                    got = place(
                        "fragmentation-aware", free, up, topo, g, m, workload=wl, cpu_free=cpu, mem_free=mem,
                        cpu=c, mem=me, node_type=model, spec=s,
                    )  # fmt: skip
                    got = None if got is None else (int(got[0][0]), got[1])
                else:
                    if policy == "FGD":  # a CPU-only pod: least growth of fragmentation
                        sub, u, t_ = free[nodes], up[nodes], model[nodes]
                        before = node_fragmentation(sub, u, wl, cpu[nodes], mem[nodes], t_)
                        after = node_fragmentation(sub, u, wl, cpu[nodes] - c, mem[nodes] - me, t_)
                        score = fgd_score(after - before)
                    elif policy == "Random":  # RandomScore's PreScore: one feasible node at random
                        score = (np.arange(len(nodes)) == prng.integers(len(nodes))).astype(float)
                    else:
                        score = _scores(policy, free, cpu, c, g, m, kinds, nodes, topo.node_slots)
                    n = int(nodes[np.argmax(score)])  # ties: the first node (lowest name)
                    got = (n, _gpus(free[n], g, m, prng, policy == "Random"))
            if got is None:
                nfail += 1
            else:
                n, idx = got
                free[n, idx] -= m
                cpu[n] -= c
                mem[n] -= me
                used += g * m
                k = 0 if 0 < m < MILLI else _KINDS.get(g)
                if g and k is not None:
                    kinds[n, k] += 1
            alloc[j], failed[j] = used / cap, nfail
        frames.append(pd.DataFrame({"policy": policy, "arrived": arrived, "allocated": alloc, "failed": failed}))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["cluster_gpus"] = topo.gpus
    return out


def allocation_at(curves: pd.DataFrame, points=(100, 130)) -> pd.DataFrame:
    """The allocation of each policy at arrived points [percent of the cluster's GPUs], as the paper's
    ``merge_alloc_discrete.py`` takes it: the mean over the pods whose arrived share rounds to the point
    (within one point when none does).

    Returns
    -------
    DataFrame
        Index ``policy``, one column per point: the allocated share [fraction].
    """
    rows = {}
    for policy, d in curves.groupby("policy", sort=False):
        pct = np.round(d["arrived"].to_numpy() * 100)
        row = {}
        for x in points:
            hit = pct == x
            if not hit.any():
                hit = np.abs(pct - x) <= 1
            row[x] = float(d["allocated"].to_numpy()[hit].mean()) if hit.any() else np.nan
        rows[policy] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("policy")
