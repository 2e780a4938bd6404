"""The Typer application and the helpers every sub-command shares."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.table import Table

from hnplan.errors import HnplanError, InfeasiblePlan

app = typer.Typer(
    name="hnplan",
    help="Capacity planning for AI clusters: supernodes vs 8-GPU server clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# piped or captured output is not cut to 80 columns (numbers and ids must survive)
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, soft_wrap=True)  # never break a path or an id across lines

EXIT_INPUT = 2
EXIT_INFEASIBLE = 3


@contextmanager
def handle_errors():
    """Turn hnplan's errors into a one-paragraph message on stderr and a non-zero exit code:
    2 for bad input, 3 for an infeasible plan."""
    try:
        yield
    except InfeasiblePlan as exc:
        err_console.print(f"[bold red]infeasible:[/] {exc}", highlight=False, markup=True)
        raise typer.Exit(EXIT_INFEASIBLE) from None
    except HnplanError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        raise typer.Exit(EXIT_INPUT) from None


def print_json(obj) -> None:
    """Print one JSON object on stdout (numpy scalars converted)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_default) + "\n")


def _default(o):
    try:
        return o.item()
    except AttributeError:
        return str(o)


def kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column rich table."""
    t = Table(title=title, show_header=False)
    t.add_column("quantity", style="bold")
    t.add_column("value", justify="right")
    for k, v in rows:
        t.add_row(k, v)
    return t
