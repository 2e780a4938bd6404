"""What a new user's trial of the README's tour found: each a CLI run asserting the exit code and the one-line
message, or the figure a document quotes."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hnplan.cli import app

ROOT = Path(__file__).resolve().parents[1]

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

_COLLECTIVE = ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "16"]


def test_collective_size_in_fractional_bytes_is_refused_not_rounded():
    """``collective --size 1.5B`` timed a 2-byte all-reduce (1.5 bytes rounded), where a count's ``1.5B`` is
    1.5 billion (``--tokens 1.5B``): a user who meant 1.5e9 bytes got a latency-bound row and no warning. A
    size in bytes is a whole number of them; 1.5GB is the billion, and 8 (no unit) and 1.5KiB (1,536 B) stand."""
    res = runner.invoke(app, [*_COLLECTIVE, "--size", "1.5B"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: --size: size '1.5B' is 1.5 bytes, not a whole number of bytes (B is a byte here, not a billion: "
        "write 1.5GB for 1.5 billion bytes)"
    )
    res = runner.invoke(app, [*_COLLECTIVE, "--sweep", "0.5B:8B"])
    assert res.exit_code == 2 and "'0.5B' is 0.5 bytes" in res.stderr
    for typed, size_bytes in (("8", 8), ("1.5KiB", 1536), ("1.5GB", 1_500_000_000)):
        res = runner.invoke(app, [*_COLLECTIVE, "--size", typed, "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["results"][0]["size_bytes"] == size_bytes


def test_nan_for_a_bounded_float_option_is_said_to_be_no_finite_number():
    """``tco --pue nan`` said "Input should be greater than or equal to 1; got 'nan'", as though NaN were below 1
    (it fails every comparison); ``--pue inf`` already said "must be a finite number". A NaN for a bounded float
    option now says that too; a value below the bound and a NaN for an integer option keep their own message."""
    tco = ["tco", "--system", "gb200-nvl72", "--gpus", "9216"]
    res = runner.invoke(app, [*tco, "--pue", "nan"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: hnplan tco: Invalid value for '--pue': must be a finite number; got 'nan'; see 'hnplan tco --help'"
    )
    res = runner.invoke(app, [*tco, "--years", "NaN"])
    assert res.exit_code == 2 and "'--years': must be a finite number; got 'NaN'" in res.stderr
    res = runner.invoke(app, [*tco, "--pue", "0.5"])
    assert res.exit_code == 2 and "'--pue': Input should be greater than or equal to 1; got '0.5'" in res.stderr
    res = runner.invoke(app, ["tco", "--system", "gb200-nvl72", "--gpus", "nan"])
    assert res.exit_code == 2 and "'--gpus': Input should be a valid integer" in res.stderr


def test_a_file_of_another_kind_is_named_with_its_article(tmp_path):
    """An accelerator file given as ``--model`` was "is a Accelerator entry"; a model file given as
    ``--accelerator`` "not a Accelerator": the article now follows the kind's name."""
    gpu = tmp_path / "my-gpu.yaml"
    gpu.write_text((ROOT / "data" / "accelerators" / "h100-sxm.yaml").read_text())
    res = runner.invoke(app, ["train", "--model", str(gpu), "--system", "hgx-h100-ib-ndr", "--gpus", "8"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        f"error: --model: {gpu}: entry 'h100-sxm' is an Accelerator entry (data/accelerators/: its keys vendor, "
        "dense_tflops, hbm_gb, hbm_bw_TBps, ... are Accelerator fields), not a Model"
    )
    model = ROOT / "data" / "models" / "llama3.1-8b.yaml"
    res = runner.invoke(app, ["gemm", "--accelerator", str(model), "--shape", "1x1x1"])
    assert res.exit_code == 2 and res.stderr.strip().endswith("are Model fields), not an Accelerator")


def test_cluster_serve_rate_nan_or_inf_is_refused_not_a_traceback():
    """``cluster simulate --serve llama3.1-8b:nan`` ended in a traceback (``cannot convert float NaN to integer``
    in the replica sizing) and ``:inf`` in an OverflowError: a rate is now refused unless finite and positive,
    and ``:10`` with no model says the model is missing (it said "QPS > 0" of a rate of 10)."""
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "50", "--serve"]
    for rate in ("nan", "inf", "0"):
        res = runner.invoke(app, [*argv, f"llama3.1-8b:{rate}"])
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert res.stderr.strip() == (
            f"error: --serve takes MODEL:QPS with QPS a finite number > 0; got 'llama3.1-8b:{rate}'"
        )
    res = runner.invoke(app, [*argv, ":10"])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --serve takes MODEL:QPS, a model id before the colon; got ':10'"
