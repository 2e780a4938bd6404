"""The cluster summary's figures a platform lead acts on: the bounded slowdown (Feitelson et al. 1997), the
GPU-time idle while jobs queue split into drained-for-a-reservation and fragmented (conserving installed
GPU-time), and production inference taking free GPUs ahead of a training job's reservation (Slurm's strict
priority order, ``strict_priority``) instead of preempting once the reserved job starts."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hnplan.cluster import simulate_cluster
from hnplan.cluster.result import bounded_slowdown

H = 3600.0
COLS = ["arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp"]


def test_bounded_slowdown_of_hand_computed_jobs():
    # 1 s that waited 600 s: plain 601, bounded 601 / 10 = 60.1; 100 s that waited 600 s: 700 / 100 = 7 either way;
    # 5 s without a wait: plain 1, bounded max(1, 5 / 10) = 1
    np.testing.assert_allclose(bounded_slowdown([600.0, 600.0, 0.0], [1.0, 100.0, 5.0]), [60.1, 7.0, 1.0])
    np.testing.assert_allclose(bounded_slowdown([600.0], [1.0], tau_s=1.0), [601.0])  # tau 1 s: the plain one


def test_the_summary_gives_both_slowdowns_of_the_finished_jobs():
    # two 8-GPU servers, all development jobs (speed 1, one priority: first come first served). A (16 GPUs,
    # 1,000 s) holds both servers from t = 0; B (1 GPU, 1 s) and C (1 GPU, 100 s) arrive at 0 behind it and start
    # at 1,000 s; D (1 GPU, 5 s) arrives at 5,000 s to an empty cluster.
    #   plain:   A 1, B 1,001 / 1 = 1,001, C 1,100 / 100 = 11, D 1: mean 1,014 / 4 = 253.5
    #   bounded: A 1, B 1,001 / 10 = 100.1, C 11, D max(1, 5 / 10) = 1: mean 113.1 / 4 = 28.275, median 6
    jobs = pd.DataFrame(
        [
            (0.0, 16, 1000, 1000.0, "development", 0.0, 8),
            (0.0, 1, 1000, 1.0, "development", 0.0, 1),
            (0.0, 1, 1000, 100.0, "development", 0.0, 1),
            (5000.0, 1, 1000, 5.0, "development", 0.0, 1),
        ],
        columns=COLS,
    )
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, seed=0)
    s = r.summary
    assert r.jobs["end_s"].tolist() == [1000.0, 1001.0, 1100.0, 5005.0]
    assert s["jct_slowdown"]["mean"] == pytest.approx(253.5)
    b = s["jct_bounded_slowdown"]
    assert b["tau_s"] == 10.0
    assert b["mean"] == pytest.approx(28.275) and b["p50"] == pytest.approx(6.0)
    np.testing.assert_allclose(r.jobs["bounded_slowdown"], [1.0, 100.1, 11.0, 1.0])
    assert r.jobs.attrs["units"]["bounded_slowdown"] == "x" and s["units"]["jct_bounded_slowdown"].startswith("x")


def test_gpus_drained_for_a_gang_job_are_counted_and_the_split_conserves_gpu_time():
    # two 8-GPU servers, development jobs. A (8 GPUs, 10,000 s) starts at 0 on one server; B (16 GPUs, 1,000 s)
    # arrives at 1 s and holds the reservation: the other server's 8 GPUs sit drained until A ends at 10,000 s;
    # B runs 10,000-11,000 s; C (1 GPU, 100 s) at 20,000 s is the last arrival: window 20,000 s, warm-up 4,000 s
    # (0.2 of it), 16 x 16,000 = 256,000 GPU s installed in the window:
    #   busy     8 x 6,000 (A) + 16 x 1,000 (B) = 64,000
    #   drained  8 x 6,000                      = 48,000
    #   idle with the queue empty 16 x 9,000    = 144,000; fragmented, down: 0
    jobs = pd.DataFrame(
        [
            (0.0, 8, 1000, 10000.0, "development", 0.0, 8),
            (1.0, 16, 1000, 1000.0, "development", 0.0, 8),
            (20000.0, 1, 1000, 100.0, "development", 0.0, 1),
        ],
        columns=COLS,
    )
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, seed=0)
    s = r.summary
    assert s["window_s"] == 20000.0 and s["warmup_s"] == 4000.0
    c = s["capacity_gpu_s"]
    # integrated over the state changes, not sampled: every figure exact (to float rounding)
    assert c["total"] == 256000.0
    assert c["busy"] == pytest.approx(64000.0, rel=1e-12)
    assert c["drained"] == pytest.approx(48000.0, rel=1e-12)
    assert c["idle_empty_queue"] == pytest.approx(144000.0, rel=1e-12)
    assert c["fragmented"] == 0.0 and c["down"] == 0.0 and c["other_queued"] == 0.0
    assert c["blocked"] == pytest.approx(c["drained"] + c["fragmented"] + c["other_queued"])
    assert c["share"]["drained"] == pytest.approx(48000.0 / 256000.0, rel=1e-12)
    # the busy GPU-time is the allocation integral the utilisation is computed beside
    assert c["busy"] / c["total"] == pytest.approx(s["allocation_rate"], rel=1e-12)


def test_the_split_is_exact_between_samples(monkeypatch):
    # one 8-GPU server, development jobs (one priority, first come first served), no failures. 100 samples over
    # the 1,000-s window put a sample every 10 s; the events fall between them.
    #   A (6 GPUs, 503 s) at 0 and B (1 GPU, 303 s) at 0 start at once: 1 GPU free. C (2 GPUs, 97 s) arrives at
    #   1 s: it needs 2 whole GPUs, 1 is free (the free GPU could not hold it even packed: not fragmentation, and
    #   C holds the reservation: the free GPU is drained for it) until B ends at 303 s; C runs 303-400 s.
    #   D (1 GPU, 1 s) at 1,000 s is the last arrival: window 1,000 s, warm-up 0 (warmup=0).
    #   busy     6 x 503 + 1 x 303 + 2 x 97 = 3,018 + 303 + 194 = 3,515
    #   drained  1 x (303 - 1)                                  = 302
    #   idle with the queue empty: 8 x 1,000 - 3,515 - 302       = 4,183 (1 GPU for 0-1 s, 1 for 400-503, ...)
    jobs = pd.DataFrame(
        [
            (0.0, 6, 1000, 503.0, "development", 0.0, 1),
            (0.0, 1, 1000, 303.0, "development", 0.0, 1),
            (1.0, 2, 1000, 97.0, "development", 0.0, 1),
            (1000.0, 1, 1000, 1.0, "development", 0.0, 1),
        ],
        columns=COLS,
    )
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 8, jobs=jobs, failures=False, seed=0, warmup=0.0, samples=100, policy="first-fit"
    )
    j = r.jobs
    assert j["start_s"].tolist() == [0.0, 0.0, 303.0, 1000.0]
    c = r.summary["capacity_gpu_s"]
    assert c["total"] == 8000.0
    assert c["busy"] == pytest.approx(3515.0, rel=1e-12)
    assert c["drained"] == pytest.approx(302.0, rel=1e-12)
    assert c["idle_empty_queue"] == pytest.approx(4183.0, rel=1e-12)
    assert c["fragmented"] == 0.0 and c["other_queued"] == 0.0 and c["down"] == 0.0
    # the ledger packed into blocks of two rows reads the same
    from hnplan.cluster.engine import ClusterSim

    monkeypatch.setattr(ClusterSim, "LEDGER_BLOCK", 2)
    again = simulate_cluster(
        "hgx-h100-ib-ndr", 8, jobs=jobs, failures=False, seed=0, warmup=0.0, samples=100, policy="first-fit"
    )
    assert again.summary["capacity_gpu_s"] == c


def test_the_time_means_are_integrated_over_the_state_changes():
    # two 8-GPU servers, first-fit, development jobs (one priority), no failures, warm-up 0. A (6 GPUs, 1,000 s)
    # and B (6 GPUs, 2,000 s) arrive at 0: A on server 0, B on server 1, 2 GPUs free on each. C (4 GPUs, 500 s)
    # arrives at 123 s: the 4 free GPUs could hold it packed, but no server has 4: all 4 are fragmented
    # (4 / 16 = 0.25, nothing drained) until A ends at 1,000 s and C starts there. D (1 GPU, 1 s) at 4,000 s
    # is the last arrival: window 4,000 s.
    #   fragmentation  0.25 x (1,000 - 123) / 4,000       = 0.0548125, max 0.25
    #   jobs running   (2 x 1,500 + 1 x 500) / 4,000      = 0.875 (A+B 0-1,000 s, B+C -1,500 s, B -2,000 s), max 2
    # The 10 samples (every 400 s) would read 0.5 / 11 = 0.045 and 7 / 11 = 0.64.
    jobs = pd.DataFrame(
        [
            (0.0, 6, 1000, 1000.0, "development", 0.0, 1),
            (0.0, 6, 1000, 2000.0, "development", 0.0, 1),
            (123.0, 4, 1000, 500.0, "development", 0.0, 1),
            (4000.0, 1, 1000, 1.0, "development", 0.0, 1),
        ],
        columns=COLS,
    )
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, seed=0, warmup=0.0, samples=10, policy="first-fit"
    )
    s = r.summary
    assert r.jobs["start_s"].tolist() == [0.0, 0.0, 1000.0, 4000.0] and s["window_s"] == 4000.0
    assert s["fragmentation"] == pytest.approx(0.25 * 877.0 / 4000.0, rel=1e-12)
    assert s["fragmentation_max"] == 0.25 and s["blocked"] == 0.0
    assert s["concurrent_jobs"] == {"mean": pytest.approx(0.875, rel=1e-12), "max": 2}
    # the same integral as the GPU-time split's: fragmentation x GPUs x window = fragmented GPU-seconds
    assert s["capacity_gpu_s"]["fragmented"] == pytest.approx(s["fragmentation"] * 16 * 4000.0, rel=1e-12)
    assert len(r.timeseries) == 11  # the samples stay for the plotted series


def test_queueing_delay_by_job_size_of_a_hand_trace():
    # two 8-GPU servers, first-fit, development jobs (one priority: first come first served), no failures.
    # A (16 GPUs, 1,000 s) holds both servers from 0; B (1 GPU) at 0, C (1 GPU) at 500 s and D (4 GPUs) at 600 s
    # (10 s each) wait for it and start at 1,000 s; E (16 GPUs, 10 s) at 700 s waits for them too: 1,010 s.
    # F (half a GPU, 1 s) at 5,000 s starts at once. Waits: A 0, B 1,000, C 500, D 400, E 310, F 0 s.
    #   1 GPU (B, C, F): sorted 0, 500, 1,000: p50 500, p95 500 + 0.9 x 500 = 950, p99 500 + 0.98 x 500 = 990
    #   2-4 (D): 400;  9-64 (A, E): p50 155, p95 0.95 x 310 = 294.5, p99 0.99 x 310 = 306.9
    # the class's figure mixes them: development p50 355 s, between the 1-GPU and the gang jobs' waits
    rows = [(0.0, 16, 1000, 1000.0), (0.0, 1, 1000, 10.0), (500.0, 1, 1000, 10.0), (600.0, 4, 1000, 10.0)]
    rows += [(700.0, 16, 1000, 10.0), (5000.0, 1, 500, 1.0)]
    jobs = pd.DataFrame([(*r[:3], r[3], "development", 0.0, 1) for r in rows], columns=COLS)
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, seed=0, policy="first-fit")
    assert r.jobs["queue_delay_s"].tolist() == [0.0, 1000.0, 500.0, 400.0, 310.0, 0.0]
    q = r.summary["queue_delay_by_gpus_s"]
    assert list(q) == ["1", "2-4", "9-64"]  # smallest first, only sizes with jobs
    assert q["1"] == {"jobs": 3, "p50": 500.0, "p95": pytest.approx(950.0), "p99": pytest.approx(990.0)}
    assert q["2-4"] == {"jobs": 1, "p50": 400.0, "p95": 400.0, "p99": 400.0}
    assert q["9-64"] == {"jobs": 2, "p50": 155.0, "p95": pytest.approx(294.5), "p99": pytest.approx(306.9)}
    assert r.summary["queue_delay_s"]["development"]["p50"] == 355.0
    assert r.summary["units"]["queue_delay_by_gpus_s"].startswith("s")


job = st.tuples(
    st.floats(0.0, 20 * H),
    st.sampled_from([1, 2, 8, 16, 72, 144]),
    st.floats(0.2 * H, 12 * H),
    st.sampled_from(["inference", "training", "fine-tuning", "development"]),
    st.sampled_from([1000, 1000, 500]),
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job, min_size=3, max_size=25), st.sampled_from(["gb200-nvl72", "hgx-b200-ib-xdr"]), st.booleans())
def test_busy_blocked_idle_and_down_add_up_to_the_installed_gpu_time(rows, system, backfill):
    # conservation: busy + drained + fragmented + other queued + idle with an empty queue + down = GPUs x window,
    # with failures, preemption and GPU sharing; every part >= 0
    jobs = pd.DataFrame(
        [
            (t, 1 if m < 1000 else g, m, d, c, 0.0 if c == "inference" else H, 1 if m < 1000 else min(g, 8))
            for t, g, d, c, m in rows
        ],
        columns=COLS,
    )
    r = simulate_cluster(system, 144, jobs=jobs, failures=True, preempt_exempt_s=0.0, backfill=backfill, seed=1)
    s = r.summary
    c = s["capacity_gpu_s"]
    parts = ("busy", "drained", "fragmented", "other_queued", "idle_empty_queue", "down")
    assert all(c[k] >= -1e-6 for k in parts)
    assert sum(c[k] for k in parts) == pytest.approx(r.gpus * (s["window_s"] - s["warmup_s"]), rel=1e-9)
    assert c["total"] == r.gpus * (s["window_s"] - s["warmup_s"])


def test_inference_takes_the_gpus_drained_for_a_training_reservation_instead_of_preempting():
    # two 8-GPU servers. Development A (8 GPUs, 10 h) starts at 0 on one server; training B (16 GPUs, 2 h)
    # arrives at 1 s and holds the reservation, draining the other server until A ends at 10 h. Inference I
    # (4 GPUs, 20 h) arrives at 2 h. Inference ranks above training (Slurm: strict priority order; backfill
    # only keeps lower-priority jobs off a higher-priority job's resources): I starts at 2 h on the drained
    # server, and B waits for it (until 22 h).
    jobs = pd.DataFrame(
        [
            (0.0, 8, 1000, 10 * H, "development", 0.0, 8),
            (1.0, 16, 1000, 2 * H, "training", H, 8),
            (2 * H, 4, 1000, 20 * H, "inference", 0.0, 1),
            (30 * H, 1, 1000, 100.0, "development", 0.0, 1),
        ],
        columns=COLS,
    )
    kw = dict(jobs=jobs, failures=False, seed=0, policy="first-fit")
    j = simulate_cluster("hgx-h100-ib-ndr", 16, strict_priority=True, **kw).jobs
    assert j["preemptions"].tolist() == [0, 0, 0, 0]
    assert j.loc[2, "start_s"] == 2 * H and j.loc[2, "end_s"] == 22 * H
    assert j.loc[1, "start_s"] == 22 * H  # B: both servers free once A (10 h) and I (22 h) have ended
    # the default holds the reservation against every later job (EASY's guarantee): I, which would outlast the
    # shadow time (10 h), waits; B starts at 10 h. With the reservation gone I is tried again in that same pass:
    # B holds all 16 GPUs and has run less than the exempt hour (PreemptExemptTime), so I preempts B when the
    # hour ends, at 11 h (B's checkpoint at 1 h: no work lost), and runs to 31 h
    held = simulate_cluster("hgx-h100-ib-ndr", 16, **kw).jobs
    assert held["preemptions"].tolist() == [0, 1, 0, 0]
    assert held.loc[1, "start_s"] == 10 * H and held.loc[1, "lost_work_s"] == 0.0
    assert held.loc[2, "start_s"] == 11 * H and held.loc[2, "end_s"] == 31 * H
