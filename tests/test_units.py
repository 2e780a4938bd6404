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
        (42, 42),
    ],
)
def test_parse_size(text, expected):
    assert units.parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "GB", "1 parsec", "-5B", -1])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        units.parse_size(bad)


def test_dtype_bytes():
    assert units.dtype_bytes("bf16") == 2 and units.dtype_bytes("fp4") == 0.5
    with pytest.raises(ValueError, match="allowed: fp32"):
        units.dtype_bytes("fp12")
