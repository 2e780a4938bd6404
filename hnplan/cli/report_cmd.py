"""``hnplan report``: run scenario notebooks into HTML reports."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from hnplan.catalog.loader import read_yaml
from hnplan.cli._app import app, console, err_console, handle_errors
from hnplan.errors import CatalogError, InputError
from hnplan.reports import DEFAULT_OUT, load_scenarios, run_reports


@app.command()
def report(
    scenario: str = typer.Option("default", "--scenario", help="scenario id, YAML path, or 'all'"),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="output folder"),
    jobs: int = typer.Option(1, "--jobs", min=1, help="notebooks run in parallel worker processes"),
    only: str = typer.Option(None, "--only", help="run only this notebook"),
    params: Path = typer.Option(None, "--params", help="YAML file of parameter overrides"),
    force: bool = typer.Option(False, "--force", help="re-run reports whose inputs have not changed"),
):
    """Execute a scenario's notebooks with papermill and write HTML reports plus index.html.

    Exit code 1 if any notebook failed (the others still run and keep their reports); 2 for bad input,
    checked before any notebook runs (with --scenario all, a scenario that fails its checks is named in one
    line, exit 2, after the others have run). With --params the run writes to OUT/<scenario>+<params file name>/
    under its own title; the scenario's own reports are left as they are.
    """
    with handle_errors():
        overrides = None
        if params is not None:
            overrides = read_yaml(params, "--params")
            if not isinstance(overrides, dict):
                raise InputError(f"--params {params}: expected a mapping of parameter names to values")
        bad: list[str] = []  # --scenario all: the scenarios that fail their checks, named after the others ran
        try:
            scenarios = load_scenarios(scenario, errors=bad)
        except CatalogError as exc:  # a missing file, an unknown id or a bad field: name the flag too
            raise CatalogError(f"--scenario: {exc}", path=exc.path, entry=exc.entry, field=exc.field) from None
        if bad and not scenarios:
            raise InputError(bad[0])
        results = run_reports(
            scenarios,
            out,
            jobs=jobs,
            only=only,
            params_override=overrides,
            force=force,
            params_label=params.stem if params is not None else None,
            params_source=str(params) if params is not None else None,
        )
    for r in results:
        colour = {"ok": "green", "failed": "red", "skipped": "dim"}[r.status]
        console.print(
            f"[{colour}]{r.status:8}[/] {r.scenario}/{r.notebook} ({r.seconds:.1f} s)"
            + (f"\n         {escape(r.error.splitlines()[0])}" if r.error else ""),
            highlight=False,
        )
    console.print(f"index: {Path(out) / 'index.html'}")
    for line in bad:
        err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False)
    if bad:
        raise typer.Exit(2)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)
