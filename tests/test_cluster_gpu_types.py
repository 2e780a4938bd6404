"""GPU-type constraints in placement and in the Weng et al. fill (Alibaba openb: nodes carry a GPU model,
a pod's ``gpu_spec`` lists the models it accepts, empty = any)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.cluster import build_topology
from hnplan.cluster.policies import POLICIES, Workload, node_fragmentation, place, type_ok
from hnplan.cluster.validation import (
    OPENB_GPU_MODELS,
    OPENB_NODES,
    fill_experiment,
    gpu_spec_mask,
    openb_topology,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data/traces/alibaba-openb-gpu-sample.csv"
SPEC_SAMPLE = ROOT / "data/traces/alibaba-openb-gpuspec33-sample.csv"


def _two_nodes():
    topo = build_topology("hgx-h100-ib-ndr", 16)
    return topo, np.ones(2, bool)


def test_gpu_spec_mask_and_type_ok():
    # models: A10=0, G2=1, G3=2, P100=3, T4=4, V100M16=5, V100M32=6; unknown -> bit 7 (no node has it)
    mask = gpu_spec_mask(["", np.nan, "T4", "V100M16|V100M32", "V100M16|V100M32|V100M32", "H100"])
    assert mask.tolist() == [0, 0, 16, 96, 96, 128]
    t4, v32 = OPENB_GPU_MODELS.index("T4"), OPENB_GPU_MODELS.index("V100M32")
    assert type_ok(mask, t4).tolist() == [True, True, True, False, False, False]
    assert type_ok(mask, v32).tolist() == [True, True, False, True, True, False]


def test_openb_nodes_by_model_match_the_node_list():
    """GPUs per model in openb_node_list_gpu_node.csv (alibaba/clusterdata 7a6c496): G2 549 x 8;
    T4 387 x 2 + 17 x 4; V100M16 19 x 1 + 28 x 4 + 8 x 8; V100M32 9 x 4 + 21 x 8; G3 39 x 8;
    P100 3 x 1 + 131 x 2; A10 2 x 1."""
    gpus: dict[str, int] = {}
    for g, _, _, model, n in OPENB_NODES:
        gpus[model] = gpus.get(model, 0) + g * n
    assert gpus == {"G2": 4392, "T4": 842, "V100M16": 195, "V100M32": 204, "G3": 312, "P100": 265, "A10": 2}
    topo, _, _, _, model = openb_topology()
    assert topo.gpus == 6212 and len(model) == 1213
    assert np.bincount(model, minlength=7).tolist() == [2, 549, 39, 134, 404, 55, 30]


def test_best_fit_skips_nodes_of_other_models():
    """Node 0 (model 0) has 1 whole GPU free, node 1 (model 1) 4: best-fit puts a 1-GPU task on node 0
    (tightest), but a task that accepts only model 1 must go to node 1, and one that accepts only a
    model no node has fits nowhere."""
    topo, up = _two_nodes()
    free = np.zeros((2, 8), np.int64)
    free[0, 0] = 1000
    free[1, :4] = 1000
    node_type = np.array([0, 1])
    for policy in ("first-fit", "best-fit", "fragmentation-aware"):
        assert place(policy, free, up, topo, 1, node_type=node_type)[0].tolist() == [0]
        assert place(policy, free, up, topo, 1, node_type=node_type, spec=0b10)[0].tolist() == [1]
        assert place(policy, free, up, topo, 1, node_type=node_type, spec=0b100) is None
    # a 0.3-GPU share: best-fit packs into node 0's GPU unless the task needs model 1
    assert place("best-fit", free, up, topo, 1, 300, node_type=node_type, spec=0b10)[0].tolist() == [1]


def test_fgd_counts_free_gpus_of_a_model_a_task_type_cannot_use():
    """Node 0 (model A) and node 1 (model B), 2 whole GPUs free each. Workload: whole 1-GPU tasks that
    accept only A (p = 1/2) and whole 1-GPU tasks with no constraint (p = 1/2).
    F(node 0) = 1/2 x 0 + 1/2 x 0 = 0; F(node 1) = 1/2 x 2000 (A-only tasks cannot use B: all free is a
    fragment, as NoAccess in the paper's simulator) + 1/2 x 0 = 1000 milli-GPU."""
    free = np.zeros((2, 8), np.int64)
    free[:, :2] = 1000
    up = np.ones(2, bool)
    wl = Workload(np.array([1, 1]), np.array([1000, 1000]), np.array([0.5, 0.5]), spec=np.array([0b01, 0]))
    assert node_fragmentation(free, up, wl, node_type=np.array([0, 1])).tolist() == [0.0, 1000.0]
    assert node_fragmentation(free, up, wl).tolist() == [0.0, 0.0]  # types not modelled


def test_fgd_keeps_whole_gpus_of_the_model_constrained_tasks_need():
    """A 0.5-GPU task with no constraint; both nodes have 2 whole GPUs. Workload: whole 1-GPU tasks that
    accept only model A (node 0). On node 0, F goes 0 -> 500 (the half-used GPU is a fragment for whole
    tasks): +500. On node 1 (model B), all free capacity is already a fragment for them: 2000 -> 1500,
    -500. FGD puts the share on node 1; without types both are +500 and it takes node 0, as best-fit."""
    topo, up = _two_nodes()
    free = np.zeros((2, 8), np.int64)
    free[:, :2] = 1000
    node_type = np.array([0, 1])
    a_only = Workload(np.array([1]), np.array([1000]), np.array([1.0]), spec=np.array([0b01]))
    typed = place("fragmentation-aware", free, up, topo, 1, 500, workload=a_only, node_type=node_type)
    assert typed[0].tolist() == [1]
    untyped = place("fragmentation-aware", free, up, topo, 1, 500, workload=a_only)
    assert untyped[0].tolist() == [0]
    assert place("best-fit", free, up, topo, 1, 500, node_type=node_type)[0].tolist() == [0]


def test_workload_types_are_keyed_by_gpu_spec():
    """Two 1-GPU jobs with no constraint and one that accepts only model 4: two types, p = 2/3 and 1/3."""
    wl = Workload.from_jobs(np.array([1, 1, 1]), np.array([1000] * 3), 8, spec=np.array([0, 0, 16]))
    got = sorted(zip(wl.spec.tolist(), wl.p.tolist()))
    assert got == [(0, pytest.approx(2 / 3)), (16, pytest.approx(1 / 3))]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=4, max_size=4),
    st.lists(st.sampled_from([0, 250, 500, 1000]), min_size=32, max_size=32),
    st.integers(1, 7),
    st.sampled_from([1, 2, 4, 1000]),
    st.sampled_from(POLICIES),
)
def test_no_policy_places_a_task_on_a_model_it_does_not_accept(types, cells, spec, request, policy):
    """Property: whatever the free state, every GPU a policy returns is on a node whose model the task
    accepts (spec: bitmask over 3 models), and a task is refused only if no accepted node could hold it."""
    topo = build_topology("hgx-h100-ib-ndr", 32)
    free = np.array(cells, dtype=np.int64).reshape(4, 8)
    node_type, up = np.array(types), np.ones(4, bool)
    gpus, milli = (1, 600) if request == 1000 else (request, 1000)
    wl = Workload(np.array([1, 2]), np.array([500, 1000]), np.array([0.5, 0.5]), spec=np.array([0, spec]))
    got = place(policy, free, up, topo, gpus, milli, workload=wl, node_type=node_type, spec=spec)
    ok = type_ok(spec, node_type)
    if got is None:
        fits = (free >= milli).sum(1) >= gpus
        assert not (fits & ok).any()
    else:
        assert ok[got[0]].all()


def test_fill_without_gpu_spec_is_unchanged_and_types_cost_capacity():
    """The default-trace sample has no gpu_spec column (every pod of openb_pod_list_default.csv has it
    empty): the fill is the same with or without type checks. The gpuspec33 sample (the same 3,000 pods
    with openb_pod_list_gpuspec33.csv's gpu_spec, 1,025 of them constrained) leaves more GPUs unallocated
    under every policy on the quarter-size cluster, and FGD still leaves fewer than best-fit."""
    plain = pd.read_csv(SAMPLE)
    pols = ("best-fit", "fragmentation-aware")
    a = fill_experiment(plain, pols, scale=0.25)
    b = fill_experiment(plain, pols, scale=0.25, gpu_types=False)
    pd.testing.assert_frame_equal(a, b)
    assert (a["typed_tasks"] == 0).all()
    typed = pd.read_csv(SPEC_SAMPLE)
    assert int(typed["gpu_spec"].notna().sum()) == 1025
    assert typed.drop(columns="gpu_spec").equals(plain[typed.drop(columns="gpu_spec").columns])
    t = fill_experiment(typed, pols, scale=0.25).set_index("policy")
    assert (t["typed_tasks"] > 0).all()
    assert (t["unallocated_gpus"].to_numpy() > a.set_index("policy")["unallocated_gpus"].to_numpy()).all()
    assert t.loc["fragmentation-aware", "unallocated_gpus"] < t.loc["best-fit", "unallocated_gpus"]
