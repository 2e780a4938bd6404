"""GPU models in the cluster simulation: nodes carry a model, jobs a ``gpu_spec`` of accepted models;
typed jobs wait for their model, a job no model can take is unplaceable, utilisation per model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.cluster import simulate_cluster
from hnplan.cluster.gpu_types import placeable
from hnplan.cluster.jobs import check_jobs, read_openb
from hnplan.cluster.topology import ClusterTopology
from hnplan.cluster.validation import OPENB_GPU_MODELS, openb_topology

ROOT = Path(__file__).resolve().parents[1]
SPEC_SAMPLE = ROOT / "data/traces/alibaba-openb-gpuspec33-sample.csv"
SYSTEM = "hgx-h100-ib-ndr"  # failure rates only (failures are off below)


def _two_models() -> ClusterTopology:
    """Two 1-GPU nodes, node 0 of model ``a``, node 1 of model ``b``."""
    idx = np.arange(2)
    return ClusterTopology(
        system_id="two-models",
        gpus=2,
        node_gpus=1,
        domain_gpus=1,
        domain=idx,
        leaf=idx,
        pod=idx,
        nodes_per_leaf=1,
        leaves_per_pod=1,
        failure_unit_gpus=1,
        unit=idx,
        hot_swap=False,
        rack=idx,
        gpu_models=("a", "b"),
        node_model=idx,
    )


def _jobs(rows) -> pd.DataFrame:
    arrival, dur, spec = zip(*rows, strict=True)
    n = len(rows)
    return pd.DataFrame(
        {
            "arrival_s": arrival,
            "gpus": [1] * n,
            "gpu_milli": [1000] * n,
            "duration_s": dur,
            "cls": ["development"] * n,
            "checkpoint_s": [np.inf] * n,
            "tp": [1] * n,
            "gpu_spec": spec,
        }
    )


def _run(jobs, **kw):
    kw = {"preemption": False, "failures": False, "warmup": 0.0, "policy": "first-fit", **kw}
    return simulate_cluster(SYSTEM, 2, jobs, nodes=_two_models(), **kw)


def test_typed_jobs_wait_for_their_model_while_others_run():
    """Hand-derived timeline (1-GPU nodes a, b; first-fit; no failures, no preemption):

    - j0 t=0 accepts a, 100 s: node a, 0-100.
    - j1 t=10 accepts a, 50 s: node b is free but not its model; waits for a: 100-150 (delay 90).
    - j2 t=20 any model, 500 s: runs on b at once, 20-520. It outlasts j1's reservation (t=100), but
      on a model j1 cannot use, so EASY backfilling lets it start.
    - j3 t=30 accepts only c (no such node): unplaceable at arrival, not queued forever.
    - j4 t=60 accepts b, 40 s: b is held by j2 until 520: 520-560 (delay 460).

    The window is the arrival span [0, 60]: model a busy all of it (1.0), model b from 20 (40/60);
    the cluster (60 + 40) / 120.
    """
    r = _run(_jobs([(0, 100, "a"), (10, 50, "a"), (20, 500, ""), (30, 10, "c"), (60, 40, "b")]))
    j = r.jobs
    assert j["status"].tolist() == ["done", "done", "done", "unplaceable", "done"]
    assert j["start_s"].tolist()[:3] == [0, 100, 20] and j["start_s"].iloc[4] == 520
    assert j["end_s"].iloc[1] == 150 and j["end_s"].iloc[4] == 560
    assert j["queue_delay_s"].tolist() == [0, 90, 0, 0, 460]
    s = r.summary
    assert s["jobs"] == {"done": 4, "running": 0, "queued": 0, "rejected": 0, "unplaceable": 1}
    assert s["by_gpu_model"]["a"] == {"gpus": 1, "utilisation": 1.0, "allocation_rate": 1.0}
    assert s["by_gpu_model"]["b"]["utilisation"] == pytest.approx(40 / 60)
    assert s["utilisation"] == pytest.approx(100 / 120)
    # with backfill passes every 30 s (Slurm's bf_interval) j2, behind the blocked j1, starts at the pass at
    # t = 30 (30-530) and j4 after it (530-570): model b busy 30 of the 60 s, the cluster (60 + 30) / 120
    slurm = _run(_jobs([(0, 100, "a"), (10, 50, "a"), (20, 500, ""), (30, 10, "c"), (60, 40, "b")]), bf_interval_s=30)
    assert slurm.jobs["start_s"].tolist()[:3] == [0, 100, 30] and slurm.jobs["start_s"].iloc[4] == 530
    assert slurm.summary["utilisation"] == pytest.approx(90 / 120)


def test_untyped_jobs_take_either_model():
    """Without ``gpu_spec`` the same jobs use both nodes: j1 starts at once on b (delay 0)."""
    r = _run(_jobs([(0, 100, ""), (10, 50, ""), (20, 500, "")]))
    assert r.jobs["start_s"].tolist() == [0, 10, 60]
    assert r.summary["jobs"]["unplaceable"] == 0


def test_homogeneous_cluster_gpu_spec_of_its_own_model_changes_nothing():
    """On a catalog cluster (one model, its accelerator id) a ``gpu_spec`` naming that model is no
    constraint: the run equals the one without the column; naming another model is unplaceable."""
    base = simulate_cluster(SYSTEM, 16, n_jobs=300, seed=4, policy="fragmentation-aware")
    jobs = base.jobs[["arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp"]]
    plain = simulate_cluster(SYSTEM, 16, jobs, seed=4, policy="fragmentation-aware")
    typed = simulate_cluster(SYSTEM, 16, jobs.assign(gpu_spec="h100-sxm"), seed=4, policy="fragmentation-aware")
    pd.testing.assert_frame_equal(plain.timeseries, typed.timeseries)
    pd.testing.assert_frame_equal(plain.jobs, typed.jobs.drop(columns="gpu_spec"))
    assert "by_gpu_model" not in typed.summary
    other = jobs.assign(gpu_spec=["a100-sxm" if i % 3 == 0 else "" for i in range(len(jobs))])
    r = simulate_cluster(SYSTEM, 16, other, seed=4, policy="fragmentation-aware")
    assert r.summary["jobs"]["unplaceable"] == len(range(0, len(jobs), 3))


def test_placeable_by_node_size_of_the_accepted_models():
    """openb: T4 nodes have 2 or 4 GPUs, G2 nodes 8, A10 two nodes of 1. A job of at most 8 GPUs needs
    one node that large of an accepted model; a larger one that many GPUs of accepted models."""
    topo = openb_topology()[0]
    t4, g2, a10 = (1 << OPENB_GPU_MODELS.index(m) for m in ("T4", "G2", "A10"))
    spec = np.array([t4, t4, g2, a10, a10, 0, a10, g2])
    gpus = np.array([4, 8, 8, 1, 2, 16, 9, 4392 + 1])
    assert placeable(topo, spec, gpus).tolist() == [True, False, True, True, False, True, False, False]


def test_read_openb_keeps_gpu_spec_and_check_jobs_normalises_it():
    j = read_openb(SPEC_SAMPLE)
    assert (j["gpu_spec"] != "").sum() == 1025
    t = check_jobs(_jobs([(0, 1, np.nan), (1, 1, " T4 ")]))
    assert t["gpu_spec"].tolist() == ["", "T4"]


def test_openb_trace_on_its_own_cluster():
    """The typed sample on the trace's nodes scaled to about 100 GPUs: every pod finds its model; per
    model GPU-time adds up to the cluster's (allocation and utilisation conserve)."""
    r = simulate_cluster(SYSTEM, 100, trace=SPEC_SAMPLE, nodes="openb", policy="fragmentation-aware", seed=1)
    s = r.summary
    assert s["jobs"]["unplaceable"] == 0 and s["jobs"]["done"] == 3000
    by = s["by_gpu_model"]
    assert list(by) == list(OPENB_GPU_MODELS)
    assert sum(v["gpus"] for v in by.values()) == s["gpus"]
    for key in ("utilisation", "allocation_rate"):
        assert sum(v[key] * v["gpus"] for v in by.values()) == pytest.approx(s[key] * s["gpus"], rel=1e-9)
    assert (r.jobs["gpu_spec"] != "").sum() == 1025


def test_cli_nodes_openb_and_unplaceable():
    """--nodes openb: per-model utilisation in the JSON and the table; on a catalog cluster the typed
    pods (none accepts an H100) are counted unplaceable; an unknown node list exits 2 in one line."""
    import json

    from typer.testing import CliRunner

    from hnplan.cli import app

    runner = CliRunner()
    base = ["cluster", "simulate", "--system", SYSTEM, "--trace", str(SPEC_SAMPLE), "--no-failures"]
    r = runner.invoke(app, [*base, "--gpus", "60", "--nodes", "openb", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["gpus"] == 101 and set(d["by_gpu_model"]) == set(OPENB_GPU_MODELS) and d["rates_system"] == SYSTEM
    r = runner.invoke(app, [*base, "--gpus", "60", "--nodes", "openb"])
    assert r.exit_code == 0 and "utilisation by GPU model" in r.output and "T4" in r.output
    r = runner.invoke(app, [*base, "--gpus", "64"])
    assert r.exit_code == 0 and "unplaceable 1,025" in r.output  # counts thousands-separated
    r = runner.invoke(app, [*base, "--gpus", "64", "--nodes", "opnb"])
    assert r.exit_code == 2 and "--nodes must be one of openb" in r.output
    assert "Traceback" not in r.output


def test_snapshot_lists_installed_gpus_with_their_model():
    """On the openb nodes (1-8 GPUs in 8 slots) the fragmentation map has one row per installed GPU
    and names its model."""
    r = simulate_cluster(SYSTEM, 60, trace=SPEC_SAMPLE, nodes="openb", failures=False, snapshot_at=0.5)
    snap = r.snapshot
    assert len(snap) == r.summary["gpus"] == 101
    assert snap.groupby("gpu_model").size().to_dict() == {m: v["gpus"] for m, v in r.summary["by_gpu_model"].items()}
    assert snap["used"].between(0, 1).all()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.integers(1, 100), st.sampled_from(["", "a", "b", "a|b", "c"])),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["first-fit", "best-fit", "fragmentation-aware"]),
)
def test_typed_runs_conserve_and_keep_models(rows, policy):
    """Any job stream on the two-model cluster: exactly the jobs naming only ``c`` are unplaceable,
    every other one finishes; per-model allocated GPU-time adds up to the cluster's; a model no job
    accepts is never allocated."""
    r = _run(_jobs(rows), policy=policy)
    spec = r.jobs["gpu_spec"]
    assert ((r.jobs["status"] == "unplaceable") == (spec == "c")).all()
    assert (r.jobs.loc[spec != "c", "status"] == "done").all()
    by, s = r.summary["by_gpu_model"], r.summary
    assert by["a"]["allocation_rate"] + by["b"]["allocation_rate"] == pytest.approx(2 * s["allocation_rate"])
    for model, other in (("a", "b"), ("b", "a")):
        if spec.isin([other, "c"]).all():
            assert by[model]["allocation_rate"] == 0


def test_p100_only_pods_wait_behind_long_untyped_pods_not_for_capacity():
    """The typed sample on the scaled openb cluster (``--gpus 60``: 101 GPUs, 7 of them P100 on four nodes),
    seed 0, topology-aware placement. By hand from the CSV: 113 pods accept only a P100 (``gpu_spec``
    ``P100``, part of one GPU each, 110-810 milli) and demand sum(gpu_milli / 1000 x (deletion - scheduled))
    = 140,048.6 GPU-s, 0.16 % of the 7 P100s over the 12,474,700-s arrival window: none of their waiting is
    for capacity. With failures (the CLI's default) they wait 1.3 days on average: node failures move
    untyped whole-GPU inference pods that run for weeks (jobs 3 and 8, interrupted once each) onto P100 GPUs,
    until from 132 d no P100 GPU has room for a P100-only pod; the 25 of them that arrive from 132.04 d and
    wait more than a day start only when the trace's long pods end, after 144.39 d. Without failures the
    same pods wait under an hour on average."""
    kw = dict(trace=SPEC_SAMPLE, nodes="openb", policy="topology-aware", seed=0)
    with_f = simulate_cluster(SYSTEM, 60, **kw)
    j = with_f.jobs
    p100 = j["gpu_spec"] == "P100"
    assert with_f.summary["by_gpu_model"]["P100"]["gpus"] == 7 and p100.sum() == 113
    demand = (j.loc[p100, "gpu_milli"] / 1000 * j.loc[p100, "duration_s"]).sum()
    assert demand == pytest.approx(140_048.58) and with_f.summary["window_s"] == 12_474_700
    assert demand / (7 * 12_474_700) < 0.002
    assert j.loc[p100, "queue_delay_s"].mean() > 86_400
    assert (j.loc[[3, 8], "interruptions"] == 1).all() and (j.loc[[3, 8], "gpu_spec"] == "").all()
    late = p100 & (j["arrival_s"] >= 132.04 * 86_400) & (j["queue_delay_s"] > 86_400)
    assert late.sum() == 25 and j.loc[late, "start_s"].min() > 144.39 * 86_400
    without = simulate_cluster(SYSTEM, 60, failures=False, **kw).jobs
    assert without.loc[without["gpu_spec"] == "P100", "queue_delay_s"].mean() < 3_600
