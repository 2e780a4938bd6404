"""The compute roofline against measured training throughput (NeMo 24.07 on DGX H100, and the
compute issue's Llama-2-7B case): a roofline leaves out communication, bubbles and framework
overheads, so it must bound the measurement from above, and not loosely."""

from __future__ import annotations

import pandas as pd

from hnplan import units
from hnplan.compute import training_stage_time_s
from hnplan.validation.attention_d64 import rows as attention_d64_rows
from hnplan.validation.h200_device import rows as h200_device_rows
from hnplan.validation.mxfp8_gemm import mxfp8_rows
from hnplan.validation.rows import Row, area

BOUND = 1.8  # largest roofline / measured ratio accepted: measured runs reach >= 55% of the roofline

# (model id, reference run id, micro-batch, seq, tp, cp, pp, dtype)
CASES = [
    ("llama2-7b", "nemo2407_h100_LLAMA2-7B_8", 1, 4096, 1, 1, 1, "fp8"),
    ("llama3.1-8b", "nemo2407_h100_LLAMA3-8B_8", 1, 8192, 1, 2, 1, "fp8"),
    ("llama3.1-70b", "nemo2407_h100_LLAMA3-70B_64", 1, 8192, 4, 2, 4, "fp8"),
    ("gpt3-175b", "nemo2407_h100_GPT3-175B_512", 2, 2048, 4, 1, 8, "fp8"),
]


@area("compute")
def rows(cat) -> list[Row]:
    """The training roofline bounds, then every kernel measured on the H200 (:func:`gemm_rows`,
    :func:`kernel_rows`), then the OpenXLA GEMM sweeps of Blackwell and Hopper (:func:`xla_rows`), then DeepGEMM's
    FP8 GEMMs on the H800 (:func:`deepgemm_rows`), TileLang's FP16 / FP8 K sweep on the H800 (:func:`tilelang_rows`),
    MXFP8 GEMMs on Blackwell (:func:`mxfp8_rows`) and cuDNN's attention at gpt-oss's head dimension 64
    (:func:`hnplan.validation.attention_d64.rows`), and the FP8 GEMMs, attention backends and gpt-oss expert GEMMs
    timed on an H200 by ``tools/measure_h200.py`` (:func:`hnplan.validation.h200_device.rows`)."""
    return (
        roofline_rows(cat)
        + gemm_rows(cat)
        + kernel_rows(cat)
        + xla_rows(cat)
        + deepgemm_rows(cat)
        + tilelang_rows(cat)
        + mxfp8_rows(cat)
        + attention_d64_rows(cat)
        + h200_device_rows(cat)
    )


def roofline_rows(cat) -> list[Row]:
    ref = cat.reference("training_measurements").set_index("run_id")
    h100 = cat.accelerator("h100-sxm")
    out = []
    for model, run, mb, seq, tp, cp, pp, dtype in CASES:
        t = training_stage_time_s(cat.model(model), h100, mb, seq, tp=tp, cp=cp, pp=pp, dtype=dtype)
        bound = mb * seq / (tp * cp * pp) / t
        measured = float(pd.to_numeric(ref.loc[run, "tokens_per_sec_per_gpu"]))
        out.append(
            Row(
                "compute",
                f"{model} on H100 {dtype}, TP{tp} CP{cp} PP{pp}",
                "tokens/s per GPU (roofline)",
                "tokens/s",
                measured,
                bound,
                "bound",
                BOUND,
                ref.loc[run, "source"],
                "compute-only roofline: no communication, bubble, FP8 casts or framework overhead",
            )
        )
    t = training_stage_time_s(cat.model("llama2-7b"), h100, 1, 4096, dtype="bf16")
    out.append(
        Row(
            "compute",
            "llama2-7b on H100 bf16",
            "tokens/s per GPU (roofline)",
            "tokens/s",
            9600.0,
            4096 / t,
            "bound",
            BOUND,
            "compute issue: a Llama-2-7B run at 9,600 tokens/s per H100 (~46% MFU)",
        )
    )
    return out


# --- kernels timed on one H200 SXM (data/reference/h200_gemm_bf16.csv, h200_kernels.csv) ---------------------
H200_SRC = (
    "data/reference/{table}.csv: one H200 SXM, PyTorch 2.11 / CUDA 13, CUDA events over back-to-back "
    "calls (measured 2026-12-01)"
)
GROUPED_MM_TOL = 0.25  # torch._grouped_mm rows: fitted rms 8.0 %, worst -19 %; predicted rms 8.4 %, worst +15 %
GEMM_CAL_TOL = 0.35  # per-row tolerance of the 193 fitted rows; the sweep's MAPE (5.8 %) is asserted in the tests
# the FP8 rows ran at a 500 W power limit, where a power-capped chip's FP8 / bf16 ratio drifts from the 700 W
# MAMF ratio the law carries towards the energy-per-FLOP ratio (about 2): 20 % is allowed for that
FP8_RATIO_TOL = 0.20
# FP8 / bf16 GEMM throughput on H100 (500 W power limit), fp8 row-wise scaled GEMM alone vs the bf16 GEMM:
# pytorch/FBGEMM pull request 2546 (2024-04-29, description: "H100 500W" benchmark); (m, n, k, bf16, fp8) TFLOP/s
FBGEMM_2546 = [
    (8192, 8192, 8192, 585.23, 1125.51),
    (65536, 8192, 7168, 575.12, 1082.75),
    (65536, 3584, 8192, 546.31, 1141.38),
]
FBGEMM_SRC = (
    "pytorch/FBGEMM pull request 2546 (fp8 row/block-wise scaled GEMMs), H100 500W benchmark in its description"
)


# measured memory-bound kernels -> the accelerator's memory_kernel_efficiency class
MEMORY_KERNEL_OPS = {
    "rmsnorm_F_fwd": "norm",
    "swiglu_fwd": "activation",
    "residual_add": "residual",
    "fp8_cast": "fp8_cast",
    "amax": "amax",
    "adamw_fused_fp32": "optimizer",
    "cross_entropy_fwd_fp32": "cross_entropy",
}


def _shape(text: str) -> dict:
    import re

    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


def gemm_rows(cat) -> list[Row]:
    """The 193 bf16 GEMMs of the H200 sweep (calibration: the law was fitted to them) and FP8 / bf16 ratios on H100
    (prediction: the FP8 ceiling is carried from the bf16 fit through the chip's MAMF ratio)."""
    from hnplan.compute.gemm import gemm_time_s

    acc = cat.accelerator("h200-sxm")
    ref = cat.reference("h200_gemm_bf16")
    pred = gemm_time_s(
        acc, "bf16", ref["m_tokens"].to_numpy(float), ref["n"].to_numpy(float), ref["k"].to_numpy(float), eager=True
    )
    src = H200_SRC.format(table="h200_gemm_bf16")
    out = [
        Row(
            "compute",
            f"bf16 GEMM {r.model} TP{r.tp} {r.op}, {r.m_tokens} tokens ({r.m_tokens}x{r.n}x{r.k}) on H200",
            "time per call",
            "us",
            units.s_to_us(r.time_s),
            units.s_to_us(p),
            "calibration",
            GEMM_CAL_TOL,
            src,
            "GEMM law fitted to the whole sweep (hnplan.validation.gemm_fit), eager host floor included",
        )
        for r, p in zip(ref.itertuples(), pred)
    ]
    h100 = cat.accelerator("h100-sxm")
    for m, n, k, bf, f8 in FBGEMM_2546:
        ratio = gemm_time_s(h100, "bf16", m, n, k) / gemm_time_s(h100, "fp8", m, n, k)
        out.append(
            Row(
                "compute",
                f"fp8 / bf16 GEMM throughput {m}x{n}x{k} on H100",
                "throughput ratio",
                "-",
                f8 / bf,
                ratio,
                "prediction",
                FP8_RATIO_TOL,
                FBGEMM_SRC,
                "fp8 ceiling carried from the H200 bf16 fit by the chip's MAMF fp8 / bf16 ratio; the "
                "measurement ran at a 500 W power limit, which costs bf16 and fp8 alike",
            )
        )
    return out


def kernel_rows(cat) -> list[Row]:
    """Every row of h200_kernels.csv against the operator model that the planners use."""
    from hnplan.compute.grouped_gemm import grouped_mm_time_s
    from hnplan.compute.kernels import (
        attention_time_s,
        decode_attention_time_s,
        grouped_gemm_time_s,
        memory_pass_time_s,
    )
    from hnplan.validation.gemm_fit import ATTENTION_FIT_MODELS, MEASURED_PASSES
    from hnplan.validation.grouped_mm import FIT_MODELS as GROUPED_FIT_MODELS

    acc = cat.accelerator("h200-sxm")
    mk = acc.memory_kernel_efficiency or {}
    ref = cat.reference("h200_kernels")
    src = H200_SRC.format(table="h200_kernels")
    out = []
    for r in ref.itertuples():
        sh = _shape(r.shape)
        measured = float(r.time_s)
        role, tol, note = "prediction", 0.2, ""
        if r.kind == "attention" and r.op != "sdpa_decode":
            passes = "fwd+bwd" if r.op.endswith("bwd") else "fwd"
            t = attention_time_s(acc, sh["b"], sh["heads"], sh["kv_heads"], sh["s"], sh["d"], passes=passes, eager=True)
            case = (
                f"causal attention {passes} b={sh['b']} heads={sh['heads']}/{sh['kv_heads']} s={sh['s']} "
                f"({r.shape.split('(')[-1].rstrip(')')}) on H200"
            )
            if any(f in r.shape for f in ATTENTION_FIT_MODELS):
                role, tol, note = "calibration", 0.2, "attention law fitted to these rows (fit_attention_law)"
            else:
                tol, note = 0.15, "attention law fitted to the 32- and 8-head rows; 16 heads per GPU predicted"
        elif r.kind == "attention":
            t = decode_attention_time_s(acc, sh["b"], sh["heads"], sh["kv_heads"], sh["kv_len"], sh["d"], eager=True)
            case = f"decode attention b={sh['b']} heads={sh['heads']}/{sh['kv_heads']} kv_len={sh['kv_len']} on H200"
            note = "KV cache streamed at the achievable HBM bandwidth"
            if measured < 3e-5:  # at the host floor
                role, tol = "reported", None
                note = (
                    "the call sits at eager SDPA's host floor (about 23 us with the grouped-query path), above "
                    "a linear's 13 us; planners run decode without a host floor (CUDA graphs)"
                )
        elif r.kind == "moe_gemm":
            case = (
                f"expert GEMM {r.op} {r.shape.split()[0]} {sh['experts']} experts x {sh['tokens_per_expert']} "
                f"tokens, {sh['tokens_per_expert']}x{sh['n']}x{sh['k']} on H200"
            )
            args = (acc, "bf16", sh["experts"], sh["tokens_per_expert"], sh["n"], sh["k"])
            if r.op == "torch._grouped_mm":
                t = grouped_mm_time_s(*args, eager=True)
                tol = GROUPED_MM_TOL
                fitted = r.shape.split()[0] in GROUPED_FIT_MODELS
                role = "calibration" if fitted else "prediction"
                note = (
                    "PyTorch's SM90 CUTLASS grouped kernel (aten/src/ATen/native/cuda/GroupMM.cu @ 117b863; "
                    "hnplan.compute.grouped_gemm): 64x128x128 ping-pong tiles at <= 128 tokens a group, else "
                    "128x256x64 cooperative with the output write exposed, the tokens in the tile's M and M blocks "
                    "rounded up to the 2x1 cluster (32 tokens: 128 rows), whole waves, no split-K, a preparation "
                    "kernel; "
                    + (
                        "grouped_gemm_overlap_exponent fitted to the DeepSeek-V3 rows"
                        if fitted
                        else "grouped_gemm_overlap_exponent fitted to the DeepSeek-V3 rows, these predicted"
                    )
                )
            else:
                t = grouped_gemm_time_s(*args, eager=True)
                tol = GEMM_CAL_TOL  # the law's per-row spread on single GEMMs
        elif r.op == "cross_entropy_fwd_bwd_fp32":
            logits = sh["tokens"] * sh["vocab"]
            t = memory_pass_time_s(
                acc, 4.0 * logits, bandwidth_fraction=mk["cross_entropy"], eager=True
            ) + memory_pass_time_s(acc, 8.0 * logits, bandwidth_fraction=mk["cross_entropy"], eager=True)
            case = f"fp32 cross-entropy forward + backward, {sh['tokens']} tokens x {sh['vocab']} classes on H200"
            role, tol, note = "calibration", 0.02, "memory_kernel_efficiency.cross_entropy is read from this row"
        elif pd.notna(r.GBps):
            nbytes = units.GBps_to_Bps(float(r.GBps)) * measured
            if r.op == "cross_entropy_fwd_fp32":  # the operator model's forward bytes: bf16 logits in and out
                nbytes = 4.0 * sh["tokens"] * 128256
            cls = MEMORY_KERNEL_OPS.get(r.op)
            nbytes *= MEASURED_PASSES.get(cls, 1)  # the passes of the op as timed (the eager amax: three)
            t = memory_pass_time_s(acc, nbytes, bandwidth_fraction=mk.get(cls, 1.0) if cls else 1.0, eager=True)
            case = f"{r.op} ({r.shape}) on H200"
            if r.op == "d2d_copy":
                role, tol, note = "calibration", 0.02, "hbm_efficiency of h200-sxm is read from this copy"
            elif r.op == "read_reduce":
                note = "streaming at the copy's bandwidth"
            elif cls and r.op != "cross_entropy_fwd_fp32":
                role, tol, note = "calibration", 0.02, f"memory_kernel_efficiency.{cls} is read from this row"
            elif r.op == "cross_entropy_fwd_fp32":
                role, tol = "reported", None
                note = (
                    "the loss class is calibrated on forward + backward with the operator model's 2x backward "
                    "bytes; the measured forward is 47 % of the pair, the model's 33 % (4 of 12 bytes per logit)"
                )
            else:
                role, tol = "reported", None
                note = (
                    "eager RMSNorm (fp32 upcast, several kernels): 10x the fused kernel's time on the same "
                    "minimum bytes; the operator model times norms as fused (a stack field says which are fused)"
                )
        else:
            continue
        out.append(
            Row("compute", case, "time per call", "us", units.s_to_us(measured), units.s_to_us(t), role, tol, src, note)
        )
    return out


# --- the OpenXLA matmul sweeps (data/reference/xla_matmul_sm100.csv, xla_matmul_sm90.csv) -------------------------
XLA_SRC = (
    "data/reference/{table}.csv: OpenXLA kDefaultMatmulPTable ({arch}), xla/backends/gpu/cost_model/"
    "matmul_interpolator_data.h, HLO dots timed by xla/tools/matmul_perf_table_gen (median CUPTI kernel time)"
)
XLA_BIG_FLOP = 2.0**36  # 69 GFLOP: kernels of >= ~0.1 ms on Hopper, where launch and kernel choice no longer dominate
XLA_PRED_TOL = 0.20
# (arch, dtype key, accelerator, role, note); role None: prediction for shapes >= XLA_BIG_FLOP, reported below
XLA_CASES = [
    ("sm_100", "bf16xbf16->bf16", "b200", "calibration", "Blackwell shape parameters fitted to these rows with"),
    (
        "sm_100",
        "f8e4m3fnxf8e4m3fn->bf16",
        "b200",
        "calibration",
        "Blackwell shape parameters fitted to these rows with",
    ),
    ("sm_100", "f8e4m3fnxf8e5m2->bf16", "b200", "prediction", "not fitted (the backward GEMMs of hybrid FP8);"),
    ("sm_100", "f8e5m2xf8e4m3fn->bf16", "b200", "prediction", "not fitted (the backward GEMMs of hybrid FP8);"),
    ("sm_90", "bf16xbf16->bf16", "h100-sxm", None, "Hopper law fitted to the H200 PyTorch sweep, not to these rows;"),
    ("sm_90", "f8e4m3fnxf8e4m3fn->bf16", "h100-sxm", "reported", "UNPHYSICAL:"),
    ("sm_90", "f8e4m3fnxf8e5m2->bf16", "h100-sxm", "reported", "UNPHYSICAL:"),
    ("sm_90", "f8e5m2xf8e4m3fn->bf16", "h100-sxm", "reported", "UNPHYSICAL:"),
]


def xla_rows(cat) -> list[Row]:
    """Every bf16 and FP8 GEMM of the OpenXLA sweeps against the law (device time, as the sweep times kernels, plus
    the sweep's own fixed cost :func:`hnplan.validation.gemm_fit.xla_tool_offset_s`):
    sm_100 on the B200 (bf16 and e4m3 x e4m3 calibrate its shape parameters, the e4m3 x e5m2 pairs are
    predicted), sm_90 on the H100 (bf16 predicted by the Hopper law on shapes of >= 69 GFLOP, reported below;
    FP8 reported: its rates exceed the 1,979 TFLOP/s dense FP8 peak of every Hopper GPU on large shapes)."""
    from hnplan.validation.gemm_fit import XLA_TABLES, predict_table, xla_table, xla_tool_offset_s

    offset = xla_tool_offset_s(cat)  # the sweep's own fixed cost per GEMM, fitted once on the sm_90 bf16 rows
    out = []
    for arch, key, acc_id, role, why in XLA_CASES:
        acc = cat.accelerator(acc_id)
        tab = xla_table(cat, arch, key)
        pred = predict_table(acc, tab) + offset
        src = XLA_SRC.format(table=XLA_TABLES[arch], arch=arch)
        for r, p in zip(tab.itertuples(), pred):
            flop = 2.0 * r.groups * r.m_tokens * r.n * r.k
            rr, tol, note = role, GEMM_CAL_TOL, why
            if role == "calibration":
                note = f"{why} the sourced ceiling held (hnplan.validation.gemm_fit.fit_xla_sweep)"
            elif role == "prediction":
                note = f"{why} law fitted to bf16 and e4m3 x e4m3"
            elif role is None:
                big = flop >= XLA_BIG_FLOP
                rr, tol = ("prediction", XLA_PRED_TOL) if big else ("reported", None)
                note = f"{why} " + (
                    "the largest shapes run about 9 % faster here than the sustained sweep (short kernels)"
                    if big
                    else "below 69 GFLOP XLA's kernel choice and fixed costs dominate (the sweep's own 1.7 us per GEMM "
                    "is fitted to these rows)"
                )
            else:
                tol = None
                note = (
                    f"{why} the sweep's FP8 rates reach 2,620 TFLOP/s on its largest shapes, above the 1,979 TFLOP/s "
                    "dense FP8 peak of any Hopper GPU, so its FP8 times are not whole GEMMs (the tool keeps the "
                    "median of the traced kernel times); the bf16 rows of the same sweep are physical"
                )
            out.append(
                Row(
                    "compute",
                    f"{key} GEMM b={r.groups} {r.m_tokens}x{r.n}x{r.k} ({arch}) on {acc.name.split(' (')[0]}",
                    "kernel time",
                    "us",
                    units.s_to_us(r.time_s),
                    units.s_to_us(p),
                    rr,
                    tol,
                    src,
                    note,
                )
            )
    return out


# --- FP8 on Hopper on shapes the law never saw: DeepGEMM's H800 table (data/reference/deepgemm_h800_fp8.csv) -----
DEEPGEMM_SRC = (
    "data/reference/deepgemm_h800_fp8.csv: deepseek-ai/DeepGEMM README @ 55ab91f72f76 (2025-03-25), H800 SXM5, "
    "NVCC 12.8, FP8 e4m3 with 1x128 / 128x128 block scaling, bf16 output; kernel time from the PyTorch profiler "
    "(tests/test_core.py, bench_kineto: 30 calls, L2 flushed by an 8 GB memset before each)"
)


def deepgemm_rows(cat) -> list[Row]:
    """DeepGEMM's published FP8 GEMMs (dense, contiguous- and masked-grouped) on the H800 against the Hopper law
    with the chip's parameters as fitted on the H200 bf16 sweep, run as DeepGEMM's kernel runs (its tile, whole
    waves, no split-K, the output write after the K loop) at boost clock
    (:func:`hnplan.validation.gemm_kernels.deepgemm_errors`): predictions, nothing fitted to them."""
    from hnplan.validation.gemm_kernels import DEEPGEMM_ACCELERATOR, deepgemm_errors

    acc = cat.accelerator(DEEPGEMM_ACCELERATOR)
    out = []
    for r in deepgemm_errors(cat, acc).itertuples():
        what = "dense" if r.layout == "normal" else f"{r.layout}-grouped"
        note = (
            f"DeepGEMM's tile {r.block_m} x {r.block_n}, "
            "whole waves, no split-K, output written after the K loop; FP8 at boost clock (the bf16 ceiling's "
            f"fraction of the peak); the law with the catalog's schedule and FP8 ceiling (cuBLAS, hot MAMF ratio): "
            f"{r.cublas_error:+.0%}"
        )
        out.append(
            Row(
                "compute",
                f"fp8 GEMM DeepGEMM {what} g={r.groups} {r.m_tokens}x{r.n}x{r.k} on {acc.name.split(' (')[0]}",
                "kernel time",
                "us",
                units.s_to_us(r.time_s),
                units.s_to_us(r.predicted_s),
                "prediction",
                GEMM_CAL_TOL,
                DEEPGEMM_SRC,
                note,
            )
        )
    return out


TILELANG_SRC = (
    "data/reference/tilelang_h800_matmul.csv: tile-ai/tilelang benchmark/matmul/README.md @ b2acfc3 and "
    "benchmark/matmul_fp8/README.md @ fb8b3af (H800 SXM, driver 560.35.05): fastest autotuned kernel, one call timed "
    "with CUDA events after a 256 MB L2 flush"
)


def tilelang_rows(cat) -> list[Row]:
    """TileLang's FP16 and FP8 GEMMs of 8192 x 8192 x K (K = 256 ... 16,384) on the H800, and their FP8 / FP16
    throughput ratio per K, against the law with the output write exposed and the FP8 ceiling at boost clock
    (:func:`hnplan.validation.gemm_kernels.tilelang_errors`; reported: the kernels' tiles are not published)."""
    from hnplan.validation.gemm_kernels import DEEPGEMM_ACCELERATOR, tilelang_errors

    acc = cat.accelerator(DEEPGEMM_ACCELERATOR)
    name = acc.name.split(" (")[0]
    tab = tilelang_errors(cat, acc)
    out = []
    for r in tab.itertuples():
        note = (
            "non-persistent kernel: the output write after the K loop is charged in full (e = 1); boost clock "
            "(single calls after an L2 flush): FP8 at the bf16 ceiling's fraction of the peak; the tile is the "
            "autotuner's, the law keeps its own"
        )
        if r.dtype == "fp8" and r.k <= 512:
            note += "; FP8 at K <= 512 runs slower than the law, which charges only the write of its 1-byte output"
        out.append(
            Row(
                "compute",
                f"{r.dtype} GEMM TileLang {r.m_tokens}x{r.n}x{r.k} on {name}",
                "kernel time",
                "us",
                units.s_to_us(r.time_s),
                units.s_to_us(r.predicted_s),
                "reported",
                None,
                TILELANG_SRC,
                note,
            )
        )
    f16, f8 = tab[tab["dtype"] == "fp16"].set_index("k"), tab[tab["dtype"] == "fp8"].set_index("k")
    for k in f16.index.intersection(f8.index):
        out.append(
            Row(
                "compute",
                f"fp8 / fp16 GEMM throughput TileLang 8192x8192x{k} on {name}",
                "throughput ratio",
                "-",
                float(f16.loc[k, "time_s"] / f8.loc[k, "time_s"]),
                float(f16.loc[k, "predicted_s"] / f8.loc[k, "predicted_s"]),
                "reported",
                None,
                TILELANG_SRC,
                "same tool and GPU for both dtypes: 1.48x at K = 256 rising to 2.0x at deep K at boost clock, the "
                "ratio of the peaks, which sets the FP8 ceiling of these boost-clock tables (the catalog keeps the "
                "hot MAMF ratio, 1.77x); at short K the law's ratio stays near 2 (FP8 writes half the bytes)",
            )
        )
    return out
