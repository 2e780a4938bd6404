"""What a new user's tryout of the command line found: each a CLI run asserting the exit code and the one-line
message (and, under ``--json``, the error object) or the figure."""

import json

from typer.testing import CliRunner

from hnplan.cli import app
from tests.clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

SIMULATE = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "8"]
HEADER = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp"


def test_a_missing_trace_names_the_flag_and_its_json_error_the_path(tmp_path):
    """``--trace missing.csv`` said ``trace file missing.csv not found`` without the flag, and a trace's errors
    under ``--json`` had no ``path`` (a catalog file's do): the flag is named and the path given."""
    missing = tmp_path / "missing.csv"
    res = runner.invoke(app, [*SIMULATE, "--trace", str(missing), "--json"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert one_line(res.stderr) == f"error: --trace: trace file {missing} not found"
    assert json.loads(res.stdout)["error"] == {
        "kind": "input",
        "exit_code": 2,
        "message": f"--trace: trace file {missing} not found",
        "path": str(missing),
    }
    bad = tmp_path / "jobs.csv"  # an error inside the file: row 2 (the header is row 1) runs -5 s
    bad.write_text(f"{HEADER}\n0,8,1000,-5,training,0,1\n")
    res = runner.invoke(app, [*SIMULATE, "--trace", str(bad), "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["error"]
    assert err["message"] == f"{bad}: row 2, column duration_s: must be > 0; has -5"
    assert err["path"] == str(bad)
