"""The Parquet dataset of a sweep: where it lives, which points it already holds, atomic chunk writes and
reading it back with units (pyarrow; partitioned by spec).

:mod:`hnplan.planning.sweep` runs the points and re-exports these.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from hnplan.catalog.schemas import WHATIF_INPUTS
from hnplan.errors import InputError

#: the plan inputs that key one training search (``tokens`` only scales time-to-train)
PLAN_KEY = ("system", "model", "gpus", "seq_len", "global_batch_seqs", "stack", "dtype")
#: the parallel layout the training search chose, one column each (Megatron-LM's terms)
LAYOUT_OUTPUTS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "microbatch_size",
    "virtual_stages",
    "zero_stage",
    "recompute",
)
#: ``gpus_used``: the GPUs the job runs on, ``gpus_bought``: the whole units' GPUs that hold the point's ``gpus``
#: (:func:`hnplan.planning.job_sizes.weigh_job_counts`, as ``hnplan compare`` and ``size --gpus`` weigh a purchase)
PLAN_OUTPUTS = (
    "tokens_per_s",
    "mfu",
    "step_time_s",
    *LAYOUT_OUTPUTS,
    "searched",
    "feasible",
    "gpus_used",
    "gpus_bought",
)
OUTPUTS = (
    "goodput",
    "days_to_train",
    "tco_usd",
    "usd_per_gpu_hour",
    "run_usd",
    "it_power_w",
    "facility_power_w",
    "energy_mwh",
)
#: ``code_fingerprint``: :func:`hnplan.planning.prediction_cache.source_fingerprint` on the worker (hnplan's code,
#: Python's and numpy's versions), which ``hnplan_version`` alone does not tell apart between releases
PROVENANCE = (
    "spec_id",
    "sampling",
    "seed",
    "sample",
    "hnplan_version",
    "catalog_hash",
    "code_fingerprint",
    "evaluated_at",
)


def _schema():
    """The dataset's Arrow schema (explicit, so that a chunk of failures has the same column types)."""
    import pyarrow as pa

    f64, i64, s = pa.float64(), pa.int64(), pa.string()
    cols = [
        ("point_id", s),
        ("system", s),
        ("model", s),
        ("gpus", i64),
        ("seq_len", i64),
        ("global_batch_seqs", i64),
        ("tokens", f64),
        ("stack", s),
        ("dtype", s),
    ]
    cols += [(k, f64) for k in WHATIF_INPUTS]
    cols += [
        (k, s if k == "recompute" else f64 if k in ("tokens_per_s", "mfu", "step_time_s") else i64)
        for k in PLAN_OUTPUTS
    ]
    cols += [(k, f64) for k in OUTPUTS]
    cols += [("error", s)]
    cols += [
        ("spec_id", s),
        ("sampling", s),
        ("seed", i64),
        ("sample", i64),
        ("hnplan_version", s),
        ("catalog_hash", s),
        ("code_fingerprint", s),
        ("evaluated_at", s),
    ]
    return pa.schema(cols)


COLUMNS = tuple(
    f
    for f in (
        "point_id",
        "system",
        "model",
        "gpus",
        "seq_len",
        "global_batch_seqs",
        "tokens",
        "stack",
        "dtype",
        *WHATIF_INPUTS,
        *PLAN_OUTPUTS,
        *OUTPUTS,
        "error",
        *PROVENANCE,
    )
)

UNITS = {
    "gpus": "GPUs",
    "seq_len": "tokens",
    "global_batch_seqs": "sequences",
    "tokens": "tokens",
    "electricity_usd_per_kwh": "USD/kWh",
    "pue": "ratio",
    "hardware_price_factor": "ratio",
    "utilisation": "fraction",
    "rate_factor": "ratio",
    "write_GBps_per_node": "GB/s",
    "years": "years",
    "dc_build_usd_per_mw": "USD/MW",
    "maintenance_fraction": "fraction per year",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction",
    "step_time_s": "s",
    "goodput": "fraction",
    "days_to_train": "days",
    "tco_usd": "USD",
    "usd_per_gpu_hour": "USD per GPU-hour",
    "run_usd": "USD",
    "it_power_w": "W",
    "facility_power_w": "W",
    "energy_mwh": "MWh",
}


def _given(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


# -- the dataset --------------------------------------------------------------------------------
def default_dataset(spec_id: str) -> Path:
    """Where a report keeps a spec's dataset when none is given: ``sweeps/<id>`` at the project root."""
    return Path(__file__).resolve().parents[2] / "sweeps" / spec_id


def _read_table(out: Path, columns: list[str] | None = None, **kw):
    """The rows of a sweep folder as an Arrow table (``columns`` only, if given): its ``*.parquet`` files, so
    that other files in the folder (a README, a spec kept beside its dataset) are left alone rather than read
    as Parquet; a ``.parquet`` file that is not Parquet (a chunk cut short by a killed run, written before chunk
    writes were atomic) is bad input naming it, not pyarrow's traceback."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    files = [
        path
        for path in sorted(out.rglob("*.parquet"))
        # pyarrow leaves hidden files out of a dataset (a chunk being written is staged under a hidden folder)
        if not any(part.startswith((".", "_")) for part in path.relative_to(out).parts)
    ]
    try:
        return ds.dataset(
            [str(f) for f in files], format="parquet", partitioning="hive", partition_base_dir=str(out), **kw
        ).to_table(columns=columns)
    except (pa.ArrowInvalid, OSError):
        for path in files:
            try:
                pq.read_metadata(path)
            except (pa.ArrowInvalid, OSError):
                raise InputError(
                    f"{path}: not a readable Parquet file (a chunk cut short when a run was killed?); delete it "
                    "and run the sweep again: its points are evaluated again"
                ) from None
        raise


def done_point_ids(out: str | Path) -> set[str]:
    """``point_id`` of every row already in a dataset folder (empty if there is none).

    Raises
    ------
    InputError
        When a file of the dataset is not readable Parquet (named, with what to do).
    """
    return set(done_catalogs(out))


def done_catalogs(out: str | Path) -> dict[str, str]:
    """``point_id -> catalog_hash`` of every row already in a dataset folder (empty if there is none): the
    catalog each point was evaluated with. Raises as :func:`done_point_ids`."""
    rows = done_rows(out)
    return dict(zip(rows["point_id"], rows["catalog_hash"], strict=True))


def done_rows(out: str | Path) -> pd.DataFrame:
    """What a resume needs of every row already in a dataset folder: ``point_id``, ``catalog_hash``,
    ``code_fingerprint`` (None in a row written before the column), ``failed`` (the row has an ``error``) and
    ``file`` (the Parquet file holding it); no rows if there is none. Raises as :func:`done_point_ids`."""
    cols = ["point_id", "catalog_hash", "code_fingerprint", "error"]
    out = Path(out)
    if not out.is_dir() or not any(out.rglob("*.parquet")):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in [*cols[:3], "failed", "file"]})
    # the dataset's schema, not the first file's: a column added since reads as null in older files
    table = _read_table(out, [*cols, "__filename"], schema=_schema())
    df = pd.DataFrame({c: table.column(c).to_pylist() for c in cols[:3]})
    df["failed"] = table.column("error").is_valid().to_numpy(zero_copy_only=False)
    df["file"] = table.column("__filename").to_pylist()
    return df


def write_chunk(df: pd.DataFrame, out: str | Path, name: str) -> None:
    """Append one chunk's rows to the dataset, partitioned by ``system`` (``system=<id>/<name>-0.parquet``).

    Atomic: the files are written under a hidden folder of ``out`` (which Arrow readers leave out of the
    dataset) and then renamed into place, so a run killed mid-write (SIGKILL, a lost node) leaves no cut-short
    file in the dataset; a re-run evaluates that chunk's points again.
    """
    import shutil

    import pyarrow as pa
    import pyarrow.dataset as ds

    out = Path(out)
    tmp = out / f".writing-{name}"
    shutil.rmtree(tmp, ignore_errors=True)  # left by a run killed mid-write
    table = pa.Table.from_pandas(df, schema=_schema(), preserve_index=False)
    ds.write_dataset(
        table,
        tmp,
        format="parquet",
        partitioning=["system"],
        partitioning_flavor="hive",
        basename_template=f"{name}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    for path in sorted(tmp.rglob("*.parquet")):
        dest = out / path.relative_to(tmp)
        dest.parent.mkdir(parents=True, exist_ok=True)
        path.replace(dest)
    shutil.rmtree(tmp, ignore_errors=True)


def replace_rows(df: pd.DataFrame, out: str | Path, files: dict[str, str]) -> None:
    """Put the rows of ``df`` in place of the rows of the same ``point_id`` in the files ``files`` names
    (``point_id -> file``, as :func:`done_rows` gives them): a retry of failed points.

    Atomic per file: each file is written whole under a hidden name in ``out`` (which Arrow readers leave out)
    and renamed over the old one (``os.replace``, atomic on POSIX within a file system), so a run killed
    meanwhile leaves every point in exactly one row, its old one or its new one. A file written before a
    column was added gets the column (null in its other rows).
    """
    import os

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = Path(out)
    schema = pa.schema([f for f in _schema() if f.name != "system"])  # the partition key is the folder's name
    new = pa.Table.from_pandas(df.drop(columns="system"), schema=schema, preserve_index=False)
    by_file: dict[str, list[str]] = {}
    for pid in df["point_id"]:
        by_file.setdefault(files[pid], []).append(pid)
    for name, ids in by_file.items():
        path, id_set = Path(name), pa.array(ids, pa.string())
        old = pq.ParquetFile(path).read()
        old = pa.table(
            [
                old.column(f.name).cast(f.type) if f.name in old.column_names else pa.nulls(len(old), f.type)
                for f in schema
            ],
            schema=schema,
        )
        keep = old.filter(pc.invert(pc.is_in(old.column("point_id"), value_set=id_set)))
        mine = new.filter(pc.is_in(new.column("point_id"), value_set=id_set))
        tmp = out / f".replacing-{path.parent.name}-{path.name}"
        pq.write_table(pa.concat_tables([keep, mine]), tmp)
        os.replace(tmp, path)


def read_sweep(out: str | Path) -> pd.DataFrame:
    """The dataset of a sweep as a DataFrame (``system`` back as a string column); ``attrs['units']``.

    Raises
    ------
    InputError
        If the folder holds no Parquet files, or a file that is not readable Parquet (named).
    """
    out = Path(out)
    if not out.is_dir() or not any(out.rglob("*.parquet")):
        raise InputError(f"{out}: no sweep dataset here (run `hnplan sweep SPEC --out {out}`)")
    # the dataset's schema, not the first file's: a dataset begun before a column was added reads it as null
    df = _read_table(out, schema=_schema()).to_pandas()
    df["system"] = df["system"].astype(str)
    df = df[[c for c in COLUMNS if c in df.columns]].sort_values("point_id", ignore_index=True)
    df.attrs["units"] = dict(UNITS)
    return df


# -- running ------------------------------------------------------------------------------------
