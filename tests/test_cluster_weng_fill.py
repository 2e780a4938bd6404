"""Weng et al.'s fill experiment as their simulator runs it (hnplan.cluster.weng_fill): the artifact's baseline
scores derived by hand, its arrival sequence, its measure, and FGD scored as the paper's FGDScore."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.mixes import trace_file
from hnplan.cluster.policies import Workload, fgd_score, node_fragmentation
from hnplan.cluster.validation import (
    ALIBABA_DEFAULT,
    OPENB_NODES,
    WENG_2023_ARTIFACT,
    openb_nodes,
    openb_topology,
)
from hnplan.cluster.weng_fill import _scores, allocation_at, arrival_order, weng_fill
from hnplan.errors import InputError


def _node(free, cpu=64000.0):
    return np.array([free]), np.array([cpu]), np.zeros((1, 5), np.int64), np.array([0]), np.array([len(free)])


def test_best_fit_and_dot_product_scores_by_hand():
    # node: 60 cores free of 64, GPUs [1000, 500]; pod: 4 cores, one GPU share of 300
    free, cpu, kinds, nodes, slots = _node([1000, 500], 64000.0)
    # BestFit: 100 (1 - (0.5 (64000 - 4000) / 128000 + 0.5 (1500 - 300) / 8000)) = 100 (1 - 0.234375 - 0.075)
    assert _scores("BestFit", free, cpu, 4000, 1, 300, kinds, nodes, slots).tolist() == [69.0]
    # DotProd: 100 (1 - (64000/128000 * 4000/128000 + 1500/8000 * 300/8000) / 2) = 100 (1 - 0.0113281)
    assert _scores("DotProd", free, cpu, 4000, 1, 300, kinds, nodes, slots).tolist() == [98.0]


def test_gpu_packing_scores_by_hand():
    # every GPU free on a 2-GPU node: max(33 - 2, 2) = 31
    f = _node([1000, 1000])
    assert _scores("GpuPacking", f[0], f[1], 1000, 1, 300, *f[2:]).tolist() == [31.0]
    # a share of 300 fits the used GPU with 400 left: 100 - (400 * 100 / 1000) / 10 = 96
    f = _node([1000, 400])
    assert _scores("GpuPacking", f[0], f[1], 1000, 1, 300, *f[2:]).tolist() == [96.0]
    # a share of 500 needs the fully free GPU: max(50 - 1, 33) = 49
    assert _scores("GpuPacking", f[0], f[1], 1000, 1, 500, *f[2:]).tolist() == [49.0]
    # a CPU-only pod scores the minimum everywhere
    assert _scores("GpuPacking", f[0], f[1], 1000, 0, 0, *f[2:]).tolist() == [0.0]


def test_gpu_clustering_scores_by_hand():
    free, cpu, kinds, nodes, slots = _node([1000, 600, 1000, 1000])  # 3,600 milli-GPU free
    base = 25 * (8000 - 3600) // 8000  # 13
    assert _scores("GpuClustering", free, cpu, 1000, 1, 300, kinds, nodes, slots).tolist() == [base + 25]
    kinds[0, 0] = 1  # a share pod there already: same kind only
    assert _scores("GpuClustering", free, cpu, 1000, 1, 300, kinds, nodes, slots).tolist() == [base + 75]
    kinds[0, 1] = 1  # and a 1-GPU pod: the pod's kind among others
    assert _scores("GpuClustering", free, cpu, 1000, 1, 300, kinds, nodes, slots).tolist() == [base + 50]
    assert _scores("GpuClustering", free, cpu, 1000, 2, 1000, kinds, nodes, slots).tolist() == [base]


def test_fgd_score_is_the_papers_integer_sigmoid():
    # int64(sigmoid((before - after) / 1000) * 100): no growth 50; 1 GPU of growth 100 / (1 + e) = 26.9
    assert fgd_score(np.array([0.0, 1000.0, -1000.0])).tolist() == [50.0, 26.0, 73.0]


def test_cpu_only_task_types_count_every_free_gpu():
    # GetNodePodFrag: a CPU-only type is XLSatisfied or XRLackCPU, and both count all idle GPU milli
    wl = Workload(np.array([0]), np.array([0]), np.array([1.0]))
    free = np.array([[1000, 300], [0, 0]])
    assert node_fragmentation(free, np.array([True, True]), wl).tolist() == [1300.0, 0.0]


def test_typical_pods_of_the_default_list():
    tasks = pd.read_csv(trace_file(ALIBABA_DEFAULT))
    assert len(tasks) == 8152 and int((tasks["num_gpu"] == 0).sum()) == 1088
    g = tasks["num_gpu"].to_numpy()
    wl = Workload.typical(g, tasks["gpu_milli"].to_numpy(), tasks["cpu_milli"].to_numpy())
    # 91 distinct (GPUs, share, CPU); the 35 most popular cover 95 % of the 8,152 pods
    assert len(wl.p) == 35 and wl.p.sum() == pytest.approx(1.0)
    assert (wl.gpus == 0).sum() == 5  # CPU-only types among them


def test_node_list_matches_the_grouped_cluster():
    nodes = openb_nodes()
    assert len(nodes) == 1213 and int(nodes["gpu"].sum()) == 6212
    assert nodes["sn"].is_monotonic_increasing
    grouped = nodes.groupby(["gpu", "cpu_milli", "memory_mib", "model"]).size()
    assert sorted((g, c, m, t, n) for (g, c, m, t), n in grouped.items()) == sorted(OPENB_NODES)
    topo, free, *_ = openb_topology(node_list=nodes)
    assert topo.gpus == 6212 and free.sum() == 6212 * 1000


def test_arrival_order_is_every_pod_then_draws_to_130_percent():
    tasks = pd.DataFrame({"num_gpu": [1, 0, 2], "gpu_milli": [500, 0, 1000], "cpu_milli": 1000, "memory_mib": 0})
    order = arrival_order(tasks, capacity_milli=10_000, rng=np.random.default_rng(1))
    assert sorted(order[:3].tolist()) == [0, 1, 2]
    demand = (tasks["num_gpu"] * tasks["gpu_milli"]).to_numpy()[order]
    assert demand.sum() <= 13_000 and demand.sum() + 2000 > 13_000  # stops before passing 130 %


def test_small_fill_is_consistent():
    tasks = pd.read_csv(trace_file(ALIBABA_DEFAULT))
    curves = weng_fill(tasks, ("Random", "BestFit", "FGD"), seed=42, scale=0.1)
    for _, d in curves.groupby("policy"):
        assert (np.diff(d["allocated"]) >= 0).all() and (d["allocated"] <= d["arrived"] + 1e-12).all()
    a = allocation_at(curves, (100,))[100]
    assert a["FGD"] > a["BestFit"] > a["Random"]  # the paper's order (Fig. 9(a))
    with pytest.raises(InputError, match="unknown policy 'best-fit'"):  # hnplan's name, not the paper's BestFit
        weng_fill(tasks, ("best-fit",))
    with pytest.raises(InputError, match="column cpu_milli missing"):
        weng_fill(tasks.drop(columns="cpu_milli"), ("BestFit",))


def test_artifact_numbers():
    u = WENG_2023_ARTIFACT["unallocated_at_100"]
    # FGD against DotProd: 1 - 4.773 / 9.378 = 49.1 %, 286 GPUs of 6,212: the abstract's "49 %, 290 GPUs"
    assert 1 - u["FGD"] / u["DotProd"] == pytest.approx(0.491, abs=5e-4)
    assert (u["DotProd"] - u["FGD"]) * 6212 == pytest.approx(286, abs=1)
