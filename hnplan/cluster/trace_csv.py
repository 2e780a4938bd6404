"""Reading a cluster trace's CSV file (:mod:`hnplan.cluster.jobs`, :mod:`hnplan.cluster.traces`): the file checked
to exist, comment lines and the spaces around cells dropped, each row numbered as the file has it, one-line errors
for a file that is not comma-separated CSV or lacks a column."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from hnplan.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


def check_trace_file(path: Path) -> None:
    """Refuse a trace path that is no file, saying whether it is missing or a folder.

    Raises
    ------
    InputError
        ``trace file PATH not found``, ``trace file PATH is a folder, not a file``, or ``trace file PATH is
        empty`` (pandas' ``No columns to parse from file`` said nothing of what to give).
    """
    if path.is_dir():
        raise InputError(f"trace file {path} is a folder, not a file: give the trace's CSV or JSON log")
    if not path.is_file():
        raise InputError(f"trace file {path} not found")
    if path.stat().st_size == 0:
        raise InputError(f"trace file {path} is empty: give a CSV with a header row and one row per job")


def check_trace_text(path: Path, head: bytes) -> None:
    """Refuse a trace whose first bytes (``head``, 4 KiB or more) are no text (:func:`binary_kind`), naming
    the file and what it is.

    Raises
    ------
    InputError
        ``PATH: not a CSV file: KIND; a trace is a CSV (...) or Philly's JSON job log``.
    """
    if kind := binary_kind(head[:4096]):
        raise InputError(
            f"{path}: not a CSV file: {kind}; a trace is a CSV (hnplan's job table, Alibaba openb, Helios or "
            "Acme) or Philly's JSON job log"
        )


def binary_kind(head: bytes) -> str | None:
    """What a file that is no text is, from its first bytes (``head``), or None for text (UTF-8, a byte cut
    at the end of ``head`` allowed). Such a file read as a CSV gave "missing column(s) arrival_s, ..." when its
    bytes happened to decode, which said nothing of the file being no CSV at all.

    >>> binary_kind(b"PAR1\\x15\\x04"), binary_kind(b"\\xff\\xfea\\x00"), binary_kind(b"a,b\\n\\x00\\x01")
    ('a Parquet file (it starts with PAR1): export it as CSV', 'UTF-16 text: save it as UTF-8 CSV', 'binary data, not text (a NUL byte at byte 4)')
    >>> binary_kind("arrival_s,gpus\\n0,8 # caf\u00e9\\n".encode()) is None
    True
    """
    if head.startswith(b"PAR1"):
        return "a Parquet file (it starts with PAR1): export it as CSV"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text: save it as UTF-8 CSV"
    if head.startswith((b"\x1f\x8b", b"PK\x03\x04", b"BZh", b"\xfd7zXZ", b"(\xb5/\xfd")):
        return "a compressed archive (gzip, zip, bz2, xz or zstd): decompress it first"
    if (nul := head.find(b"\x00")) >= 0:
        return f"binary data, not text (a NUL byte at byte {nul})"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not a character cut at the end of the bytes read
            return f"binary data, not UTF-8 text (byte {exc.start} is 0x{head[exc.start]:02x})"
    return None


def separator_hint(columns) -> str | None:
    """What is wrong with a CSV header read as one column holding ``;`` or a tab: the file is separated by
    that character (a spreadsheet's export where the comma is the decimal mark uses ``;``), not by commas.
    None for any other header.

    >>> separator_hint(["arrival_s;gpus;tp"])
    "the header is one column, 'arrival_s;gpus;tp': the file is separated by ';', not commas; save it as comma-separated CSV"
    >>> separator_hint(["arrival_s", "gpus"]) is None
    True
    """
    cols = [str(c) for c in columns]
    if len(cols) != 1:
        return None
    for sep, name in ((";", "';'"), ("\t", "tabs")):
        if sep in cols[0]:
            return (
                f"the header is one column, {cols[0]!r}: the file is separated by {name}, not commas; save it as "
                "comma-separated CSV"
            )
    return None


#: how a trace's CSV is read: lines starting with ``#`` are comments (above the header too) and the spaces after a
#: comma are dropped (a cell ``" training "`` is ``training``, as ``" 8 "`` is 8); ``pandas.read_csv`` options
CSV_OPTIONS = {"comment": "#", "skipinitialspace": True}


#: the cells read as missing where a loader asks for only an empty cell to be missing (``keep_marks``): pandas'
#: default list also takes the text ``nan``, ``NA``, ``null``, ``None`` and ``N/A`` for a missing value, so an
#: error could only say such a cell "is empty"; kept as text, the error quotes it (``has 'nan'``)
EMPTY_ONLY = {"keep_default_na": False, "na_values": [""]}


def _long_row(path: Path, data: bytes) -> str:
    """The error for a CSV whose row has more fields than its header, which pandas reads by taking the first
    column for the index and shifting every other one left (a job's ``cls`` read as its ``duration_s``)."""
    import csv

    text = data.decode("utf-8", errors="replace").splitlines()
    rows = [(i, r) for i, r in enumerate(csv.reader(text), 1) if r and not r[0].lstrip().startswith("#")]
    width = len(rows[0][1])
    line, row = next(((i, r) for i, r in rows[1:] if len(r) > width), rows[0])
    return (
        f"{path}: line {line}: {len(row)} fields, the header names {width}: a comma inside a value shifts every "
        "column after it; write numbers without thousands separators and quote text that holds a comma"
    )


def read_trace_csv(path: Path, columns, fmt: str, keep_marks: bool = False) -> pd.DataFrame:
    """A trace's CSV file with its required ``columns`` (of the ``fmt`` format, named in the errors), read with
    :data:`CSV_OPTIONS`, the spaces around header names and text cells dropped. Its index is each row's line in
    the file less 2, so ``index + 2`` is the row a spreadsheet shows (the header row 1), comment lines counted.
    With ``keep_marks`` only an empty cell is missing (NaN); a cell ``nan``, ``NA`` or ``null`` stays text
    (:data:`EMPTY_ONLY`), for a format whose numeric cells are all required, so the error quotes what the file
    has; without it, pandas' default list of missing-value marks applies (the Slurm logs' loaders drop such rows).

    Raises
    ------
    InputError
        For a missing file, a file that is not CSV, a file separated by ``;`` or tabs (:func:`separator_hint`),
        or a missing column.
    """
    import pandas as pd

    check_trace_file(path)
    data = path.read_bytes()  # the file read once: pandas parses these bytes, the rows are numbered from them
    check_trace_text(path, data)
    try:
        raw = pd.read_csv(io.BytesIO(data), **CSV_OPTIONS, **(EMPTY_ONLY if keep_marks else {}))
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: not a CSV file ({str(exc).strip()})") from None
    if not isinstance(raw.index, pd.RangeIndex):  # pandas took the first column for an index: a row is too long
        raise InputError(_long_row(path, data))
    # with no comment and as many lines as the header and rows (lines end at \n, \r\n or \r, as a file read as
    # text splits them), row i is on line i + 2: the index pandas gives holds, and the lines need no scan
    if b"#" in data or len(data.splitlines()) != len(raw) + 1:
        text = io.StringIO(data.decode("utf-8", errors="replace"), newline=None)
        lines = [i for i, t in enumerate(text, 1) if t.strip() and not t.lstrip().startswith("#")]
        if len(lines) == len(raw) + 1:  # (else a quoted cell spans lines: rows counted from the header)
            raw.index = pd.Index(lines[1:]) - 2
    raw.columns = [c.strip() if isinstance(c, str) else c for c in raw.columns]
    for col in raw.columns:
        if raw[col].dtype.kind == "O":  # text (pandas' str dtype or object)
            raw[col] = raw[col].str.strip()
    if hint := separator_hint(raw.columns):
        raise InputError(f"{path}: {hint}")
    missing = [c for c in columns if c not in raw]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} of the {fmt} format")
    return raw
