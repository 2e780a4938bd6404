"""Blackwell attention ceilings by cuDNN version: each is the geometric mean, over NVIDIA's published cuDNN SDPA
benchmark points at 8,192-32,768 tokens (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training, causal bf16, head
dim 128, non-deterministic backward, free clock), of the ceiling at which the attention law reproduces the point;
the accelerators carry cuDNN 9.17+ kernels, stacks whose containers shipped 9.16 or earlier the 2025 ones. The law
times the softmax exponentials on their own pipeline (hnplan.compute.attention.exp_pipeline_factor), so that one
Blackwell parameter set serves the B200 / GB200 and the B300 / GB300, which differ by the SFU rate."""

import numpy as np
import pytest
from scipy.optimize import brentq, least_squares

from hnplan.catalog.runs import training_runs
from hnplan.compute.kernels import attention_time_s
from hnplan.planning.training.job import make_job

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


BLACKWELL = ("b200", "gb200", "b300", "gb300")


def _joint_fit(cat, backward):
    """Ceiling and overlap exponent of one pass fitted to the GB200 and GB300 cuDNN 9.17+ shapes together."""
    pts = [
        (cat.accelerator(chip), b, hq, hkv, s, m[backward])
        for chip in ("gb200", "gb300")
        for b, hq, hkv, runs in CUDNN_2026[chip]
        for s, m in runs.items()
    ]

    def residuals(x):
        out = []
        for acc, b, hq, hkv, s, measured in pts:
            a = acc.model_copy(update={"attention_exp_overlap_exponent": {"fwd": x[1], "bwd": x[1]}})
            out.append(np.log(_rate(a, b, hq, hkv, s, x[0], backward) / measured))
        return out

    fit = least_squares(residuals, [0.8, 2.0], bounds=([0.2, 1.0], [1.0, 50.0]))
    return fit.x, np.array(residuals(fit.x))


@pytest.mark.parametrize(("backward", "key"), [(False, "fwd"), (True, "bwd")])
def test_blackwell_carries_one_parameter_set_fitted_on_gb200_and_gb300(cat, backward, key):
    # GB200 and GB300 differ by the SFU rate only (16 against 32 exponentials per clock per SM): the ceiling and the
    # overlap exponent of each pass are fitted to the 18 shapes of both chips together
    (eta, p), res = _joint_fit(cat, backward)
    for chip in BLACKWELL:
        acc = cat.accelerator(chip)
        assert acc.attention_efficiency[key] == pytest.approx(eta, abs=2e-3)
        assert acc.attention_exp_overlap_exponent[key] == pytest.approx(p, abs=0.02)
        assert acc.sfu_exp_per_clk_per_sm == (32 if chip in ("b300", "gb300") else 16)
    # forward 0.886 / p 2.42 (mostly overlapped), backward 0.676 / p 1.14 (nearly in series)
    assert (eta, p) == (pytest.approx(0.886 if key == "fwd" else 0.676, abs=2e-3), pytest.approx(
        2.42 if key == "fwd" else 1.14, abs=0.02))  # fmt: skip
    # no chip is left with a bias: the per-chip mean residual is within 1 %, the shapes within -6..+11 %
    assert abs(res[:9].mean()) < 0.01 and abs(res[9:].mean()) < 0.01
    assert res.min() > -0.06 and res.max() < 0.115
    assert "attention_efficiency" in cat.accelerator("gb200").field_sources


def test_older_container_stacks_carry_the_2025_kernels(cat):
    # one Blackwell value: the geometric mean of the per-shape ceilings on the B200 (6 shapes) and the GB300 (3), at
    # the catalog's overlap exponents and each chip's SFU rate
    per_chip = {chip: _ceilings(cat.accelerator(chip), CUDNN_2025[chip]) for chip in ("b200", "gb300")}
    fwd, bwd = (float(np.exp((6 * np.log(per_chip["b200"][i]) + 3 * np.log(per_chip["gb300"][i])) / 9)) for i in (0, 1))
    for st in OLD_STACKS:
        for chip in BLACKWELL:
            assert cat.stack(st).attention_efficiency[chip] == {
                "fwd": pytest.approx(fwd, abs=1e-3),
                "bwd": pytest.approx(bwd, abs=1e-3),
            }
    # checked, not fitted: with the exponentials on their own pipeline the two chips' 2025 ceilings agree (0.741 /
    # 0.580 against 0.737 / 0.568); a law without them needed 0.629 / 0.498 on the B200 and 0.711 / 0.529 on the GB300
    assert per_chip["gb300"][0] / per_chip["b200"][0] == pytest.approx(1.0, abs=0.01)
    assert per_chip["gb300"][1] / per_chip["b200"][1] == pytest.approx(1.0, abs=0.025)


def test_newer_kernels_are_faster_and_the_2026_stack_keeps_the_accelerators(cat):
    for chip in BLACKWELL:
        new, old = cat.accelerator(chip).attention_efficiency, cat.stack("nemo-mlperf-v50").attention_efficiency[chip]
        assert new["fwd"] > old["fwd"] and new["bwd"] > old["bwd"]
    assert cat.stack("megatron-bridge-2608-mxfp8").attention_efficiency is None


# NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training results/llama3.1/{gb200,gb300}/llama3.1_20260424_*.csv
# (cuDNN 9.22.0, 64 query / 8 KV heads of 128, batch 2, top-left causal, non-deterministic backward): per tokens,
# (fp8, bfloat16) TFLOP/s forward and backward
CUDNN_922_FP8_BF16 = {
    "gb200": {
        8192: ((2047, 1574), (1454, 1332)),
        16384: ((2154, 1708), (1632, 1328)),
        32768: ((2197, 1622), (1687, 1226)),
    },
    "gb300": {
        8192: ((2897, 1856), (1781, 1435)),
        16384: ((3054, 1915), (2035, 1507)),
        32768: ((3108, 1953), (2128, 1490)),
    },
}


def test_mlperf_v60_stack_is_the_v50_choices_in_a_cudnn_9_21_container(cat):
    # MLPerf Training v6.0's NeMo / PyTorch 26.03-26.04 containers ship cuDNN 9.20-9.21 (the round's system
    # descriptions), inside the 9.17-9.22 range of the accelerators' ceilings: the stack keeps the accelerators'
    # attention and changes nothing else of nemo-mlperf-v50 but the FP8 / bf16 attention ratio, that of cuDNN 9.22's
    # kernels (the 8B NVFP4 recipe's FP8_DPA=True; the 405B rows run bf16 attention, NVTE_DPA_FP8_RECIPE=F16)
    v50, v60 = cat.stack("nemo-mlperf-v50"), cat.stack("nemo-mlperf-v60")
    assert v60.attention_efficiency is None
    for chip, carried in (("gb200", "b200"), ("gb300", "b300")):
        ratio = {
            p: float(np.exp(np.mean([np.log(a / b) for a, b in (r[i] for r in CUDNN_922_FP8_BF16[chip].values())])))
            for i, p in enumerate(("fwd", "bwd"))
        }
        # geometric means over 8,192-32,768 tokens: GB200 1.305 / 1.227, GB300 1.582 / 1.338
        assert v60.attention_fp8_ratio[chip] == pytest.approx(ratio, abs=5e-4)
        assert v60.attention_fp8_ratio[carried] == v60.attention_fp8_ratio[chip]  # same die and SFU rate
        # the newer kernels gain more from FP8 forward than cuDNN 9.13's did
        assert v60.attention_fp8_ratio[chip]["fwd"] > v50.attention_fp8_ratio[chip]["fwd"]
    entry = {"id", "name", "source", "notes", "field_sources", "assumptions"}
    # and that cuDNN's FP8 backward of a sliding-window layer walks the whole causal triangle (9.22-9.27 measured)
    meta = entry | {"attention_efficiency", "attention_fp8_ratio", "attention_fp8_sliding_bwd_causal"}
    assert v60.model_dump(exclude=meta) == v50.model_dump(exclude=meta)
    assert v60.attention_fp8_sliding_bwd_causal == dict.fromkeys(("b200", "gb200", "b300", "gb300"), True)
    assert v50.attention_fp8_sliding_bwd_causal is None
    rows = {r.id: r.stack for r in training_runs()}
    on_26 = [f"mlperf-v60-{s}-llama31-405b-{n}" for s, n in (("nvidia-gb300", 512), ("nvidia-gb300", 2048),
                                                            ("coreweave-gb300", 4096))]  # fmt: skip
    on_26 += [f"mlperf-v60-{s}-llama31-8b-{n}" for s, n in (("nvidia-gb300", 8), ("nvidia-gb300", 512),
              ("nvidia-gb200", 1024), ("dell-b300", 16), ("coreweave-b200", 64), ("cisco-b300", 8),
              ("cisco-h200", 16), ("hpe-gb300", 16), ("hpe-gb300", 32), ("hpe-gb300", 72))]  # fmt: skip
    assert {rid: rows[rid] for rid in on_26} == dict.fromkeys(on_26, "nemo-mlperf-v60")
    # NeMo 25.09 (Azure, Nebius's B300, HPE's GB200) and Nebius's GB300, whose systems file names no container
    on_25 = ["mlperf-v60-azure-gb200-llama31-405b-8192", "mlperf-v60-nebius-b300-llama31-8b-64",
             "mlperf-v60-hpe-gb200-llama31-8b-32", "mlperf-v60-nebius-gb300-llama31-8b-72"]  # fmt: skip
    assert {rid: rows[rid] for rid in on_25} == dict.fromkeys(on_25, "nemo-mlperf-v50")


# NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training (cuDNN 9.22.0, batch 2, top-left causal, 4,096 tokens):
# TFLOP/s of (bfloat16, mxfp8, fp8) forward and non-deterministic backward, and the deterministic backward, at the
# dsv3 shape (DeepSeek-V3's MLA: 128 query / 128 KV heads, head dimensions 192 / 128; results/dsv3/*/dsv3_20260424_*.csv)
# and the llama3.1 shape (grouped-query, 64 query / 8 KV heads of 128; results/llama3.1/*/llama3.1_20260424_*.csv)
CUDNN_922_4096 = {
    "mla": {
        "gb200": {"fwd": (1406, 1925, 2095), "bwd": (1057, 1364, 1692), "bwd_det": (1083, 1364, 1696)},
        "gb300": {"fwd": (1590, 2517, 2788), "bwd": (1143, 1522, 1982), "bwd_det": (1185, 1520, 1985)},
    },
    "gqa": {
        "gb200": {"fwd": (1408, 1685, 1805), "bwd": (1148, 1054, 1178), "bwd_det": (1017, 1048, 1181)},
        "gb300": {"fwd": (1703, 2272, 2532), "bwd": (1248, 1143, 1396), "bwd_det": (1127, 1143, 1395)},
    },
}


def test_megatron_bridge_2608_carries_the_mxfp8_attention_ratio_per_shape(cat):
    # FP8 attention under an MXFP8 recipe runs MXFP8 attention (Transformer Engine v2.15+): the ratios are the
    # benchmark's mxfp8 over bfloat16 at the stack's rows' 4,096 tokens, against the non-deterministic bf16 backward
    # the accelerators' ceilings are fitted to (MXFP8's backward rate is the same either way); at the MLA shape for
    # models with MLA, at grouped-query head dimension 128 otherwise, where the MXFP8 backward is slower than bf16's
    st = cat.stack("megatron-bridge-2608-mxfp8")
    for shape, field in (("mla", "attention_fp8_ratio_mla"), ("gqa", "attention_fp8_ratio")):
        for chip, carried in (("gb200", "b200"), ("gb300", "b300")):
            m = CUDNN_922_4096[shape][chip]
            want = {p: m[p][1] / m[p][0] for p in ("fwd", "bwd")}  # MLA GB200 1.369 / 1.290, GQA 1.197 / 0.918
            assert getattr(st, field)[chip] == pytest.approx(want, abs=5e-4), (shape, chip)
            assert getattr(st, field)[carried] == getattr(st, field)[chip]
            assert abs(m["bwd_det"][1] / m["bwd"][1] - 1) < 0.01
            assert all(m[p][1] < m[p][2] for p in ("fwd", "bwd"))  # block scaling costs more than per-tensor FP8
    assert st.attention_fp8_ratio["gb200"]["bwd"] < 1 < st.attention_fp8_ratio_mla["gb200"]["bwd"]
    # the rows that run it: the MLPerf v6.0 DeepSeek-V3 configs (FP8_DPA=True), the 26.08 Qwen3 full-graph recipes and
    # the 26.08 GB300 DeepSeek-V3 recipe (_enable_deepseek_full_iteration_mxfp8(cfg, fp8_dot_product_attention=True);
    # the GB200 one leaves it False)
    fp8_dpa = {r.id: r for r in training_runs() if r.stack == st.id and (r.overrides or {}).get("fp8_attention")}
    assert sum(rid.startswith("mlperf-v60-") and "deepseek-v3" in rid for rid in fp8_dpa) == 10
    assert {rid for rid in fp8_dpa if rid.startswith("mbridge2608-") and "deepseek-v3" in rid} == {
        "mbridge2608-gb300-deepseek-v3-256-fp8-fullcg"
    }
    assert {rid for rid in fp8_dpa if "qwen3" in rid} == {
        f"mbridge2608-{chip}-{job}-fp8-fullcg"
        for chip in ("gb200", "gb300")
        for job in ("qwen3-30b-a3b-8", "qwen3-235b-a22b-256")
    } | {"mbridge2608-gb300-qwen3-30b-a3b-256-fp8-weak", "mbridge2606-b300-qwen3-30b-a3b-8-fp8-fullcg"}
    # a model with MLA takes the MLA ratio, any other the grouped-query one; the provenance says which
    for model, field in (("deepseek-v3", "attention_fp8_ratio_mla"), ("qwen3-30b-a3b", "attention_fp8_ratio")):
        job = make_job(
            model, "gb200-nvl72", 256, 4096, 1024, "fp8", cat, stack=st.id, overrides={"fp8_attention": True}
        )
        assert job.acc.attention_fp8_ratio == getattr(st, field)["gb200"]
        assert job.provenance["attention_fp8_ratio"].startswith(f"stack {st.id} ({field}:")


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
        0.49, abs=0.01
    )
    for chip in ("b200", "gb200", "b300", "gb300"):
        assert ae[chip] == cat.stack("nemo-mlperf-v50").attention_efficiency[chip]
