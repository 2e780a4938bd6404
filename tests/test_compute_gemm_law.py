"""The GEMM efficiency law: the catalog holds what the fit gives, the fit meets its target on the H200 sweep,
carried values follow their stated rules, the law is monotone in the shape, and ``hnplan gemm`` answers."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.compute.gemm import gemm_roofline, gemm_time_s
from hnplan.validation.gemm_fit import fit_gemm_law

runner = CliRunner()


@pytest.fixture(scope="module")
def fit():
    return fit_gemm_law()


def test_the_catalog_holds_the_fit(cat, fit):
    h200, p = cat.accelerator("h200-sxm"), fit["params"]
    assert h200.gemm_efficiency["bf16"] == pytest.approx(p["gemm_efficiency"], abs=0.002)
    assert h200.gemm_k_overhead == pytest.approx(p["gemm_k_overhead"], abs=0.5)
    assert h200.kernel_overhead_us == pytest.approx(p["kernel_overhead_us"], abs=0.02)
    assert h200.gemm_overlap_exponent == pytest.approx(p["gemm_overlap_exponent"], abs=0.02)
    assert h200.host_dispatch_us == pytest.approx(p["host_dispatch_us"], abs=0.05)
    assert h200.gemm_splitk_us == pytest.approx(p["gemm_splitk_us"], abs=0.02)
    assert h200.gemm_wave_weight == pytest.approx(p["gemm_wave_weight"], abs=0.01)
    # the HBM fraction is not fitted: it is the measured copy, 4,278 of 4,800 GB/s
    assert h200.hbm_efficiency == pytest.approx(4278 / 4800, abs=0.001)


def test_the_fit_meets_its_target_on_the_bf16_sweep(fit):
    # issue 13: time MAPE <= 8 % over the 193 GEMMs; today's model (before the law) missed by 18 % on average
    assert len(fit["table"]) == 193
    assert fit["mape"] <= 0.06
    assert all(v <= 0.08 for v in fit["bands"].values()), fit["bands"]
    assert abs(fit["worst"]["error"]) < 0.35


def test_carried_values_follow_their_rules(cat):
    h200 = cat.accelerator("h200-sxm")
    ratio = h200.gemm_efficiency["bf16"] / h200.matmul_efficiency["bf16"]  # typical / best large shape, 0.918
    fields = (
        "gemm_tile_mnk",
        "gemm_k_overhead",
        "gemm_overlap_exponent",
        "gemm_row_granularity",
        "gemm_splitk_min_k",
        "gemm_splitk_us",
        "gemm_wave_weight",
        "kernel_overhead_us",
        "host_dispatch_us",
    )
    for aid in ("h100-sxm", "h800-sxm", "h200-sxm", "b200", "gb200", "a100-sxm-80gb"):
        a = cat.accelerator(aid)
        # Blackwell's shape parameters are its own, fitted to the OpenXLA sm_100 sweep (test_compute_gemm_blackwell)
        for f in (
            fields
            if aid not in ("b200", "gb200")
            else ("gemm_row_granularity", "gemm_splitk_min_k", "host_dispatch_us")
        ):
            if (aid, f) == ("gb200", "host_dispatch_us"):  # the superchip's host is Grace: the x86 floor x 2.75
                grace = cat.system("gb200-nvl72").host_dispatch_factor
                assert a.host_dispatch_us == pytest.approx(h200.host_dispatch_us * grace, abs=0.05)
                continue
            assert getattr(a, f) == getattr(h200, f), (aid, f)
        for dt, eff in a.gemm_efficiency.items():
            if dt == "fp4":  # measured at one large shape, not a search maximum: test_fp4_ceiling_reproduces_vllm
                continue
            if aid in ("h100-sxm", "h800-sxm", "h200-sxm"):  # same die: bf16 as fitted, fp8 by the chip's MAMF ratio
                want = h200.gemm_efficiency["bf16"] * a.matmul_efficiency[dt] / a.matmul_efficiency["bf16"]
            else:  # other families: the chip's MAMF x the typical / best ratio of the H200
                want = a.matmul_efficiency[dt] * ratio
            assert eff == pytest.approx(want, abs=0.0015), (aid, dt)


def test_fp4_ceiling_reproduces_vllm(cat):
    # vllm-project/vllm PR 20646: NVFP4 CUTLASS GEMM (pre-quantised activations) at M = 16,384, N = 6,144,
    # K = 4,096 on B200: 3,904.3 TFLOP/s; the law's fp4 ceiling is the one that reproduces it
    from hnplan.compute.gemm import gemm_flops_per_s

    b200 = cat.accelerator("b200")
    assert float(gemm_flops_per_s(b200, "fp4", 16384, 6144, 4096)) / 1e12 == pytest.approx(3904.3, rel=0.01)
    assert (
        b200.gemm_efficiency["fp4"] == b200.matmul_efficiency["fp4"] == cat.accelerator("gb200").gemm_efficiency["fp4"]
    )


def test_fp8_on_hopper_is_not_twice_bf16(cat):
    # published large-shape FP8 / bf16 GEMM rates on H100 are 1.6-1.8x at 700 W (MAMF 1402.6 / 794.5 = 1.77)
    h100 = cat.accelerator("h100-sxm")
    for m, n, k in ((8192, 8192, 8192), (16384, 8192, 28672), (65536, 8192, 7168)):
        r = gemm_time_s(h100, "bf16", m, n, k) / gemm_time_s(h100, "fp8", m, n, k)
        assert 1.6 < r < 1.85
    # at one token the weights stream from HBM: fp8 halves the bytes, the launch does not shrink
    small = gemm_time_s(h100, "bf16", 1, 8192, 8192) / gemm_time_s(h100, "fp8", 1, 8192, 8192)
    assert 1.5 < small < 2.0


def test_small_m_streams_the_weights(cat):
    # Llama 3.1 70B gate_up at one token on the H200: 57344 x 8192 bf16 weights = 939.5 MB over 4.278 TB/s
    # = 219.6 us plus the launch (2.85 us) and the split-K reduction; measured 222.3 us
    h200 = cat.accelerator("h200-sxm")
    t = gemm_time_s(h200, "bf16", 1, 57344, 8192)
    assert t == pytest.approx(57344 * 8192 * 2 / 4.278e12 + 2.85e-6, rel=0.02)
    assert t == pytest.approx(222.26e-6, rel=0.03)
    # eager: tiny GEMMs sit at the host floor (13.1 us), as measured (12.4-13.3 us for shallow K)
    assert gemm_time_s(h200, "bf16", 1, 4096, 512, eager=True) == pytest.approx(13.1e-6, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 60000), k=st.integers(1, 60000), dm=st.integers(1, 4000))
def test_time_never_falls_when_the_shape_grows(cat, m, n, k, dm):
    # except by the split-K reduction: a shape with enough tiles to fill the SMs stops splitting K and stops
    # paying it (as measured: Llama 3.1 8B TP8 qkv takes 15.8 us at 128 tokens and 12.3 us at 512)
    acc = cat.accelerator("h100-sxm")
    t = gemm_time_s(acc, "bf16", m, n, k)
    for shape in ((m + dm, n, k), (m, n + dm, k), (m, n, k + dm)):
        assert gemm_time_s(acc, "bf16", *shape) >= t * (1 - 1e-9) - acc.gemm_splitk_us * 1e-6


def test_a_tiny_gemm_is_launch_bound(cat):
    # H100, eager: 1 x 1 x 1 does 2 FLOP and moves 6 bytes; its 13.1 us are the host floor, not compute
    h100 = cat.accelerator("h100-sxm")
    tiny = gemm_roofline(h100, "bf16", 1, 1, 1, eager=True)
    assert tiny["bound"] == "launch" and tiny["time_s"] == pytest.approx(13.1e-6)
    # on the device alone the 2.85 us launch still dwarfs the work
    assert gemm_roofline(h100, "bf16", 64, 128, 128)["bound"] == "launch"
    # a decode GEMV streams 128 MiB of weights (about 40 us): memory, not launch
    assert gemm_roofline(h100, "bf16", 1, 8192, 8192)["bound"] == "memory"


def test_gemm_cli_json_and_bad_input(cat):
    r = runner.invoke(
        app,
        [
            "gemm",
            "--accelerator",
            "h200-sxm",
            "--shape",
            "1x6144x4096",
            "--shapes-json",
            '[["fp8", 8192, 8192, 8192]]',
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    ans = json.loads(r.output)
    assert ans["accelerator"] == "h200-sxm" and ans["launch"] == "eager"
    a, b = ans["results"]
    assert a["bound"] == "memory" and b["bound"] == "compute" and b["dtype"] == "fp8"
    assert a["time_s"] == pytest.approx(gemm_time_s(cat.accelerator("h200-sxm"), "bf16", 1, 6144, 4096, eager=True))
    assert b["tflops"] == pytest.approx(2 * 8192**3 / b["time_s"] / 1e12)
    for bad in (
        ["--shape", "8x1"],
        ["--shapes-json", "{"],
        ["--shapes-json", '[["bf16", 0, 1, 1]]'],
        ["--dtype", "fp8", "--shape", "1x1x1", "--accelerator", "a100-sxm-80gb"],
        [],
        ["--shape", "1x1x1", "--launch", "never"],
    ):
        args = ["gemm", "--accelerator", "h100-sxm", *bad] if "--accelerator" not in bad else ["gemm", *bad]
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (bad, r.output)
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_gemm_cli_shapes_json_from_a_file(tmp_path):
    # a file path was parsed as JSON text: "not valid JSON (Expecting value at character 0)"
    path = tmp_path / "shapes.json"
    path.write_text('[["bf16", 4096, 4096, 4096]]')
    args = ["gemm", "--accelerator", "h100-sxm", "--json", "--shapes-json"]
    from_file = runner.invoke(app, [*args, str(path)])
    inline = runner.invoke(app, [*args, path.read_text()])
    assert from_file.exit_code == 0 and json.loads(from_file.output) == json.loads(inline.output)
    for bad, needle in (
        (tmp_path / "missing.json", "missing.json: No such file"),
        (tmp_path, "Is a directory"),
        (path.with_suffix(".bad"), "not valid JSON"),
    ):
        if bad.suffix == ".bad":
            bad.write_text("[1,")
        r = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shapes-json", str(bad)])
        assert r.exit_code == 2 and needle in r.stderr and str(bad) in r.stderr and "Traceback" not in r.output


def test_validation_rows_cover_every_measured_kernel(cat):
    from hnplan.validation.compute import gemm_rows, kernel_rows

    g, k = gemm_rows(cat), kernel_rows(cat)
    assert sum(r.role == "calibration" for r in g) == 193
    assert len(k) == len(cat.reference("h200_kernels"))  # every measured kernel is a row
    err = np.array([abs(r.error) for r in g if r.role == "calibration"])
    assert err.mean() <= 0.06


def test_the_catalog_holds_the_attention_fit_and_the_kernel_bandwidths(cat):
    from hnplan.validation.gemm_fit import fit_attention_law, memory_kernel_calibration

    h200 = cat.accelerator("h200-sxm")
    fit = fit_attention_law(cat)
    p = fit["params"]
    assert h200.attention_efficiency["fwd"] == pytest.approx(p["attention_efficiency.fwd"], abs=0.002)
    assert h200.attention_efficiency["bwd"] == pytest.approx(p["attention_efficiency.bwd"], abs=0.002)
    assert h200.attention_kv_overhead == pytest.approx(p["attention_kv_overhead"], abs=1.0)
    assert h200.attention_tail_weight == pytest.approx(p["attention_tail_weight"], abs=0.002)
    for pas in ("fwd", "bwd"):
        assert h200.attention_exp_overlap_exponent[pas] == pytest.approx(
            p[f"attention_exp_overlap_exponent.{pas}"], abs=0.01
        )
        assert h200.softmax_fp32_ops_per_score[pas] == pytest.approx(p[f"softmax_fp32_ops_per_score.{pas}"], abs=0.05)
    # head dimensions 64 and 128 fitted together; 405B and gpt-oss at TP 8 and a second 8B measurement not fitted
    assert fit["mape_fitted"] < 0.05 and fit["mape_predicted"] < 0.06
    tab = fit["table"]
    assert set(tab.loc[tab["fitted"], "d"]) == {64, 128}
    for cls, v in memory_kernel_calibration(cat).items():
        assert h200.memory_kernel_efficiency[cls] == pytest.approx(v, abs=0.001), cls
    for aid in ("h100-sxm", "h800-sxm"):  # carried to the Hopper family
        a = cat.accelerator(aid)
        assert a.memory_kernel_efficiency == h200.memory_kernel_efficiency
        assert a.attention_efficiency == h200.attention_efficiency
        assert a.softmax_fp32_ops_per_score == h200.softmax_fp32_ops_per_score


def test_an_exposed_output_write_needs_its_provenance(cat):
    # gemm_output_exposed is a modelling choice about the kernel (1: DeepGEMM's persistent FP8 kernel waits for
    # its TMA store after each tile's K loop), so a catalog entry that sets it names where it comes from
    from hnplan.catalog.schemas import Accelerator

    raw = cat.accelerator("h800-sxm").model_dump()
    with pytest.raises(ValueError, match="calibration field 'gemm_output_exposed' needs its own provenance"):
        Accelerator.model_validate({**raw, "gemm_output_exposed": 1.0})
    why = "deepseek-ai/DeepGEMM deep_gemm/include/deep_gemm/fp8_gemm.cuh @ 55ab91f: TMA store after the K loop"
    sourced = {**raw, "gemm_output_exposed": 1.0, "field_sources": {**raw["field_sources"], "gemm_output_exposed": why}}
    assert Accelerator.model_validate(sourced).gemm_output_exposed == 1.0
