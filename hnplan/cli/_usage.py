"""The usage line of typer's help, as click writes it, and a usage error as one line."""

from __future__ import annotations

import re

from hnplan.cli._console import err_console, escape


def required_arguments_plain() -> None:
    """Make the usage line show a required positional argument as its metavar (``SPEC``), as click does,
    not in braces (``{spec}``, typer 0.29's usage form, which reads like a placeholder left unfilled); an
    optional one stays in brackets (``[KIND]``). Applied once at import; a typer without
    ``TyperArgument._usage_display_name`` is left alone."""
    from typer.core import TyperArgument

    shown = getattr(TyperArgument, "_usage_display_name", None)
    if shown is None or getattr(shown, "_hnplan_plain", False):
        return

    def _usage_display_name(self):
        name = shown(self)
        return name[1:].replace("}", "", 1) if self.required and name.startswith("{") else name

    _usage_display_name._hnplan_plain = True  # type: ignore[attr-defined]
    TyperArgument._usage_display_name = _usage_display_name  # type: ignore[method-assign]


def _nearest_command(message: str, ctx) -> str:
    """``. Did you mean 'train'?`` after click's ``No such command 'trian'`` (click suggests near options
    but not near sub-commands), or "". A word that begins one sub-command's name alone (``cluster sim``) is
    that sub-command, however short.

    >>> from types import SimpleNamespace as NS
    >>> ctx = NS(command=NS(list_commands=lambda ctx: ["simulate"]))
    >>> _nearest_command("No such command 'sim'", ctx), _nearest_command("No such command 'xyz'", ctx)
    (". Did you mean 'simulate'?", '')
    """
    import difflib
    import re

    typed = re.match(r"No such command '(.+)'$", message)
    lister = getattr(getattr(ctx, "command", None), "list_commands", None)
    if typed is None or lister is None:
        return ""
    names = list(lister(ctx))
    if "list" in names and "show" in names:  # the catalog group: a kind typed as a command (catalog stacks)
        from hnplan.catalog.schemas import KINDS

        word = typed.group(1).lower()
        kind = word if word in (*KINDS, "scenarios") else f"{word}s" if f"{word}s" in (*KINDS, "scenarios") else None
        if kind:
            return f". Did you mean 'list {kind}'?"
    near = [n for n in names if n.startswith(typed.group(1))]
    if len(near) != 1:
        near = difflib.get_close_matches(typed.group(1), names, n=1, cutoff=0.6)
    return f". Did you mean {near[0]!r}?" if near else ""


def usage_error_text(exc) -> str:
    """One line for a click usage error (``exc``, a ``ClickException``): the command as typed after ``hnplan``,
    click's message (which names the option in quotes, ``'--gpus'``) with its line breaks joined, and where
    the help lies.

    Click and typer print a usage error as several lines (the usage, a ``Try ... --help`` line, then the
    message in a rich box); hnplan prints every bad input as one line, as ``handle_errors`` does for its own.

    >>> from types import SimpleNamespace as NS
    >>> root = NS(info_name="python -m hnplan", parent=None)
    >>> train = NS(info_name="train", parent=root, command=NS(get_help_option=lambda ctx: object()))
    >>> exc = NS(ctx=train, format_message=lambda: "Invalid value for '--gpus':\\n'abc' is not a valid integer.")
    >>> usage_error_text(exc)
    "hnplan train: Invalid value for '--gpus': 'abc' is not a valid integer; see 'hnplan train --help'"
    >>> exc = NS(ctx=train, format_message=lambda: "No such option: --bogus\\nDid you mean --gpus?")
    >>> usage_error_text(exc)
    "hnplan train: No such option: --bogus. Did you mean --gpus? See 'hnplan train --help'"
    """
    ctx = getattr(exc, "ctx", None)
    names = []
    while ctx is not None and ctx.parent is not None:  # the root's name is the program as run (python -m hnplan)
        names.append(ctx.info_name)
        ctx = ctx.parent
    path = " ".join(["hnplan", *reversed([n for n in names if n])])
    message = ""
    for line in exc.format_message().splitlines():  # click 8.1: "No such option: --x\nDid you mean --gpus?"
        line = " ".join(line.split())
        if line:
            message += ("" if not message else " " if message.endswith((".", ":", ";", ",", "?")) else ". ") + line
    message = message.rstrip(".")
    message += _nearest_command(message, getattr(exc, "ctx", None))
    value = typed_value(exc)
    # 'nan' fails every min=/max= comparison: "should be greater than or equal to 1" would say it is below 1
    if (
        value is not None
        and value.strip().lower().lstrip("+-") == "nan"
        and re.search(r" (greater|less) than", message)
    ):
        message = re.sub(r"(Invalid value for '[^']+': ).*", r"\1must be a finite number", message)
    # typer 0.29: "Input should be a valid integer, ..." names no value; "... equal to 0.01" holds a typed "0"
    if value is not None and repr(value) not in message and f"got {value}" not in message:
        message += f"; got {value!r}"
    # a count's own message lists k, M, B, T; a value below the bound was read, units and all
    if not re.search(r"cannot read (count|amount) |must be at least ", message):
        message += _unit_hint(exc, value)
    # a whole-number option (--gpus, --tp, --jobs) is a plain integer; count options (--tokens) read "16,384"
    if value is not None and "valid integer" in message and re.fullmatch(r"\s*\d{1,3}(,\d{3})+\s*", value):
        opts = getattr(getattr(exc, "param", None), "opts", None) or ["the option"]
        message += f"; {max(opts, key=len)} takes no thousands separator: use {value.strip().replace(',', '')}"
    ctx = getattr(exc, "ctx", None)
    helped = ctx is not None and getattr(ctx, "command", None) is not None and ctx.command.get_help_option(ctx)
    if not helped:
        return f"{path}: {message}"
    return f"{path}: {message}" + (" See" if message.endswith("?") else "; see") + f" '{path} --help'"


#: the unit an option's name ends in (``--kv-budget-gib``: GiB), for a value typed with a unit of its own
_NAME_UNITS = (
    ("-usd-per-kwh", "USD per kWh"),
    ("-usd-per-year", "USD per year"),
    ("-gib", "GiB"),
    ("-ms", "ms"),
    ("-mw", "MW"),
    ("-days", "days"),
    ("-usd", "USD"),
    ("--years", "years"),
    ("--days", "days"),
)


#: options that take a fraction in (0, 1] or a ratio (``--load 0.85`` for 85 %): a value typed in per cent is
#: answered with the fraction it means
_FRACTION_OPTIONS = ("--load", "--gpu-memory-utilization", "--checkpoint-storage-share")


def _unit_hint(exc, value: str | None) -> str:
    """A hint for a number typed with a unit (``--kv-budget-gib 80GB``, ``--deadline-days 30d``,
    ``--ttft-slo-ms 1s``) where the option's name states its unit: ``; the unit is in the option's name
    (GiB): give the number alone``; empty for anything else.

    >>> from types import SimpleNamespace as NS
    >>> exc = NS(param=NS(opts=["--kv-budget-gib"]))
    >>> _unit_hint(exc, "80GB"), _unit_hint(exc, "abc"), _unit_hint(exc, None)
    ('; --kv-budget-gib is in GiB (2**30 bytes; 80 GB is 74.5 GiB): give the number alone', '', '')
    >>> _unit_hint(NS(param=NS(opts=["--ttft-slo-ms"])), "1 s")
    '; --ttft-slo-ms is in ms: give the number alone'
    >>> _unit_hint(NS(param=NS(opts=["--load"])), "85%")
    '; --load is a fraction: 85 % is 0.85'
    """
    import re

    opts = getattr(getattr(exc, "param", None), "opts", None) or []
    if value is None or not opts:
        return ""
    percent = re.fullmatch(r"\s*((?:[0-9]*\.)?[0-9]+)\s*%\s*", value)
    if percent is not None and max(opts, key=len) in _FRACTION_OPTIONS:
        share = float(percent.group(1))
        return f"; {max(opts, key=len)} is a fraction: {share:g} % is {share / 100:g}"
    m = re.fullmatch(r"\s*[+-]?(?:[0-9]*\.)?[0-9]+(?:[eE][+-]?[0-9]+)?\s*([A-Za-z][A-Za-z/]*)\s*", value)
    name = max(opts, key=len)
    unit = next((u for suffix, u in _NAME_UNITS if name.endswith(suffix)), None)
    if m is None or unit is None:
        return ""
    if unit == "GiB" and m.group(1).upper() == "GB":  # decimal gigabytes, as datasheets print them
        from hnplan.units import GB, GiB

        gb = float(value[: m.start(1)])
        return f"; {name} is in GiB (2**30 bytes; {gb:g} GB is {gb * GB / GiB:.1f} GiB): give the number alone"
    return f"; {name} is in {unit}: give the number alone"


def show_usage_error(exc) -> int:
    """Print a click usage error as one line on stderr (:func:`usage_error_text`) and return its exit code (2).
    Click's ``NoArgsIsHelpError`` (a group run without a sub-command) is the group's help, which typer has
    already printed; click's text, if any, is shown as click shows it."""
    code = getattr(exc, "exit_code", 2)
    if type(exc).__name__ == "NoArgsIsHelpError":
        if exc.format_message().strip():
            exc.show()
        return code
    err_console.print(f"[bold red]error:[/] {escape(usage_error_text(exc))}", highlight=False, markup=True)
    return code


#: the key of click's ``Context.meta`` (shared by a context and its sub-commands') under which
#: :class:`~hnplan.cli._app.LazyGroup` keeps the arguments as typed
TYPED_ARGS = "hnplan.typed_args"


def typed_value(exc) -> str | None:
    """The value the user typed for the option a click ``BadParameter`` refused (``abc`` of ``--gpus abc`` or
    ``--gpus=abc``; the last one given, the one click keeps), or ``None``: another error, an option given
    several times on purpose (``multiple``), or no typed arguments kept.

    >>> from types import SimpleNamespace as NS
    >>> gpus = NS(opts=["--gpus"], param_type_name="option", multiple=False)
    >>> ctx = NS(meta={TYPED_ARGS: ["train", "--gpus", "8", "--gpus=abc"]})
    >>> class BadParameter(Exception): ...
    >>> exc = BadParameter(); exc.param, exc.ctx = gpus, ctx
    >>> typed_value(exc)
    'abc'
    """
    param, ctx = getattr(exc, "param", None), getattr(exc, "ctx", None)
    if type(exc).__name__ != "BadParameter" or param is None or ctx is None:
        return None
    if getattr(param, "param_type_name", "") != "option" or getattr(param, "multiple", False):
        return None
    args = getattr(ctx, "meta", {}).get(TYPED_ARGS) or []
    value = None
    for i, token in enumerate(args):
        if token == "--":
            break
        for opt in getattr(param, "opts", None) or []:
            if token == opt and i + 1 < len(args):
                value = args[i + 1]
            elif token.startswith(opt + "="):
                value = token[len(opt) + 1 :]
    return value


def typed_flag(ctx, name: str) -> str:
    """The spelling of the running command's option ``name`` (its parameter name) that the user typed first,
    among its aliases (``--system`` or ``--systems`` of ``compare``; ``--system=x`` too), so that a message
    about its value names the option as typed; the longest alias where none was typed (or no context).

    >>> from types import SimpleNamespace as NS
    >>> opt = NS(name="systems", opts=["--systems", "--system"])
    >>> ctx = NS(meta={TYPED_ARGS: ["compare", "--system", "x"]}, command=NS(params=[opt]))
    >>> typed_flag(ctx, "systems"), typed_flag(NS(meta={}, command=ctx.command), "systems")
    ('--system', '--systems')
    """
    opts: list[str] = []
    for p in getattr(getattr(ctx, "command", None), "params", None) or []:
        if p.name == name:
            opts = list(getattr(p, "opts", None) or [])
    if not opts:
        return "--" + name.replace("_", "-")
    for token in getattr(ctx, "meta", {}).get(TYPED_ARGS) or []:
        if token == "--":
            break
        for opt in opts:
            if token == opt or token.startswith(opt + "="):
                return opt
    return max(opts, key=len)
