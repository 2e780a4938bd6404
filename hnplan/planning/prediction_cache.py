"""On-disk caches of deterministic predictions: hnplan's speed error on each published training run, for the "how
far to trust it" notes, and the best-plan summary of each grid point of the claims audit
(:func:`hnplan.planning.claims_grid.plan_point`) and of each design of a comparison
(:func:`hnplan.planning.compare.compare_training_designs`).

A run's prediction is a deterministic function of the run's own fields, the catalog (``data/``) and hnplan's
code, so it is stored under a key of those three and reused until one of them changes: the hash of the data the
planners read (:func:`planning_hash`: every data file's bytes, as the catalog's content hash
:meth:`hnplan.catalog.Catalog.content_hash`, but the published runs of ``validation/``, which no planner reads and
whose fields each entry's own digest holds: a run added or edited there is planned alone, the others read back), a
fingerprint of the code (the SHA-256 of every file of the ``hnplan`` package, which also pins its version, with
the Python and numpy versions) and, per run, the SHA-256 of the run's fields. Planning the 112 published runs of
a three-design comparison takes about 0.45 s of CPU; reading them back takes a few milliseconds, most of it the
two hashes.

A grid point's summary is likewise a function of its model and system entries (their fields, so a derived
entry such as a same-chip baseline is keyed by what it holds; a design's stack entry too), its GPU count,
sequence, batch and dtype, the catalog and the code: the twelve best-plan searches behind one claim take about
0.4 s of CPU, reading them back a few milliseconds. The catalog's hash is taken once per catalog object, which
itself keeps the entries it has parsed.

The published runs themselves (:func:`hnplan.catalog.runs.training_runs`, a YAML file parsed, each run
validated and its ids checked against the catalog: about 60 ms) are kept too, as the validated fields of each run,
under the default data folder's whole content hash and the code's: read back as the same runs in a few
milliseconds.

The claims audit's shared-cluster runs (:func:`hnplan.cluster.claims.audit_points`: one job stream per offered
load, design and replication, a few seconds of CPU each) are kept the same way, each run's summary numbers under
the SHA-256 of its arguments, in ``cluster_points.json`` (:func:`cached_points`; the simulation gets the cache
from its caller, :func:`run_cache`), and so are the runs behind a
simulated cost figure (:func:`hnplan.planning.design.simulated_utilisation_cached`, ``hnplan tco --utilisation
simulated``).

Each cache is one JSON file in ``$HNPLAN_CACHE_DIR`` (default ``$XDG_CACHE_HOME/hnplan``, else
``~/.cache/hnplan``): ``speed_errors.json``, ``plan_points.json`` and ``training_runs.json``, written whole or not
at all (:func:`hnplan.files.atomic_write`). A file that cannot be
read, is not valid JSON, has another key or the wrong shape is ignored; a folder that cannot be written leaves
the cache unwritten: in every such case the runs are planned as without a cache, silently.
``HNPLAN_NO_CACHE=1`` bypasses it (nothing read, nothing written).

:func:`seed` fills them ahead of use (``make``'s environment step runs it after every change to the code or the
data): every published run and hnplan's speed error on each, so that the first ``compare`` after installing reads
its trust notes back instead of planning them, and the grid points of every claim the planners decide, so that a
first ``claims --only ID`` reads its best plans back (the shared-cluster claims' simulations, minutes of CPU, are
left to their first use). The seed is an ordinary entry of the same files, under the same key: a later change to
the catalog or the code makes it a miss like any other entry.
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
POINTS_FILE_NAME = "plan_points.json"
RUNS_FILE_NAME = "training_runs.json"
CLUSTER_FILE_NAME = "cluster_points.json"
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
    bytecode left out), the Python version and numpy's: any change to the code that plans a run changes it.

    About 3 ms of CPU once numpy is imported (as every command that reads the caches imports it): the package's
    200 files read and hashed, the ``__pycache__`` folders not walked."""
    import numpy

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{sys.version}|numpy {numpy.__version__}".encode())
    for parts in sorted(_source_files(root)):  # in the order of their path parts, as sorted paths
        rel = os.path.join(*parts)
        h.update(rel.encode())
        h.update(Path(root, rel).read_bytes())
    return h.hexdigest()[:16]


def _source_files(root: Path) -> list[tuple[str, ...]]:
    """The path parts (relative to ``root``) of every file under ``root`` outside ``__pycache__`` folders,
    following no links to folders (as :meth:`pathlib.Path.rglob`)."""
    out: list[tuple[str, ...]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(folder, d))]
        rel = Path(folder).relative_to(root).parts
        out.extend((*rel, f) for f in files if os.path.isfile(os.path.join(folder, f)))
    return out


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
    key = _key(catalog)
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


#: the plan points read from or written to each cache file in this process: (path, key) -> digest -> row
_POINTS: dict[tuple[str, str], dict[str, dict]] = {}
_KEYS: dict[tuple[int, bool], tuple[Catalog, dict]] = {}  # (id(catalog), whole) -> (catalog, its key)


#: the data folder's sub-folder of published measurements, which no planner reads (each cached entry that stands
#: for one of them holds its fields in its digest)
MEASURED_DIR = "validation"


def planning_hash(root: Path) -> str:
    """SHA-256 (first 12 hex digits) of the data the planners read: every YAML file of the data folder ``root``
    (path and bytes, as :meth:`hnplan.catalog.Catalog.content_hash`) but those of ``validation/``, the published
    runs the planners are validated against (tests/test_prediction_cache.py plans runs on a data folder without
    it)."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.y*ml")):
        rel = path.relative_to(root)
        if rel.parts[0] != MEASURED_DIR:
            h.update(str(rel).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _key(catalog: Catalog, whole: bool = False) -> dict:
    """The key of ``catalog``'s speed errors and plan points: layout, the hash of the data the planners read
    (:func:`planning_hash`) and code fingerprint; ``whole``: the catalog's whole content hash instead (the
    published runs themselves, :func:`cached_training_runs`). Each hash once per catalog object: it reads every
    data file."""
    slot = (id(catalog), whole)
    if slot not in _KEYS:
        data = catalog.content_hash() if whole else planning_hash(Path(catalog.root))
        _KEYS[slot] = (catalog, {"format": FORMAT, "catalog": data, "source": source_fingerprint()})
    return _KEYS[slot][1]


def _read_rows(path: Path, key: dict) -> dict[str, dict]:
    """The stored rows when ``path`` holds a well-formed plan-point cache of ``key``, else an empty dict."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("key") != key or not isinstance(raw.get("rows"), dict):
        return {}
    rows = raw["rows"]
    if not all(isinstance(k, str) and isinstance(v, dict) for k, v in rows.items()):
        return {}
    return rows


def as_cached(row: dict) -> dict:
    """``row`` as the cache gives it back: through JSON (NumPy floats become Python floats of the same value,
    tuples lists), so that a row planned now and one read back are alike."""
    return json.loads(json.dumps(row, default=_native))


def _native(value):
    """A NumPy scalar as the Python number it holds (for :func:`json.dumps`); anything else is refused."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not stored in the cache")


def point_digest(*parts) -> str:
    """SHA-256 (first 16 hex digits) of a grid point's inputs: catalog entries by their fields (JSON), the
    rest by ``repr``."""
    h = hashlib.sha256()
    for p in parts:
        h.update((p.model_dump_json() if hasattr(p, "model_dump_json") else repr(p)).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:16]


def cached_point(digest: str, catalog: Catalog, compute: Callable[[], dict]) -> dict:
    """The row of one grid point, from the cache where it holds ``digest``, else from ``compute()`` (then stored).

    Parameters
    ----------
    digest : str
        :func:`point_digest` of everything the row depends on besides the catalog and the code.
    catalog : Catalog
        The catalog the point is planned on (its content hash is part of the key).
    compute : callable
        ``compute() -> dict`` of floats, integers and strings (NaN allowed).

    Returns
    -------
    dict
        A copy of the row ``compute()`` gives (JSON keeps floats bit for bit; NumPy floats come back as
        Python floats of the same value).
    """
    if not enabled():
        return as_cached(compute())
    key = _key(catalog)
    path = cache_dir() / POINTS_FILE_NAME
    slot = (str(path), json.dumps(key, sort_keys=True))
    if slot not in _POINTS:
        _POINTS[slot] = _read_rows(path, key)
    rows = _POINTS[slot]
    if digest not in rows:
        rows[digest] = as_cached(compute())
        try:  # keys in their order: a row's mappings read back as they were built
            atomic_write(path, json.dumps({"key": key, "rows": rows}))
        except OSError:
            pass  # a read-only or full cache folder: the point was planned, the next process plans it again
    return dict(rows[digest])


def cached_points(
    digests: list[str],
    catalog: Catalog,
    compute: Callable[[list[int]], list[dict]],
    file_name: str = CLUSTER_FILE_NAME,
) -> list[dict]:
    """The rows of several grid points, from the cache where it holds their digests, the rest computed in one
    call (so that the caller may run them side by side) and then stored, in one write.

    Parameters
    ----------
    digests : list of str
        :func:`point_digest` of each point's inputs besides the catalog and the code.
    catalog : Catalog
        The catalog the points are computed on (its content hash is part of the key).
    compute : callable
        ``compute(indices) -> rows``: the rows (dicts of floats, integers and strings) of the points at
        ``indices`` (positions in ``digests``), in that order.
    file_name : str
        The cache file in :func:`cache_dir` (default ``cluster_points.json``, the claims audit's cluster runs).

    Returns
    -------
    list of dict
        One row per digest, as :func:`as_cached` gives it: the same numbers whether computed now or read back.
    """
    if not enabled():
        return [as_cached(r) for r in compute(list(range(len(digests))))]
    key = _key(catalog)
    path = cache_dir() / file_name
    slot = (str(path), json.dumps(key, sort_keys=True))
    if slot not in _POINTS:
        _POINTS[slot] = _read_rows(path, key)
    rows = _POINTS[slot]
    missing: list[int] = []  # the first position of each digest the cache lacks
    for i, d in enumerate(digests):
        if d not in rows and d not in {digests[m] for m in missing}:
            missing.append(i)
    if missing:
        for i, row in zip(missing, compute(missing), strict=True):
            rows[digests[i]] = as_cached(row)
        try:
            atomic_write(path, json.dumps({"key": key, "rows": rows}))
        except OSError:
            pass  # a read-only or full cache folder: the points were computed, the next process computes them again
    return [dict(rows[d]) for d in digests]


def run_cache(catalog: Catalog) -> Callable[[list[tuple], Callable[[list[int]], list[dict]]], list[dict]]:
    """The on-disk cache of simulated cluster runs as the simulation takes it
    (:data:`hnplan.cluster.utilisation.RunCache`): ``cache(keys, compute) -> rows``, each key (a tuple of plain
    values naming a run) stored under its :func:`point_digest`, with ``catalog``'s content hash and the code
    (:func:`cached_points`). The planners pass it in (:func:`hnplan.planning.claims.cluster_utilisation`,
    :func:`hnplan.planning.design.simulated_utilisation_cached`): the simulation keeps no cache of its own."""

    def store(keys: list[tuple], compute: Callable[[list[int]], list[dict]]) -> list[dict]:
        return cached_points([point_digest(*k) for k in keys], catalog, compute)

    return store


def cached_training_runs() -> list[TrainingRun]:
    """:func:`hnplan.catalog.runs.training_runs` (the default data folder's), from the cache when it holds them
    under the same data and code, else parsed and checked now (then stored).

    Returns
    -------
    list of TrainingRun
        Equal to ``training_runs()``, field for field: the cache holds each run's validated fields (JSON keeps
        their values and types), rebuilt without validating again (:meth:`pydantic.BaseModel.model_construct`).

    Raises
    ------
    CatalogError
        As :func:`~hnplan.catalog.runs.training_runs`, when the file is read (a cache never holds an invalid file:
        it is written only after the runs validate).
    """
    from hnplan.catalog.loader import load_catalog
    from hnplan.catalog.runs import training_runs

    if not enabled():
        return training_runs()
    key = _key(load_catalog(), whole=True)
    path = cache_dir() / RUNS_FILE_NAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict) and raw.get("key") == key and isinstance(raw.get("runs"), list):
        try:
            return [TrainingRun.model_construct(**fields) for fields in raw["runs"]]
        except TypeError:
            pass  # not a list of mappings: planned as without a cache
    runs = training_runs()
    data = {"key": key, "runs": [r.model_dump(mode="json", exclude_unset=True) for r in runs]}
    try:  # keys in their order: a run's mappings (fixed, overrides) read back as given, so its digest is the same
        atomic_write(path, json.dumps(data))
    except OSError:
        pass
    return runs


def seed() -> dict[str, int]:
    """Fill the caches a first :func:`~hnplan.planning.compare.trust_notes` and a first claims audit read, on the
    default catalog, under its content hash and the code's fingerprint: the published runs
    (:func:`cached_training_runs`), hnplan's speed error on every one of them
    (:func:`hnplan.planning.trust.speed_errors`, each run planned with its stated configuration) and the grid
    points of every claim but the shared-cluster ones (:func:`hnplan.planning.claims.audit` with the default
    :class:`~hnplan.planning.claims.AuditSetup`).

    Planning the 133 published runs takes about 1.5 s of CPU, the claims' grid points about 3.5 s, once; a
    comparison's notes then read the errors of the runs on its designs' accelerators back, whichever they are,
    and a claim its best plans.

    Returns
    -------
    dict
        ``{"runs": published runs, "speed_errors": errors in the cache, "claims": claims audited, "plan_points":
        grid points in the cache}``; all 0 when ``HNPLAN_NO_CACHE`` is set (nothing planned, nothing written).

    Raises
    ------
    CatalogError
        When the published runs do not validate (:func:`hnplan.catalog.runs.training_runs`).
    """
    from hnplan.catalog.loader import load_catalog
    from hnplan.planning.claims import audit, claim_ids
    from hnplan.planning.claims_other import CLUSTER_CLAIM_IDS
    from hnplan.planning.trust import speed_errors

    if not enabled():
        return {"runs": 0, "speed_errors": 0, "claims": 0, "plan_points": 0}
    cat = load_catalog()
    runs = cached_training_runs()
    errors = speed_errors(runs, cat)
    claims = audit(catalog=cat, only=[c for c in claim_ids() if c not in CLUSTER_CLAIM_IDS])
    points = _POINTS.get((str(cache_dir() / POINTS_FILE_NAME), json.dumps(_key(cat), sort_keys=True)), {})
    return {"runs": len(runs), "speed_errors": len(errors), "claims": len(claims), "plan_points": len(points)}
