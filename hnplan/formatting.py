"""Numbers written for people (reports, verdicts, CLI tables): counts in the short scale (``15T``,
``405B``), money (``$63.9M``), SI-prefixed physical quantities (``9.3 MW``), shares as per cent, and a
value in the unit a table names. No conversion happens here (:mod:`hnplan.units` is the only module
that converts, and writes the quantities whose figure needs one: energy in Wh, a value in its table's unit);
these names are importable from :mod:`hnplan.units` as before.
"""

from __future__ import annotations

import math
import re

# --- numbers for people (reports, verdicts, CLI tables) ---------------------------------
# Short scale for counts (tokens, parameters, FLOP): k, M, B, T as finance and the model cards write them
# (Llama 3 paper: "405B parameters", "15T tokens"); SI prefixes for physical units (kW, MW, GWh).
_COUNT_PREFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))
_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _sig(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits without an exponent (63.95 -> '64', 9.3 -> '9.3'), up to 1e15;
    an exponent beyond, rather than hundreds of digits (a utilisation of 1e-300 costs 1.4e+300 per GPU-hour).

    >>> _sig(63.95, 3), _sig(123456.7, 3), _sig(1.44e300, 3)
    ('64', '123,457', '1.44e+300')
    """
    text = f"{x:.{digits}g}"
    if "e" in text and abs(x) < 1e15:
        text = f"{x:,.0f}"
    return text


def format_amount(x: float, decimals: int) -> str:
    """``x`` with thousands separators and ``decimals`` decimals, or two significant digits where that
    would print 0 (a job of a few tokens is not 0 days, nor 0 MWh).

    >>> format_amount(7393882812441706496.0, 1), format_amount(0.00042, 1), format_amount(11357.4, 0)
    ('7,393,882,812,441,706,496.0', '0.00042', '11,357')
    >>> format_amount(0.0, 1), format_amount(0.0922, 0)
    ('0.0', '0.092')
    """
    return f"{x:.2g}" if 0 < abs(x) < 0.5 * 10**-decimals else f"{x:,.{decimals}f}"


def format_span(lo: float, hi: float, spec: str, suffix: str = "") -> str:
    """The range ``lo``-``hi`` of a quantity, each end written with the format ``spec`` and ``suffix`` once at
    the end; one value where the two ends print the same (``99.6%``, not ``99.6%-99.6%``).

    >>> format_span(0.9962, 0.9958, ".1%"), format_span(0.981, 0.996, ".1%"), format_span(1.2, 1.61, ".2f", "x")
    ('99.6%', '98.1%-99.6%', '1.20-1.61x')
    """
    a, b = f"{lo:{spec}}", f"{hi:{spec}}"
    return f"{a}{suffix}" if a == b else f"{a}-{b}{suffix}"


def counted(n: float, noun: str, plural: str | None = None, spec: str = ",") -> str:
    """A count and its noun, singular for exactly one: ``1 GPU``, ``1,024 GPUs``, ``3 rows``, ``1 day``.

    ``spec`` is the number's format (``","`` for whole counts, ``"g"`` for an amount such as a deadline in days).

    >>> counted(1, "GPU"), counted(16384, "GPU"), counted(1, "row"), counted(2, "entry", "entries")
    ('1 GPU', '16,384 GPUs', '1 row', '2 entries')
    >>> counted(1.0, "day", spec="g"), counted(0.5, "day", spec="g"), counted(30, "day", spec="g")
    ('1 day', '0.5 days', '30 days')
    """
    return f"{n:{spec}} {noun if n == 1 else plural or noun + 's'}"


def deadline_days_text(days: float) -> str:
    """A deadline given in days, as :func:`counted` writes it, with the time it is in hours, minutes or seconds
    when it is under a tenth of a day (a deadline of ``1e-09`` days reads as what it means).

    >>> deadline_days_text(30), deadline_days_text(0.5), deadline_days_text(0.05)
    ('30 days', '0.5 days', '0.05 days (1.2 hours)')
    >>> deadline_days_text(0.001), deadline_days_text(1e-9)
    ('0.001 days (1.44 minutes)', '1e-09 days (86.4 us)')
    """
    text = counted(days, "day", spec="g")
    if not _finite(days) or days >= 0.1 or days <= 0:
        return text
    from hnplan import units  # here: hnplan.units re-exports this module's names

    s = units.days_to_s(float(days))
    if s >= units.HOUR:
        return f"{text} ({_sig(units.s_to_hours(s), 3)} hours)"
    if s >= units.MINUTE:
        return f"{text} ({_sig(s / units.MINUTE, 3)} minutes)"
    scale, unit = next(((f, u) for f, u in ((1.0, "s"), (1e-3, "ms")) if s >= f), (1e-6, "us"))
    return f"{text} ({_sig(s / scale, 3)} {unit})"


def format_count(n, digits: int = 3) -> str:
    """A count for people: ``15T``, ``405B``, ``1.2M``, ``16,384``; 'n/a' for a missing or infinite one.

    Counts below 100,000 keep every digit (GPU counts must stay exact).

    >>> format_count(15e12), format_count(405e9), format_count(16384), format_count(float("nan"))
    ('15T', '405B', '16,384', 'n/a')
    """
    if not _finite(n):
        return "n/a"
    n = float(n)
    if abs(n) < 1e5:
        return f"{n:,.0f}" if n.is_integer() else _sig(n, digits)
    for scale, suffix in _COUNT_PREFIXES:
        if abs(n) >= scale:
            return _sig(n / scale, digits) + suffix
    return _sig(n, digits)  # pragma: no cover


def format_usd(usd, digits: int = 3) -> str:
    """Money for people: ``$63.9M``, ``$1.2B``, ``$950k``, ``$2.31``; 'n/a' for a missing price.

    >>> format_usd(63947789.96), format_usd(2.306), format_usd(None)
    ('$63.9M', '$2.31', 'n/a')
    """
    if not _finite(usd):
        return "n/a"
    usd = float(usd)
    sign = "-" if usd < 0 else ""
    usd = abs(usd)
    if usd < 1e3:
        return f"{sign}${usd:,.2f}"
    if usd >= 1e15:  # a thousand trillion and up: an exponent, not "$1.44e+288T"
        return f"{sign}${_sig(usd, digits)}"
    for scale, suffix in _COUNT_PREFIXES:
        if usd >= scale:
            return f"{sign}${_sig(usd / scale, digits)}{suffix}"
    return f"{sign}${usd:,.0f}"  # pragma: no cover


def format_si(value, unit: str, digits: int = 3) -> str:
    """A physical quantity in SI base units with a prefix: ``format_si(9.3e6, "W") == '9.3 MW'``.

    >>> format_si(9.3e6, "W"), format_si(120e3, "W"), format_si(2.5e-3, "s")
    ('9.3 MW', '120 kW', '0.0025 s')
    """
    if not _finite(value):
        return "n/a"
    value = float(value)
    for scale, prefix in _SI_PREFIXES:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def format_power(watts, digits: int = 3) -> str:
    """Power for people: ``9.3 MW``, ``120 kW``."""
    return format_si(watts, "W", digits)


def format_number(value, digits: int = 4) -> str:
    """A plain number in a table for people: ``digits`` significant digits, thousands separated, no
    exponent (``{:.4g}`` writes 16,930 as ``1.693e+04``); 'n/a' for a missing one.

    >>> format_number(16930.4), format_number(1.5), format_number(123.456), format_number(None)
    ('16,930', '1.5', '123.5', 'n/a')
    """
    if not _finite(value):
        return "n/a"
    v = float(value)
    return f"{v:,.0f}" if 10 ** (digits - 1) <= abs(v) < 1e15 else _sig(v, digits)


def format_given(value: float) -> str:
    """A bound the user gave, written back as typed: every digit up to 12 significant ones (the round trip
    through SI units leaves ``1e-9`` ms as ``1.0000000000000001e-09``), an exponent without padding, and no
    rounding to a fixed number of decimals (``{:.1f}`` wrote ``--score-latency-ms 1e-9`` as a 0.0 ms bound).

    >>> format_given(1.0000000000000001e-09), format_given(0.25), format_given(1500.0), format_given(2e20)
    ('1e-9', '0.25', '1500', '2e+20')
    """
    return re.sub(r"e([+-])0+(\d)", r"e\1\2", f"{float(value):.12g}")


TEXT_STYLES = ("markdown", "plain")
"""How a sentence builder writes its emphasis: ``markdown`` (bold ``**x**`` and code spans, for notebooks and the
console, which renders the bold) or ``plain`` (a JSON field: no markup, a code span in single quotes)."""


def styled(text: str, style: str = "markdown") -> str:
    """A builder's Markdown sentences in ``style`` (:data:`TEXT_STYLES`): as built for ``markdown``; for ``plain``,
    ``**x**`` is ``x`` and a code span is quoted.

    Raises
    ------
    ValueError
        For a style not in :data:`TEXT_STYLES`.

    >>> styled("**gb200-nvl72** trains fastest; give its file `unit_price_usd`", "plain")
    "gb200-nvl72 trains fastest; give its file 'unit_price_usd'"
    """
    if style not in TEXT_STYLES:
        raise ValueError(f"style must be one of {', '.join(TEXT_STYLES)}; got {style!r}")
    if style == "markdown":
        return text
    return re.sub(r"`([^`]*)`", r"'\1'", re.sub(r"\*\*(.+?)\*\*", r"\1", text))
