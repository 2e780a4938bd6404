"""Per-row breakdown of the MoE validation rows: the modelled step against the published one, per MoE layer.

Usage::

    python tools/moe_breakdown.py [RUN_ID ...] [--close] [--fixed key=value,...]

Without ids: every validation row of an MoE model. For each row it prints the planner's step parts
(``t_*_s``) and, per MoE layer and micro-batch of the row's plan, in milliseconds:

* ``budget``: the published step per GPU over (micro-batches x layers of a pipeline stage): what one layer
  and micro-batch may take, bubble, data-parallel and optimizer shares included (an upper side);
* ``gpu``: the operator rows' kernel time of one MoE layer, forward + backward
  (:func:`hnplan.compute.operator_table`, the planner's kernels and clocks);
* ``a2a``: the expert all-to-all of one layer and micro-batch, all four passes, before any overlap
  (:func:`hnplan.planning.training.moe.ep_comm_per_microbatch`);
* ``kern`` / ``host``: the kernels the host launches for that layer outside CUDA graphs (forward + backward)
  and their host time at the stack's ``kernel_launch_us``, plus ``moe_host_us_per_kernel`` for those of the MoE
  scopes (:mod:`hnplan.compute.host`);
* ``drain``: what the forward's device-host sync costs beyond the planner's ``max(GPU, host)`` per stretch when the
  kernels that follow it are launched one by one into an empty queue: one host thread, one stream, kernel
  ``i`` starts at ``max(its launch, the end of kernel i - 1)``, so a stretch takes
  ``max_i(H_i + G_>=i)`` (``H_i`` host time up to the launch of kernel ``i``, ``G_>=i`` the GPU time from
  ``i`` on). The forward of one layer is simulated from the sync (before the dispatch all-to-all, as
  Megatron-Core's ``MoEAlltoAllTokenDispatcher`` with ``moe_permute_fusion`` syncs: ``before_ep_alltoall``)
  to the next layer's sync, each row's kernels in the operator table's order, the all-to-alls as GPU work
  of one launch each (the sync's own 10 us and launch are in the planner already).

With ``--close``: the ``moe_host_us_per_kernel`` that would bring the row alone to its published figure
(bisection on the stack override; the catalog's value is one fit over all eager rows, ``tools/fit_moe_host.py``);
none for a row the model finds slower without it. ``--fixed`` replaces entries of the row's fixed plan
(e.g. the preset file's ``microbatch_size=1,virtual_stages=12`` for the H100 Qwen3 row).
"""

from __future__ import annotations

import sys

import pandas as pd

from hnplan import units
from hnplan.catalog.runs import training_runs
from hnplan.compute import operator_table
from hnplan.compute.host import (
    MOE_SCOPES,
    ROUTER_PREPROCESS_KERNELS,
    captured,
    graph_scope,
    kernels_per_row,
    moe_kernel_host_s,
)
from hnplan.planning.training.moe import ep_comm_per_microbatch
from hnplan.planning.validation import predict_run, run_job

FWD, BWD = ("fwd",), ("bwd", "bwd-data", "bwd-weight")


def fifo_s(launches: list[tuple[float, float]]) -> float:
    """Time of a stretch of kernels ``(host_s, gpu_s)`` launched in order by one host thread into one
    stream that starts empty, the host level with the GPU [s]."""
    h = g = 0.0
    for host, gpu in launches:
        h += host
        g = max(g, h) + gpu
    return max(g, h)


def _kernels(df: pd.DataFrame, ch, local_experts: float, phases, a2a: float) -> list[tuple[float, float]]:
    """The launches of one MoE layer's rows of ``phases`` in table order (the forward from the sync on)."""
    launch, moe_launch = units.us_to_s(ch.kernel_launch_us), moe_kernel_host_s(ch)
    out: list[tuple[float, float]] = []
    pre: list[tuple[float, float]] = []  # the forward up to the sync: attention, router, preprocess
    for r in df.itertuples():
        if r.phase not in phases:
            continue
        n = max(1, round(kernels_per_row(r.name, r.scope, r.kind, local_experts, ch)))
        g = graph_scope(r.name, r.scope)
        cost = 0.0 if captured(g, ch) else (moe_launch if g in MOE_SCOPES else launch)
        rows = [(cost, r.time_s / n)] * n
        if r.name == "router" and r.phase in ("fwd", "bwd-data"):  # its other kernels, once per pass
            if not (captured("moe_router", ch) and captured("moe_preprocess", ch)):
                rows += [(moe_launch, 0.0)] * int(ROUTER_PREPROCESS_KERNELS[ch.ep_dispatcher] - 1)
        if r.name == "router" and phases == FWD:
            pre, out = out + rows, [(launch, a2a)]  # the sync: the dispatch opens the next stretch
            continue
        out += rows
        if r.name == "expert_down" and phases == FWD:
            out.append((launch, a2a))  # the combine all-to-all
    return out + pre  # from the sync to the next layer's sync


def breakdown(run, close: bool, fixed: dict | None) -> None:
    if fixed:
        run = run.model_copy(update={"fixed": {**run.fixed, **fixed}})
    b = predict_run(run)
    err = 100 * (float(b[run.metric]) / run.published - 1)
    job = run_job(run)
    ch, moe = job.choices, job.model.moe
    mb, tp, cp, ep, pp = (int(b[k]) for k in ("microbatch_size", "tp", "cp", "ep", "pp"))
    df = operator_table(
        job.model, job.kernel_acc, "train", mb, run.seq_len, tp=tp, cp=cp, ep=ep, dtype=run.dtype, stack=ch
    )
    df = df[df.scope == "moe-layer"]
    plan = pd.DataFrame([{k: b[k] for k in ("tp", "pp", "cp", "ep", "microbatch_size", "recompute")}])
    a2a_all = float(ep_comm_per_microbatch(job, plan, 1)[0])  # one layer, all passes
    one = a2a_all / 4.0
    local = moe.experts / ep
    fwd, bwd = _kernels(df, ch, local, FWD, one), _kernels(df, ch, local, BWD, one)
    g_f, h_f = sum(g for _, g in fwd), sum(h for h, _ in fwd)
    g_b, h_b = sum(g for _, g in bwd), sum(h for h, _ in bwd)
    n_kern = sum(1 for h, _ in fwd + bwd if h > 0)
    drain = fifo_s(fwd) - max(g_f, h_f)  # the backward has no sync: one stretch, max(G, H) in the planner
    if run.metric == "step_time_s":  # the published step itself (the MLPerf rows)
        step = run.published
    else:  # tokens/s per GPU
        step = run.global_batch_seqs * run.seq_len / (run.gpus * run.published)
    budget = step / (float(b["num_microbatches"]) * job.model.layers / pp)
    ms = 1e3
    parts = "  ".join(f"{k[2:-2]}={float(v):.2f}" for k, v in b.items() if k.startswith("t_") and k.endswith("_s"))
    print(f"{run.id}: {float(b[run.metric]):,.0f} vs {run.published:,.0f} {run.metric} ({err:+.0f} %)")
    print(
        f"  {job.kernel_acc.id} TP{tp} PP{pp} EP{ep} mb{mb} v{b.virtual_stages} m{b.num_microbatches} "
        f"rc-{b.recompute}; dispatcher {ch.ep_dispatcher}, graphs {list(ch.cuda_graph_scope) or '-'}, "
        f"launch {ch.kernel_launch_us:g} us, MoE host {ch.moe_host_us_per_kernel:g} us a kernel; step {step:.2f} s published; {parts}"
    )
    print(
        f"  per MoE layer and micro-batch [ms]: budget {budget * ms:.2f} | gpu {(g_f + g_b - 2 * one) * ms:.2f}"
        f" (fwd {(g_f - 2 * one) * ms:.2f}) | a2a {a2a_all * ms:.2f} | kern {n_kern}"
        f" host {(h_f + h_b) * ms:.2f} | drain {drain * ms:.2f}"
    )
    if close:
        us = _closing_moe_host_us(run)
        print(
            f"  moe_host_us_per_kernel closing the row (catalog {ch.moe_host_us_per_kernel:g} us): "
            f"{'none (not optimistic without it)' if us != us else 'beyond 300 us' if us == float('inf') else f'{us:.0f} us'}"
        )


def _closing_moe_host_us(run, lo: float = 0.0, hi: float = 300.0) -> float:
    def err(us: float) -> float:
        r = run.model_copy(update={"overrides": {**(run.overrides or {}), "moe_host_us_per_kernel": us}})
        return float(predict_run(r)[run.metric]) / run.published - 1.0

    if err(hi) > 0:
        return float("inf")
    if err(lo) < 0:  # slower than published even without the MoE host work
        return float("nan")
    for _ in range(12):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if err(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


def main(argv: list[str]) -> None:
    close = "--close" in argv
    fixed = None
    if "--fixed" in argv:
        spec = argv[argv.index("--fixed") + 1]
        fixed = {k: int(v) if v.isdigit() else v for k, v in (kv.split("=") for kv in spec.split(","))}
        argv = [a for a in argv if a != spec]
    ids = [a for a in argv if not a.startswith("--")] or None
    for run in training_runs():
        if ids is not None and run.id not in ids:
            continue
        if ids is None and not any(m in run.model for m in ("deepseek", "mixtral", "qwen3")):
            continue
        breakdown(run, close, fixed)


if __name__ == "__main__":
    main(sys.argv[1:])
