"""Tidy tables of the training planner for notebooks and reports: best plan per design, the scaling
curve over GPU counts, the top candidates, and a sentence that reads them."""

from __future__ import annotations

import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import InfeasiblePlan
from hnplan.labels import name_and_unit
from hnplan.memory.breakdown import hbm_capacity_bytes
from hnplan.planning.training import search_plans

PLAN_COLUMNS = [
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "microbatch_size",
    "num_microbatches",
    "virtual_stages",
    "zero_stage",
    "recompute",
]


def hbm_gib(system, catalog: Catalog | None = None) -> float:
    """Device memory a program can allocate on one GPU of ``system`` [GiB] (:func:`hbm_capacity_bytes`)."""
    cat = catalog or load_catalog()
    return units.to_GiB(hbm_capacity_bytes(cat.accelerator(cat.system(system).accelerator)))


def _best_row(model, system, gpus, seq_len, global_batch_seqs, dtype, cat) -> dict:
    sid = cat.system(system).id
    try:
        df = search_plans(model, system, gpus, seq_len, global_batch_seqs, dtype, catalog=cat)
    except InfeasiblePlan as exc:
        return dict(system=sid, gpus=gpus, status=f"no plan: {exc}")
    if not df.attrs["feasible"]:
        return dict(system=sid, gpus=gpus, status="no plan fits in memory", searched=df.attrs["searched"])
    row = df.iloc[0].to_dict()
    mem = units.to_GiB(row["memory_per_gpu_bytes"])
    cap = hbm_gib(system, cat)
    row.update(
        system=sid,
        gpus=gpus,
        status="ok",
        searched=df.attrs["searched"],
        feasible=df.attrs["feasible"],
        memory_per_gpu_gib=mem,
        hbm_gib=cap,
        hbm_headroom_gib=cap - mem,
    )
    return row


def best_plans(
    model, systems, gpus: int, seq_len: int, global_batch_seqs: int, dtype: str = "bf16", catalog: Catalog | None = None
) -> pd.DataFrame:
    """The fastest plan that fits on each design, one row per system.

    Returns
    -------
    pandas.DataFrame
        ``system, gpus, status`` and, where a plan exists, the :func:`search_plans` columns (plan knobs,
        ``t_<part>_s`` breakdown [s], ``step_time_s``, ``tokens_per_s``, ``mfu`` ...) plus
        ``searched``, ``feasible``, ``memory_per_gpu_gib``, ``hbm_gib`` (what a program can allocate) and
        ``hbm_headroom_gib`` (the difference) [GiB].
    """
    cat = catalog or load_catalog()
    df = pd.DataFrame([_best_row(model, s, gpus, seq_len, global_batch_seqs, dtype, cat) for s in systems])
    df.attrs["units"] = {
        "step_time_s": "s",
        "tokens_per_s": "tokens/s",
        "mfu": "fraction",
        "memory_per_gpu_gib": "GiB",
        "model_tflops_per_gpu": "TFLOP/s",
        "hbm_gib": "GiB",
        "hbm_headroom_gib": "GiB",
    }
    return df


def scaling_curve(
    model,
    systems,
    gpu_counts,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
) -> pd.DataFrame:
    """Best-plan throughput of each design over GPU counts (weak in GPUs, fixed global batch).

    Returns
    -------
    pandas.DataFrame
        One row per (system, gpus): ``tokens_per_s``, ``mfu``, ``step_time_s`` and the plan, or a
        ``status`` saying why no plan exists at that count.
    """
    cat = catalog or load_catalog()
    rows = [_best_row(model, s, int(n), seq_len, global_batch_seqs, dtype, cat) for s in systems for n in gpu_counts]
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"tokens_per_s": "tokens/s", "mfu": "fraction", "gpus": "GPUs"}
    return df


def top_candidates(
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    k: int = 20,
    catalog: Catalog | None = None,
) -> pd.DataFrame:
    """The ``k`` fastest plans that fit, with their knobs, step time, MFU, memory and HBM headroom [GiB].

    Plans the model cannot tell apart (the same step time to the microsecond and the same memory per
    GPU to the MiB: plans whose differences the model does not price) take one row: the fastest-ranked of them, with the others'
    distinguishing knobs in ``same_numbers_as`` ("" when it has no twin).
    """
    df = search_plans(model, system, gpus, seq_len, global_batch_seqs, dtype, catalog=catalog)
    fit = df[df["fits"]].copy()
    key = list(zip(fit["step_time_s"].round(6), units.to_MiB(fit["memory_per_gpu_bytes"]).round()))
    groups: dict[tuple, list[int]] = {}
    for i, kk in zip(fit.index, key):
        groups.setdefault(kk, []).append(i)
    kept = [rows for rows in groups.values()][:k]
    top = fit.loc[[rows[0] for rows in kept]].copy()
    top["same_numbers_as"] = [
        "; ".join(_knob_difference(fit.loc[rows[0]], fit.loc[j]) for j in rows[1:]) for rows in kept
    ]
    top["memory_per_gpu_gib"] = units.to_GiB(top["memory_per_gpu_bytes"])
    top["hbm_headroom_gib"] = hbm_gib(system, catalog) - top["memory_per_gpu_gib"]
    cols = ["step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_gib", "hbm_headroom_gib", "same_numbers_as"]
    out = top[PLAN_COLUMNS + cols].reset_index(drop=True)
    out.attrs["system"] = (catalog or load_catalog()).system(system).id
    out.attrs["units"] = {
        "step_time_s": "s",
        "tokens_per_s": "tokens/s",
        "mfu": "fraction",
        "memory_per_gpu_gib": "GiB",
        "hbm_headroom_gib": "GiB",
    }
    return out


_KNOB_NAMES = {
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "cp": "CP",
    "ep": "EP",
    "microbatch_size": "mb ",
    "num_microbatches": "micro-batches ",
    "virtual_stages": "v ",
    "zero_stage": "ZeRO ",
    "recompute": "recompute ",
}


def _knob_difference(kept, other) -> str:
    """The knobs of ``other`` that differ from ``kept``: ``DP4 CP16 mb 2``."""
    return " ".join(
        f"{_KNOB_NAMES[c]}{other[c] if c == 'recompute' else int(other[c])}"
        for c in PLAN_COLUMNS
        if other[c] != kept[c]
    )


def plan_label(row) -> str:
    """``TP8 PP16 DP128 CP1 EP1, mb 1 x 16, v 6, ZeRO 1, recompute full``."""
    return (
        f"TP{int(row['tp'])} PP{int(row['pp'])} DP{int(row['dp'])} CP{int(row['cp'])} EP{int(row['ep'])}"
        + (f" ETP{int(row['etp'])}" if int(row["ep"]) > 1 and int(row.get("etp", row["tp"])) != int(row["tp"]) else "")
        + ", "
        f"mb {int(row['microbatch_size'])} x {int(row['num_microbatches'])}, v {int(row['virtual_stages'])}, "
        f"ZeRO {int(row['zero_stage'])}, recompute {row['recompute']}"
    )


def training_verdict(best: pd.DataFrame) -> str:
    """A paragraph naming the faster design, by how much, and the step-time part that decides it."""
    ok = best[best["status"] == "ok"]
    if ok.empty:
        return "No design has a plan that divides and fits for this job."
    fast = ok.loc[ok["tokens_per_s"].idxmax()]
    text = (
        f"**{fast['system']}** is fastest: {fast['tokens_per_s']:,.0f} tokens/s at {fast['mfu']:.0%} MFU "
        f"with {plan_label(fast)}."
    )
    for _, r in ok.iterrows():
        if r["system"] == fast["system"]:
            continue
        parts = {c: r[c] - fast[c] for c in ok.columns if c.startswith("t_") and c.endswith("_s")}
        worst = max(parts, key=lambda c: parts[c])
        text += (
            f" {r['system']} reaches {r['tokens_per_s'] / fast['tokens_per_s']:.0%} of that; its largest "
            f"extra step time is {name_and_unit(worst[2:-2])[0]} (+{parts[worst]:.2f} s per step)."
        )
    return text
