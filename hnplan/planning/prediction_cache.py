"""An on-disk cache of hnplan's speed error on each published training run, for the "how far to trust it" notes.

A run's prediction is a deterministic function of the run's own fields, the catalog (``data/``) and hnplan's
code, so it is stored under a key of those three and reused until one of them changes: the catalog's content
hash (:meth:`hnplan.catalog.Catalog.content_hash`, the sweep's provenance hash, every data file's bytes), a
fingerprint of the code (the SHA-256 of every file of the ``hnplan`` package, which also pins its version, with
the Python and numpy versions) and, per run, the SHA-256 of the run's fields. Planning the 77 published runs of
a three-design comparison takes about 0.7 s of CPU; reading them back takes a few milliseconds, most of it the
two hashes.

The cache is one JSON file, ``$HNPLAN_CACHE_DIR/speed_errors.json`` (default ``$XDG_CACHE_HOME/hnplan``, else
``~/.cache/hnplan``), written whole or not at all (:func:`hnplan.files.atomic_write`). A file that cannot be
read, is not valid JSON, has another key or the wrong shape is ignored; a folder that cannot be written leaves
the cache unwritten: in every such case the runs are planned as without a cache, silently.
``HNPLAN_NO_CACHE=1`` bypasses it (nothing read, nothing written).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from hnplan.catalog.loader import Catalog
from hnplan.catalog.runs import TrainingRun
from hnplan.files import atomic_write

FILE_NAME = "speed_errors.json"
FORMAT = 1  # the layout of the file; a file of another layout is ignored


def cache_dir() -> Path:
    """The folder of hnplan's caches: ``$HNPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/hnplan`` (the XDG base
    directory specification), else ``~/.cache/hnplan``."""
    if d := os.environ.get("HNPLAN_CACHE_DIR"):
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hnplan"


def enabled() -> bool:
    """False when ``HNPLAN_NO_CACHE`` is set to anything but empty, ``0``, ``false`` or ``no``."""
    return os.environ.get("HNPLAN_NO_CACHE", "").strip().lower() in ("", "0", "false", "no")


@cache
def source_fingerprint() -> str:
    """SHA-256 (first 16 hex digits) of every file of the ``hnplan`` package (path and bytes, compiled
    bytecode left out), the Python version and numpy's: any change to the code that plans a run changes it."""
    import numpy

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{sys.version}|numpy {numpy.__version__}".encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _run_digest(run: TrainingRun) -> str:
    return hashlib.sha256(run.model_dump_json().encode()).hexdigest()[:16]


def _read(path: Path, key: dict) -> dict[str, float]:
    """The stored errors when ``path`` holds a well-formed cache of ``key``, else an empty dict."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("key") != key or not isinstance(raw.get("errors"), dict):
        return {}
    errors = raw["errors"]
    if not all(isinstance(k, str) and isinstance(v, float) for k, v in errors.items()):
        return {}
    return errors


def cached_speed_errors(
    runs: Iterable[TrainingRun], catalog: Catalog, plan: Callable[[list[TrainingRun]], dict[str, float]]
) -> dict[str, float]:
    """Run id -> speed error [-] of ``runs``, from the cache where it holds them, from ``plan`` for the rest.

    Parameters
    ----------
    runs : iterable of TrainingRun
    catalog : Catalog
        The catalog the runs are planned on (its content hash is part of the key).
    plan : callable
        ``plan(runs) -> {run id: speed error}`` for the runs the cache lacks
        (:func:`hnplan.planning.trust.speed_errors` without the cache).

    Returns
    -------
    dict
        The same values ``plan(runs)`` would give (floats stored in JSON come back bit for bit). The runs
        planned are added to the cache when its folder can be written.
    """
    runs = list(runs)
    if not enabled():
        return plan(runs)
    key = {"format": FORMAT, "catalog": catalog.content_hash(), "source": source_fingerprint()}
    path = cache_dir() / FILE_NAME
    stored = _read(path, key)
    digest = {r.id: _run_digest(r) for r in runs}
    missing = [r for r in runs if digest[r.id] not in stored]
    fresh = {rid: float(e) for rid, e in plan(missing).items()} if missing else {}
    if fresh:
        stored.update({digest[rid]: e for rid, e in fresh.items() if rid in digest})
        try:
            atomic_write(path, json.dumps({"key": key, "errors": stored}, sort_keys=True))
        except OSError:
            pass  # a read-only or full cache folder: the runs were planned, the next call plans them again
    return {r.id: (fresh[r.id] if r.id in fresh else stored[digest[r.id]]) for r in runs}
