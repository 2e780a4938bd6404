"""Size the communication terms of a validation row's plan with nothing hidden: an upper bound on what
latency and bandwidth can add to its step.

For each row the planner's best plan is broken into the collectives hnplan times (the same
:func:`hnplan.planning.training.collectives.collective_s` and group placement as the step model) and the
sum of each term is printed twice, as modelled (overlapped where the stack overlaps it) and with every
message on the critical path:

* CP: Transformer Engine's P2P ring (``AttnFuncWithCPAndKVP2P``): per layer ``cp - 1`` K/V messages forward,
  and backward the K/V at the first step, K/V with the partial dK/dV (one message of two blocks) at steps
  ``1 .. cp - 2`` and dK/dV at the last (:func:`hnplan.planning.training.collectives.cp_comm_per_layer`);
* TP: the sequence-parallel all-gathers and reduce-scatters of every layer and pass, and the FP8 current
  scaling amax all-reduces (``tp_comm_per_microbatch``, ``fp8_amax_per_microbatch``);
* DP: the distributed optimizer's reduce-scatter and all-gather, every bucket of ``dp_bucket_params``
  parameters over the ``dp x cp`` group (``dp_comm_exposed``'s buckets).

The "no overlap" step is the modelled compute plus all of these: when it is still shorter than the measured
step, the communication hnplan knows of cannot explain the gap at any overlap, and the rest is in the work
of the kernels. Exposing a second of communication costs a second; hiding it costs the compute beside it
at most the slowdown of the SMs it holds, below 1 (a measured mean of 0.19 and maximum of 0.40 over GPT and
Llama training, arXiv:2507.03114), so the bound holds for any overlap fraction and any such slowdown. When the
bound exceeds the measured step, the share of the hidden communication that would have to be exposed to close
the gap is printed. ``kernels`` is the operator table's kernel count of one micro-batch (GEMM chunks counted
one by one) and ``gap / kernel`` the time each would have to take longer to close the gap; the operator
table's time by kernel class (GEMMs, fused attention, the rest) gives the factor each class alone would need.

``waits / steps`` sizes the per-event candidates the same way: the ring's waits (each of its messages is awaited
before the next step, ``AttnFuncWithCPAndKVP2P``'s ``req.wait()``) and the userbuffers steps of the TP overlap
(each chunked GEMM's kernels as the operator table splits them, :mod:`hnplan.compute.tp_overlap`, and the four
bulk overlaps of the column-parallel data and weight gradients a layer), with the time each would have to cost
to close the gap alone (docs/training.md, "Small tokens per GPU: the four candidates read against the recipes and
the code").

``--per-kernel-us C`` adds a line per row: its step with ``C`` us more on every kernel of the operator table,
``step + C x kernels`` (each kernel is on the compute stream's critical path; more compute can hide more of the
communication, so the planner with ``kernel_overhead_us`` raised by ``C`` gives this or less: 2.9 points of the
step less on University of Florida's 256-GPU row at 11.1 us, where the longer compute hides more DP traffic; docs/training.md, "The GPU-side cost of a kernel boundary"). Run over the rows of one recipe it shows
whether one per-kernel cost can close the rows with little work per GPU without turning the others pessimistic.

Usage: ``python tools/strong_scale_terms.py [--per-kernel-us C] RUN_ID [RUN_ID ...]``
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

import hnplan.planning.training.collectives as coll
from hnplan import units
from hnplan.catalog.runs import training_runs
from hnplan.compute import ACT_BYTES
from hnplan.compute.operators import operator_table
from hnplan.compute.tp_overlap import UB_LAYERS
from hnplan.planning.training.components import BUCKET_MIN_PARAMS, BUCKET_PER_DP_PARAMS, local_params
from hnplan.planning.training.dp_buckets import param_gather_bytes
from hnplan.planning.validation import best_row, run_job


def _cp_ring_s(job, row) -> tuple[float, int]:
    """All CP ring messages of one micro-batch [s] and their count (nothing hidden)."""
    tp, cp, mb = int(row["tp"]), int(row["cp"]), int(row["microbatch_size"])
    if cp == 1:
        return 0.0, 0
    block = mb * job.seq_len / cp * float(coll._kv_width(job, tp)) * ACT_BYTES
    t1, t2 = coll.collective_s(job, "sendrecv", np.array([block, 2 * block]), np.array([cp, cp]), np.array([tp, tp]))
    per_layer = (cp - 1) * t1 + 2 * t1 + (cp - 2) * t2
    return job.model.layers * float(per_layer), job.model.layers * (2 * cp - 1)


def _dp_s(job, row) -> tuple[float, float]:
    """All reduce-scatter and all-gather buckets of a step [s] (ZeRO 1-2 dense model) and one bucket's pair."""
    df = pd.DataFrame([row])
    tp, dp, cp = int(row["tp"]), int(row["dp"]), int(row["cp"])
    dense = float(local_params(job, df)[0][0])
    bucket = job.choices.dp_bucket_params or max(BUCKET_MIN_PARAMS, BUCKET_PER_DP_PARAMS * dp * cp)
    nb = max(1.0, np.ceil(dense / bucket))
    gather = param_gather_bytes(job)[0]
    rs = coll.collective_s(
        job, "reducescatter", np.array([dense / nb * job.choices.grad_reduce_bytes]), [dp * cp], [tp]
    )
    ag = coll.collective_s(job, "allgather", np.array([dense / nb * gather]), [dp * cp], [tp])
    return float(nb * (rs[0] + ag[0])), float(rs[0] + ag[0])


# Transformer Engine's bulk overlaps (initialize_ub's "bulk" layers): the column-parallel GEMMs' data gradient beside
# the all-gather of their input and their weight gradient beside the data gradient's reduce-scatter
BULK_ROWS = frozenset((name, phase) for name in ("qkv_proj", "mlp_up") for phase in ("bwd-data", "bwd-weight"))


def userbuffers_steps(job, row, ops) -> int:
    """Userbuffers steps of one micro-batch: the kernels of the chunked GEMMs (ring-exchange or pipelined chunks,
    as the operator table splits them) and the bulk overlaps, on layers with TP overlap; 0 without it (no
    ``tp_comm``, no sequence parallelism, or TP 1)."""
    ch = job.choices
    if not (ch.tp_comm and ch.sequence_parallel and int(row["tp"]) > 1):
        return 0
    layer = ops["scope"].astype(str).str.endswith("layer").to_numpy()
    pairs = zip(ops["name"].astype(str), ops["phase"].astype(str))
    overlapped = np.array([(n, ph) in UB_LAYERS or (n, ph) in BULK_ROWS for n, ph in pairs])
    return int(ops["count"].to_numpy()[layer & overlapped].sum())


def main(ids: list[str], per_kernel_us: float | None = None) -> None:
    runs = {r.id: r for r in training_runs()}
    missing = [i for i in ids if i not in runs]
    if missing:
        raise SystemExit(f"unknown run id(s): {', '.join(missing)}")
    for rid in ids:
        run = runs[rid]
        if run.metric != "step_time_s":
            raise SystemExit(f"{rid}: metric {run.metric}, not a step time")
        job, row = run_job(run), best_row(run)
        if int(row["pp"]) > 1 or job.model.moe is not None:
            raise SystemExit(f"{rid}: only dense models without a pipeline are sized here")
        df = pd.DataFrame([row])
        m = int(row["num_microbatches"])
        layers = job.model.layers
        tp_all = m * float(
            coll.tp_comm_per_microbatch(job, df, layers)[0] + coll.fp8_amax_per_microbatch(job, df, layers)[0]
        )
        cp_one, n_cp = _cp_ring_s(job, row)
        dp_all, dp_pair = _dp_s(job, row)
        ops = operator_table(
            job.model,
            job.kernel_acc,
            "train",
            int(row["microbatch_size"]),
            run.seq_len,
            tp=int(row["tp"]),
            cp=int(row["cp"]),
            dtype=run.dtype,
            recompute=str(row["recompute"]),
            stack=job.choices,
        )
        kernels = m * int(ops["count"].sum())
        comp, step = float(row["t_compute_s"]), float(row["step_time_s"])
        no_overlap = comp + tp_all + m * cp_one + dp_all + float(row["t_optimizer_s"])
        gap = run.published - step
        ms = 1e3
        print(f"{rid}: TP {int(row['tp'])} CP {int(row['cp'])} DP {int(row['dp'])}, {m} micro-batch(es)")
        print(f"  measured {run.published * ms:.1f} ms, modelled {step * ms:.1f} ms, gap {gap * ms:+.1f} ms")
        print(f"  compute {comp * ms:.1f} ms in {kernels:,} kernels: gap / kernel {gap / kernels * 1e6:.1f} us")
        print(
            f"  CP ring: {m * n_cp} messages, {m * cp_one * ms:.2f} ms all, {float(row['t_cp_comm_exposed_s']) * ms:.2f} ms modelled"
        )
        print(
            f"  TP (SP collectives, amax): {tp_all * ms:.2f} ms all, {float(row['t_tp_comm_exposed_s']) * ms:.2f} ms modelled"
        )
        print(
            f"  DP buckets: {dp_all * ms:.2f} ms all ({dp_pair * ms:.2f} ms a bucket's pair), {float(row['t_dp_comm_exposed_s']) * ms:.2f} ms modelled"
        )
        print(
            f"  no overlap at all: {no_overlap * ms:.1f} ms ({(no_overlap / run.published - 1) * 100:+.1f} % of measured)"
        )
        hideable = no_overlap - step
        if gap > hideable:
            print("  communication cannot close the gap at any overlap fraction or SM slowdown up to 1")
        else:
            print(f"  closing the gap with communication alone exposes {gap / hideable:.0%} of what is hidden")
        ub = m * userbuffers_steps(job, row, ops)
        if n_cp or ub:
            events = [(f"{m * n_cp:,} ring waits", m * n_cp), (f"{ub:,} userbuffers steps", ub)]
            print(
                "  waits / steps: "
                + ", ".join(f"{label} ({gap / n * 1e6:.0f} us each to close)" for label, n in events if n)
            )
        t_op = m * ops["count"].to_numpy(float) * ops["time_s"].to_numpy(float)
        kind = ops["kind"].astype(str)
        classes = {
            "GEMMs": kind.str.startswith("gemm").to_numpy(),
            "attention": (kind == "attention").to_numpy(),
        }
        classes["other kernels"] = ~(classes["GEMMs"] | classes["attention"])
        parts = {name: float(t_op[sel].sum()) for name, sel in classes.items()}
        print(
            "  compute by kernel class: "
            + ", ".join(f"{name} {t * ms:.1f} ms (x{(t + gap) / t:.2f} to close)" for name, t in parts.items() if t > 0)
        )
        if per_kernel_us is not None:
            more = step + kernels * units.us_to_s(per_kernel_us)
            print(
                f"  with {per_kernel_us:g} us more per kernel: {more * ms:.1f} ms "
                f"({(more / run.published - 1) * 100:+.1f} % of measured, now {(step / run.published - 1) * 100:+.1f} %)"
            )


def parse_args(argv: list[str]):
    """The command line (module docstring): ``ids`` and ``per_kernel_us`` (None unless given); argparse refuses
    a missing id or a non-number after ``--per-kernel-us`` with its usage line, exit 2."""
    import argparse

    p = argparse.ArgumentParser(prog="strong_scale_terms.py", description=__doc__.strip().splitlines()[0])
    p.add_argument("ids", nargs="+", metavar="RUN_ID", help="training_runs.yaml ids")
    p.add_argument("--per-kernel-us", type=float, default=None, metavar="C", help="us more on every kernel")
    return p.parse_args(argv)


if __name__ == "__main__":
    a = parse_args(sys.argv[1:])
    main(a.ids, a.per_kernel_us)
