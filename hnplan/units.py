"""The only module in hnplan that converts units.

Inside the library every quantity is a plain float (or numpy array) in SI base units:

===================  ==========  =====================================================
quantity             unit        canonical suffix in names
===================  ==========  =====================================================
time                 s           ``_s``
data size            byte        ``_bytes``
bandwidth            byte/s      ``_Bps`` (per direction unless the name says ``bidir``)
compute              FLOP        ``_flops``
compute rate         FLOP/s      ``_flops_per_s``
power                W           ``_w``
energy               J           ``_j``
money                US dollar   ``_usd``
===================  ==========  =====================================================

Catalogs and user-facing output use the field's customary units, spelled in the key
(``hbm_gb``, ``hbm_bw_TBps``, ``nic_gbps``, ``tdp_w``).  Decimal prefixes (GB = 1e9 bytes) and
binary prefixes (GiB = 2**30 bytes) are distinct constants here and are never mixed silently;
``Gb/s`` (gigabits, network line rates) and ``GB/s`` (gigabytes, memory and NVLink) likewise.

Examples
--------
>>> gbps_to_Bps(400)            # a 400 Gb/s NDR port carries 50 GB/s per direction
50000000000.0
>>> round(to_GiB(80 * GB), 2)   # an "80 GB" HBM stack is 74.51 GiB
74.51
>>> parse_size("1GiB")
1073741824
"""

from __future__ import annotations

import math
import re

from hnplan.formatting import (  # noqa: F401  (public names of hnplan.units)
    _finite,
    _sig,
    format_count,
    format_number,
    format_power,
    format_si,
    format_span,
    format_usd,
)

# --- data size ---------------------------------------------------------------------------
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
PB = 1e15
KiB = 2.0**10
MiB = 2.0**20
GiB = 2.0**30
TiB = 2.0**40
BITS_PER_BYTE = 8

# --- rates and prefixes ------------------------------------------------------------------
TERA = 1e12
PETA = 1e15
GIGA = 1e9
MEGA = 1e6
KILO = 1e3
MILLI = 1e-3
MICRO = 1e-6
NANO = 1e-9

# --- time --------------------------------------------------------------------------------
MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
YEAR = 365.25 * DAY  # Julian year, the convention of amortisation schedules

# --- energy ------------------------------------------------------------------------------
KWH = 3.6e6  # joules per kilowatt-hour
MWH = 3.6e9


def tflops_to_flops_per_s(tflops):
    """TFLOP/s (1e12 FLOP/s, datasheet unit) -> FLOP/s."""
    return tflops * TERA


def flops_per_s_to_tflops(flops_per_s):
    """FLOP/s -> TFLOP/s (1e12)."""
    return flops_per_s / TERA


def gbps_to_Bps(gbps):
    """Network line rate in gigabits per second (Gb/s, 1e9 bit/s) -> bytes per second.

    A "400G" NIC is 400 Gb/s = 50e9 bytes/s per direction.
    """
    return gbps * GIGA / BITS_PER_BYTE


def Bps_to_gbps(bps):
    """Bytes per second -> gigabits per second (Gb/s)."""
    return bps * BITS_PER_BYTE / GIGA


def GBps_to_Bps(gbps_bytes):
    """Gigabytes per second (GB/s, 1e9 byte/s) -> bytes per second."""
    return gbps_bytes * GB


def Bps_to_GBps(bps):
    """Bytes per second -> GB/s (1e9 byte/s), the unit nccl-tests reports algbw/busbw in."""
    return bps / GB


def TBps_to_Bps(tbps_bytes):
    """Terabytes per second (TB/s, 1e12 byte/s, HBM datasheet unit) -> bytes per second."""
    return tbps_bytes * TB


def GB_to_bytes(gb):
    """Decimal gigabytes (1e9) -> bytes."""
    return gb * GB


def TB_to_bytes(tb):
    """Decimal terabytes (1e12, storage datasheet unit) -> bytes."""
    return tb * TB


def GiB_to_bytes(gib):
    """Binary gibibytes (2**30) -> bytes."""
    return gib * GiB


def to_GiB(nbytes):
    """Bytes -> GiB (2**30)."""
    return nbytes / GiB


def to_GB(nbytes):
    """Bytes -> GB (1e9)."""
    return nbytes / GB


def to_TB(nbytes):
    """Bytes -> TB (1e12, the unit storage datasheets and checkpoint sizes are quoted in)."""
    return nbytes / TB


def to_MiB(nbytes):
    """Bytes -> MiB (2**20)."""
    return nbytes / MiB


def kw_to_w(kw):
    """Kilowatts -> watts."""
    return kw * KILO


def w_to_kw(w):
    """Watts -> kilowatts."""
    return w / KILO


def w_to_mw(w):
    """Watts -> megawatts."""
    return w / MEGA


def j_to_mwh(j):
    """Joules -> megawatt-hours."""
    return j / MWH


def j_to_kwh(j):
    """Joules -> kilowatt-hours."""
    return j / KWH


def j_to_wh(j):
    """Joules -> watt-hours."""
    return j / HOUR


def us_to_s(us):
    """Microseconds -> seconds."""
    return us * MICRO


def s_to_us(s):
    """Seconds -> microseconds (the unit nccl-tests prints times in)."""
    return s / MICRO


def ns_to_s(ns):
    """Nanoseconds -> seconds."""
    return ns * NANO


def ms_to_s(ms):
    """Milliseconds -> seconds."""
    return ms * MILLI


def s_to_ms(s):
    """Seconds -> milliseconds (the unit latency targets such as TTFT and TPOT are quoted in)."""
    return s / MILLI


def s_to_days(s):
    """Seconds -> days (86,400 s)."""
    return s / DAY


def s_to_hours(s):
    """Seconds -> hours."""
    return s / HOUR


def hours_to_s(hours):
    """Hours -> seconds."""
    return hours * HOUR


def days_to_s(days):
    """Days -> seconds."""
    return days * DAY


def years_to_s(years):
    """Julian years -> seconds."""
    return years * YEAR


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KB": KB,
    "MB": MB,
    "GB": GB,
    "TB": TB,
    "K": KiB,  # nccl-tests' -b/-e flags read 'K', 'M', 'G' as binary
    "M": MiB,
    "G": GiB,
    "KIB": KiB,
    "MIB": MiB,
    "GIB": GiB,
    "TIB": TiB,
}
_BYTE_UNIT_NAMES = {u.upper(): u for u in ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Parse a data size such as ``"8B"``, ``"1GiB"``, ``"256MB"`` or ``"4G"`` into bytes.

    Parameters
    ----------
    text : str, int or float
        A number with an optional unit. Decimal units (KB, MB, GB, TB) are powers of 1000;
        binary units (KiB, MiB, GiB, TiB) and nccl-tests' bare K, M, G are powers of 1024.

    Returns
    -------
    int
        Size [bytes].

    Raises
    ------
    ValueError
        If the text is not a non-negative number with one of the units above (case aside, except that a
        unit ending in a lower-case ``b``, ``1Gb`` or ``8b``, is bits and refused), or is a fraction of a byte
        in bytes (``1.5B``: 1.5 bytes, not the billion a count's ``B`` is; larger units round to a byte).

    Examples
    --------
    >>> parse_size("8B"), parse_size("1KiB"), parse_size("1KB")
    (8, 1024, 1000)
    """
    if isinstance(text, (int, float)):
        if not 0 <= text < math.inf:  # nan and inf have no byte count
            raise ValueError(f"size must be a non-negative finite number, got {text}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if m and m.group(2).endswith("b") and m.group(2).upper() in _SIZE_UNITS:  # Gb, Mb, b: bits (IEC 80000-13)
        unit = _BYTE_UNIT_NAMES[m.group(2).upper()]
        raise ValueError(
            f"cannot read size {text!r}: a lower-case b is a bit; sizes are bytes: write {m.group(1)}{unit} for "
            f"bytes, or {float(m.group(1)) / 8:g}{unit} for {m.group(1)} {m.group(2)[:-1]}bits"
        )
    if not m or m.group(2).upper() not in _SIZE_UNITS:
        allowed = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G"
        raise ValueError(f"cannot read size {text!r}: expected a number with a unit ({allowed})")
    value = float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()]
    if not math.isfinite(value):  # 1e400B overflows a float
        raise ValueError(f"size {text!r} is not a finite number of bytes")
    if m.group(2).upper() in ("", "B") and value != int(value):
        # '1.5B' is 1.5 bytes here, where a count's B is a billion (parse_count): refused, not rounded to 2 bytes
        raise ValueError(
            f"size {text!r} is {m.group(1)} bytes, not a whole number of bytes (B is a byte here, not a billion: "
            f"write {m.group(1)}GB for {m.group(1)} billion bytes)"
        )
    return int(round(value))


# Short-scale suffixes of counts typed by people (``15T`` tokens, ``405B`` parameters, ``2.5M`` tokens/s):
# k = 1e3, M = 1e6, G or B = 1e9, T = 1e12, as the model cards write them (Llama 3 paper: "15T tokens").
_COUNT_SUFFIXES = {"": 1.0, "k": KILO, "K": KILO, "M": MEGA, "G": GIGA, "B": GIGA, "T": TERA}
# Binary multiples for counts that are powers of two in practice (Llama 3's "16M tokens" per step is
# 2,048 sequences x 8,192 = 16 x 2**20): Ki, Mi, Gi, Ti (IEC 80000-13 prefixes).
_COUNT_SUFFIXES.update({"Ki": KiB, "Mi": MiB, "Gi": GiB, "Ti": TiB})
# a sign is read so that a negative count is refused as such, not as something unreadable
_COUNT_RE = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]?i?)\s*$")
# a count as hnplan prints it, with thousands separators (16,777,216): the commas are dropped; any other comma
# (1,5 or 15,00) is left for the pattern above to refuse
_THOUSANDS_RE = re.compile(r"^\s*[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?\s*[A-Za-z]?i?\s*$")


def parse_count(text: str | int | float, integer: bool = False) -> float:
    """Parse a count typed by a person: ``"15T"``, ``"15e12"``, ``"405B"``, ``"16M"``, ``"8k"``, ``"16Mi"``.

    Parameters
    ----------
    text : str, int or float
        A non-negative number with an optional short-scale suffix: k (1e3), M (1e6), G or B (1e9),
        T (1e12); or a binary one: Ki (2**10), Mi (2**20), Gi (2**30), Ti (2**40). ``16M`` is 16,000,000
        (unlike :func:`parse_size`'s binary ``M``); ``16Mi`` is 16,777,216. Thousands separators as hnplan
        prints counts (``16,777,216``) are read.
    integer : bool
        Require a whole count (a token count per step, a GPU count) and return an int.

    Returns
    -------
    float or int
        The count.

    Raises
    ------
    ValueError
        For anything else (one line naming the accepted forms).

    Examples
    --------
    >>> parse_count("15T"), parse_count("2.5k"), parse_count("16M", integer=True), parse_count("1e9")
    (15000000000000.0, 2500.0, 16000000, 1000000000.0)
    >>> parse_count("16Mi", integer=True), parse_count("16,777,216", integer=True), parse_count("1,500.5k")
    (16777216, 16777216, 1500500.0)
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        text = str(text)
        m = _COUNT_RE.match(text.replace(",", "") if _THOUSANDS_RE.match(text) else text)
        if not m or m.group(2) not in _COUNT_SUFFIXES:
            raise ValueError(
                f"cannot read count {text!r}: expected a number with an optional k, M, G/B, T or Ki, Mi, Gi, Ti (15T, 15e12, 16Mi)"
            )
        value = float(m.group(1)) * _COUNT_SUFFIXES[m.group(2)]
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"count must be a non-negative finite number, got {text!r}")
    value = abs(value)  # -0 reads as 0
    if integer:
        if not value.is_integer():
            raise ValueError(f"count must be whole, got {text!r} = {value:g}")
        return int(value)
    return value


def format_size(nbytes: float) -> str:
    """Format a size in bytes with a binary prefix, e.g. ``format_size(2**30) == '1 GiB'``.

    >>> format_size(1536)
    '1.5 KiB'
    """
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:.0f} B"


# Bytes per element of the numeric formats the catalogs and planners name.
DTYPE_BYTES = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a numeric format (``bf16`` -> 2.0).

    Raises
    ------
    ValueError
        For an unknown format; the message lists the known ones.
    """
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPE_BYTES)}") from None


# --- quantities for people that need a conversion (the rest: hnplan.formatting) ---------
def format_energy(joules, digits: int = 3) -> str:
    """Energy for people in watt-hours: ``format_energy(3.6e12) == '1 GWh'``."""
    return format_si(j_to_wh(joules) if _finite(joules) else joules, "Wh", digits)


def format_quantity(value, unit: str = "", digits: int = 3) -> str:
    """A value in the unit a table names, written for people: USD as money, W and J with SI prefixes
    (J as Wh), ``tokens``/``GPUs``/``FLOP`` and unitless counts in the short scale, anything else with
    ``digits`` significant digits and the unit.

    >>> format_quantity(63947789.96, "USD"), format_quantity(9.3e6, "W"), format_quantity(1.5e13, "tokens")
    ('$63.9M', '9.3 MW', '15T tokens')
    >>> format_quantity(0.35, "USD/kWh"), format_quantity(9.3e6, "USD/MW"), format_quantity(1.25, "ratio")
    ('$0.35/kWh', '$9.3M/MW', '1.25 ratio')
    >>> format_quantity(0.02, "fraction per year"), format_quantity(0.7, "fraction")
    ('2% per year', '70%')
    """
    if not _finite(value):
        return "n/a"
    u = (unit or "").strip()
    if u.startswith("USD/"):  # a price per something: money, then the unit
        v = float(value)
        return f"{format_usd(v, digits) if abs(v) >= 1 else '$' + _sig(v, digits)}/{u[4:]}"
    if u == "fraction" or u.startswith("fraction "):  # a share: per cent
        return f"{_sig(float(value) * 100, digits)}%{u[len('fraction') :]}"
    if u in ("USD", "$"):
        return format_usd(value, digits)
    if u == "W":
        return format_power(value, digits)
    if u == "J":
        return format_energy(value, digits)
    if u in ("", "tokens", "GPUs", "FLOP", "parameters", "requests"):
        text = format_count(value, digits)
        return f"{text} {u}" if u else text
    v = float(value)
    text = f"{v:,.0f}" if abs(v) >= 10**digits else _sig(v, digits)
    return f"{text} {u}"
