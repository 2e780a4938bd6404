"""Result tables for people: headers in words with their unit, numbers without exponents, blanks that say so.

A planner's DataFrame names its columns the code's way (``step_time_s_super``, ``usd_per_mtok_base``); a
report shows them as ``step time, supernode [s]`` and ``$ per M tokens, servers``. Formatting only: no value
is computed here.
"""

from __future__ import annotations

import math

import pandas as pd

from hnplan import units
from hnplan.labels import column_header  # noqa: F401 - re-exported: the header rule lives with the CLI's


def cell_text(value, digits: int = 4, blank: str = "—") -> str:
    """One cell for people: numbers to ``digits`` significant digits without an exponent (counts in the short
    scale above 100,000: 1.65B), booleans as yes/no, a missing value as ``blank``.

    >>> cell_text(28310.4), cell_text(1.652e9), cell_text(float("nan")), cell_text(True), cell_text("TP8")
    ('28,310', '1.652B', '—', 'yes', 'TP8')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return blank
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if abs(value) >= 1e6:
            return units.format_count(value, digits)
        return units.format_number(value, digits)
    try:
        if pd.isna(value):
            return blank
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):  # numpy scalars
        return cell_text(value.item(), digits, blank)
    return str(value)


def people_table(df: pd.DataFrame, headers: dict | None = None, digits: int = 4, blank: str = "—"):
    """``df`` as a pandas Styler for a report: headers from ``headers`` or :func:`column_header`, every cell
    through :func:`cell_text`, no index.

    Parameters
    ----------
    df : DataFrame
        The result table as a planner returns it.
    headers : dict, optional
        Column name -> header, for names the generic rule words badly.
    digits : int
        Significant digits of the numbers.
    blank : str
        What a missing value shows (say what it means under the table).
    """
    named = {c: (headers or {}).get(c) or column_header(str(c)) for c in df.columns}
    out = df.rename(columns=named)
    return out.style.format(lambda v: cell_text(v, digits, blank)).hide(axis="index")
