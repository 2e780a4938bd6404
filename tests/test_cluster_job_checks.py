"""A trace row whose run time is infinite (the simulation would never end) or whose checkpoint period is
negative is refused with one line naming the file, the row and the column, exit 2; a cluster larger than one
scale-out fabric of the design is refused by the Python API as by the command line."""

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cluster import simulate_cluster
from hnplan.errors import InputError

runner = CliRunner()
HEAD = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("60,1,1000,inf,inference,0,1", "row 3, column duration_s: must be finite; has inf"),
        ("inf,8,1000,3600,training,3600,8", "row 3, column arrival_s: must be finite; has inf"),
        # finite but past any cluster's life (15 years = 15 x 365.25 x 86,400 s = 4.734e8 s): a unit mistake, and
        # 1e300 overflowed the steady-state figures (a traceback)
        (
            "60,1,1000,1e300,inference,0,1",
            "row 3, column duration_s: a run time over 15 years (4.734e+08 s) is no cluster job's (seconds "
            "expected); has 1e+300",
        ),
        (  # an arrival of 1e300 s never ended (the simulation ran on)
            "1e300,8,1000,3600,training,3600,8",
            "row 3, column arrival_s: arrives more than 15 years (4.734e+08 s) after the first job (seconds "
            "expected); has 1e+300",
        ),
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


@pytest.mark.parametrize(
    ("row", "says"),
    [
        # 8.5 GPUs were read as 8 (and tp 8.5 as 8): the job ran on a size the file does not give
        ("60,8.5,1000,3600,training,3600,1", "row 3, column gpus: must be a whole number; has 8.5"),
        ("60,8,1000,3600,training,3600,8.5", "row 3, column tp: must be a whole number; has 8.5"),
        ("60,1,500.5,3600,development,0,1", "row 3, column gpu_milli: must be a whole number; has 500.5"),
    ],
)
def test_a_fraction_of_a_count_is_refused_not_truncated(tmp_path, row, says):
    path = tmp_path / "jobs.csv"
    path.write_text(HEAD + "0,8,1000,3600,training,3600,8.0\n" + row + "\n")  # row 2: 8.0 is a whole number
    res = runner.invoke(app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "72", "--trace", str(path)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"error: {path}: {says}"]


def test_a_tp_group_larger_than_the_job_is_refused_not_lowered(tmp_path):
    # a TP-8 group of a 4-GPU job is not a job that can run: it was silently run as one TP-4 group
    path = tmp_path / "jobs.csv"
    path.write_text(HEAD + "0,8,1000,3600,training,3600,8\n60,4,1000,3600,training,3600,8\n")
    res = runner.invoke(app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "72", "--trace", str(path)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"error: {path}: row 3, column tp: a TP group of 8 GPUs is larger than the job's 4 GPUs; give tp <= gpus"
    ]
    # tp equal to the job's GPUs is one group of all of them, kept as given
    from hnplan.cluster.jobs import check_jobs

    jobs = {"arrival_s": [0.0], "gpus": [4], "gpu_milli": [1000], "duration_s": [60.0], "cls": ["training"]}
    assert check_jobs({**jobs, "checkpoint_s": [0.0], "tp": [4]})["tp"].tolist() == [4]


@pytest.mark.parametrize(
    ("system", "gpus", "most"), [("hgx-h100-ib-ndr", 65537, "65,536"), ("gb200-nvl72", 65521, "65,520")]
)
def test_the_python_api_refuses_gpus_beyond_one_fabric_as_the_cli_does(system, gpus, most):
    # 64-port QM9700: a 3-tier fat-tree of 64^3 / 4 = 65,536 ports, one per GPU on HGX; GB200 in whole 72-GPU
    # racks, 910 x 72 = 65,520: refused before any topology is built or job drawn, naming the argument
    from hnplan.cluster import replicate_cluster

    msg = f"gpus {gpus} exceeds the {most} GPUs of {system} one scale-out fabric joins"
    with pytest.raises(InputError, match=msg):
        simulate_cluster(system, gpus, n_jobs=5, seed=0)
    with pytest.raises(InputError, match=msg):
        replicate_cluster(system, gpus, 2, n_jobs=5, seed=0, workers=2)
