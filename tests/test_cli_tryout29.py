"""Findings of a serving capacity planner's tryout of ``hnplan infer``."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()


def _infer(*args: str) -> dict:
    res = runner.invoke(app, ["infer", *args, "--json"])
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_a_given_batch_searches_the_layouts():
    """``--batch`` without ``--tp`` took the first layout that held the batch (TP 1 PP 4 for Llama 3.1 405B in FP8 on
    GB200 at batch 64: TPOT 69.8 ms) where the help says TP is searched; TP 4 on the same four GPUs runs 33.7 ms:
    the search keeps the layout with the most output tokens/s per GPU, as without --batch."""
    common = [
        "--model",
        "llama3.1-405b",
        "--system",
        "gb200-nvl72",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "1000",
    ]
    d = _infer(*common, "--dtype", "fp8", "--batch", "64")
    pinned = _infer(*common, "--dtype", "fp8", "--batch", "64", "--tp", "4")
    assert (d["tp"], d["pp"], d["gpus"]) == (4, 1, 4)
    assert d["tpot_s"] == pinned["tpot_s"] and d["tpot_s"] < 0.04


def test_a_tpot_bound_needs_the_output_length():
    """``--output-tokens`` defaults to 1 (the first token alone, a scoring request); with --tpot-slo-ms and no output
    length the plan was refused as "best TPOT reached 71.8 ms" (every iteration a whole prefill): one line asks for
    --output-tokens instead (exit 2), and with it the same plan is feasible."""
    args = ["infer", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000", "--qps", "10",
            "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--dtype", "fp8"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--tpot-slo-ms bounds the time per output token: give --output-tokens" in res.stderr
    d = json.loads(runner.invoke(app, [*args, "--output-tokens", "500", "--json"]).stdout)
    assert d["tpot_s"] <= 0.05 and d["gpus"] <= 8
