"""Bad input files a user hands the command line (a trace with a cell that is no number, a runs file whose
TFLOP/s is above the chip's peak, a parameter file with a bad value): one line naming the file, the column or
field and the line, exit 2, nothing written; and an error no command expects shows its own traceback, not
one about the handler."""

import re
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cli._app import LazyGroup

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
OPENB = ROOT / "data" / "traces" / "alibaba-openb-gpu-sample.csv"
CLUSTER = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]


def _openb_with(tmp_path, line: int, old: str, new: str) -> Path:
    """The first four pods of the committed openb sample with ``old`` replaced by ``new`` on file line ``line``."""
    lines = OPENB.read_text().splitlines()[:5]
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path = tmp_path / "pods.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "old,new,said",
    [
        # creation_time of pod 0003 (file line 3): was a ValueError from pandas, then an AttributeError
        # about click's Abort from the handler, two tracebacks
        ("2690044,12902960", "xyz,12902960", "row 3, column creation_time: must be a number; has 'xyz'"),
        (",1,460,", ",one,460,", "row 3, column num_gpu: must be a number; has 'one'"),  # was a TypeError
        (",1,460,", ",,460,", "row 3, column num_gpu: must be a number; is empty"),
    ],
)
def test_an_openb_trace_cell_that_is_no_number_is_one_line(tmp_path, old, new, said):
    path = _openb_with(tmp_path, 3, old, new)
    res = runner.invoke(app, [*CLUSTER, "--trace", str(path)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert one_line(res.stderr) == f"error: {path}: {said}"


def test_hnplans_own_trace_format_names_the_row_of_a_bad_cell(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        "0,8,1000,3600,training,inf,8\n"
        "10,eight,1000,3600,training,600,8\n"
    )
    res = runner.invoke(app, [*CLUSTER, "--trace", str(path)])
    assert res.exit_code == 2
    assert one_line(res.stderr) == f"error: {path}: row 3, column gpus: must be a number; has 'eight'"


def test_an_unexpected_error_shows_its_own_traceback_and_abort_exits_1(capsys):
    # the handler named click's Abort, which typer 0.2x's vendored click does not have: any error a command
    # did not expect ended in "AttributeError: module 'typer._click.exceptions' has no attribute 'Abort'"
    demo = typer.Typer(cls=LazyGroup, add_completion=False, pretty_exceptions_enable=False)

    @demo.command()
    def boom():
        raise RuntimeError("boom")

    @demo.command()
    def stop():
        raise typer.Abort()

    group = typer.main.get_command(demo)
    with pytest.raises(RuntimeError, match="^boom$"):
        group.main(args=["boom"], prog_name="demo")
    with pytest.raises(SystemExit) as stopped:
        group.main(args=["stop"], prog_name="demo")
    assert stopped.value.code == 1
    assert capsys.readouterr().err.strip() == "Aborted!"


RUNS = ROOT / "docs" / "examples" / "calibration_runs.yaml"


def test_calibrate_refuses_tflops_above_the_peak_and_writes_nothing(tmp_path):
    # 4,300 model TFLOP/s per GPU on an H100 (dense bf16 peak 989.4): a figure per node or mistyped; the fit
    # drove the GEMM efficiency to its bound 1 and wrote the stack file
    runs = tmp_path / "runs.yaml"
    text = RUNS.read_text()
    assert text.count("published: 430\n") == 1
    runs.write_text(text.replace("published: 430\n", "published: 4300\n"))
    out = tmp_path / "cal" / "mine.yaml"
    res = runner.invoke(app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(out)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"error: --runs: {runs}: run llama3-405b-8k-gpus: field published: 4300 TFLOP/s per GPU is above "
        "h100-sxm's dense bf16 peak of 989.4 TFLOP/s; give the measured model_tflops_per_gpu of one GPU"
    )
    assert not out.parent.exists()


def test_report_with_a_bad_parameter_file_leaves_no_output_folder(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("gpus: 0\n")
    out = tmp_path / "reports"
    res = runner.invoke(app, ["report", "--params", str(params), "--out", str(out)])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        f"error: --params {params}: notebook 'design_comparison', parameter 'gpus': must be a positive number; got 0"
    )
    assert not out.exists()  # it made the folder before checking the parameters


def test_a_file_of_another_kind_is_named_as_that_kind(tmp_path):
    # a model file given as --system listed the 54 allowed system keys once per model key (11 times) and every
    # missing system field: about 10,000 characters
    model = tmp_path / "my-8b.yaml"
    model.write_text((ROOT / "data" / "models" / "llama3.1-8b.yaml").read_text())
    argv = ["train", "--model", "llama3.1-8b", "--system", str(model), "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "8"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        f"error: --system: {model}: entry 'llama3.1-8b' is a Model entry (data/models/: its keys layers, hidden, "
        "ffn_hidden, heads, ... are Model fields), not a System"
    )
    # catalog show still names the kind the file is (it tries every kind)
    assert runner.invoke(app, ["catalog", "show", str(model)]).stdout.startswith("models: llama3.1-8b")


def test_unknown_keys_with_no_near_name_list_the_allowed_keys_once(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("id: m\nname: m\nsource: a paper\nfoo: 1\nbar: 2\n")
    res = runner.invoke(app, ["catalog", "validate", str(path), "--kind", "models"])
    assert res.exit_code == 2
    text = one_line(res.stdout + res.stderr)
    assert "field 'foo': unknown key (allowed keys: id, name, source," in text
    assert "field 'bar': unknown key (allowed keys as above)" in text
    assert text.count("allowed keys: ") == 1


@pytest.mark.parametrize(
    "argv,said",
    [
        (["trian"], "hnplan: No such command 'trian'. Did you mean 'train'? See 'hnplan --help'"),
        (
            ["cluster", "simulat"],
            "hnplan cluster: No such command 'simulat'. Did you mean 'simulate'? See 'hnplan cluster --help'",
        ),
        (["xyzzy"], "hnplan: No such command 'xyzzy'; see 'hnplan --help'"),  # nothing near: no guess
    ],
)
def test_a_mistyped_sub_command_gets_the_nearest_one(argv, said):
    res = runner.invoke(app, argv)
    assert res.exit_code == 2
    assert one_line(res.stderr) == f"error: {said}"


def test_a_refused_value_that_appears_in_the_bound_is_still_quoted():
    # "greater than or equal to 0.01" holds the typed "0", so the value was left out of the message
    res = runner.invoke(app, ["tco", "--system", "gb200-nvl72", "--gpus", "72", "--years", "0"])
    assert res.exit_code == 2
    assert "Input should be greater than or equal to 0.01; got '0'; see 'hnplan tco --help'" in one_line(res.stderr)
    res = runner.invoke(app, ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "0"])
    assert res.exit_code == 2 and one_line(res.stderr).count("got") == 1  # a message that says it once


def test_a_runs_file_whose_plan_does_not_make_its_gpus_names_the_field(tmp_path):
    runs = tmp_path / "runs.yaml"
    text = RUNS.read_text()
    assert text.count("gpus: 8192\n") == 1
    runs.write_text(text.replace("gpus: 8192\n", "gpus: 8000\n"))
    res = runner.invoke(
        app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(tmp_path / "c")]
    )
    # a typo in a file that states a run which ran: bad input (exit 2), refused where the run is read, not an
    # infeasible plan (exit 3, as until 2026-12-04)
    assert res.exit_code == 2
    assert "run llama3-405b-8k-gpus" in one_line(res.stderr)
    assert one_line(res.stderr).endswith("fixed: tp x pp x dp x cp = 8 x 16 x 64 x 1 = 8,192, not its gpus 8,000")


def test_a_memory_need_in_thousands_of_gib_has_separators(tmp_path):
    text = (ROOT / "data" / "models" / "llama3.1-8b.yaml").read_text()
    path = tmp_path / "wide.yaml"
    path.write_text(
        text.replace("hidden: 4096\n", "hidden: 409600\n")
        .replace("ffn_hidden: 14336\n", "ffn_hidden: 1433600\n")
        .replace("params_b_published: 8\n", "")  # a model of its own, not the published 8B
    )
    argv = ["train", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "64"])
    assert res.exit_code == 3
    assert re.search(r"the smallest needs \d{1,3}(,\d{3})+\.\d GiB per GPU\)$", one_line(res.stderr))


@pytest.mark.parametrize(
    "replace,said",
    [
        (
            ("model: llama3.1-405b", "modle: llama3.1-405b"),
            "has no parameter 'modle' (did you mean 'model'?); its parameters: model,",
        ),
        (("notebook: design_comparison", "notebook: design_comparisn"), "unknown notebook 'design_comparisn'"),
        (("gpus: 16384", "gpus: 0"), "parameter 'gpus': must be a positive number; got 0"),
    ],
)
def test_catalog_validate_checks_a_scenario_as_report_does(tmp_path, replace, said):
    # `catalog validate s.yaml --kind scenarios` said "valid" for all three, which `report --scenario` refuses
    text = (ROOT / "data" / "scenarios" / "default.yaml").read_text()
    assert replace[0] in text
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace(replace[0], replace[1], 1))
    res = runner.invoke(app, ["catalog", "validate", str(path), "--kind", "scenarios"])
    assert res.exit_code == 2
    assert one_line(res.stderr).startswith(f"invalid: {path}: ") and said in one_line(res.stderr)
    ok = runner.invoke(app, ["catalog", "validate", str(ROOT / "data" / "scenarios" / "default.yaml")])
    assert ok.exit_code == 0 and ok.stdout.strip().endswith("default.yaml: valid")


def test_a_sweep_spec_with_an_unknown_dtype_is_refused_before_it_runs(tmp_path):
    # `dtype: [fp9]` ran, failed every point in the dataset and exited 0
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "id: s\nname: s\nsampling: grid\n"
        "fixed: {model: llama3.1-8b, tokens: 1.0e+12, seq_len: 8192, global_batch_tokens: 1048576}\n"
        "axes:\n  system: [hgx-h100-ib-ndr]\n  gpus: [64]\n  dtype: [bf16, fp9]\n"
    )
    out = tmp_path / "out"
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--workers", "1"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        f"error: {spec}: entry 's' (SweepSpec) is invalid: axes.dtype[1]: expected one of bf16, fp8, fp4, got 'fp9'"
    )
    assert not out.exists()


def test_the_sweep_dtypes_are_the_training_planners():
    from hnplan.catalog.sweeps import TRAIN_DTYPES
    from hnplan.planning.training import TRAIN_DTYPES as PLANNER

    assert tuple(TRAIN_DTYPES) == tuple(PLANNER)


def test_a_mistyped_claim_id_gets_the_nearest_one():
    res = runner.invoke(app, ["claims", "--only", "comm-reduction-8"])
    assert res.exit_code == 2
    assert one_line(res.stderr).startswith(
        "error: --only: unknown claim id 'comm-reduction-8' (did you mean 'comm-reduction-80'?); ids: comm-share-"
    )


def test_compare_names_the_recomputation_in_its_plan_column():
    res = runner.invoke(
        app, ["compare", "--model", "llama3.1-8b", "--gpus", "8", "--tokens", "1e9"], env={"COLUMNS": "300"}
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    assert re.search(r"TP\d+ PP\d+ DP\d+ CP\d+ EP\d+ mb\d+ rc-(none|selective|full)", res.stdout)


def test_a_sweep_whose_scheduler_cannot_be_reached_leaves_no_folder(tmp_path, monkeypatch):
    import hnplan.planning.sweep

    def unreachable(address, timeout_s):
        raise OSError(f"Timed out trying to connect to {address} after {timeout_s:g} s")

    monkeypatch.setattr(hnplan.planning.sweep, "_reach", unreachable)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "id: s\nname: s\nsampling: grid\n"
        "fixed: {model: llama3.1-8b, tokens: 1.0e+12, seq_len: 8192, global_batch_tokens: 1048576}\n"
        "axes:\n  system: [hgx-h100-ib-ndr]\n  gpus: [64]\n"
    )
    out = tmp_path / "out"
    res = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--scheduler", "tcp://nohost:1"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        "error: --scheduler tcp://nohost:1: cannot reach a Dask scheduler there within --connect-timeout 5 s "
        "(Timed out trying to connect to tcp://nohost:1 after 5 s)"
    )
    assert not out.exists()  # it made the folder, then could not reach the scheduler


def test_a_folder_given_as_shapes_file_names_that_flag(tmp_path, monkeypatch):
    # the folder is a parent of the working folder, under which the id "h100-sxm" also reads as a path:
    # the message named --accelerator
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shapes-json", str(tmp_path)])
    assert res.exit_code == 2
    assert one_line(res.stderr) == f"error: --shapes-json {tmp_path}: Is a directory"


def test_an_unknown_dtype_in_a_shapes_file_names_the_file_and_item(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text('[["bf16", 8, 8, 8], ["fp9", 8, 8, 8]]')
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shapes-json", str(path)])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        f"error: --shapes-json {path}: item 1: unknown dtype 'fp9'; allowed: fp32, tf32, bf16, fp16, fp8, int8, fp4, int4"
    )


def test_a_trace_run_is_not_told_to_simulate_more_days_or_load(tmp_path):
    # the steady-state note said "simulate --days 2.1 or about 3,400 jobs (--jobs)", which only cut a trace;
    # and --load was silently ignored with a trace
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        + "".join(f"{60 * i},1,1000,36000,training,3600,1\n" for i in range(10))
    )
    args = [
        "cluster",
        "simulate",
        "--system",
        "hgx-h100-ib-ndr",
        "--gpus",
        "16",
        "--trace",
        str(trace),
        "--no-failures",
    ]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    import json

    d = json.loads(res.stdout)
    assert d["jobs_from"] == "trace"
    assert d["steady_state_note"].endswith(
        "replay a trace of 2.1 days or about 3,400 jobs (--days and --jobs only cut this one)"
    )
    res = runner.invoke(app, [*args, "--load", "0.5"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        "error: --load scales a mix's arrivals; a trace's jobs arrive when it recorded them (drop --load)"
    )


def test_a_sweep_spec_takes_dtypes_in_any_case_as_the_cli_does(tmp_path):
    # `--dtype FP8` reads as fp8 on the command line, while `dtype: FP8` in a sweep spec was refused
    # ("expected one of bf16, fp8, fp4, got 'FP8'"); the spec lower-cases it too, under fixed and under axes
    from hnplan.catalog.sweeps import load_sweep_spec

    spec = tmp_path / "s.yaml"
    head = "id: s\nname: s\nsampling: grid\nfixed: {model: llama3.1-8b, tokens: 1.0e+12, seq_len: 8192, "
    spec.write_text(
        head + "global_batch_tokens: 1048576, dtype: FP8}\naxes:\n  system: [hgx-h100-ib-ndr]\n  gpus: [64]\n"
    )
    assert load_sweep_spec(spec).fixed["dtype"] == "fp8"
    spec.write_text(
        head + "global_batch_tokens: 1048576}\naxes:\n  system: [hgx-h100-ib-ndr]\n  gpus: [64]\n  dtype: [BF16, Fp8]\n"
    )
    assert load_sweep_spec(spec).axes["dtype"] == ["bf16", "fp8"]


def test_a_runs_file_reads_its_dtype_and_metric_in_any_case(tmp_path):
    # dtype: BF16 was refused ("Input should be 'bf16', 'fp8' or 'fp4'") while --dtype, gemm --shapes-json and
    # sweep specs read it in any case, and metric: MFU or Model_TFLOPs_per_GPU likewise; the fit is the same
    import json

    runs = tmp_path / "runs.yaml"
    text = RUNS.read_text()
    assert text.count("dtype: bf16\n") == 2 and text.count("metric: model_tflops_per_gpu\n") == 2
    text = text.replace("metric: model_tflops_per_gpu\n", "metric: Model_TFLOPs_per_GPU\n")
    runs.write_text(text.replace("dtype: bf16\n", "dtype: ' BF16'\n", 1).replace("dtype: bf16\n", "dtype: Bf16\n"))
    fits = []
    for name, path in (("lower", RUNS), ("upper", runs)):
        argv = ["calibrate", "--runs", str(path), "--stack", "megatron-core", "--json"]
        res = runner.invoke(app, [*argv, "--out", str(tmp_path / name / "s.yaml")])
        assert res.exit_code == 0, res.stdout + res.stderr
        fits.append(json.loads(res.stdout))
    assert [r["error_after_pct"] for r in fits[1]["runs"]] == [r["error_after_pct"] for r in fits[0]["runs"]]
    assert fits[1]["rms_error_after_pct"] == fits[0]["rms_error_after_pct"] < 1.0
