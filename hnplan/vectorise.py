"""Helpers that evaluate a scalar function once per distinct key and broadcast it over a table.

The cost models are written per shape (one layer, one stage, one group); the planners evaluate
thousands of candidate plans that share a few shapes. :func:`on_distinct` and :func:`memo` bridge the
two without a Python loop over the candidates. A table is a :class:`pandas.DataFrame` or, in the
planners' hot path, a :class:`Columns` (plain numpy arrays: no per-call pandas overhead, and the
integer codes of each column computed once per table). No physics here.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np

from hnplan.vectorise_codes import (  # noqa: F401 - re-exported: they lived here
    _SORT_ROWS,
    _TABLE_KEYS,
    _array_codes,
    _codes_by_sort,
    _distinct,
    _distinct_flat,
    _ranks,
    _sorted_codes,
    factorize_ints,
)

if TYPE_CHECKING:
    import pandas as pd

#: a table of at least this many rows is factorised through its runs (:meth:`Columns._factorize_runs`)
_RUN_ROWS = 4096
#: a column is factorised on its runs where it changes between neighbouring rows at most once in this many rows,
#: and the runs are used where they number at most a quarter of the rows
_RUN_SHARE = 4


class Columns:
    """Equal-length 1-D numpy arrays by name: a light table for vectorised cost models.

    As a DataFrame, ``len(table)`` is its rows and iterating gives its column names; ``table[name]`` is
    the column's array (a categorical column decoded to its values, computed once);
    :meth:`codes` gives a column's integer codes and values and :meth:`factorize` the distinct rows of
    a set of columns, both cached on the table (a table is read-only once built).

    Parameters
    ----------
    data : dict of str to array
        The plain columns (1-D, equal length).
    categorical : dict of str to (codes, categories), optional
        Columns kept as integer codes into an array of categories (e.g. the recompute mode).

    >>> t = Columns({"a": np.array([1, 2, 1])}, {"r": (np.array([0, 0, 1]), np.array(["x", "y"], dtype=object))})
    >>> len(t), list(t), t["a"].tolist(), t["r"].tolist()
    (3, ['a', 'r'], [1, 2, 1], ['x', 'x', 'y'])
    """

    __slots__ = ("_data", "_cats", "_codes", "_distinct", "_n", "_changes")

    def __init__(self, data: Mapping[str, np.ndarray], categorical: Mapping[str, tuple] | None = None):
        self._data = {k: np.asarray(v) for k, v in data.items()}
        self._cats = {k: (np.asarray(c, dtype=np.int64), np.asarray(v)) for k, (c, v) in (categorical or {}).items()}
        lengths = {len(v) for v in self._data.values()} | {len(c) for c, _ in self._cats.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal lengths {sorted(lengths)}")
        self._n = lengths.pop() if lengths else 0
        self._codes: dict = {}
        self._distinct: dict = {}
        self._changes: dict = {}  # {column: (where it differs from the row before, how many times)}

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._data:
            return self._data[key]
        codes, values = self._cats[key]
        out = values.take(codes)  # take: a gather faster than fancy indexing, the same values
        self._data[key] = out
        return out

    def __iter__(self) -> Iterator[str]:
        return iter({**self._data, **self._cats})

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key) -> bool:
        return key in self._data or key in self._cats

    def codes(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, values)`` of one column: ``values[codes]`` is the column (cached)."""
        if key not in self._codes:
            self._codes[key] = self._cats[key] if key in self._cats else _array_codes(self._data[key])
        return self._codes[key]

    def with_flag(self, name: str, flags: np.ndarray, coded: tuple[str, ...] = ()) -> Columns:
        """This table with a boolean column ``name`` added (or replacing one), kept as codes in order of first
        appearance (as :func:`_array_codes` codes a boolean array); the other columns as they are (categorical
        ones stay coded) with the codes found for them so far, and first those of the columns ``coded`` (kept on
        this table too): factorising a key set with the flag then finds only the flag's codes, not every
        column's again (a table of many rows)."""
        flags = np.asarray(flags, dtype=bool)
        if flags.shape != (self._n,):
            raise ValueError(f"a column of {flags.shape} for a table of {self._n} rows")
        for k in coded:
            self.codes(k)
        new = Columns({k: v for k, v in self._data.items() if k not in self._cats and k != name}, self._cats)
        if self._n:  # pandas.factorize's codes and values of a boolean array, without hashing it
            codes = (flags != flags[0]).astype(np.int64)
            values = np.array([flags[0], not flags[0]] if codes.any() else [flags[0]], dtype=bool)
        else:
            codes, values = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        new._cats[name] = (codes, values)
        new._codes.update((k, v) for k, v in self._codes.items() if k != name)
        new._changes.update((k, v) for k, v in self._changes.items() if k != name)
        return new

    def factorize(self, keys: list[str]) -> tuple[np.ndarray, Columns]:
        """Codes of the distinct ``keys`` tuples and a table of those tuples (cached per set of keys).

        A key set inside one already factorised with few distinct tuples is factorised on those
        tuples and its codes gathered through theirs (one pass over the rows instead of several)."""
        tk = frozenset(keys)
        if self._n == 1 and tk not in self._distinct:  # one row is its own distinct tuple: no codes to find
            one = Columns(
                {k: self._data[k] for k in keys if k not in self._cats},
                {k: self._cats[k] for k in keys if k in self._cats},
            )
            self._distinct[tk] = (np.zeros(1, dtype=np.int64), one)
        if tk not in self._distinct:
            sup = [v for s, v in self._distinct.items() if tk < s and len(v[1]) * 4 <= self._n]
            if sup:
                outer, table = min(sup, key=lambda v: len(v[1]))
                inner, uniq = table.factorize(keys)
                self._distinct[tk] = (inner.take(outer), uniq)
            else:
                self._distinct[tk] = self._factorize(keys)
        return self._distinct[tk]

    def _factorize(self, keys: list[str]) -> tuple[np.ndarray, Columns]:
        got = self._factorize_runs(keys) if self._n >= _RUN_ROWS else None
        if got is not None:
            per, codes, idx = got
        else:
            per = [self.codes(k) for k in keys]
            codes, idx = _distinct([c for c, _ in per], [max(len(u), 1) for _, u in per], self._n)
        data, cats = {}, {}
        for k, (_, u), i in zip(keys, per, idx):
            if k in self._cats:
                cats[k] = (np.asarray(i), u)
            else:
                data[k] = u[i]
        return codes, Columns(data, cats)

    def _change(self, key: str) -> tuple[np.ndarray, int]:
        """Where column ``key`` differs from the row before (``[n - 1]`` booleans; a categorical column by its
        codes) and how many times (cached)."""
        if key not in self._changes:
            a = self._cats[key][0] if key in self._cats else self._data[key]
            if a.dtype.kind not in "biuf":  # names and objects: not compared
                self._changes[key] = (None, self._n)
            else:
                d = a[1:] != a[:-1]
                self._changes[key] = (d, int(np.count_nonzero(d)))
        return self._changes[key]

    def _factorize_runs(self, keys: list[str]) -> tuple[list, np.ndarray, tuple] | None:
        """:meth:`_factorize`'s per-key ``(codes, values)``, tuple codes and per-key codes of the distinct tuples,
        the same numbers, found through the runs of rows that hold the same values of the keys that seldom change
        (a candidate table repeats each plan's degrees for every (ZeRO, recompute) pair): those keys' codes and
        their part of each tuple's number found once per run and repeated over its rows; None where such
        runs are more than a quarter of the rows."""
        n = self._n
        change = [self._change(k) for k in keys]
        slow = [i for i, (d, count) in enumerate(change) if d is not None and count * _RUN_SHARE <= n]
        if not slow:
            return None
        ends = change[slow[0]][0].copy()
        for i in slow[1:]:
            ends |= change[i][0]
        starts = np.flatnonzero(ends)
        if (len(starts) + 1) * 4 > n:
            return None
        starts += 1
        starts = np.concatenate(([0], starts))
        lengths = np.diff(starts, append=n)
        per: list = [None] * len(keys)
        for i, k in enumerate(keys):
            if i not in slow:
                per[i] = self.codes(k)
            elif k in self._codes or k in self._cats:  # the column's codes at the runs' first rows
                c, u = self._codes[k] if k in self._codes else self._cats[k]
                per[i] = (c.take(starts), u)
            else:  # the same codes and values as the whole column's (each value is in some run)
                per[i] = _array_codes(self._data[k].take(starts), rows=n)
        sizes = [max(len(u), 1) for _, u in per]
        n_keys = math.prod(sizes)
        if n_keys >= 2**62:  # too many combinations for one int64 (as _distinct)
            return None
        strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
        flat = np.zeros(len(starts), np.int64)  # the slow keys' part of each run's tuple number
        for i in slow:
            flat += per[i][0] * strides[i]
        fast = [i for i in range(len(keys)) if i not in slow]
        if fast:  # the rows' numbers: their run's part repeated, the other keys' added
            flat = flat.repeat(lengths)
            for i in fast:
                flat += per[i][0] * strides[i]
        codes, uflat = _distinct_flat(flat, n_keys, n)  # numbered as the rows' numbers: runs keep their order
        if not fast:
            codes = codes.repeat(lengths)
        return per, codes, np.unravel_index(uflat, sizes)  # of ``per`` the values alone are read

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (categorical columns decoded)."""
        import pandas as pd

        return pd.DataFrame({k: self[k] for k in self})


def is_frame(x) -> bool:
    """Whether ``x`` is a :class:`pandas.DataFrame`, without importing pandas (a process that has not
    imported it holds none)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(x, pd.DataFrame)


@functools.cache
def _from_blocks():
    """pandas >= 3.0's DataFrame from its blocks (without the constructor's per-column inference), else None."""
    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:  # pragma: no cover - older pandas: the constructor
        return None
    return create_dataframe_from_blocks


def frame_of(columns: Mapping[str, object], n: int) -> pd.DataFrame:
    """A DataFrame of ``n`` rows (a range index) from 1-D columns, each kept as it is (no copy), as
    ``pd.DataFrame(columns, copy=False)`` builds it, without the constructor's per-column checks.

    Parameters
    ----------
    columns : dict of str to number or array
        A number is repeated over the rows; numeric and boolean numpy arrays and pandas extension arrays
        (shape ``(n,)``) become one block each (pandas >= 3: ``pandas.api.internals.
        create_dataframe_from_blocks``); any other kind of column, or older pandas, goes through the
        constructor.
    n : int
        Rows.

    Returns
    -------
    pandas.DataFrame

    >>> frame_of({"a": np.arange(3), "b": 2.5}, 3).to_dict("list")
    {'a': [0, 1, 2], 'b': [2.5, 2.5, 2.5]}
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    arrays = {k: np.full(n, x) if np.ndim(x) == 0 else x for k, x in columns.items()}
    plain = all(
        (isinstance(x, np.ndarray) and x.dtype.kind in "biuf") or isinstance(x, pd.api.extensions.ExtensionArray)
        for x in arrays.values()
    )
    from_blocks = _from_blocks()
    if from_blocks is None or not plain or any(len(x) != n or np.ndim(x) != 1 for x in arrays.values()):
        return pd.DataFrame(arrays, copy=False)
    blocks = [
        (x.reshape(1, -1) if isinstance(x, np.ndarray) else x, np.array([i])) for i, x in enumerate(arrays.values())
    ]
    return from_blocks(blocks, index=pd.RangeIndex(n), columns=pd.Index(list(arrays)))


def column(table, key: str) -> np.ndarray:
    """One column of a table (DataFrame or :class:`Columns`) as a numpy array."""
    return table[key] if isinstance(table, Columns) else table[key].to_numpy()


def distinct_values(table, key: str) -> list:
    """The distinct values of one column of a table (DataFrame or :class:`Columns`)."""
    if isinstance(table, Columns):
        _, uniq = table.factorize([key])  # cached on the table
        return uniq[key].tolist()
    import pandas as pd

    return list(pd.unique(table[key]))


def factorize(df, keys: list[str]):
    """Codes of the distinct ``keys`` tuples of a table and a table of those tuples (a DataFrame for a
    DataFrame, a :class:`Columns` for a :class:`Columns`).

    Returns
    -------
    (ndarray, table)
        ``codes[i]`` is the row of the distinct-tuple table that row ``i`` of ``df`` has.

    >>> import pandas as pd
    >>> codes, uniq = factorize(pd.DataFrame({"a": [1, 2, 1], "b": [0, 0, 0]}), ["a", "b"])
    >>> codes.tolist(), uniq.to_dict("list")
    ([0, 1, 0], {'a': [1, 2], 'b': [0, 0]})
    """
    if isinstance(df, Columns):
        return df.factorize(keys)
    import pandas as pd

    per = [_column_codes(df[k]) for k in keys]
    codes, idx = _distinct([c for c, _ in per], [max(len(u), 1) for _, u in per], len(df))
    uniq = pd.DataFrame({k: np.asarray(u)[i] for k, (_, u), i in zip(keys, per, idx)})
    return codes, uniq


def _column_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes and code values of one DataFrame column: a categorical column by its codes, anything else
    as :func:`_array_codes`."""
    import pandas as pd

    if isinstance(col.dtype, pd.CategoricalDtype):  # codes kept by the column
        return col.cat.codes.to_numpy().astype(np.int64), np.asarray(col.cat.categories)
    return _array_codes(col.to_numpy())


#: the largest gathered table :func:`gather` builds [bytes]: its transposed copy reads the table once per array, so
#: past a core's L2 cache (1-2 MiB) each pass goes to memory and the copy costs more time than the instructions
#: saved (DeepSeek-V3's 220,494 candidates: 10-15 % more CPU time with fewer instructions)
GATHER_TABLE_BYTES = 1 << 20


def gather(arrays, codes: np.ndarray) -> list[np.ndarray]:
    """``[np.asarray(a).take(codes, axis=0) for a in arrays]``, element by element the same values: two or more
    1-D arrays of one length and dtype are gathered as the rows of one table (each index copies a row of their
    numbers at once; three are padded to four, a row numpy copies without ``memmove``), then turned back into
    contiguous columns (one transposed copy): about half the instructions of one gather per array (numpy 2.4:
    13 per element for a 1-D ``take``; 29 per row of eight and 3.5 per element of the copy). Each array returned is
    contiguous and writable, a row of one 2-D array (the arrays share that base); anything else (one array, other
    shapes, mixed dtypes, a gathered table over :data:`GATHER_TABLE_BYTES`) is gathered array by array.

    >>> [x.tolist() for x in gather([np.array([1.0, 2.0]), np.array([3.0, 4.0])], np.array([1, 1, 0]))]
    [[2.0, 2.0, 1.0], [4.0, 4.0, 3.0]]
    """
    arrays = [np.asarray(a) for a in arrays]
    k = len(arrays)
    if (
        k < 2
        or any(a.ndim != 1 or a.dtype != arrays[0].dtype or len(a) != len(arrays[0]) for a in arrays)
        or len(codes) * k * arrays[0].dtype.itemsize > GATHER_TABLE_BYTES
    ):
        return [a.take(codes, axis=0 if a.ndim else None) for a in arrays]
    table = np.empty((len(arrays[0]), 4 if k == 3 else k), dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):
        table[:, i] = a
    rows = np.ascontiguousarray(table.take(codes, axis=0)[:, :k].T)  # [array, row of codes]
    return list(rows)


def on_distinct(df, keys: list[str], fn: Callable) -> tuple:
    """Evaluate an array function ``fn(table) -> tuple of arrays`` once on the distinct ``keys`` rows
    of ``df`` (a DataFrame or :class:`Columns`) and gather each result back to its rows (element-wise
    functions of those columns only: the result equals ``fn(df[keys])``).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 1, 1], "b": [0, 0, 0, 5]})
    >>> [x.tolist() for x in on_distinct(df, ["a", "b"], lambda u: (u["a"].to_numpy() * 10 + u["b"].to_numpy(),))]
    [[10, 20, 10, 15]]
    """
    codes, uniq = factorize(df, keys)
    return tuple(gather(fn(uniq), codes))  # x[codes] for each result, gathered faster


def memo(df, keys: list[str], fn: Callable[..., dict], cache: dict | None = None):
    """Evaluate ``fn(*key values) -> dict`` once per distinct key tuple of ``df`` and broadcast the
    results back to its rows: a table aligned with ``df`` (a DataFrame, or a :class:`Columns` for a
    :class:`Columns`).

    ``cache`` (optional, ``{key tuple: result}``) keeps the results across calls for a caller whose
    ``fn`` depends on nothing else: a repeated evaluation calls ``fn`` only for key tuples it has not seen.
    """
    codes, uniq = factorize(df, keys)
    cache = {} if cache is None else cache
    res = []
    for u in zip(*(uniq[k].tolist() for k in keys)):
        if u not in cache:
            cache[u] = fn(*u)
        res.append(cache[u])
    if isinstance(uniq, Columns):
        return Columns({k: np.array([r[k] for r in res], dtype=float)[codes] for k in (res[0] if res else ())})
    import pandas as pd

    out = pd.DataFrame(res)
    return pd.DataFrame({k: out[k].to_numpy()[codes] for k in out.columns}, copy=False)


def memo_batched(df, keys: list[str], fn: Callable[..., dict], cache: dict | None = None, by: tuple[str, ...] = ()):
    """:func:`memo` with ``fn`` called on arrays: once per distinct value of the ``by`` keys (passed as
    numbers), the other keys as arrays over the distinct key tuples not in ``cache`` with those values;
    ``fn`` returns ``{name: array}`` element by element equal to the one-tuple results (element-wise
    functions of its array arguments). The result is as :func:`memo`'s; ``cache`` holds, per key tuple,
    ``(names, numbers)`` (the result names and that tuple's numbers as floats, in their order): filled
    from the batch's arrays without a dictionary per tuple.
    """
    codes, uniq = factorize(df, keys)
    cache = {} if cache is None else cache
    values = [uniq[k].tolist() for k in keys]
    tuples = list(zip(*values))
    at = [keys.index(k) for k in by]
    missing = [j for j, u in enumerate(tuples) if u not in cache]  # rows of the distinct-tuple table
    batches: dict = {}
    if at:
        fixed_of = list(zip(*(values[i] for i in at)))  # each distinct tuple's ``by`` values
        for j in missing:
            batches.setdefault(fixed_of[j], []).append(j)
    elif missing:  # one batch
        batches[()] = missing
    fresh: dict = {}  # every tuple computed now: the results as arrays, not read back from the cache
    for fixed, rows in batches.items():
        args = [fixed[at.index(i)] if i in at else np.array([values[i][j] for j in rows]) for i in range(len(keys))]
        got = {k: np.broadcast_to(np.asarray(v, dtype=float), (len(rows),)) for k, v in fn(*args).items()}
        names = tuple(got)
        numbers = zip(*(v.tolist() for v in got.values()))  # each tuple's numbers as floats
        cache.update(zip([tuples[j] for j in rows], zip(itertools.repeat(names), numbers)))
        if len(missing) == len(tuples):
            for k, v in got.items():
                fresh.setdefault(k, np.empty(len(tuples)))[rows] = v
    if fresh:
        out_cols = dict(zip(fresh, gather(fresh.values(), codes)))
    else:
        res = [cache[u] for u in tuples]
        names = res[0][0] if res else ()
        table = np.array([r[1] for r in res], dtype=float).reshape(len(res), len(names))
        out_cols = {k: table[:, i].take(codes) for i, k in enumerate(names)}
    if isinstance(uniq, Columns):
        return Columns(out_cols)
    import pandas as pd

    return pd.DataFrame(out_cols, copy=False)
