"""Design-space sweeps (issue 16): the spec, the points, a two-worker LocalCluster run into Parquet,
resuming, per-point failures, and the Pareto front."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.catalog.sweeps import load_sweep_spec
from hnplan.errors import CatalogError, InputError
from hnplan.planning.design_space import pareto_front
from hnplan.planning.sweep import COLUMNS, point_id, read_sweep, run_sweep, sweep_points

TINY = {
    "id": "tiny",
    "name": "tiny",
    "sampling": "monte-carlo",
    "samples": 3,
    "seed": 1,
    "chunk_size": 2,
    "fixed": {"system": "hgx-h100-ib-ndr", "gpus": 16, "tokens": 1.0e11, "seq_len": 4096, "global_batch_seqs": 64},
    "axes": {
        "model": ["llama3.1-8b", "llama3.1-405b"],  # 405B does not fit on 16 H100 (449 GiB per GPU at best)
        "pue": {"distribution": "uniform", "low": 1.1, "high": 1.5},
        "rate_factor": {"distribution": "catalog"},
    },
}


def _write(tmp_path, spec, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(
    "change,needle",
    [
        (
            {"axes": {**TINY["axes"], "model": {"distribution": "uniform", "low": 8, "high": 64}}},
            "axes.model: a planner input is discrete",
        ),
        ({"sampling": "grid", "samples": 1}, "set sampling to monte-carlo or latin-hypercube"),
        ({"axes": {**TINY["axes"], "pue_factor": [1.0]}}, "unknown input pue_factor"),
        ({"fixed": {**TINY["fixed"], "seqlen": 4096}}, "unknown input seqlen (did you mean seq_len?); allowed"),
        ({"fixed": {**TINY["fixed"], "global_batch_tokens": 262144}}, "exactly one of global_batch_tokens"),
        (
            {"axes": {**TINY["axes"], "pue": {"distribution": "triangular", "low": 1.1, "high": 1.5}}},
            "low <= mode <= high",
        ),
        # YAML reads 15T as a string: refused before any point runs, with the spelling YAML takes
        ({"fixed": {**TINY["fixed"], "tokens": "15T"}}, "fixed.tokens: expected a number, got '15T'"),
        ({"fixed": {**TINY["fixed"], "tokens": 0}}, "fixed.tokens: expected a number > 0"),
        ({"fixed": {**TINY["fixed"], "tokens": 1e40}}, "fixed.tokens: expected at most 1e+18 (3,000 times all public"),
        ({"fixed": {**TINY["fixed"], "gpus": 0}}, "fixed.gpus: expected a whole number >= 1, got 0"),
        (
            {
                "fixed": {k: v for k, v in TINY["fixed"].items() if k != "gpus"},
                "axes": {**TINY["axes"], "gpus": [8, 16.5]},
            },
            "axes.gpus[1]: expected a whole number >= 1, got 16.5",
        ),
        ({"axes": {**TINY["axes"], "model": ["llama3.1-8b", 8]}}, "axes.model[1]: expected an id (a string), got 8"),
        ({"axes": {**TINY["axes"], "model": ["llama3.1-8b", "llama3.1-8bb"]}}, "axes.model[1]: unknown model id"),
        ({"fixed": {**TINY["fixed"], "system": "hgx-h100"}}, "fixed.system: unknown system id 'hgx-h100'; nearest"),
        ({"axes": {**TINY["axes"], "years": [5, 0]}}, "axes.years[1]: years must be > 0; got 0"),
        # a repeated grid value made the same 3 points twice (one point_id, two rows each in the dataset)
        (
            {"axes": {**TINY["axes"], "model": ["llama3.1-8b", "llama3.1-405b", "llama3.1-8b"]}},
            "axes.model[2]: 'llama3.1-8b' repeats axes.model[0] (the same points would run twice)",
        ),
        ({"axes": {**TINY["axes"], "years": [5, 5.0]}}, "axes.years[1]: 5.0 repeats axes.years[0]"),
        # a single value failed both branches of the axis union, each said in pydantic's words
        (
            {"axes": {**TINY["axes"], "years": 5}},
            "axes.years: expected a list of values or a distribution mapping ({distribution: uniform, low: ..., "
            "high: ...}), got 5; a single value goes under fixed",
        ),
        # 2 models x 500,001 draws: refused before a draw is made (samples: 1e9 stopped with a MemoryError)
        ({"samples": 500_001}, "1,000,002 points (grid combinations x samples) exceed the 1,000,000 a sweep takes"),
        (
            {
                "axes": {
                    **TINY["axes"],
                    "electricity_usd_per_kwh": {"distribution": "uniform", "low": -0.1, "high": 0.1},
                }
            },
            "axes.electricity_usd_per_kwh: electricity_usd_per_kwh must be >= 0; got -0.1",
        ),
    ],
)
def test_bad_spec_names_file_and_field(tmp_path, change, needle):
    path = _write(tmp_path, {**TINY, **change})
    with pytest.raises(CatalogError) as exc:
        load_sweep_spec(path)
    assert str(path) in str(exc.value) and needle in " ".join(str(exc.value).split())
    assert "Value error" not in str(exc.value) and "(entry)" not in str(exc.value)  # pydantic's wording stays out


def test_bad_distribution_names_its_fields_not_the_union_branches(tmp_path):
    # an axis is a list or a distribution mapping: a mistyped distribution is reported as that mapping's
    # fields (the unknown key with the allowed ones, the allowed distributions), without pydantic's branch
    # tags ("function-after[...]", "list[...]") or the list branch's "should be a valid list"
    path = _write(tmp_path, {**TINY, "axes": {**TINY["axes"], "pue": {"distribution": "normal", "mean": 1.2}}})
    with pytest.raises(CatalogError) as exc:
        load_sweep_spec(path)
    text = " ".join(str(exc.value).split())
    assert "field 'axes.pue.mean': unknown key (allowed keys: distribution, low, high, mode)" in text
    assert "field 'axes.pue.distribution': Input should be 'uniform'" in text
    assert "[" not in text and "valid list" not in text


def test_unknown_spec_id_lists_the_available():
    with pytest.raises(CatalogError, match="available: example"):
        load_sweep_spec("exampel")


def test_points_grid_times_samples_and_common_draws(tmp_path):
    pts = sweep_points(_write(tmp_path, TINY))
    assert len(pts) == 2 * 3 and pts["point_id"].is_unique
    # every grid combination sees the same draws (common random numbers)
    by_model = pts.pivot(index="sample", columns="model", values="pue")
    assert np.allclose(by_model["llama3.1-8b"], by_model["llama3.1-405b"])
    assert pts["pue"].between(1.1, 1.5).all()
    r = load_catalog().uncertainties["rate_factor"]
    assert pts["rate_factor"].between(r.low, r.high).all()
    # reproducible for a seed
    assert sweep_points(_write(tmp_path, TINY))["point_id"].tolist() == pts["point_id"].tolist()


def test_latin_hypercube_is_stratified(tmp_path):
    spec = {**TINY, "sampling": "latin-hypercube", "samples": 10}
    pts = sweep_points(_write(tmp_path, spec)).query("model == 'llama3.1-8b'")
    # one draw in each tenth of [1.1, 1.5): the defining property of a Latin hypercube
    bins = np.floor((pts["pue"].to_numpy() - 1.1) / 0.04).astype(int)
    assert sorted(bins) == list(range(10))


def test_batch_in_tokens_must_divide(tmp_path):
    fixed = {k: v for k, v in TINY["fixed"].items() if k != "global_batch_seqs"}
    path = _write(tmp_path, {**TINY, "fixed": {**fixed, "global_batch_tokens": 1000}})
    with pytest.raises(InputError, match="not a multiple of seq_len 4096"):
        sweep_points(path)


def test_point_id_is_order_free():
    assert point_id({"a": 1, "b": "x"}) == point_id({"b": "x", "a": 1}) != point_id({"a": 2, "b": "x"})


def test_pareto_front_by_hand():
    df = pd.DataFrame(
        {"days_to_train": [1, 2, 3, 2, np.nan], "tco_usd": [3, 2, 1, 3, 0], "facility_power_w": [1, 1, 1, 1, 0]}
    )
    front = pareto_front(df)
    # row 3 (2, 3, 1) is beaten by row 0 (1, 3, 1) and row 1 (2, 2, 1); the NaN row is left out
    assert front["days_to_train"].tolist() == [1, 2, 3]


def test_two_worker_local_cluster_run_resume_and_failures(tmp_path):
    path = _write(tmp_path, TINY)
    out = tmp_path / "ds"
    s = run_sweep(path, out, workers=2, processes=False, progress=False)
    assert (s.points, s.skipped, s.evaluated, s.failed, s.plans) == (6, 0, 6, 3, 2)
    df = read_sweep(out)
    assert list(df.columns) == list(COLUMNS) and len(df) == 6
    bad, good = df[df["error"].notna()], df[df["error"].isna()]
    assert (bad["model"] == "llama3.1-405b").all() and bad["tco_usd"].isna().all()
    assert "fits in memory" in bad["error"].iloc[0] and (good["model"] == "llama3.1-8b").all()
    # outputs hang together: time-to-train from throughput and goodput, facility power = IT x PUE
    days = good["tokens"] / (good["tokens_per_s"] * good["goodput"]) / units.DAY
    assert np.allclose(good["days_to_train"], days)
    assert np.allclose(good["facility_power_w"], good["it_power_w"] * good["pue"])
    assert (good["tp"] * good["pp"] * good["dp"] * good["cp"] == 16).all()
    # the expert layers' tensor parallelism beside the other degrees: a dense model's is its TP
    assert "etp" in df and (good["etp"] == good["tp"]).all()
    # the same plan for every draw; the failure factor changes goodput and time only
    assert good["tokens_per_s"].nunique() == 1
    assert good["catalog_hash"].eq(load_catalog().content_hash()).all() and (good["spec_id"] == "tiny").all()
    # resume: nothing left to do
    again = run_sweep(path, out, workers=2, processes=False, progress=False)
    assert (again.skipped, again.evaluated) == (6, 0)
    # a grown spec evaluates only the new points
    models = ["llama3.1-8b", "llama3.1-405b", "llama2-7b"]
    bigger = _write(tmp_path, {**TINY, "axes": {**TINY["axes"], "model": models}}, "bigger.yaml")
    more = run_sweep(bigger, out, workers=2, processes=False, progress=False)
    assert (more.skipped, more.evaluated) == (6, 3) and len(read_sweep(out)) == 9


def test_a_dataset_begun_before_etp_reads_it_as_missing(tmp_path):
    """A chunk written before the ``etp`` column existed reads back beside a new one: its etp is missing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hnplan.planning.sweep_io import _schema, write_chunk

    row = {c: None for c in COLUMNS} | {"point_id": "new", "system": "gb200-nvl72", "tp": 2, "etp": 1}
    write_chunk(pd.DataFrame([row]), tmp_path, "new")
    old = pa.schema([f for f in _schema() if f.name not in ("etp", "system")])  # system: the folder's name
    old_row = {k: v for k, v in row.items() if k not in ("etp", "system")} | {"point_id": "old"}
    pq.write_table(pa.Table.from_pylist([old_row], schema=old), tmp_path / "system=gb200-nvl72" / "old-0.parquet")
    df = read_sweep(tmp_path).set_index("point_id")
    assert df.loc["new", "etp"] == 1 and pd.isna(df.loc["old", "etp"]) and df.loc["old", "tp"] == 2


def test_cli_bad_spec_is_one_line_exit_2(tmp_path):
    from typer.testing import CliRunner

    from hnplan.cli import app

    path = _write(tmp_path, {**TINY, "samples": 0})
    res = CliRunner().invoke(app, ["sweep", str(path), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 2 and "samples" in res.stderr and "Traceback" not in res.output
    # a count with a suffix stopped the sweep with pandas' traceback; a mistyped id ran every point as a failure
    for change in ({"tokens": "15T"}, {"system": "hgx-h100-ib-ndrr"}):
        path = _write(tmp_path, {**TINY, "fixed": {**TINY["fixed"], **change}})
        res = CliRunner().invoke(app, ["sweep", str(path), "--out", str(tmp_path / "ds2")])
        assert res.exit_code == 2 and "fixed." in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "ds2").exists()


def test_existing_scheduler(tmp_path):
    from dask.distributed import LocalCluster

    spec = {**TINY, "samples": 2, "axes": {**TINY["axes"], "model": ["llama3.1-8b"]}}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        s = run_sweep(_write(tmp_path, spec), tmp_path / "ds", scheduler=cluster.scheduler_address, progress=False)
    assert (s.points, s.evaluated, s.failed) == (2, 2, 0)
    assert read_sweep(tmp_path / "ds")["tokens_per_s"].gt(0).all()


def _free_port() -> int:
    """A local TCP port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("given", [("--connect-timeout", "1"), ()])
def test_unreachable_scheduler_is_one_line_within_the_connect_timeout(tmp_path, given):
    """A scheduler address nothing answers at was named only after Dask's 20 s connect timeout; the wait is
    --connect-timeout (default 5 s), then one line naming the flag and the address, exit 2."""
    import time

    from typer.testing import CliRunner

    from hnplan.cli import app

    address = f"tcp://127.0.0.1:{_free_port()}"
    args = ["sweep", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "ds"), "--scheduler", address, *given]
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, args)
    elapsed = time.perf_counter() - t0
    wait = float(given[1]) if given else 5.0
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1
    assert f"--scheduler {address}: cannot reach a Dask scheduler there within --connect-timeout {wait:g} s" in (
        res.stderr
    )
    assert 0.9 * wait <= elapsed < wait + 8  # loose: the spec's load and Dask's import come first
    assert not (tmp_path / "ds").exists()


def test_connect_timeout_without_a_scheduler_is_refused(tmp_path):
    """``--connect-timeout`` bounds only the wait for ``--scheduler``; without one it was ignored without a word
    (the local cluster has no such wait). Refused in one line before anything is written, exit 2."""
    from typer.testing import CliRunner

    from hnplan.cli import app

    args = ["sweep", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "ds"), "--connect-timeout", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1
    assert "error: --connect-timeout bounds the wait for --scheduler" in res.stderr
    assert not (tmp_path / "ds").exists()


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test's duration. A process started with SIGINT ignored (a background
    job of a shell without job control, ``cmd &`` in a script: POSIX has it ignore SIGINT) gets no
    ``KeyboardInterrupt`` handler from Python, so a test that raises Ctrl-C would see nothing; and a test run off
    the main thread (an execnet start-up race under pytest-xdist: pytest-dev/execnet issue 96) cannot set one."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT handlers run on the main thread; this test runs off it (pytest-dev/execnet issue 96)")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sigint_ignored() -> bool:
    import signal

    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_local_worker_processes_ignore_ctrl_c():
    """Ctrl-C reaches every process of the terminal's group: Dask's worker processes printed their own
    KeyboardInterrupt tracebacks beside the client's one-line 'interrupted'. Started under
    ``_sigint_held`` they ignore SIGINT, and the client's handler is back afterwards."""
    import logging
    import signal

    from dask.distributed import Client, LocalCluster

    from hnplan.planning.sweep import _sigint_held

    handler = signal.getsignal(signal.SIGINT)
    with _sigint_held():
        cluster = LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
        )
    assert signal.getsignal(signal.SIGINT) is handler
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with cluster, Client(cluster) as client:
        assert list(client.run(_sigint_ignored).values()) == [True]


def test_ctrl_c_while_workers_start_is_raised_after(python_sigint):
    """A Ctrl-C pressed while the worker processes start is held, then raised as KeyboardInterrupt."""
    import signal
    import threading

    from hnplan.planning.sweep import _sigint_held

    reached = False
    with pytest.raises(KeyboardInterrupt):
        with _sigint_held():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            reached = True  # not raised here: held until the handler and the mask are restored
    assert reached


def test_more_local_workers_than_the_machine_holds_is_refused(tmp_path, monkeypatch):
    """--workers 1000 on a 2-core machine started processes for over 100 s and leaked semaphores; it is
    refused before any starts, with the machine's limit (4 per core: 8 on 2 cores)."""
    import os

    from hnplan.planning.sweep import MAX_WORKERS_PER_CORE

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(InputError, match=r"--workers 9 is more than 4 per core of this machine's 2 \(at most 8\)"):
        run_sweep(_write(tmp_path, TINY), tmp_path / "ds", workers=9, progress=False)
    assert MAX_WORKERS_PER_CORE == 4 and not (tmp_path / "ds").exists()


@pytest.mark.parametrize("flag", [["--workers", "2"], ["--threads"]])
def test_local_worker_flags_with_a_scheduler_are_refused(tmp_path, flag):
    """``--workers 2 --scheduler ADDRESS`` ran on the scheduler's workers and ignored the 2 without a word: a Dask
    client does not size a cluster it connects to. Refused in one line before anything is written, exit 2."""
    from typer.testing import CliRunner

    from hnplan.cli import app

    args = ["sweep", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "ds"), "--scheduler", "tcp://127.0.0.1:1"]
    res = CliRunner().invoke(app, [*args, *flag])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert f"error: {flag[0]} " in res.stderr and "with --scheduler the points run on that cluster's own workers" in (
        res.stderr
    )
    assert not (tmp_path / "ds").exists()


def test_sigterm_closes_the_run_as_ctrl_c_does(tmp_path, monkeypatch):
    """``timeout`` or a batch scheduler's SIGTERM ended the client at once (no one-line message, and Python's
    resource tracker warned about 12 leaked semaphores of the worker processes); it is raised as an
    interruption, so the local cluster is closed and the command says so in one line, exit 130."""
    import os
    import signal

    from typer.testing import CliRunner

    import hnplan.planning.sweep as sweep_mod
    from hnplan.cli import app

    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="stopped by SIGTERM"):
        with sweep_mod._sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is previous

    def killed(*args, **kwargs):
        with sweep_mod._sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(sweep_mod, "run_sweep", killed)
    res = CliRunner().invoke(app, ["sweep", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 130 and res.stderr.strip() == "interrupted: stopped by SIGTERM"


def test_a_resume_says_which_rows_another_catalog_computed(tmp_path):
    """A re-run skips the points already there whatever catalog computed them: after a catalog change the
    dataset kept the old numbers without a word. The summary counts them and the command says what to do."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from hnplan.cli import app
    from hnplan.planning.prediction_cache import source_fingerprint

    spec = _write(tmp_path, {**TINY, "samples": 2, "axes": {**TINY["axes"], "model": ["llama3.1-8b"]}})
    first = run_sweep(spec, tmp_path / "ds", workers=1, processes=False, progress=False)
    assert (first.evaluated, first.stale, first.other_code) == (2, 0, 0)
    # hnplan_version is the same for every change of the code: the rows also carry the code's own hash
    assert read_sweep(tmp_path / "ds")["code_fingerprint"].eq(source_fingerprint()).all()
    assert first.code_fingerprint == source_fingerprint()
    for path in (tmp_path / "ds").rglob("*.parquet"):  # as if the rows came from an earlier catalog and code
        t = pq.read_table(path)
        for col, value in (("catalog_hash", "0123456789ab"), ("code_fingerprint", "fedcba9876543210")):
            t = t.set_column(t.schema.get_field_index(col), col, pa.array([value] * len(t)))
        pq.write_table(t, path)
    again = run_sweep(spec, tmp_path / "ds", workers=1, processes=False, progress=False)
    assert (again.skipped, again.evaluated, again.stale, again.catalog_hash) == (2, 0, 2, first.catalog_hash)
    assert again.other_code == 2
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds"), "--no-progress"])
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert (
        f"2 of the points already there were evaluated with another catalog than this one ({first.catalog_hash})"
        in (text)
    )
    assert (
        f"2 of the points already there were computed by other hnplan code than this one ({source_fingerprint()};"
        in (text)
    )


def test_a_lost_task_is_not_written_and_the_next_run_evaluates_it(tmp_path, monkeypatch):
    """A Dask task that fails as a task (a worker killed for memory: KilledWorker) stopped the sweep with
    distributed's traceback; its points are now counted as lost, nothing of them is written, and the next
    run evaluates them."""
    import hnplan.planning.sweep as sweep_mod

    spec = _write(tmp_path, {**TINY, "samples": 2, "axes": {**TINY["axes"], "model": ["llama3.1-8b"]}})
    real = sweep_mod.evaluate_chunk

    def dies(*args, **kwargs):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(sweep_mod, "evaluate_chunk", dies)
    s = run_sweep(spec, tmp_path / "ds", workers=1, processes=False, progress=False)
    assert (s.evaluated, s.lost, s.lost_reason) == (0, 2, "RuntimeError: worker lost")
    assert not list((tmp_path / "ds").rglob("*.parquet"))
    from typer.testing import CliRunner

    from hnplan.cli import app

    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds"), "--threads", "--no-progress"])
    # the run did not finish its work: exit 1 (as a report that failed), one line on stderr saying how many
    assert res.exit_code == 1 and res.stderr.strip() == (
        "incomplete: 2 points not evaluated (RuntimeError: worker lost): run the same command again to evaluate them"
    )
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds"), "--threads", "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["lost"] == 2
    monkeypatch.setattr(sweep_mod, "evaluate_chunk", real)
    s = run_sweep(spec, tmp_path / "ds", workers=1, processes=False, progress=False)
    assert (s.skipped, s.evaluated, s.lost) == (0, 2, 0)


def test_retry_failed_replaces_the_failed_rows_in_place(tmp_path, monkeypatch):
    """A resume skipped the points whose row has an error, even after their cause was fixed; ``--retry-failed``
    evaluates them again and puts their new rows in place of the old ones (each point still one row, the
    files holding them replaced whole), while new points of a grown spec land in files of their own."""
    from typer.testing import CliRunner

    import hnplan.planning.sweep as sweep_mod
    from hnplan.cli import app

    real = sweep_mod.plan_task

    def broken(key, data_root=None):  # a cause since fixed, for the 8B points only
        return {"error": "a cause since fixed"} if key["model"] == "llama3.1-8b" else real(key, data_root)

    path, out = _write(tmp_path, TINY), tmp_path / "ds"
    monkeypatch.setattr(sweep_mod, "plan_task", broken)
    s = run_sweep(path, out, workers=1, processes=False, progress=False)
    assert (s.evaluated, s.failed) == (6, 6)
    files = {p.relative_to(out) for p in out.rglob("*.parquet")}
    assert len(files) == 4  # two models x chunks of 2 + 1 draws
    monkeypatch.setattr(sweep_mod, "plan_task", real)
    again = run_sweep(path, out, workers=1, processes=False, progress=False)
    assert (again.skipped, again.evaluated, again.retried) == (6, 0, 0)
    assert again.failed_kept == 6  # the 6 that failed: the resume says so and names the flag
    text = " ".join(
        CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--threads", "--no-progress"]).stdout.split()
    )
    assert "6 of the points already there failed (their rows keep the error): --retry-failed evaluates them" in text
    # one more draw: its chunk begins with a retried point, whose name a file already has
    grown = _write(tmp_path, {**TINY, "samples": 4}, "grown.yaml")
    r = run_sweep(grown, out, workers=1, processes=False, progress=False, retry_failed=True)
    assert (r.points, r.skipped, r.retried, r.evaluated, r.failed) == (8, 0, 6, 8, 4)
    df = read_sweep(out)
    assert len(df) == 8 and df["point_id"].is_unique
    good, bad = df[df["model"] == "llama3.1-8b"], df[df["model"] == "llama3.1-405b"]
    assert good["error"].isna().all() and good["tokens_per_s"].gt(0).all() and good["tco_usd"].gt(0).all()
    assert bad["error"].str.contains("fits in memory").all()  # still failing: the cause is real
    now = {p.relative_to(out) for p in out.rglob("*.parquet")}
    assert files < now and len(now) == 6 and not [p for p in out.rglob("*") if p.name.startswith(".")]
    # the command line: the same again retries the 4 that still fail
    args = ["sweep", str(grown), "--out", str(out), "--threads", "--no-progress", "--retry-failed"]
    res = CliRunner().invoke(app, args)
    assert (
        res.exit_code == 0
        and "8 points, 4 already in" in res.stdout
        and "4 failed ones retried, 4 evaluated" in (" ".join(res.stdout.split()))
    )
    assert len(read_sweep(out)) == 8


def test_ctrl_c_mid_sweep_closes_quietly_and_resumes(tmp_path, monkeypatch, capfd, python_sigint):
    """Ctrl-C while chunks come back (here: SIGINT sent to the client right after the first chunk is written,
    deterministically) stops the sweep with KeyboardInterrupt and nothing else on stderr: no worker heartbeat
    errors, no event-loop traceback (a NameError from distributed's ``sync`` cancelling a future not yet bound).
    The loggers and the SIGINT handler are back afterwards, and a re-run evaluates only the points not written."""
    import logging
    import os
    import signal

    import hnplan.planning.sweep as sweep_mod
    from hnplan.planning.sweep_signals import DASK_LOGGERS

    path, out = _write(tmp_path, TINY), tmp_path / "ds"
    write = sweep_mod.write_chunk

    def write_then_interrupt(df, folder, name):
        write(df, folder, name)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(sweep_mod, "write_chunk", write_then_interrupt)
    levels = [logging.getLogger(n).level for n in DASK_LOGGERS]
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(path, out, workers=2, progress=False)
    assert signal.getsignal(signal.SIGINT) is handler
    assert [logging.getLogger(n).level for n in DASK_LOGGERS] == levels
    err = capfd.readouterr().err
    assert "Traceback" not in err and "NameError" not in err and "heartbeat" not in err.lower(), err
    written = len(read_sweep(out))
    assert 1 <= written < 6  # the chunks written before the interruption, whole (2 points a chunk at most)
    monkeypatch.setattr(sweep_mod, "write_chunk", write)
    again = run_sweep(path, out, workers=2, processes=False, progress=False)
    assert (again.skipped, again.evaluated) == (written, 6 - written) and len(read_sweep(out)) == 6


def test_quiet_on_interrupt_silences_dask_loggers_then_raises(python_sigint):
    """The SIGINT handler of a sweep raises the loggers of distributed, tornado and asyncio to CRITICAL before
    raising KeyboardInterrupt (so the shutdown that follows logs nothing), and puts them back afterwards."""
    import logging
    import os
    import signal

    from hnplan.planning.sweep_signals import DASK_LOGGERS, _quiet_on_interrupt

    before = [logging.getLogger(n).level for n in DASK_LOGGERS]
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with _quiet_on_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGINT)
            finally:
                seen = [logging.getLogger(n).level for n in DASK_LOGGERS]
    assert seen == [logging.CRITICAL] * len(DASK_LOGGERS)
    assert [logging.getLogger(n).level for n in DASK_LOGGERS] == before


def test_a_sweep_names_its_chips_planned_at_the_ideal_default(tmp_path):
    """train, compare, size and infer say when a chip lacks its sustained clock and memory-kernel efficiencies
    (planned at 1.0, optimistic); a sweep over such a chip said nothing. The summary and the command say it."""
    from typer.testing import CliRunner

    from hnplan.cli import app

    axes = {"system": ["seed-40card", "hgx-h100-ib-ndr"], "model": ["llama3.1-8b"]}
    spec = _write(tmp_path, {**TINY, "samples": 1, "fixed": {**TINY["fixed"], "system": None}, "axes": axes})
    text = spec.read_text().replace("  system: null\n", "")
    spec.write_text(text)
    s = run_sweep(spec, tmp_path / "ds", workers=1, processes=False, progress=False)
    assert s.evaluated == 2 and s.failed == 0
    # seed-40card-accelerator carries neither field; h100-sxm both (data/accelerators/<id>.yaml)
    assert "`sustained_compute_fraction` and `memory_kernel_efficiency` on seed-40card-accelerator (" in (
        s.calibration_note
    )
    assert "h100-sxm" not in s.calibration_note
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds"), "--no-progress", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["calibration_note"] == s.calibration_note
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "ds"), "--no-progress"])
    assert res.exit_code == 0 and "Not calibrated, modelled at the ideal default 1.0" in " ".join(res.stdout.split())
    h100 = _write(tmp_path, {**TINY, "samples": 1, "axes": {"model": ["llama3.1-8b"]}}, "h100.yaml")
    assert run_sweep(h100, tmp_path / "h100", workers=1, processes=False, progress=False).calibration_note == ""


def test_an_edited_system_file_makes_its_points_run_again(tmp_path):
    """A point's key hashed a system given by path as the path alone: after the file gained a price, a resume
    skipped its points and kept the old cost. The file's bytes (and those of a file it names by path) are in
    the key: an edit makes new points, which the resume evaluates; an unchanged file is skipped as before."""
    from hnplan.catalog.loader import data_dir

    system = tmp_path / "my-h100.yaml"
    base = (data_dir() / "systems" / "hgx-h100-ib-ndr.yaml").read_text().replace("id: hgx-h100-ib-ndr", "id: my-h100")
    system.write_text(base)
    spec = _write(
        tmp_path,
        {**TINY, "samples": 2, "fixed": {**TINY["fixed"], "system": str(system)}, "axes": {"pue": TINY["axes"]["pue"]}},
    )
    spec_text = spec.read_text().replace("pue:", "model: [llama3.1-8b]\n  pue:", 1)
    spec.write_text(spec_text)
    out = tmp_path / "ds"
    # a system of its own id has no catalog price: its points fail, saying to give the file a unit_price_usd
    first = run_sweep(spec, out, workers=1, processes=False, progress=False)
    assert (first.evaluated, first.failed) == (2, 2) and "give the system file its own unit_price_usd" in str(
        first.errors
    )
    assert run_sweep(spec, out, workers=1, processes=False, progress=False).skipped == 2
    # $400,000 for the 8-GPU server: $50,000 a GPU
    system.write_text(base + "unit_price_usd: 400000\n")
    priced = run_sweep(spec, out, workers=1, processes=False, progress=False)
    assert (priced.skipped, priced.evaluated, priced.failed) == (0, 2, 0)
    dear = read_sweep(out).set_index("point_id").loc[sweep_points(spec)["point_id"]]
    system.write_text(base + "unit_price_usd: 300000\n")
    repriced = run_sweep(spec, out, workers=1, processes=False, progress=False)
    assert (repriced.skipped, repriced.evaluated, repriced.failed) == (0, 2, 0)
    df = read_sweep(out).set_index("point_id").loc[sweep_points(spec)["point_id"]]
    assert len(read_sweep(out)) == 6
    # the same draws at three quarters of the hardware price: a lower cost, the same plan
    assert (df["tco_usd"].to_numpy() < dear["tco_usd"].to_numpy()).all()
    assert (df["tokens_per_s"].to_numpy() == dear["tokens_per_s"].to_numpy()).all()
    # the same edit made again is the same points
    assert run_sweep(spec, out, workers=1, processes=False, progress=False).skipped == 2
    # a file the system names by path counts too
    acc = tmp_path / "my-acc.yaml"
    acc.write_text((data_dir() / "accelerators" / "h100-sxm.yaml").read_text())
    system.write_text(base.replace("accelerator: h100-sxm", f"accelerator: {acc}"))
    ids = set(sweep_points(spec)["point_id"])
    acc.write_text(acc.read_text() + "\n# edited\n")
    assert ids.isdisjoint(sweep_points(spec)["point_id"])
    # a catalog id keeps the key of its value alone (the catalog's hash is in each row)
    h100 = _write(tmp_path, {**TINY, "samples": 1, "axes": {"model": ["llama3.1-8b"]}}, "h100.yaml")
    r = sweep_points(h100).iloc[0]
    assert r["point_id"] == point_id(r.drop(["point_id", "sample"]).to_dict())


def test_a_point_weighs_its_purchase_as_compare_does():
    """100 GPUs of HGX H100 for Llama 3.1 8B at 144 sequences a step: no layout divides 100 (nor the 104 of the 13
    servers bought), so the point runs on 96, as compare does, where it failed before; the plan equals compare's."""
    from hnplan.planning.compare import compare_design_rows
    from hnplan.planning.sweep import plan_task

    key = {"model": "llama3.1-8b", "system": "hgx-h100-ib-ndr", "gpus": 100, "seq_len": 8192}
    key |= {"global_batch_seqs": 144, "dtype": "bf16", "stack": "none"}
    out = plan_task(key)
    assert "error" not in out and (out["gpus_used"], out["gpus_bought"]) == (96, 104)
    (row,) = compare_design_rows("llama3.1-8b", ["hgx-h100-ib-ndr"], 100, 1e11, 8192, 144, stack=None, goodput=False)
    assert (row["gpus"], row["gpus_bought"]) == (96, 104)
    assert out["tokens_per_s"] == pytest.approx(row["tokens_per_s"], rel=1e-9)
    assert out["tp"] * out["pp"] * out["dp"] * out["cp"] == 96


def test_a_points_costs_and_goodput_are_its_purchases_as_compare_prices_it(tmp_path):
    """576 GB200 GPUs (eight NVL72 racks) for Llama 3.1 8B at 512 sequences a step: the job runs on 512 (64 of each
    rack, faster), the eight racks are paid for and powered, and their idle trays are hot spares in the goodput,
    as compare prices the purchase (same goodput and days); the point's costs were of 576 GPUs training and no
    spares before."""
    from hnplan.planning.compare import compare_design_rows
    from hnplan.planning.sweep import evaluate_chunk, plan_task
    from hnplan.planning.sweep_points import sweep_points

    spec = {
        "id": "buy",
        "name": "buy",
        "sampling": "grid",
        "fixed": {"system": "gb200-nvl72", "gpus": 576, "tokens": 1.0e11, "seq_len": 8192, "global_batch_seqs": 512},
        "axes": {"model": ["llama3.1-8b"]},
    }
    points = sweep_points(load_sweep_spec(str(_write(tmp_path, spec))))
    key = points.iloc[0].to_dict()
    plan = plan_task(key)
    (row,) = evaluate_chunk(points, plan).to_dict("records")
    (cmp,) = compare_design_rows("llama3.1-8b", ["gb200-nvl72"], 576, 1e11, 8192, 512)
    assert (row["gpus_used"], row["gpus_bought"]) == (cmp["gpus"], cmp["gpus_bought"]) == (512, 576)
    assert row["goodput"] == pytest.approx(cmp["goodput"], rel=1e-6)
    assert row["days_to_train"] == pytest.approx(cmp["days"], rel=1e-6)
