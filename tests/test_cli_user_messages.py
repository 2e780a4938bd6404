"""Messages a new user read: a deadline of one day in the singular, a trace cell ``nan`` quoted as written,
``defer`` with a scheduler period of 0 refused by the library as by the command line."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.errors import InputError

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

HEADER = "job_id,arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,0,8,1000,3600,training,0,1\n"


def test_size_says_one_day_not_one_days():
    # 1e17 tokens of a 405B model in 1 day need ~2.9e9 GPUs at 100 % MFU (6 x 405e9 x 1e17 FLOP over
    # 86,400 s x 989e12 FLOP/s): past the 65,536 the fabric joins, so the one line names the deadline
    args = ["size", "--model", "llama3.1-405b", "--tokens", "1e17", "--system", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*args, "--deadline-days", "1", "--json"])
    assert res.exit_code == 3, res.output
    msg = json.loads(res.stdout)["error"]["message"]
    assert "tokens within 1 day needs at least" in msg and "1 days" not in msg
    two = json.loads(runner.invoke(app, [*args, "--deadline-days", "2", "--json"]).stdout)["error"]["message"]
    assert "tokens within 2 days needs at least" in two


@pytest.mark.parametrize(
    ("cell", "says"),
    [("nan", "has 'nan'"), ("NA", "has 'NA'"), ("", "is empty")],
)
def test_a_trace_cell_without_a_number_names_file_row_and_column(tmp_path, cell, says):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + f"1,10,8,1000,{cell},training,0,1\n")
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(trace)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    # the header is row 1, the first job row 2: the nan is on row 3
    assert res.stderr.strip() == f"error: {trace}: row 3, column duration_s: must be a number; {says}"


def test_simulate_cluster_refuses_defer_with_no_scheduler_period():
    from hnplan.cluster import simulate_cluster

    with pytest.raises(InputError, match=r"^sched_interval_s 0 with defer: no pass at submission and none periodic"):
        simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=5, defer=True, sched_interval_s=0)
    # the command line gives the same rule in its flags' names
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "5", "--defer"]
    res = runner.invoke(app, [*argv, "--sched-interval", "0"])
    assert res.exit_code == 2
    assert res.stderr.strip().startswith("error: --sched-interval 0 with --defer: no pass at submission")
    assert res.stderr.strip().endswith("or drop --defer")
