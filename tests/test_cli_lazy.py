"""Lazy sub-commands (issue 16): the root help imports no planner, a sub-command imports only its own
module, and every ``hnplan/cli/<name>_cmd.py`` registers the sub-command ``<name>`` with the help the
root lists for it."""

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from hnplan.cli import app, command_modules
from hnplan.cli._app import _help_from_source, unwrap_help
from tests.clitext import gemm_cli_probe

PROBE = """
import sys
from typer.testing import CliRunner
from hnplan.cli import app
res = CliRunner().invoke(app, {argv!r})
assert res.exit_code == 0, res.output
print(",".join(sorted(m for m in sys.modules if m.startswith(("hnplan", "pandas", "scipy", "networkx", "plotly")))))
"""


def _modules_after(argv):
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_root_help_imports_no_sub_command():
    mods = _modules_after(["--help"])
    assert not any(m.endswith("_cmd") for m in mods)
    assert not {"pandas", "scipy", "networkx", "plotly", "hnplan.planning"} & mods


def test_a_sub_command_imports_only_its_module():
    mods = _modules_after(["tco", "--help"])
    assert {m for m in mods if m.endswith("_cmd")} == {"hnplan.cli.tco_cmd"}
    assert "hnplan.planning.training" not in mods


@pytest.mark.parametrize("name,module", sorted(command_modules().items()))
def test_module_registers_its_command_with_the_listed_help(name, module):
    real = typer.main.get_command(app).commands.get(name)
    if real is None:  # not yet imported in this process
        __import__(module)
        real = typer.main.get_command(app).commands[name]
    assert real.name == name
    first = unwrap_help(real.help or "").split("\n\n")[0]
    assert first == _help_from_source(module, name).split("\n\n")[0]


def test_help_paragraphs_are_wrapped_by_the_terminal_not_the_docstring():
    """A docstring's line breaks inside a paragraph are joined (typer's rich mode keeps them, so
    '--help' and the root's list broke sentences where the source wrapped)."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["calibrate", "--help"], env={"COLUMNS": "200"})
    text = res.output
    assert res.exit_code == 0 and "the answer says which were kept and why" in text
    root = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "250"}).output
    assert "the verdict computed from the planners' numbers" in root


def test_units_in_option_help_are_printed():
    """'[tokens]' in an option's help is a unit, not rich markup: it reaches the screen."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "sequence length [tokens]" in res.output
    res = CliRunner().invoke(app, ["infer", "--help"], env={"COLUMNS": "200"})
    assert "request rate to serve [requests/s]" in res.output


@pytest.mark.parametrize(
    "argv",
    [["train"], ["compare"], ["size"], ["infer"], ["tco"], ["reliability"], ["memory"], ["cluster", "simulate"]],
)
def test_option_names_are_folded_not_cut_in_an_80_column_terminal(argv):
    """At 80 columns typer's options table is narrower than '--global-batch-tokens'; rich cut such names with
    an ellipsis ('--global-batch-t…'), which cannot be read or copied. They fold onto the next line."""
    import re

    from typer.testing import CliRunner

    res = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert not re.findall(r"--[a-z0-9-]+…", res.output)
    if argv == ["compare"]:
        lines = res.output.splitlines()
        i = next(n for n, line in enumerate(lines) if "--global-batch-to" in line)
        assert "kens" in lines[i + 1].split("COUNT")[0]


MAIN_PROBE = """
import contextlib, io, sys
from hnplan.cli import main
sys.argv = ["hnplan", *{argv!r}]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, (exc.code, out.getvalue())
print(",".join(sorted({{m.split(".")[0] for m in sys.modules}} | {{m for m in sys.modules if m.startswith("hnplan.")}})))
"""

TRAIN_JSON = [
    "train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "1024", "--tp", "8", "--pp", "4",
    "--dp", "32", "--seq-len", "8192", "--global-batch-size", "1024", "--microbatch-size", "1", "--virtual-stages",
    "1", "--recompute", "selective", "--zero", "1", "--json",
]  # fmt: skip
HEAVY = {"pandas", "scipy", "networkx", "plotly", "simpy", "dask", "papermill"}


def _main_modules(argv):
    out = subprocess.run(
        [sys.executable, "-c", MAIN_PROBE.format(argv=argv)], capture_output=True, text=True, check=True
    )
    return set(out.stdout.strip().splitlines()[-1].split(","))


def test_fully_given_train_json_imports_only_what_it_needs():
    """The start-up path of issue 16: a fully given `train --json` imports no statistics, graph, plotting,
    simulation or console library, no other sub-command and no other planner, and no pandas: its one plan is
    checked and evaluated as plain columns (it does need numpy for the evaluator, and pydantic for the catalog)."""
    _main_modules(TRAIN_JSON)  # the first run plans the model's published runs once into the on-disk cache
    mods = _main_modules(TRAIN_JSON)  # as after installing (make seeds the cache): read back, nothing planned
    assert "hnplan.planning.training" in mods  # the probe ran the planner
    assert not {"scipy", "plotly", "networkx", "simpy", "rich", "click", "dask", "matplotlib", "pandas"} & mods
    assert {m for m in mods if m.endswith("_cmd")} == {"hnplan.cli.train_cmd"}
    others = {m for m in mods if m.startswith("hnplan.planning.") and not m.startswith("hnplan.planning.training")}
    # the uncalibrated-accelerator sentence every plan may carry (a module that imports only the catalog) and the
    # sentence on the model's published runs, whose errors come from the on-disk cache of the validation set
    assert others <= {
        "hnplan.planning.calibration_note",
        "hnplan.planning.trust",
        "hnplan.planning.trust_model",
        "hnplan.planning.prediction_cache",
        "hnplan.planning.job_sizes",  # the units that hold the plan's scale-up groups whole (GPUs bought)
    }
    assert not {"hnplan.reliability", "hnplan.cost", "hnplan.power", "hnplan.plots", "hnplan.reports"} & mods


# planner modules a sub-command's --help imports for the choices it lists; they import nothing heavy at the top
HELP_PLANNERS = {"hnplan.planning.network", "hnplan.planning.memory"}


@pytest.mark.parametrize("name", sorted(command_modules()))
def test_sub_command_help_imports_no_planner(name):
    """`hnplan NAME --help` builds the command from its signature: the planners it calls (and pandas, scipy,
    networkx, plotly, simpy, dask behind them) are imported when it runs, so the help costs start-up and
    typer only. (`collective --help` lists the network planner's operations and algorithms, `memory --help`
    the memory planner's accountings: those modules import pandas, networkx and the training planner only
    where they build frames, graphs and plans.)"""
    mods = _main_modules([name, "--help"])
    assert not HEAVY & mods, sorted(HEAVY & mods)
    assert not {m for m in mods if m.startswith("hnplan.planning.") and m not in HELP_PLANNERS}


@pytest.mark.parametrize(
    "argv,absent",
    [
        (
            ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "16384", "--model", "llama3.1-405b"],
            {"scipy", "pandas"},
        ),
        (["tco", "--system", "gb200-nvl72", "--gpus", "1152"], {"scipy", "networkx", "pandas"}),
        (["topology", "--system", "hgx-h100-ib-ndr", "--gpus", "16384"], {"networkx", "pandas", "scipy"}),
        (["gemm", "--accelerator", "h100-sxm", "--shape", "8192x8192x8192"], {"pandas", "scipy"}),
        (
            [
                "infer",
                "--model",
                "deepseek-v3",
                "--system",
                "hgx-h100-ib-ndr",
                "--input-tokens",
                "2048",
                "--output-tokens",
                "256",
            ],
            {"pandas", "scipy"},
        ),
        (
            ["memory", "--model", "llama3.1-70b", "--tp", "8", "--pp", "4", "--dp", "8", "--seq-len", "8192"],
            {"pandas", "scipy"},
        ),
        (
            [
                "memory",
                "--model",
                "llama3.1-405b",
                "--system",
                "gb200-nvl72",
                "--tp",
                "8",
                "--pp",
                "16",
                "--dp",
                "128",
                "--seq-len",
                "8192",
            ],
            {"pandas", "scipy"},
        ),
        (
            ["roofline", "--model", "llama3.1-70b", "--accelerator", "h100-sxm", "--phase", "prefill", "--batch", "1"]
            + ["--seq-len", "4096"],
            {"pandas", "scipy"},
        ),
    ],
    ids=["reliability", "tco", "topology", "gemm", "infer", "memory", "memory-system", "roofline"],
)
def test_typical_calls_skip_the_heavy_libraries_they_do_not_use(argv, absent):
    """Spares come from a log-space Poisson pmf (no scipy.stats, 0.5 s of start-up), the network planner
    builds graphs (networkx) and frames (pandas) only when asked, model states and the GEMM law need no
    activation table or operator table (pandas frames), the serving planner times its passes from the
    operator table's columns (:func:`hnplan.compute.operator_columns`), not a frame, as `roofline` prints its one
    pass from them, and `memory` gives its one plan to the memory table (and with a system to the training
    evaluator) as plain columns."""
    mods = _main_modules([*argv, "--json"])
    assert not absent & mods, sorted(absent & mods)


def test_calibrate_imports_no_pandas(tmp_path):
    """`calibrate` on the README's example runs fits with scipy's least_squares and evaluates its trials
    through the planner's columns (:func:`hnplan.planning.training.search.fitting_plans`): no pandas frame,
    so no pandas (about a quarter of a second of start-up), and its table is printed from plain rows."""
    runs = Path(__file__).resolve().parents[1] / "docs" / "examples" / "calibration_runs.yaml"
    mods = _main_modules(
        ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(tmp_path / "s.yaml")]
    )
    assert "hnplan.planning.calibrate" in mods and "scipy" in mods  # the probe ran the fit
    assert not {"pandas", "pyarrow", "networkx", "plotly", "simpy", "dask"} & mods


BAD_INPUT_PROBE = """
import contextlib, io, sys
from hnplan.cli import main
sys.argv = ["hnplan", *{argv!r}]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(code, ",".join(sorted(m for m in sys.modules if m.startswith(("scipy", "hnplan.planning")))))
"""


@pytest.mark.parametrize("fault", ["unknown model", "missing file"])
def test_calibrate_answers_a_bad_runs_file_before_importing_scipy(tmp_path, fault):
    """scipy.optimize (its package import is about 0.25 s of CPU: every solver, scipy.linalg, scipy.special) is
    imported by the fit, after the runs are read and checked: a bad runs file exits 2 without it."""
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "calibration_runs.yaml"
    runs = tmp_path / "runs.yaml"
    if fault == "unknown model":
        runs.write_text(example.read_text().replace("model: llama3.1-405b", "model: llama3.1-4o5b"))
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(tmp_path / "s.yaml")]
    out = subprocess.run(
        [sys.executable, "-c", BAD_INPUT_PROBE.format(argv=argv)], capture_output=True, text=True, check=True
    )
    code, mods = out.stdout.strip().splitlines()[-1].split(" ")
    assert code == "2"
    assert "hnplan.planning.calibrate" in mods.split(",")  # the runs were read by the planner, which refused them
    assert not [m for m in mods.split(",") if m.startswith("scipy")]


FREEZE_PROBE = """
import atexit, contextlib, gc, io, sys
from hnplan.cli import main
atexit.register(lambda: print("frozen", gc.get_freeze_count(), "tracked", len(gc.get_objects())))
sys.argv = ["hnplan", "gemm", "--accelerator", "h100-sxm", "--shape", "8192x8192x8192", "--json"]
for _ in range(2):  # a second call registers nothing more
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
        except SystemExit as exc:
            assert not exc.code, exc.code
print("done")
"""


def test_objects_are_frozen_at_exit_so_finalization_does_not_trace_them():
    """:func:`hnplan.cli.main` freezes what is left at exit (before the interpreter's finalization collects
    everything): the hook registered before main runs after it and finds nothing tracked."""
    out = subprocess.run([sys.executable, "-c", FREEZE_PROBE], capture_output=True, text=True, check=True)
    done, hook = out.stdout.strip().splitlines()[-2:]
    assert done == "done"
    _, frozen, _, tracked = hook.split()
    assert int(frozen) > 10_000 and int(tracked) == 0


BLAS_PROBE = gemm_cli_probe('os.environ.get("OPENBLAS_NUM_THREADS")')


@pytest.mark.parametrize("given,expected", [(None, "1"), ("4", "4")])
def test_the_command_line_runs_blas_on_one_thread_unless_told(given, expected):
    """OpenBLAS reads OPENBLAS_NUM_THREADS once, when numpy loads it: the entry point sets it to 1 before any
    import (hnplan's arrays are too small to split over threads, while each idle pool busy-waits) and keeps a
    value the user set."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize("json_", [True, False], ids=["json", "table"])
def test_cluster_simulate_imports_no_scipy_stats_and_no_pandas(json_):
    """One run (no replications) needs no Student-t interval and its steady-state advice takes the normal cdf from
    math.erfc: scipy.stats (~0.37 s to import) stays off the typical call. A mix is drawn, simulated and summed up
    on numpy columns (:func:`hnplan.cluster.synthetic.synthetic_columns`); the per-job table and the time series
    are DataFrames built when read (:class:`hnplan.cluster.simulate.ClusterResult`): no pandas (about 0.2 s)."""
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "20"]
    mods = _main_modules(argv + (["--json"] if json_ else []))
    assert "hnplan.cluster.jobs" in mods and "hnplan.cluster.engine" in mods  # it simulated
    assert not {"scipy", "pandas", "pyarrow", "hnplan.planning"} & mods, sorted({"scipy", "pandas", "pyarrow"} & mods)


def test_the_normal_cdf_of_the_log_normal_moments_is_scipys():
    from scipy import stats

    from hnplan.cluster.synthetic import _norm_cdf

    for x in (-6.0, -1.3, 0.0, 0.7, 3.2, 8.0):
        assert _norm_cdf(x) == pytest.approx(stats.norm.cdf(x), rel=1e-12)
        assert _norm_cdf(-x) == pytest.approx(stats.norm.sf(x), rel=1e-12)


@pytest.mark.parametrize("json_", [True, False], ids=["json", "table"])
def test_compare_from_its_cache_imports_no_pandas(json_):
    """A repeat `compare` reads its designs' best plans and the published runs' errors from the prediction cache
    (the session's HNPLAN_CACHE_DIR, tests/conftest.py) and builds its table, verdict and trust notes from plain
    rows (:func:`hnplan.planning.compare.compare_design_rows`): no pandas, no training planner. The first call
    plans, and its search builds frames."""
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "128", "--tokens", "1e11", "--systems"]
    argv += ["gb200-nvl72,hgx-h100-ib-ndr", "--seq-len", "4096", "--global-batch-tokens", "1048576"]
    argv += ["--json"] if json_ else []
    _main_modules(argv)  # fills the cache (or finds it filled)
    mods = _main_modules(argv)
    assert "hnplan.planning.compare" in mods and "hnplan.planning.compare_trust" in mods  # it compared, with notes
    assert not {"pandas", "scipy", "hnplan.planning.training"} & mods, sorted(mods)


def test_compare_with_the_cache_bypassed_imports_no_pandas(monkeypatch):
    """A first `compare` (HNPLAN_NO_CACHE=1) searches its designs and plans the published runs behind the trust
    notes on plain columns: the plans' recompute modes and flags are factorised by a sort
    (:func:`hnplan.vectorise._sorted_codes`), so pandas (about 0.25 s of CPU) is not imported."""
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    mods = _main_modules(["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12", "--json"])
    assert "hnplan.planning.compare_trust" in mods and "pandas" not in mods, sorted(mods)


SIZE_CALLS = {
    "gpus": ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--tokens", "1e12", "--gpus", "64"]
    + ["--seq-len", "4096", "--global-batch-tokens", "1048576"],
    # the README's example: a deadline search over two designs, whose pruned searches count distinct layouts
    # beyond the lookup table's reach (factorized by a sort, vectorise.factorize_ints)
    "deadline": ["size", "--model", "llama3.1-405b", "--tokens", "15T", "--deadline-days", "60"]
    + ["--system", "gb200-nvl72", "--system", "hgx-h100-ib-ndr"],
}


@pytest.mark.parametrize("name", sorted(SIZE_CALLS))
def test_size_imports_no_pandas(name):
    """`size` searches each GPU count's best plan on plain columns (:func:`hnplan.planning.training.search_best`,
    pruned or not) and prints the rows of :func:`hnplan.planning.sizing.size_rows`: no pandas frame, so no
    pandas (about a quarter of a second of start-up)."""
    mods = _main_modules([*SIZE_CALLS[name], "--json"])
    assert "hnplan.planning.sizing" in mods and "hnplan.planning.training" in mods  # it planned
    assert not {"pandas", "pyarrow", "scipy"} & mods, sorted({"pandas", "pyarrow", "scipy"} & mods)
