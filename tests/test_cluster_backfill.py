"""EASY backfilling keeps its reservation, and utilisation follows the offered load.

An earlier version counted the blocked job's reservation in free GPUs regardless of how its placement
needs them (whole TP groups inside a scale-up domain) and ignored the slowdown a backfilled job gets
from its placement: backfilled jobs then outlasted the reservation, the shadow time kept moving, and a
1,024-GPU job waited for days while the cluster idled, so utilisation *fell* as the offered load rose
(0.42 at 50 % load, 0.24 at 90 %, 10,000 jobs on 1,152 HGX B200 GPUs). These tests pin both."""

import math

import numpy as np
import pandas as pd
import pytest

from hnplan.cluster import engine, simulate_cluster


def _stream(seed: int, n: int = 120) -> pd.DataFrame:
    """One class (no priorities, so the head job never changes until it starts), whole and fractional
    GPUs, gang jobs of up to the whole 32-GPU cluster with TP groups of 8."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 1, 1, 2, 4, 8, 16, 24, 32], size=n)
    milli = np.where((gpus == 1) & (rng.random(n) < 0.5), rng.choice([200, 500, 800], size=n), 1000)
    return pd.DataFrame(
        {
            "arrival_s": np.cumsum(rng.exponential(40.0, size=n)),
            "gpus": gpus,
            "gpu_milli": milli,
            "duration_s": rng.lognormal(6.0, 1.2, size=n),
            "cls": "development",
            "checkpoint_s": math.inf,
            "tp": np.minimum(gpus, 8),
        }
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", ["topology-aware", "first-fit"])
def test_a_blocked_job_starts_by_its_first_reservation(monkeypatch, seed, policy):
    """Exact run times (no failures, no slowdown of non-training jobs) and one class: EASY's
    guarantee, the head job starts no later than the shadow time first computed for it."""
    first: dict[int, float] = {}
    orig = engine.ClusterSim._shadow_time

    def spy(self, j):
        t, extra = orig(self, j)
        first.setdefault(j, t)
        return t, extra

    monkeypatch.setattr(engine.ClusterSim, "_shadow_time", spy)
    r = simulate_cluster("hgx-h100-ib-ndr", 32, _stream(seed), policy=policy, failures=False, preemption=False)
    assert first, "no job was ever blocked: the test checks nothing"
    start = r.jobs["start_s"].to_numpy()
    for j, t in first.items():
        assert start[j] <= t + 1e-6, (j, start[j], t)


def test_utilisation_does_not_fall_as_the_offered_load_rises(cat):
    """The same 4,000 drawn jobs (seed 0) arriving 1.8x faster keep the 1,152-GPU cluster busier."""
    u = [
        simulate_cluster("hgx-b200-ib-xdr", 1152, n_jobs=4000, seed=0, offered_load=x, catalog=cat).summary
        for x in (0.5, 0.9)
    ]
    assert u[1]["utilisation"] > u[0]["utilisation"]
    for s in u:  # the window's demand bounds what a scheduler can fill (up to the backlog of the warm-up)
        assert s["utilisation"] <= s["offered_load_window"] + 0.02


def test_queue_depth_is_slurms_backfill_depth():
    """One 8-GPU server: a 4-GPU job holds half of it for 10,000 s, then 100 8-GPU jobs queue behind
    it (the first blocked, its reservation at 10,000 s with no GPUs spare then), then a 1-GPU job of
    100 s arrives, 101st in the queue. It ends long before the reservation, so EASY backfilling starts
    it at once, as Slurm's backfill plugin does within ``bf_max_job_test`` (default 500, slurm.conf(5)):
    with the default depth its queueing delay is 0. A pass that looks at only 100 queued jobs (Slurm's
    event-triggered ``default_queue_depth``) never reaches it, and it waits until the 4-GPU job ends
    (10,000 s after t = 0, 9,899 s after its arrival at t = 101) at least."""
    from hnplan.cluster.simulate import QUEUE_DEPTH

    n = 100
    jobs = pd.DataFrame(
        {
            "arrival_s": [0.0, *np.arange(1.0, n + 1), n + 1.0],
            "gpus": [4, *[8] * n, 1],
            "gpu_milli": 1000,
            "duration_s": [10_000.0, *[1000.0] * n, 100.0],
            "cls": "development",
            "checkpoint_s": math.inf,
            "tp": 1,
        }
    )
    kw = dict(policy="first-fit", failures=False, preemption=False, seed=0)
    assert QUEUE_DEPTH == 500
    last = simulate_cluster("hgx-h100-ib-ndr", 8, jobs, **kw).jobs.iloc[-1]
    assert last["queue_delay_s"] == 0.0
    # with Slurm's backfill every bf_interval = 30 s it waits for the pass at t = 120: 19 s
    slurm = simulate_cluster("hgx-h100-ib-ndr", 8, jobs, bf_interval_s=30.0, **kw).jobs.iloc[-1]
    assert slurm["queue_delay_s"] == pytest.approx(120.0 - (n + 1.0))
    shallow = simulate_cluster("hgx-h100-ib-ndr", 8, jobs, queue_depth=100, **kw).jobs.iloc[-1]
    assert shallow["queue_delay_s"] >= 10_000.0 - (n + 1.0)


def test_queue_depth_out_of_range_is_refused():
    from hnplan.errors import InputError

    with pytest.raises(InputError, match="queue_depth"):
        simulate_cluster("hgx-h100-ib-ndr", 8, n_jobs=5, queue_depth=0)


def _whole_cluster_behind_inference() -> pd.DataFrame:
    """Two 8-GPU servers. t = 0: a 4-GPU inference service of 1,000 s. t = 1: a 16-GPU training job
    of 500 s (the whole cluster): blocked, its reservation at t = 1,000 s when the service ends.
    From t = 2 a 1-GPU inference job every 10 s (120 of them) for 5,000 s each (so each would outlast the
    reservation), and at t = 3 one 1-GPU inference job of 100 s (ends at 103 s, before it)."""
    n = 120
    jobs = pd.DataFrame(
        {
            "arrival_s": [0.0, 1.0, 3.0, *(2.0 + 10.0 * np.arange(n))],
            "gpus": [4, 16, 1, *[1] * n],
            "gpu_milli": 1000,
            "duration_s": [1000.0, 500.0, 100.0, *[5000.0] * n],
            "cls": ["inference", "training", "inference", *["inference"] * n],
            "checkpoint_s": math.inf,
            "tp": [1, 8, 1, *[1] * n],
        }
    )
    return jobs.sort_values("arrival_s", kind="stable").reset_index(drop=True)  # rows: 0, 1, 2 s, 3 s, ...


def test_a_whole_cluster_job_starts_by_its_shadow_time_behind_higher_priority_arrivals():
    """EASY's guarantee holds against later arrivals of a higher class: the 16-GPU training job starts
    at t = 1,000 s, when the service ahead of it ends (its shadow time), although 120 production
    inference jobs arrive after it and ahead of it in priority. The one that ends before the
    reservation starts at once (backfilled: arrival 3 s, start 3 s); those that would outlast it start
    after the training job ends (1,000 + 500 = 1,500 s). An earlier version let every later
    inference job take the GPUs the drain freed, and the training job never started."""
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, _whole_cluster_behind_inference(), failures=False, preemption=False, seed=0
    )
    j = r.jobs
    assert j.loc[1, "start_s"] == pytest.approx(1000.0)
    assert j.loc[1, "end_s"] == pytest.approx(1500.0)
    short = j["duration_s"] == 100.0
    assert j.loc[short, "start_s"].item() == pytest.approx(3.0)
    assert (j.loc[j["duration_s"] == 5000.0, "start_s"] >= 1500.0 - 1e-6).all()
    # while it waits, the GPUs the drain frees are blocked capacity, not fragmentation: at t = 200 s,
    # 12 of 16 GPUs are idle (the 4-GPU service runs; the 100-s job ended at 103 s)
    ts = r.timeseries
    row = ts[(ts["time_s"] > 150.0) & (ts["time_s"] < 950.0)].iloc[0]
    assert row["blocked"] == pytest.approx(12 / 16)
    assert row["fragmentation"] == 0.0
    after = ts[(ts["time_s"] > 1000.0) & (ts["time_s"] < 1500.0)]
    assert (after["blocked"] == 0.0).all()


def test_without_exemption_production_inference_preempts_the_whole_cluster_job():
    """With preemption and no exempt time (Slurm's default), the reservation still holds until the
    training job starts at 1,000 s; the inference jobs it held back are tried again in that same pass
    (nothing is left to protect) and the first that finds no GPU preempts it at once: requeued, its
    work since the last checkpoint lost (none: it ran 0 s), and 16 of the held jobs start at 1,000 s.
    (An earlier version left them to the next event, the arrival at 1,002 s.)"""
    r = simulate_cluster(
        "hgx-h100-ib-ndr",
        16,
        _whole_cluster_behind_inference(),
        failures=False,
        preemption=True,
        preempt_exempt_s=0.0,
        seed=0,
    )
    j = r.jobs
    assert j.loc[1, "start_s"] == pytest.approx(1000.0)
    assert j.loc[1, "preemptions"] == 1 and j.loc[1, "lost_work_s"] == 0.0
    held = (j["duration_s"] == 5000.0) & (j["arrival_s"] < 1000.0)
    assert (j.loc[held, "start_s"] >= 1000.0).all()  # held by the reservation until it started
    assert (j.loc[held, "start_s"] == 1000.0).sum() == 16  # then in the same pass, one per GPU
    assert j.loc[j["duration_s"] == 100.0, "start_s"].item() == pytest.approx(3.0)


def test_the_exempt_time_protects_the_drained_job_until_it_ends():
    """Slurm's PreemptExemptTime: a job is not preempted before it has run that long. With 200 s the
    training job (start 1,000 s) is exempt until 1,200 s: the inference arrivals at 1,002 ... 1,192 s
    wait, and at 1,200 s (no arrival then: the pass at the exemption's end) one preempts it, losing
    1,200 - 1,000 = 200 s (no checkpoint). With the default hour the 500-s job ends at 1,500 s
    unpreempted, and the held inference jobs start then."""
    jobs = _whole_cluster_behind_inference()
    kw = dict(failures=False, preemption=True, seed=0)
    short = simulate_cluster("hgx-h100-ib-ndr", 16, jobs, preempt_exempt_s=200.0, **kw).jobs
    assert short.loc[1, "start_s"] == pytest.approx(1000.0)
    assert short.loc[1, "preemptions"] == 1 and short.loc[1, "lost_work_s"] == pytest.approx(200.0)
    assert short.loc[short["duration_s"] == 5000.0, "start_s"].min() == pytest.approx(1200.0)
    j = simulate_cluster("hgx-h100-ib-ndr", 16, jobs, **kw).jobs  # the default, PREEMPT_EXEMPT_S = 1 h
    assert j.loc[1, "start_s"] == pytest.approx(1000.0) and j.loc[1, "end_s"] == pytest.approx(1500.0)
    assert j.loc[1, "preemptions"] == 0 and j.loc[1, "lost_work_s"] == 0.0
    assert j.loc[j["duration_s"] == 5000.0, "start_s"].min() == pytest.approx(1500.0)


def test_a_bad_exempt_time_is_refused():
    from hnplan.errors import InputError

    with pytest.raises(InputError, match="preempt_exempt_s"):
        simulate_cluster("hgx-h100-ib-ndr", 8, n_jobs=5, preempt_exempt_s=-1.0)


def test_a_node_in_repair_counts_from_the_end_of_its_repair():
    """A down node's GPUs become free at the repair's end in the shadow time (not never, which let
    every job backfill past the reservation while any node was in repair)."""
    from types import SimpleNamespace

    from hnplan.cluster.topology import build_topology

    jobs = _whole_cluster_behind_inference().iloc[:2]
    sim = engine.ClusterSim(
        build_topology("hgx-h100-ib-ndr", 16),
        jobs,
        "topology-aware",
        speed_fn=lambda *a: 1.0,
        rates=SimpleNamespace(hardware_per_gpu_s=0.0, software_per_gpu_s=0.0, restart_s=0.0, repair_s=7200.0),
        seed=0,
        backfill=True,
        preemption=False,
        failures=False,
        queue_depth=500,
        sample_s=100.0,
        window_s=10.0,
    )
    sim.up[1] = False
    sim.repair_end[1] = 7200.0
    assert sim._shadow_time(1)[0] == pytest.approx(7200.0)
