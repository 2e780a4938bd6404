"""What a new user's trial with catalog files of their own found: device memory visible to programs
larger than the package's HBM (GB typed where GiB is read) accepted, a grammar slip in `catalog
validate`'s answer for a loose accelerator file, nccl-tests' op names refused by `collective --op`, and a
report batch that is not whole sequences run on fewer tokens unsaid."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog.schemas import Accelerator
from hnplan.cli import app

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

ROOT = Path(__file__).parents[1]
H100 = yaml.safe_load((ROOT / "data" / "accelerators" / "h100-sxm.yaml").read_text())


def _acc_file(tmp_path, **changes) -> Path:
    path = tmp_path / "my-h100.yaml"
    path.write_text(yaml.safe_dump({**H100, "id": "my-h100", **changes}))
    return path


@pytest.mark.parametrize(
    "visible",
    [
        84.94,  # the H100's 79.11 GiB written in GB (79.11 x 2**30 / 1e9)
        81.559,  # nvidia-smi's 81,559 MiB divided by 1,000
    ],
)
def test_visible_memory_above_the_package_is_refused(tmp_path, visible):
    # more visible memory than hbm_gb makes plans fit that do not: an optimistic unit slip, not a chip
    path = _acc_file(tmp_path, hbm_visible_gib=visible)
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    msg = one_line(res.stderr)
    assert f"field 'hbm_visible_gib': {visible:g} GiB is more than the 80 GB of hbm_gb" in msg, msg
    assert msg.endswith("not GB")
    system = yaml.safe_load((ROOT / "data" / "systems" / "hgx-h100-ib-ndr.yaml").read_text())
    sys_path = tmp_path / "my-sys.yaml"
    sys_path.write_text(yaml.safe_dump({**system, "id": "my-sys", "accelerator": str(path)}))
    argv = ["train", "--model", "llama3.1-8b", "--gpus", "8", "--seq-len", "4096", "--global-batch-size", "64"]
    res = runner.invoke(app, [*argv, "--system", str(sys_path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr).startswith(f"error: --system: {sys_path}: system 'my-sys', field 'accelerator'")
    assert "field 'hbm_visible_gib'" in res.stderr


def test_every_catalog_accelerator_shows_at_most_its_hbm():
    # the bound holds for every accelerator measured (H100 80 GB: 79.11 GiB visible; GB300 288 GB: 277.55 GiB)
    for f in sorted((ROOT / "data" / "accelerators").glob("*.yaml")):
        acc = Accelerator.model_validate(yaml.safe_load(f.read_text()))
        assert acc.hbm_visible_gib is None or acc.hbm_visible_gib <= acc.hbm_gb, f.name


def test_catalog_validate_names_an_accelerator_with_its_article(tmp_path):
    path = _acc_file(tmp_path)
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert one_line(res.stdout) == f"{path}: valid (an Accelerator entry, told by its keys)"


@pytest.mark.parametrize("spelt", ["all_reduce", "All-Reduce", "allreduce"])
def test_collective_takes_nccl_tests_op_names(spelt):
    # nccl-tests names its binaries all_reduce_perf; a sweep's CSV took all_reduce while --op refused it.
    # 2^30 B on 16 H100: the same time whichever spelling
    argv = ["collective", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--size", "1GiB", "--json"]
    res = runner.invoke(app, [*argv, "--op", spelt])
    assert res.exit_code == 0, res.stdout + res.stderr
    ans = json.loads(res.stdout)
    ref = json.loads(runner.invoke(app, [*argv, "--op", "allreduce"]).stdout)
    assert ans["op"] == "allreduce" and ans["results"] == ref["results"]
    bad = runner.invoke(app, [*argv, "--op", "all_sum"])
    assert bad.exit_code == 2 and one_line(bad.stderr).startswith("error: --op must be one of allreduce, reducescatter")


def test_params_file_count_with_a_suffix_says_what_to_write():
    # `tokens: 15T` is a string to YAML: refused, as a sweep spec refuses it, with the number to write
    from hnplan.errors import ScenarioError
    from hnplan.report_params import check_parameters

    with pytest.raises(ScenarioError, match=r"got str '15T' \(YAML has no unit suffixes: write 15T as 15.0e\+12\)$"):
        check_parameters("design_comparison", {"tokens": "15T"}, "p.yaml")
    with pytest.raises(ScenarioError, match=r"got str '16Mi' \(YAML has no unit suffixes: write 16Mi as 16777216\)$"):
        check_parameters("design_comparison", {"global_batch_tokens": "16Mi"}, "p.yaml")
    with pytest.raises(ScenarioError, match=r"got str 'many'$"):
        check_parameters("design_comparison", {"gpus": "many"}, "p.yaml")


def test_params_batch_not_whole_sequences_is_refused_before_any_notebook(tmp_path):
    # 16,000,000 tokens at sequence 8,192 ran the notebooks on 1,953 sequences (15,998,976 tokens) unsaid,
    # where `hnplan compare --global-batch-tokens 16M` refuses it
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"global_batch_tokens": 16_000_000}))
    out = tmp_path / "reports"
    res = runner.invoke(app, ["report", "--scenario", "default", "--params", str(params), "--out", str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"error: --params {params}: notebook 'design_comparison', parameter 'global_batch_tokens': 16,000,000 is "
        "not a multiple of seq_len 8,192: tokens per step are whole sequences, such as 15,998,976 or 16,007,168"
    )
    assert not out.exists()


def test_scenario_batch_not_whole_sequences_is_refused(tmp_path):
    sc = yaml.safe_load((ROOT / "data" / "scenarios" / "default.yaml").read_text())
    sc["id"] = "mine"
    sc["notebooks"][1]["parameters"]["seq_len"] = 3000  # 16,777,216 tokens are not whole 3,000-token sequences
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(sc))
    res = runner.invoke(app, ["report", "--scenario", str(path), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    msg = one_line(res.stderr)
    assert (
        "notebook 'training_plan', parameter 'global_batch_tokens': 16,777,216 is not a multiple of seq_len 3,000"
        in msg
    )


@pytest.mark.parametrize(
    "price,per_gpu",
    [
        (270, "$33.75"),  # an 8-GPU server's $270k typed in thousands
        (2.7e11, "$3.375e+10"),  # three zeros too many, twice
    ],
)
def test_own_unit_price_in_another_unit_is_refused(tmp_path, price, per_gpu):
    # a $270 server made every cost of the design about 1,000x too low, with exit 0
    system = yaml.safe_load((ROOT / "data" / "systems" / "hgx-h100-ib-ndr.yaml").read_text())
    path = tmp_path / "my-h100.yaml"
    path.write_text(yaml.safe_dump({**system, "id": "my-h100", "unit_price_usd": price}))
    for argv in (["catalog", "validate", str(path)], ["tco", "--system", str(path), "--gpus", "64"]):
        res = runner.invoke(app, argv)
        assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
        assert f"field 'unit_price_usd': ${price:,.0f} for a unit of 8 GPUs is {per_gpu} a GPU, outside" in one_line(
            res.stderr
        )
    # the catalog's priced systems lie inside the range: $21k-69k a GPU
    path.write_text(yaml.safe_dump({**system, "id": "my-h100", "unit_price_usd": 270_000}))
    res = runner.invoke(app, ["tco", "--system", str(path), "--gpus", "64", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["systems_usd"] == 8 * 270_000


def test_catalog_validate_of_a_folder_that_is_no_catalog_is_one_line(tmp_path):
    # an empty folder (or one of notes) listed a missing facility.yaml, reliability.yaml and memory.yaml
    (tmp_path / "notes.txt").write_text("not a catalog\n")
    res = runner.invoke(app, ["catalog", "validate", str(tmp_path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr).startswith(f"error: {tmp_path}: not a catalog folder (none of accelerators/,")
    data = runner.invoke(app, ["catalog", "validate", str(ROOT / "data")])
    assert data.exit_code == 0 and "entries valid" in data.stdout


@pytest.mark.parametrize(
    "field,value,bound",
    [
        ("grad_reduce_bytes", 32, "less than or equal to 4"),
        ("grad_reduce_bytes", 0.5, "greater than or equal to 1"),
        ("kernel_launch_us", 13_100, "less than or equal to 1000"),  # 13.1 us in ns: a 2.8 s step read 15.7 s
    ],
)
def test_stack_figure_in_another_unit_is_refused(tmp_path, field, value, bound):
    # grad_reduce_bytes: 32 (fp32 written in bits) planned every gradient reduction 8x too long, exit 0
    stack = yaml.safe_load((ROOT / "data" / "stacks" / "megatron-core.yaml").read_text())
    path = tmp_path / "my-stack.yaml"
    path.write_text(yaml.safe_dump({**stack, "id": "my-stack", field: value}))
    argv = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "4096"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "64", "--stack", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert f"field '{field}': Input should be {bound}" in one_line(res.stderr)


def test_readme_calibration_example_numbers_are_current():
    # the README's "With the example files" sentence read 0.80, -8.4 % / -9.4 % -> +0.7 % / -0.8 % and 1.5 %
    # while the command printed 0.785, -7.6 % / -7.9 % -> +0.3 % / -0.3 % and 0.6 %
    from hnplan.planning.calibrate import EXAMPLE_COLLECTIVES, EXAMPLE_RUNS, calibrate

    cal = calibrate(EXAMPLE_RUNS, "megatron-core", collectives_path=EXAMPLE_COLLECTIVES)
    mm, nvlink, _ = (p.value for p in cal.parameters)
    (a, b) = cal.run_rows
    readme = " ".join((ROOT / "README.md").read_text().split())
    loo = max(abs(a["loo_error_pct"]), abs(b["loo_error_pct"]))
    said = (
        f"comes out {mm:.3f} (the catalog's GEMM law: 0.74 at boost clock, 0.71 at the sustained one); the two runs "
        f"move from {a['error_before_pct']:+.1f} % and {b['error_before_pct']:+.1f} % to {a['error_after_pct']:+.1f} % "
        f"and {b['error_after_pct']:+.1f} %, each predicted from the other within {loo:.1f} %; the NVLink ring "
        f"efficiency {nvlink:.3f} (catalog 0.82)"
    )
    assert said in readme, said


def test_engine_overhead_in_milliseconds_is_refused(tmp_path):
    # vLLM's 4 ms host time per iteration typed as 4 (the field is seconds) planned every decode step 4 s long
    engine = yaml.safe_load((ROOT / "data" / "engines" / "vllm.yaml").read_text())
    path = tmp_path / "my-vllm.yaml"
    path.write_text(yaml.safe_dump({**engine, "id": "my-vllm", "iteration_overhead_s": 4}))
    argv = ["infer", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000"]
    res = runner.invoke(app, [*argv, "--output-tokens", "500", "--engine", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert "field 'iteration_overhead_s': Input should be less than or equal to 1 [s]" in one_line(res.stderr)


def _model_file(tmp_path, **changes) -> Path:
    model = yaml.safe_load((ROOT / "data" / "models" / "llama3.1-70b.yaml").read_text())
    path = tmp_path / "my-70b.yaml"
    path.write_text(yaml.safe_dump({**model, "id": "my-70b", **changes}))
    return path


def test_tp_must_divide_the_dense_mlp():
    # ffn_hidden 28,670 = 2 x 14,335: Megatron's ColumnParallelLinear and vLLM's MergedColumnParallelLinear
    # assert the columns divide by the TP size, so TP 8 cannot run it; it was planned with 3,583.75 columns a rank
    import types

    from hnplan.compute.layout import check_split
    from hnplan.errors import PlanRuleError

    m = types.SimpleNamespace(id="m", layers=80, heads=64, kv_heads=8, moe=None, ffn_hidden=28_670)
    check_split(m, tp=2)
    with pytest.raises(PlanRuleError, match=r"tp = 8 does not divide the 28670 columns of m's dense MLP"):
        check_split(m, tp=8)
    with pytest.raises(PlanRuleError, match=r"tp = 4 does not divide the 28670 columns"):
        check_split(m, tp=4, training=False)
    # an MoE model without dense layers has no dense MLP to split: its ffn_hidden is not checked
    moe = types.SimpleNamespace(first_dense_layers=0, experts=8)
    check_split(types.SimpleNamespace(**{**vars(m), "moe": moe}), tp=8)


def test_tp_not_dividing_the_dense_mlp_exits_3(tmp_path):
    path = _model_file(tmp_path, ffn_hidden=28_670, params_b_published=None)
    argv = ["train", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "512", "--tp", "8", "--pp", "1", "--dp", "8"])
    assert res.exit_code == 3 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr).startswith("infeasible: tp = 8 does not divide the 28670 columns of my-70b's dense MLP")
    searched = runner.invoke(app, [*argv, "--global-batch-size", "512", "--json"])
    assert searched.exit_code == 0 and json.loads(searched.stdout)["parallel"]["tp"] in (1, 2)


def test_etp_must_divide_each_experts_mlp(tmp_path):
    # expert_ffn_hidden 770 at etp 4 was planned with 192.5 columns a rank; Megatron's expert layers divide
    # the columns by the expert-TP size and assert it divides. TP 4 with etp 2 (770 = 2 x 385) runs.
    model = yaml.safe_load((ROOT / "data" / "models" / "qwen3-30b-a3b.yaml").read_text())
    model = {**model, "id": "my-moe", "moe": {**model["moe"], "expert_ffn_hidden": 770}}
    model.pop("params_b_published", None)
    path = tmp_path / "my-moe.yaml"
    path.write_text(yaml.safe_dump(model))
    argv = ["train", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--seq-len", "4096"]
    argv += ["--global-batch-size", "64", "--tp", "4", "--pp", "1", "--dp", "4"]
    res = runner.invoke(app, [*argv, "--ep", "4", "--etp", "4"])
    assert res.exit_code == 3 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr).startswith("infeasible: etp = 4 does not divide the 770 columns of each expert's MLP")
    ok = runner.invoke(app, [*argv, "--ep", "8", "--etp", "2", "--json"])
    assert ok.exit_code == 0, ok.stdout + ok.stderr


def test_fabric_overhead_in_nanoseconds_is_refused(tmp_path):
    # NDR's 4 us per collective step typed in ns (4,000) made every small all-reduce step 4 ms long
    fabric = yaml.safe_load((ROOT / "data" / "interconnects" / "ib-ndr-400.yaml").read_text())
    path = tmp_path / "my-ndr.yaml"
    path.write_text(yaml.safe_dump({**fabric, "id": "my-ndr", "software_overhead_us": 4000}))
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert "field 'software_overhead_us': Input should be less than or equal to 1000" in one_line(res.stderr)


def test_hnplan_data_naming_a_folder_that_is_no_catalog(tmp_path, monkeypatch):
    # an existing folder of something else read as an empty catalog: "unknown model id 'llama3.1-8b'; valid ids: "
    monkeypatch.setenv("HNPLAN_DATA", str(tmp_path))
    argv = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "4096"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "64"])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"error: HNPLAN_DATA={tmp_path}: not a catalog folder (no systems/, models/, accelerators/ or facility.yaml "
        "in it; point it at a copy of hnplan's data/)"
    )
    monkeypatch.setenv("HNPLAN_DATA", str(ROOT / "data"))
    assert runner.invoke(app, ["catalog", "list", "models"]).exit_code == 0


def test_astronomical_figures_print_with_an_exponent():
    # a utilisation of 1e-300 (in (0, 1], so accepted) printed a cost per GPU-hour of some 300 digits
    from hnplan.formatting import format_number, format_usd

    assert format_usd(1.44e300) == "$1.44e+300" and format_usd(2.5e12) == "$2.5T"
    assert format_number(7.5e302) == "7.5e+302" and format_number(16930.4) == "16,930"
    res = runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--utilisation", "1e-300"])
    assert res.exit_code == 0 and "$1.44e+300" in res.stdout and len(max(res.stdout.splitlines(), key=len)) < 200


def test_data_loader_beyond_the_storage_says_by_how_much():
    # "the storage (6 GB/s read) cannot sustain the data loader" named neither the rate asked nor what it needs:
    # 2e12 tokens/s x 4 bytes a token = 8,000 GB/s against 18 GB200 trays' storage reads
    argv = ["reliability", "--system", "gb200-nvl72", "--gpus", "72", "--model", "llama3.1-8b", "--tokens-per-s", "2T"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert one_line(res.stderr).startswith(
        "error: tokens_per_s 2e+12: the data loader reads 8000 GB/s of text (4 bytes a token), more than the storage's"
    )
