"""Offered load of a cluster run, defined one way: GPU-hours demanded per GPU-hour of capacity over the
arrival window, whether the run is sized by --days, --jobs or a trace; oversubscription is labelled."""

import pytest
from typer.testing import CliRunner

from hnplan import units
from hnplan.catalog.schemas.cluster import ClusterMix
from hnplan.cli import app
from hnplan.cluster import load_text, offered_load_of, synthetic_jobs
from hnplan.cluster.jobs import mean_gpu_seconds

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
    assert d["steady_state"] is True  # the jobs hold 162 % of the window's GPU-time inside it: a real queue
    assert d["offered_load_asked"] is None  # a trace aims at no load


def test_a_window_too_short_for_the_load_says_so_instead_of_oversubscribed(tmp_path):
    """Ten 1-GPU jobs of 10 h arriving within 9 minutes on 16 GPUs ask for 41.7x the GPU-hours of the
    window, yet never more than 10 GPUs at once: no queue forms, and the label must not say
    "oversubscribed" beside a low utilisation. Inside the measuring window [108 s, 540 s] (warm-up 0.2)
    the jobs hold 2 x 432 + (420 + 360 + ... + 60 + 0) = 2,544 GPU-s of 16 x 432 = 6,912: 36.8 %, under
    half of min(41.7, 1). Steady state needs 4 x 10 h = 40 h = 1.7 days of arrivals, 10 x 144,000 / 540
    = 2,667 jobs, rounded up to 2,700."""
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
    assert "too short to reach steady state" in out and "--days 1.7 or about 2,700 jobs (--jobs)" in out
    import json

    d = json.loads(runner.invoke(app, [*args, "--no-failures", "--json"]).output)
    assert d["offered_load"] == pytest.approx(100 / (16 * 540 / 3600))
    assert d["offered_load_window"] == pytest.approx(2544 / 6912)
    assert d["steady_state"] is False and d["steady_jobs"] == 2700
    assert d["run_time_weighted_s"] == pytest.approx(36000.0) and d["steady_window_s"] == pytest.approx(144000.0)
    assert d["utilisation"] <= d["offered_load_window"] + 1e-9


def test_a_typo_in_a_trace_column_names_the_column_it_stands_for(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,gpu,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,3600,training,600,8\n")
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--trace", str(trace)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "missing column(s) gpus; it has gpu (did you mean gpus?)" in " ".join(r.output.split())
