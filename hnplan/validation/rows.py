"""A validation row (:class:`Row`: one published figure and hnplan's prediction of it, with its role and
tolerance) and the registry of the areas that make them (:func:`area`); :mod:`hnplan.validation` runs the
registered areas into one table, and each area module registers its function here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hnplan.catalog.loader import Catalog

ROLES = ("prediction", "calibration", "bound", "reported")


@dataclass(frozen=True)
class Row:
    """One published figure and hnplan's prediction of it.

    ``tolerance`` is a relative error for predictions and calibrations, and for bounds the largest
    allowed ``predicted / published`` ratio (which must also exceed 1).
    """

    area: str
    case: str
    quantity: str
    unit: str
    published: float
    predicted: float
    role: str
    tolerance: float | None
    source: str
    note: str = ""

    @property
    def error(self) -> float:
        """Relative error ``predicted / published - 1``."""
        return self.predicted / self.published - 1.0

    @property
    def within(self) -> bool | None:
        """Whether the row meets its tolerance (None for reported rows)."""
        if self.role == "reported" or self.tolerance is None:
            return None
        if self.role == "bound":
            ratio = self.predicted / self.published
            return 1.0 <= ratio <= self.tolerance
        return abs(self.error) <= self.tolerance


_AREAS: dict[str, Callable[[Catalog], list[Row]]] = {}


def area(name: str):
    """Register a function ``f(catalog) -> list[Row]`` as the rows of an area."""

    def deco(fn):
        _AREAS[name] = fn
        return fn

    return deco
