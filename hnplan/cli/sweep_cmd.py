"""``hnplan sweep``: a design-space sweep on Dask into a Parquet dataset (thin: the work is in
:mod:`hnplan.planning.sweep`)."""

from __future__ import annotations

from pathlib import Path

import typer

from hnplan.cli._app import app, console, err_console, escape, handle_errors, print_json


@app.command()
def sweep(
    spec: str = typer.Argument(..., metavar="SPEC", help="sweep spec: a YAML path or an id in data/sweeps/"),
    out: Path = typer.Option(..., "--out", help="dataset folder (hive-partitioned Parquet); a re-run resumes it"),
    workers: int = typer.Option(
        None,
        "--workers",
        min=1,
        help="local Dask workers (default: the cores); not with --scheduler, whose cluster has its own",
    ),
    scheduler: str = typer.Option(
        None, "--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786 (default: a LocalCluster)"
    ),
    connect_timeout: float = typer.Option(
        None,
        "--connect-timeout",
        metavar="SECONDS",
        help="seconds to wait for --scheduler to answer before giving up (default 5); only with --scheduler",
    ),
    threads: bool = typer.Option(
        False, "--threads", help="local workers as threads of this process; not with --scheduler"
    ),
    retry_failed: bool = typer.Option(
        False,
        "--retry-failed",
        help="also evaluate again the points whose row has an error (after fixing its cause); their rows are "
        "replaced, file by file",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar on stderr"),
    json_: bool = typer.Option(False, "--json", help="print the run's summary as one JSON object"),
):
    """Run every point of a sweep spec through the training planner and the procurement model on Dask
    and append inputs, outputs and provenance to a Parquet dataset (points already there are skipped;
    a point that fails keeps its row with the message in `error`; --retry-failed evaluates those again).
    Exit 1 when points were lost (a worker died): the same command evaluates them."""
    with handle_errors():
        from hnplan.planning.sweep_signals import sigterm_as_interrupt

        # SIGTERM stops the run as Ctrl-C does (one line, exit 130) from here on, the seconds spent loading Dask,
        # pandas and the planners included; run_sweep puts its own handler in place around the cluster
        with sigterm_as_interrupt():
            from hnplan.errors import InputError
            from hnplan.planning.sweep import CONNECT_TIMEOUT_S, run_sweep

            if connect_timeout is not None and scheduler is None:
                raise InputError(
                    "--connect-timeout bounds the wait for --scheduler to answer; without --scheduler the sweep starts "
                    "its own local cluster: give --scheduler ADDRESS or drop --connect-timeout"
                )
            if threads and scheduler is not None:
                raise InputError(
                    "--threads makes the local cluster's workers threads; with --scheduler the points run on "
                    "that cluster's own workers: give one or the other"
                )

            s = run_sweep(
                spec,
                out,
                workers=workers,
                scheduler=scheduler,
                processes=not threads,
                progress=progress,
                retry_failed=retry_failed,
                connect_timeout_s=CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout,
            )
    if json_:
        print_json(s.as_dict())
        _exit_if_lost(s)
        return
    console.print(
        f"sweep {s.spec_id}: {s.points} points, {s.skipped} already in {s.out}, "
        + (f"{s.retried} failed ones retried, " if s.retried else "")
        + f"{s.evaluated} evaluated "
        f"({s.plans} training searches), {s.failed} failed, in {s.seconds:.1f} s",
        highlight=False,
    )
    if s.failed_kept:
        console.print(
            f"  {s.failed_kept:,} of the points already there failed (their rows keep the error): "
            "--retry-failed evaluates them again",
            highlight=False,
            markup=False,
        )
    if s.stale:
        console.print(
            f"  {s.stale:,} of the points already there were evaluated with another catalog than this one "
            f"({s.catalog_hash}): their rows keep those numbers; give a new --out (or delete {s.out}) to recompute",
            highlight=False,
            markup=False,
        )
    if s.other_code:
        console.print(
            f"  {s.other_code:,} of the points already there were computed by other hnplan code than this one "
            f"({s.code_fingerprint}; or before rows recorded it): their rows keep those numbers; give a new --out "
            f"(or delete {s.out}) to recompute",
            highlight=False,
            markup=False,
        )
    for msg, n in sorted(s.errors.items(), key=lambda kv: -kv[1])[:5]:
        console.print(f"  {n:,} x {msg}", highlight=False, markup=False)
    if s.calibration_note:
        console.print(f"  {s.calibration_note}", highlight=False, markup=False)
    _exit_if_lost(s)


def _exit_if_lost(s) -> None:
    """Points whose Dask task failed (a worker died) were not written: one line on stderr saying how many and
    what to do, exit 1 (as a report that failed: the run did not finish its work; the same command does)."""
    if s.lost:
        err_console.print(
            f"[bold red]incomplete:[/] {s.lost:,} points not evaluated ({escape(s.lost_reason)}): run the same "
            "command again to evaluate them",
            highlight=False,
        )
        raise typer.Exit(1)
