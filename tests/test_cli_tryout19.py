"""What a new user's trial of the shared-cluster simulation, the sweep and the planners found: each a CLI run
asserting the exit code and the one-line message or the figure."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_cluster_text_separates_thousands_in_job_counts(tmp_path):
    """The job counts of ``cluster simulate``'s table read ``done 20000`` and a job-size row ``18751`` beside
    queueing delays written ``205,347``: counts are printed with thousands separators, as elsewhere in hnplan.
    1,001 one-GPU jobs of 60 s, one every 10 s, on one 8-GPU server: at most 6 run at once (60 / 10), none
    waits, every one is done."""
    rows = ["arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp"]
    rows += [f"{10 * i},1,1000,60,development,0,1" for i in range(1001)]
    trace = tmp_path / "jobs.csv"
    trace.write_text("\n".join(rows) + "\n")
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--trace", str(trace)]
    res = runner.invoke(app, [*argv, "--no-failures"])
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert "done 1,001, running 0, queued 0, rejected 0" in text
    size_row = next(line for line in text.splitlines() if line.startswith("│ 1 "))
    assert size_row.split("│")[2].strip() == "1,001"  # the jobs column of the 1-GPU row
    assert "max 6" in text  # concurrent jobs: 60 s runs arriving 10 s apart


def test_cluster_empty_trace_file_says_it_is_empty(tmp_path):
    """An empty ``--trace`` file was refused as ``not a CSV file (No columns to parse from file)``, pandas'
    words: it now says the file is empty and what to give, exit 2."""
    trace = tmp_path / "empty.csv"
    trace.write_text("")
    res = runner.invoke(
        app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--trace", str(trace)]
    )
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        f"error: --trace: trace file {trace} is empty: give a CSV with a header row and one row per job"
    )


def test_compare_says_when_a_design_trains_on_another_count_than_asked():
    """``compare --gpus 3`` planned GB200 NVL72 on its whole 72-GPU rack and HGX B200 on its 8-GPU server (the 3
    GPUs asked for hold no plan of Llama 3.1 70B: 436.8 GiB per GPU on H100) but said only ``ok``, under a
    title of 3 GPUs per design; the verdict said ``$896k capex for 8.0 GPUs`` and the JSON ``gpus_bought:
    72.0`` (a float column, as the design without a plan has none). Now the status says the count trained
    on and why, and the counts are whole."""
    argv = ["compare", "--model", "llama3.1-70b", "--gpus", "3", "--tokens", "15e12", "--no-trust", "--json"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    by = {d["system"]: d for d in out["designs"]}
    assert by["gb200-nvl72"]["status"] == "ok; 72 of 72 GPUs bought train (the 3 asked for have no plan)"
    assert by["hgx-b200-ib-xdr"]["status"] == "ok; 8 of 8 GPUs bought train (the 3 asked for have no plan)"
    assert by["gb200-nvl72"]["gpus_bought"] == 72 and isinstance(by["gb200-nvl72"]["gpus_bought"], int)
    assert by["hgx-b200-ib-xdr"]["gpus_bought"] == 8 and isinstance(by["hgx-b200-ib-xdr"]["gpus_bought"], int)
    assert by["hgx-h100-ib-ndr"]["status"].startswith("no plan: no plan of llama3.1-70b on 3 GPUs fits in memory")
    assert "capex for 8 GPUs)" in out["verdict"] and "8.0 GPUs" not in out["verdict"]


SEQ_TOO_LONG = (
    "error: --seq-len {n} exceeds llama3.1-70b's maximum sequence length 131,072 (field max_seq of its catalog entry)"
)


@pytest.mark.parametrize(
    "argv,seq",
    [
        # a batch of 16Mi tokens is a multiple of 262,144: compare planned it per design and said exit 3
        (
            ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12", "--seq-len", "262144"],
            "262,144",
        ),
        # not a multiple of the default batch: compare and train named the batch, not the sequence
        (
            ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12", "--seq-len", "200000"],
            "200,000",
        ),
        (
            ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--seq-len", "200000"]
            + ["--global-batch-tokens", "16Mi"],
            "200,000",
        ),
        (
            ["size", "--model", "llama3.1-70b", "--tokens", "15T", "--deadline-days", "60", "--system", "gb200-nvl72"]
            + ["--seq-len", "200000"],
            "200,000",
        ),
    ],
)
def test_a_sequence_beyond_the_models_max_seq_is_bad_input_first(argv, seq):
    """Llama 3.1 70B's ``max_seq`` is 131,072 (its catalog entry): a longer ``--seq-len`` is bad input (exit 2)
    named before the batch's checks, in train's words, in ``train``, ``size`` and ``compare`` alike."""
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == SEQ_TOO_LONG.format(n=seq)


@pytest.mark.parametrize("source", [["--jobs", "20"], ["--trace", "TRACE", "--no-failures"]])
def test_openb_nodes_take_jobs_that_name_no_gpu_model(source, tmp_path):
    """``--nodes openb`` with the default mix, or with a trace without a ``gpu_spec`` column (hnplan's own CSV,
    the docs' ``alibaba-openb-gpu-sample.csv``), ended in ``IndexError: boolean index did not match`` (exit 1):
    the jobs' model masks were counted with ``len`` of a mapping of columns, one per column. Every job accepts
    any model (mask 0): the run ends with every job done."""
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        "0,8,1000,3600,training,1800,8\n60,1,500,600,inference,0,1\n300,4,1000,1200,fine-tuning,600,4\n"
    )
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "6212", "--nodes", "openb", "--json"]
    res = runner.invoke(app, argv + [str(trace) if a == "TRACE" else a for a in source])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["jobs"]["done"] == (20 if source[0] == "--jobs" else 3) and out["jobs"]["unplaceable"] == 0
    assert set(out["by_gpu_model"]) == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}


def test_sigterm_while_the_local_cluster_starts_is_raised_after():
    """``kill -TERM`` about 9 s into ``hnplan sweep data/sweeps/example.yaml --workers 2`` (while ``LocalCluster``
    started its workers) exited 130 but printed distributed's ``close_clusters`` traceback (``AssertionError:
    Status.init``: the interruption left the cluster half made). The signal is now held until the cluster is made,
    then goes to the handler in place before (here ``_sigterm_as_interrupt``'s), so the cluster closes whole."""
    import os
    import signal

    from hnplan.planning.sweep_signals import _sigterm_as_interrupt, _sigterm_held

    previous = signal.getsignal(signal.SIGTERM)
    reached = False
    with pytest.raises(KeyboardInterrupt, match="stopped by SIGTERM"):
        with _sigterm_as_interrupt():
            with _sigterm_held():
                os.kill(os.getpid(), signal.SIGTERM)
                reached = True  # not raised here: held until the block ends
    assert reached and signal.getsignal(signal.SIGTERM) is previous


def test_sigterm_held_under_the_default_handler_still_ends_the_process():
    """Held, not swallowed: with no handler of Python's own in place (SIG_DFL) the signal recorded inside the block
    ends the process once the block is left, as it would have without the block (exit by SIGTERM, -15), and the
    line after the block never runs. An ignored SIGTERM (SIG_IGN) stays ignored."""
    import signal
    import subprocess
    import sys

    code = (
        "import os, signal\n"
        "from hnplan.planning.sweep_signals import _sigterm_held\n"
        "signal.signal(signal.SIGTERM, signal.{handler})\n"
        "with _sigterm_held():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('held', flush=True)\n"
        "print('after', flush=True)\n"
    )
    ended = subprocess.run([sys.executable, "-c", code.format(handler="SIG_DFL")], capture_output=True, text=True)
    assert ended.returncode == -signal.SIGTERM and ended.stdout.split() == ["held"]
    ignored = subprocess.run([sys.executable, "-c", code.format(handler="SIG_IGN")], capture_output=True, text=True)
    assert ignored.returncode == 0 and ignored.stdout.split() == ["held", "after"]


@pytest.mark.parametrize(
    "argv,said",
    [
        (
            ["cluster", "sim"],
            "error: hnplan cluster: No such command 'sim'. Did you mean 'simulate'? See 'hnplan cluster --help'",
        ),
        (["catal", "list"], "error: hnplan: No such command 'catal'. Did you mean 'catalog'? See 'hnplan --help'"),
        (["c"], "error: hnplan: No such command 'c'; see 'hnplan --help'"),  # six sub-commands begin with c
    ],
)
def test_a_sub_command_typed_short_is_named(argv, said):
    """``hnplan cluster sim`` said only ``No such command 'sim'``: too short for the close-match ratio (0.55 under
    0.6). A word that begins one sub-command's name alone is named as the one meant, exit 2."""
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and res.stderr.strip() == said


def test_compare_refuses_a_dtype_its_stack_cannot_train_once():
    """``compare --dtype fp8 --stack megatron-lm-2021`` (a stack that trains in bf16 only) planned each design,
    failed each with the stack's message and ended ``infeasible``, exit 3, the message three times; ``train`` and
    ``size`` refuse it as bad input. One stack serves every design: one line, exit 2, as they say it."""
    argv = ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12", "--dtype", "fp8"]
    res = runner.invoke(app, [*argv, "--stack", "megatron-lm-2021"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: --dtype fp8 is not available with stack 'megatron-lm-2021': it trains in bf16 only (field "
        "train_dtypes of data/stacks/megatron-lm-2021.yaml); choose one of those or another stack"
    )


def test_cluster_progress_bar_follows_stderr_not_stdout(monkeypatch):
    """``cluster simulate ... > result.txt`` at a terminal showed no bar however long the run (it asked whether
    stdout was a terminal), where the bar is drawn on stderr, as ``claims`` and ``tco --utilisation simulated``
    ask. With stderr a terminal and stdout captured, the run goes through the delayed bar; with ``--json`` not."""
    import contextlib

    import hnplan.cli._progress as progress
    import hnplan.cli.cluster_cmd as cmd

    labels = []

    @contextlib.contextmanager
    def bar(label, delay_s=1.0):
        labels.append(label)
        yield lambda done: None

    class Terminal:
        is_terminal = True

    monkeypatch.setattr(cmd, "err_console", Terminal())
    monkeypatch.setattr(progress, "delayed_progress", bar)
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "16", "--jobs", "20"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    assert labels == ["simulating"] and "utilisation (productive)" in res.stdout
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0 and labels == ["simulating"]
