"""Wall time of the batch reports: the default scenario, a re-run with nothing to redo, and every
scenario with 2 worker processes.

Acceptance targets (issue: report suite; issue 16): default scenario under 60 s once the environment
exists; a re-run of it with nothing to redo (the whole ``hnplan report`` process) under 2 s; all
scenarios with --jobs 2 under 300 s on a 2-core machine.

Usage: .venv/bin/python benchmarks/bench_reports.py [--out DIR] [--no-all]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hnplan.reports import load_scenarios, run_reports


def bench(scenario: str, jobs: int, out: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    results = run_reports(load_scenarios(scenario), out, jobs=jobs, force=True, progress=False)
    ok = sum(r.status == "ok" for r in results)
    return time.perf_counter() - t0, ok, len(results)


def rerun(out: str, runs: int = 5) -> tuple[float, float]:
    """Median wall and CPU [s] of a whole ``hnplan report`` process that has nothing to redo."""
    exe = Path(sys.executable).parent / "hnplan"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "hnplan"]
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            argv + ["report", "--scenario", "default", "--out", out],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--no-all", action="store_true", help="leave out the run of every scenario")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or tmp
        for scenario, jobs, target in (("default", 1, 60.0), ("all", 2, 300.0)):
            if scenario == "all" and args.no_all:
                continue
            secs, ok, n = bench(scenario, jobs, out)
            verdict = "within" if secs < target else "OVER"
            print(
                f"{scenario:8} --jobs {jobs}: {secs:6.1f} s for {n} reports ({ok} ok); target {target:.0f} s: {verdict}"
            )
            if scenario == "default":
                wall, cpu = rerun(out)
                verdict = "within" if wall < 2.0 else "OVER"
                print(
                    f"default re-run, nothing to redo (whole process, median of 5): {wall:.2f} s wall, {cpu:.2f} s "
                    f"CPU; target 2 s: {verdict} (load average {os.getloadavg()[0]:.1f})"
                )


if __name__ == "__main__":
    main()
