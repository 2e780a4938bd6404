"""A dense model's expert tensor parallelism is its TP in every answer, and `--etp` says the same."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

runner = CliRunner()
TRAIN = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
TRAIN += ["--global-batch-size", "8", "--tp", "8", "--pp", "1", "--dp", "1", "--json"]
MEMORY = ["memory", "--model", "llama3.1-8b", "--mode", "train", "--tp", "8", "--pp", "1", "--dp", "1"]
MEMORY += ["--seq-len", "8192", "--json"]


def test_a_dense_plan_reports_etp_as_its_tp_and_takes_it_back():
    """Llama 3.1 8B at TP 8: `train` and `memory` report etp 8 (= tp, as compare and the sweep dataset do for a
    dense model), and `--etp 8` beside `--tp 8` is the same plan, not an error."""
    for argv in (TRAIN, MEMORY):
        bare = runner.invoke(app, argv)
        assert bare.exit_code == 0, bare.output
        p = json.loads(bare.stdout)["parallel"]
        assert (p["tp"], p["ep"], p["etp"]) == (8, 1, 8)
        again = runner.invoke(app, [*argv, "--etp", "8"])
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout) == json.loads(bare.stdout)


def test_a_dense_model_refuses_an_etp_other_than_its_tp():
    for argv, cmd in ((TRAIN, "train"), (MEMORY, "memory")):
        res = runner.invoke(app, [*argv, "--etp", "1"])
        assert res.exit_code == 2, (cmd, res.output)
        assert one_line(res.stderr).endswith(
            "--etp 1: llama3.1-8b is a dense model, with no experts to split: its etp is its tp (8); drop --etp"
        )
