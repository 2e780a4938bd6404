"""What a new user's trial of the README's workflows found: each a CLI run asserting the exit code and the
one-line message, or the figure a document quotes."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.cli import app

ROOT = Path(__file__).resolve().parents[1]

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_sweep_spec_unknown_input_is_named_once_with_its_nearest(tmp_path):
    """A spec with ``pu`` for ``pue`` under axes was refused as ``unknown input pu: pu (did you mean pue?)``,
    the name said twice; now once, with the nearest allowed input beside it."""
    spec = {
        "id": "typo",
        "name": "typo",
        "sampling": "grid",
        "samples": 1,
        "fixed": {
            "model": "llama3.1-8b",
            "system": "hgx-h100-ib-ndr",
            "gpus": 16,
            "tokens": 1.0e11,
            "seq_len": 4096,
            "global_batch_seqs": 64,
        },
        "axes": {"pu": [1.2, 1.3]},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "axes: unknown input pu (did you mean pue?); allowed: system, model, gpus" in line
    assert "pu: pu" not in line


def test_calibration_example_header_quotes_what_its_fit_gives(tmp_path):
    """docs/examples/calibration_runs.yaml's header says its fitted H100 bf16 GEMM efficiency is about 0.80 and
    that Llama 3.1 70B on 512 H100 planned with the fitted stack reaches 61 % MFU without recomputation (it said
    0.79 and 59 %, stale). The runs alone (no sweep) fit 0.802; the 70B plan is TP 4, CP 2, no recomputation,
    60.8 % MFU. README, "Calibrate to your own cluster", quotes the same 0.80."""
    header = " ".join(
        line.lstrip("# ") for line in (ROOT / "docs/examples/calibration_runs.yaml").read_text().splitlines()
    )
    assert "(about 0.80 of the H100 BF16 peak" in header
    assert "picks a plan without recomputation at 61 % MFU" in header
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "so its fitted GEMM efficiency (0.80) is high" in readme

    runs = ROOT / "docs" / "examples" / "calibration_runs.yaml"
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(tmp_path), "--json"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    fit = {p["name"]: p["value"] for p in json.loads(res.stdout)["parameters"]}
    assert round(fit["matmul_efficiency.h100-sxm.bf16"], 2) == 0.80
    stack = tmp_path / "megatron-core-calibrated.yaml"
    argv = ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "512"]
    res = runner.invoke(app, [*argv, "--stack", str(stack), "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["parallel"]["recompute"] == "none"
    assert plan["mfu"] == pytest.approx(0.61, abs=0.005)


@pytest.mark.parametrize(
    "line,field,got,unit",
    [
        ("nic_gbps: 400Gb", "nic_gbps", "400Gb", ", in Gb/s"),
        ("unit_price_usd: 300k", "unit_price_usd", "300k", ", in USD"),
        ("node_gpus: eight", "node_gpus", "eight", ""),
    ],
)
def test_system_file_number_with_a_unit_says_what_it_got_and_the_unit(tmp_path, line, field, got, unit):
    """A system file of one's own with ``nic_gbps: 400Gb`` or ``unit_price_usd: 300k`` was refused as
    pydantic's ``Input should be a valid number, unable to parse string as a number``, without the value read
    or the unit the field is in; now the line says both (where the field's description states a unit)."""
    text = (ROOT / "data" / "systems" / "hgx-h100-ib-ndr.yaml").read_text().replace("id: hgx-h100-ib-ndr", "id: mine")
    key = line.split(":")[0]
    lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key}:")]
    path = tmp_path / "mine.yaml"
    path.write_text("\n".join([*lines, line]) + "\n")
    res = runner.invoke(app, ["tco", "--system", str(path), "--gpus", "64"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    msg = res.stderr.strip()
    assert len(msg.splitlines()) == 1 and msg.startswith(f"error: --system: {path}")
    assert f"(System) is invalid: field '{field}': Input should be a valid" in msg
    assert msg.endswith(f"; got '{got}': write the number alone{unit}")


@pytest.mark.parametrize("command", ["train", "compare", "size"])
def test_batch_not_a_multiple_of_the_sequence_prints_counts_with_separators(command):
    """``--global-batch-tokens 1M --seq-len 3000`` was refused as ``1000000 is not a multiple of --seq-len 3000``
    while the same commands print ``--global-batch-tokens 16,777,216`` on stderr: counts carry thousands
    separators in the error too (1,000,000 / 3,000 = 333.3 sequences)."""
    argv = {
        "train": ["train", "--system", "hgx-h100-ib-ndr", "--gpus", "64"],
        "compare": ["compare", "--gpus", "64", "--tokens", "1T"],
        "size": ["size", "--tokens", "1T", "--deadline-days", "30", "--system", "hgx-h100-ib-ndr"],
    }[command]
    res = runner.invoke(app, [*argv, "--model", "llama3.1-8b", "--global-batch-tokens", "1M", "--seq-len", "3000"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip().startswith("error: --global-batch-tokens 1,000,000 is not a multiple of --seq-len 3,000")


def test_collective_size_beyond_a_gpus_memory_is_refused_as_the_sweeps_max():
    """``collective --size 1e30`` was timed (4.06e24 us for a buffer of 1e30 bytes) where ``--sweep 8B:1e30`` is
    refused: a collective's buffers live in one GPU's memory (288 GB at most in the catalog), so --size keeps
    to the sweep's 1 TiB bound; 1TiB itself is still timed."""
    argv = ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "16", "--size"]
    res = runner.invoke(app, [*argv, "1e30"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: --size '1e30': 1e+30 bytes exceeds 1 TiB (a collective's buffers live in one GPU's memory, "
        "288 GB at most in the catalog); give 1TiB or less"
    )
    res = runner.invoke(app, [*argv, "1TiB", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["results"][0]["size_bytes"] == 2**40


def _trace_refused(trace, text: str) -> str:
    """Write ``text`` to ``trace``, simulate 64 H100 on it, and return the one error line (exit 2, no traceback)."""
    trace.write_text(text)
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(trace)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output
    return res.stderr.strip()


def test_cluster_trace_row_longer_than_its_header_is_named(tmp_path):
    """A hnplan CSV trace whose row has one field more than the header (``0,8,1000,60,training,0,1,5``) was
    read by pandas with its first column as the index, every other shifted left, and refused as ``row 2,
    column duration_s: must be a number; has 'training'``; now the line and the field counts are named."""
    trace = tmp_path / "jobs.csv"
    assert _trace_refused(
        trace, "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,60,training,0,1,5\n"
    ) == (
        f"error: {trace}: line 2: 8 fields, the header names 7: a comma inside a value shifts every column after "
        "it; write numbers without thousands separators and quote text that holds a comma"
    )


def test_infer_qps_on_an_unpriced_system_says_why_cost_is_na(tmp_path):
    """README: without a price ``infer`` says ``n/a`` for cost with the reason (``usd_per_million_tokens: null``
    and a ``cost_note`` in ``--json``). With ``--qps`` and SLOs it gave the nulls and ``n/a`` but no reason,
    in the JSON or the table; now both carry the note, as the single operating point does. A priced catalog
    system has none."""
    text = (ROOT / "data" / "systems" / "hgx-h100-ib-ndr.yaml").read_text().replace("id: hgx-h100-ib-ndr", "id: mine")
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    argv = ["infer", "--model", "llama3.1-8b", "--input-tokens", "1000", "--output-tokens", "200", "--qps", "10"]
    argv += ["--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]
    res = runner.invoke(app, [*argv, "--system", str(path), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["usd_per_million_tokens"] is None and d["usd_per_gpu_hour"] is None
    assert (
        d["cost_note"].startswith("n/a: no price for 'mine' in ") and "unit_price_usd [USD per unit]" in d["cost_note"]
    )
    res = runner.invoke(app, [*argv, "--system", str(path)], terminal_width=400)
    assert res.exit_code == 0, res.output
    assert "cost note" in res.stdout and "n/a: no price for 'mine'" in res.stdout
    res = runner.invoke(app, [*argv, "--system", "hgx-h100-ib-ndr", "--json"])
    assert res.exit_code == 0 and "cost_note" not in json.loads(res.stdout)


def test_cluster_trace_json_object_is_named_as_json(tmp_path):
    """A ``--trace`` JSON file holding an object (``{"jobs": []}``) was read as a CSV and refused as ``missing
    column(s) arrival_s, gpus, ...``; now the line says it is a JSON object and which JSON and CSV traces are
    read."""
    trace = tmp_path / "jobs.json"
    assert _trace_refused(trace, '{"jobs": []}\n') == (
        f"error: {trace}: starts with '{{', a JSON object; the JSON trace read is Philly's cluster_job_log, a list "
        "of jobs ([{...}, ...]), and hnplan's own trace is a CSV of columns arrival_s, gpus, gpu_milli, "
        "duration_s, cls, checkpoint_s, tp"
    )


def test_cluster_serve_help_says_the_request_it_sizes_for():
    """``cluster simulate --serve llama3.1-70b:30`` reports ``3 replicas, 3 GPUs`` where ``infer`` at 100
    requests/s of 2,000 + 500 tokens needs 23: the deployment is sized for 1,000-token prompts and 200-token
    answers at TTFT 1 s and TPOT 50 ms in fp8 (hnplan.cluster.runtime.serving_jobs, docs/cluster.md), which
    --help did not say."""
    res = runner.invoke(app, ["cluster", "simulate", "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    assert (
        "MODEL:QPS [requests/s], a serving deployment sized by the inference planner for 1,000-token prompts and "
        "200-token answers at TTFT 1 s and TPOT 50 ms in fp8 (repeatable)"
    ) in " ".join(res.stdout.split())
    from hnplan.cluster.runtime import serving_jobs

    defaults = serving_jobs.__kwdefaults__
    assert (defaults["input_tokens"], defaults["output_tokens"]) == (1000, 200)
    assert (defaults["ttft_slo_s"], defaults["tpot_slo_s"], defaults["dtype"]) == (1.0, 0.05, "fp8")


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("0B", "error: --size '0B': a message size is above 0 bytes (e.g. 8B, 1GiB)"),
        ("0", "error: --size '0': a message size is above 0 bytes (e.g. 8B, 1GiB)"),
        ("-1GiB", "error: --size '-1GiB': a message size is positive (bytes, e.g. 1GiB)"),
    ],
)
def test_collective_size_zero_or_negative_is_refused(size, message):
    """A zero-byte collective moves nothing (it was timed at one latency, 15 us on 8 H100), and a negative size was
    refused only as unreadable ('cannot read size'): both are named as sizes out of range, exit 2."""
    argv = ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "8", "--size", size]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == message


def test_collective_title_counts_one_domain_in_the_singular():
    """The table's title said '1 per domain x 1 domains' for one GPU; one domain is singular, two are plural."""
    argv = ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--size", "1GiB", "--gpus"]
    assert "(1 per domain x 1 domain, none)" in runner.invoke(app, [*argv, "1"]).stdout
    assert "(8 per domain x 2 domains, leaf)" in runner.invoke(app, [*argv, "16"]).stdout
