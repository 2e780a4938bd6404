"""The ``hnplan`` command line: one entry point, one sub-command per planner (thin: parse, call, print).

Each sub-command lives in its own module ``hnplan/cli/<name>_cmd.py`` and registers itself on
:data:`app` when imported. The modules are imported lazily (:class:`hnplan.cli._app.LazyGroup`): a
new ``<name>_cmd.py`` needs no registration line here, and ``hnplan train`` imports only what
``train`` needs.
"""

from __future__ import annotations

from hnplan.cli._app import app, command_modules


def main() -> None:
    """Console-script entry point. With ``--json`` a usage error (a missing option, a value out of range)
    is printed as ``{"error": {...}}`` on stdout too, like every other error (see ``handle_errors``)."""
    import sys

    if "--json" not in sys.argv[1:]:
        app()
        return
    from hnplan.cli._app import run_json

    sys.exit(run_json(sys.argv[1:]))


__all__ = ["app", "command_modules", "main"]
