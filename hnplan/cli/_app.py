"""The Typer application and the helpers every sub-command shares."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup, TyperOption

from hnplan.cli._console import _LazyConsole, console, err_console, escape  # noqa: F401 - public here as before
from hnplan.cli._help_fold import long_words_fold_in_help
from hnplan.cli._json import print_json  # noqa: F401 - the commands' JSON output, imported from here
from hnplan.cli._options import (  # noqa: F401 - re-exported: the commands import them from here
    MAX_COUNT,
    check_finite,
    count,
    decimal_hint,
    name_option,
    path_option,
)
from hnplan.cli._usage import TYPED_ARGS, required_arguments_plain, show_usage_error, usage_error_text
from hnplan.errors import HnplanError, InfeasiblePlan

if TYPE_CHECKING:
    from rich.table import Table

# Typer 0.2x parses with its own copy of click (``typer._click``) and older releases with click itself;
# the classes below come from typer, so a command never imports click when typer does not use it
# (importing click costs about 12 ms of start-up).
_CLICK_MODULES = ("typer._click", "click")

CLI_DIR = Path(__file__).resolve().parent


def command_modules() -> dict[str, str]:
    """Sub-command name -> module: every ``hnplan/cli/<name>_cmd.py`` registers the sub-command ``<name>``
    (underscores become dashes) on :data:`app` when imported."""
    return {
        p.name[: -len("_cmd.py")].replace("_", "-"): f"hnplan.cli.{p.stem}" for p in sorted(CLI_DIR.glob("*_cmd.py"))
    }


def unwrap_help(text: str) -> str:
    r"""A docstring as help text: the lines of each paragraph joined, so the terminal wraps them (typer's rich
    mode keeps a docstring's line breaks); a paragraph with list items or indented lines is kept as written.

    >>> unwrap_help("Fit a stack to runs;\nprint each run's error.\n\nThen:\n- one\n- two")
    "Fit a stack to runs; print each run's error.\n\nThen:\n- one\n- two"
    """
    out = []
    for para in inspect.cleandoc(text or "").split("\n\n"):
        lines = para.split("\n")
        keep = para.startswith("\b") or any(ln.startswith((" ", "-", "*", "\b")) for ln in lines[1:])
        out.append(para if keep else " ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


def unit_brackets(text: str) -> str:
    r"""Square brackets of units (``[tokens]``, ``[GB/s]``) escaped, so typer's rich help prints them instead of
    reading them as markup tags and dropping them.

    >>> unit_brackets("prompt length [tokens]")
    'prompt length \\[tokens]'
    """
    return re.sub(r"(?<!\\)\[", r"\\[", text)


def _flags_show_no_type() -> None:
    """Make typer's rich help leave the type column of a flag empty.

    Typer 0.29 prints every option's type beside it in ``--help``, a flag's too (``--json <bool>``), as if
    the flag took a value; its plain-text help already omits the type of a flag and of a counter. This
    makes the rich help agree: an option that takes no value (``is_flag`` or ``count``) shows no type.
    Applied once at import; a typer without ``TyperOption.display_type_rich`` is left alone.
    """
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_hnplan_flag_aware", False):
        return

    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) or getattr(self, "count", False):
            return None
        return shown(self, ctx)

    display_type_rich._hnplan_flag_aware = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_type()

long_words_fold_in_help()

required_arguments_plain()


def _unwrap_command(cmd: TyperCommand) -> TyperCommand:
    """``cmd`` (and a group's sub-commands) with :func:`unwrap_help` applied to its help and the unit brackets
    of its help and its options' help escaped (:func:`unit_brackets`); done once per command."""
    if getattr(cmd, "_hnplan_help_ready", False):
        return cmd
    if cmd.help:
        cmd.help = unit_brackets(unwrap_help(cmd.help))
    for param in cmd.params:
        if getattr(param, "help", None):
            param.help = unit_brackets(param.help)  # type: ignore[attr-defined]
    cmd._hnplan_help_ready = True  # type: ignore[attr-defined]
    for sub in getattr(cmd, "commands", {}).values():
        _unwrap_command(sub)
    return cmd


def _help_from_source(module: str, name: str) -> str:
    """The help text of sub-command ``name`` read from its module's source without importing it: the
    docstring of the function decorated with ``@app.command``, or the ``help=`` of the Typer group that
    ``app.add_typer`` registers."""
    import ast

    tree = ast.parse((CLI_DIR / f"{module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8"))
    groups: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            ast.unparse(d).startswith("app.command(") for d in node.decorator_list
        ):
            return unwrap_help(ast.get_docstring(node) or "")
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("Typer")
        ):
            for kw in node.value.keywords:
                if kw.arg == "help" and isinstance(kw.value, ast.Constant):
                    groups[ast.unparse(node.targets[0])] = kw.value.value
    for var, text in groups.items():
        if f"app.add_typer({var}" in ast.unparse(tree):
            return unwrap_help(text)
    return ""


class _LazyCommand(TyperCommand):
    """Stands in for a sub-command whose module is not imported yet: lists its help read from the source,
    and imports the module (and builds the real command) only when the sub-command runs or shows its help."""

    def __init__(self, name: str, module: str):
        self._module = module
        self._help: str | None = None
        super().__init__(name)
        self._real: TyperCommand | None = None

    @property
    def help(self) -> str:  # type: ignore[override]
        """The help read from the source when a listing asks for it (a command that runs never parses it)."""
        if self._help is None:
            self._help = _help_from_source(self._module, self.name or "")
        return self._help

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value

    def real(self) -> TyperCommand:
        """The sub-command itself, its module imported."""
        if self._real is None:
            importlib.import_module(self._module)
            built = typer.main.get_command(app)
            self._real = _unwrap_command(built.commands[self.name])
        return self._real

    def make_context(self, info_name, args, parent=None, **extra):
        return self.real().make_context(info_name, args, parent=parent, **extra)

    @property
    def commands(self) -> dict:
        """A sub-group's sub-commands (imports the module), for code that walks the command tree."""
        real = self.real()
        if not isinstance(real, TyperGroup):
            raise AttributeError("commands")
        return real.commands


def stdout_closed():
    """Stop quietly with exit 0 because the reader of stdout has gone (``hnplan catalog list | head -1``).

    A closed pipe is not an error of the run: the reader took what it wanted, as ``head`` does. stdout is
    pointed at the null device first, so the flush at interpreter exit does not fail a second time (the
    way the Python documentation's note on SIGPIPE recommends).

    Raises
    ------
    typer.Exit
        Always, with code 0.
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a captured stdout (tests) has no file descriptor
        pass
    raise typer.Exit(0)


def _stdout_is_devnull() -> bool:
    import os

    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError, AttributeError):
        return False


@contextmanager
def _closed_stdout_is_success():
    """A closed stdout inside the block ends the run with exit 0 (:func:`stdout_closed`): a
    ``BrokenPipeError``, or rich's answer to one (a console, typer's help too, points stdout at the null
    device and exits 1)."""
    was_devnull = _stdout_is_devnull()
    try:
        yield
    except BrokenPipeError:
        stdout_closed()
    except SystemExit as exc:
        if exc.code == 1 and not was_devnull and _stdout_is_devnull():
            raise typer.Exit(0) from None
        raise


class LazyGroup(TyperGroup):
    """The root command: sub-commands imported on first use, so ``hnplan train`` imports what ``train``
    needs and not the planners of every other sub-command. Commands registered by an eager
    import still work. A closed stdout (``| head``) ends any command quietly with exit 0
    (:func:`stdout_closed`)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run the command line; a usage error (an unknown option or command, a value that does not parse)
        is one line on stderr, exit 2 (:func:`~hnplan.cli._usage.show_usage_error`), instead of click's usage
        and rich box. Click's standalone handling is otherwise kept: ``Abort`` is ``Aborted!``, exit 1; an
        ``Exit`` ends with its code. With ``standalone_mode=False`` (``--json``, :func:`run_json`) errors
        propagate to the caller."""
        run = super().main
        if not standalone_mode:
            return run(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        exceptions = _click_module("exceptions")
        try:
            rv = run(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except exceptions.ClickException as exc:
            sys.exit(show_usage_error(exc))
        except typer.Abort:  # typer 0.2x's own Abort (its vendored click has none), click's before
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # an Exit's code; a command itself returns None

    def make_context(self, info_name, args, parent=None, **extra):
        typed = list(args)  # click's parser consumes the list it is given
        with _closed_stdout_is_success():  # the root's --help prints while parsing
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        ctx.meta[TYPED_ARGS] = typed  # a refused value is quoted in the one-line usage error
        return ctx

    def invoke(self, ctx):
        with _closed_stdout_is_success():
            return super().invoke(ctx)

    def list_commands(self, ctx) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(command_modules()))

    def get_command(self, ctx, cmd_name: str):
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and not isinstance(cmd, _LazyCommand):
            _unwrap_command(cmd)  # registered by an eager import
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


EXIT_INPUT = 2
EXIT_INFEASIBLE = 3


def _version(value: bool) -> None:
    if value:
        from hnplan import __version__

        typer.echo(f"hnplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """Capacity planning for AI clusters: supernodes vs 8-GPU server clusters."""
    # a callback keeps the root a group while no sub-command module is imported yet


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def _click_module(name: str):
    """The click module ``name`` (``globals``, ``exceptions``) typer parses with: the first of
    :data:`_CLICK_MODULES` that imports."""
    import importlib

    for package in _CLICK_MODULES:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ImportError:
            continue
    raise ImportError(f"neither typer._click nor click provides {name}")


def current_context():
    """The running sub-command's click context (its parsed ``params``), or None outside one."""
    return _click_module("globals").get_current_context(silent=True)


def _error_object(kind: str, exc: BaseException, code: int) -> dict:
    err = {"kind": kind, "exit_code": code, "message": str(exc)}
    for attr in ("path", "entry", "field"):
        if getattr(exc, attr, None) is not None:
            err[attr] = getattr(exc, attr)
    if isinstance(exc, OSError) and exc.filename is not None:
        err["path"] = str(exc.filename)
    return {"error": err}


def os_error_message(exc: OSError, ctx=None) -> str:
    """One line for an operating-system error: the flag that gave the path where one did, the path, then
    what went wrong (no errno, no traceback). A file where a folder was to be made (``--out`` naming a
    file, or a file in the way of its parent folders) is said as such rather than as ``File exists``."""
    import os

    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is None:
        return what
    path = str(exc.filename)
    folder_needed = isinstance(exc, FileExistsError) and os.path.isfile(path)
    if folder_needed:
        what = "a file is there; a folder is needed"
    flag = path_option(ctx, path, folder_needed=folder_needed)
    return f"{flag} {path}: {what}" if flag else f"{path}: {what}"


def _fail(kind: str, exc: BaseException, code: int, as_json: bool, text: str | None = None):
    label = {"infeasible": "infeasible", "interrupted": "interrupted"}.get(kind, "error")
    text = text if text is not None else str(exc)
    err_console.print(f"[bold red]{label}:[/] {escape(text)}", highlight=False, markup=True)
    if as_json:
        obj = _error_object(kind, exc, code)
        obj["error"]["message"] = text
        print_json(obj)
    raise typer.Exit(code)


def exit_infeasible(text: str) -> None:
    """End a command whose user-given plan was evaluated and reported but cannot run (it does not fit in
    memory): one ``infeasible: ...`` line on stderr after the report, exit 3. The report (table or
    ``--json`` object) stays on stdout, so the user still sees why."""
    err_console.print(f"[bold red]infeasible:[/] {escape(text)}", highlight=False, markup=True)
    raise typer.Exit(EXIT_INFEASIBLE)


@contextmanager
def handle_errors():
    """Turn every error a user can cause into one message on stderr and an exit code: 2 for bad input
    (hnplan's :class:`InputError`, an operating-system error on a path), 3 for an infeasible plan,
    130 when interrupted. With ``--json`` the same error is also printed on stdout as
    ``{"error": {"kind", "exit_code", "message", "path", "entry", "field"}}``. Float options are checked
    to be finite before the command runs."""
    ctx = current_context()
    as_json = bool(ctx is not None and ctx.params.get("json_"))
    try:
        if ctx is not None:
            check_finite(ctx)
        yield
    except InfeasiblePlan as exc:
        _fail("infeasible", exc, EXIT_INFEASIBLE, as_json, name_option(ctx, str(exc)))
    except HnplanError as exc:
        _fail("input", exc, EXIT_INPUT, as_json, name_option(ctx, str(exc)))
    except BrokenPipeError:  # stdout's reader has gone (| head): LazyGroup ends the run quietly
        raise
    except OSError as exc:  # a path the user gave: unreadable, read-only, a folder, on a full disk
        _fail("os", exc, EXIT_INPUT, as_json, os_error_message(exc, ctx))
    except KeyboardInterrupt as exc:
        _fail("interrupted", exc, EXIT_INTERRUPTED, as_json, str(exc) or "stopped by Ctrl-C")  # or by SIGTERM
    except Exception as exc:
        # a notebook kernel's socket closed under Ctrl-C surfaces as zmq's error: an interruption, not a bug
        if type(exc).__module__.startswith("zmq"):
            _fail("interrupted", exc, EXIT_INTERRUPTED, as_json, "stopped: the notebook kernel was interrupted")
        raise


def run_json(argv: list[str]) -> int:
    """Run the CLI on ``argv`` (which asked for ``--json``); a usage error becomes one line on stderr
    (:func:`~hnplan.cli._usage.usage_error_text`) and the same line in ``{"error": {"kind": "usage",
    "exit_code": 2, "message": ...}}`` on stdout, exit 2. Returns the exit code."""
    errors = _click_module("exceptions").ClickException
    try:
        rv = app(args=argv, prog_name="hnplan", standalone_mode=False)
    except errors as exc:
        code = show_usage_error(exc)
        message = usage_error_text(exc)
        print_json({"error": {"kind": "usage", "exit_code": code, "message": message}})
        return code
    return rv if isinstance(rv, int) else 0


def whole_units_text(gpus: int, built: int, unit_gpus: int) -> str:
    """``100 -> 144 (2 whole units of 72)``: the GPUs asked and the whole purchasable units that hold
    them, the one rule ``tco`` (what is bought) and ``topology`` (what is wired) share."""
    n = built // unit_gpus
    whole = f"{n:,} whole unit{'s' if n != 1 else ''} of {unit_gpus:,}"
    return f"{built:,} ({whole})" if built == gpus else f"{gpus:,} -> {built:,} ({whole})"


def kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column rich table, at least as wide as its title (a narrow table would fold the title)."""
    from rich.table import Table

    t = Table(title=escape(title), show_header=False, min_width=len(title) + 4)
    t.add_column("quantity", style="bold")
    t.add_column("value", justify="right")
    for k, v in rows:
        # a unit such as "[s]" or "[days]" is text, not rich markup
        t.add_row(*(escape(x) if isinstance(x, str) else x for x in (k, v)))
    return t
