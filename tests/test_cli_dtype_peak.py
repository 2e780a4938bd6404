"""A training dtype the chip has no tensor-core peak for, and counts in the divisibility messages.

NVFP4 needs Blackwell's FP4 tensor cores (NVIDIA Blackwell architecture technical brief: FP4 is new with
Blackwell; the H100 datasheet lists FP8 as its narrowest dense format), FP8 needs Hopper (the A100 datasheet
lists none). ``train``, ``size`` and ``memory --system`` refuse such a dtype in one line that names the flag typed,
the accelerator and its system and the dtypes it has, exit 2, as ``infer`` does (``memory`` accepted fp4 on an
H100 for a serving replica while ``gemm`` and ``roofline`` refused it; int8 / int4 weights stay a storage format there).
"""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

runner = CliRunner()

TRAIN_H100 = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
H100_FP4 = (
    "--dtype fp4 is not available: accelerator 'h100-sxm' of system 'hgx-h100-ib-ndr' has no fp4 peak "
    "(dense_tflops lists fp32, tf32, bf16, fp16, fp8); choose one of those"
)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (TRAIN_H100 + ["--global-batch-tokens", "1Mi", "--dtype", "fp4"], H100_FP4),
        (
            ["size", "--model", "llama3.1-405b", "--tokens", "15T", "--deadline-days", "60"]
            + ["--system", "hgx-h100-ib-ndr", "--dtype", "fp4"],
            H100_FP4,
        ),
        (
            ["size", "--model", "llama3.1-8b", "--tokens", "1T", "--gpus", "64"]
            + ["--system", "hgx-h100-ib-ndr", "--dtype", "fp4"],
            H100_FP4,
        ),
        (
            ["memory", "--model", "llama3.1-8b", "--mode", "inference", "--seq-len", "4096"]
            + ["--system", "hgx-h100-ib-ndr", "--dtype", "fp4"],
            H100_FP4,
        ),
        (
            ["memory", "--model", "llama3.1-8b", "--seq-len", "4096", "--system", "hgx-h100-ib-ndr", "--dtype", "fp4"],
            H100_FP4,
        ),
        (
            ["train", "--model", "llama3.1-8b", "--system", "dgx-a100-hdr", "--gpus", "8", "--seq-len", "8192"]
            + ["--global-batch-tokens", "1Mi", "--dtype", "fp8"],
            "--dtype fp8 is not available: accelerator 'a100-sxm-80gb' of system 'dgx-a100-hdr' has no fp8 peak "
            "(dense_tflops lists fp32, tf32, bf16, fp16)",
        ),
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_dtype_without_a_peak_names_the_flag_and_the_system(argv, needle, json_):
    res = runner.invoke(app, argv + (["--json"] if json_ else []))
    out = res.stdout + res.stderr
    assert res.exit_code == 2 and "Traceback" not in out, out
    assert needle in one_line(res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1
    if json_:
        err = json.loads(res.stdout)["error"]
        assert err["kind"] == "input" and needle in err["message"]


def test_memory_keeps_integer_weights_and_fp4_where_the_chip_has_it():
    # int4 weights on an H100 are a storage format (weight-only quantisation): counted, not refused;
    # fp4 on a GB200 has its peak; without --system there is no chip to ask
    base = ["memory", "--model", "llama3.1-8b", "--mode", "inference", "--seq-len", "4096", "--json"]
    for extra in (
        ["--system", "hgx-h100-ib-ndr", "--dtype", "int4"],
        ["--system", "gb200-nvl72", "--dtype", "fp4"],
        ["--dtype", "fp4"],
    ):
        res = runner.invoke(app, base + extra)
        assert res.exit_code == 0, res.stdout + res.stderr
        assert json.loads(res.stdout)["params_gib"] > 0


def test_divisibility_message_writes_the_batch_with_separators():
    # 100 GPUs of a 72-GPU rack, batch 16Mi tokens / 8,192 = 2,048 sequences: 100 = 4 x 25 and 2,048 has no
    # factor 5, so no layout divides (exit 3); the batch is written as every other count is
    res = runner.invoke(
        app,
        ["train", "--model", "llama3.1-405b", "--system", "gb300-nvl72", "--gpus", "100", "--seq-len", "8192"]
        + ["--global-batch-tokens", "16Mi"],
    )
    text = one_line(res.stderr)
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert "dp x micro-batch dividing the batch of 2,048 sequences" in text
    assert "such as 2,100 sequences, 21 per GPU" in text  # 2,048 rounded up to a multiple of 100: 21 x 100


def test_divisibility_hint_writes_the_gpu_count_with_separators():
    # 1,200 GPUs = 16 x 75 and a batch of 8Mi / 8,192 = 1,024 sequences: the next multiple of 1,200 is 1,200
    res = runner.invoke(
        app,
        ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "1200", "--seq-len", "8192"]
        + ["--global-batch-tokens", "8Mi"],
    )
    text = one_line(res.stderr)
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert "the batch of 1,024 sequences" in text
    assert "on 1,200 x hgx-h100-ib-ndr" in text
    assert "a batch with the factor 75, such as 1,200 sequences, one per GPU" in text
