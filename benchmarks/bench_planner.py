"""Benchmark of the training-plan search: candidates evaluated per second and the wall time of the
full search for Llama 3.1 405B on 16,384 H100 (hgx-h100-ib-ndr), sequence 8,192, 16M-token batch.

Usage: python benchmarks/bench_planner.py [--repeat N]

Prints the first (cold: operator tables built) and the best of N runs. Targets (issue 6): >= 100,000
candidates per second and the full search well under one second on a 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hnplan.catalog import load_catalog
from hnplan.planning.training import candidate_frame, evaluate_plans, make_job, search_plans

MODEL, SYSTEM, GPUS, SEQ, BATCH = "llama3.1-405b", "hgx-h100-ib-ndr", 16384, 8192, 2048


def run_once(cat):
    t0 = time.perf_counter()
    df = search_plans(MODEL, SYSTEM, GPUS, SEQ, BATCH, catalog=cat)
    return time.perf_counter() - t0, df


def main(repeat: int = 5) -> dict:
    cat = load_catalog()
    cat.model(MODEL), cat.system(SYSTEM)  # catalog parsing is not part of the search
    times = []
    for _ in range(repeat):
        dt, df = run_once(cat)
        times.append(dt)
    n = df.attrs["searched"]
    # the evaluator alone on a large table: every candidate of DeepSeek-V3 on 2,048 H800 (MoE, EP searched)
    job = make_job("deepseek-v3", "hgx-h800-ib", 2048, 4096, 15360, catalog=cat)
    cands = candidate_frame(job.model, job.system, 2048, 4096, 15360)
    t0 = time.perf_counter()
    evaluate_plans(job, cands)
    dt_big = time.perf_counter() - t0
    best = df.iloc[0]
    out = dict(
        candidates=n,
        feasible=df.attrs["feasible"],
        first_s=times[0],
        best_s=min(times),
        per_s_first=n / times[0],
        per_s_best=n / min(times),
        big_candidates=len(cands),
        big_s=dt_big,
        big_per_s=len(cands) / dt_big,
    )
    print(f"{MODEL} on {GPUS:,} x {SYSTEM}: {n:,} candidates ({out['feasible']:,} fit)")
    print(f"  full search: first run {times[0]:.3f} s, best of {repeat} {min(times):.3f} s")
    print(f"  candidates evaluated per second: {out['per_s_first']:,.0f} (first), {out['per_s_best']:,.0f} (best)")
    print(
        f"  best plan: TP{best.tp} PP{best.pp} DP{best.dp} CP{best.cp} mb{best.microbatch_size} "
        f"v{best.virtual_stages} ZeRO{best.zero_stage} {best.recompute}: {best.step_time_s:.2f} s/step, "
        f"MFU {best.mfu:.1%}"
    )
    print(
        f"deepseek-v3 on 2,048 x hgx-h800-ib: {len(cands):,} candidates evaluated in {dt_big:.3f} s "
        f"= {out['big_per_s']:,.0f} per second"
    )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    main(ap.parse_args().repeat)
