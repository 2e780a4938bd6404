"""``hnplan calibrate``: fit a software stack's efficiencies to the user's own measured runs."""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager

import typer
from rich.table import Table

from hnplan.cli._app import app, console, err_console, escape, handle_errors, print_json


@contextmanager
def _flag_named(paths: dict[str, str | None]):
    """A planner error about one of the files the user named (``runs.yaml: run x: ...``) re-raised with the
    flag that gave the file in front (``--runs: runs.yaml: run x: ...``), as ``check_refs`` names ``--stack``;
    an error that names its flag at the end (``... (--accelerator)``) gets that flag in front instead. The
    kind (exit 2 or 3) and a catalog error's path, entry and field are kept."""
    from hnplan.errors import CatalogError, HnplanError

    try:
        yield
    except HnplanError as exc:
        text = str(exc)
        flag = next((f for f, p in paths.items() if p and text.startswith(f"{p}:")), None)
        tail = re.search(r" \((--[a-z-]+)\)$", text)
        if tail is not None:
            flag, text = tail.group(1), text[: tail.start()]
        if flag is None or text.startswith("--"):
            raise
        if isinstance(exc, CatalogError):
            raise CatalogError(f"{flag}: {text}", path=exc.path, entry=exc.entry, field=exc.field) from None
        raise type(exc)(f"{flag}: {text}") from None


@contextmanager
def _long_lived_imports():
    """Import the fit's modules (the planners) without the cyclic garbage collector, then move what exists to
    the collector's permanent generation (:func:`gc.freeze`): module objects live as long as the process, so
    scanning them again and again is wasted work. The collector runs as usual for the fit, which imports
    scipy.optimize itself (:func:`hnplan.planning.calibrate_fit.fit`) once the runs are read and checked, so
    a bad input is answered without that import. Only on the first import in a process (the command
    line's): a program that calls the command again, or has the modules already, keeps its collector as it
    is."""
    import gc
    import sys

    if "hnplan.planning.calibrate" in sys.modules:
        yield
        return
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


#: where the calibrated files go without --out (the folder is made): one folder for the stack file and, with a
#: sweep, the system and fabric files beside it, not the current folder
DEFAULT_FOLDER = "calibration"


@app.command()
def calibrate(
    runs: str = typer.Option(
        ...,
        "--runs",
        help="YAML list of measured runs (id, model, system, gpus, seq_len, global_batch_seqs, dtype, "
        "metric, published; fixed: the knobs used), as docs/examples/calibration_runs.yaml",
    ),
    stack: str = typer.Option(..., "--stack", help="software stack id or YAML path the runs were made with"),
    accelerator: str = typer.Option(None, "--accelerator", help="fit only the runs on this accelerator"),
    collectives: str = typer.Option(
        None,
        "--collectives",
        help="nccl-tests sweep CSV (op, gpus, size_bytes, busbw_GBps or time_us[, algorithm, system]) as "
        "docs/examples/nccl_tests.csv: fits the fabrics' bandwidth efficiency first",
    ),
    out: str = typer.Option(
        None,
        "--out",
        help=f"stack YAML to write, or a folder for <stack>-calibrated.yaml (one there, or a new name without "
        f"a suffix); default {DEFAULT_FOLDER}/"
        "<stack>-calibrated.yaml. With --collectives the "
        "calibrated system and fabric YAMLs are written beside it. A file there that an earlier calibrate run did "
        "not write for the same path is never replaced (exit 2)",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Fit a stack's GEMM efficiency and overlap to measured runs; print each run's leave-one-out error.

    Only the efficiencies the runs identify are fitted (at most one per run); the answer says which were
    kept and why. Writes the calibrated stack YAML (with provenance) for `hnplan train --stack`, and
    with --collectives a system YAML whose fabrics carry the measured bandwidth efficiency, by default all
    under ./calibration/; each file written is listed, and one that replaced an earlier run's is said.
    """
    with handle_errors():
        with _long_lived_imports():
            from hnplan.catalog.checks import check_refs
            from hnplan.planning.calibrate import calibrate as fit_stack
            from hnplan.planning.calibrate_comm import OFF_AFTER_FIT_PCT
            from hnplan.planning.calibrate_write import write_calibration

        from hnplan.errors import InputError

        for flag, value, what in (
            ("--runs", runs, "a YAML file of measured runs"),
            ("--collectives", collectives, "an nccl-tests sweep CSV file"),
            ("--out", out, "a stack YAML file or a folder"),
        ):
            if value is not None and not value.strip():  # "" is the current folder to a path: said as given
                raise InputError(f"{flag} is empty; give the path of {what}")
        check_refs({"--stack": ("stacks", stack), "--accelerator": ("accelerators", accelerator)})
        with _flag_named({"--runs": runs, "--collectives": collectives}):
            cal = fit_stack(runs, stack, accelerator=accelerator, collectives_path=collectives)
        from pathlib import Path

        name = f"{cal.calibrated.id}.yaml"
        target = Path(out) if out is not None else Path(DEFAULT_FOLDER) / name
        # a folder (one there, one written with a trailing /, or a new name without a suffix, as `--out cal`):
        # the default name in it; before, a new `--out cal` became a stack file named `cal`
        folder = (
            target.is_dir()
            or out is not None
            and (out.endswith(("/", os.sep)) or not (target.suffix or target.exists()))
        )
        if out is not None and folder:
            target = target / name
        there = {p.resolve() for p in target.parent.glob("*.yaml")} if target.parent.is_dir() else set()
        with _flag_named({"--out": str(target.resolve()) if out is not None else None}):
            written = write_calibration(cal, target)
        files = [written["stack"], *written.get("systems", []), *written.get("interconnects", [])]
        written = {**written, "replaced": [f for f in files if Path(f) in there]}
        if json_:
            print_json({**cal.to_dict(), "written": written})
            return
        pct = lambda v: "n/a" if v is None or math.isnan(v) else f"{v:+.1f}%"  # noqa: E731
        t = Table(title=f"{len(cal.run_rows)} measured run(s), stack {cal.stack.id}")
        for col in ("run", "GPUs", "metric", "published", "before", "after", "error before", "after", "LOO error"):
            t.add_column(col, justify="left" if col in ("run", "metric") else "right")
        for r in cal.run_rows:
            t.add_row(
                r["id"],
                f"{r['gpus']:,}",
                r["metric"],
                f"{r['published']:,.4g}",
                f"{r['before']:,.4g}",
                f"{r['after']:,.4g}",
                pct(r["error_before_pct"]),
                pct(r["error_after_pct"]),
                pct(r["loo_error_pct"]),
            )
        console.print(t)
        if cal.comm is not None:
            c = Table(title="nccl-tests sweep (busbw [GB/s])")
            for col in ("line", "op", "GPUs", "size [B]", "measured", "before", "after", "error after", "fitted"):
                c.add_column(col, justify="left" if col == "op" else "right")
            for r in cal.comm.table.itertuples():
                c.add_row(
                    str(r.line),
                    r.op,
                    str(r.gpus),
                    f"{r.size_bytes:,.0f}",
                    f"{r.measured_busbw_GBps:.1f}",
                    f"{r.before_busbw_GBps:.1f}",
                    f"{r.after_busbw_GBps:.1f}",
                    pct(r.error_after_pct),
                    ("yes, OFF" if r.off_after_fit else "yes") if r.in_fit else "no",
                )
            console.print(c)
            off = int(cal.comm.table["off_after_fit"].sum())
            if off:
                console.print(
                    f"OFF: {off} fitted row(s) still more than {OFF_AFTER_FIT_PCT:g} % from the measured busbw after "
                    "the fit: one efficiency per fabric tier does not describe them (check their unit, algorithm "
                    "and ranks; the fitted efficiencies average over them)"
                )
        p = Table(title="efficiencies")
        for col in ("parameter", "before", "after", "bounds", "status"):
            p.add_column(col, justify="left" if col in ("parameter", "status") else "right")
        for q in cal.parameters:
            status = (
                ((q.note if "one-sided" in q.note else "fitted") + (", AT A BOUND" if q.at_bound else ""))
                if q.fitted
                else q.note
            )
            if q.fitted and "WARNING:" in q.note:
                status += ", WARNING (below)"
            p.add_row(q.name, f"{q.initial:.4g}", f"{q.value:.4g}", f"[{q.lower:g}, {q.upper:g}]", status)
        console.print(p)
        for q in cal.parameters:
            if q.fitted and "WARNING:" in q.note:
                console.print(f"{q.name}: {q.note[q.note.index('WARNING:') :]}", highlight=False, markup=False)
        for e in cal.excluded:
            console.print(f"excluded: {e}")
        rms = {k: cal.rms_pct(f"{k}_pct") for k in ("error_before", "error_after", "loo_error")}
        console.print(
            f"RMS error {rms['error_before']:.1f}% before, {rms['error_after']:.1f}% after, "
            + (
                f"{rms['loo_error']:.1f}% leave-one-out"
                if not math.isnan(rms["loo_error"])
                else "no leave-one-out (one run)"
            )
        )
        if cal.fit_warning:  # the fit did not improve on the stack it started from: say so before "use"
            err_console.print(f"[bold yellow]warning:[/] {escape(cal.fit_warning)}", highlight=False)
        use = f"hnplan train --stack {written['stack']}"
        if written.get("systems"):
            use += f" --system {written['systems'][0]}"
        console.print(f"wrote {', '.join(_relative(f) for f in files)}")
        if written["replaced"]:
            said = ", ".join(_relative(f) for f in written["replaced"])
            console.print(f"replaced the files an earlier calibration wrote for the same stack file: {said}")
        if written.get("stale"):
            said = ", ".join(_relative(f) for f in written["stale"])
            console.print(
                f"stale: {said}, written for this stack file by an earlier calibration with a sweep and not by this "
                "one: their fabrics are that sweep's (remove them, or calibrate with --collectives again)"
            )
        console.print(f"use: {use} ...")


def _relative(path: str) -> str:
    """``path`` relative to the current folder where it lies under it (``calibration/x.yaml``), else as is."""
    from pathlib import Path

    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path
