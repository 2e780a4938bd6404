"""JSON output of the command line (``--json``): one object on stdout, numpy scalars as numbers, NaN and
infinity as null."""

from __future__ import annotations

import json
import sys


def print_json(obj) -> None:
    """Print one JSON object on stdout (numpy scalars converted; NaN and infinity, which JSON lacks, as null)."""
    sys.stdout.write(json.dumps(_finite_json(obj), indent=2, default=_default, allow_nan=False) + "\n")


def _finite_json(obj):
    import math

    if isinstance(obj, dict):
        return {k: _finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_json(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            return obj
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _default(o):
    try:
        return o.item()
    except AttributeError:
        return str(o)
