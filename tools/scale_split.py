"""Split the step time of one job run at two sizes into shared work and a per-step constant.

For two validation rows of the same model at ``N1 < N2`` GPUs, the step time ``T = W / N + F`` gives
``W / N2 = (T1 - T2) / (N2 / N1 - 1)`` (the work one GPU does at the larger size: compute and
per-micro-batch communication) and ``F = T2 - W / N2`` (what does not shrink with more GPUs: the pipeline
bubble, exposed data-parallel collectives, per-step host work), for the published and the modelled step
times (docs/training.md, "What grows with scale"). Where the two runs' global batches ``B`` differ (strong
scaling with a larger batch, as MLPerf submissions do) the work is per sequence, ``T = w B / N + F``, and
``N2 / N1`` becomes ``(B1 / N1) / (B2 / N2)``, the ratio of sequences per GPU. A published throughput is
turned into a step time with the model's FLOPs per token (``model_tflops_per_gpu``,
``hardware_tflops_per_gpu``) or directly (``tokens_per_s_per_gpu``). The two rows must be one job: model,
sequence, dtype, stack and system equal, fewer sequences per GPU in the second.

``--steps T1 T2`` splits the given measured step times [s] instead of the rows' published ones (for
instance the steps of a log before a drift, ``tools/mlperf_step_log.py``).

Usage: ``python tools/scale_split.py RUN_ID_SMALL RUN_ID_LARGE [--steps T1 T2]``
"""

from __future__ import annotations

import sys

from hnplan import units
from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import predict_run


def _step_s(run, b, value: float) -> float:
    """Step time [s] of a run whose ``run.metric`` is ``value``."""
    tokens = run.global_batch_seqs * run.seq_len
    if run.metric == "step_time_s":
        return value
    if run.metric in ("model_tflops_per_gpu", "hardware_tflops_per_gpu"):
        per_token = b.model_flops_per_token if run.metric.startswith("model") else b.hardware_flops_per_token
        return tokens * float(per_token) / (run.gpus * units.tflops_to_flops_per_s(value))
    if run.metric == "tokens_per_s_per_gpu":
        return tokens / (run.gpus * value)
    raise SystemExit(f"{run.id}: metric {run.metric} has no step time")


def main(small: str, large: str, steps: tuple[float, float] | None = None) -> None:
    runs = {r.id: r for r in training_runs()}
    missing = [i for i in (small, large) if i not in runs]
    if missing:
        raise SystemExit(f"unknown run id(s): {', '.join(missing)}")
    r1, r2 = runs[small], runs[large]
    same = ("model", "seq_len", "dtype", "stack", "system")
    differ = [k for k in same if getattr(r1, k) != getattr(r2, k)]
    # sequences per GPU: the work one GPU does, shrinking from the first row to the second
    ratio = (r1.global_batch_seqs / r1.gpus) / (r2.global_batch_seqs / r2.gpus)
    if differ or r2.gpus <= r1.gpus or ratio <= 1.0:
        raise SystemExit(f"not one job at two sizes: {', '.join(differ) or 'work per GPU not shrinking'} differ")
    b1, b2 = predict_run(r1), predict_run(r2)
    measured = steps or (_step_s(r1, b1, r1.published), _step_s(r2, b2, r2.published))
    for label, t1, t2 in (
        ("given" if steps else "published", *measured),
        ("modelled", float(b1.step_time_s), float(b2.step_time_s)),
    ):
        w = (t1 - t2) / (ratio - 1.0)
        print(
            f"{label:9s} T = {t1:.3f} / {t2:.3f} s at {r1.gpus:,} / {r2.gpus:,} GPUs: W/N = {w:.3f} s, F = {t2 - w:.3f} s"
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    given = None
    if "--steps" in args:
        i = args.index("--steps")
        try:
            given = (float(args[i + 1]), float(args[i + 2]))
        except (IndexError, ValueError):
            raise SystemExit("--steps needs two step times in seconds") from None
        args = args[:i] + args[i + 3 :]
    if len(args) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    main(args[0], args[1], given)
