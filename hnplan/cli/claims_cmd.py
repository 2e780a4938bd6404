"""``hnplan claims``: the claims audit of the seed documents, one row per claim."""

from __future__ import annotations

from contextlib import contextmanager

import typer
from rich.table import Table

from hnplan.cli._app import app, console, err_console, escape, handle_errors, print_json
from hnplan.labels import quantity_text

_COLOUR = {
    "holds": "green",
    "does not hold": "red",
    "holds under conditions": "yellow",
    "not testable": "dim",
    "undecided": "magenta",
}


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


@contextmanager
def _run_progress():
    """A progress bar on stderr for the shared-cluster runs the audit simulates because no cache holds them
    (minutes the first time after a change of code or catalog, then cached); off a terminal (a log, a pipe) one
    line as each batch of runs starts and one as it ends, so that a run of many minutes is not silent; nothing
    when every run is read back. Yields the ``progress(done, total)`` callback."""
    if not err_console.is_terminal:
        import time

        started = [0.0]

        def lines(done: int, total: int) -> None:
            if done == 0:
                started[0] = time.perf_counter()
                err_console.print(
                    f"claims: simulating {total:,} shared-cluster run{'s' * (total != 1)} no cache holds "
                    "(minutes the first time after a change of code or catalog, then cached)",
                    highlight=False,
                    markup=False,
                )
            elif done >= total:
                err_console.print(
                    f"claims: {total:,} run{'s' * (total != 1)} simulated in {time.perf_counter() - started[0]:,.0f} s",
                    highlight=False,
                    markup=False,
                )

        yield lines
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("claims: simulating the shared-cluster experiments (then cached)"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    task = None

    def progress(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("runs", total=total)
        bar.update(task, completed=done, total=total)
        if done >= total:  # one batch of runs finished; the next experiment may start another
            bar.remove_task(task)
            task = None

    try:
        yield progress
    finally:
        bar.stop()


@app.command()
def claims(
    only: list[str] = typer.Option(None, "--only", help="claim id to run (repeat for several); all when omitted"),
    json_: bool = typer.Option(False, "--json", help="print a JSON list, one object per claim"),
):
    """Audit every numeric claim of the seed documents: the experiment, the verdict computed from the
    planners' numbers (holds / does not hold / holds under conditions / not testable / undecided) and its condition.

    Each grid point's best plan is kept in an on-disk cache while the catalog and the code are unchanged
    ($XDG_CACHE_HOME/hnplan, else ~/.cache/hnplan); HNPLAN_NO_CACHE=1 plans every point again."""
    with handle_errors():
        from hnplan.errors import InputError
        from hnplan.planning.claims import audit, claim_ids

        if only:
            ids = ", ".join(claim_ids())
            if any(not c.strip() for c in only):  # --only "" (an unset shell variable)
                raise InputError(f"--only needs a claim id; got an empty one; ids: {ids}")
            unknown = sorted(set(only) - set(claim_ids()))
            if unknown:
                from hnplan.catalog.yaml_io import nearest_name

                s = "s" if len(unknown) > 1 else ""
                near = [n for u in unknown if (n := nearest_name(u, claim_ids()))]
                raise InputError(
                    f"--only: unknown claim id{s} {', '.join(map(repr, unknown))}"
                    + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
                    + f"; ids: {ids}"
                )
        with _run_progress() as progress:
            result = audit(only=only or None, progress=progress)
        if json_:
            print_json([c.as_dict() for c in result])
            return
        t = Table(title="Claims of the seed documents, tested", show_lines=True)
        for col in ("id", "seed file", "claim", "experiment", "verdict", "condition", "numbers"):
            t.add_column(col, overflow="fold")
        for c in result:
            nums = "\n".join(quantity_text(k, f"= {_num(v)}") for k, v in c.numbers.items())
            t.add_row(
                c.id,
                c.seed_file,
                c.claim,
                escape(c.experiment),
                f"[{_COLOUR[c.verdict]}]{c.verdict}[/]",
                escape(c.condition),
                escape(nums),  # "[-]" and "[s]" are units, not rich markup
            )
        console.print(t)
