"""Start-up of the command line (issue 16): wall and CPU time of whole processes, the median of N runs.

Prints the yardstick (``python -c "import numpy, pandas"``), a fully given ``hnplan train`` and its
ratio to the yardstick (target: within 1.5x), then every sub-command's ``--help`` and one typical call
(target: under 0.6 s where the command's own work allows). CPU time (user + system of the child) is
quoted beside wall time: on a shared machine it is the steadier of the two.

Usage: .venv/bin/python benchmarks/bench_startup.py [--runs N]
(``farm-bench -n 5 --vs "python -c 'import numpy, pandas'" -- hnplan train ...`` gives the same ratio
from outside, paired run by run.)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
HNPLAN = [str(BIN / "hnplan")] if (BIN / "hnplan").exists() else [sys.executable, "-m", "hnplan"]

TRAIN = [
    "train",
    "--model",
    "llama3.1-405b",
    "--system",
    "hgx-h100-ib-ndr",
    "--gpus",
    "16384",
    "--tp",
    "8",
    "--pp",
    "16",
    "--dp",
    "128",
    "--seq-len",
    "8192",
    "--global-batch-tokens",
    "16777216",
    "--recompute",
    "full",
    "--microbatch-size",
    "1",
    "--virtual-stages",
    "1",
    "--zero",
    "1",
    "--json",
]
TYPICAL = {
    "catalog": ["catalog", "show", "h100-sxm"],
    "collective": ["collective", "--op", "allreduce", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--size", "1GB"],
    "infer": [
        "infer",
        "--model",
        "llama3.1-70b",
        "--system",
        "hgx-h100-ib-ndr",
        "--tp",
        "8",
        "--input-tokens",
        "2048",
        "--output-tokens",
        "256",
        "--batch",
        "32",
    ],
    "memory": [
        "memory",
        "--model",
        "llama3.1-70b",
        "--tp",
        "8",
        "--pp",
        "4",
        "--dp",
        "8",
        "--seq-len",
        "8192",
        "--microbatch-size",
        "1",
    ],
    "reliability": ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "16384", "--model", "llama3.1-405b"],
    "roofline": [
        "roofline",
        "--model",
        "llama3.1-70b",
        "--accelerator",
        "h100-sxm",
        "--phase",
        "prefill",
        "--batch",
        "1",
        "--seq-len",
        "4096",
    ],
    "size": [
        "size",
        "--model",
        "llama3.1-8b",
        "--system",
        "hgx-h100-ib-ndr",
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--seq-len",
        "4096",
        "--global-batch-tokens",
        "1048576",
    ],
    "tco": ["tco", "--system", "gb200-nvl72", "--gpus", "1152"],
    "topology": ["topology", "--system", "hgx-h100-ib-ndr", "--gpus", "16384"],
    "train": TRAIN,
}


def timed(argv: list[str], runs: int) -> tuple[float, float, int]:
    """Median wall [s] and CPU [s] of ``runs`` runs after one warm-up, and the last exit code."""
    walls, cpus, rc = [], [], 0
    for i in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        rc = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"}
        ).returncode
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:  # the first run warms the file cache and the bytecode
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), rc


def main(runs: int = 5) -> dict:
    from hnplan.cli import command_modules

    out = {}
    base_wall, base_cpu, _ = timed([sys.executable, "-c", "import numpy, pandas"], runs)
    train_wall, train_cpu, rc = timed(HNPLAN + TRAIN, runs)
    out.update(
        base_wall=base_wall,
        base_cpu=base_cpu,
        train_wall=train_wall,
        train_cpu=train_cpu,
        ratio_cpu=train_cpu / base_cpu,
        ratio_wall=train_wall / base_wall,
    )
    print(f"median of {runs} runs; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    print(f"yardstick `python -c 'import numpy, pandas'`: {base_wall:.3f} s wall, {base_cpu:.3f} s CPU")
    verdict = "within" if out["ratio_cpu"] <= 1.5 else "OVER"
    print(
        f"fully given `hnplan train` (exit {rc}): {train_wall:.3f} s wall, {train_cpu:.3f} s CPU = "
        f"{out['ratio_cpu']:.2f}x the yardstick's CPU ({out['ratio_wall']:.2f}x wall); target 1.5x: {verdict}"
    )
    print(f"{'sub-command':12} {'--help wall':>12} {'CPU':>7}   {'typical wall':>12} {'CPU':>7}  exit")
    root = timed(HNPLAN + ["--help"], runs)
    print(f"{'(root)':12} {root[0]:11.3f}s {root[1]:6.3f}s")
    for name in command_modules():
        h = timed(HNPLAN + [name, "--help"], runs)
        t = timed(HNPLAN + TYPICAL[name], runs) if name in TYPICAL else None
        out[name] = dict(help_wall=h[0], help_cpu=h[1], call_wall=t and t[0], call_cpu=t and t[1])
        call = f"{t[0]:11.3f}s {t[1]:6.3f}s  {t[2]}" if t else f"{'-':>12} {'-':>7}"
        print(f"{name:12} {h[0]:11.3f}s {h[1]:6.3f}s   {call}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    main(ap.parse_args().runs)
