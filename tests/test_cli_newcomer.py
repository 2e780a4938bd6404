"""What a first-time user trips over at the command line: messages that say what is wrong in words, help
texts whose ranges are the ones enforced, and defaults that are named."""

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
