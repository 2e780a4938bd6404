"""The training dtypes a software stack implements (``train_dtypes`` in data/stacks/*.yaml): the stacks that
describe one published run or one library take only what that source trains in, and a plan in another dtype is
refused in one line naming the stack and the field (exit 2), by the planner and by every command line."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning.training import make_job

runner = CliRunner()

# stack -> (dtypes its source trains in, a dtype it does not)
# pytorch-eager: torch.autocast bf16, fp8 through Accelerate's torchao / Transformer Engine backends, no NVFP4;
# deepseek-v3-dualpipe: arXiv:2412.19437 Sec. 3.3 (FP8 framework) and App. B.1 (validated against BF16);
# llama3-meta: arXiv:2407.21783 Table 4 (BF16 MFU), FP8 only for inference (Sec. 6.2);
STACKS = {
    "pytorch-eager": (["bf16", "fp8"], "fp4"),
    "deepseek-v3-dualpipe": (["bf16", "fp8"], "fp4"),
    "llama3-meta": (["bf16"], "fp8"),
    # SC21 and Korthikanti et al.: 16-bit mixed precision on A100, before FP8 recipes; NeMo 24.07: bf16 or TE 1.x FP8
    "megatron-lm-2021": (["bf16"], "fp8"),
    "megatron-lm-2022": (["bf16"], "fp8"),
    "nemo-2407-fp8": (["bf16", "fp8"], "fp4"),
}


@pytest.mark.parametrize("stack_id", sorted(STACKS))
def test_stack_lists_what_its_source_trains_in(cat, stack_id):
    allowed, _ = STACKS[stack_id]
    st = cat.stack(stack_id)
    assert st.train_dtypes == allowed
    assert "train_dtypes" in st.field_sources  # every value carries its source


@pytest.mark.parametrize("stack_id", sorted(STACKS))
def test_planner_takes_the_stacks_dtypes_and_refuses_another(cat, stack_id):
    allowed, refused = STACKS[stack_id]
    for dtype in allowed:  # H100: every dtype listed has a dense peak there
        assert make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 4096, 64, dtype, cat, stack=stack_id).dtype == dtype
    system = "gb200-nvl72" if refused == "fp4" else "hgx-h100-ib-ndr"  # a chip that has the refused dtype's peak
    with pytest.raises(InputError) as err:
        make_job("llama3.1-8b", system, 8, 4096, 64, refused, cat, stack=stack_id)
    assert str(err.value) == (
        f"dtype {refused} is not available with stack {stack_id!r}: it trains in {', '.join(allowed)} only "
        f"(field train_dtypes of data/stacks/{stack_id}.yaml); choose one of those or another stack"
    )


def _one_line(r, stack_id: str, dtype: str) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert f"--dtype {dtype} is not available with stack '{stack_id}'" in lines[0]
    assert f"data/stacks/{stack_id}.yaml" in lines[0] and "Traceback" not in r.output
    return lines[0]


@pytest.mark.parametrize("stack_id", sorted(STACKS))
def test_train_refuses_an_unsupported_dtype_in_one_line(stack_id):
    _, refused = STACKS[stack_id]
    system = "gb200-nvl72" if refused == "fp4" else "hgx-h100-ib-ndr"
    args = ["train", "--model", "llama3.1-8b", "--system", system, "--gpus", "8", "--seq-len", "4096"]
    r = runner.invoke(app, [*args, "--global-batch-size", "64", "--dtype", refused, "--stack", stack_id])
    _one_line(r, stack_id, refused)


def test_size_refuses_fp8_on_the_llama3_stack_in_one_line():
    args = ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--tokens", "1e10", "--gpus", "64"]
    r = runner.invoke(app, [*args, "--dtype", "fp8", "--stack", "llama3-meta"])
    _one_line(r, "llama3-meta", "fp8")
    r = runner.invoke(app, [*args, "--dtype", "bf16", "--stack", "llama3-meta", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)
