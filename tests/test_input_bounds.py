"""Bad input gets one clear line: lower bounds of the catalog's rates, bandwidths, capacities and peaks
(a unit slip or a typo such as ``nic_gbps: 1e-300``), GEMM shapes past what one kernel takes, training
token counts past any corpus, and economic inputs past meaning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.catalog.schemas import WHATIF_RANGES, whatif_range_problem
from hnplan.catalog.yaml_io import parse_entry
from hnplan.cli import app
from hnplan.errors import CatalogError, InputError
from hnplan.planning.kernels import MAX_GEMM_DIM, gemm_kernels, parse_shape, parse_shapes_json

from clitext import one_line

runner = CliRunner()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _raw(cat, kind: str, ref: str) -> dict:
    return yaml.safe_load(Path(cat.path_of(kind, ref)).read_text())


# -- catalog floors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind,ref,change,needle",
    [
        # the case: a NIC of 1e-300 Gb/s planned every step at 0 tokens/s
        (
            "systems",
            "hgx-h100-ib-ndr",
            {"nic_gbps": 1e-300},
            "field 'nic_gbps': Input should be greater than or equal to 1 [Gb/s]",
        ),
        ("systems", "hgx-h100-ib-ndr", {"nic_gbps": 0.4}, "field 'nic_gbps'"),  # 400 Gb/s typed in Tb/s
        ("systems", "hgx-h100-ib-ndr", {"scaleup_bw_GBps_per_dir": 0.45}, "field 'scaleup_bw_GBps_per_dir'"),
        (
            "systems",
            "hgx-h100-ib-ndr",
            {"unit_power_kw": 0.0102},
            "field 'unit_power_kw': Input should be greater than or equal to 0.1 [kW",
        ),
        # a rack's power on a server, ten racks' on one: per GPU outside 0.1-5 kW
        ("systems", "hgx-h100-ib-ndr", {"unit_power_kw": 102}, "field 'unit_power_kw': 102 kW for a unit of 8"),
        ("systems", "gb200-nvl72", {"unit_power_kw": 1320}, "is 18.33 kW a GPU, outside 0.1-5 kW"),
        ("systems", "hgx-h100-ib-ndr", {"host_link_GBps_per_gpu": 1e-9}, "field 'host_link_GBps_per_gpu'"),
        ("systems", "hgx-h100-ib-ndr", {"storage_write_GBps_per_node": 1e-9}, "field 'storage_write_GBps_per_node'"),
        (
            "accelerators",
            "h100-sxm",
            {"hbm_bw_TBps": 1e-6},
            "field 'hbm_bw_TBps': Input should be greater than or equal to 0.01 [TB/s",
        ),
        (
            "accelerators",
            "h100-sxm",
            {"hbm_gb": 0.08},
            "field 'hbm_gb': Input should be greater than or equal to 1 [GB",
        ),
        ("accelerators", "h100-sxm", {"tdp_w": 0.7}, "field 'tdp_w': Input should be greater than or equal to 10 [W]"),
        ("accelerators", "h100-sxm", {"idle_w": 900}, "idle_w (900 W) must be below tdp_w (700 W)"),
        ("switches", "qm9700", {"port_gbps": 1e-3}, "field 'port_gbps'"),
        ("storage", "ddn-ai400x2", {"read_GBps_per_unit": 1e-9}, "field 'read_GBps_per_unit'"),
    ],
)
def test_catalog_rates_below_their_floor_are_refused_naming_the_field(cat, tmp_path, kind, ref, change, needle):
    raw = _raw(cat, kind, ref)
    raw.update(change)
    p = tmp_path / f"{ref}.yaml"
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["catalog", "validate", str(p), "--kind", kind])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert needle in one_line(res.output), res.output
    assert len(res.output.strip().splitlines()) == 1


def test_peak_below_one_tflops_is_refused(cat, tmp_path):
    raw = _raw(cat, "accelerators", "h100-sxm")
    raw["dense_tflops"]["bf16"] = 0.989  # 989 TFLOP/s typed in PFLOP/s
    with pytest.raises(CatalogError, match=r"field 'dense_tflops.bf16': Input should be greater than or equal to 1 "):
        parse_entry(raw, type(cat.accelerator("h100-sxm")), tmp_path / "h100-sxm.yaml")


@pytest.mark.parametrize("acc_id", ["h100-sxm", "a100-sxm-80gb", "gb200", "mi300x"])
def test_memory_bandwidth_typed_in_gb_per_s_is_refused(cat, tmp_path, acc_id):
    """3,350 for the H100's 3.35 TB/s passed every bound (the field takes up to 1e5 TB/s, for wafer-scale SRAM)
    and planned memory-bound kernels 1,000x fast: Llama 3.1 70B on 64 H100 ran 5.5 % faster (13.59 s against
    14.36 s a step). A chip's bf16 peak is at least one FLOP per byte of its memory bandwidth (HBM GPUs
    150-310, Groq's SRAM chip 2.4), and 1,000x the TB/s figure leaves 0.15-0.31."""
    raw = _raw(cat, "accelerators", acc_id)
    assert raw["dense_tflops"]["bf16"] / raw["hbm_bw_TBps"] > 150  # as shipped
    raw["hbm_bw_TBps"] *= 1000
    p = tmp_path / f"{acc_id}.yaml"
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["catalog", "validate", str(p)])
    out = one_line(res.output)
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, out
    assert f"field 'hbm_bw_TBps': {raw['hbm_bw_TBps']:,.4g} TB/s is more bytes per second than the" in out, out
    assert "hbm_bw_TBps is terabytes per second (1e12 bytes/s)" in out


def test_every_shipped_accelerator_has_at_least_a_flop_per_memory_byte(cat):
    from hnplan.catalog.schemas.plausibility import MIN_FLOP_PER_MEMORY_BYTE

    for acc in cat.entries("accelerators"):
        assert acc.dense_tflops["bf16"] / acc.hbm_bw_TBps >= 100 * MIN_FLOP_PER_MEMORY_BYTE, acc.id


def test_every_shipped_rate_is_far_above_its_floor(cat):
    """The floors are unit-slip guards, not estimates: every shipped figure is at least 5 times its floor
    (the closest: 4 KiB IOPS against the 0.5 KiB floor, 8 times)."""
    for kind in ("accelerators", "systems", "switches", "storage"):
        for entry in cat.entries(kind):
            for name, info in type(entry).model_fields.items():
                value = getattr(entry, name)
                floors = [m.ge for m in info.metadata if getattr(m, "ge", None)]
                if (
                    isinstance(value, (int, float))
                    and floors
                    and floors[0] > 0
                    and name not in ("scaleout_oversubscription",)
                ):
                    assert value >= 5 * floors[0], (kind, entry.id, name, value, floors[0])


@pytest.mark.parametrize(
    "where,change,needle",
    [
        ("facility.yaml", ("pue_air", 0.5), "field 'pue_air': value must be >= 1; got 0.5"),
        ("facility.yaml", ("amortisation_years", 1e6), "field 'amortisation_years': value must be <= 15"),
        (
            "reliability.yaml",
            ("storage_write_GBps_per_node", 1e-300),
            "field 'storage_write_GBps_per_node': value must be >= 0.001",
        ),
    ],
)
def test_facility_and_reliability_values_in_range(cat, tmp_path, where, change, needle):
    raw = yaml.safe_load((cat.root / where).read_text())
    field, value = change
    raw[field]["value"] = value
    p = tmp_path / where
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["catalog", "validate", str(p)])
    assert res.exit_code == 2 and needle in one_line(res.output), res.output


def test_negative_failure_rate_refused(cat, tmp_path):
    raw = yaml.safe_load((cat.root / "reliability.yaml").read_text())
    comp = next(iter(raw["rates"]))
    raw["rates"][comp]["value"] = -1e-5
    p = tmp_path / "reliability.yaml"
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["catalog", "validate", str(p)])
    assert res.exit_code == 2 and f"{comp}: a rate per component-hour must be >= 0 and < 1" in one_line(res.output)


# -- GEMM shapes ---------------------------------------------------------------------------------------
def test_gemm_dimension_past_a_32_bit_int_is_refused_naming_the_flag():
    assert parse_shape(f"{MAX_GEMM_DIM}x1x1") == (MAX_GEMM_DIM, 1, 1)
    with pytest.raises(InputError, match=r"^--shape '100000000000000000000x10x10': M = 100,000,"):
        parse_shape("100000000000000000000x10x10")
    with pytest.raises(InputError, match=r"^--shapes-json: item 1: K = 2,147,483,648 is above 2,147,483,647"):
        parse_shapes_json(json.dumps([["bf16", 8, 8, 8], ["bf16", 8, 8, 2**31]]))


def test_gemm_shape_dimensions_read_as_counts():
    """A tryout typed ``--shape 4Kix4096x4096`` (as --seq-len takes 4Ki) and was refused: each dimension is a
    whole count as the other flags read them (Ki = 2**10, k = 1e3); fractions, zeros and two dimensions are not."""
    assert parse_shape("4Kix4096x4096") == (4096, 4096, 4096)
    assert parse_shape(" 8k X 2Mi x 1,024 ") == (8000, 2 * 2**20, 1024)
    for bad in ("4.5x3x3", "0x3x3", "1x2", "-1x2x3", "1x2x3x4", "axbxc"):
        with pytest.raises(InputError, match=rf"^--shape '{re.escape(bad)}': expected MxNxK with three positive whole"):
            parse_shape(bad)


def test_gemm_whose_operands_exceed_the_memory_is_refused():
    # 300000 x 300000 x 10 in bf16: A and B (300000 x 10 each) 12 MB, C (300000 x 300000, bf16) 180 GB,
    # more than the 79.11 GiB = 84.9 GB an H100 shows to programs
    with pytest.raises(InputError, match=r"operands take 180 GB, more than the 84.94 GB of one h100-sxm"):
        gemm_kernels("h100-sxm", [("bf16", 300_000, 300_000, 10)])
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shape", "300000x300000x10"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "check --shape / --shapes-json" in one_line(res.stderr)
    # the largest square bf16 GEMM that fits (3 x 2 x 118,000**2 = 83.5 GB) is still timed
    ok = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shape", "118000x118000x118000", "--json"])
    assert ok.exit_code == 0, ok.output


# -- training tokens -----------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens", ["1e40", "1e300", "2e18"])
def test_size_tokens_past_any_corpus_refused(tokens):
    args = ["size", "--model", "llama3.1-8b", "--tokens", tokens, "--system", "hgx-h100-ib-ndr", "--gpus", "64"]
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"'--tokens': must be at most 1e+18 (3,000 times all public human text); got {tokens}" in one_line(
        res.output
    )


# -- economic inputs -----------------------------------------------------------------------------------
def test_every_whatif_input_has_an_upper_bound():
    assert all(high is not None for _, _, high in WHATIF_RANGES.values())


@pytest.mark.parametrize(
    "name,value,needle",
    [
        ("hardware_price_factor", 1e6, "hardware_price_factor must be <= 10; got 1e+06"),
        ("rate_factor", 1e3, "rate_factor must be <= 100; got 1000"),
        ("write_GBps_per_node", 1e-300, "write_GBps_per_node must be >= 0.001; got 1e-300"),
        ("dc_build_usd_per_mw", 1e12, "dc_build_usd_per_mw must be <= 1e+08; got 1e+12"),
    ],
)
def test_whatif_inputs_past_meaning(name, value, needle):
    assert whatif_range_problem(name, value) == needle
