"""hnplan against published measurements: one table, row by row, for the validation notebook and the tests.

Each area contributes rows through a function registered with :func:`area`; :func:`validation_table`
runs them all. A row says what was measured (``published``, with its ``source`` from
``data/reference/``), what hnplan predicts, the relative error, the tolerance the tests assert, and
its ``role``:

``prediction``
    the model was not fitted to this figure; the tolerance is asserted.
``calibration``
    the catalog's efficiency was read from this very figure, so the row checks algebra and units only.
``bound``
    hnplan computes a bound (e.g. a roofline that leaves out overheads); the test asserts the published
    figure lies on the right side of it, within the stated ratio.
``reported``
    a known gap, shown with its explanation in ``note`` and not asserted.

A failing prediction is a failing test: accuracy cannot drift while the suite stays green.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.validation.rows import _AREAS, ROLES, Row, area  # noqa: F401 - public here as before


def areas() -> list[str]:
    """Names of the registered areas."""
    _load_areas()
    return list(_AREAS)


def _load_areas() -> None:
    # importing the modules registers their areas
    from hnplan.validation import (  # noqa: F401
        calibration,
        cluster,
        comm,
        compute,
        inference,
        memory,
        reliability,
        training,
    )


def validation_table(catalog: Catalog | None = None, only: list[str] | None = None) -> pd.DataFrame:
    """Every validation row as a DataFrame.

    Returns
    -------
    pandas.DataFrame
        Columns ``area, case, quantity, unit, published, predicted, error, role, tolerance, within,
        source, note``; ``error`` is ``predicted / published - 1``.
    """
    cat = catalog or load_catalog()
    _load_areas()
    rows = []
    for name, fn in _AREAS.items():
        if only and name not in only:
            continue
        for r in fn(cat):
            d = asdict(r)
            d.update(error=r.error, within=r.within)
            rows.append(d)
    cols = [
        "area",
        "case",
        "quantity",
        "unit",
        "published",
        "predicted",
        "error",
        "role",
        "tolerance",
        "within",
        "source",
        "note",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df.attrs["units"] = {"error": "fraction"}
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per area and role: rows, median and largest absolute error, rows within tolerance."""
    g = df.assign(abs_error=df["error"].abs()).groupby(["area", "role"], sort=False)
    out = g.agg(
        rows=("case", "size"),
        median_abs_error=("abs_error", "median"),
        max_abs_error=("abs_error", "max"),
        within=("within", lambda s: int(s.eq(True).sum())),
    )
    return out.reset_index()


#: reported rows :func:`verdict` names, the largest |error| first
VERDICT_GAPS = 3


def verdict(df: pd.DataFrame) -> str:
    """A paragraph summarising the table from its numbers: the rows, the predictions within their tolerance
    with the median and largest error, the bounds that hold, the calibration rows, and the count of reported
    rows with the :data:`VERDICT_GAPS` largest by name (their notes are in the table)."""
    pred = df[df["role"] == "prediction"]
    bounds = df[df["role"] == "bound"]
    parts = [f"{len(df)} published figures across {df['area'].nunique()} areas."]
    if len(pred):
        parts.append(
            f"{int((pred['within'] == True).sum())} of {len(pred)} predictions are within their "  # noqa: E712
            f"tolerance; median absolute error {pred['error'].abs().median():.1%}, largest "
            f"{pred['error'].abs().max():.1%} ({pred.loc[pred['error'].abs().idxmax(), 'case']})."
        )
    if len(bounds):
        parts.append(f"{int((bounds['within'] == True).sum())} of {len(bounds)} bounds hold.")  # noqa: E712
    cal = int((df["role"] == "calibration").sum())
    if cal:
        parts.append(
            f"{cal} rows are calibrations (the catalog's efficiency was read from them) and check "
            "units and algebra only."
        )
    rep = df[df["role"] == "reported"]
    if len(rep):
        # the largest few by name and error; every row's note is in the table (a paragraph of every note
        # pushed the summary table below the first screen once the reported rows ran to dozens)
        worst = rep.reindex(rep["error"].abs().sort_values(ascending=False).index).head(VERDICT_GAPS)
        named = "; ".join(
            (r.case if r.quantity in r.case else f"{r.case}, {r.quantity}") + f" ({r.error:+.0%})"
            for r in worst.itertuples()
        )
        largest = "largest |error|: " if len(rep) > len(worst) else ""
        parts.append(
            f"{len(rep)} known gaps are reported, not asserted ({largest}{named}); "
            "each row's note in the table below gives its cause."
        )
    return " ".join(parts)
