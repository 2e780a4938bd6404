"""The catalog's single-file entries: ``prices.yaml``, ``facility.yaml``, ``reliability.yaml``,
``uncertainty.yaml``, ``memory.yaml``, the scenarios and the published-measurement tables of ``reference/``.

:class:`SingleFiles` is a part of :class:`hnplan.catalog.loader.Catalog` (import that); it needs only the
data folder ``self.root``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from hnplan.catalog.schemas import Facility, MemoryOverheads, Price, Reliability, Scenario, UncertainInput
from hnplan.catalog.yaml_io import _looks_like_path, _read_yaml, nearest_ids, parse_entry
from hnplan.errors import CatalogError


class SingleFiles:
    """Lookups of the entries that live in one file each (or one folder of scenarios and tables)."""

    root: Path

    # -- prices, facility, scenarios -------------------------------------------------------
    @functools.cached_property
    def prices(self) -> list[Price]:
        """Every :class:`Price` in ``prices.yaml``."""
        path = self.root / "prices.yaml"
        raw = _read_yaml(path) if path.exists() else []
        if not isinstance(raw, list):
            raise CatalogError(f"{path}: expected a list of price entries", path=path)
        out = [parse_entry(item, Price, path) for item in raw]
        seen = set()
        for p in out:
            if p.id in seen:
                raise CatalogError(f"{path}: duplicate price id {p.id!r}", path=path, entry=p.id, field="id")
            seen.add(p.id)
        return out

    def price(self, item: str) -> Price:
        """The price entry of a catalog item (system, switch, BOM part)."""
        for p in self.prices:
            if p.item == item:
                return p
        items = sorted({p.item for p in self.prices})
        near = nearest_ids(item, items)
        raise CatalogError(
            f"no price for {item!r} in {self.root / 'prices.yaml'}" + (f"; nearest: {', '.join(near)}" if near else ""),
            entry=item,
        )

    @functools.cached_property
    def facility(self) -> Facility:
        """The facility and finance defaults in ``facility.yaml``."""
        path = self.root / "facility.yaml"
        return parse_entry(_read_yaml(path), Facility, path)

    # -- reliability (issue 8) -------------------------------------------------------------
    @functools.cached_property
    def reliability(self) -> Reliability:
        """Failure rates and checkpoint/restart defaults in ``reliability.yaml``."""
        path = self.root / "reliability.yaml"
        return parse_entry(_read_yaml(path), Reliability, path)

    @functools.cached_property
    def uncertainties(self) -> dict[str, UncertainInput]:
        """Ranges of the procurement what-if inputs in ``uncertainty.yaml``, keyed by input."""
        path = self.root / "uncertainty.yaml"
        raw = _read_yaml(path) if path.exists() else []
        if not isinstance(raw, list):
            raise CatalogError(f"{path}: expected a list of uncertain inputs", path=path)
        out: dict[str, UncertainInput] = {}
        for item in raw:
            u = parse_entry(item, UncertainInput, path)
            if u.input in out:
                raise CatalogError(
                    f"{path}: input {u.input!r} has two ranges ({out[u.input].id}, {u.id})",
                    path=path,
                    entry=u.id,
                    field="input",
                )
            out[u.input] = u
        return out

    @functools.cached_property
    def memory_overheads(self) -> MemoryOverheads:
        """The runtime memory overheads and serving defaults in ``memory.yaml``."""
        path = self.root / "memory.yaml"
        return parse_entry(_read_yaml(path), MemoryOverheads, path)

    def scenario_ids(self) -> list[str]:
        """Sorted ids of the scenarios in ``scenarios/``."""
        return sorted(p.stem for p in (self.root / "scenarios").glob("*.y*ml"))

    def scenario(self, ref) -> Scenario:
        """A :class:`Scenario` by id or path (not yet checked against notebooks; see hnplan.reports)."""
        ref = str(ref)
        path = Path(ref) if _looks_like_path(ref) else self.root / "scenarios" / f"{ref}.yaml"
        if _looks_like_path(ref) and not path.exists():
            raise CatalogError(f"scenario file {ref}: file not found", path=path)
        if not path.exists():
            ids = self.scenario_ids()
            near = nearest_ids(ref, ids)
            raise CatalogError(
                f"unknown scenario {ref!r}; "
                + (f"nearest: {', '.join(near)}" if near else f"available: {', '.join(ids)}"),
                entry=ref,
            )
        return parse_entry(_read_yaml(path), Scenario, path)

    # -- published measurements -------------------------------------------------------------
    def reference_names(self) -> list[str]:
        """Names of the published-measurement tables in ``reference/`` (CSV files, without suffix)."""
        return sorted(p.stem for p in (self.root / "reference").glob("*.csv"))

    def reference(self, name: str):
        """A table of published measurements (``reference/<name>.csv``) as a pandas DataFrame.

        Every row carries its ``source`` and ``status`` (primary, secondary, derived, UNVERIFIED);
        see ``reference/README.md`` for the traps in reading them.

        Raises
        ------
        CatalogError
            For an unknown table name (lists the available ones).
        """
        import pandas as pd

        path = self.root / "reference" / f"{name}.csv"
        if not path.exists():
            raise CatalogError(
                f"no reference table {name!r}; available: {', '.join(self.reference_names())}", path=path
            )
        return pd.read_csv(path)
