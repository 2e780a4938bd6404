"""Dtype names are case-insensitive on the command line: ``--dtype FP8`` is ``--dtype fp8`` (and ``--kv-dtype``),
for every command that takes them; an unknown dtype is still one line, exit 2."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cli._options import dtype_name

runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_dtype_name_lowers_and_strips():
    assert [dtype_name(v) for v in ("FP8", "Bf16", " fp4 ", "INT8")] == ["fp8", "bf16", "fp4", "int8"]
    assert dtype_name(None) is None


@pytest.mark.parametrize(
    "args",
    [
        # one 8192 x 8192 x 8192 GEMM on an H100 in fp8: the GEMM law at the fp8 peak (1,978.9 TFLOP/s dense)
        ["gemm", "--accelerator", "h100-sxm", "--shape", "8192x8192x8192", "--dtype", "{}"],
        ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
        + ["--global-batch-tokens", "1048576", "--dtype", "{}"],
        [
            "infer",
            "--model",
            "llama3.1-8b",
            "--system",
            "hgx-h100-ib-ndr",
            "--tp",
            "1",
            "--input-tokens",
            "1024",
            "--dtype",
            "{}",
        ]
        + ["--kv-dtype", "{}"],
    ],
    ids=["gemm", "train", "infer"],
)
def test_upper_case_dtype_plans_as_lower_case(args):
    upper = _json([a.format("FP8") for a in args])
    lower = _json([a.format("fp8") for a in args])
    assert upper == lower
    assert "fp8" in json.dumps(lower) and "FP8" not in json.dumps(upper)


def test_unknown_dtype_is_still_one_line_exit_2():
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shape", "64x64x64", "--dtype", "FP9"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "fp9" in res.output.lower() and len(res.output.strip().splitlines()) == 1
