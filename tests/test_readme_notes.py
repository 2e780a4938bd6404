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
