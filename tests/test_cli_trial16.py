"""What a trial of bad input to the fields and flags added in this round found: each a CLI run on a copied
data folder (or with a bad flag) asserting exit 2 and the one line that names the file and field (or flag)."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

DATA = Path(__file__).parents[1] / "data"


def _copy_with(tmp_path: Path, rel: str, old: str, new: str) -> tuple[Path, Path]:
    """A copy of data/ with the first ``old`` of file ``rel`` replaced by ``new``: (folder, file)."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    path = data / rel
    text = path.read_text()
    assert old in text, f"{rel} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))
    return data, path


def test_a_price_item_prices_yaml_lacks_is_refused_by_catalog_validate_of_a_folder(tmp_path):
    # `catalog validate DIR` said "... entries valid" (exit 0) although every command naming the system then
    # refused it: only the one-file validation and the commands' own checks looked the price up
    data, path = _copy_with(
        tmp_path, "systems/gb200-nvl72-roce-400g.yaml", "price_item: gb200-nvl72\n", "price_item: gb200-nvl7\n"
    )
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith(f"invalid: {path}: system 'gb200-nvl72-roce-400g', field 'price_item': no price for ")
    assert "'gb200-nvl7'" in line and "nearest: gb200-nvl72" in line
    assert line.count(str(path)) == 1  # the file named once, not prefixed a second time
    assert line.count(f"invalid: {data}") == 1  # one problem


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        # each passed `catalog validate` (exit 0): only the key was checked, and a bad value surfaced when
        # the run was planned (or never, where the planner reads the value without a check)
        ("    nccl_nvls: false", "    nccl_nvls: sometimes", "field nccl_nvls: Input should be a valid boolean"),
        (
            "    dp_bucket_params: 104857600",
            "    dp_bucket_params: -5",
            "field dp_bucket_params: Input should be greater than 0",
        ),
        (
            "    overlap_comm_ctas: {dp: 8}",
            "    overlap_comm_ctas: {dp: -8}",
            "field overlap_comm_ctas.dp: Input should be greater than 0",
        ),
        (
            "    cuda_graph_scope: [attn, mlp]",
            "    cuda_graph_scope: [attn, mpl]",
            "field cuda_graph_scope.1: Input should be 'attn', 'mlp'",
        ),
    ],
)
def test_a_validation_runs_override_of_a_wrong_type_or_range_names_the_run_and_field(tmp_path, old, new, said):
    data, path = _copy_with(tmp_path, "validation/training_runs.yaml", old, new)
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith(f"invalid: {path}: run ") and f": overrides: {said}" in line
    assert line.count(f"invalid: {data}") == 1 and "Traceback" not in res.stderr


def test_a_null_override_leaves_the_stacks_choice_as_the_planner_reads_it(tmp_path):
    data, _ = _copy_with(tmp_path, "validation/training_runs.yaml", "    nccl_nvls: false", "    nccl_nvls: null")
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 0, res.stderr


def test_the_data_folder_as_shipped_still_validates():
    res = runner.invoke(app, ["catalog", "validate", str(DATA)])
    assert res.exit_code == 0, res.stderr
    assert "validation runs" in res.stdout


@pytest.mark.parametrize(
    ("rel", "old", "new", "said"),
    [
        (
            "engines/sglang-large-ep.yaml",
            "expert_load_imbalance: 1.18",
            "expert_load_imbalance: 0.5",
            "field 'expert_load_imbalance': Input should be greater than or equal to 1",
        ),
        (
            "stacks/megatron-bridge-2511-mxfp8.yaml",
            "norm_cudnn: false",
            "norm_cudn: false",
            "field 'norm_cudn': unknown key (did you mean 'norm_cudnn'?)",
        ),
        (
            "models/qwen3-30b-a3b.yaml",
            "qk_norm: true",
            "qk_norm: rms",
            "field 'qk_norm': Input should be a valid boolean",
        ),
        (
            "accelerators/b200.yaml",
            "sfu_exp_per_clk_per_sm: 16",
            "sfu_exp_per_clk_per_sm: -16",
            "field 'sfu_exp_per_clk_per_sm': Input should be greater than 0",
        ),
        (
            "accelerators/b200.yaml",
            "  fwd: 2.42",
            "  fwd: 0.5",
            "field 'attention_exp_overlap_exponent.fwd': Input should be greater than or equal to 1",
        ),
    ],
)
def test_the_new_catalog_fields_refuse_a_typo_a_wrong_type_or_range_in_one_line(tmp_path, rel, old, new, said):
    # these already held: kept so a loosened schema is noticed
    data, path = _copy_with(tmp_path, rel, old, new)
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith(f"invalid: {path}: entry ") and said in line
    assert line.count(f"invalid: {data}") == 1  # one problem


def test_an_inference_reserve_taking_every_node_names_the_flag():
    # "inference_reserve_gpus 64 takes ...": the planner's parameter, not the --inference-reserve-gpus typed
    res = runner.invoke(
        app,
        ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "50"]
        + ["--inference-reserve-gpus", "64", "--json"],
    )
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "--inference-reserve-gpus 64 takes 8 of the cluster's 8 8-GPU nodes" in one_line(res.stdout + res.stderr)


def test_gpus_bought_that_are_not_whole_units_are_refused_with_the_whole_counts():
    # 100 GPUs of NVL72 racks for a 64-GPU job read as two whole racks (40 idle GPUs, 10 trays a rack as spares)
    # while the table said "36 of 100 GPUs bought idle": the spares of 144 GPUs credited to 100
    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "64", "--model", "llama3.1-8b", "--json"]
    res = runner.invoke(app, [*args, "--gpus-bought", "100"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "--gpus-bought 100 is not a whole number of gb200-nvl72 units (72 GPUs each); give 72 or 144" in (
        one_line(res.stdout + res.stderr)
    )
    # two whole racks, the job spread over both: 72 - 32 = 40 idle GPUs a rack, 10 trays of 4 GPUs (spares.py)
    res = runner.invoke(app, [*args, "--gpus-bought", "144"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["spare_nodes"] == 10


def test_an_inference_reserve_on_a_mixed_node_list_names_the_flag():
    res = runner.invoke(
        app,
        ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "50"]
        + ["--nodes", "openb", "--inference-reserve-gpus", "8", "--json"],
    )
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "--inference-reserve-gpus 8 needs nodes of equal size" in one_line(res.stdout + res.stderr)


def test_a_stack_calibrating_attention_for_an_unknown_accelerator_is_refused(tmp_path):
    # matmul_efficiency's accelerator ids were checked, attention_efficiency's and attention_fp8_ratio's not:
    # a mistyped id validated and its calibration silently never applied
    data, path = _copy_with(
        tmp_path, "stacks/nemo-mlperf-v50.yaml", "  b200: {fwd: 1.135, bwd: 1.292}", "  b2000: {fwd: 1.135, bwd: 1.292}"
    )
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"invalid: {path}: stack nemo-mlperf-v50: field 'attention_fp8_ratio': unknown accelerator id 'b2000'; "
        "nearest: b200, gb200, b300"
    )
