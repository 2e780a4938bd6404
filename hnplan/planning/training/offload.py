"""Offload in the training planner: plans that do not fit in HBM move state to host or pooled memory.

With the stack choice ``offload="auto"`` (:class:`hnplan.catalog.schemas.StackChoices`), every
candidate plan whose per-GPU footprint exceeds HBM moves what does not fit, in the order optimizer
states, weights, activations, into the host and pooled memory the system has: the one training offload
model, :func:`hnplan.memory.tiers.training_offload` (states and weights streamed through the GPU,
ZeRO-Infinity, arXiv:2104.07857; its module docstring gives the traffic and the windows), which
``hnplan memory --system`` also reports. Here the windows come from the step: the optimizer step plus
the slowest stage's last backward pass for the optimizer states, the step's compute for weights and
activations, one prefetch per layer of that stage.

A plan that fits in HBM is left as it is: offload never makes a plan slower, and a larger or faster
tier never makes an offloaded plan slower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.memory.tiers import TRAIN_OFFLOAD_TIERS, memory_tiers, offload_tiers, tier_latency_s, training_offload
from hnplan.planning.training import components as c

if TYPE_CHECKING:
    import pandas as pd

ALLOWED = TRAIN_OFFLOAD_TIERS  # parts that may move, in order, and their tiers (activations only to host)
COLUMNS = ("offloaded_bytes", "offload_host_bytes", "offload_pooled_bytes", "offload_transfer_s")


def apply_offload(job: c.Job, df: pd.DataFrame, comp: pd.DataFrame) -> pd.DataFrame:
    """Offload the plans of ``df`` that do not fit in HBM, in place; see the module docstring.

    Parameters
    ----------
    job : Job
    df : DataFrame or dict of arrays
        Rows of :func:`hnplan.planning.training.evaluate_plans` with the step-time parts, the memory
        parts and ``fits`` set, before ``step_time_s`` is summed.
    comp : DataFrame or dict of arrays
        ``layers`` and ``t_bwd_mb`` of :func:`hnplan.planning.training.components.compute_per_microbatch` of the same rows.

    Returns
    -------
    DataFrame
        ``df`` with ``t_offload_exposed_s`` [s], ``offloaded_bytes``, ``offload_host_bytes``,
        ``offload_pooled_bytes`` [bytes per GPU], ``offload_transfer_s`` [s, the busiest tier's
        transfer per step] and ``fits`` true for the rows offload makes fit; with offload on also the
        windows ``offload_window_optimizer_s`` [s] and ``offload_prefetches`` [-] it used.
        ``memory_per_gpu_bytes`` stays the whole footprint (HBM holds it less ``offloaded_bytes``).
    """
    n = len(np.asarray(df["num_microbatches"]))
    df["t_offload_exposed_s"] = 0.0
    for col in COLUMNS:
        df[col] = 0.0
    if job.choices.offload == "none" or n == 0:
        return df
    design = job.catalog.design(job.system)
    tiers = offload_tiers(memory_tiers(design))
    w_opt = np.asarray(df["t_optimizer_s"], dtype=float) + np.asarray(comp["t_bwd_mb"], dtype=float)
    df["offload_window_optimizer_s"] = w_opt  # what memory_summary reuses (the same windows)
    df["offload_prefetches"] = np.asarray(comp["layers"], dtype=float)
    if not tiers:
        return df
    hbm = c.hbm_bytes(job.acc)
    total = np.asarray(df["memory_per_gpu_bytes"], dtype=float)
    off = training_offload(
        {p: np.asarray(df[f"{p}_bytes"], dtype=float) for p in TRAIN_OFFLOAD_TIERS},
        total,
        hbm,
        tiers,
        np.asarray(df["num_microbatches"], dtype=float),
        np.asarray(df["offload_prefetches"]),
        w_opt,
        np.asarray(df["t_compute_s"], dtype=float),
        {t.name: tier_latency_s(design.system, t.name) for t in tiers},
    )
    use = (total > hbm) & (off.unplaced_bytes <= 0.0)  # offloaded and now fits; the rest keep their table rows
    on_tier = {t.name: sum(by_tier.get(t.name, 0.0) for by_tier in off.moved.values()) for t in tiers}
    df["offloaded_bytes"] = np.where(use, sum(on_tier.values()), 0.0)
    df["offload_host_bytes"] = np.where(use, on_tier["host"], 0.0) if "host" in on_tier else 0.0
    df["offload_pooled_bytes"] = np.where(use, on_tier["pooled"], 0.0) if "pooled" in on_tier else 0.0
    df["offload_transfer_s"] = np.where(use, off.transfer_s, 0.0)
    df["t_offload_exposed_s"] = np.where(use, off.exposed_s, 0.0)
    df["fits"] = np.asarray(df["fits"]) | use
    return df
