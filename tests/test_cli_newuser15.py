"""What a new-user trial of every sub-command found (session 15): each a CLI run asserting the exit code and
the one-line message or the figure."""


from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_cluster_simulate_refuses_a_negative_seed():
    """``cluster simulate --seed -1`` ended in numpy's ``ValueError: expected non-negative integer`` traceback,
    exit 1 (numpy's SeedSequence takes no negative entropy): refused by the option parser, exit 2."""
    argv = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--jobs", "20", "--seed", "-1"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: hnplan cluster simulate: Invalid value for '--seed': Input should be greater than or equal to 0; "
        "got '-1'; see 'hnplan cluster simulate --help'"
    )
