"""Training throughput against published runs (Megatron-LM 2021 weak scaling, Korthikanti et al. 2022
iteration times, NeMo on H100, Llama 3.1 405B, DeepSeek-V3); the runs live in ``data/validation/training_runs.yaml`` and are predicted by
:mod:`hnplan.planning.validation` with each run's stated configuration and the rest searched."""

from __future__ import annotations

from hnplan.planning.validation import validation_table as _runs_table
from hnplan.validation.rows import Row, area

UNITS = {
    "hardware_tflops_per_gpu": "TFLOP/s",
    "model_tflops_per_gpu": "TFLOP/s",
    "tokens_per_s_per_gpu": "tokens/s",
    "mfu": "fraction",
    "hfu": "fraction",
    "step_time_s": "s",
}


@area("training")
def rows(cat) -> list[Row]:
    out = []
    for r in _runs_table(catalog=cat).itertuples():
        role = "prediction" if r.expect == "within" else "reported"
        note = (
            (f"tolerance {r.tolerance_pct:g}%: {r.tolerance_reason}" if r.tolerance_reason else "")
            if role == "prediction"
            else (f"known gap, held by the training tests under {r.gap_bound_pct:.0f}%: {r.gap_reason}")
        )
        out.append(
            Row(
                "training",
                f"{r.id} ({r.gpus:,} x {r.system})",
                r.metric.replace("_", " "),
                UNITS[r.metric],
                float(r.published),
                float(r.predicted),
                role,
                r.tolerance_pct / 100 if role == "prediction" else None,
                r.source,
                note,
            )
        )
    return out
