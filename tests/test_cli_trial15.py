"""What a fourth new-user trial of the command line found: each a CLI run asserting the exit code and the
figure or the one-line message."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


# Llama 3.1 405B on one 8-GPU H100 server at TP 8, full recomputation, ZeRO-1: the bf16 weights alone are
# 405e9 x 2 B / 8 = 94 GiB per GPU, more than the 79.1 GiB an H100 SXM shows a program
TRAIN_405B_ON_8 = [
    "train",
    "--model",
    "llama3.1-405b",
    "--system",
    "hgx-h100-ib-ndr",
    "--gpus",
    "8",
    "--seq-len",
    "8192",
    "--global-batch-size",
    "8",
    *("--tp", "8", "--pp", "1", "--dp", "1", "--microbatch-size", "1", "--recompute", "full", "--zero", "1"),
]


def test_a_fully_given_train_plan_that_does_not_fit_is_reported_then_exits_3():
    # it printed the table with "does NOT fit" and exited 0: a script could not tell it from a plan that runs
    res = runner.invoke(app, TRAIN_405B_ON_8)
    assert res.exit_code == 3
    assert "does NOT fit" in res.stdout and "step time" in res.stdout  # the breakdown still says why
    line = one_line(res.stderr)
    assert line.startswith("infeasible: the plan given does not fit in memory (per GPU: ")
    assert "of 79.1 GiB" in line and "--offload auto" in line
    res = runner.invoke(app, [*TRAIN_405B_ON_8, "--json"])
    assert res.exit_code == 3
    d = json.loads(res.stdout)  # one object on stdout, the plan's, not an error object
    assert d["fits"] is False and d["memory_per_gpu_gib"] > 94 and d["hbm_gib"] < 80
    assert "error" not in d


def test_a_search_with_no_plan_that_fits_still_exits_3_with_one_line():
    argv = [a for a in TRAIN_405B_ON_8[:11]]  # model, system, 8 GPUs, sequence and batch: the layout searched
    res = runner.invoke(app, argv)
    assert res.exit_code == 3 and res.stdout == ""
    assert one_line(res.stderr).startswith("infeasible: no plan of llama3.1-405b on 8 GPUs fits in memory")


def test_memory_that_does_not_fit_even_spilled_exits_3_after_the_table():
    # 405B at TP 8 alone: 960 GiB per GPU; the host takes 256 GiB of optimizer states, 625 GiB has nowhere to go
    argv = ["memory", "--model", "llama3.1-405b", "--mode", "train", "--system", "hgx-h100-ib-ndr"]
    argv += ["--seq-len", "8192", "--tp", "8"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 3
    d = json.loads(res.stdout)
    assert d["status"] == "does-not-fit" and d["total_gib"] == pytest.approx(960, abs=1)
    # what neither the 79.1 GiB of HBM nor the host's 256 GiB of optimizer states holds: 960.2 - 79.1 - 256 = 625.1
    assert d["spill"]["unplaced_gib"] == pytest.approx(d["total_gib"] - d["spill"]["hbm_gib"] - 256.0)
    assert d["spill"]["hbm_gib"] == 79.11 and d["spill"]["unplaced_gib"] == pytest.approx(625, abs=1)
    res = runner.invoke(app, argv)
    assert res.exit_code == 3 and "does-not-fit" in res.stdout
    assert one_line(res.stderr) == (
        f"infeasible: llama3.1-405b needs {d['total_gib']:,.2f} GiB per GPU; hgx-h100-ib-ndr has 79.11 GiB of HBM; "
        f"{d['spill']['unplaced_gib']:,.2f} GiB of it finds no room on the slower tiers either"
    )


CLUSTER = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]
JOBS_HEAD = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,3600,training,3600,8\n"


@pytest.mark.parametrize(
    ("row", "said"),
    [  # the bad job is on the file's third line: a spreadsheet shows it as row 3 (the header is row 1)
        ("10,0,1000,3600,training,3600,1", "row 3, column gpus: must be > 0; has 0"),
        ("10,eight,1000,3600,training,3600,1", "row 3, column gpus: must be a number; has 'eight'"),
        ("10,2,1000,,training,3600,1", "row 3, column duration_s: must be a number; is empty"),
        (
            "10,2,1000,60,batch,3600,1",
            "row 3, column cls: the class must be one of inference, training, fine-tuning, development; has 'batch'",
        ),
        ("10,1,1500,60,training,3600,1", "row 3, column gpu_milli: must be <= 1000; has 1500"),
        (
            "10,2,500,60,training,3600,1",
            "row 3, column gpu_milli: a fractional GPU (gpu_milli 500 < 1000) needs gpus = 1; the row has gpus = 2",
        ),
        (
            "10,12,1000,60,training,3600,8",
            "row 3, column tp: tp = 8 must divide the job's 12 GPUs (its tensor-parallel groups)",
        ),
    ],
)
def test_a_bad_cell_of_a_trace_names_the_file_row_and_column(tmp_path, row, said):
    # "column gpus must be > 0 in every row" left the user to hunt for the row in a file of thousands
    path = tmp_path / "jobs.csv"
    path.write_text(JOBS_HEAD + row + "\n")
    res = runner.invoke(app, [*CLUSTER, "--trace", str(path)])
    assert res.exit_code == 2
    assert one_line(res.stderr) == f"error: {path}: {said}"


def test_a_helios_rows_number_counts_the_rows_the_loader_drops(tmp_path):
    # the CPU job on row 2 is dropped before the job table is checked; the 5-GPU job on 2 nodes (row 3) has
    # ceil(5 / 2) = 3 GPUs per node, which does not divide 5: the error names row 3 of the file (not row 1)
    # and the file's columns (not tp, which the loader derives)
    from hnplan.cluster.traces import read_helios
    from hnplan.errors import InputError

    head = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        head + "1,u,vc,0,4,1,COMPLETED,2020-06-09 18:41:01,,,60,0\n2,u,vc,5,4,2,COMPLETED,2020-06-09 18:42:01,,,60,0\n"
    )
    with pytest.raises(InputError) as e:
        read_helios(path)
    assert str(e.value) == (
        f"{path}: row 3, columns gpu_num and node_num: 5 GPUs on 2 nodes do not split into equal groups of "
        "ceil(5 / 2) = 3 GPUs per node, as the simulation places a job"
    )


def test_a_share_whose_interval_crosses_0_is_not_clipped_but_bounded_and_said():
    # three replications of 200 jobs on 64 GPUs: fragmentation's runs spread around a mean near 1 % (0.65, 0.65,
    # 2.0 %), and t(2, 0.975) = 4.30 takes the Student-t interval below 0; it printed "95 % CI 0.0% to ..."
    # (clipped). Seed 2: since the time means are integrated over the state changes, two of seed 1's runs read
    # exactly 0 (no queued job was ever stranded; the samples caught moments between an arrival and its pass)
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "200", "--seed", "2"]
    argv += ["--replications", "3"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.stderr
    c = json.loads(res.stdout)["ci95"]["fragmentation"]
    assert c["low"] < 0 < c["bounded_low"] < c["mean"] < c["bounded_high"] < 1  # the logit interval stays inside
    res = runner.invoke(app, argv, env={"COLUMNS": "400"})
    text = one_line(res.stdout)
    assert (
        f"{c['mean']:.1%} (95 % CI {c['bounded_low']:.1%} to {c['bounded_high']:.1%}, Student-t on the logit scale; "
        f"the plain interval, {c['low']:.1%} to {c['high']:.1%}, crosses 0% with 3 replications)"
    ) in text


def test_simulated_utilisation_reports_progress_and_is_cached_on_disk(monkeypatch):
    # the planner passes the on-disk cache in (the cluster package imports no planner's cache)
    from hnplan.cluster import utilisation
    from hnplan.planning.design import simulated_utilisation_cached

    monkeypatch.setattr(utilisation, "_DONE", {})
    kw = dict(jobs=300, seed=4242, replications=2)  # a seed no other test runs: not in the cache yet
    seen: list[float] = []
    first = simulated_utilisation_cached("hgx-h100-ib-ndr", 64, progress=seen.append, **kw)
    assert seen[-1] == 1.0 and any(0 <= x < 1 for x in seen) and seen == sorted(seen)
    monkeypatch.setattr(utilisation, "_DONE", {})  # a new process: the runs come back from the disk cache
    seen.clear()
    again = simulated_utilisation_cached("hgx-h100-ib-ndr", 64, progress=seen.append, **kw)
    assert seen == [1.0] and again == first
    monkeypatch.setattr(utilisation, "_DONE", {})  # without the planner's cache the runs are simulated again
    seen.clear()
    plain = utilisation.simulated_utilisation("hgx-h100-ib-ndr", 64, progress=seen.append, **kw)
    assert seen[-1] == 1.0 and any(0 <= x < 1 for x in seen) and plain == first


def test_simulation_seconds_is_the_steady_jobs_times_three_runs_at_0_3_ms():
    # the default mix on 1,024 GPUs: about 27,000 jobs of 14 days a run (steady_days), 3 runs x 0.3 ms a job:
    # 26,751 x 3 x 0.3 ms = 24.1 s (measured: 24.6 s of CPU for the three runs, 26,657 jobs each)
    from hnplan.cluster.utilisation import simulation_seconds, steady_days

    _, jobs = steady_days("default", 1024)
    assert simulation_seconds("hgx-h100-ib-ndr", 1024) == jobs * 3 * 0.3e-3
    assert 23 < simulation_seconds("hgx-h100-ib-ndr", 1024) < 25


def test_the_lazy_console_takes_a_rich_progress_bar(capsys):
    # `cluster simulate` on a terminal drew its bar on err_console and failed at once: "TypeError:
    # '_LazyConsole' object does not support the context manager protocol" (rich enters the console)
    from rich.progress import Progress

    from hnplan.cli._app import _LazyConsole

    lazy = _LazyConsole(stderr=True, force_terminal=True)
    with lazy as inner:
        assert inner is lazy._console
    with Progress(console=lazy, transient=True) as bar:
        print("a line while the bar is drawn")  # rich's proxy of stdout prints it inside `with console:`
        bar.update(bar.add_task("x", total=1.0), completed=1.0)


def test_memory_says_no_kv_cache_fits_instead_of_a_negative_size():
    # 405B at TP 1 for inference: 756 GiB of bf16 weights on one 79 GiB H100; "KV cache that fits [GiB]
    # -688.22" read as a size
    argv = ["memory", "--model", "llama3.1-405b", "--mode", "infer", "--system", "hgx-h100-ib-ndr"]
    argv += ["--seq-len", "1000", "--tp", "1"]
    d = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    over = -d["kv_capacity"]["kv_cache_gib"]
    assert over > 600 and d["kv_capacity"]["max_tokens"] == 0
    res = runner.invoke(app, argv, env={"COLUMNS": "200"})
    assert res.exit_code == 0  # it spills to host and NVMe: slow, but it runs (status spills)
    assert f"none (weights and overheads {over:.2f} GiB over)" in res.stdout


def test_a_philly_job_is_named_by_its_id_not_a_row(tmp_path):
    # a JSON log has no rows: the job on three GPUs of one machine and two of another (5 on 2 machines,
    # ceil(5 / 2) = 3 per machine) is named by its jobid and where its sizes come from
    from hnplan.cluster.traces import read_philly
    from hnplan.errors import InputError

    def machine(n):
        return {"ip": "m", "gpus": [f"gpu{i}" for i in range(n)]}

    job = {
        "status": "Pass",
        "jobid": "application_5",
        "submitted_time": "2017-10-07 01:11:39",
        "attempts": [{"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 02:12:09", "detail": []}],
    }
    job["attempts"][0]["detail"] = [machine(3), machine(2)]
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps([job]))
    with pytest.raises(InputError) as e:
        read_philly(path)
    assert str(e.value) == (
        f"{path}: job application_5, attempts[0].detail (its machines' gpus): 5 GPUs on 2 nodes do not split into "
        "equal groups of ceil(5 / 2) = 3 GPUs per node, as the simulation places a job"
    )
