"""compare says on stderr which of --systems, --seq-len and --global-batch-tokens it took from the default scenario,
as train says its defaults; stdout stays one JSON object."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()
ARGS = ["compare", "--model", "llama3.1-8b", "--gpus", "64", "--tokens", "1T", "--json"]


def test_defaults_taken_from_the_scenario_are_said_on_stderr():
    r = runner.invoke(app, [*ARGS, "--systems", "gb300-nvl72"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["seq_len"] == 8192
    assert r.stderr.startswith("defaults: --seq-len 8,192, --global-batch-tokens 16,777,216 (the default scenario")
    mine = runner.invoke(app, [*ARGS, "--systems", "gb300-nvl72", "--seq-len", "4096", "--global-batch-tokens", "4Mi"])
    assert mine.exit_code == 0 and mine.stderr == ""
    scenario = runner.invoke(app, [*ARGS, "--seq-len", "4096", "--global-batch-tokens", "4Mi"])
    assert scenario.stderr.startswith("defaults: --systems gb200-nvl72,hgx-b200-ib-xdr,hgx-h100-ib-ndr (")
