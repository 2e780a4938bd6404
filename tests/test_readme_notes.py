"""Figures the README states about a command's output, checked against the command: a newcomer running the
README's example should see what the README says they will."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

ROOT = Path(__file__).resolve().parents[1]


def test_openb_sample_run_is_as_quiet_as_the_readme_says():
    """README, Shared-cluster operations: the typed Alibaba sample on the trace's own 6,212 GPUs reports
    about 0.1 % utilisation over a 144-day arrival window (its 3,000 pods offer 0.12 % of the GPU-time)."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "about 0.1 % utilisation over a 144-day arrival window" in readme
    assert "offer 0.12 % of that cluster's GPU-time" in readme
    trace = ROOT / "data" / "traces" / "alibaba-openb-gpuspec33-sample.csv"
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "6212", "--nodes", "openb"]
    res = CliRunner().invoke(app, [*argv, "--trace", str(trace), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["window_s"] / 86400 == pytest.approx(144.4, abs=0.1)
    assert d["offered_load"] == pytest.approx(0.0012, abs=0.00005)
    assert 0.0005 < d["utilisation"] < 0.0015  # "about 0.1 %"


def test_steady_state_example_is_what_the_command_says():
    """README, Shared-cluster operations: the default mix needs 14 days of arrivals to be in steady state,
    so on 1,152 GB200 GPUs one day is not (36.3 % at 192 %) and nine days are not either (52.9 % at 59 %).

    By hand: the mix's GPU-time-weighted run time is 65.9 h (tests/test_cluster_replicate.py derives it);
    the window must span five of them (a warm-up of one, four measured), 5 x 65.9 h = 329.6 h = 13.7 days,
    which the remedy rounds up to 14; nine days are 9 x 24 / 65.9 = 3.3 run times."""
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster.load import steady_window_days, steady_window_s
    from hnplan.cluster.synthetic import mix_run_time_weighted_s

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "needs 14 days of arrivals (5 x 65.9 h = 13.7 days, rounded up)" in readme
    assert "nine days read 52.9 % at 59 % and are not either (3.3 run times)" in readme
    run_s = mix_run_time_weighted_s(cluster_mix("default"), 1152)
    assert run_s / 3600 == pytest.approx(65.9, abs=0.05)
    assert steady_window_s(run_s) == pytest.approx(5 * run_s)
    assert 5 * run_s / 86400 == pytest.approx(13.7, abs=0.05) and steady_window_days(5 * run_s) == 14
    argv = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "1152", "--json"]
    for days, util, load in ((1, 0.363, 1.92), (9, 0.529, 0.589)):
        res = CliRunner().invoke(app, [*argv, "--days", str(days)])
        assert res.exit_code == 0, res.output
        d = json.loads(res.stdout)
        assert d["steady_state"] is False and d["steady_short"] is True
        assert d["window_s"] / d["run_time_weighted_s"] == pytest.approx(days * 24 / 65.9, abs=0.01)
        assert "simulate --days 14 " in d["steady_state_note"]
        assert d["utilisation"] == pytest.approx(util, abs=0.001)
        assert d["offered_load"] == pytest.approx(load, abs=0.01)
