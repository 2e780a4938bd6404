"""Published training runs the training planner is validated against (``data/validation/training_runs.yaml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from hnplan.catalog.loader import _read_yaml, data_dir, load_catalog
from hnplan.catalog.schemas import ID_PATTERN, PosInt, Positive, Source, _Strict
from hnplan.catalog.schemas.software import StackChoices
from hnplan.catalog.yaml_io import nearest_name, unknown_field_text, validation_problems
from hnplan.defaults import DEFAULT_STACK
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
    dtype: Literal["bf16", "fp8", "fp4"]
    fixed: dict = Field(default_factory=dict, description="plan knobs the source states; the rest are searched")
    stack: str = Field(
        default=DEFAULT_STACK,
        pattern=ID_PATTERN,
        description="software stack id (data/stacks/): overlaps, attention, sequence parallelism, "
        "in-training GEMM efficiency",
    )
    overrides: dict = Field(
        default_factory=dict,
        description="stack choices (StackChoices fields) the run's own configuration sets differently from its "
        "stack, e.g. {tp_comm: false} for a submission that turned TP-communication overlap off",
    )
    mtp_modules: int | None = Field(
        default=None,
        ge=0,
        description="multi-token-prediction modules the run trained where its configuration departs from the "
        "model entry's ``mtp_modules`` (Megatron-Bridge ``mtp_num_layers=None`` trains none); None: the model's",
    )
    metric: Literal[
        "hardware_tflops_per_gpu", "model_tflops_per_gpu", "tokens_per_s_per_gpu", "mfu", "hfu", "step_time_s"
    ]
    published: Positive = Field(
        description="the published value of `metric`, in the unit its name gives (TFLOP/s per GPU, tokens/s per "
        "GPU, fraction of the dense peak for mfu/hfu, s)"
    )
    tolerance_pct: Positive = Field(description="accepted relative error [%]")
    tolerance_reason: str | None = Field(
        default=None,
        description="why tolerance_pct is that wide: the source's own uncertainty (what it rounds, leaves "
        "unstated or averages) and what the model leaves out; every `within` run of the validation file gives one",
    )
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
    def _fraction_metrics(self):
        if self.metric in ("mfu", "hfu") and self.published > 1:
            raise ValueError(
                f"published {self.metric} is a fraction of the peak in (0, 1]; got {self.published:g} "
                f"(a percentage? write {self.published / 100:g})"
            )
        return self

    @field_validator("dtype", "metric", mode="before")
    @classmethod
    def _dtype_any_case(cls, v):
        # a user's runs file reads dtypes as --dtype, gemm --shapes-json and sweep specs do: FP8 is fp8; and
        # metrics alike (MFU is mfu)
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("overrides", mode="after")
    @classmethod
    def _overrides_as_json(cls, v: dict) -> dict:
        # held in their JSON form (mapping keys as strings: a userbuffers table's TP size 8 as "8"), the form the
        # prediction cache stores and reads back; the planner validates them into the stack's field types
        import json

        return json.loads(json.dumps(v))

    @model_validator(mode="after")
    def _known_overrides(self):
        # a mistyped stack choice must fail here, naming the file and the run, not when the run is planned
        for key in self.overrides:
            if key not in StackChoices.model_fields:
                raise ValueError(f"overrides: {unknown_field_text(key, StackChoices.model_fields)}")
        try:  # each value as the stack's own field takes it (type, range, allowed names)
            # null leaves the stack's choice, as the planner reads it (hnplan.planning.training.job)
            StackChoices.model_validate({k: v for k, v in self.overrides.items() if v is not None})
        except ValidationError as exc:
            # a combination with the stack's other choices is the planner's to judge (it merges the two)
            if any(e["loc"] for e in exc.errors()):
                _, problems = validation_problems(exc, StackChoices, quote=False)
                raise ValueError(f"overrides: {next(p for p in problems if '(entry)' not in p)}") from None
        return self

    @model_validator(mode="after")
    def _degrees_make_the_gpus(self):
        # a stated plan that gives all four degrees must use the run's GPUs: a typo in a runs file is bad input,
        # not an infeasible plan (Megatron-LM: tp x pp x dp x cp = the world size)
        fx = self.fixed or {}
        degrees = [d for k in ("tp", "pp", "dp", "cp") if isinstance(d := fx.get(k), int)]
        if len(degrees) == 4:
            product = degrees[0] * degrees[1] * degrees[2] * degrees[3]
            if product != self.gpus:
                raise ValueError(
                    f"fixed: tp x pp x dp x cp = {' x '.join(map(str, degrees))} = {product:,}, not its gpus "
                    f"{self.gpus:,}"
                )
        return self

    @model_validator(mode="after")
    def _gap_explained(self):
        if self.expect == "gap" and (self.gap_bound_pct is None or not self.gap_reason):
            raise ValueError("a run with expect: gap needs gap_bound_pct and gap_reason")
        return self


def run_model(run: TrainingRun, catalog=None):
    """The model entry a run trained: the catalog's ``run.model`` with the run's own ``mtp_modules`` where it
    sets one (Megatron-Bridge's DeepSeek-V3 recipe takes ``mtp_num_layers=None`` as none,
    ``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``), else the entry unchanged.

    Raises
    ------
    CatalogError
        For an unknown model id.
    """
    model = (catalog or load_catalog()).model(run.model)
    if run.mtp_modules is None or run.mtp_modules == model.mtp_modules:
        return model
    return model.model_copy(update={"mtp_modules": run.mtp_modules})


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
            field, problems = validation_problems(exc, TrainingRun, quote=False)
            rid = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            raise CatalogError(f"{path}: run {rid}: {'; '.join(problems)}", path=path, entry=rid, field=field) from None
    root = Path(path).resolve().parent.parent
    cat = load_catalog(root) if (root / "accelerators").is_dir() else load_catalog()
    _check_run_refs(path, out, cat, ("model", "system", "stack"))
    return out


def _check_run_refs(path, runs, cat, fields: tuple[str, ...]) -> None:
    """Each run's ``fields`` (model, system, stack: named as the catalog's lookups) exist in ``cat``; the first
    that does not raises, naming the file, the run and the field. Each distinct id of a field is looked up once
    (the 188 published runs name a few dozen models, systems and stacks)."""
    found: set = set()  # (field, id) looked up without error
    for run in runs:
        for field in fields:
            ref = getattr(run, field)
            if (field, ref) in found:
                continue
            try:
                getattr(cat, field)(ref)
                found.add((field, ref))
            except CatalogError as exc:
                raise CatalogError(
                    f"{path}: run {run.id}: field {field}: {exc}", path=path, entry=run.id, field=field
                ) from None


# -- a user's own measurements (``hnplan calibrate``) ----------------------------------------------
#: fields a measured run must give; the rest of :class:`TrainingRun` is optional there
MEASURED_RUN_FIELDS = ("id", "model", "system", "gpus", "seq_len", "global_batch_seqs", "dtype", "metric", "published")
#: columns of an nccl-tests sweep file: ``op, gpus, size_bytes`` and one of ``busbw_GBps``, ``time_us``
COLLECTIVE_COLUMNS = ("op", "gpus", "size_bytes")


def measured_runs(path, stack: str) -> list[TrainingRun]:
    """A user's measured training runs (the schema of ``data/validation/training_runs.yaml`` with only
    :data:`MEASURED_RUN_FIELDS` required), all run with software stack ``stack``.

    ``name`` defaults to the id, ``source`` to the file, ``tolerance_pct`` to 10 (unused by a
    calibration); a run that names another ``stack`` is refused (one calibration fits one stack).

    Raises
    ------
    CatalogError
        One line naming the file, the run (id or position) and the field: a missing or invalid field,
        an unknown model or system id (with the nearest ids), a repeated id, another stack, or a file
        that is not a non-empty list of mappings.
    """
    raw = _read_yaml(path)
    if not isinstance(raw, list) or not raw:
        raise CatalogError(f"{path}: expected a non-empty YAML list of runs (id, model, system, gpus, ...)", path=path)
    out: list[TrainingRun] = []
    for i, entry in enumerate(raw):
        rid = entry.get("id", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
        if not isinstance(entry, dict):
            raise CatalogError(f"{path}: run {rid}: expected a mapping of run fields", path=path, entry=rid)
        unknown = [k for k in entry if k not in TrainingRun.model_fields]
        missing = [f for f in MEASURED_RUN_FIELDS if f not in entry]
        if unknown or missing:
            problems = [unknown_field_text(k, TrainingRun.model_fields) for k in unknown]
            if missing:
                problems.append(f"field {missing[0]}: required (a run gives {', '.join(MEASURED_RUN_FIELDS)})")
            raise CatalogError(
                f"{path}: run {rid}: {'; '.join(problems)}",
                path=path,
                entry=rid,
                field=(unknown or missing)[0],
            )
        if entry.get("stack", stack) != stack:
            raise CatalogError(
                f"{path}: run {rid}: field stack: {entry['stack']!r} differs from the stack being calibrated "
                f"({stack!r}); calibrate one stack at a time",
                path=path,
                entry=rid,
                field="stack",
            )
        full = {"name": str(entry["id"]), "source": f"measured run in {path}", "tolerance_pct": 10.0, **entry}
        full["stack"] = stack
        try:
            run = TrainingRun.model_validate(full)
        except ValidationError as exc:
            field, problems = validation_problems(exc, TrainingRun, quote=False)
            raise CatalogError(f"{path}: run {rid}: {'; '.join(problems)}", path=path, entry=rid, field=field) from None
        if any(r.id == run.id for r in out):
            raise CatalogError(f"{path}: run {rid}: field id: given twice", path=path, entry=rid, field="id")
        out.append(run)
    cat = load_catalog()
    _check_run_refs(path, out, cat, ("model", "system"))
    _check_below_peak(path, out, cat)
    return out


def _check_below_peak(path, runs, cat) -> None:
    """A published ``model_tflops_per_gpu`` or ``hardware_tflops_per_gpu`` is at most the dense peak of its
    system's accelerator in the run's dtype (the fastest math the run can use): above it the figure is in
    another unit (per node, per step, sparse TFLOP/s) or mistyped, and a fit to it would drive the GEMM
    efficiency to its bound."""
    for run in runs:
        if run.metric not in ("model_tflops_per_gpu", "hardware_tflops_per_gpu"):
            continue
        acc = cat.accelerator(cat.system(run.system).accelerator)
        peak = acc.dense_tflops.get(run.dtype)
        if peak is not None and run.published > peak:
            raise CatalogError(
                f"{path}: run {run.id}: field published: {run.published:g} TFLOP/s per GPU is above {acc.id}'s "
                f"dense {run.dtype} peak of {peak:g} TFLOP/s; give the measured {run.metric} of one GPU",
                path=path,
                entry=run.id,
                field="published",
            )


#: NCCL_ALGO's all-reduce algorithms that reduce in the switches, as nccl-tests runs force them (NVIDIA/nccl
#: src/graph/tuning.cc names NVLS, NVLSTree, CollNetDirect and CollNetChain): hnplan's ``inr`` algorithm, which
#: takes NVLink SHARP inside a domain, IB SHARP across domains where the system enables it, and NVLS + tree
NCCL_INR_ALGOS = {name: "inr" for name in ("nvls", "nvlstree", "collnet", "collnetdirect", "collnetchain")}


def collective_measurements(path) -> list[dict]:
    """An nccl-tests sweep of the user's cluster: a CSV with columns ``op`` (allreduce, allgather,
    reducescatter, alltoall, broadcast, sendrecv; nccl-tests' ``all_reduce`` spellings accepted),
    ``gpus`` (ranks), ``size_bytes`` (nccl-tests' size S) and ``busbw_GBps`` (nccl-tests' busbw
    [GB/s, 1e9 bytes/s]) or ``time_us`` (nccl-tests' time [us]); optional ``system`` (a system id) and
    ``algorithm`` (the one forced with ``NCCL_ALGO``, e.g. ``ring``, NCCL's ``NVLS``, ``NVLSTree`` and
    ``CollNet*`` all-reduce names read as ``inr``; empty: NCCL's tuner chose). Other
    columns (a ``source`` or a note) are ignored, and so are blank lines and lines starting with ``#``
    (nccl-tests' comments), above the header too; a line number in a message is the file's.

    Returns
    -------
    list of dict
        ``{"line", "op", "gpus", "size_bytes", "busbw_GBps" or None, "time_us" or None, "system" or None,
        "algorithm" or None}``,
        one per data line (``line``: its line number in the file).

    Raises
    ------
    CatalogError
        One line naming the file, the line and the column: unreadable file, missing column, a line with more
        fields than the header (a number written with thousands separators), a value that is not a positive
        number, neither or both of busbw_GBps and time_us, an nccl-tests binary's own printout (its table is not
        this CSV: the message says which columns to write).
    """
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.readlines()
        # comment and blank lines above the header are skipped, not read as the header
        skip = next((k for k, t in enumerate(text) if t.strip() and not t.lstrip().startswith("#")), len(text))
        reader = csv.DictReader(text[skip:])
        rows, lines = [], []
        for row in reader:  # the line a row ends on: blank lines, which the reader skips, still count
            first = row.get(reader.fieldnames[0]) if reader.fieldnames else None
            if (first or "").lstrip().startswith("#"):  # a comment line, as nccl-tests prints its headers
                continue
            rows.append(row)
            lines.append(skip + reader.line_num)
        header = reader.fieldnames or []
    except FileNotFoundError:
        raise CatalogError(f"{path}: file not found", path=path) from None
    except IsADirectoryError:  # as a YAML file given as a folder is said (yaml_io), not as "[Errno 21] ..."
        raise CatalogError(f"{path}: is a folder, expected a CSV file", path=path) from None
    except PermissionError:
        raise CatalogError(f"{path}: permission denied (cannot read the file)", path=path) from None
    except UnicodeDecodeError as exc:
        raise CatalogError(
            f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); expected CSV", path=path
        ) from None
    except csv.Error as exc:
        raise CatalogError(f"{path}: cannot read as a CSV text file ({exc})", path=path) from None
    twice = next((c for c in header if header.count(c) > 1), None)
    if twice is not None:  # csv.DictReader keeps the last of two same-named columns: one figure read, one not
        raise CatalogError(f"{path}: column {twice} given twice in the header", path=path, field=twice)
    if not rows:
        raise CatalogError(f"{path}: no data lines (columns: op, gpus, size_bytes, busbw_GBps or time_us)", path=path)
    cols = {c for c in rows[0] if c is not None}  # a line longer than the header adds the key None
    if "op" not in cols and any("algbw" in t and "busbw" in t for t in text[:skip]):  # nccl-tests' own printout
        raise CatalogError(
            f"{path}: the printout of an nccl-tests binary (its size, count, type, ..., algbw, busbw table), not a "
            "CSV: write one line per size as op,gpus,size_bytes,busbw_GBps (op the binary's collective, gpus the "
            "ranks it ran on, the out-of-place busbw), as docs/examples/nccl_tests.csv",
            path=path,
        )
    known = (*COLLECTIVE_COLUMNS, "busbw_GBps", "time_us", "algorithm", "system")
    for col in (*COLLECTIVE_COLUMNS, "busbw_GBps or time_us"):
        if col not in cols and not (col == "busbw_GBps or time_us" and {"busbw_GBps", "time_us"} & cols):
            typos = [f"{c} (did you mean {n}?)" for c in sorted(cols - set(known)) if (n := nearest_name(c, known))]
            raise CatalogError(
                f"{path}: column {col} missing (columns: op, gpus, size_bytes, busbw_GBps or time_us)"
                + (f"; the file has {', '.join(typos)}" if typos else ""),
                path=path,
                field=col,
            )
    out = []
    for i, row in zip(lines, rows, strict=True):
        if None in row:  # csv.DictReader files a line's fields beyond the header under the key None
            extra = len(row[None])
            raise CatalogError(
                f"{path}: line {i}: {len(header) + extra} fields, the header names {len(header)}: a comma inside a "
                "value shifts every column after it (a size written 1,073,741,824 reads as 1 byte); write numbers "
                "without thousands separators (1073741824) and quote text that holds a comma",
                path=path,
                entry=f"line {i}",
            )

        def num(col, line=i, row=row):
            text = (row.get(col) or "").strip()
            if not text:
                return None
            try:
                v = float(text)
            except ValueError:
                v = float("nan")
            if not v > 0 or v == float("inf"):
                raise CatalogError(
                    f"{path}: line {line}: column {col}: expected a positive number, got {text!r}",
                    path=path,
                    entry=f"line {line}",
                    field=col,
                )
            return v

        gpus, size, busbw, time_us = num("gpus"), num("size_bytes"), num("busbw_GBps"), num("time_us")
        for col, v in (("gpus", gpus), ("size_bytes", size)):
            if v is None:
                raise CatalogError(f"{path}: line {i}: column {col}: empty", path=path, entry=f"line {i}", field=col)
        if gpus != int(gpus):
            raise CatalogError(
                f"{path}: line {i}: column gpus: expected a whole number of ranks, got {gpus}",
                path=path,
                entry=f"line {i}",
                field="gpus",
            )
        if (busbw is None) == (time_us is None):
            raise CatalogError(
                f"{path}: line {i}: give exactly one of busbw_GBps and time_us", path=path, entry=f"line {i}"
            )
        op = (row.get("op") or "").strip().lower().replace("_", "").replace("-", "")
        op = op.removesuffix("perf")
        algorithm = (row.get("algorithm") or "").strip().lower() or None
        if op == "allreduce" and algorithm is not None:  # NCCL_ALGO's names of hnplan's in-network reduction
            algorithm = NCCL_INR_ALGOS.get(algorithm.replace("_", "").replace("-", ""), algorithm)
        out.append(
            dict(
                line=i,
                op=op,
                gpus=int(gpus),
                size_bytes=float(size),
                busbw_GBps=busbw,
                time_us=time_us,
                system=(row.get("system") or "").strip() or None,
                algorithm=algorithm,
            )
        )
    return out
