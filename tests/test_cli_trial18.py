"""What a new-user trial of the command line found: each a CLI run asserting the exit code and
the figure or the one-line message."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_compare_table_prints_a_small_run_as_json_does_not_as_zero():
    """Llama 3.1 8B on 8 H100 for 1B tokens: the table said 0 MWh and 0.01 / 0.01 MW where --json said
    0.035 MWh and 0.0111 MW (``energy [MWh]`` printed with no decimals); ``size`` printed 0.035. Values that
    would print 0 get two significant digits, as size's table does."""
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "8", "--tokens", "1e9"]
    argv += ["--systems", "hgx-h100-ib-ndr", "--no-trust", "--no-goodput"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["designs"]
    assert 0.01 < d["energy_mwh"] < 0.05 and 0.005 < d["it_power_mw"] < 0.05 and d["days"] < 0.5
    res = runner.invoke(app, argv, terminal_width=400)
    assert res.exit_code == 0, res.output
    row = next(line for line in res.stdout.splitlines() if "hgx-h100-ib-ndr" in line and "TP" in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    days, power, energy = cells[4], cells[7], cells[8]
    assert days == f"{d['days']:.1f}" != "0.0" and energy == f"{d['energy_mwh']:.2g}", cells
    assert power == f"{d['it_power_mw']:,.2f} / {d['facility_power_mw']:,.2f}" != "0.00 / 0.00", cells


def test_memory_refuses_a_flag_of_the_other_mode():
    """``memory --mode train --batch 4`` printed the training plan's memory as if the 4 had been read (40.96 GiB
    either way), and ``--mode inference --stack ...`` ignored the stack: one line naming the flags, exit 2."""
    base = ["memory", "--model", "llama3.1-70b", "--tp", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*base, "--mode", "train", "--pp", "4", "--dp", "8", "--batch", "4"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: --batch applies to --mode inference only; this is --mode train (drop it, or give --mode inference)"
    )
    res = runner.invoke(app, [*base, "--mode", "inference", "--stack", "megatron-core", "--no-dropout", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["message"] == (
        "--dropout/--no-dropout, --stack apply to --mode train only; this is --mode inference (drop them, or give "
        "--mode train)"
    )
    for argv in (
        [*base, "--mode", "train", "--stack", "megatron-core"],
        [*base, "--mode", "inference", "--batch", "4"],
    ):
        assert runner.invoke(app, argv).exit_code == 0


def test_roofline_refuses_a_flag_the_phase_does_not_read():
    """``roofline --phase train --kv-len 100000`` printed the same training pass as without it (0.355 s), and
    ``--recompute full`` in prefill or ``--no-sequence-parallel`` in decode changed nothing: refused, exit 2."""
    base = ["roofline", "--accelerator", "h100-sxm", "--model", "llama3.1-70b", "--batch", "1", "--seq-len", "4096"]
    for extra, message in (
        (
            ["--phase", "train", "--kv-len", "100000"],
            "--kv-len applies to --phase decode only (the tokens a decode step reads from the KV cache); "
            "this is --phase train: drop it",
        ),
        (
            ["--phase", "prefill", "--recompute", "full"],
            "--recompute applies to --phase train only (the forward recomputed in the backward pass); "
            "this is --phase prefill: drop it",
        ),
        (
            ["--phase", "decode", "--no-sequence-parallel"],
            "--sequence-parallel/--no-sequence-parallel applies to --phase train only",
        ),
    ):
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert res.stderr.strip().startswith(f"error: {message}"), res.stderr
    for extra in (["--phase", "decode", "--kv-len", "4096"], ["--phase", "train", "--recompute", "full"]):
        assert runner.invoke(app, [*base, *extra, "--tp", "8"]).exit_code == 0


def test_kv_cache_sized_both_ways_is_refused():
    """``infer --gpu-memory-utilization 0.9 --kv-budget-gib 10`` ran as if the fraction had not been given (a KV
    budget is set within the whole visible HBM): refused in one line by infer and memory alike, exit 2."""
    both = ["--gpu-memory-utilization", "0.9", "--kv-budget-gib", "10"]
    infer = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2000"]
    memory = ["memory", "--model", "llama3.1-70b", "--mode", "inference", "--tp", "8", "--seq-len", "8192"]
    for argv in ([*infer, "--output-tokens", "500"], [*memory, "--system", "hgx-h100-ib-ndr"]):
        res = runner.invoke(app, [*argv, *both])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert res.stderr.strip() == (
            "error: give one of --gpu-memory-utilization and --kv-budget-gib: a KV budget is set directly within "
            "the whole visible HBM, so the fraction would be ignored"
        )
        assert runner.invoke(app, [*argv, *both[2:]]).exit_code == 0


def test_gemm_dtype_with_only_a_shapes_json_is_refused(tmp_path):
    """``gemm --shapes-json s.json --dtype fp8`` timed the file's bf16 GEMM in bf16 (193 us, 711 TFLOP/s on H100)
    and said nothing of the fp8 asked: --dtype types the --shape GEMMs, a JSON shape names its own."""
    shapes = tmp_path / "s.json"
    shapes.write_text('[["bf16", 4096, 4096, 4096]]')
    base = ["gemm", "--accelerator", "h100-sxm", "--shapes-json", str(shapes), "--json"]
    res = runner.invoke(app, [*base, "--dtype", "fp8"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["message"].startswith(
        "--dtype fp8 applies to --shape GEMMs; each --shapes-json GEMM names its own dtype"
    )
    res = runner.invoke(app, [*base, "--dtype", "fp8", "--shape", "1x1x1"])  # with --shape it types those
    assert res.exit_code == 0 and [r["dtype"] for r in json.loads(res.stdout)["results"]] == ["fp8", "bf16"]
    assert runner.invoke(app, base).exit_code == 0


def test_report_params_gpus_beyond_one_fabric_are_refused_before_any_notebook(tmp_path):
    """``report --params`` with ``gpus: 1e6`` passed the parameter checks and ran design_comparison for over ten
    minutes of CPU, where ``compare --gpus 1000000`` is refused at once: the count is checked against each design
    the notebook plans on (GB200 NVL72: 65,520 GPUs in whole racks on 64-port switches), exit 2."""
    params = tmp_path / "big.yaml"
    params.write_text("gpus: 1.0e+6\nscaling_gpus: [1152, 70000]\n")
    argv = ["report", "--scenario", "default", "--params", str(params), "--out", str(tmp_path / "r")]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert " ".join(res.stderr.split()) == (
        f"error: --params {params}: notebook 'design_comparison', parameter 'gpus': 1000000 exceeds the 65,520 GPUs "
        "of gb200-nvl72 one scale-out fabric joins (a 3-tier fat-tree of 64-port qm9700 switches); give at most 65,520"
    )
    assert not (tmp_path / "r").exists()
    params.write_text("scaling_gpus: [1152, 70000]\n")  # training_plan's list, element by element
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "notebook 'training_plan', parameter 'scaling_gpus': 70000 exceeds" in res.stderr


def test_a_file_in_the_way_of_an_out_folder_names_out_not_the_input_it_is(tmp_path):
    """``calibrate --runs runs.yaml --out runs.yaml/x.yaml`` said '--runs .../runs.yaml: a file is there; a folder
    is needed': the path is the runs file, but the folder was asked for by --out."""
    import yaml

    runs = tmp_path / "runs.yaml"
    runs.write_text(
        yaml.safe_dump(
            [
                {
                    "id": "r8",
                    "model": "llama3.1-8b",
                    "system": "hgx-h100-ib-ndr",
                    "gpus": 8,
                    "seq_len": 8192,
                    "global_batch_seqs": 64,
                    "dtype": "bf16",
                    "fixed": {"tp": 1, "pp": 1, "dp": 8, "cp": 1},
                    "metric": "tokens_per_s_per_gpu",
                    "published": 10000,
                }
            ]
        )
    )
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", f"{runs}/x.yaml"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.stderr.strip() == f"error: --out {runs}: a file is there; a folder is needed"


def test_gemm_shapes_json_dtype_is_read_as_dtype_is(tmp_path):
    """``--dtype FP8`` is read as fp8; a ``--shapes-json`` GEMM named ``"FP8"`` was refused as an unknown dtype.
    Both spellings now time the same fp8 GEMM on H100: 4096^3 is 2 * 4096**3 = 137.4 GFLOP, and the result
    rows name the dtype as the catalog spells it."""
    shapes = tmp_path / "s.json"
    shapes.write_text('[[" FP8", 4096, 4096, 4096], ["Bf16", 4096, 4096, 4096]]')
    argv = ["gemm", "--accelerator", "h100-sxm", "--shapes-json", str(shapes), "--json"]
    res = runner.invoke(app, [*argv, "--shape", "4096x4096x4096", "--dtype", "FP8"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["results"]
    assert [r["dtype"] for r in rows] == ["fp8", "fp8", "bf16"]
    assert rows[0]["flops"] == 2 * 4096**3 == rows[1]["flops"]
    assert rows[0]["time_s"] == rows[1]["time_s"] < rows[2]["time_s"]


def test_train_refuses_more_bf16_end_layers_than_the_model_has(tmp_path):
    """A stack with ``fp8_bf16_end_layers: 40`` on Llama 3.1 8B (32 layers) in fp8 was planned with 80 extra bf16
    layers' time: 8.25 s a step on 8 H100 against 6.04 s with every layer in bf16 (16 at each end). Each end's
    layers exist once: more than half the model is refused, naming the field, the stack and the bound."""
    src = Path(__file__).resolve().parents[1] / "data" / "stacks" / "megatron-core.yaml"
    text = src.read_text(encoding="utf-8").replace("id: megatron-core", "id: mc-ends", 1)
    argv = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--dtype", "fp8"]
    argv += ["--seq-len", "8192", "--global-batch-size", "64", "--tp", "1", "--pp", "1", "--json"]
    for n, code in ((40, 2), (17, 2), (16, 0)):
        stack = tmp_path / f"ends{n}.yaml"
        stack.write_text(f"{text.rstrip()}\nfp8_bf16_end_layers: {n}\n", encoding="utf-8")
        res = runner.invoke(app, [*argv, "--stack", str(stack)])
        assert res.exit_code == code, res.output
        if code == 2:
            assert json.loads(res.stdout)["error"]["message"] == (
                f"fp8_bf16_end_layers {n} (stack mc-ends) keeps {2 * n} layers in bf16, {n} at each end; "
                "llama3.1-8b has 32: give at most 16"
            )
