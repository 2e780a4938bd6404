"""What a first-time user trips over at the command line: messages that say what is wrong in words, help
texts whose ranges are the ones enforced, and defaults that are named."""

import re

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    "content,said",
    [
        ("", "got nothing (the file is empty)"),
        ("- 1\n- 2\n", "got a list of 2 items"),
        ("op,gpus\nallreduce,8\n", "got the text 'op,gpus allreduce,8'"),
    ],
)
def test_a_model_file_that_is_no_mapping_says_what_it_holds(tmp_path, content, said):
    # it said "got NoneType" / "got str", Python's type names
    path = tmp_path / "m.yaml"
    path.write_text(content)
    argv = ["train", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-tokens", "1Mi"])
    assert res.exit_code == 2
    assert f"--model: {path}: expected one mapping of Model fields, {said}" in _one_line(res.stderr)
    assert "Traceback" not in res.stdout + res.stderr


def test_why_so_often_does_not_set_a_goodput_against_itself():
    # 100 GPUs of GB200 NVL72 (two racks): one interruption every ~470 h, so half-hour checkpoints lose as good
    # as nothing and both goodputs print as 96.8 %; the row said "goodput 96.8%, not 96.8%"
    argv = ["reliability", "--system", "gb200-nvl72", "--gpus", "100", "--model", "llama3.1-70b"]
    out = _one_line(runner.invoke(app, argv, env={"COLUMNS": "250"}).stdout)
    assert "why so often" in out
    assert re.search(r"goodput \d+\.\d%, the same to 0\.1 % \(the interruptions are too rare for it to matter\)", out)
    assert not re.search(r"goodput (\d+\.\d%), not \1", out)
