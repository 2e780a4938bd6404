"""PyTorch's SM90 grouped GEMM (torch._grouped_mm) under the GEMM law: the kernel read from GroupMM.cu, one
fitted overlap exponent, and the H200 expert-GEMM rows it is checked on (data/reference/h200_kernels.csv)."""

import numpy as np
import pytest

from hnplan.catalog import load_catalog
from hnplan.compute.grouped_gemm import grouped_mm_rows, grouped_mm_tile, grouped_mm_time_s
from hnplan.validation.grouped_mm import fit_grouped_overlap, grouped_mm_errors


@pytest.fixture(scope="module")
def h200():
    return load_catalog().accelerator("h200-sxm")


def test_tile_dispatch_follows_groupmm():
    # GroupMM.cu dispatch_bf16_grouped_kernel_on_tile_size, SM90: small = M <= 128 or N <= 128
    assert grouped_mm_tile(128, 4096) == ((64, 128, 128), False)  # ping-pong
    assert grouped_mm_tile(4096, 128) == ((64, 128, 128), False)
    assert grouped_mm_tile(129, 129) == ((128, 256, 64), True)  # cooperative


def test_rows_padded_to_tile_and_cluster():
    # 32 tokens: one 64-row block, rounded up to the 2 x 1 cluster: 128 rows; 130 tokens: 3 blocks -> 4
    assert grouped_mm_rows(32, 64) == 128.0
    assert grouped_mm_rows(130, 64) == 256.0
    assert grouped_mm_rows(2048, 128) == 2048.0
    assert np.array_equal(grouped_mm_rows(np.array([1.0, 65.0]), 64), [128.0, 128.0])


def test_dsv3_up_8x32_hand_derived(h200):
    # 8 groups of 32 x 4096 x 7168: 64x128x128 tiles, 128 rows a group (cluster) -> 8 x 2 x 32 = 512 tiles,
    # 512 / 132 SMs = 3.88 -> 4 whole waves, no split-K
    t_c = 4 * 2 * 64 * 128 * (7168 + 40.4) / (989.4e12 * 0.737 / 132)  # 85.5 us
    nbytes = 8 * (32 * 7168 + 7168 * 4096) * 2 + 2 * 8 * 32 * 4096  # real rows only
    t_m = nbytes / (4.8e12 * 0.891)  # 111.2 us
    p = 1.76
    expected = (t_c**p + t_m**p) ** (1 / p) + 2 * 2.85e-6  # ping-pong: output hidden; GEMM + preparation kernel
    assert t_c == pytest.approx(85.52e-6, rel=1e-3) and t_m == pytest.approx(111.19e-6, rel=1e-3)
    assert grouped_mm_time_s(h200, "bf16", 8, 32, 4096, 7168) == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(152.5e-6, rel=2e-3)  # measured 160.5 us (-5 %); the bf16 law alone: 114 us


def test_cooperative_output_exposed(h200):
    # 8 x 2048 x 7168 x 2048 (down): 128x256x64 tiles, 8 x 16 x 28 = 3584 tiles = 27.15 -> 28 waves; the output
    # (2 x 8 x 2048 x 7168 bytes) is written after each tile's K loop
    t_c = 28 * 2 * 128 * 256 * (2048 + 40.4) / (989.4e12 * 0.737 / 132)
    out = 2.0 * 8 * 2048 * 7168
    nbytes = 8 * (2048 * 2048 + 2048 * 7168) * 2 + out
    bw = 4.8e12 * 0.891
    p = 1.76
    expected = (t_c**p + (nbytes - out) ** p / bw**p) ** (1 / p) + out / bw + 2 * 2.85e-6
    assert grouped_mm_time_s(h200, "bf16", 8, 2048, 7168, 2048) == pytest.approx(expected, rel=1e-9)


def test_eager_floor(h200):
    assert grouped_mm_time_s(h200, "bf16", 1, 1, 128, 128, eager=True) == pytest.approx(13.1e-6)


def test_fit_reproduces_catalog_and_mixtral_is_predicted(h200):
    p = fit_grouped_overlap()
    assert p == pytest.approx(h200.grouped_gemm_overlap_exponent, abs=0.01)
    e = grouped_mm_errors()
    ds, mx = e[e["model"] == "deepseek-v3"]["error"], e[e["model"] == "mixtral-8x7b"]["error"]
    assert len(ds) == 20 and len(mx) == 10
    # fitted rows: rms 8.0 %; predicted Mixtral rows: mean +0.2 %, rms 8.4 %, -11..+15 %
    assert np.sqrt((ds**2).mean()) < 0.085
    assert abs(mx.mean()) < 0.01 and np.sqrt((mx**2).mean()) < 0.09
    assert mx.min() > -0.12 and mx.max() < 0.15
    # the law as cuBLAS runs it put the 32-token rows at -25..-40 %; the kernel's own model at -19..-1 %
    small = e[e["m_tokens"] == 32]["error"]
    assert small.min() > -0.19 and small.max() < 0.0


def test_without_family_exponent_keeps_the_law(h200):
    bare = h200.model_copy(update={"grouped_gemm_overlap_exponent": None})
    fitted = grouped_mm_time_s(h200, "bf16", 8, 32, 4096, 7168)
    assert grouped_mm_time_s(bare, "bf16", 8, 32, 4096, 7168) < fitted  # p = 3.43: sharper overlap, faster
