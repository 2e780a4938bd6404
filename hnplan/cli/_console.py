"""The command line's two consoles (stdout and stderr), made on first use, and rich-markup escaping: what every
command and the usage-error line print with (:mod:`hnplan.cli._app` hands these names on)."""

from __future__ import annotations

import sys


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

    # rich's live displays (progress bars) enter the console as a context; special methods are looked up on
    # the class, not through __getattr__
    def __enter__(self):
        return self.__getattr__("__enter__")()

    def __exit__(self, *exc):
        return self.__getattr__("__exit__")(*exc)


# piped or captured output is not cut to 80 columns (numbers and ids must survive)
console = _LazyConsole(auto_width=True)
err_console = _LazyConsole(stderr=True, soft_wrap=True)  # never break a path or an id across lines


def escape(text: str) -> str:
    """``text`` with rich markup escaped (a schema pattern's ``[a-z]`` is printed, not eaten)."""
    from rich.markup import escape as _escape

    return _escape(text)
