"""What a new user's tryout of the command line found: each a CLI run asserting the exit code and the one-line
message (and, under ``--json``, the error object) or the figure."""

import json
from pathlib import Path

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


def test_a_repeated_job_id_in_a_trace_is_refused(tmp_path):
    """hnplan's job CSV takes an optional ``job_id`` (jobs are renumbered 0..n-1 by arrival); a repeated id was
    accepted silently, so two rows meant for one job ran as two. Refused, naming the file, the column, the id and
    both rows (the header is row 1), exit 2; empty ids are not compared."""
    trace = tmp_path / "jobs.csv"
    rows = ["7,0,8,1000,60,training,0,1", ",5,8,1000,60,training,0,1", ",6,8,1000,60,training,0,1"]
    rows += ["9,7,8,1000,60,training,0,1", "7,9,8,1000,60,training,0,1"]
    trace.write_text("\n".join([f"job_id,{HEADER}", *rows]) + "\n")
    res = runner.invoke(app, [*SIMULATE, "--trace", str(trace), "--no-failures"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert one_line(res.stderr) == (
        f"error: {trace}: row 6, column job_id: id 7 is row 2's too; each job_id must be unique (or drop the "
        "column: jobs are numbered by arrival)"
    )
    trace.write_text("\n".join([f"job_id,{HEADER}", *rows[:4]]) + "\n")  # unique ids and two empty ones run
    res = runner.invoke(app, [*SIMULATE, "--trace", str(trace), "--no-failures", "--json"])
    assert res.exit_code == 0, res.output


SPEC = """id: bad
name: two problems of each kind
fixed:
  model: llama3.1-8b
  gpus: {gpus}
  tokens: {tokens}
  seq_len: 4096
  global_batch_seqs: 128
axes:
  system: [{systems}]
"""


def test_an_invalid_sweep_spec_reports_every_problem_one_a_line(tmp_path):
    """``hnplan sweep BAD.yaml`` named only the spec's first problem, so each fix met the next: every problem is
    reported, a header line then one line each naming its field path, exit 2; ``--json`` keeps the first field."""
    spec, out = tmp_path / "bad.yaml", tmp_path / "out"
    spec.write_text(SPEC.format(gpus=1.5, tokens="15T", systems="hgx-h100-ib-ndr"))
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--json"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.rstrip().splitlines() == [
        f"error: {spec}: entry 'bad' (SweepSpec) has 2 problems:",
        "  fixed.gpus: expected a whole number >= 1, got 1.5",
        "  fixed.tokens: expected a number, got '15T' (YAML has no unit suffixes: write 15T as 15.0e+12)",
    ]
    assert json.loads(res.stdout)["error"]["path"] == str(spec)
    # the catalog's ids, checked once the fields are valid: both unknown systems named
    spec.write_text(SPEC.format(gpus=8, tokens=1.0e11, systems="hgx-h100-ib-nd, hgx-h100-ib-ndr, nope-sys"))
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(out)])
    assert res.exit_code == 2
    lines = res.stderr.rstrip().splitlines()
    assert lines[0] == f"error: {spec}: entry 'bad' (SweepSpec) has 2 problems:"
    assert lines[1].startswith("  axes.system[0]: unknown system id 'hgx-h100-ib-nd'; nearest: hgx-h100-ib-ndr")
    assert lines[2].startswith("  axes.system[2]: unknown system id 'nope-sys'")
    assert not out.exists()  # refused before any point ran
    # one problem stays one line, as before
    spec.write_text(SPEC.format(gpus=1.5, tokens=1.0e11, systems="hgx-h100-ib-ndr"))
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(out)])
    assert res.exit_code == 2
    assert res.stderr.rstrip().splitlines() == [
        f"error: {spec}: entry 'bad' (SweepSpec) is invalid: fixed.gpus: expected a whole number >= 1, got 1.5"
    ]


def test_infer_separates_thousands_in_counts_as_in_figures():
    """``hnplan infer`` printed ``input tokens 2000`` beside ``output throughput 9,801``: counts under 10,000 had no
    thousands separator while figures did. Every number from 1,000 up is separated; ``--json`` keeps numbers."""
    argv = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000"]
    res = runner.invoke(app, [*argv, "--output-tokens", "1500", "--batch", "8"])
    assert res.exit_code == 0, res.output
    cells = {}
    for line in res.stdout.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) == 4:
            cells[parts[1]] = parts[2]
    assert (cells["input tokens"], cells["output tokens"], cells["batch"]) == ("2,000", "1,500", "8")
    res = runner.invoke(app, [*argv, "--output-tokens", "1500", "--batch", "8", "--json"])
    out = json.loads(res.stdout)
    assert (out["input_tokens"], out["output_tokens"]) == (2000, 1500)


def test_a_sigterm_while_the_sweep_loads_stops_it_in_one_line(tmp_path, monkeypatch):
    """A SIGTERM in a sweep's first seconds, while Dask, pandas and the planners load (before ``run_sweep`` put its
    handler in place), ended the process by the default action, exit 143 and no message, where docs/sweep.md says
    one line and exit 130. The command's guard is in place from its start: the signal sent where ``run_sweep``
    begins stops the run in one line, exit 130, and the previous handler is put back."""
    import os
    import signal

    import hnplan.planning.sweep as sweep_mod

    previous = signal.getsignal(signal.SIGTERM)

    def killed(*args, **kwargs):
        # without a Python handler here the signal would end the test process: refuse to send it
        assert callable(signal.getsignal(signal.SIGTERM)), "no SIGTERM handler while the sweep loads"
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(sweep_mod, "run_sweep", killed)
    spec = Path(__file__).parent / "sweep_small.yaml"
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 130
    assert res.stderr.strip() == "interrupted: stopped by SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is previous


def test_compare_gives_the_whole_units_reason_when_neither_count_has_a_plan():
    """``compare --gpus 3`` buys HGX H100 as one 8-GPU server and weighs a plan on its 8 GPUs too; when neither
    count runs the job, only the 3 GPUs' reason was given. Llama 3.1 405B's weights alone are 810 GB in bf16
    (405e9 x 2 bytes), more than 8 x 80 GB of HBM: both counts are refused, each with its reason, exit 3."""
    argv = ["compare", "--model", "llama3.1-405b", "--gpus", "3", "--tokens", "1T", "--systems", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*argv, "--no-trust", "--no-goodput"])
    assert res.exit_code == 3, res.output
    text = one_line(res.stderr)
    assert text.startswith("infeasible: hgx-h100-ib-ndr: no plan of llama3.1-405b on 3 GPUs fits in memory (")
    assert "; on the 8 GPUs bought (1 whole unit of 8): no plan of llama3.1-405b on 8 GPUs fits in memory (" in text
