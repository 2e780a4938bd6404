"""Preemption stops only the lower-class jobs whose GPUs the inference job's placement uses (Slurm's
preemption guide: the low-priority jobs on the resources the high-priority job is allocated), and a run
with preemption, failures and requeues conserves GPU-time and jobs."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hnplan.cluster import simulate_cluster

H = 3600.0
COLS = ["arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp"]


def test_a_candidate_freed_in_the_trial_but_not_under_the_placement_keeps_running():
    # two 8-GPU servers, first-fit: server 0 holds training A (7 GPUs, t = 0) and development D (1 GPU,
    # t = 1 s); server 1 holds training B (8 GPUs, t = 10 s). Inference I (8 GPUs, one server) arrives at 2 h.
    # Candidates lowest class first: D, then B (later start than A). Freeing D leaves server 0 one GPU: no fit;
    # freeing B too, I fits on server 1. Only B is on I's GPUs: D ran on (it had been preempted too).
    jobs = pd.DataFrame(
        [
            (0.0, 7, 1000, 10 * H, "training", H, 1),
            (1.0, 1, 1000, 10 * H, "development", H, 1),
            (10.0, 8, 1000, 10 * H, "training", H, 8),
            (2 * H, 8, 1000, H, "inference", 0, 8),
        ],
        columns=COLS,
    )
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, policy="first-fit", seed=0)
    j = r.jobs.set_index("job_id")
    assert j["preemptions"].tolist() == [0, 0, 1, 0]
    assert j.loc[1, "end_s"] == 1.0 + 10 * H  # D: uninterrupted, ends 10 h after its start
    assert j.loc[3, "start_s"] == 2 * H and j.loc[3, "end_s"] == 3 * H  # I starts on arrival


job = st.tuples(
    st.floats(0.0, 20 * H),
    st.sampled_from([1, 2, 8, 16, 72, 144]),
    st.floats(0.2 * H, 12 * H),
    st.sampled_from(["inference", "training", "fine-tuning", "development"]),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job, min_size=3, max_size=25), st.sampled_from(["gb200-nvl72", "hgx-b200-ib-xdr"]))
def test_preemption_and_failures_conserve_gpu_time_and_jobs(rows, system):
    jobs = pd.DataFrame(
        [(t, g, 1000, d, c, 0.0 if c == "inference" else H, min(g, 8)) for t, g, d, c in rows], columns=COLS
    )
    kw = dict(jobs=jobs, failures=True, preempt_exempt_s=0.0, policy="topology-aware", seed=3)
    r = simulate_cluster(system, 144, **kw)
    s, j, ts = r.summary, r.jobs, r.timeseries
    # every job is counted once: done, running, queued, rejected or unplaceable
    assert sum(s["jobs"].values()) == len(jobs) and j["status"].isin(list(s["jobs"])).all()
    # allocated + free + down GPUs are the installed GPUs at every sample
    np.testing.assert_allclose(ts["allocation"] + ts["free"] + ts["down"], 1.0, atol=1e-9)
    assert 0.0 <= s["utilisation"] <= s["allocation_rate"] + 1e-12 <= 1.0 + 1e-12
    done = j[j["status"] == "done"]
    # a job completes no sooner than its ideal run time after it arrives, and starts after it arrives
    assert ((done["end_s"] - done["arrival_s"]) >= done["duration_s"] * (1 - 1e-9)).all()
    # (to the clock's rounding: SimPy's time is a sum of float delays, 2e-12 s off an arrival at 8,195 s was seen)
    assert (done["start_s"] >= done["arrival_s"] * (1 - 1e-12) - 1e-9).all()
    # useful GPU-time is the work asked of the finished jobs, at most what they were allocated
    np.testing.assert_allclose(done["useful_gpu_s"], done["duration_s"] * done["gpus"], rtol=1e-9)
    assert (done["useful_gpu_s"] <= done["allocated_gpu_s"] * (1 + 1e-9)).all()
    again = simulate_cluster(system, 144, **kw)  # the same seed reproduces the run
    assert again.summary == s and again.jobs.equals(j)


def test_preempt_exempt_default_is_the_simulators():
    # the CLI default (units.HOUR) and hnplan.cluster.simulate.PREEMPT_EXEMPT_S are one assumption: one hour
    import inspect

    from hnplan.cli import cluster_cmd
    from hnplan.cluster.simulate import PREEMPT_EXEMPT_S

    default = inspect.signature(cluster_cmd.simulate).parameters["preempt_exempt"].default.default
    assert default == PREEMPT_EXEMPT_S == 3600.0


@pytest.mark.parametrize("backfill", [True, False])
def test_the_gpus_left_idle_for_a_preempted_gang_job_count_as_blocked_at_once(backfill):
    # two 8-GPU servers, each held by an 8-GPU training job (TP 8: one server) from t = 0; inference of 4 GPUs
    # arrives at 4,000 s, past the 3,600 s exempt time, and preempts one of them. The stopped job needs a whole
    # server again: the 4 GPUs the inference job leaves free wait for it until the inference ends at 24,000 s,
    # 4 / 16 = 0.25 of the cluster blocked. The pass that preempted had queued it behind its own snapshot of the
    # queue, and no event came until 24,000 s: blocked read 0 all along (nor was the job reconsidered). Without
    # backfilling no job passes the stopped one either: the same GPUs wait for it (they read 0 there too).
    jobs = pd.DataFrame(
        [
            (0.0, 8, 1000, 100 * H, "training", H, 8),
            (0.0, 8, 1000, 100 * H, "training", H, 8),
            (4000.0, 4, 1000, 20000.0, "inference", 0.0, 1),
            (30000.0, 1, 1000, 100.0, "development", 0.0, 1),  # the last arrival: a 30,000 s window
        ],
        columns=COLS,
    )
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=jobs, failures=False, seed=0, backfill=backfill)
    ts, s = r.timeseries, r.summary
    drain = ts[(ts["time_s"] >= 4000.0) & (ts["time_s"] < 24000.0)]
    assert len(drain) > 0 and (drain["blocked"] == 0.25).all() and (drain["fragmentation"] == 0.0).all()
    assert (ts.loc[ts["time_s"] > 24000.0, "blocked"] == 0.0).all()  # the job restarts when the inference ends
    # the summary's time-mean over the measured window (warm-up 6,000 s to 30,000 s): 0.25 x 18,000 / 24,000,
    # integrated over the state changes (exact, not to the samples' 75 s)
    assert s["window_s"] == 30000.0 and s["warmup_s"] == 6000.0
    assert s["blocked"] == pytest.approx(0.1875, rel=1e-12)
    assert r.jobs["preemptions"].tolist() == [0, 1, 0, 0] or r.jobs["preemptions"].tolist() == [1, 0, 0, 0]


def test_down_time_counts_the_repairs_still_under_way_at_the_end():
    # 2,304 B200 GPUs for 20 days with two tiny jobs, failures on (seed 0: 19 hardware failures of one 8-GPU
    # server each, 24 h repairs): the GPU-time down is the time integral of the down GPUs. A repair added its
    # 8 x 24 h only when it ended, so those under way when the run ended were left out: 17 x 192 = 3,264 GPU-h
    # against 3,432 in the series. Now to the sampling's resolution: each failure's start and end fall within
    # one sample (20 days / 4,000 = 432 s) of the series' step
    jobs = pd.DataFrame(
        [(0.0, 8, 1000, 100.0, "development", 0.0, 8), (20 * 24 * H, 8, 1000, 100.0, "development", 0.0, 8)],
        columns=COLS,
    )
    r = simulate_cluster("hgx-b200-ib-xdr", 2304, jobs=jobs, seed=0, samples=4000)
    s, ts = r.summary, r.timeseries
    t = np.append(ts["time_s"].to_numpy(), s["end_s"])
    integral = float((ts["down"].to_numpy() * 2304 * np.diff(t)).sum())
    failures, step = s["hardware_failures"], s["window_s"] / 4000
    assert failures == 19 and failures * 8 * 24 * H > integral > 17 * 8 * 24 * H
    assert abs(s["down_gpu_s"] - integral) <= failures * 8 * step
