"""A trace row whose run time is infinite (the simulation would never end) or whose checkpoint period is
negative is refused with one line naming the file, the row and the column, exit 2."""

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()
HEAD = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("60,1,1000,inf,inference,0,1", "row 3, column duration_s: must be finite; has inf"),
        ("inf,8,1000,3600,training,3600,8", "row 3, column arrival_s: must be finite; has inf"),
        (
            "60,8,1000,3600,training,-5,8",
            "row 3, column checkpoint_s: must be >= 0 (0: stateless, inf: never checkpointed); has -5.0",
        ),
    ],
)
def test_a_job_that_never_ends_or_checkpoints_backwards_is_refused(tmp_path, row, says):
    path = tmp_path / "jobs.csv"
    path.write_text(HEAD + "0,8,1000,3600,training,inf,8\n" + row + "\n")  # row 2: inf checkpoint is valid
    res = runner.invoke(app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "72", "--trace", str(path)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"error: {path}: {says}"]
