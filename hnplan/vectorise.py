"""Helpers that evaluate a scalar function once per distinct key and broadcast it over a table.

The cost models are written per shape (one layer, one stage, one group); the planners evaluate
thousands of candidate plans that share a few shapes. :func:`memo` bridges the two without a Python
loop over the candidates. No physics here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd


def factorize(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Codes of the distinct ``keys`` tuples of ``df`` and a frame of those tuples (fast: one integer
    per row from the per-column codes, then one factorisation).

    Returns
    -------
    (ndarray, DataFrame)
        ``codes[i]`` is the row of the distinct-tuple frame that row ``i`` of ``df`` has.

    >>> codes, uniq = factorize(pd.DataFrame({"a": [1, 2, 1], "b": [0, 0, 0]}), ["a", "b"])
    >>> codes.tolist(), uniq.to_dict("list")
    ([0, 1, 0], {'a': [1, 2], 'b': [0, 0]})
    """
    per = [_column_codes(df[k]) for k in keys]
    sizes = [max(len(u), 1) for _, u in per]
    if len(df) and np.prod([float(s) for s in sizes]) >= 2**62:  # too many combinations for one int64
        per = [pd.factorize(df[k], sort=False) for k in keys]
        sizes = [max(len(u), 1) for _, u in per]
    flat = np.ravel_multi_index([c for c, _ in per], sizes) if len(df) else np.zeros(0, np.int64)
    n_keys = int(np.prod(sizes))
    if n_keys <= max(4 * len(flat), 1 << 16):  # few possible tuples: a lookup table, no hashing
        seen = np.zeros(n_keys, dtype=bool)
        seen[flat] = True
        uflat = np.flatnonzero(seen)
        codes = (np.cumsum(seen) - 1)[flat]
    else:
        codes, uflat = pd.factorize(flat, sort=False)
    idx = np.unravel_index(uflat, sizes)
    uniq = pd.DataFrame({k: np.asarray(u)[i] for k, (_, u), i in zip(keys, per, idx)})
    return codes, uniq


def _column_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes and code values of one column: integers by their offset from the column's minimum (no
    hashing; over a span of more than 8 values, but fewer than about four per row, through a lookup
    table of the values present), a categorical column by its codes, anything else by
    :func:`pandas.factorize`."""
    if isinstance(col.dtype, pd.CategoricalDtype):  # codes kept by the column
        return col.cat.codes.to_numpy().astype(np.int64), np.asarray(col.cat.categories)
    a = col.to_numpy()
    if a.dtype.kind in "iu" and len(a):
        lo = a.min()
        offset = (a - lo).astype(np.int64, copy=False)
        span = int(a.max() - lo) + 1
        if 8 < span <= max(4 * len(a), 1 << 12):  # a wide span: count only the values present
            seen = np.zeros(span, dtype=bool)
            seen[offset] = True
            present = np.flatnonzero(seen)
            return (np.cumsum(seen) - 1)[offset], (present + lo).astype(a.dtype)
        return offset, np.arange(span, dtype=a.dtype) + lo
    return pd.factorize(col, sort=False)


def on_distinct(df: pd.DataFrame, keys: list[str], fn: Callable[[pd.DataFrame], tuple]) -> tuple:
    """Evaluate an array function ``fn(frame) -> tuple of arrays`` once on the distinct ``keys`` rows
    of ``df`` and gather each result back to its rows (element-wise functions of those columns only:
    the result equals ``fn(df[keys])``).

    >>> df = pd.DataFrame({"a": [1, 2, 1, 1], "b": [0, 0, 0, 5]})
    >>> [x.tolist() for x in on_distinct(df, ["a", "b"], lambda u: (u["a"].to_numpy() * 10 + u["b"].to_numpy(),))]
    [[10, 20, 10, 15]]
    """
    codes, uniq = factorize(df, keys)
    return tuple(np.asarray(x)[codes] for x in fn(uniq))


def memo(df: pd.DataFrame, keys: list[str], fn: Callable[..., dict]) -> pd.DataFrame:
    """Evaluate ``fn(*key values) -> dict`` once per distinct key tuple of ``df`` and broadcast the
    results back to its rows (a frame aligned with ``df``)."""
    codes, uniq = factorize(df, keys)
    res = pd.DataFrame([fn(*u) for u in uniq.itertuples(index=False)])
    return pd.DataFrame({k: res[k].to_numpy()[codes] for k in res.columns})
