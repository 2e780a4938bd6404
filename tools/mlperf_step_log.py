"""Per-step timing of an MLPerf Training NeMo result log: the device step, the host time between steps, drift.

NeMo's MLPerf callbacks log two clocks per training step in the MLLOG lines of ``result_*.txt``:
``tracked_stats`` records ``{"train_step_timing in s": t}`` (NeMo 2: ``train_step_time``; the step as NeMo's timer measures it: forward,
backward and optimizer step), each stamped with the wall clock ``time_ms`` at which it was logged. The wall
time between two consecutive training records less the later one's timed step is the host time between
steps (data loader, callbacks, logging), which a per-GPU work model does not contain. The MLPerf
``block_start``/``block_stop`` intervals, divided by their steps (``epoch_count`` tokens over
``global_batch x seq_len``), give the step time ``data/reference/mlperf_training_steps.csv`` transcribes (both
clocks together, validation excluded). The median of a run hides a drift; the first and last steps and the
per-block series show it. The v6.0 logs (NeMo 26.04) carry two timed records per step, one from the MLPerf
logging callback and one, with ``reduced_train_loss``, from the training loop's timing callback (about 0.04 s
shorter); where a log has both kinds only the latter are kept, so each step counts once.

Usage: ``python tools/mlperf_step_log.py TOKENS_PER_STEP RESULT_LOG [RESULT_LOG ...] [--series K]``
(``TOKENS_PER_STEP`` = global batch x sequence length; ``--series K`` prints medians over every ``K`` steps).
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass

TIMED_KEYS = ("train_step_timing in s", "train_step_time")  # NeMo 1 (v4.x logs), NeMo 2 (v5.x logs)


@dataclass(frozen=True)
class StepLog:
    """The clocks of one result log [s]: ``timed`` and ``host_gap`` per training step (in order),
    ``block`` the step time of each MLPerf block (``block_start`` to ``block_stop`` over its steps)."""

    timed: list[float]
    host_gap: list[float]
    block: list[float]


def parse(lines, tokens_per_step: int) -> StepLog:
    """Read the MLLOG records of a result log (an iterable of lines) into a :class:`StepLog`.

    A host gap is taken only between two consecutive training records (a validation record in between
    breaks the pair); a block's step time is its interval over ``epoch_count / tokens_per_step`` steps. Where
    a log times each step twice (records with and without ``reduced_train_loss``), only the records with it
    are kept.
    """
    records, blocks, start = [], [], None
    for line in lines:
        if ":::MLLOG" not in line:
            continue
        e = json.loads(line.split(":::MLLOG ", 1)[1])
        key, value = e.get("key"), e.get("value")
        if key == "tracked_stats" and isinstance(value, dict):
            timed = next((value[k] for k in TIMED_KEYS if k in value), None)
            if timed is not None:
                records.append((e["time_ms"], float(timed), "reduced_train_loss" in value))
            elif any(k.startswith("validation") for k in value):
                records.append((e["time_ms"], None, False))
        elif key == "block_start":  # logs without an epoch_count (NeMo 2) give no block steps
            count = e.get("metadata", {}).get("epoch_count")
            start = (e["time_ms"], count) if count else None
        elif key == "block_stop" and start is not None:
            blocks.append((e["time_ms"] - start[0]) / 1000.0 / (start[1] / tokens_per_step))
            start = None
    if any(r[2] for r in records) and any(r[1] is not None and not r[2] for r in records):
        records = [r for r in records if r[1] is None or r[2]]  # one record a step: the loss-carrying one
    records = [(t, s) for t, s, _ in records]
    timed = [t for _, t in records if t is not None]
    gaps = [
        (b[0] - a[0]) / 1000.0 - b[1] for a, b in zip(records, records[1:]) if a[1] is not None and b[1] is not None
    ]
    return StepLog(timed, gaps, blocks)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summary(log: StepLog, first: int = 20) -> dict:
    """Medians of the clocks [s]: over the first ``first`` steps (the first two skipped: warm-up), over
    the whole run and over the last ``first`` steps; blocks: the median without the first block (as
    ``mlperf_training_steps.csv``) and over blocks 2-5 (before a drift)."""
    t, g = log.timed, log.host_gap
    return dict(
        steps=len(t),
        timed_first=_median(t[2 : first + 2]),
        timed_median=_median(t),
        timed_last=_median(t[-first:]),
        gap_first=_median(g[2 : first + 2]),
        gap_median=_median(g),
        block_median=_median(log.block[1:]),
        block_early=_median(log.block[1:5]),
    )


def main(argv: list[str]) -> None:
    series = 0
    if "--series" in argv:
        i = argv.index("--series")
        series, argv = int(argv[i + 1]), argv[:i] + argv[i + 2 :]
    if len(argv) < 2:
        raise SystemExit(__doc__.strip().splitlines()[-2])
    tokens = int(argv[0])
    for path in argv[1:]:
        with open(path, encoding="utf-8", errors="replace") as f:
            log = parse(f, tokens)
        s = summary(log)
        print(
            f"{path}: {s['steps']} steps; timed step first/median/last {s['timed_first']:.3f} / "
            f"{s['timed_median']:.3f} / {s['timed_last']:.3f} s; host gap first/median {s['gap_first']:.3f} / "
            f"{s['gap_median']:.3f} s; block step median {s['block_median']:.3f} s (blocks 2-5: {s['block_early']:.3f} s)"
        )
        for i in range(0, len(log.timed) if series else 0, max(series, 1)):  # the two lists in step order
            t, g = log.timed[i : i + series], log.host_gap[i : i + series]
            print(f"  steps {i:4d}-{i + len(t) - 1:4d}: timed {_median(t):.3f} s, host gap {_median(g):.3f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
