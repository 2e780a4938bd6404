"""Bad input at the command line: one line naming the file, flag or parameter, exit 2, never a traceback.

The fuzz test draws a bad input (hypothesis) from the ways issue 17 found to break the CLI: infinite or
not-a-number flags, a folder or a binary file or a missing file where a YAML file is expected, a YAML file
with a key given twice, parameter overrides out of range, an output folder that cannot be written. Each run
must exit 2, print no traceback, name the offending item, with ``--json`` print ``{"error": {...}}`` on stdout,
and leave an earlier report exactly as it was.
"""

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan import __version__
from hnplan.catalog.loader import read_yaml
from hnplan.cli import app
from hnplan.errors import CatalogError

from clitext import one_line

runner = CliRunner()

SIZE = ["size", "--model", "llama3.1-8b", "--tokens", "1e12", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]
TCO = ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]
RELIABILITY = ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--model", "llama3.1-8b"]


def _check(res, needle: str, json_: bool = False):
    out = res.stdout + res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out
    assert res.exit_code == 2, out
    assert needle in one_line(res.stderr), res.stderr
    if json_:
        err = json.loads(res.stdout)["error"]
        assert err["exit_code"] == 2 and needle in one_line(err["message"])


# -- the cases, one by one ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv,needle",
    [
        (SIZE[:4] + ["inf"] + SIZE[5:], "--tokens must be a finite number; got inf"),
        (TCO + ["--pue", "inf"], "--pue must be a finite number; got inf"),
        (SIZE[:-2] + ["--deadline-days", "inf"], "--deadline-days must be a finite number"),
        (TCO + ["--years", "inf"], "--years must be a finite number"),
        (TCO + ["--electricity-usd-per-kwh", "inf"], "--electricity-usd-per-kwh must be a finite number"),
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_non_finite_flags_refused(argv, needle, json_):
    _check(runner.invoke(app, argv + (["--json"] if json_ else [])), needle, json_)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (TCO + ["--years", "1e6"], "--years must be <= 15; got 1e+06"),
        (TCO + ["--pue", "50"], "--pue must be <= 3; got 50"),
        (TCO + ["--electricity-usd-per-kwh", "10"], "--electricity-usd-per-kwh must be <= 2; got 10"),
        (TCO + ["--staff-usd-per-year", "1e12"], "--staff-usd-per-year must be <= 1e+10 (ten billion USD a year)"),
        (RELIABILITY + ["--rate-factor", "1e9"], "--rate-factor must be <= 100; got 1e+09"),
        (RELIABILITY + ["--write-GBps-per-node", "1e9"], "--write-GBps-per-node must be <= 100000; got 1e+09"),
    ],
)
def test_economic_flags_beyond_meaning_refused(argv, needle):
    """A lifetime of a million years (or a PUE of 50) is refused, naming the flag (WHATIF_RANGES)."""
    _check(runner.invoke(app, argv), needle)
    _check(runner.invoke(app, argv + ["--json"]), needle, json_=True)


TRAIN = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "4096"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (TRAIN + ["--global-batch-size", "64", "--recompute", "ful"], "--recompute must be one of none, selective"),
        (TRAIN + ["--global-batch-size", "64", "--dtype", "fp9"], "--dtype must be one of bf16, fp8, fp4; got 'fp9'"),
        (["memory", "--model", "llama3.1-8b", "--mode", "trian", "--seq-len", "8"], "--mode must be one of train"),
        (["gemm", "--accelerator", "h100-sxm", "--shape", "8x8x8", "--launch", "eagre"], "--launch must be one of"),
        (TRAIN[:-1] + ["200000", "--global-batch-size", "8"], "--seq-len 200,000 exceeds llama3.1-8b's maximum"),
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_choice_errors_name_the_flag(argv, needle, json_):
    # the planners check their choices by parameter name; the command line names the flag that was typed
    _check(runner.invoke(app, argv + (["--json"] if json_ else [])), needle, json_)


def test_json_error_object_names_the_entry():
    res = runner.invoke(app, TCO[:2] + ["gb200"] + TCO[3:] + ["--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "input" and err["entry"] == "gb200" and "gb200-nvl72" in err["message"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        # a typo'd id and a missing batch: the id is reported first, with the nearest valid ids
        (
            ["train", "--model", "llama3.1-8bb", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"],
            "--model: unknown model id 'llama3.1-8bb'; nearest: llama3.1-8b",
        ),
        (
            ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-nd", "--gpus", "8", "--seq-len", "8192"],
            "--system: unknown system id 'hgx-h100-ib-nd'; nearest: hgx-h100-ib-ndr",
        ),
        (SIZE[:2] + ["llama3.1-8bb"] + SIZE[3:] + ["--deadline-days", "3"], "--model: unknown model id 'llama3.1-8bb'"),
        (
            ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "9", "--engine", "vlm"]
            + ["--qps", "1"],
            "--engine: unknown engine id 'vlm'; nearest: vllm",
        ),
        (
            ["memory", "--model", "llama3.1-70bb", "--mode", "trian", "--seq-len", "8192"],
            "--model: unknown model id 'llama3.1-70bb'",
        ),
        (
            ["cluster", "simulate", "--system", "hgx-h100-ib-nd", "--gpus", "64", "--days", "1", "--jobs", "5"],
            "--system: unknown system id 'hgx-h100-ib-nd'",
        ),
        (
            ["roofline", "--accelerator", "h100-sx", "--model", "llama3.1-8b", "--phase", "decod", "--batch", "1"]
            + ["--seq-len", "1"],
            "--accelerator: unknown accelerator id 'h100-sx'; nearest: h100-sxm",
        ),
        (
            ["reliability", "--system", "gb200-nvl72", "--gpus", "64", "--model", "llama3.1-8b", "--storage", "ddn"],
            "--storage: unknown storage id 'ddn'",
        ),
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_unknown_ids_reported_before_other_input_errors(argv, needle, json_):
    _check(runner.invoke(app, argv + (["--json"] if json_ else [])), needle, json_)
    assert len(runner.invoke(app, argv).stderr.strip().splitlines()) == 1


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"hnplan {__version__}"


def test_yaml_duplicate_key_refused(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("id: a\nname: b\nid: c\n")
    with pytest.raises(CatalogError, match=r"duplicate key 'id' \(first given on line 1\)"):
        read_yaml(p)


def test_yaml_exponent_without_dot_is_a_number(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("tokens: 1e12\ngpus: 2_048\nname: 1e12x\nlr: 3.0e-4\n")
    assert read_yaml(p) == {"tokens": 1e12, "gpus": 2048, "name": "1e12x", "lr": 3e-4}


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda d: d, "is a folder, expected a YAML file"),
        (lambda d: _write(d / "b.yaml", b"\x89PNG\r\n\x1a\n\xff\xfe\x00"), "not a UTF-8 text file"),
        (lambda d: d / "nope.yaml", "file not found"),
    ],
)
def test_yaml_file_errors_name_the_path(tmp_path, make, needle):
    path = make(tmp_path)
    res = runner.invoke(
        app, ["tco", "--system", str(path) if str(path).endswith(".yaml") else f"{path}/", "--gpus", "8"]
    )
    _check(res, needle)
    assert str(path) in res.stderr.replace("\n", "")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_catalog_validate_missing_path(tmp_path):
    res = runner.invoke(app, ["catalog", "validate", str(tmp_path / "nope.yaml")])
    _check(res, "nope.yaml: no such file or folder")
    assert "facility.yaml" not in res.stderr


def test_report_scenario_file_not_found(tmp_path):
    res = runner.invoke(app, ["report", "--scenario", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")])
    _check(res, "file not found")
    assert "unknown scenario" not in res.stderr
    # the line names the flag, as every other command's missing file does
    assert one_line(res.stderr) == f"error: --scenario: scenario file {tmp_path / 'nope.yaml'}: file not found"
    res = runner.invoke(app, ["report", "--scenario", "defualt", "--out", str(tmp_path / "o")])
    _check(res, "--scenario: unknown scenario 'defualt'; nearest: default")


def _write_tdp(tmp_path: Path) -> Path:
    """An accelerator file whose tdp_w is below its bound, whose message ends in the unit ``[W]``."""
    src = Path(__file__).parents[1] / "data" / "accelerators" / "h100-sxm.yaml"
    p = tmp_path / "accelerators" / "h100-sxm.yaml"
    p.parent.mkdir(exist_ok=True)
    p.write_text(re.sub(r"(?m)^tdp_w: .*$", "tdp_w: 1", src.read_text()))
    return p


def test_schema_pattern_printed_whole(tmp_path):
    p = tmp_path / "models" / "Bad_Id.yaml"
    p.parent.mkdir()
    p.write_text("id: Bad_Id\nname: x\n")
    res = runner.invoke(app, ["catalog", "validate", str(p)])
    assert res.exit_code == 2
    # the id's form in words (the pattern's character classes were printed, and must not be eaten as markup)
    assert "field 'id': an id is lower-kebab-case (a-z, 0-9, '-' or '.' between them" in " ".join(res.stderr.split())
    assert "[W]" in runner.invoke(app, ["catalog", "validate", str(_write_tdp(tmp_path))]).stderr  # a unit: not markup


# -- the fuzz test ------------------------------------------------------------------------------------------
_GOOD_REPORT = "<html>an earlier good report</html>"


def _report_case(tmp: Path, kind: str, value, json_: bool):
    """argv and the needle for a `report` run with one bad input; the out folder holds an earlier report."""
    out = tmp / "out"
    (out / "default").mkdir(parents=True, exist_ok=True)
    (out / "default" / "design_comparison.html").write_text(_GOOD_REPORT)
    argv = ["report", "--only", "design_comparison", "--out", str(out)]
    if kind == "param":
        key, v = value
        params = tmp / "p.yaml"
        params.write_text(f"{key}: {v}\n")
        return argv + ["--params", str(params)], repr(key)
    if kind == "params-file":
        return argv + ["--params", str(_bad_file(tmp, value))], str(_bad_file(tmp, value))
    if kind == "scenario-file":
        return argv + ["--scenario", str(_bad_file(tmp, value))], str(_bad_file(tmp, value))
    if kind == "out":  # an output folder below a file: cannot be created
        blocker = tmp / "a-file"
        blocker.write_text("x")
        return ["report", "--only", "design_comparison", "--out", str(blocker / "reports")], str(blocker)
    raise AssertionError(kind)


def _bad_file(tmp: Path, what: str) -> Path:
    if what == "folder":
        d = tmp / "a-folder.yaml"
        d.mkdir(exist_ok=True)
        return d
    p = tmp / f"bad-{what}.yaml"
    p.write_bytes(
        {
            "binary": b"\x00\xff\xfe\x80binary",
            "duplicate": b"gpus: 64\ngpus: 128\n",
            "invalid": b"gpus: [1, 2\n",
            "list": b"- 1\n- 2\n",
        }.get(what, b"")
    )
    if what == "missing":
        p.unlink(missing_ok=True)
    return p


_bad_numbers = st.sampled_from([".inf", "-.inf", ".nan", "-5", "0", "-1e3", "1e400"])
_cases = st.one_of(
    st.tuples(st.just("param"), st.tuples(st.sampled_from(["gpus", "tokens", "seq_len"]), _bad_numbers)),
    st.tuples(st.just("params-file"), st.sampled_from(["folder", "binary", "duplicate", "invalid", "list", "missing"])),
    st.tuples(st.just("scenario-file"), st.sampled_from(["folder", "binary", "duplicate", "invalid", "missing"])),
    st.tuples(st.just("out"), st.none()),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases, json_=st.booleans())
def test_fuzz_bad_report_inputs(tmp_path_factory, case, json_):
    tmp = tmp_path_factory.mktemp("fuzz")
    kind, value = case
    argv, needle = _report_case(tmp, kind, value, json_)
    res = runner.invoke(app, argv)
    _check(res, needle)
    kept = tmp / "out" / "default" / "design_comparison.html"
    if kept.parent.exists():
        assert kept.read_text() == _GOOD_REPORT  # no report lost or replaced
        assert not any(p.name.endswith(".failed.ipynb") for p in kept.parent.iterdir())


@settings(max_examples=25, deadline=None)
@given(
    flag=st.sampled_from(
        [
            (SIZE, "--tokens"),
            (SIZE[:-2], "--deadline-days"),
            (TCO, "--years"),
            (TCO, "--pue"),
            (TCO, "--staff-usd-per-year"),
        ]
    ),
    value=st.sampled_from(["inf", "-inf", "nan", "+inf", "Infinity", "1e999"]),
    json_=st.booleans(),
)
def test_fuzz_non_finite_flags(flag, value, json_):
    argv, name = flag
    argv = list(argv)
    if name in argv:
        argv[argv.index(name) + 1] = value
    else:
        argv += [name, value]
    res = runner.invoke(app, argv + (["--json"] if json_ else []))
    out = res.stdout + res.stderr
    assert "Traceback" not in out and res.exit_code == 2, out
    assert name in one_line(res.stderr)  # click's range check or ours: either names the flag


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_report_out_read_only(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        res = runner.invoke(app, ["report", "--only", "design_comparison", "--out", str(ro / "reports")])
        _check(res, str(ro))
    finally:
        ro.chmod(0o700)


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", str(Path(__file__).parents[1] / "data" / "sweeps" / "example.yaml"), "--workers", "1"],
        ["report", "--only", "design_comparison"],
    ],
)
def test_out_naming_a_file_names_the_flag(tmp_path, argv):
    """``--out`` naming a file where a folder is made: the flag, the path and what is wrong, not the bare
    ``afile: File exists`` of the operating system; with ``--json`` the same line as the error object."""
    target = tmp_path / "afile"
    target.write_text("not a folder")
    res = runner.invoke(app, [*argv, "--out", str(target)])
    _check(res, f"--out {target}: a file is there; a folder is needed")
    assert len(res.stderr.strip().splitlines()) == 1 and target.read_text() == "not a folder"


def test_calibrate_out_under_a_file_names_the_flag_and_the_file(tmp_path):
    from hnplan.cli._app import os_error_message

    blocker = tmp_path / "afile"
    blocker.write_text("")
    ctx = type("Ctx", (), {})()
    ctx.params = {"out": str(blocker / "my-stack.yaml")}
    ctx.command = type("Cmd", (), {"params": [type("Opt", (), {"name": "out", "opts": ["--out"]})()]})()
    exc = FileExistsError(17, "File exists", str(blocker))
    assert os_error_message(exc, ctx) == f"--out {blocker}: a file is there; a folder is needed"
    # a path no option gave keeps the operating system's words
    assert (
        os_error_message(PermissionError(13, "Permission denied", "/elsewhere"), ctx) == "/elsewhere: Permission denied"
    )


def test_planner_range_message_names_the_flag():
    """A planner's ``checkpoint_storage_share must be in (0, 1]; got 0.0`` is said with the flag typed."""
    res = runner.invoke(app, [*RELIABILITY, "--checkpoint-storage-share", "0"])
    _check(res, "--checkpoint-storage-share must be in (0, 1]; got 0.0")
    assert "checkpoint_storage_share" not in res.stderr
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shape", "64x64x64", "--dtype", "fp9"])
    _check(res, "--dtype: unknown dtype 'fp9'; allowed: fp32, tf32, bf16")
    for value in ("0", "1.5"):  # a number or 'simulated': the text typed, with the flag
        res = runner.invoke(app, [*TCO, "--utilisation", value])
        _check(res, f"--utilisation must be in (0, 1]; got '{value}'")


def test_catalog_validate_unknown_kind_names_the_flag(tmp_path):
    """``--kind system`` (one letter short) was reported as the file's folder being no catalog; the command
    line now takes the singular, and refuses a kind it cannot read with the allowed ones."""
    from hnplan.catalog import validate_file

    entry = Path(__file__).parents[1] / "data" / "systems" / "gb200-nvl72.yaml"
    assert runner.invoke(app, ["catalog", "validate", str(entry), "--kind", "system"]).exit_code == 0
    res = runner.invoke(app, ["catalog", "validate", str(entry), "--kind", "sytem"])
    _check(res, "--kind must be one of accelerators, interconnects, switches, systems,")
    assert "got 'sytem'" in res.stderr and "folder" not in res.stderr
    with pytest.raises(CatalogError, match="kind must be one of .*; got 'system'"):
        validate_file(entry, "system")


def test_usage_error_with_json_is_an_error_object(monkeypatch, capsys):
    """A click usage error (a value out of range) with --json: the same one-line message and an error object."""
    from hnplan.cli import main

    monkeypatch.setattr("sys.argv", ["hnplan", *TCO[:3], "--gpus", "-5", "--json"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    obj = json.loads(out)["error"]
    assert obj["kind"] == "usage" and "'--gpus'" in obj["message"]
    assert "--gpus" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["catalog", "show", "h100-sxm"], ["catalog", "list"], ["catalog", "show", "h100-sxm", "--json"], ["--help"]],
)
def test_closed_stdout_ends_quietly_with_exit_0(argv):
    """``hnplan ... | head -1``: the reader closes the pipe; the run stops with exit 0 and says nothing (the
    read end is closed before the run starts, so every write meets the closed pipe)."""
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "hnplan", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


@pytest.mark.parametrize(
    "argv,needle",
    [
        (SIZE + ["--global-batch-tokens", "1e30"], "'--global-batch-tokens': must be at most 2**53 = 9e+15; got 1e30"),
        (
            ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--seq-len", "4096"]
            + ["--global-batch-size", str(10**23)],
            "--global-batch-size must be at most 2**53 = 9e+15; got 1e+23",
        ),
    ],
)
def test_counts_beyond_64_bit_arithmetic_refused(argv, needle):
    """A count past 2**53 (the planners' integers would overflow: a traceback before) is refused naming
    the flag."""
    res = runner.invoke(app, argv, env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert needle in one_line(res.output)


TRAIN = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--seq-len", "4096"]


@pytest.mark.parametrize(
    "extra,needle",
    [
        # was "no plan ... divides with {'microbatch_size': 1000}: ...; try a GPU count with more factors of two"
        (
            ["--microbatch-size", "1000"],
            "infeasible: --microbatch-size 1000 does not divide the batch of 512 sequences",
        ),
        (["--microbatch-size", "3"], "infeasible: --microbatch-size 3 does not divide the batch of 512 sequences"),
        (["--tp", "3"], "infeasible: --tp 3 does not divide --gpus 64"),
        # a product of degrees stays in the planner's words: only its first factor is an option
        (["--tp", "8", "--pp", "4", "--dp", "4"], "infeasible: tp 8 x pp 4 x dp 4 = 128 does not divide --gpus 64"),
    ],
)
def test_infeasible_pinned_knob_names_the_flag(extra, needle):
    """An infeasible plan whose reason is one pinned option says it with the flag typed, exit 3."""
    res = runner.invoke(app, [*TRAIN, "--global-batch-size", "512", *extra])
    out = res.stdout + res.stderr
    assert res.exit_code == 3 and "Traceback" not in out, out
    assert needle in one_line(res.stderr)


@pytest.mark.parametrize(
    "only,needle",
    [
        ([""], "--only needs a claim id; got an empty one; ids: comm-share-traditional, "),
        (["foo"], "--only: unknown claim id 'foo'; ids: comm-share-traditional, "),
        (["foo", "bar", "comm-share-traditional"], "--only: unknown claim ids 'bar', 'foo'; ids: "),
    ],
)
def test_claims_only_names_what_is_wrong_with_the_id(only, needle):
    # `--only ""` (an unset shell variable) said "unknown claim id(s) ;", naming nothing
    res = runner.invoke(app, ["claims", *[a for c in only for a in ("--only", c)]])
    _check(res, needle)
