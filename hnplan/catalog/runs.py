"""Published training runs the training planner is validated against (``data/validation/training_runs.yaml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from hnplan.catalog.loader import _read_yaml, data_dir, load_catalog
from hnplan.catalog.schemas import ID_PATTERN, PosInt, Positive, Source, _Strict
from hnplan.errors import CatalogError

RUNS_FILE = "validation/training_runs.yaml"


class TrainingRun(_Strict):
    """One published training measurement with the configuration its source states."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    source: Source = Field(description="paper and table, or repository file")
    model: str = Field(description="model id")
    system: str = Field(description="system id")
    gpus: PosInt
    seq_len: PosInt = Field(description="[tokens]")
    global_batch_seqs: PosInt = Field(description="sequences per step")
    dtype: Literal["bf16", "fp8"]
    fixed: dict = Field(default_factory=dict, description="plan knobs the source states; the rest are searched")
    stack: str = Field(
        default="megatron-core",
        pattern=ID_PATTERN,
        description="software stack id (data/stacks/): overlaps, attention, sequence parallelism, "
        "in-training GEMM efficiency",
    )
    metric: Literal[
        "hardware_tflops_per_gpu", "model_tflops_per_gpu", "tokens_per_s_per_gpu", "mfu", "hfu", "step_time_s"
    ]
    published: Positive = Field(description="the published value of `metric`")
    tolerance_pct: Positive = Field(description="accepted relative error [%]")
    expect: Literal["within", "gap"] = Field(
        default="within", description="within: the model must meet tolerance_pct; gap: a documented miss"
    )
    gap_bound_pct: Positive | None = Field(
        default=None, description="for a documented miss: the |error| the tests hold it under (regression band)"
    )
    gap_reason: str | None = Field(default=None, description="why the model misses this run (physics left out)")
    hnplan_fits: bool = Field(
        default=True,
        description="False: the published configuration ran, but hnplan's memory model reports that it "
        "does not fit; the row is kept (with its error) for the memory-fidelity work",
    )
    note: str = ""

    @model_validator(mode="after")
    def _gap_explained(self):
        if self.expect == "gap" and (self.gap_bound_pct is None or not self.gap_reason):
            raise ValueError("a run with expect: gap needs gap_bound_pct and gap_reason")
        return self


def training_runs(path=None) -> list[TrainingRun]:
    """The validation runs, in file order; their ``model``, ``system`` and ``stack`` ids are checked to
    exist in the data folder the file belongs to.

    Raises
    ------
    CatalogError
        Naming the file, the entry and the field of an invalid run (an unknown id with the nearest ones).
    """
    path = path or data_dir() / RUNS_FILE
    raw = _read_yaml(path) or []
    out = []
    for i, entry in enumerate(raw):
        try:
            out.append(TrainingRun.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            rid = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            raise CatalogError(
                f"{path}: run {rid}: field {field}: {err['msg']}", path=path, entry=rid, field=field
            ) from None
    root = Path(path).resolve().parent.parent
    cat = load_catalog(root) if (root / "accelerators").is_dir() else load_catalog()
    for run in out:
        for field, lookup in (("model", cat.model), ("system", cat.system), ("stack", cat.stack)):
            try:
                lookup(getattr(run, field))
            except CatalogError as exc:
                raise CatalogError(
                    f"{path}: run {run.id}: field {field}: {exc}", path=path, entry=run.id, field=field
                ) from None
    return out
