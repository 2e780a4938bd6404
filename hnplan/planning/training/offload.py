"""Offload in the training planner: plans that do not fit in HBM move state to host or pooled memory.

With the stack choice ``offload="auto"`` (:class:`hnplan.catalog.schemas.StackChoices`), every
candidate plan whose per-GPU footprint exceeds HBM moves what does not fit, in the order optimizer
states, weights, activations, into the tiers the system has (:func:`hnplan.memory.tiers.memory_tiers`),
fastest first (gradients stay in HBM: they accumulate over the microbatches):

* optimizer states and weights go to host memory or to the pooled memory (a CXL switch or
  fabric-attached memory shared by ``pooled_memory_nodes``);
* activations go to host memory only (saved after the forward pass, read back in the backward pass;
  Megatron-Core's CPU activation offloading).

Traffic per step, in the busier direction of each tier's link (ZeRO-Infinity, Rajbhandari et al.
SC21, arXiv:2104.07857, Sec. 5-6: states and weights stream through the GPU, which runs the
update, so no CPU optimizer time is assumed):

* optimizer states: read and written back once per step (``1 x`` each way), during the optimizer
  step; they can hide behind the optimizer step and the last microbatch's backward pass (the
  gradients are final only then): window ``t_optimizer + t_bwd_mb``;
* weights: read for the forward and again for the backward pass of every microbatch (``2 m x``),
  prefetched layer by layer behind the step's compute: window ``m t_compute_mb``;
* activations: once each way per microbatch (``m x`` the offloaded bytes, an upper bound when a
  pipeline stage holds several microbatches in flight), behind the step's compute.

On a tier, ``t = traffic / bw + transfers x latency`` (one prefetch per layer and part), and
``exposed = max(0, t_opt - W_opt) + max(0, t_weights + t_act - W_compute)``; tiers are separate
links, so the step's ``t_offload_exposed_s`` is the largest tier's. A plan that fits in HBM is left
as it is: offload never makes a plan slower, and a larger or faster tier never makes an offloaded
plan slower.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.memory.tiers import memory_tiers
from hnplan.planning.training import components as c

#: parts that may move, in order, and the tiers each may move to (activations only to host memory)
ALLOWED = {"optimizer": ("host", "pooled"), "params": ("host", "pooled"), "activations": ("host",)}
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
        transfer per step] and ``fits`` true for the rows offload makes fit.
        ``memory_per_gpu_bytes`` stays the whole footprint (HBM holds it less ``offloaded_bytes``).
    """
    n = len(np.asarray(df["num_microbatches"]))
    df["t_offload_exposed_s"] = 0.0
    for col in COLUMNS:
        df[col] = 0.0
    if job.choices.offload == "none" or n == 0:
        return df
    design = job.catalog.design(job.system)
    tiers = [t for t in memory_tiers(design)[1:] if t.name in ("host", "pooled")]
    if not tiers:
        return df
    hbm = c.hbm_bytes(job.acc)
    total = np.asarray(df["memory_per_gpu_bytes"], dtype=float)
    excess = np.maximum(total - hbm, 0.0)
    m = np.asarray(df["num_microbatches"], dtype=float)
    layers = np.asarray(comp["layers"], dtype=float)
    w_opt = np.asarray(df["t_optimizer_s"], dtype=float) + np.asarray(comp["t_bwd_mb"], dtype=float)
    w_comp = np.asarray(df["t_compute_s"], dtype=float)
    room = {t.name: np.full(n, t.capacity_bytes) for t in tiers}
    moved = {t.name: np.zeros(n) for t in tiers}
    t_opt = {t.name: np.zeros(n) for t in tiers}
    t_rest = {t.name: np.zeros(n) for t in tiers}
    per_step = {"optimizer": np.ones(n), "params": 2.0 * m, "activations": m}
    for part, allowed in ALLOWED.items():
        left = np.minimum(np.asarray(df[f"{part}_bytes"], dtype=float), excess)
        for t in tiers:
            if t.name not in allowed:
                continue
            put = np.minimum(left, room[t.name])
            room[t.name] -= put
            left -= put
            excess -= put
            moved[t.name] += put
            lat = np.where(put > 0, layers * _latency_s(design.system, t.name), 0.0)
            secs = put * per_step[part] / t.bw_Bps + lat
            if part == "optimizer":
                t_opt[t.name] += secs
            else:
                t_rest[t.name] += secs
    exposed = np.max(
        np.vstack([np.maximum(t_opt[k] - w_opt, 0.0) + np.maximum(t_rest[k] - w_comp, 0.0) for k in moved]),
        axis=0,
    )
    transfer = np.max(np.vstack([t_opt[k] + t_rest[k] for k in moved]), axis=0)
    use = (total > hbm) & (excess <= 0.0)  # offloaded and now fits; the rest keep their table rows
    df["offloaded_bytes"] = np.where(use, sum(moved.values()), 0.0)
    df["offload_host_bytes"] = np.where(use, moved["host"], 0.0) if "host" in moved else 0.0
    df["offload_pooled_bytes"] = np.where(use, moved["pooled"], 0.0) if "pooled" in moved else 0.0
    df["offload_transfer_s"] = np.where(use, transfer, 0.0)
    df["t_offload_exposed_s"] = np.where(use, exposed, 0.0)
    df["fits"] = np.asarray(df["fits"]) | use
    return df


def _latency_s(system, tier: str) -> float:
    """Load latency of a tier [s]: the pool's ``pooled_memory_latency_ns``; 0 when not given (host
    memory's latency is far below a layer's transfer time)."""
    if tier == "pooled" and system.pooled_memory_latency_ns:
        return units.ns_to_s(system.pooled_memory_latency_ns)
    return 0.0
