"""The usage line of typer's help, as click writes it."""

from __future__ import annotations


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
