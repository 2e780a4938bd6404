"""Integer codes of a column's distinct values, and of the distinct tuples of several columns: the factorisation
behind :class:`hnplan.vectorise.Columns` and :func:`hnplan.vectorise.factorize` (lookup tables for small integer
spans, a sort for flags and names in a process without pandas, pandas' hash table otherwise). Split from
:mod:`hnplan.vectorise`, which re-exports these. No physics here.
"""

from __future__ import annotations

import math
import sys

import numpy as np

#: distinct key tuples counted through a lookup table (no hashing) up to this many possible tuples, or 16 per row
_TABLE_KEYS = 1 << 16
#: integers factorized by a sort, in a process without pandas, up to this many (above it pandas' import, about
#: 0.25 s of CPU, costs less than the sort)
_SORT_ROWS = 1 << 21


def _array_codes(a: np.ndarray, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Codes and code values of one array: integers by their offset from the minimum (no hashing; over
    a wide span through a lookup table of the values present), anything else by :func:`pandas.factorize`.
    ``rows`` (default ``len(a)``): the rows of the column ``a`` holds every value of (its runs' first rows),
    which choose the way as for the whole column, so that the codes and values are the column's."""
    if a.dtype.kind in "iu" and len(a):
        lo, hi = a.min(), a.max()
        span = int(hi - lo) + 1
        if span <= 8:
            return (a - lo).astype(np.int64, copy=False), np.arange(span, dtype=a.dtype) + lo
        limit = max(4 * (len(a) if rows is None else rows), 1 << 12)
        if span <= limit:  # a wide span: count only the values present
            base = 0 if lo >= 0 and hi < limit else lo  # small non-negative values index the table as they are
            offset = (a - base).astype(np.int64, copy=False) if base or a.dtype != np.int64 else a
            seen = np.zeros(int(hi - base) + 1, dtype=bool)
            seen[offset] = True
            present, lookup = _ranks(seen)
            return lookup.take(offset), (present + base).astype(a.dtype)
        return factorize_ints(a)
    if a.dtype.kind in "bOU" and "pandas" not in sys.modules and (len(a) if rows is None else rows) <= _SORT_ROWS:
        by_sort = _sorted_codes(a)  # flags and names (a plan's recompute mode) without importing pandas for them
        if by_sort is not None:
            return by_sort
    import pandas as pd

    codes, uniq = pd.factorize(a, sort=False)
    return codes, np.asarray(uniq)


def _sorted_codes(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``pandas.factorize(a, sort=False)`` of an array of flags or strings by a sort: each value's code in order of first
    appearance, and the values in that order (of the array's dtype, as pandas gives them); None where an element is not a string
    (a missing value: pandas gives it code -1).

    >>> codes, uniq = _sorted_codes(np.array(["full", "none", "full"], dtype=object))
    >>> codes.tolist(), uniq.tolist(), uniq.dtype
    ([0, 1, 0], ['full', 'none'], dtype('O'))
    """
    try:
        codes, uniq = _codes_by_sort(a)
    except TypeError:  # mixed types (None among strings) do not sort
        return None
    if a.dtype.kind == "O" and not all(type(v) is str for v in uniq):
        return None
    return codes, uniq


def factorize_ints(a: np.ndarray, by_sort: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``pandas.factorize(a, sort=False)`` of a 1-D integer array: each value's code, in order of first
    appearance, and the values in that order.

    By pandas' hash table where pandas is already imported (or for more than :data:`_SORT_ROWS` values),
    else by a sort (:func:`numpy.unique`, its first indices ranked): the same codes and values, so that a
    process that builds no frame (``hnplan size``, a planner's search on plain columns) does not import pandas
    for it. ``by_sort`` forces one way (True: the sort; False: pandas).

    >>> codes, uniq = factorize_ints(np.array([7, 3, 7, 9, 3]), by_sort=True)
    >>> codes.tolist(), uniq.tolist()
    ([0, 1, 0, 2, 1], [7, 3, 9])
    """
    if by_sort is None:
        by_sort = "pandas" not in sys.modules and len(a) <= _SORT_ROWS
    if not by_sort:
        import pandas as pd

        codes, uniq = pd.factorize(a, sort=False)
        return codes, np.asarray(uniq)
    return _codes_by_sort(a)


def _codes_by_sort(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's code in order of first appearance and the distinct values in that order, by a sort
    (:func:`numpy.unique`, its first indices ranked): ``pandas.factorize(a, sort=False)`` for values that
    sort (no missing ones). Raises TypeError for values that do not sort (None among strings)."""
    uniq, first, inverse = np.unique(a, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the distinct values in order of first appearance
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order), dtype=np.intp)
    return rank[inverse.reshape(-1)], uniq[order]


def _ranks(seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The indices of the True entries of a boolean table and a lookup table holding, at each of them, its
    rank among them (``cumsum(seen) - 1`` there; undefined elsewhere): written only where a value is present,
    not a pass over the whole table."""
    present = np.flatnonzero(seen)
    lookup = np.empty(len(seen), dtype=np.int64)
    lookup[present] = np.arange(len(present), dtype=np.int64)
    return present, lookup


def _distinct(codes: list[np.ndarray], sizes: list[int], n: int) -> tuple[np.ndarray, tuple]:
    """Codes of the distinct tuples of per-column codes and, per column, the code of each distinct tuple."""
    if n == 0:
        return np.zeros(0, np.int64), tuple(np.zeros(0, np.int64) for _ in sizes)
    n_keys = math.prod(sizes)  # Python integers: exact
    if n_keys >= 2**62:  # too many combinations for one int64: pair them up
        import pandas as pd

        flat, _ = pd.factorize(pd.MultiIndex.from_arrays(codes), sort=False)
        first = np.unique(flat, return_index=True)[1]
        return flat, tuple(c[first] for c in codes)
    flat = codes[0].astype(np.int64, copy=True) if len(codes) else np.zeros(n, np.int64)
    for c, s in zip(codes[1:], sizes[1:]):
        flat *= s
        flat += c
    out, uflat = _distinct_flat(flat, n_keys, n)
    return out, np.unravel_index(uflat, sizes)


def _distinct_flat(flat: np.ndarray, n_keys: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the distinct tuple numbers ``flat`` (each below ``n_keys``) of a table of ``n`` rows and those numbers:
    through a lookup table where the possible numbers are few for ``n`` rows (codes in the numbers' order), else in
    order of first appearance (:func:`factorize_ints`). ``flat`` may be the numbers of the table's runs (runs of
    equal numbers, as :meth:`Columns._factorize_runs` finds them): the same codes for each run as for its rows."""
    if n_keys <= max(16 * n, _TABLE_KEYS):  # few possible tuples: a lookup table, no hashing
        seen = np.zeros(n_keys, dtype=bool)
        seen[flat] = True
        uflat, lookup = _ranks(seen)
        return lookup.take(flat), uflat
    return factorize_ints(flat)
