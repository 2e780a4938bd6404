"""Blackwell Ultra in the catalog: the B300 / GB300 accelerators, the DGX B300 and GB300 NVL72 systems.

Golden values are the datasheet figures worked by hand (NVIDIA quotes tf32/bf16/fp8 per baseboard or rack with
2:4 sparsity, FP4 dense and sparse), and the commands a procurement comparison runs must work on the new designs.
"""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.compute.kernels import attention_time_s

runner = CliRunner()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_b300_dense_peaks_from_the_hgx_b300_table(cat):
    a = cat.accelerator("b300")
    # HGX B300, 8 GPUs: FP16/BF16 36 PFLOPS, FP8 72, TF32 18 (all with sparsity): / 8 GPUs / 2 for dense
    assert a.dense_tflops["bf16"] == pytest.approx(36_000 / 8 / 2)  # 2,250
    assert a.dense_tflops["fp8"] == pytest.approx(72_000 / 8 / 2)  # 4,500
    assert a.dense_tflops["tf32"] == pytest.approx(18_000 / 8 / 2)  # 1,125
    # FP4: the table's own dense figure (144 sparse | 108 dense PFLOPS); not half the sparse one
    assert a.dense_tflops["fp4"] == pytest.approx(108_000 / 8)  # 13,500
    assert a.dense_tflops["fp4"] != pytest.approx(144_000 / 8 / 2)
    assert a.dense_tflops["fp32"] == pytest.approx(600 / 8)  # 75
    assert "int8" not in a.dense_tflops  # cut on Blackwell Ultra
    # nvidia-smi 275040 MiB; NVLink 5 1.8 TB/s bidirectional; 1,100 W power cap
    assert a.hbm_visible_gib == pytest.approx(275_040 / 1024, abs=0.01)
    assert a.scaleup_bw_GBps_per_dir == 1800 / 2
    assert a.tdp_w == 1100
    assert a.compute_units == 148


def test_gb300_dense_peaks_from_the_gb300_nvl72_table(cat):
    a = cat.accelerator("gb300")
    # GB300 NVL72, 72 GPUs: FP16/BF16 360 PFLOPS, FP8 720, TF32 180 (with sparsity); FP4 1,440 | 1,080 dense
    assert a.dense_tflops["bf16"] == pytest.approx(360_000 / 72 / 2)  # 2,500
    assert a.dense_tflops["fp8"] == pytest.approx(720_000 / 72 / 2)  # 5,000
    assert a.dense_tflops["tf32"] == pytest.approx(180_000 / 72 / 2)  # 1,250
    assert a.dense_tflops["fp4"] == pytest.approx(1_080_000 / 72)  # 15,000: the blog's 15 PFLOPS dense NVFP4
    assert a.dense_tflops["fp32"] == pytest.approx(6_000 / 72, abs=0.05)  # 83.3
    # 576 TB/s over 72 GPUs; nvidia-smi 284208 MiB; 1,400 W
    assert a.hbm_bw_TBps == pytest.approx(576 / 72)
    assert a.hbm_visible_gib == pytest.approx(284_208 / 1024, abs=0.01)
    assert a.tdp_w == 1400
    # Blackwell Ultra raised dense FP4 1.5x over Blackwell, not bf16 / fp8 at the same power class
    gb200 = cat.accelerator("gb200")
    assert a.dense_tflops["fp4"] / gb200.dense_tflops["fp4"] == pytest.approx(1.5)
    assert a.dense_tflops["bf16"] == gb200.dense_tflops["bf16"]


def test_b300_gemm_ceilings_from_its_own_mamf(cat):
    a, b200 = cat.accelerator("b300"), cat.accelerator("b200")
    # stas00/ml-engineering MAMF table: B300 1,769.0 bf16 and 3,353.3 fp8 TFLOP/s of 2,250 / 4,500
    assert a.matmul_efficiency["bf16"] == pytest.approx(1769.0 / 2250, abs=5e-4)
    assert a.matmul_efficiency["fp8"] == pytest.approx(3353.3 / 4500, abs=5e-4)
    # the large-shape ceiling is the MAMF fraction x the H200's fitted-ceiling / MAMF ratio, as on the B200
    ratio = 0.737 / 0.803
    for dtype in ("bf16", "fp8"):
        assert a.gemm_efficiency[dtype] == pytest.approx(a.matmul_efficiency[dtype] * ratio, abs=1e-3)
        assert b200.gemm_efficiency[dtype] == pytest.approx(b200.matmul_efficiency[dtype] * ratio, abs=1e-3)
    assert "matmul_efficiency.bf16" in a.field_sources and "matmul_efficiency.fp8" in a.field_sources


@pytest.mark.parametrize(
    ("new", "family", "fields"),
    [
        ("b300", "b200", ("sustained_compute_fraction",)),
        ("gb300", "gb200", ("matmul_efficiency", "gemm_efficiency")),
    ],
)
def test_calibrations_are_the_familys_carried_and_labelled(cat, new, family, fields):
    # the GB300's sustained fraction is the B300's carried to 1,400 W by a power law (tests/test_sustained_clocks.py)
    a, f = cat.accelerator(new), cat.accelerator(family)
    for field in (
        *fields,
        "memory_kernel_efficiency",
        "gemm_tile_mnk",
        "kernel_overhead_us",
    ):
        assert getattr(a, field) == getattr(f, field), field
        assert field in a.assumptions, f"{field} carried without a labelled assumption"
    assert "LABELLED ASSUMPTION" in a.assumptions["sustained_compute_fraction"]


def test_systems_follow_their_blackwell_siblings(cat):
    nvl = cat.system("gb300-nvl72")
    gb200 = cat.system("gb200-nvl72")
    assert (nvl.accelerator, nvl.scaleup_domain_gpus, nvl.node_gpus, nvl.unit_gpus) == ("gb300", 72, 4, 72)
    # one ConnectX-8 800G per GPU (GB200 NVL72: ConnectX-7 400G)
    assert nvl.nics_per_node == nvl.node_gpus and nvl.nic_gbps == 2 * gb200.nic_gbps == 800
    assert nvl.scaleout_fabric == "ib-xdr-800" and nvl.scaleout_switch == "q3400"
    # NVLink-C2C 900 GB/s per Grace, bidirectional, shared by 2 GPUs: 900 / 2 / 2 per GPU per direction
    assert nvl.host_link_kind == "nvlink-c2c" and nvl.host_link_GBps_per_gpu == 900 / 2 / 2
    for same in ("scaleup_fabric", "scaleup_switch", "scaleup_switches_per_domain", "scaleup_inr_efficiency"):
        assert getattr(nvl, same) == getattr(gb200, same), same
    dgx = cat.system("dgx-b300")
    assert (dgx.accelerator, dgx.node_gpus, dgx.scaleup_domain_gpus, dgx.nics_per_node, dgx.nic_gbps) == (
        "b300",
        8,
        8,
        8,
        800,
    )
    assert dgx.host_link_kind == "pcie" and dgx.cooling == "air"


def test_train_runs_on_both_designs():
    for system, hbm_gib in (("gb300-nvl72", 284_208 / 1024), ("dgx-b300", 275_040 / 1024)):
        res = runner.invoke(
            app,
            [
                "train",
                "--model",
                "llama3.1-70b",
                "--system",
                system,
                "--gpus",
                "144",
                "--seq-len",
                "8192",
                "--global-batch-size",
                "288",
                "--dtype",
                "fp8",
                "--json",
            ],
        )
        assert res.exit_code == 0, res.output
        d = json.loads(res.stdout)
        assert d["fits"] and d["hbm_gib"] == pytest.approx(hbm_gib, abs=0.01)
        assert 0.2 < d["mfu"] < 0.6


def test_size_compares_the_three_designs():
    res = runner.invoke(
        app,
        [
            "size",
            "--model",
            "llama3.1-70b",
            "--tokens",
            "1e12",
            "--system",
            "gb300-nvl72",
            "--system",
            "dgx-b300",
            "--system",
            "gb200-nvl72",
            "--deadline-days",
            "30",
            "--dtype",
            "fp8",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = {r["system"]: r for r in json.loads(res.stdout)["results"]}
    assert set(rows) == {"gb300-nvl72", "dgx-b300", "gb200-nvl72"}
    assert all(r["days"] <= 30 for r in rows.values())


def test_tco_prices_whole_racks_and_servers():
    res = runner.invoke(app, ["tco", "--system", "gb300-nvl72", "--gpus", "144", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["gpus_bought"] == 144 and d["racks"] == 2
    assert d["systems_usd"] == pytest.approx(2 * 3_500_000)  # prices.yaml: $3-4M per rack, midpoint
    assert d["kw_per_rack"] == pytest.approx(140.0)
    res = runner.invoke(app, ["tco", "--system", "dgx-b300", "--gpus", "64", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    # DGX B200 quote $515,000 + 8 x ($45,000 - $40,000) per-GPU street difference, 8 servers
    assert d["systems_usd"] == pytest.approx(8 * (515_000 + 8 * (45_000 - 40_000)))


# cuDNN 9.22 SDPA, Llama 3.1 GQA (64 / 8 heads of 128, batch 2), bf16, non-deterministic backward, TFLOP/s on
# 'NVIDIA GB200' and 'NVIDIA GB300' (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/llama3.1/*/
# llama3.1_20260424_*.csv): (mask, tokens) -> (GB200, GB300)
SDPA_FWD = {
    ("causal", 32768): (1622, 1953),
    ("none", 32768): (1634, 1836),
    ("causal", 16384): (1708, 1915),
    ("none", 16384): (1697, 2014),
    ("causal", 8192): (1574, 1856),
    ("none", 8192): (1771, 2017),
    ("causal", 4096): (1408, 1703),
    ("none", 4096): (1599, 1900),
}
SDPA_BWD = {
    ("causal", 32768): (1226, 1490),
    ("none", 32768): (1262, 1427),
    ("causal", 16384): (1328, 1507),
    ("none", 16384): (1374, 1536),
    ("causal", 8192): (1332, 1435),
    ("none", 8192): (1404, 1531),
    ("causal", 4096): (1148, 1248),
    ("none", 4096): (1350, 1429),
}


def _geomean_ratio(pairs):
    prod = 1.0
    for old, new in pairs.values():
        prod *= new / old
    return prod ** (1 / len(pairs))


def test_blackwell_ultra_attention_gain_matches_the_same_cudnn_pair(cat):
    # one Blackwell parameter set fitted to cuDNN 9.17-9.22 runs (tests/test_attention_cudnn_versions.py), the chips
    # differing by the SFU rate (16 against 32 exponentials per clock per SM): the modelled GB300 / GB200 gain stays
    # within 3 % of the TFLOP/s ratio the 9.22 runs give on the same shapes (64 / 8 heads of 128, batch 2)
    fwd, bwd = _geomean_ratio(SDPA_FWD), _geomean_ratio(SDPA_BWD)
    assert fwd == pytest.approx(1.169, abs=1e-3) and bwd == pytest.approx(1.113, abs=1e-3)
    for new, family in (("gb300", "gb200"), ("b300", "b200")):
        a, f = cat.accelerator(new), cat.accelerator(family)
        assert a.attention_efficiency == f.attention_efficiency
        assert (a.sfu_exp_per_clk_per_sm, f.sfu_exp_per_clk_per_sm) == (32, 16)
        t = {}  # (mask, tokens) -> {chip: (forward, backward)} [s]
        for mask, tokens in SDPA_FWD:
            for acc in (a, f):
                args = (acc, 2, 64, 8, tokens, 128)
                t_f = attention_time_s(*args, causal=mask == "causal")
                t_b = attention_time_s(*args, passes="fwd+bwd", causal=mask == "causal") - t_f
                t.setdefault((mask, tokens), {})[acc.id] = (t_f, t_b)
        for i, measured in ((0, fwd), (1, bwd)):
            modelled = _geomean_ratio({k: (v[a.id][i], v[f.id][i]) for k, v in t.items()})
            assert modelled == pytest.approx(measured, rel=0.03)
    assert "attention_efficiency" in cat.accelerator("gb300").field_sources  # measured on the GB300
    assert "attention_efficiency" in cat.accelerator("b300").assumptions  # carried to the HGX part
