"""The GEMM efficiency law of :mod:`hnplan.compute.gemm` fitted once to the bf16 GEMMs timed on one H200.

``data/reference/h200_gemm_bf16.csv`` holds 193 ``torch.nn.functional.linear`` calls (the projection shapes
of Llama 3.1 8B / 70B / 405B at TP 1 and 8, 1 to 16,384 tokens, PyTorch 2.11, CUDA events, back-to-back
calls; see ``data/reference/README.md``). :func:`fit_gemm_law` fits the law's continuous parameters to
them with :func:`scipy.optimize.least_squares` on the log of predicted / measured time (relative errors,
every shape weighted alike), on the catalog's ``h200-sxm`` with everything else as the catalog has it: the
HBM bandwidth fraction is the measured copy (4.28 of 4.8 TB/s), the tile, the row granularity below one
tile and the smallest split-K slice are discrete choices (the YAML says which candidates were compared).
The catalog stores the result in ``data/accelerators/h200-sxm.yaml`` (and carries it to the Hopper
family); ``tests/test_compute_gemm_law.py`` holds the two equal.

The same law is fitted to the B200 by :func:`fit_xla_sweep` on OpenXLA's measured matmul table for sm_100
(``data/reference/xla_matmul_sm100.csv``): the shape parameters from the sweep, the large-shape ceiling held
(the sweep's shapes stop at 4096), the sweep's own fixed cost per GEMM calibrated on its sm_90 rows
(:func:`xla_tool_offset_s`).

Fitted parameters of the H200, in order: ``gemm_efficiency.bf16`` (large-shape ceiling), ``gemm_k_overhead``,
``kernel_overhead_us`` (launch, ramp-up and tail), ``gemm_overlap_exponent``, ``host_dispatch_us`` (the
eager framework's floor per call), ``gemm_splitk_us``, ``gemm_wave_weight``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator
from hnplan.compute.gemm import gemm_time_s

FIT_ACCELERATOR = "h200-sxm"
FIT_TABLE = "h200_gemm_bf16"
PARAMS = (
    "gemm_efficiency",
    "gemm_k_overhead",
    "kernel_overhead_us",
    "gemm_overlap_exponent",
    "host_dispatch_us",
    "gemm_splitk_us",
    "gemm_wave_weight",
)
_X0 = (0.75, 32.0, 3.0, 4.0, 12.0, 3.0, 0.3)
_LO = (0.3, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
_HI = (1.0, 4096.0, 30.0, 30.0, 40.0, 20.0, 1.0)
# token-count bands for the error report
BANDS = (0, 8, 128, 1024, 4096, 10**9)


def with_law(acc: Accelerator, x, dtype: str = "bf16") -> Accelerator:
    """A copy of ``acc`` with the law parameters ``x`` (in the order of :data:`PARAMS`)."""
    eff, k0, lat, p, host, splitk, wave = (float(v) for v in x)
    return acc.model_copy(
        update={
            "gemm_efficiency": {**(acc.gemm_efficiency or {}), dtype: eff},
            "gemm_k_overhead": k0,
            "kernel_overhead_us": lat,
            "gemm_overlap_exponent": p,
            "host_dispatch_us": host,
            "gemm_splitk_us": splitk,
            "gemm_wave_weight": wave,
        }
    )


def predict(acc: Accelerator, table: pd.DataFrame, dtype: str = "bf16") -> np.ndarray:
    """Eager time of every row of a GEMM table (columns ``m_tokens, n, k``) under the law [s]."""
    return gemm_time_s(
        acc,
        dtype,
        table["m_tokens"].to_numpy(float),
        table["n"].to_numpy(float),
        table["k"].to_numpy(float),
        eager=True,
    )


def fit_gemm_law(catalog: Catalog | None = None) -> dict:
    """Fit the law's parameters to ``h200_gemm_bf16`` (module docstring).

    Returns
    -------
    dict
        ``params`` (name -> fitted value, names of :data:`PARAMS`), ``mape`` (mean |error| [-]),
        ``worst`` (the row of the largest |error| as a dict), ``bands`` (mean |error| per token-count band)
        and ``table`` (the reference rows with ``predicted_s`` and ``error``).
    """
    cat = catalog or load_catalog()
    acc = cat.accelerator(FIT_ACCELERATOR)
    ref = cat.reference(FIT_TABLE)
    t = ref["time_s"].to_numpy(float)
    res = least_squares(lambda x: np.log(predict(with_law(acc, x), ref) / t), _X0, bounds=(_LO, _HI))
    return {"params": dict(zip(PARAMS, (float(v) for v in res.x))), **errors(with_law(acc, res.x), ref)}


def errors(acc: Accelerator, ref: pd.DataFrame, dtype: str = "bf16") -> dict:
    """MAPE, worst row and error per token-count band of the law on ``acc`` against a GEMM table."""
    pred = predict(acc, ref, dtype)
    df = ref.assign(predicted_s=pred, error=pred / ref["time_s"].to_numpy(float) - 1.0)
    band = pd.cut(df["m_tokens"], BANDS, right=True)
    by_band = df.groupby(band, observed=True)["error"].agg(lambda s: float(s.abs().mean()))
    worst = df.loc[df["error"].abs().idxmax()]
    return {
        "mape": float(df["error"].abs().mean()),
        "worst": worst.to_dict(),
        "bands": {
            f"{int(b.left) + 1}-{int(b.right)} tokens" if b.right < 10**9 else f">{int(b.left)} tokens": v
            for b, v in by_band.items()
        },
        "table": df,
    }


# --- the attention law, fitted to the causal SDPA rows of one model ------------------------------------------
# fitted rows: 32 heads (Llama 3.1 8B, TP1) and 8 heads (70B at TP8) per GPU; the 405B rows (16 heads at TP8) are
# predicted
ATTENTION_FIT_MODELS = ("llama3.1-8b tp1", "llama3.1-70b tp8")
ATTENTION_PARAMS = (
    "attention_efficiency.fwd",
    "attention_efficiency.bwd",
    "attention_kv_overhead",
    "attention_tail_weight",
    "attention_exp_overlap_exponent.fwd",
    "attention_exp_overlap_exponent.bwd",
    "softmax_fp32_ops_per_score.fwd",
    "softmax_fp32_ops_per_score.bwd",
)
# cuDNN's causal kernels at head dimension 64, timed by tools/measure_h200.py (data/reference/h200_attention_backends.csv)
ATTENTION_D64_FIT_MODELS = ("gpt-oss tp1", "llama3.2-1b tp1")
ATTENTION_X0 = (0.76, 0.6, 384.0, 0.6, 3.0, 1.5, 6.0, 10.0)
ATTENTION_BOUNDS = ((0.2, 0.2, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0), (0.95, 0.95, 8192.0, 1.0, 20.0, 20.0, 64.0, 64.0))


def attention_table(catalog: Catalog | None = None) -> pd.DataFrame:
    """The causal attention rows the law is fitted to and checked on: ``b, heads, kv_heads, s, d, passes, fitted``
    (whether the row is one the attention law is fitted to), ``time_s``, ``shape`` and ``table``.

    ``h200_kernels`` (SDPA's default, cuDNN, at head dimension 128: Llama 3.1 8B and 70B fitted, 405B predicted) and
    the cuDNN rows of ``h200_attention_backends`` (head dimension 64: gpt-oss at 64 heads and Llama 3.2 1B at 32
    fitted, gpt-oss at TP 8 predicted; Llama 3.1 8B again, predicted: a second H200 and day)."""
    import re

    cat = catalog or load_catalog()
    ref = cat.reference("h200_kernels")
    ref = ref[(ref["kind"] == "attention") & ref["op"].str.startswith("sdpa_causal")]
    rows = []
    for r in ref.itertuples():
        sh = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", r.shape)}
        rows.append(
            {
                **{k: sh[k] for k in ("b", "heads", "kv_heads", "s", "d")},
                "passes": "fwd+bwd" if r.op.endswith("bwd") else "fwd",
                "time_s": float(r.time_s),
                "fitted": any(f in r.shape for f in ATTENTION_FIT_MODELS),
                "shape": r.shape,
                "table": "h200_kernels",
            }
        )
    new = cat.reference("h200_attention_backends")
    for r in new[new["backend"] == "cudnn"].itertuples():
        rows.append(
            {
                "b": int(r.batch),
                "heads": int(r.heads),
                "kv_heads": int(r.kv_heads),
                "s": int(r.seq),
                "d": int(r.head_dim),
                "passes": "fwd+bwd" if r._2 == "fwd_bwd" else "fwd",
                "time_s": float(r.time_s),
                "fitted": r.model in ATTENTION_D64_FIT_MODELS,
                "shape": f"b={r.batch} heads={r.heads} kv_heads={r.kv_heads} s={r.seq} d={r.head_dim} ({r.model})",
                "table": "h200_attention_backends",
            }
        )
    return pd.DataFrame(rows)


def with_attention_law(acc: Accelerator, x) -> Accelerator:
    """A copy of ``acc`` with the attention-law parameters ``x`` (order of :data:`ATTENTION_PARAMS`)."""
    fwd, bwd, c0, tau, p_fwd, p_bwd, ops_fwd, ops_bwd = (float(v) for v in x)
    return acc.model_copy(
        update={
            "attention_efficiency": {"fwd": fwd, "bwd": bwd},
            "attention_kv_overhead": c0,
            "attention_tail_weight": tau,
            "attention_exp_overlap_exponent": {"fwd": p_fwd, "bwd": p_bwd},
            "softmax_fp32_ops_per_score": {"fwd": ops_fwd, "bwd": ops_bwd},
        }
    )


def predict_attention(acc: Accelerator, table: pd.DataFrame) -> np.ndarray:
    """Time of every row of :func:`attention_table` under the operator model on ``acc`` [s]."""
    from hnplan.compute.kernels import attention_time_s

    return np.array(
        [
            attention_time_s(acc, r.b, r.heads, r.kv_heads, r.s, r.d, passes=r.passes, eager=True)
            for r in table.itertuples()
        ]
    )


def fit_attention_law(catalog: Catalog | None = None) -> dict:
    """Fit the attention law (:func:`hnplan.compute.attention.attention_compute_s`) to the fitted rows of
    :func:`attention_table`, head dimensions 64 and 128 together: the two ceilings, the work unit's key overhead and
    tail, and per pass the overlap of the tensor and scalar pipelines and the FP32 instructions per score
    (:func:`hnplan.compute.attention_law.scalar_clk_per_score`), by least squares on log time
    (scipy ``least_squares``, bounds :data:`ATTENTION_BOUNDS`).

    Returns
    -------
    dict
        ``params`` (names of :data:`ATTENTION_PARAMS`), ``table`` (every row with ``predicted_s``, ``error`` and
        ``fitted``), ``mape_fitted`` and ``mape_predicted`` [-].
    """
    cat = catalog or load_catalog()
    acc = cat.accelerator(FIT_ACCELERATOR)
    tab = attention_table(cat)
    fit = tab[tab["fitted"]]
    t = fit["time_s"].to_numpy(float)
    res = least_squares(
        lambda x: np.log(predict_attention(with_attention_law(acc, x), fit) / t),
        ATTENTION_X0,
        bounds=ATTENTION_BOUNDS,
    )
    pred = predict_attention(with_attention_law(acc, res.x), tab)
    tab = tab.assign(predicted_s=pred, error=pred / tab["time_s"] - 1.0)
    return {
        "params": dict(zip(ATTENTION_PARAMS, (float(v) for v in res.x))),
        "table": tab,
        "mape_fitted": float(tab.loc[tab["fitted"], "error"].abs().mean()),
        "mape_predicted": float(tab.loc[~tab["fitted"], "error"].abs().mean()),
    }


# --- memory-bound kernel classes: bandwidth on their minimum bytes, as a fraction of the copy -------------------
# class -> (row of h200_kernels.csv, op); cross_entropy from the fp32 loss forward + backward (no GBps column)
MEMORY_KERNEL_ROWS = {
    "norm": "rmsnorm_F_fwd",
    "activation": "swiglu_fwd",
    "residual": "residual_add",
    "fp8_cast": "fp8_cast",
    "amax": "amax",
    "optimizer": "adamw_fused_fp32",
}
# streaming passes over its minimum bytes of each measured op: the amax timed is PyTorch's eager max(abs(x)), ``abs``
# reading and writing the tensor and the reduction reading it again (hnplan.compute.fp8_recipes, "The amax pass")
MEASURED_PASSES = {"amax": 3}
LOSS_BYTES_PER_LOGIT = 12.0  # the operator model's loss: bf16 logits read + written forward, twice that backward


def memory_kernel_calibration(catalog: Catalog | None = None) -> dict:
    """The accelerator's ``memory_kernel_efficiency`` read from ``h200_kernels.csv``: each class's measured
    GB/s, less the kernel overhead the model adds (``kernel_overhead_us``), over the copy's (``d2d_copy``), per
    streaming pass of the op as measured (:data:`MEASURED_PASSES`: ``amax`` is the bandwidth of one of its three
    passes); ``cross_entropy`` is the fp32 loss forward + backward over 8,192 tokens x 128,256 classes at
    :data:`LOSS_BYTES_PER_LOGIT` (the operator model's bytes) over the copy bandwidth."""
    cat = catalog or load_catalog()
    ref = cat.reference("h200_kernels").set_index("op")
    launch = units.us_to_s(cat.accelerator(FIT_ACCELERATOR).kernel_overhead_us)  # the model adds it to every kernel
    copy = units.GBps_to_Bps(float(ref.loc["d2d_copy", "GBps"]))
    out = {}
    for cls, op in MEMORY_KERNEL_ROWS.items():
        t = float(ref.loc[op, "time_s"])
        # at most the copy: a kernel streaming as fast as it (the residual add) is a copy
        passes = MEASURED_PASSES.get(cls, 1)
        out[cls] = min(1.0, passes * units.GBps_to_Bps(float(ref.loc[op, "GBps"])) * t / (t - launch) / copy)
    ce_s = float(ref.loc["cross_entropy_fwd_bwd_fp32", "time_s"]) - 2 * launch  # forward and backward kernels
    out["cross_entropy"] = 8192 * 128256 * LOSS_BYTES_PER_LOGIT / ce_s / copy
    return out


# --- the same law fitted to any GEMM table of a chip: the OpenXLA sweeps per compute capability ------------------
# (gpu_arch, dtype_key of the table) -> (hnplan dtype, the table's CSV); see data/reference/README.md
XLA_TABLES = {"sm_100": "xla_matmul_sm100", "sm_90": "xla_matmul_sm90"}
XLA_DTYPES = {
    "bf16xbf16->bf16": "bf16",
    "f8e4m3fnxf8e4m3fn->bf16": "fp8",
    "f8e4m3fnxf8e5m2->bf16": "fp8",
    "f8e5m2xf8e4m3fn->bf16": "fp8",
}
# the law's shape parameters, fitted to a chip's sweep with its large-shape ceiling held: a sweep whose largest
# GEMM is 4 x 4096^3 (a third of a millisecond) cannot pin the ceiling that sustained training shapes run at (the
# ceiling and the K depth trade off: fitted freely, the sm_90 sweep gives an H100 ceiling of 0.88 of the peak,
# above every published measurement). The host floor (host_dispatch_us) is the framework's: the sweep times
# kernels on the device, not calls, so it stays carried.
SHAPE_PARAMS = (
    "gemm_k_overhead",
    "kernel_overhead_us",
    "gemm_overlap_exponent",
    "gemm_splitk_us",
    "gemm_wave_weight",
)
# name -> (start, low, high) of the least-squares search, not catalog values: assumed ranges that hold any
# physical value (an efficiency is a fraction of peak; per-kernel overheads of a few to tens of us, around
# the 2-13 us the H200 sweep shows); a fitted value sitting on a bound marks a fit to distrust
_BOUNDS = {
    "gemm_efficiency": (0.7, 0.3, 1.0),
    "gemm_k_overhead": (32.0, 0.0, 4096.0),
    "kernel_overhead_us": (3.0, 0.0, 30.0),
    "gemm_overlap_exponent": (4.0, 1.0, 30.0),
    "host_dispatch_us": (12.0, 0.0, 40.0),
    "gemm_splitk_us": (3.0, 0.0, 20.0),
    "gemm_wave_weight": (0.3, 0.0, 1.0),
}
# tiles compared for the Blackwell fit (output rows x columns x K step): Hopper's effective 64 x 128, the
# 128 x 128 / 128 x 256 / 256 x 128 tiles of one- and two-SM tcgen05 MMA kernels (CUTLASS Blackwell examples)
BLACKWELL_TILES = ((64, 128, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64))


def xla_table(catalog: Catalog, arch: str, dtype_key: str, min_flop: float = 0.0) -> pd.DataFrame:
    """One dtype of an OpenXLA matmul sweep as a GEMM table: ``m_tokens, n, k, groups`` (the batch ``b``) and
    ``time_s`` = 2 b m n k / FLOP/s [s]; shapes below ``min_flop`` (2 b m n k) left out."""
    ref = catalog.reference(XLA_TABLES[arch])
    ref = ref[ref["dtype_key"] == dtype_key]
    flop = 2.0 * ref["b"] * ref["m"] * ref["n"] * ref["k"]
    out = pd.DataFrame(
        {
            "m_tokens": ref["m"],
            "n": ref["n"],
            "k": ref["k"],
            "groups": ref["b"],
            "time_s": flop / (units.tflops_to_flops_per_s(ref["tflops"])),
            "dtype": XLA_DTYPES[dtype_key],
        }
    )
    return out[flop >= min_flop].reset_index(drop=True)


def with_params(acc: Accelerator, params: dict) -> Accelerator:
    """A copy of ``acc`` with law parameters by name; ``gemm_efficiency.<dtype>`` sets one dtype's ceiling."""
    update: dict = {}
    eff = dict(acc.gemm_efficiency or {})
    for name, v in params.items():
        if name.startswith("gemm_efficiency."):
            eff[name.split(".", 1)[1]] = float(v)
        elif name == "gemm_tile_mnk":
            update[name] = list(v)
        else:
            update[name] = float(v)
    return acc.model_copy(update={**update, "gemm_efficiency": eff})


def predict_table(acc: Accelerator, table: pd.DataFrame, *, eager: bool = False) -> np.ndarray:
    """Time of every row of a GEMM table (``m_tokens, n, k``, optional ``groups`` and ``dtype``) [s]; device
    time unless ``eager``."""
    out = np.empty(len(table))
    groups = table["groups"] if "groups" in table else pd.Series(1.0, index=table.index)
    dtypes = table["dtype"] if "dtype" in table else pd.Series("bf16", index=table.index)
    for dt in dtypes.unique():
        sel = (dtypes == dt).to_numpy()
        t = table[sel]
        out[sel] = gemm_time_s(
            acc,
            dt,
            t["m_tokens"].to_numpy(float),
            t["n"].to_numpy(float),
            t["k"].to_numpy(float),
            groups[sel].to_numpy(float),
            eager=eager,
        )
    return out


def fit_law_to_table(
    acc: Accelerator, table: pd.DataFrame, names: tuple[str, ...], *, eager: bool = False, offset_s: float = 0.0
) -> dict:
    """Fit the named law parameters of ``acc`` to a GEMM table (least squares on log(predicted / measured)), the
    prediction being the law's time plus ``offset_s`` per row (a measurement's own fixed cost, [s]).

    Returns
    -------
    dict
        ``params`` (name -> value), ``mape`` [-], ``accelerator`` (``acc`` with them) and ``table`` (rows with
        ``predicted_s`` and ``error``).
    """
    spec = [_BOUNDS[n.split(".")[0]] for n in names]
    t = table["time_s"].to_numpy(float)

    def resid(x):
        return np.log((predict_table(with_params(acc, dict(zip(names, x))), table, eager=eager) + offset_s) / t)

    res = least_squares(resid, [s[0] for s in spec], bounds=([s[1] for s in spec], [s[2] for s in spec]))
    params = dict(zip(names, (float(v) for v in res.x)))
    fitted = with_params(acc, params)
    pred = predict_table(fitted, table, eager=eager) + offset_s
    df = table.assign(predicted_s=pred, error=pred / t - 1.0)
    return {"params": params, "mape": float(df["error"].abs().mean()), "accelerator": fitted, "table": df}


XLA_HOPPER = "h100-sxm"  # the sm_90 sweep's SKU is not stated; the H100 SXM is assumed (132 SMs, as the H200)


def xla_tool_offset_s(catalog: Catalog | None = None) -> float:
    """The OpenXLA sweep's own fixed cost per GEMM [s], beyond the device time of the law: one constant fitted to
    the sm_90 bf16 rows with the Hopper law exactly as fitted to the H200 PyTorch sweep (about 1.7 us; XLA's
    kernels and its CUPTI timing of them, against PyTorch's cuBLAS calls timed with CUDA events). It belongs to
    the measurement, not to a chip: :func:`fit_xla_sweep` adds it to every prediction of the sweep."""
    cat = catalog or load_catalog()
    table = xla_table(cat, "sm_90", "bf16xbf16->bf16")
    base = predict_table(cat.accelerator(XLA_HOPPER), table)
    t = table["time_s"].to_numpy(float)
    # search from 2 us within 0-20 us [us]: a range for the optimiser, not a value (the fit lands near 1.7 us)
    res = least_squares(lambda x: np.log((base + units.us_to_s(x[0])) / t), [2.0], bounds=([0.0], [20.0]))
    return units.us_to_s(float(res.x[0]))


def fit_xla_sweep(
    catalog: Catalog | None = None,
    arch: str = "sm_100",
    accelerator: str = "b200",
    dtype_keys: tuple[str, ...] = ("bf16xbf16->bf16", "f8e4m3fnxf8e4m3fn->bf16"),
    names: tuple[str, ...] = SHAPE_PARAMS,
    tiles: tuple[tuple[int, int, int], ...] = BLACKWELL_TILES,
    offset_s: float | None = None,
) -> dict:
    """The law's ``names`` on ``accelerator`` fitted to the ``arch`` rows of the OpenXLA sweep for ``dtype_keys``
    together (one K depth, overhead and wave tail for all dtypes; each dtype's ceiling as the catalog has it
    unless ``names`` holds ``gemm_efficiency.<dtype>``), once per tile of ``tiles``; the tile with the smallest
    MAPE is kept. Device time, as the sweep times kernels (CUPTI), not framework calls, plus the sweep's own fixed
    cost ``offset_s`` (default :func:`xla_tool_offset_s`, calibrated on Hopper where both sweeps exist).

    The default is the Blackwell fit that ``data/accelerators/b200.yaml`` stores; ``arch="sm_90",
    accelerator="h100-sxm", dtype_keys=("bf16xbf16->bf16",)`` is the same method on Hopper, where the H200 sweep
    of :func:`fit_gemm_law` checks it.

    Returns
    -------
    dict
        As :func:`fit_law_to_table` for the kept tile, plus ``tile``, ``by_tile`` (tile -> MAPE) and ``offset_s``.
    """
    cat = catalog or load_catalog()
    offset = xla_tool_offset_s(cat) if offset_s is None else offset_s
    table = pd.concat([xla_table(cat, arch, key) for key in dtype_keys], ignore_index=True)
    best, by_tile = None, {}
    for tile in tiles:
        acc = with_params(cat.accelerator(accelerator), {"gemm_tile_mnk": tile})
        fit = fit_law_to_table(acc, table, names, offset_s=offset)
        by_tile[tuple(tile)] = fit["mape"]
        if best is None or fit["mape"] < best["mape"]:
            best = {**fit, "tile": tuple(tile)}
    return {**best, "by_tile": by_tile, "offset_s": offset}
