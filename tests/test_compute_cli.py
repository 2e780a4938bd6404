"""``hnplan roofline``: help, JSON keys and values, error exit codes."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.compute import operator_table, totals, training_flops_per_token

runner = CliRunner()


def test_roofline_help():
    r = runner.invoke(app, ["roofline", "--help"])
    assert r.exit_code == 0
    assert "--kv-len" in r.output and "--phase" in r.output


@pytest.mark.parametrize("phase", ["train", "prefill", "decode"])
def test_roofline_json_keys_and_totals(cat, phase):
    r = runner.invoke(
        app,
        [
            "roofline",
            "--accelerator",
            "h100-sxm",
            "--model",
            "llama3.1-8b",
            "--phase",
            phase,
            "--batch",
            "2",
            "--seq-len",
            "1024",
            "--tp",
            "2",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {"flops", "bytes", "time_s", "ops"} <= set(out)
    assert {"name", "phase", "flops", "bytes", "intensity", "time_s", "bound"} <= set(out["ops"][0])
    assert {o["bound"] for o in out["ops"]} <= {"compute", "memory"}
    # totals are the rows x their count per pass, as the library computes them
    assert out["time_s"] == pytest.approx(sum(o["time_s"] * o["count"] for o in out["ops"]), rel=1e-12)
    df = operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), phase, 2, 1024, tp=2)
    assert out["flops"] == pytest.approx(totals(df)["flops"], rel=1e-12)
    if phase == "train":
        assert {"fwd", "bwd-data", "bwd-weight", "bwd"} <= {o["phase"] for o in out["ops"]}
        # MFU: PaLM model FLOPs of the GPU's share of 2 x 1024 tokens over the pass time and the dense peak
        model_flops = training_flops_per_token(cat.model("llama3.1-8b"), 1024).model * 2 * 1024 / 2
        assert out["model_flops"] == pytest.approx(model_flops, rel=1e-12)
        assert out["mfu"] == pytest.approx(model_flops / out["time_s"] / 989.4e12, rel=1e-12)
        assert out["hfu"] == out["mfu"]  # no recomputation


def test_roofline_bad_input_exits_2():
    r = runner.invoke(
        app,
        [
            "roofline",
            "--accelerator",
            "a100-sxm-80gb",
            "--model",
            "llama3.1-8b",
            "--phase",
            "train",
            "--batch",
            "1",
            "--seq-len",
            "1024",
            "--dtype",
            "fp8",
            "--json",
        ],
    )
    assert r.exit_code == 2
    assert "no fp8 peak" in r.output


def test_roofline_takes_the_2021_attention_and_sequence_parallel_choices(cat):
    base = [
        "roofline",
        "--accelerator",
        "a100-sxm-80gb",
        "--model",
        "megatron-22b",
        "--phase",
        "train",
        "--batch",
        "4",
        "--seq-len",
        "2048",
        "--tp",
        "8",
        "--json",
    ]
    new = json.loads(runner.invoke(app, base).stdout)
    old = json.loads(runner.invoke(app, base + ["--attention", "unfused", "--no-sequence-parallel"]).stdout)
    assert (new["attention"], new["sequence_parallel"]) == ("flash", True)
    assert (old["attention"], old["sequence_parallel"]) == ("unfused", False)
    df = operator_table(
        cat.model("megatron-22b"),
        cat.accelerator("a100-sxm-80gb"),
        "train",
        4,
        2048,
        tp=8,
        attention="unfused",
        sequence_parallel=False,
    )
    assert old["bytes"] == pytest.approx(totals(df)["bytes"], rel=1e-12)
    assert old["time_s"] > new["time_s"]
    # the model FLOPs (MFU numerator) do not depend on the kernel choice
    assert old["model_flops"] == pytest.approx(new["model_flops"], rel=1e-12)


def test_roofline_table_says_its_rows_are_one_call(cat):
    """A row's FLOPs, bytes and time are one call's and the total line is the pass's (rows x count): in
    Llama 3.1 8B decode the 32 layers' qkv_proj show one layer's 2 x 4 x 4096 x 6144 / 2 = 0.101 GFLOP
    (batch 4, TP 2: 4096 -> (32 + 2 x 8) x 128 = 6144 outputs, half per rank) with count 32."""
    args = ["roofline", "--accelerator", "h100-sxm", "--model", "llama3.1-8b", "--phase", "decode"]
    args += ["--batch", "4", "--seq-len", "1", "--kv-len", "1024", "--tp", "2"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "GFLOP each" in text and "MB each" in text and "time each [us]" in text
    row = next(line for line in r.output.splitlines() if "qkv_proj" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[2] == "32" and float(cells[3]) == pytest.approx(2 * 4 * 4096 * 6144 / 2 / 1e9, abs=1e-3)
