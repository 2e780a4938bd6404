"""Blackwell attention ceilings by cuDNN version: each is the geometric mean, over NVIDIA's published cuDNN SDPA
benchmark points at 8,192-32,768 tokens (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training, causal bf16, head
dim 128, non-deterministic backward, free clock), of the ceiling at which the attention law reproduces the point;
the accelerators carry cuDNN 9.17+ kernels, stacks whose containers shipped 9.16 or earlier the 2025 ones."""

import numpy as np
import pytest
from scipy.optimize import brentq

from hnplan.compute.kernels import attention_time_s

# (chip, batch, query heads, KV heads) -> {tokens: (forward, backward) TFLOP/s}, as published
CUDNN_2025 = {  # cuDNN 9.10.2 (commits f937055, 9793df5) and 9.13.1 (0b1577c), through PyTorch SDPA
    "b200": [
        (1, 128, 8, {8192: (1211.1, 945.4), 16384: (1358.6, 1074.5), 32768: (1435.1, 1132.4)}),  # 9.10.2
        (1, 128, 8, {8192: (1171.3, 942.5), 16384: (1332.4, 1074.8), 32768: (1419.0, 1108.7)}),  # 9.13.1
    ],
    "gb300": [(1, 128, 8, {8192: (1495.7, 1130.1), 16384: (1702.5, 1267.8), 32768: (1795.9, 1319.2)})],
}
CUDNN_2026 = {  # cuDNN 9.17.0 (b372d39), 9.18.1 (b8c0656), 9.22.0 (results/llama3.1, 2026-04-24)
    "gb200": [
        (1, 128, 8, {8192: (1584, 1211), 16384: (1668, 1304), 32768: (1681, 1348)}),
        (1, 64, 8, {8192: (1563, 1279), 16384: (1646, 1371), 32768: (1686, 1441)}),
        (2, 64, 8, {8192: (1574, 1332), 16384: (1708, 1328), 32768: (1622, 1226)}),
    ],
    "gb300": [
        (1, 128, 8, {8192: (1899, 1292), 16384: (1978, 1399), 32768: (2007, 1438)}),
        (1, 64, 8, {8192: (1927, 1391), 16384: (1998, 1494), 32768: (2031, 1552)}),
        (2, 64, 8, {8192: (1856, 1435), 16384: (1915, 1507), 32768: (1953, 1490)}),
    ],
}
OLD_STACKS = ("nemo-mlperf-v50", "megatron-bridge-2511", "megatron-bridge-2511-mxfp8")


def _rate(acc, b, hq, hkv, s, eta, backward):
    a = acc.model_copy(update={"attention_efficiency": {"fwd": eta, "bwd": eta}})
    f = 4.0 * b * hq * s * s * 128 / 2  # causal forward FLOPs, as the benchmark counts them
    t_f = attention_time_s(a, b, hq, hkv, s, 128, passes="fwd")
    if not backward:
        return f / t_f / 1e12
    return 2.5 * f / (attention_time_s(a, b, hq, hkv, s, 128, passes="fwd+bwd") - t_f) / 1e12


def _rate_gap(eta, acc, b, hq, hkv, s, backward, measured):
    return _rate(acc, b, hq, hkv, s, eta, backward) - measured


def _ceilings(acc, runs):
    out = []
    for backward in (False, True):
        etas = [
            brentq(_rate_gap, 0.2, 1.2, args=(acc, b, hq, hkv, s, backward, m[backward]))
            for b, hq, hkv, pts in runs
            for s, m in pts.items()
        ]
        out.append(float(np.exp(np.mean(np.log(etas)))))
    return out


@pytest.mark.parametrize("chip", ["gb200", "gb300"])
def test_accelerators_carry_the_cudnn_917_kernels(cat, chip):
    acc = cat.accelerator(chip)
    fwd, bwd = _ceilings(acc, CUDNN_2026[chip])
    assert acc.attention_efficiency == {"fwd": pytest.approx(fwd, abs=1e-3), "bwd": pytest.approx(bwd, abs=1e-3)}
    assert "attention_efficiency" in acc.field_sources


@pytest.mark.parametrize("chip", ["b200", "gb300"])
def test_older_container_stacks_carry_the_2025_kernels(cat, chip):
    fwd, bwd = _ceilings(cat.accelerator(chip), CUDNN_2025[chip])
    for st in OLD_STACKS:
        assert cat.stack(st).attention_efficiency[chip] == {
            "fwd": pytest.approx(fwd, abs=1e-3),
            "bwd": pytest.approx(bwd, abs=1e-3),
        }


def test_the_same_die_carries_its_siblings_fractions(cat):
    assert cat.accelerator("b200").attention_efficiency == cat.accelerator("gb200").attention_efficiency
    assert cat.accelerator("b300").attention_efficiency == cat.accelerator("gb300").attention_efficiency
    for chip in ("b200", "b300"):
        assert "attention_efficiency" in cat.accelerator(chip).assumptions
    for st in OLD_STACKS:
        ae = cat.stack(st).attention_efficiency
        assert ae["gb200"] == ae["b200"] and ae["b300"] == ae["gb300"]


def test_newer_kernels_are_faster_and_the_2026_stack_keeps_the_accelerators(cat):
    for chip in ("b200", "gb200", "b300", "gb300"):
        new, old = cat.accelerator(chip).attention_efficiency, cat.stack("nemo-mlperf-v50").attention_efficiency[chip]
        assert new["fwd"] > old["fwd"] and new["bwd"] > old["bwd"]
    assert cat.stack("megatron-bridge-2608-mxfp8").attention_efficiency is None


# PyTorch SDPA's FLASH_ATTENTION backend (FlashAttention-2) on a Hopper GPU at 1,980 MHz, causal bf16, 16 heads of
# 128: NVIDIA/cudnn-frontend benchmark/benchmark_results.csv, "Pytorch" columns at commits b740542 and de355c7
PYTORCH_FLASH_HOPPER = [
    (2, 16, 16, {8192: (325.1, 277.4)}),
    (1, 16, 16, {16384: (324.8, 305.2), 32768: (345.3, 317.3)}),
    (2, 16, 16, {8192: (321.9, 275.4)}),
    (1, 16, 16, {16384: (327.2, 305.2), 32768: (345.6, 316.9)}),
]


def test_torchtitan_runs_flashattention2_on_hopper_and_cudnn_2025_on_blackwell(cat):
    fwd, bwd = _ceilings(cat.accelerator("h200-sxm"), PYTORCH_FLASH_HOPPER)
    ae = cat.stack("torchtitan-2506").attention_efficiency
    for chip in ("h100-sxm", "h200-sxm"):
        assert ae[chip] == {"fwd": pytest.approx(fwd, abs=1e-3), "bwd": pytest.approx(bwd, abs=1e-3)}
    # about half the cuDNN 9.19 law the H200 catalog entry was fitted on
    assert ae["h200-sxm"]["fwd"] / cat.accelerator("h200-sxm").attention_efficiency["fwd"] == pytest.approx(
        0.51, abs=0.01
    )
    for chip in ("b200", "gb200", "b300", "gb300"):
        assert ae[chip] == cat.stack("nemo-mlperf-v50").attention_efficiency[chip]
