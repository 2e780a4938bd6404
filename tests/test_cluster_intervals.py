"""95 % intervals of bounded cluster figures are not clipped to their range: where the Student-t interval
of a few replications leaves it (a utilisation below 0, a queueing delay below 0 s), the interval on the
logit (log) scale is used (Law, Simulation Modeling and Analysis, 5th ed. 2015, Sec. 9.4)."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cluster import claims as cluster_claims
from hnplan.cluster.replicate import ci_range, mean_ci, replication_seeds, spread_text

runner = CliRunner()


def test_audit_interval_of_a_small_utilisation_is_the_logit_one_not_clipped(monkeypatch):
    # three streams with utilisation 0.1 %, 0.2 %, 0.8 %: mean 0.367 %, s 0.379 %, t(2, 0.975) = 4.303, so the
    # plain interval is -0.57 % to 1.31 % (it was clipped to 0 %); logits -6.907, -6.213, -4.820: mean -5.980,
    # s 1.0625, half-width 2.640, expit(-8.620) = 0.018 % to expit(-3.340) = 3.42 %
    seeds = replication_seeds(0, 3)
    util = dict(zip(seeds, (0.001, 0.002, 0.008), strict=True))
    conc = dict(zip(seeds, (1.0, 2.0, 30.0), strict=True))

    def fake_runs(args, workers, cache=None):
        row = dict(gpus=64, allocation_rate=0.5, offered_load_window=0.5, fragmentation=0.0, rejected_jobs=0)
        return [dict(row, utilisation=util[a[7]], concurrent_jobs=conc[a[7]]) for a in args]

    monkeypatch.setattr(cluster_claims, "_runs", fake_runs)
    pts = cluster_claims.audit_points(
        "concurrent-512-jobs-92", "hgx-h100-ib-ndr", "gb200-nvl72", loads=(0.5,), replications=3
    )[0]
    r = pts.iloc[0]
    assert round(r["utilisation_low"], 5) == 0.00018 and round(r["utilisation_high"], 4) == 0.0342
    # jobs 1, 2, 30: plain 11 +- 4.303 x 16.46 / sqrt(3) = 11 +- 40.9 goes below 0; logs 0, 0.693, 3.401: mean
    # 1.365, s 1.797, half-width 4.464: exp(-3.099) = 0.045 to exp(5.829) = 340
    assert round(r["concurrent_jobs_low"], 3) == 0.045 and round(r["concurrent_jobs_high"]) == 340
    assert r["verdict_ci"] == "fails"  # the whole interval is below 92 %


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-6, 1 - 1e-6), min_size=2, max_size=8))
def test_a_share_interval_stays_in_0_1_when_runs_are_inside(xs):
    lo, hi = ci_range(mean_ci(xs, bounds=(0.0, 1.0)), (0.0, 1.0))
    assert 0.0 <= lo <= hi <= 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1e6), min_size=2, max_size=8))
def test_a_delay_cell_never_reads_as_a_negative_delay(xs):
    c = mean_ci(xs, bounds=(0.0, None))
    text = spread_text(c)
    if text.startswith(" ± "):  # mean - h >= 0 (within rounding of the cell)
        assert c["low"] >= -1e-9 * max(1.0, c["mean"])
    elif " to " in text:
        assert 0.0 <= ci_range(c, (0.0, None))[0]
    else:
        assert text.endswith("crosses 0)") and min(xs) == 0.0


def test_queueing_table_of_replications_implies_no_negative_delay():
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "200", "--seed", "1"]
    res = runner.invoke(app, [*argv, "--replications", "3"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    cells = re.findall(r"([\d,]+) ± ([\d,]+)", res.output.split("queueing delay")[1])
    assert cells and all(int(m.replace(",", "")) >= int(h.replace(",", "")) for m, h in cells)
    assert "crosses 0" in res.output  # this run's p95s: one run at 0 s, Student-t half-width above the mean


def test_a_log_scale_interval_too_wide_for_a_float_reads_inf_not_an_error():
    # runs 1 s and 1e-300 s: logs 0 and -690.8, s 488.5, t(1, 0.975) = 12.71, half-width 4,390 on the log scale:
    # exp(-690.8 / 2 + 4,390) overflows a float (it raised OverflowError)
    c = mean_ci([1.0, 1e-300], bounds=(0.0, None))
    assert c["bounded_high"] == float("inf") and 0.0 <= c["bounded_low"] < 1e-300


def test_a_run_within_rounding_of_a_bound_is_on_it():
    # three runs' goodput on 144 H100 (1,500 jobs of the default mix, seeds spawned from 0): the second lost no
    # work, but its ratio of sums rounds to 1 - 6e-16, whose logit (35.1) stretched the logit interval to
    # 0.0% to 100.0%. On the bound, there is no bounded interval; the plain one, mean 0.99255 +- 4.303 x
    # s 0.010376 / sqrt(3) = +- 0.02578, is given with the bound it crosses
    from hnplan.cluster.replicate import ci_text

    c = mean_ci([0.9807006001396447, 0.9999999999999994, 0.9969561087131262], bounds=(0.0, 1.0))
    assert c["bounded_low"] is None and c["bounded_high"] is None
    assert round(c["half_width"], 5) == 0.02578
    assert ci_text(c) == "95 % CI 96.7% to 101.8%, crossing 100%: 3 replications are too few for this spread"
    # a slowdown of 1 + 2e-16 (a job that never waited) is on the bound 1 of the log scale alike
    assert mean_ci([1.0000000000000002, 1.5, 2.0], bounds=(1.0, None))["bounded_low"] is None
    # one well inside keeps its logit interval
    assert mean_ci([0.98, 0.99, 0.995], bounds=(0.0, 1.0))["bounded_high"] < 1.0
