"""The footer every report notebook ends with (:func:`provenance`): hnplan's version, the git commit, the
catalog's content hash and the notebook's parameters, each written for people. The notebooks import it from
:mod:`hnplan.reports`.
"""

from __future__ import annotations

import math
from pathlib import Path

from hnplan import __version__
from hnplan.catalog.loader import load_catalog


def _short_literal(v) -> str:
    """A parameter as a Python literal a person reads: ``1.5e13`` rather than ``15000000000000.0`` (still
    exactly the same float), ``repr`` for everything else.

    >>> _short_literal(15e12), _short_literal(3e8), _short_literal(8192.0), _short_literal(0.1), _short_literal("a")
    ('1.5e13', '3e8', '8192', '0.1', "'a'")
    """
    if isinstance(v, float) and math.isfinite(v):
        short = f"{v:.6g}"
        if "e" in short:
            mantissa, exponent = short.split("e")
            short = f"{mantissa}e{int(exponent)}"
        if float(short) == v:
            return short
    return repr(v)


def _param_text(v) -> str:
    """A parameter written for people in a report footer: numbers as short exact literals, text without
    quotes, lists comma-separated, a mapping as ``key: value`` pairs and an empty one as 'none' (never a
    Python ``{...}`` or ``[...]``).

    >>> _param_text(15e12), _param_text("fp8"), _param_text(["a", "b"]), _param_text({"x": "int8"}), _param_text({})
    ('1.5e13', 'fp8', 'a, b', 'x: int8', 'none')
    """
    if isinstance(v, dict):
        return ", ".join(f"{_param_text(k)}: {_param_text(x)}" for k, x in v.items()) or "none"
    if isinstance(v, list | tuple | set):
        return ", ".join(_param_text(x) for x in v) or "none"
    if v is None:
        return "none"
    if isinstance(v, str):
        return v or "none"
    return _short_literal(v)


def provenance(parameters: dict | None = None) -> str:
    """A Markdown footer: hnplan version, git commit, catalog content hash and the parameters."""
    import subprocess

    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=Path(__file__).parent,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    params = "; ".join(f"`{k}` = {_param_text(v)}" for k, v in (parameters or {}).items())
    return f"---\n*hnplan {__version__}, commit `{commit}`, catalog `{load_catalog().content_hash()}`." + (
        f" Parameters: {params}.*" if params else "*"
    )
