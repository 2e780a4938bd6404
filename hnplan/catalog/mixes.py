"""Cluster job mixes (``data/cluster_mixes/<id>.yaml``): read through the catalog loader's
YAML reader and validated by :class:`hnplan.catalog.schemas.ClusterMix`."""

from __future__ import annotations

from pathlib import Path

from hnplan.catalog.loader import Catalog, _looks_like_path, _read_yaml, load_catalog, parse_entry
from hnplan.catalog.schemas import ClusterMix
from hnplan.catalog.yaml_io import match_id, nearest_ids
from hnplan.errors import CatalogError

MIX_DIR = "cluster_mixes"


def cluster_mix_ids(catalog: Catalog | None = None) -> list[str]:
    """Sorted ids of the job mixes in ``data/cluster_mixes/``."""
    cat = catalog or load_catalog()
    return sorted(p.stem for p in (cat.root / MIX_DIR).glob("*.y*ml"))


def cluster_mix(ref, catalog: Catalog | None = None) -> ClusterMix:
    """A :class:`ClusterMix` by id, by the path of a YAML file, or passed through.

    An id that differs from a mix's only in case names it (:func:`~hnplan.catalog.yaml_io.match_id`).

    Raises
    ------
    CatalogError
        For an unknown id (naming the nearest) or an invalid file (naming the field).
    """
    if isinstance(ref, ClusterMix):
        return ref
    cat = catalog or load_catalog()
    ref = str(ref)
    ids = cluster_mix_ids(cat)
    path = cat.root / MIX_DIR / f"{match_id(ref, ids) or ref}.yaml"  # an id in another case too (Default)
    if not path.is_file():
        if not _looks_like_path(ref):
            near = nearest_ids(ref, ids)
            raise CatalogError(
                f"unknown cluster mix id {ref!r}; {'nearest' if near else 'valid ids'}: {', '.join(near or ids)}",
                entry=ref,
            )
        path = Path(ref)
    mix = parse_entry(_read_yaml(path), ClusterMix, path)
    total = sum(c.share.value for c in mix.classes)
    if abs(total - 1.0) > 1e-6:
        shares = ", ".join(f"{c.cls} {c.share.value:g}" for c in mix.classes)
        raise CatalogError(
            f"{path}: class shares (fractions of jobs) must sum to 1; they sum to {total:g} ({shares})",
            path=path,
            entry=mix.id,
            field="classes",
        )
    return mix


TRACE_DIR = "traces"


def trace_file(name: str, catalog: Catalog | None = None) -> Path:
    """The path of a committed trace sample, ``data/traces/<name>.csv`` (provenance in that folder's
    README).

    Raises
    ------
    CatalogError
        For an unknown name (listing the samples there are).
    """
    cat = catalog or load_catalog()
    path = cat.root / TRACE_DIR / f"{name}.csv"
    if not path.is_file():
        have = sorted(p.stem for p in (cat.root / TRACE_DIR).glob("*.csv"))
        raise CatalogError(f"unknown trace sample {name!r}; samples: {', '.join(have) or 'none'}", entry=name)
    return path
