"""The cluster simulation's summary is computed on numpy columns and its frames are built when read
(:class:`hnplan.cluster.simulate.ClusterResult`): the summary a user reads back from the frames with pandas, as
the simulation once computed it, is the printed one bit for bit; the job tables of the public API are the
DataFrames the simulation's columns stand for."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.mixes import cluster_mix
from hnplan.cluster import check_jobs, resolve_jobs, simulate_cluster, synthetic_jobs
from hnplan.cluster.jobs import JOB_COLUMNS, job_columns
from hnplan.cluster.load import admitted_jobs, offered_load_of, run_time_weighted_s
from hnplan.cluster.simulate import SERIES_UNITS, resolve_job_columns
from hnplan.cluster.synthetic import synthetic_columns

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
RUNS = {
    "default mix": dict(n_jobs=300, seed=1),
    "best-fit, MIG slices, oversubscribed": dict(
        n_jobs=300, seed=2, policy="best-fit", slicing="mig", offered_load=1.4
    ),
    "inference reserve": dict(n_jobs=300, seed=3, inference_reserve_gpus=16),
    "Alibaba trace": dict(trace=TRACES / "alibaba-openb-gpu-sample.csv", n_jobs=300),
}


def _summary_from_frames(r, warm: float, window: float) -> dict:
    """The figures of the summary as pandas computes them from ``r.jobs``."""
    j = r.jobs
    waited = j[j["status"].isin(["done", "running", "queued"])]
    sd = j.loc[j["status"] == "done", "slowdown"].to_numpy()
    admitted, _ = admitted_jobs(j, j["status"].to_numpy())
    return {
        "offered_load": offered_load_of(admitted, r.gpus, window),
        # held to at most 1 as the summary holds it (useful GPU-time equals the allocated where no work is
        # lost; summed in float it can read 1 + 7e-16)
        "goodput": min(1.0, float(j["useful_gpu_s"].sum()) / float(j["allocated_gpu_s"].sum())),
        "jobs": {s: int((j["status"] == s).sum()) for s in ("done", "running", "queued", "rejected", "unplaceable")},
        "jct_slowdown_mean": float(sd.mean()),
        "queue_delay_p95": {
            c: float(np.percentile(waited.loc[waited["cls"] == c, "queue_delay_s"], 95)) for c in waited["cls"].unique()
        },
        "run_time_weighted_drawn_s": run_time_weighted_s(admitted),
    }


@pytest.mark.parametrize("kw", RUNS.values(), ids=RUNS.keys())
def test_the_summary_is_what_the_frames_give(kw):
    r = simulate_cluster("hgx-h100-ib-ndr", 128, **kw)
    s = r.summary
    got = _summary_from_frames(r, s["warmup_s"], s["window_s"])
    assert got.pop("jct_slowdown_mean") == s["jct_slowdown"]["mean"]
    assert got.pop("queue_delay_p95") == {c: q["p95"] for c, q in s["queue_delay_s"].items()}
    assert got == {k: s[k] for k in got}  # exact: the same numbers, summed in the same order
    # the time means are integrated over the state changes, not taken from the samples: the samples' means
    # come near them (within 0.3 points of the GPUs and 1.5 jobs on these 128-GPU runs)
    inw = r.timeseries[(r.timeseries["time_s"] >= s["warmup_s"]) & (r.timeseries["time_s"] <= s["window_s"])]
    for k in ("fragmentation", "blocked"):
        assert abs(inw[k].mean() - s[k]) < 0.003
    assert abs(inw["running"].mean() - s["concurrent_jobs"]["mean"]) < 1.5
    assert list(r.timeseries.columns) == list(SERIES_UNITS) and r.timeseries.attrs["units"] == SERIES_UNITS
    assert list(r.jobs.columns[: len(JOB_COLUMNS)]) == list(JOB_COLUMNS)
    assert r.jobs["status"].dtype == r.jobs["cls"].dtype == pd.Series(["a"]).dtype  # pandas' text columns
    if kw.get("inference_reserve_gpus"):
        assert r.jobs.columns[-1] == "reserve_gpu_s" and (r.jobs["reserve_gpu_s"] > 0).any()


def test_the_public_job_tables_are_the_columns_as_frames():
    mix = cluster_mix("default")
    frame = synthetic_jobs(mix, 64, jobs=200, seed=4)
    cols = synthetic_columns(mix, 64, jobs=200, seed=4)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(cols) == list(JOB_COLUMNS)
    pd.testing.assert_frame_equal(frame, pd.DataFrame(cols))
    pd.testing.assert_frame_equal(resolve_jobs(64, jobs=200, seed=4), frame)
    trace = TRACES / "alibaba-openb-gpuspec33-sample.csv"
    pd.testing.assert_frame_equal(
        resolve_jobs(64, trace=trace, days=0.5), pd.DataFrame(resolve_job_columns(64, trace=trace, days=0.5))
    )
    # check_jobs returns the kind it is given, the same table
    shuffled = frame.drop(columns="job_id").sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(check_jobs(shuffled), pd.DataFrame(check_jobs(job_columns(shuffled))))
    pd.testing.assert_frame_equal(check_jobs(shuffled), frame)
