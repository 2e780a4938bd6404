"""The scheduler pass's bookkeeping (hnplan.cluster.occupancy and the engine's running free count): a queued job
passed over without a placement search, the running jobs' GPUs kept as one list and the free GPUs on nodes up
kept as a count must change no outcome, through jobs ending, nodes failing and coming back, GPU shares (MIG
slicing) and an inference reserve."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.mixes import cluster_mix
from hnplan.cluster import engine, runtime, simulate_cluster, synthetic_jobs
from hnplan.cluster.occupancy import HeldGPUs, fit_counts, may_fit
from hnplan.cluster.topology import MILLI

SYSTEM = "hgx-h100-ib-ndr"  # 8 GPUs a node


def test_fit_counts_by_hand():
    # node 0: 3 whole free, one GPU at 400 milli free; node 1 (down): 8 whole free; node 2: 5 whole free
    free = np.zeros((3, 8), np.int64)
    free[0, :3] = MILLI
    free[0, 3] = 400
    free[1, :] = MILLI
    free[2, :5] = MILLI
    up = np.array([True, False, True])
    # whole free on nodes up 3 + 5 = 8; most on one node 5; largest free share 1000 (a whole GPU is a share too)
    assert fit_counts(free, up) == (8, 5, 1000)
    counts = fit_counts(free, up)
    assert may_fit(counts, 5, MILLI, 8) and not may_fit(counts, 6, MILLI, 8)  # one node: 5 at most
    assert may_fit(counts, 8, MILLI, 8) is False  # 8 whole free in all, but a one-node job needs them on one node
    assert may_fit(counts, 16, MILLI, 8) is False and may_fit((16, 8, 1000), 16, MILLI, 8)  # a gang: 16 in all
    assert fit_counts(free, np.zeros(3, bool)) == (0, 0, 0)  # every node down
    only_shares = np.full((1, 8), 300)
    assert fit_counts(only_shares, np.ones(1, bool)) == (0, 0, 300)
    assert may_fit((0, 0, 300), 1, 300, 8) and not may_fit((0, 0, 300), 1, 301, 8)


def test_held_gpus_against_a_plain_dict():
    """HeldGPUs.arrays() after any sequence of starts and ends holds exactly the running jobs' GPUs (flat index
    node x width + slot), through its growth and compaction."""
    rng = np.random.default_rng(3)
    width = 8
    held = HeldGPUs(width, capacity=4)  # small: grows and compacts often
    ref: dict[int, list[int]] = {}
    for step in range(600):
        if ref and rng.random() < 0.45:
            j = int(rng.choice(list(ref)))
            held.remove(j)
            del ref[j]
        else:
            j = step
            k = int(rng.integers(1, 12))
            nodes, slots = rng.integers(0, 20, k), rng.integers(0, width, k)
            held.add(j, nodes, slots)
            ref[j] = (nodes * width + slots).tolist()
        gpu, job = held.arrays()
        got = sorted(zip(job.tolist(), gpu.tolist()))
        assert got == sorted((j, g) for j, gs in ref.items() for g in gs)
        if ref:
            gone = set(list(ref)[:2])
            gpu, job = held.arrays(gone)
            assert not set(job.tolist()) & gone
            assert len(gpu) == sum(len(gs) for j, gs in ref.items() if j not in gone)


def _often_failing(monkeypatch, per_gpu_h: float = 0.02, repair_s: float = 1800.0):
    """Hardware failures at ``per_gpu_h`` per GPU-hour with a ``repair_s`` repair: many failures and repairs
    in a short run (the catalog's rates give a handful a month on a small cluster)."""
    real = runtime.failure_rates

    def rates(system, gpus, catalog=None, rate_factor=1.0):
        r = real(system, gpus, catalog, rate_factor)
        return runtime.FailureRates(per_gpu_h / 3600.0, r.software_per_gpu_s, r.restart_s, repair_s)

    monkeypatch.setattr(runtime, "failure_rates", rates)


def _jobs(gpus: int, n: int, load: float, seed: int) -> pd.DataFrame:
    return synthetic_jobs(cluster_mix("default"), gpus, jobs=n, seed=seed, offered_load=load)


CASES = {
    "whole GPUs": {},
    "MIG slices": {"slicing": "mig"},
    "inference reserve": {"inference_reserve_gpus": 16},
}


@pytest.mark.parametrize("case", list(CASES))
def test_passing_over_jobs_that_cannot_fit_changes_no_outcome(monkeypatch, case):
    """The same run with every queued job searched (may_fit always True, the code before the skip) and with
    jobs too large for the free GPUs passed over: every job's start, end, queueing and lost work the same,
    bit for bit, on a loaded 64-GPU cluster whose nodes fail and come back."""
    _often_failing(monkeypatch)
    jobs = _jobs(64, 700, 1.1, seed=5)
    kw = {"policy": "topology-aware", "seed": 5, "samples": 50, **CASES[case]}
    passed_over = []
    real = engine.may_fit

    def counting(*a):
        ok = real(*a)
        passed_over.append(not ok)
        return ok

    monkeypatch.setattr(engine, "may_fit", counting)
    fast = simulate_cluster(SYSTEM, 64, jobs, **kw)
    monkeypatch.setattr(engine, "may_fit", lambda *a: True)
    slow = simulate_cluster(SYSTEM, 64, jobs, **kw)
    assert sum(passed_over) > 500  # the skip was taken, not only tried (1,125-3,258 of 1,813-3,673 trials)
    assert fast.summary["hardware_failures"] > 100  # nodes failed and came back during the run
    pd.testing.assert_frame_equal(fast.jobs, slow.jobs)
    for key in ("utilisation", "allocation_rate", "preemptions", "hardware_failures", "fragmentation", "blocked"):
        assert fast.summary[key] == slow.summary[key], key


def test_free_count_equals_the_free_gpus_on_nodes_up(monkeypatch):
    """ClusterSim.free_milli, kept as jobs start and end and nodes fail and are repaired, equals the sum of the
    free shares on nodes up at every recorded state (what the capacity split reads)."""
    _often_failing(monkeypatch, per_gpu_h=0.05)
    seen = {"states": 0, "down": 0}
    real_note = engine.ClusterSim._note

    def checked(self):
        assert self.free_milli == int((self.free * self.up[:, None]).sum())
        seen["states"] += 1
        seen["down"] += int(not self.up.all())
        return real_note(self)

    monkeypatch.setattr(engine.ClusterSim, "_note", checked)
    r = simulate_cluster(SYSTEM, 64, _jobs(64, 400, 0.9, seed=2), seed=2, samples=50, slicing="mig")
    assert r.summary["hardware_failures"] > 5
    assert seen["states"] > 500 and seen["down"] > 50  # states recorded with nodes in repair
