"""Independent replications of the cluster simulation (mean and 95 % Student-t interval over seeds
spawned by numpy's SeedSequence), the offered load a mix's generator realises, and the steady-state
advice taken from the mix's expectations (a fixed point: following it does not ask for more)."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from typer.testing import CliRunner

from hnplan.catalog.mixes import cluster_mix
from hnplan.cli import app
from hnplan.cluster import mean_ci, replicate_cluster, simulate_cluster
from hnplan.cluster.load import offered_load_of, steady_text
from hnplan.cluster.replicate import replication_seeds
from hnplan.cluster.synthetic import _moment, mean_gpu_seconds, mix_run_time_weighted_s, synthetic_jobs
from hnplan.errors import InputError

SYSTEM = "hgx-h100-ib-ndr"  # 8-GPU servers
KW = dict(policy="first-fit", failures=False, preemption=False, warmup=0.0)


def _jobs(rows) -> pd.DataFrame:
    arrival, gpus, dur = (np.array(c, float) for c in zip(*rows, strict=True))
    return pd.DataFrame(
        {
            "arrival_s": arrival,
            "gpus": gpus.astype(int),
            "gpu_milli": 1000,
            "duration_s": dur,
            "cls": "development",
            "checkpoint_s": math.inf,
            "tp": 1,
        }
    )


def test_the_interval_is_students_t():
    # s = 0.1, t_{2, 0.975} = 4.3027: half-width 0.1 x 4.3027 / sqrt(3) = 0.24841
    d = mean_ci([0.40, 0.50, 0.60])
    assert d["mean"] == pytest.approx(0.5)
    assert d["half_width"] == pytest.approx(0.1 * 4.302653 / math.sqrt(3), rel=1e-6)
    assert (d["low"], d["high"], d["n"]) == (pytest.approx(0.25159, abs=1e-5), pytest.approx(0.74841, abs=1e-5), 3)
    assert mean_ci([0.3])["low"] is None and mean_ci([0.3, 0.3])["half_width"] == 0.0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_the_interval_holds_the_mean_and_covers_the_samples_spread(x):
    d = mean_ci(x)
    assert d["low"] <= d["mean"] <= d["high"]
    assert d["half_width"] == pytest.approx(
        stats.t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / math.sqrt(len(x)), abs=1e-12
    )


def test_seeds_are_spawned_and_one_replication_is_the_plain_run():
    assert replication_seeds(5, 1) == [5]
    s = replication_seeds(0, 8)
    assert len(set(s)) == 8 and replication_seeds(0, 3) == s[:3]  # spawn's children do not depend on R
    assert s[0] == int(np.random.SeedSequence(0).spawn(1)[0].generate_state(1)[0])
    with pytest.raises(InputError, match="replications must be 1 to"):
        replicate_cluster(SYSTEM, 8, 0, jobs=_jobs([(0.0, 1, 1.0)]))


def test_replications_of_a_given_table_without_failures_are_refused():
    # a job table (or a trace) with failures off leaves the seed nothing to draw: R identical runs and an
    # interval of zero width that reads as certainty; one run is the plain run
    rows = [(0.0, 4, 1000.0), (5.0, 8, 500.0), (47.0, 2, 100.0)]
    with pytest.raises(InputError, match=r"^replications draw .* with jobs given and failures=False .* the 2 runs"):
        replicate_cluster(SYSTEM, 8, 2, jobs=_jobs(rows), seed=3, **KW)
    trace = "data/traces/alibaba-openb-gpu-sample.csv"
    with pytest.raises(InputError, match="with trace given and failures=False"):
        replicate_cluster(SYSTEM, 64, 3, trace=trace, failures=False)
    assert len(replicate_cluster(SYSTEM, 8, 1, jobs=_jobs(rows), seed=3, **KW).runs) == 1
    # the CLI refuses the same (--trace with --no-failures and --replications)
    res = CliRunner().invoke(
        app,
        ["cluster", "simulate", "--system", SYSTEM, "--gpus", "64", "--trace", trace, "--no-failures"]
        + ["--replications", "3"],
    )
    assert res.exit_code == 2 and "--replications draws the runs' failures" in res.output


def test_a_hand_built_timeline_replicates_exactly():
    # one 8-GPU server: j0 holds 4 GPUs from 0; j1 (8 GPUs, t = 5) waits for it until 1,000 s; j2 (2 GPUs,
    # t = 47) backfills at once. Window = last arrival = 47 s, no warm-up cut: utilisation = 4 GPUs x 47 s /
    # (8 x 47) = 0.5 in every replication. Failures are on (replications of a given table draw only them), and
    # none of these four seeds draws one on 8 GPUs in 1,500 s (some 5e-9 interruptions per GPU-second, Llama 3
    # Table 5: 2.6e-4 expected over the four runs), so the interval has no width
    rows = [(0.0, 4, 1000.0), (5.0, 8, 500.0), (47.0, 2, 100.0)]
    r = replicate_cluster(SYSTEM, 8, 4, jobs=_jobs(rows), seed=3, **{**KW, "failures": True})
    assert sum(run.summary["hardware_failures"] + run.summary["interruptions"] for run in r.runs) == 0
    assert r.seeds == tuple(replication_seeds(3, 4)) and len(r.runs) == 4
    assert r.summary["utilisation"] == pytest.approx(0.5)
    assert r.ci95["utilisation"].pop("bounds") == [0.0, 1.0]  # the range the bounded interval is taken in
    assert r.ci95["utilisation"] == pytest.approx(
        {"mean": 0.5, "low": 0.5, "high": 0.5, "half_width": 0.0, "n": 4, "bounded_low": None, "bounded_high": None}
    )  # no spread: no interval on the logit scale either
    assert r.ci95["queue_delay_s.development.p99"]["half_width"] == 0.0
    assert [run.jobs["queue_delay_s"].tolist() for run in r.runs] == [[0.0, 995.0, 0.0]] * 4
    j = r.to_json()
    assert j["replications"] == 4 and j["ci95"]["utilisation"]["n"] == 4 and len(j["runs"]) == 4


def test_the_interval_shrinks_with_the_replications():
    """Half-width ~ t_{R-1} s / sqrt(R): 12 replications of a 2-day mix run give a narrower interval on
    utilisation and offered load than 3 (seeds 0..11 spawned; the first 3 are the 3-run's)."""
    few = replicate_cluster(SYSTEM, 64, 3, days=2, seed=0)
    many = replicate_cluster(SYSTEM, 64, 12, days=2, seed=0)
    for key in ("utilisation", "offered_load", "allocation_rate"):
        assert many.ci95[key]["half_width"] < 0.5 * few.ci95[key]["half_width"], key
    assert [r.summary["utilisation"] for r in many.runs[:3]] == [r.summary["utilisation"] for r in few.runs]


def test_workers_do_not_change_the_answer():
    one = replicate_cluster(SYSTEM, 64, 3, n_jobs=150, seed=2)
    two = replicate_cluster(SYSTEM, 64, 3, n_jobs=150, seed=2, workers=2)
    assert one.ci95 == two.ci95 and one.seeds == two.seeds
    with pytest.raises(InputError, match="workers"):
        replicate_cluster(SYSTEM, 64, 2, n_jobs=10, workers=0)


def test_cli_reports_the_mean_and_interval():
    res = CliRunner().invoke(
        app,
        [
            *("cluster", "simulate", "--system", SYSTEM, "--gpus", "64", "--jobs", "200"),
            *("--replications", "3", "--workers", "2", "--json"),
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    c = d["ci95"]["utilisation"]
    assert d["replications"] == 3 and c["n"] == 3 and c["low"] <= d["utilisation"] <= c["high"]
    assert d["utilisation"] == pytest.approx(np.mean([r["utilisation"] for r in d["runs"]]))
    res = CliRunner().invoke(app, ["cluster", "simulate", "--system", SYSTEM, "--gpus", "64", "--jobs", "200"])
    assert res.exit_code == 0 and "95 % CI" not in res.output  # one run: no interval
    res = CliRunner().invoke(
        app, ["cluster", "simulate", "--system", SYSTEM, "--gpus", "64", "--jobs", "200", "--replications", "3"]
    )
    assert res.exit_code == 0 and "95 % CI" in res.output and "3 independent runs" in res.output


# -- offered load and the steady-state advice ------------------------------------------------------
def test_the_generator_offers_the_mix_load_in_expectation():
    """With --days the job count is Poisson with mean load x G x T / E[GPU s per job], so the realised
    offered load is unbiased; its spread is the heavy tail's (a few long 1,024-GPU training jobs)."""
    mix = cluster_mix("default")
    x = np.array([offered_load_of(synthetic_jobs(mix, 64, days=1, seed=s), 64, 86400.0) for s in range(300)])
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert abs(x.mean() - 0.85) < 4 * se, (x.mean(), se)
    assert np.median(x) < 0.85  # right-skewed: most runs offer less than the mean, a few far more


def test_the_mix_run_time_is_the_expectation_of_the_weighted_run_time():
    # one log-normal class cut at c: E[min(X, c)^2] by quadrature against the closed form
    mix = cluster_mix("default")
    tr = next(c for c in mix.classes if c.cls == "training")
    d = tr.duration_s
    pdf = stats.lognorm(d.sigma, scale=math.exp(d.mu)).pdf
    quad = integrate.quad(lambda t: t * t * pdf(t), 0, d.max, limit=200)[0] + d.max**2 * stats.lognorm(
        d.sigma, scale=math.exp(d.mu)
    ).sf(d.max)
    assert _moment(d, 2) == pytest.approx(quad, rel=1e-6)
    # E[g d^2] / E[g d] over the classes: 65.9 h on 1,152 GPUs, above every short draw's 32-43 h
    run_s = mix_run_time_weighted_s(mix, 1152)
    num = sum(
        c.share.value * _moment(c.duration_s, 2) * (mean_gpu_seconds(_one(mix, c), 1152) / _moment(c.duration_s, 1))
        for c in mix.classes
    )
    assert run_s == pytest.approx(num / mean_gpu_seconds(mix, 1152))
    assert run_s / 3600 == pytest.approx(65.9, abs=0.05)


def _one(mix, c):
    """The mix with only class ``c`` (share 1)."""
    return mix.model_copy(
        update={"classes": [c.model_copy(update={"share": c.share.model_copy(update={"value": 1.0})})]}
    )


def test_following_the_steady_state_advice_does_not_ask_for_more():
    """The advice comes from the mix (5 x its GPU-time-weighted run time, days rounded up), not the draw:
    every seed gives the same, and the run that follows it is in steady state."""
    notes = [simulate_cluster(SYSTEM, 64, days=1, seed=s).summary for s in (0, 1)]
    advice = {re.search(r"--days ([\d.]+)", n["steady_state_note"]).group(1) for n in notes}
    assert len(advice) == 1 and not notes[0]["steady_state"]
    days = float(advice.pop())
    assert (
        days * 86400 >= 5 * mix_run_time_weighted_s(cluster_mix("default"), 64) > (days - 1) * 86400
    )  # 13.3 days, up to 14
    s = simulate_cluster(SYSTEM, 64, days=days, seed=2).summary  # this draw offers 68 %
    assert s["steady_state"] and s["steady_state_note"].startswith("yes") and "--days" not in s["steady_state_note"]
    assert s["run_time_weighted_basis"] == "mix" and s["run_time_weighted_drawn_s"] != s["run_time_weighted_s"]
    # the window is long enough for every seed, but seed 0 draws large jobs worth 146 % of the 64 GPUs
    # (the mix aims at 85 %): its queue grows over the window, so it is no steady state either
    heavy = simulate_cluster(SYSTEM, 64, days=days, seed=0).summary
    assert not heavy["steady_short"] and heavy["offered_load"] > 1 and not heavy["steady_state"]
    assert "this draw 146%" in heavy["steady_state_note"] and "--replications" in heavy["steady_state_note"]


def test_a_trace_keeps_its_own_run_time_and_rounding_goes_up():
    s = {
        "steady_state": False,
        "steady_short": True,
        "window_s": 86400.0,
        "offered_load": 0.5,
        "run_time_weighted_s": 149_000.0,
        "steady_window_s": 745_000.0,  # 8.62 days: the advice says 8.7, not 8.6
        "steady_jobs": 19000,
    }
    assert "--days 8.7 " in steady_text(s)


def test_the_simulated_cost_utilisation_is_a_mean_over_replications():
    """``tco --utilisation simulated`` prices the mean of REPLICATIONS (3) runs on the spawned seeds:
    each one the plain single run of its seed, the mean their arithmetic mean, the interval Student-t
    (t_{2, 0.975} = 4.303 x s / sqrt(3)); the source sentence states it."""
    from hnplan.cluster.utilisation import REPLICATIONS, simulated_utilisation

    sim = simulated_utilisation("hgx-h100-ib-ndr", 64, jobs=300)
    seeds = replication_seeds(0, REPLICATIONS)
    assert REPLICATIONS == 3 and sim["seeds"] == seeds
    each = [
        simulated_utilisation("hgx-h100-ib-ndr", 64, jobs=300, seed=k, replications=1)["utilisation"] for k in seeds
    ]
    assert sim["utilisation"] == pytest.approx(sum(each) / 3)
    hw = 4.303 * float(np.std(each, ddof=1)) / math.sqrt(3)
    ci = sim["utilisation_ci95"]
    assert ci["n"] == 3 and ci["half_width"] == pytest.approx(hw, rel=1e-3)
    assert (
        f"mean of 3 replications (seeds spawned from 0), 95 % CI {ci['low']:.1%} to {ci['high']:.1%}" in sim["source"]
    )
    with pytest.raises(InputError, match="replications"):
        simulated_utilisation("hgx-h100-ib-ndr", 64, jobs=300, replications=0)
