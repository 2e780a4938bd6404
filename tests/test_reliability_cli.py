"""`hnplan reliability`: --help smoke test, JSON keys and values equal to the library's."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.planning.design import estimate_reliability

runner = CliRunner()
KEYS = {
    "mtbi_h",
    "failure_unit_gpus",
    "checkpoint_bytes",
    "checkpoint_write_s",
    "checkpoint_interval_s",
    "restart_s",
    "goodput",
}


def test_reliability_help():
    r = runner.invoke(app, ["reliability", "--help"])
    assert r.exit_code == 0 and "--model" in r.output and "--mode" in r.output


def test_reliability_json_keys_and_values(cat):
    r = runner.invoke(
        app,
        [
            "reliability",
            "--system",
            "gb200-nvl72",
            "--gpus",
            "4608",
            "--model",
            "llama3.1-70b",
            "--mode",
            "sync",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert KEYS <= set(d)
    ref = estimate_reliability("gb200-nvl72", 4608, "llama3.1-70b", "sync", cat)
    assert d["goodput"] == pytest.approx(ref.goodput)
    assert d["failure_unit_gpus"] == 72
    assert 0 < d["goodput"] < 1


def test_reliability_bad_mode_exits_2():
    r = runner.invoke(
        app, ["reliability", "--system", "gb200-nvl72", "--gpus", "72", "--model", "llama3.1-8b", "--mode", "lazy"]
    )
    assert r.exit_code == 2
