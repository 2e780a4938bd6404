"""The cluster's utilisation per calendar day (``utilisation_by_day``): a hand trace's days, the days conserving the
window's allocated GPU-time, and the mean over replications day by day."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.cluster import simulate_cluster
from hnplan.cluster.daily import mean_by_day, utilisation_by_day
from hnplan.cluster.replicate import replicate_cluster

DAY = 86400.0
COLS = ["arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp"]


def _hand_jobs() -> pd.DataFrame:
    # two 8-GPU servers, development jobs, no failures. A (16 GPUs) holds both from 0 for 1.5 days (129,600 s);
    # B (4 GPUs) runs from 2 days (172,800 s) for a quarter of a day (21,600 s); C (1 GPU, 1 s) at 2.5 days
    # (216,000 s) is the last arrival: the window is 2.5 days, its third day 43,200 s long.
    rows = [(0.0, 16, 129_600.0), (2 * DAY, 4, 21_600.0), (2.5 * DAY, 1, 1.0)]
    return pd.DataFrame([(t, g, 1000, d, "development", 0.0, 1) for t, g, d in rows], columns=COLS)


def test_a_hand_trace_per_day():
    #   day 0 [0, 86,400):        A on all 16 GPUs                      -> 1.0
    #   day 1 [86,400, 172,800):  A to 129,600 s: 16 x 43,200 / (16 x 86,400)  -> 0.5
    #   day 2 [172,800, 216,000): B 4 GPUs for 21,600 s of 43,200: 4 x 21,600 / (16 x 43,200) -> 0.125
    # weighted by the days' lengths: (86,400 + 43,200 + 5,400) / 216,000 = 0.625, the allocation rate
    # (16 x 129,600 + 4 x 21,600) / (16 x 216,000) = 2,160,000 / 3,456,000
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=_hand_jobs(), failures=False, seed=0, warmup=0.0)
    s = r.summary
    assert r.jobs["start_s"].tolist() == [0.0, 2 * DAY, 2.5 * DAY] and s["window_s"] == 2.5 * DAY
    d = s["utilisation_by_day"]
    assert d["day"] == [0, 1, 2]
    assert d["start_s"] == [0.0, DAY, 2 * DAY] and d["length_s"] == [DAY, DAY, DAY / 2]
    assert d["allocated"] == pytest.approx([1.0, 0.5, 0.125], rel=1e-12)
    assert d["down"] == [0.0, 0.0, 0.0]
    assert d["measured_s"] == d["length_s"]
    assert s["allocation_rate"] == pytest.approx(0.625, rel=1e-12)
    assert np.average(d["allocated"], weights=d["length_s"]) == pytest.approx(0.625, rel=1e-12)
    assert r.to_json()["utilisation_by_day"]["allocated"] == d["allocated"]
    assert s["units"]["utilisation_by_day"].startswith("per calendar day")


def test_the_warm_up_days_are_shown_and_marked():
    # the default warm-up leaves out 20 % of 2.5 days (43,200 s): day 0 counts half in the summary's means, the
    # days' shares stay those of the whole days. Day 0 is all allocated, so the measured parts average to the
    # allocation rate over [43,200, 216,000]: (16 x 86,400 + 4 x 21,600) / (16 x 172,800) = 0.53125
    r = simulate_cluster("hgx-h100-ib-ndr", 16, jobs=_hand_jobs(), failures=False, seed=0)
    s = r.summary
    d = s["utilisation_by_day"]
    assert s["warmup_s"] == 43_200.0
    assert d["measured_s"] == [43_200.0, DAY, DAY / 2]
    assert d["allocated"] == pytest.approx([1.0, 0.5, 0.125], rel=1e-12)
    assert s["allocation_rate"] == pytest.approx(0.53125, rel=1e-12)
    assert np.average(d["allocated"], weights=d["measured_s"]) == pytest.approx(0.53125, rel=1e-12)


piece = st.tuples(st.floats(0.0, 3 * DAY), st.floats(0.0, 1.0), st.floats(0.0, 0.5))


@settings(max_examples=50, deadline=None)
@given(st.lists(piece, min_size=1, max_size=40), st.floats(0.1 * DAY, 4 * DAY))
def test_the_days_conserve_the_windows_time_mean(rows, window):
    # any piecewise constant state: the days weighted by their lengths give the integral over [0, window]
    rows = sorted(rows)
    t = np.array([r[0] for r in rows])
    keep = np.append(np.diff(t) > 0, True)  # one row per time, as the ledger keeps
    t = t[keep]
    series = {"time_s": t, "allocation": np.array([r[1] for r in rows])[keep]}
    series["down"] = np.array([r[2] for r in rows])[keep]
    d = utilisation_by_day(series, window)
    held = np.diff(np.clip(np.append(t, max(window, t[-1])), 0.0, window))
    assert sum(d["length_s"]) == pytest.approx(window, rel=1e-12)
    assert len(d["day"]) == int(np.ceil(window / DAY))
    for k, col in (("allocated", "allocation"), ("down", "down")):
        exact = float((series[col] * held).sum())
        assert float(np.dot(d[k], d["length_s"])) == pytest.approx(exact, rel=1e-9, abs=1e-6)
        assert all(-1e-12 <= v <= 1 + 1e-12 for v in d[k])


def test_a_simulated_run_with_failures_conserves_allocated_and_down_gpu_time():
    r = simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=300, seed=2, warmup=0.0)
    s = r.summary
    d = s["utilisation_by_day"]
    c = s["capacity_gpu_s"]["share"]
    assert np.average(d["allocated"], weights=d["length_s"]) == pytest.approx(s["allocation_rate"], rel=1e-9)
    assert np.average(d["down"], weights=d["length_s"]) == pytest.approx(c["down"], rel=1e-9, abs=1e-12)


def test_replications_are_averaged_day_by_day():
    # run 1 has two days, run 2 three: day 2 is run 2's alone
    a = {"day": [0, 1], "start_s": [0.0, DAY], "length_s": [DAY, 100.0], "measured_s": [DAY, 100.0]}
    a.update(allocated=[0.2, 0.4], down=[0.0, 0.1])
    b = {"day": [0, 1, 2], "start_s": [0.0, DAY, 2 * DAY], "length_s": [DAY, DAY, 50.0]}
    b.update(measured_s=[DAY, DAY, 50.0], allocated=[0.6, 0.8, 1.0], down=[0.0, 0.3, 0.5])
    m = mean_by_day([a, b])
    assert m["day"] == [0, 1, 2] and m["runs"] == [2, 2, 1]
    assert m["allocated"] == pytest.approx([0.4, 0.6, 1.0])
    assert m["down"] == pytest.approx([0.0, 0.2, 0.5])
    assert m["length_s"] == pytest.approx([DAY, (DAY + 100.0) / 2, 50.0])
    r = replicate_cluster("hgx-h100-ib-ndr", 64, 2, n_jobs=100, seed=1)
    days = [x.summary["utilisation_by_day"] for x in r.runs]
    assert r.summary["utilisation_by_day"] == mean_by_day(days)


def test_the_frames_and_figures_carry_the_summarys_numbers():
    from hnplan.cluster.compare import compare_cluster, daily_frame, delay_by_size_frame
    from hnplan.plots.cluster import daily_utilisation_figure, delay_by_size_figure

    _, _, results = compare_cluster(["hgx-h100-ib-ndr"], 16, _hand_jobs(), ["first-fit"], failures=False)
    daily = daily_frame(results)
    assert daily["allocated"].tolist() == pytest.approx([1.0, 0.5, 0.125], rel=1e-12)
    # the default warm-up (43,200 s) covers half of day 0: that bar is paler
    fig = daily_utilisation_figure(daily)
    alloc, down = fig.data
    assert list(alloc.y) == daily["allocated"].tolist() and list(down.base) == daily["allocated"].tolist()
    assert list(alloc.marker.opacity) == [0.45, 1.0, 1.0]
    by_size = delay_by_size_frame(results)
    # A waits 0 s; B and C start on arrival once A is gone: every class waited 0 s, shown at 1 s on the log axis
    assert by_size["size"].tolist() == ["1", "2-4", "9-64"] and by_size["jobs"].tolist() == [1, 1, 1]
    fig = delay_by_size_figure(by_size)
    assert [t.name for t in fig.data] == ["hgx-h100-ib-ndr"] * 3 and list(fig.data[2].y) == [1.0, 1.0, 1.0]
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis3.type == "log"
