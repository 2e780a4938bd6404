"""What a report's page depends on, hashed: the skip test of :func:`hnplan.reports.run_reports`.

A report is re-run when the digest of its inputs differs from the one stamped beside its page
(``OUT/<scenario>/.<notebook>.inputs``): the notebook, its parameters, the files those name by path, the catalog
(its YAML through :meth:`hnplan.catalog.loader.Catalog.content_hash`, its other files here), hnplan's version and
every file of the package. Standard library only: a re-run with nothing to redo imports no numpy, papermill or
nbformat.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from hnplan import __version__
from hnplan.report_params import _ID_PARAMS, _SPEC_PARAMS, _looks_like_path


def _inputs_digest(nb_path: Path, params: dict, catalog_hash: str, data_root: str | None = None) -> str:
    """SHA-256 of a report's inputs: the notebook's bytes, its parameters, the bytes of every file a parameter
    names by path (``model: /abs/dense1t.yaml``: an edit to that file re-runs the report, where its name alone
    did not change), the catalog's content hash (its YAML files), the catalog folder's other files
    (:func:`_data_files_digest`: the published measurements and trace samples, ``*.csv``, that the content hash
    leaves out), hnplan's version and its code (:func:`_code_digest`).

    ``data_root``: the catalog's folder (default :func:`hnplan.catalog.yaml_io.data_dir`)."""
    if data_root is None:
        from hnplan.catalog.yaml_io import data_dir

        data_root = str(data_dir())
    h = hashlib.sha256()
    h.update(nb_path.read_bytes())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    for path in _named_files(params):
        h.update(path.encode())
        h.update(Path(path).read_bytes())
    h.update(catalog_hash.encode())
    h.update(_data_files_digest(data_root).encode())
    h.update(__version__.encode())
    h.update(_code_digest().encode())
    return h.hexdigest()


def _named_files(params: dict) -> list[str]:
    """The files (absolute paths, as :func:`~hnplan.report_params.resolve_paths` leaves them) that the catalog
    reference and sweep spec parameters name by path, in order; ids and paths to no file are left out (the
    scenario's checks reject those before anything runs)."""
    out = []
    for key, value in params.items():
        if key in _ID_PARAMS or key in _SPEC_PARAMS:
            for v in value if isinstance(value, list) else [value]:
                if _looks_like_path(v) and Path(v).is_file():
                    out.append(str(v))
    return out


@functools.cache
def _code_digest() -> str:
    """SHA-256 of every file of the ``hnplan`` package (path and bytes, in path order; the report page's template
    ``templates/report.html.j2`` as much as the Python files), once per process: a re-run of every scenario hashed
    the package's 2 MB once per report (about 5 ms of CPU each). Not the prediction caches' fingerprint
    (:func:`hnplan.planning.prediction_cache.source_fingerprint`), which imports numpy for its version: a re-run
    with nothing to redo imports no numpy."""
    return _tree_digest(Path(__file__).parent, skip_suffixes=(".pyc",))


@functools.cache
def _data_files_digest(root: str) -> str:
    """SHA-256 of the catalog folder's files other than its YAML (which
    :meth:`hnplan.catalog.loader.Catalog.content_hash` covers): ``reference/*.csv``, the published measurements
    the validation report reads, and ``traces/*.csv``, the job traces of the cluster reports; once per process
    and folder (about 1 MB)."""
    return _tree_digest(Path(root), skip_suffixes=(".yaml", ".yml", ".pyc"))


def _tree_digest(root: Path, skip_suffixes: tuple[str, ...]) -> str:
    """SHA-256 of the relative path and bytes of every file under ``root`` (``__pycache__`` folders not walked,
    files ending in ``skip_suffixes`` left out), in sorted path order."""
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(root).parts
        files.extend((*rel, n) for n in names if not n.endswith(skip_suffixes))
    h = hashlib.sha256()
    for parts in sorted(files):
        path = root.joinpath(*parts)
        if path.is_file():
            h.update("/".join(parts).encode())
            h.update(path.read_bytes())
    return h.hexdigest()
