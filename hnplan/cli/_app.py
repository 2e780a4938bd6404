"""The Typer application and the helpers every sub-command shares."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
import typer
import typer.main
from typer.core import TyperGroup

from hnplan.errors import HnplanError, InfeasiblePlan

if TYPE_CHECKING:
    from rich.table import Table

CLI_DIR = Path(__file__).resolve().parent


def command_modules() -> dict[str, str]:
    """Sub-command name -> module: every ``hnplan/cli/<name>_cmd.py`` registers the sub-command ``<name>``
    (underscores become dashes) on :data:`app` when imported."""
    return {p.name[:-len("_cmd.py")].replace("_", "-"): f"hnplan.cli.{p.stem}"
            for p in sorted(CLI_DIR.glob("*_cmd.py"))}


def _help_from_source(module: str, name: str) -> str:
    """The help text of sub-command ``name`` read from its module's source without importing it: the
    docstring of the function decorated with ``@app.command``, or the ``help=`` of the Typer group that
    ``app.add_typer`` registers."""
    tree = ast.parse((CLI_DIR / f"{module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8"))
    groups: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(ast.unparse(d).startswith("app.command(")
                                                     for d in node.decorator_list):
            return ast.get_docstring(node) or ""
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func).endswith("Typer"):
            for kw in node.value.keywords:
                if kw.arg == "help" and isinstance(kw.value, ast.Constant):
                    groups[ast.unparse(node.targets[0])] = kw.value.value
    for var, text in groups.items():
        if f"app.add_typer({var}" in ast.unparse(tree):
            return text
    return ""


class _LazyCommand(click.Command):
    """Stands in for a sub-command whose module is not imported yet: lists its help read from the source,
    and imports the module (and builds the real command) only when the sub-command runs or shows its help."""

    def __init__(self, name: str, module: str):
        super().__init__(name, help=_help_from_source(module, name))
        self._module = module
        self._real: click.Command | None = None

    def real(self) -> click.Command:
        """The sub-command itself, its module imported."""
        if self._real is None:
            importlib.import_module(self._module)
            built = typer.main.get_command(app)
            self._real = built.commands[self.name]
        return self._real

    def make_context(self, info_name, args, parent=None, **extra):
        return self.real().make_context(info_name, args, parent=parent, **extra)

    rich_help_panel = None  # typer's help looks this up on every listed command

    @property
    def commands(self) -> dict:
        """A sub-group's sub-commands (imports the module), for code that walks the command tree."""
        real = self.real()
        if not isinstance(real, click.Group):
            raise AttributeError("commands")
        return real.commands


class LazyGroup(TyperGroup):
    """The root command: sub-commands imported on first use, so ``hnplan train`` imports what ``train``
    needs and not the planners of every other sub-command (issue 16). Commands registered by an eager
    import still work."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(command_modules()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None:
            module = command_modules().get(cmd_name)
            if module is not None:
                cmd = self.commands[cmd_name] = _LazyCommand(cmd_name, module)
        return cmd


app = typer.Typer(
    name="hnplan",
    help="Capacity planning for AI clusters: supernodes vs 8-GPU server clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


@app.callback()
def _root() -> None:
    # a callback keeps the root a group while no sub-command module is imported yet
    pass


class _LazyConsole:
    """A rich ``Console`` made on first use: a command that prints JSON never imports rich's console."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._console = None

    def __getattr__(self, attr):
        if self._console is None:
            from rich.console import Console

            kw = dict(self._kwargs)
            if kw.pop("auto_width", False):
                kw["width"] = None if sys.stdout.isatty() else 200
            self._console = Console(**kw)
        return getattr(self._console, attr)


# piped or captured output is not cut to 80 columns (numbers and ids must survive)
console = _LazyConsole(auto_width=True)
err_console = _LazyConsole(stderr=True, soft_wrap=True)  # never break a path or an id across lines

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
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("quantity", style="bold")
    t.add_column("value", justify="right")
    for k, v in rows:
        t.add_row(k, v)
    return t
