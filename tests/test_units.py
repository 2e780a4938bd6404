"""Unit conversions: the traps of the field, by hand."""

import pytest

from hnplan import units


def test_nic_gigabits_are_not_gigabytes():
    # a 400 Gb/s NDR NIC carries 50 GB/s per direction, not 400 GB/s (the 8x trap)
    assert units.gbps_to_Bps(400) == 50e9
    assert units.Bps_to_gbps(50e9) == 400


def test_gb_and_gib_differ_by_7_percent():
    assert units.GB_to_bytes(80) == 80e9
    assert units.to_GiB(80e9) == pytest.approx(74.5058, rel=1e-5)
    assert units.GiB_to_bytes(1) / units.GB_to_bytes(1) == pytest.approx(1.073741824)


def test_rates_and_time():
    assert units.tflops_to_flops_per_s(989.4) == pytest.approx(989.4e12)
    assert units.TBps_to_Bps(3.35) == pytest.approx(3.35e12)
    assert units.s_to_days(86400 * 3) == 3
    assert units.j_to_mwh(3.6e9) == 1
    assert units.us_to_s(5) == pytest.approx(5e-6)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("8B", 8),
        ("1KiB", 1024),
        ("1KB", 1000),
        ("4G", 4 * 2**30),
        ("1GiB", 2**30),
        ("256MB", 256e6),
        ("1.5MiB", 1.5 * 2**20),
        ("1gB", 1e9),  # the unit's case aside, only a lower-case b (a bit) is refused
        ("1kB", 1000),
        (42, 42),
    ],
)
def test_parse_size(text, expected):
    assert units.parse_size(text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "GB",
        "1 parsec",
        "-5B",
        -1,
        "1e400B",
        "1e400",
        float("inf"),
        float("nan"),
        "1Gb",
        "8b",
        "1gib",
        "256mb",
        "1.5B",
        "0.3",
    ],
)
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        units.parse_size(bad)


def test_dtype_bytes():
    assert units.dtype_bytes("bf16") == 2 and units.dtype_bytes("fp4") == 0.5
    with pytest.raises(ValueError, match="allowed: fp32"):
        units.dtype_bytes("fp12")


def test_new_conversions():
    assert units.hours_to_s(2) == 7200 and units.s_to_ms(0.25) == 250
    assert units.to_TB(5.7e12) == pytest.approx(5.7) and units.to_MiB(2**20) == 1


# Scales that turn one unit into another (s<->h/day, B<->GB/TB, s<->ms/us, 2**k binary prefixes); tolerances
# such as 1e-9 are not conversions and are not listed.
_CONVERSION_SCALES = {60, 3600, 86400, 1e3, 1e6, 1e9, 1e12, 1e15, 1e-6, 1024}


def _bare_conversions(tree):
    import ast

    def scale(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value in _CONVERSION_SCALES
        return (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and isinstance(node.left, ast.Constant)
            and node.left.value in (2, 2.0)
            and isinstance(node.right, ast.Constant)
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            if scale(node.left) or scale(node.right):
                yield node.lineno, ast.unparse(node)


def test_conversions_live_only_in_units():
    """Every multiplication or division by a unit scale outside hnplan/units.py goes through hnplan.units
    (docstring examples are strings and are not scanned)."""
    import ast
    from pathlib import Path

    root = Path(units.__file__).parent
    found = [
        f"{path.relative_to(root.parent)}:{line}: {text}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "units.py"
        for line, text in _bare_conversions(ast.parse(path.read_text()))
    ]
    assert not found, "bare unit conversions (use hnplan.units):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("15T", 15e12),
        ("15e12", 15e12),
        ("405B", 405e9),
        ("1.5G", 1.5e9),
        ("16M", 16e6),
        ("8k", 8e3),
        ("8K", 8e3),
        ("16Mi", 16 * 2**20),  # Llama 3's 16M tokens per step: 2,048 x 8,192
        ("4Ki", 4096),
        (42, 42),
    ],
)
def test_parse_count_short_scale(text, expected):
    # counts are decimal, as the model cards write them (Llama 3: "15T tokens"), unlike nccl-tests' binary M
    assert units.parse_count(text) == expected


@pytest.mark.parametrize("bad", ["", "T", "15 tokens", "15m", "-1T", "1.5x", "1Bi", "1ki", float("nan")])
def test_parse_count_rejects(bad):
    with pytest.raises(ValueError):
        units.parse_count(bad)


def test_parse_count_negative_says_so():
    # a negative count is refused as negative, not as unreadable text (--seq-len -3 on the command line)
    with pytest.raises(ValueError, match="non-negative"):
        units.parse_count("-3")
    with pytest.raises(ValueError, match="non-negative"):
        units.parse_count("-1.5k")
    assert units.parse_count("-0", integer=True) == 0
    assert units.parse_count("+2k", integer=True) == 2000


def test_parse_count_integer():
    assert units.parse_count("16M", integer=True) == 16_000_000
    with pytest.raises(ValueError, match="whole"):
        units.parse_count("1.5", integer=True)


def test_parse_size_names_bits_and_the_bytes_they_make():
    with pytest.raises(
        ValueError, match=r"'1Gb': a lower-case b is a bit; .* write 1GB for bytes, or 0.125GB for 1 Gbits"
    ):
        units.parse_size("1Gb")
