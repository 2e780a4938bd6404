"""Offered load of a cluster run, defined one way: GPU-hours demanded per GPU-hour of capacity over the
arrival window, whether the run is sized by --days, --jobs or a trace; oversubscription is labelled."""

import math

import pytest
from typer.testing import CliRunner

from hnplan import units
from hnplan.catalog.schemas.cluster import ClusterMix
from hnplan.cli import app
from hnplan.cluster import load_text, offered_load_of, synthetic_jobs
from hnplan.cluster.synthetic import mean_gpu_seconds

runner = CliRunner()
SRC = "test mix: hand-derivable shares"


def _mix(load: float = 0.5) -> ClusterMix:
    """One training class: 8 or 128 GPUs with equal weight, one hour each."""
    return ClusterMix(
        id="two-sizes",
        name="two sizes",
        source=SRC,
        offered_load={"value": load, "unit": "fraction of GPUs", "source": SRC},
        classes=[
            {
                "cls": "training",
                "share": {"value": 1.0, "unit": "fraction of jobs", "source": SRC},
                "gpus": {"kind": "discrete", "values": [8, 128], "weights": [1, 1], "unit": "GPU", "source": SRC},
                "duration_s": {"kind": "discrete", "values": [3600], "weights": [1], "unit": "s", "source": SRC},
                "checkpoint_s": {"value": 1800, "unit": "s", "source": SRC},
                "tp_gpus": 8,
            }
        ],
    )


def test_expected_demand_counts_gpus_as_the_cluster_caps_them():
    mix = _mix()
    # uncapped: (8 + 128) / 2 x 3600 = 244,800 GPU s; on 64 GPUs a 128-GPU draw asks for 64:
    # (8 + 64) / 2 x 3600 = 129,600 GPU s
    assert mean_gpu_seconds(mix) == pytest.approx(244_800)
    assert mean_gpu_seconds(mix, 64) == pytest.approx(129_600)


def test_days_and_jobs_offer_the_same_load():
    """On 64 GPUs, --days drew its arrival rate from the uncapped demand (244,800 GPU s a job) and
    offered about 0.5 x 129,600 / 244,800 = 0.26 of the cluster while --jobs offered 0.5."""
    mix = _mix(0.5)
    by_days = synthetic_jobs(mix, 64, days=10, seed=0)
    by_jobs = synthetic_jobs(mix, 64, jobs=len(by_days), seed=0)
    # 0.5 x 64 GPUs x 864,000 s / 129,600 GPU s = 213 jobs expected in 10 days
    assert len(by_days) == pytest.approx(213, rel=0.15)
    days_load = offered_load_of(by_days, 64, 10 * units.DAY)
    jobs_load = offered_load_of(by_jobs, 64, by_jobs["arrival_s"].max())
    assert days_load == pytest.approx(0.5, rel=0.2)
    assert jobs_load == pytest.approx(0.5, rel=0.05)


def test_offered_load_by_hand():
    import pandas as pd

    j = pd.DataFrame({"gpus": [8, 1], "gpu_milli": [1000, 500], "duration_s": [3600.0, 7200.0]})
    # 8 x 1 h + 0.5 x 2 h = 9 GPU-hours asked of 16 GPUs over 3 h (48 GPU-hours)
    assert offered_load_of(j, 16, 3 * 3600.0) == pytest.approx(9 / 48)
    assert load_text({"offered_load": 9 / 48, "window_s": 10800.0}) == "18.8%"
    label = load_text({"offered_load": 2.5, "window_s": 10800.0})
    assert label.startswith("250.0% (oversubscribed") and "2.5x" in label and "3 h" in label
    asked = load_text({"offered_load": 2.5, "window_s": 10800.0, "offered_load_asked": 1.5})
    assert asked.startswith("250.0% (the mix aims at 150.0%; this draw offers more; oversubscribed")
    assert load_text({"offered_load": 0.86, "window_s": 1.0, "offered_load_asked": 0.85}) == "86.0%"  # within 5 %


def test_an_oversubscribing_trace_says_so(tmp_path):
    trace = tmp_path / "jobs.csv"
    # four 8-GPU jobs of 10 h arriving within 30 min on 16 GPUs: 320 GPU-hours asked of 8 GPU-hours
    trace.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        + "".join(f"{600 * i},8,1000,36000,training,3600,8\n" for i in range(4))
    )
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--trace", str(trace)]
    r = runner.invoke(app, [*args, "--no-failures"])
    assert r.exit_code == 0, r.output
    assert "4000.0% (oversubscribed" in r.output and "40x" in r.output
    r = runner.invoke(app, [*args, "--no-failures", "--json"])
    import json

    d = json.loads(r.output)
    assert d["offered_load"] == pytest.approx(40.0) and d["oversubscribed"] is True
    # the jobs hold 162 % of the window's GPU-time inside it: a real queue, so "oversubscribed" stays; but
    # 30 minutes of arrivals against 10-hour jobs (and a load of 40x) is no steady state: 5 x 10 h = 50 h needed
    assert d["steady_state"] is False and d["steady_short"] is True
    assert d["steady_window_s"] == pytest.approx(5 * 36000.0)
    assert d["steady_state_note"].startswith("no: the 0.5 h arrival window is 0.05x")
    assert "and the jobs offer 4000% of the capacity" in d["steady_state_note"]
    assert d["offered_load_asked"] is None  # a trace aims at no load


def test_a_window_too_short_for_the_load_says_so_instead_of_oversubscribed(tmp_path):
    """Ten 1-GPU jobs of 10 h arriving within 9 minutes on 16 GPUs ask for 41.7x the GPU-hours of the
    window, yet never more than 10 GPUs at once: no queue forms, and the label must not say
    "oversubscribed" beside a low utilisation. Inside the measuring window [108 s, 540 s] (warm-up 0.2)
    the jobs hold 2 x 432 + (420 + 360 + ... + 60 + 0) = 2,544 GPU-s of 16 x 432 = 6,912: 36.8 %.
    Steady state needs 5 x 10 h = 50 h = 2.1 days of arrivals (a warm-up of 0.2 x 50 h = one run time,
    four run times measured), 10 x 180,000 / 540 = 3,333 jobs, rounded up to 3,400."""
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        + "".join(f"{60 * i},1,1000,36000,training,3600,1\n" for i in range(10))
    )
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--trace", str(trace)]
    r = runner.invoke(app, [*args, "--no-failures"])
    out = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "oversubscribed" not in out
    assert "too short to reach steady state" in out
    import json

    d = json.loads(runner.invoke(app, [*args, "--no-failures", "--json"]).output)
    assert d["offered_load"] == pytest.approx(100 / (16 * 540 / 3600))
    assert d["offered_load_window"] == pytest.approx(2544 / 6912)
    assert d["steady_state"] is False and d["steady_jobs"] == 3400
    # a trace is replayed as recorded (--days and --jobs only cut it): the remedy is a longer trace
    assert d["steady_state_note"].endswith(
        "replay a trace of 2.1 days or about 3,400 jobs (--days and --jobs only cut this one)"
    )
    assert d["run_time_weighted_s"] == pytest.approx(36000.0) and d["steady_window_s"] == pytest.approx(180000.0)
    assert d["utilisation"] <= d["offered_load_window"] + 1e-9


def test_a_typo_in_a_trace_column_names_the_column_it_stands_for(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,gpu,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,3600,training,600,8\n")
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--trace", str(trace)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "missing column(s) gpus; it has gpu (did you mean gpus?)" in " ".join(r.output.split())


def test_steady_window_covers_a_warm_up_of_one_run_time_and_four_measured():
    """W >= d / warmup (the empty cluster fills in one run time) and (1 - warmup) W >= 4 d."""
    from hnplan.cluster.load import steady_window_s

    d = 7200.0
    assert steady_window_s(d) == pytest.approx(5 * d)  # 0.2: both give 5 d
    assert steady_window_s(d, warmup=0.1) == pytest.approx(10 * d)  # the warm-up sets it: 0.1 W >= d
    assert steady_window_s(d, warmup=0.5) == pytest.approx(8 * d)  # the measured half sets it: 0.5 W >= 4 d
    assert steady_window_s(d, warmup=0.0) == pytest.approx(4 * d)  # no cut: four run times measured


def test_run_time_weighted_by_gpu_time():
    """A 1-GPU job of 100 h and 99 jobs of 8 GPUs x 1 h: 100 + 792 = 892 GPU-hours; weighted run time
    (1 x 100^2 + 99 x 8 x 1^2) / 892 = 10,792 / 892 = 12.1 h, where the plain mean is 1.99 h."""
    import pandas as pd

    from hnplan.cluster.load import run_time_weighted_s

    j = pd.DataFrame({"gpus": [1] + [8] * 99, "gpu_milli": [1000] * 100, "duration_s": [100 * 3600.0] + [3600.0] * 99})
    assert run_time_weighted_s(j) == pytest.approx(10_792 / 892 * 3600)
    half = j.assign(gpu_milli=[500] + [1000] * 99)  # half a GPU: 50 GPU-hours, (0.5 x 100^2 + 792) / 842
    assert run_time_weighted_s(half) == pytest.approx(5_792 / 842 * 3600)


@pytest.mark.parametrize(
    "window_h,load,steady,short",
    [
        (50.0, 0.85, True, False),  # exactly 5 x 10 h, below capacity
        (49.0, 0.85, False, True),  # an hour short
        (100.0, 1.0, False, False),  # long enough, but a load of 100 % has no steady state
        (100.0, 1.3, False, False),
        (10.0, 2.0, False, True),
    ],
)
def test_steady_state_needs_the_window_and_a_load_below_one(window_h, load, steady, short):
    import pandas as pd

    from hnplan.cluster.load import steady_state_of

    j = pd.DataFrame({"gpus": [8] * 4, "gpu_milli": [1000] * 4, "duration_s": [36000.0] * 4})
    d = steady_state_of(j, load, window_h * 3600.0)
    assert (d["steady_state"], d["steady_short"]) == (steady, short)
    assert d["steady_window_s"] == pytest.approx(50 * 3600.0)
    assert d["steady_jobs"] == max(4, math.ceil(4 * 50 / window_h))  # at the run's arrival rate


def test_steady_text_gives_the_remedy_that_fits():
    from hnplan.cluster.load import steady_text

    base = {"window_s": 100 * 3600.0, "run_time_weighted_s": 36000.0, "steady_window_s": 180000.0}
    ok = steady_text({**base, "steady_state": True, "steady_short": False, "offered_load": 0.85})
    assert (
        ok
        == "yes: the 4.17-day arrival window is 10x the jobs' GPU-time-weighted run time (10 h) and the jobs offer 85% of the capacity"
    )
    over = steady_text({**base, "steady_state": False, "steady_short": False, "offered_load": 1.3})
    assert over == (
        "no: the jobs offer 130% of the capacity, a queue that grows while they arrive; "
        "lower the load (--load) or simulate more GPUs (--gpus)"
    )
    short = steady_text(
        {
            **base,
            "window_s": 36000.0 * 3,
            "steady_state": False,
            "steady_short": True,
            "offered_load": 0.5,
            "steady_jobs": 170,
        }
    )
    assert short == (
        "no: the 30 h arrival window is 3x the jobs' GPU-time-weighted run time (10 h), under the 5x that steady "
        "state needs (a warm-up of one run time, four measured), so the empty start and the work cut at its end "
        "bias them; simulate --days 2.1 or about 170 jobs (--jobs)"
    )


def test_one_day_of_the_default_mix_on_gb200_is_not_steady(cat):
    """The command's default: one day of the default mix on 1,152 GB200 GPUs. Its jobs' GPU-time-weighted
    run time (about 41 h) exceeds the 24 h window, so the figures are warm-up, whatever the load."""
    from hnplan.cluster import simulate_cluster

    s = simulate_cluster("gb200-nvl72", 1152, seed=0, catalog=cat).summary
    assert s["window_s"] < s["run_time_weighted_s"]  # shorter than one run time, let alone five
    assert s["steady_state"] is False and s["steady_short"] is True
    assert s["steady_window_s"] == pytest.approx(5 * s["run_time_weighted_s"])
    assert (
        s["steady_state_note"].startswith("no: the ") and "so its figures are mostly warm-up" in s["steady_state_note"]
    )
    assert s["steady_state_note"].endswith(f"or about {s['steady_jobs']:,} jobs (--jobs)")


def test_durations_of_a_thousand_hours_and_more_print_without_an_exponent():
    """The committed Alibaba openb sample (3,000 pods over 144.4 days) printed its offered load ``over a
    3.47e+03 h arrival window, too short to reach steady state (the jobs run 1.45e+03 h, ...)``: whole hours with
    separators from 1,000 up, three significant digits below, in the load line and the steady-state note."""
    from hnplan import units
    from hnplan.cluster.load import load_text, steady_text

    summary = {
        "offered_load": 0.0012,
        "window_s": units.hours_to_s(3466.4),
        "run_time_weighted_s": units.hours_to_s(1451.6),
        "steady_short": True,
        "steady_state": False,
        "steady_window_s": 5 * units.hours_to_s(1451.6),
        "steady_jobs": 6300,
        "jobs_from": "trace",
    }
    assert load_text(summary) == (
        "0.1% (over a 3,466 h arrival window, too short to reach steady state: the jobs run 1,452 h, "
        "GPU-time-weighted mean)"
    )
    assert "(1,452 h)" in steady_text(summary) and "e+0" not in steady_text(summary)


def test_a_mix_draw_above_the_cluster_is_cut_to_it_and_said():
    """The default mix's training sizes run to 1,024 GPUs (Seren / Kalos); on 144 GPUs the draws of 256, 512 and 1,024
    (weights 0.0319 + 0.0191 + 0.0115 of the class's 0.9999, the class 5 % of the jobs) ask more than the cluster and
    run on all of it: 0.3125 % of the jobs, a fifth of the offered GPU-time. None on a cluster of 1,152."""
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster.simulate import simulate_cluster
    from hnplan.cluster.synthetic import capped_shares

    mix = cluster_mix("default")
    (train,) = [c for c in mix.classes if c.cls == "training"]
    above = sum(w for v, w in zip(train.gpus.values, train.gpus.weights) if v > 144) / sum(train.gpus.weights)
    jobs, gpu_time = capped_shares(mix, 144)
    assert jobs == pytest.approx(train.share.value * above / sum(c.share.value for c in mix.classes), rel=1e-9)
    assert 0.15 < gpu_time < 0.3
    assert capped_shares(mix, 1152) == (0.0, 0.0)
    shares = [capped_shares(mix, g)[1] for g in (8, 64, 144, 512, 1024)]
    assert shares == sorted(shares, reverse=True)  # the larger the cluster, the less is cut
    r = simulate_cluster("gb200-nvl72", 144, days=1.0, seed=1)
    assert r.summary["capped"] == {"jobs_share": jobs, "gpu_time_share": gpu_time}
    assert "capped" not in simulate_cluster("gb200-nvl72", 1152, days=0.2, seed=1).summary
