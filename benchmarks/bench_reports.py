"""Wall time of the batch reports: the default scenario, and every scenario with 2 worker processes.

Acceptance targets (issue: report suite): default scenario under 60 s once the environment exists;
all scenarios with --jobs 2 under 300 s on a 2-core machine.

Usage: .venv/bin/python benchmarks/bench_reports.py [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from hnplan.reports import load_scenarios, run_reports


def bench(scenario: str, jobs: int, out: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    results = run_reports(load_scenarios(scenario), out, jobs=jobs, force=True, progress=False)
    ok = sum(r.status == "ok" for r in results)
    return time.perf_counter() - t0, ok, len(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or tmp
        for scenario, jobs, target in (("default", 1, 60.0), ("all", 2, 300.0)):
            secs, ok, n = bench(scenario, jobs, out)
            verdict = "within" if secs < target else "OVER"
            print(f"{scenario:8} --jobs {jobs}: {secs:6.1f} s for {n} reports ({ok} ok); target {target:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
