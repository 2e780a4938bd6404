"""A table of designs as plain rows (a list of dicts), the values a pandas DataFrame of the same rows would hold:
what a command line that prints a few rows reads instead of building the frame (pandas' import alone is about
0.25 s of CPU).

:func:`frame_records` gives ``pd.DataFrame(rows).to_dict("records")`` without pandas: every row gets every
column (the union of the rows' keys, in the order they first appear), a missing value is NaN, and a column of
numbers with a missing or a float value holds floats (as pandas' float64 column does: ``1152`` becomes
``1152.0``). :func:`as_records` takes either such rows or a DataFrame, so that one function of the rows serves
both the planners' frames and the command line.
"""

from __future__ import annotations

import math
import numbers

NAN = float("nan")


def frame_records(rows: list[dict]) -> list[dict]:
    """``pd.DataFrame(rows).to_dict("records")``, computed without pandas.

    Parameters
    ----------
    rows : list of dict
        One dict per row of numbers, booleans and strings (NaN, not None, for a missing value, as the planners
        write them: pandas' treatment of None depends on the column's other values); rows may lack keys.

    Returns
    -------
    list of dict
        One dict per row with every column of the table, in first-seen order. A column of numbers (booleans
        apart) holds Python floats where any row lacks it, holds None or NaN, or holds a float, else Python
        ints; any other column keeps its values, NaN where a row lacks it.

    Examples
    --------
    >>> frame_records([{"a": 1, "b": "x"}, {"a": 2}])
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': nan}]
    >>> frame_records([{"n": 1, "m": 2}, {"n": 2.5}])
    [{'n': 1.0, 'm': 2.0}, {'n': 2.5, 'm': nan}]
    """
    columns = list(dict.fromkeys(k for r in rows for k in r))
    out: list[dict] = [{} for _ in rows]
    for col in columns:
        present = [r[col] for r in rows if col in r]
        numeric = all(_number(v) for v in present) and (len(present) < len(rows) or any(v is not None for v in present))
        floats = numeric and (len(present) < len(rows) or any(not _integer(v) for v in present))
        for r, o in zip(rows, out, strict=True):
            v = r.get(col, NAN)
            if numeric:
                v = NAN if v is None else (float(v) if floats else int(v))
            o[col] = v
    return out


def _number(v) -> bool:
    """A real number or a missing one (None), booleans not counted (pandas keeps them apart); a column of None
    that every row has is not one of numbers (pandas keeps the None)."""
    return v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and not _is_bool(v))


def _integer(v) -> bool:
    return isinstance(v, numbers.Integral)


def _is_bool(v) -> bool:
    return type(v).__name__ == "bool_"  # numpy's boolean, without importing numpy


def as_records(table) -> list[dict]:
    """The rows of ``table``: a DataFrame's ``to_dict("records")``, or a list of dicts through
    :func:`frame_records` (so that both read alike)."""
    if isinstance(table, list):
        return frame_records(table)
    return table.to_dict("records")


def is_na(v) -> bool:
    """``pandas.isna`` of one value: None or a float NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def first_min(rows: list[dict], key: str) -> dict:
    """The row with the least ``key``, the first of equal ones, NaN skipped (``Series.idxmin``)."""
    return min((r for r in rows if not is_na(r[key])), key=lambda r: r[key])


def first_max(rows: list[dict], key: str) -> dict:
    """The row with the greatest ``key``, the first of equal ones, NaN skipped (``Series.idxmax``)."""
    return max((r for r in rows if not is_na(r[key])), key=lambda r: r[key])


def n_unique(rows: list[dict], key: str) -> int:
    """Distinct values of ``key`` over the rows, NaN not counted (``Series.nunique``)."""
    return len({r[key] for r in rows if key in r and not is_na(r[key])})
