"""Benchmark of the training-plan search: candidates evaluated per second, split into candidate
generation, evaluation and the fixed per-call cost, with the peak memory, for two searches:

* Llama 3.1 405B on 16,384 H100 (hgx-h100-ib-ndr), sequence 8,192, 2,048 sequences per step: the
  whole search (:func:`hnplan.planning.training.search_plans`: candidates, evaluation, ranking);
* DeepSeek-V3 on 2,048 H800 (hgx-h800-ib), sequence 4,096, 15,360 sequences, expert parallelism
  searched too: candidate generation and the evaluator.

Usage: python benchmarks/bench_planner.py [--repeat N] [--plain-allocator]

*Cold* is the first search on a fresh catalog in a process that has searched the same data before (best of N
fresh catalogs): the collective times, placements and per-shape activation bytes computed afresh, the
operator-level part times and ring kernel times found under the numbers they depend on
(:func:`hnplan.planning.training.stage_compute.content_memo`); *first* is the same with that memo cleared, as
the first search of a process (a one-shot ``hnplan train``) pays it; *warm* is the best of N repeats with the
same job and catalog (the collective times and per-shape activation bytes memoised on the job too, as in a
sizing loop or a sweep). Wall time and process CPU time are both printed:
on a shared machine the CPU time is the steadier figure. The fixed per-call cost is a one-candidate
evaluation (warm). Peak memory: the largest Python-traced allocation during one warm evaluation
(tracemalloc, numpy arrays included) and the process's maximum resident set size. The process keeps freed memory in its heap as the ``hnplan``
command line and the sweep's workers do (:func:`hnplan.allocator.keep_freed_memory`; ``--plain-allocator``
measures with glibc's defaults, as a notebook runs: the cold figures then swing by 1-2 ms with page faults).
Target (issue 16):
1,000,000 candidates per second in one process for both searches, on the machine the issue measured on. The last
lines give each first-search rate at that machine's speed as ``benchmarks/bench_startup.py`` scales its start-up
times: times this machine's yardstick (``python -c "import numpy, pandas"``, median wall of five runs after one
warm-up) over the issue's 0.3 s (``--no-yardstick`` leaves it out). The same first search is 90 million
instructions (callgrind) on any machine; its rate in seconds is 2-3x apart between the shared machines this is run on.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hnplan.allocator import keep_freed_memory
from hnplan.catalog import Catalog
from hnplan.planning.training import candidate_frame, evaluate_plans, make_job, rank_plans
from hnplan.planning.training.stage_compute import clear_content_memo

CASES = (
    ("llama3.1-405b", "hgx-h100-ib-ndr", 16384, 8192, 2048),
    ("deepseek-v3", "hgx-h800-ib", 2048, 4096, 15360),
)


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _fresh_job(case):
    model, system, gpus, seq, batch = case
    cat = Catalog()  # fresh: nothing memoised
    # catalog parsing (the entries, the memory-overheads file) is not part of the search
    cat.model(model), cat.system(system), cat.design(system), cat.memory_overheads
    return make_job(model, system, gpus, seq, batch, catalog=cat)


def bench_case(case, repeat: int) -> dict:
    """Time one search case: cold (best of ``repeat`` fresh catalogs) and warm (best of ``repeat``)."""
    _, _, gpus, seq, batch = case

    def candidates(job):  # the candidate set the search itself generates (search.py: the stack's plan rules)
        return candidate_frame(
            job.model,
            job.system,
            gpus,
            seq,
            batch,
            zero_with_pipeline=job.stack is not None and job.stack.zero_with_pipeline,
            balanced_ends=job.choices.pipeline_balanced_ends,
            pipeline_layout=job.choices.pipeline_layout,
            uneven_stages=job.choices.pipeline_uneven_stages,
        )

    def cold(job):
        cands, gen_s, gen_cpu = _timed(lambda: candidates(job))
        return cands, gen_s, gen_cpu, *_timed(lambda: evaluate_plans(job, cands))[1:]

    firsts = []
    for _ in range(repeat):
        job = _fresh_job(case)
        clear_content_memo()  # as in a process that has not searched this model, accelerator and stack
        firsts.append(cold(job))
    first_s, first_cpu = min(c[3] for c in firsts), min(c[4] for c in firsts)
    colds = [cold(_fresh_job(case)) for _ in range(repeat)]
    cold_s, cold_cpu = min(c[3] for c in colds), min(c[4] for c in colds)
    job = _fresh_job(case)
    cands, gen_s, gen_cpu = cold(job)[:3]

    def gen():
        return candidates(job)

    warm = [_timed(lambda: evaluate_plans(job, cands))[1:] for _ in range(repeat)]
    warm_s, warm_cpu = min(w for w, _ in warm), min(c for _, c in warm)
    gens = [_timed(gen)[1:] for _ in range(repeat)]
    gen_s, gen_cpu = min(gen_s, *(w for w, _ in gens)), min(gen_cpu, *(c for _, c in gens))
    one = cands.head(1)
    fixed_s = min(_timed(lambda: evaluate_plans(job, one))[1] for _ in range(repeat))
    searches = [_timed(lambda: rank_plans(job))[1:] for _ in range(repeat)]
    search_s, search_cpu = min(w for w, _ in searches), min(c for _, c in searches)
    tracemalloc.start()
    evaluate_plans(job, cands)
    peak_b = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    n = len(cands)
    return dict(
        case=case,
        candidates=n,
        generation_s=gen_s,
        generation_cpu_s=gen_cpu,
        first_eval_s=first_s,
        first_eval_cpu_s=first_cpu,
        cold_eval_s=cold_s,
        cold_eval_cpu_s=cold_cpu,
        warm_eval_s=warm_s,
        warm_eval_cpu_s=warm_cpu,
        fixed_s=fixed_s,
        search_s=search_s,
        search_cpu_s=search_cpu,
        first_per_s=n / (gen_s + first_s),
        first_per_cpu_s=n / (gen_cpu + first_cpu),
        cold_per_s=n / (gen_s + cold_s),
        cold_per_cpu_s=n / (gen_cpu + cold_cpu),
        warm_per_s=n / (gen_s + warm_s),
        warm_per_cpu_s=n / (gen_cpu + warm_cpu),
        eval_per_s=n / warm_s,
        peak_traced_MiB=peak_b / 2**20,
    )


def machine_factor(runs: int = 5) -> tuple[float, float]:
    """This machine's yardstick [s] (median wall of ``runs`` runs of ``python -c "import numpy, pandas"`` after one
    warm-up) and the factor that puts a rate measured here at the speed of the machine issue 16 set its targets on
    (yardstick / ``bench_startup.REFERENCE_YARDSTICK_S``, 0.3 s): > 1 where this machine is slower."""
    from bench_startup import REFERENCE_YARDSTICK_S, timed  # noqa: PLC0415 (only when the scaled line is asked for)

    wall, _, _ = timed([sys.executable, "-c", "import numpy, pandas"], runs)
    return wall, wall / REFERENCE_YARDSTICK_S


def main(repeat: int = 5, plain_allocator: bool = False, yardstick: bool = True) -> list[dict]:
    if not plain_allocator:
        keep_freed_memory()  # as the hnplan command line and the sweep's workers run (hnplan.allocator)
    print(f"allocator: {'glibc defaults' if plain_allocator else 'freed memory kept (hnplan.allocator)'}")
    results = []
    for case in CASES:
        r = bench_case(case, repeat)
        results.append(r)
        model, system, gpus = case[:3]
        print(f"{model} on {gpus:,} x {system}: {r['candidates']:,} candidates")
        print(
            f"  generation {r['generation_s'] * 1e3:.0f} ms (CPU {r['generation_cpu_s'] * 1e3:.0f} ms); "
            f"evaluation first {r['first_eval_s'] * 1e3:.0f} ms (CPU {r['first_eval_cpu_s'] * 1e3:.0f} ms), "
            f"cold {r['cold_eval_s'] * 1e3:.0f} ms "
            f"(CPU {r['cold_eval_cpu_s'] * 1e3:.0f} ms), warm {r['warm_eval_s'] * 1e3:.0f} ms "
            f"(CPU {r['warm_eval_cpu_s'] * 1e3:.0f} ms); fixed per call {r['fixed_s'] * 1e3:.1f} ms"
        )
        print(
            f"  candidates per second (generation + evaluation): first {r['first_per_s']:,.0f} "
            f"(CPU time: {r['first_per_cpu_s']:,.0f}), cold {r['cold_per_s']:,.0f} "
            f"(CPU time: {r['cold_per_cpu_s']:,.0f}), warm {r['warm_per_s']:,.0f} "
            f"(CPU time: {r['warm_per_cpu_s']:,.0f}); evaluator alone warm "
            f"{r['eval_per_s']:,.0f}"
        )
        print(
            f"  whole search with ranking (warm): {r['search_s'] * 1e3:.0f} ms (CPU {r['search_cpu_s'] * 1e3:.0f} ms); "
            f"peak traced memory of one evaluation {r['peak_traced_MiB']:.0f} MiB"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"process peak resident set: {rss:.0f} MiB (best of {repeat} repeats for the warm figures)")
    if yardstick:
        wall, factor = machine_factor()
        print(
            f"at the reference machine's speed (rates x {factor:.2f}: this machine's yardstick {wall:.3f} s wall over "
            f"0.3 s), first search, target 1,000,000 a second:"
        )
        for r in results:
            rate = r["first_per_cpu_s"] * factor
            print(f"  {r['case'][0]}: {rate:,.0f} {'PASS' if rate >= 1e6 else 'MISS'}")
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--plain-allocator",
        action="store_true",
        help="keep glibc's default trim/mmap thresholds (a notebook's process) instead of the CLI's",
    )
    ap.add_argument("--no-yardstick", action="store_true", help="leave out the rates at the reference machine's speed")
    args = ap.parse_args()
    main(args.repeat, args.plain_allocator, not args.no_yardstick)
