"""Jobs of a shared cluster: the job table, the priority classes and the Alibaba GPU-sharing trace loader
(the Helios and Acme loaders and :func:`~hnplan.cluster.traces.read_trace` are in
:mod:`hnplan.cluster.traces`; the synthetic generator fitted to public traces in
:mod:`hnplan.cluster.synthetic`).

A job table is a pandas DataFrame, one row per job (:data:`JOB_COLUMNS`), or, inside the simulation, the
same columns as a mapping of column name to numpy array (:func:`job_columns`; :func:`job_frame` turns it back
into a DataFrame), so a simulated mix never imports pandas (about 0.2 s of start-up):

=================  ===========  ===============================================================
column             unit         meaning
=================  ===========  ===============================================================
``job_id``         -            0..n-1, in arrival order
``arrival_s``      s            submission time
``gpus``           GPU          whole GPUs requested (1 for a fractional job)
``gpu_milli``      milli-GPU    share of each GPU (1000 = a whole GPU; < 1000 only when gpus = 1)
``duration_s``     s            run time on an ideal allocation (no failure, no slowdown)
``cls``            -            one of :data:`CLASSES`
``checkpoint_s``   s            checkpoint period; 0 = stateless (nothing lost), inf = never
``tp``             GPU          group that must share a scale-up domain (1 = none)
``gpu_spec``       -            optional: the GPU models the job accepts, ``|``-separated (empty = any),
                                as the Alibaba trace's pods give them; names from the cluster's
                                ``gpu_models`` (:class:`~hnplan.cluster.topology.ClusterTopology`)
=================  ===========  ===============================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.yaml_io import nearest_name
from hnplan.cluster.topology import MILLI
from hnplan.cluster.trace_csv import (  # noqa: F401 - the CSV reading re-exported
    CSV_OPTIONS,
    check_trace_file,
    read_trace_csv,
    separator_hint,
)
from hnplan.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

CLASSES = ("inference", "training", "fine-tuning", "development")
"""Priority classes, highest priority first (production inference preempts the others)."""
PRIORITY = {c: len(CLASSES) - i for i, c in enumerate(CLASSES)}
JOB_COLUMNS = ("job_id", "arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp")
GPU_SPEC = "gpu_spec"
"""The optional job column of accepted GPU models (see the module notes)."""
MAX_JOBS = 1_000_000
"""The most jobs one run draws from a mix: the event simulation takes about 0.3 ms a job on one CPU core (0.30 ms
measured for 27,000 jobs of the default mix on 1,024 H100, 0.15 ms for 100,000 on 16,384; benchmarks/bench_cluster.py,
2026-12-02), so the limit runs in about 5 minutes; the arrival count of
``--days 1e9`` (about 2e12 jobs on 1,024 GPUs) would not fit in memory."""
MAX_JOB_YEARS = 15.0
"""The longest run time a job table may give [years]: the longest amortisation period the cost
model takes (``years`` of :data:`hnplan.catalog.schemas.WHATIF_RANGES`), longer than any cluster runs one job;
a larger value is a unit mistake (and ``duration_s`` 1e300 overflowed the steady-state figures)."""


def check_days(days: float) -> None:
    """Refuse a run of more days than :data:`MAX_JOB_YEARS` years (a trace's jobs are held to that span too).

    Raises
    ------
    InputError
        ``days must be at most 5,479 (15 years, ...); got 6000.0``.
    """
    longest = units.s_to_days(units.years_to_s(MAX_JOB_YEARS))
    if days > longest:
        raise InputError(
            f"days must be at most {longest:,.0f} ({MAX_JOB_YEARS:g} years, the longest a trace's run times and "
            f"arrivals may span and the cost model amortises a cluster over); got {days!r}"
        )


OPENB_COLUMNS = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time")
UNSCHEDULED = "unscheduled_pods"
"""Key of :func:`read_openb`'s ``attrs``: the GPU pods left out as deleted before they were scheduled."""


def missing_cell(value) -> bool:
    """Whether a cell is empty as pandas reads one: None, a float NaN, or pandas' NA and NaT."""
    if value is None or (isinstance(value, (float, np.floating)) and value != value):
        return True
    if type(value).__module__.startswith("pandas"):  # pd.NA, pd.NaT: only a pandas table holds them
        import pandas as pd

        return bool(pd.isna(value))
    return False


def _cell_text(value) -> str:
    """What a cell holds, as an error says it: ``is empty``, ``has 0``, ``has 'x'``."""
    if missing_cell(value):
        return "is empty"
    return f"has {value.item() if isinstance(value, np.generic) else value!r}"


def row_error(where: str, names, mask, col: str, rule: str, values=None) -> InputError:
    """One line naming ``where``, the first row of ``mask`` (by ``names``: a file's rows as a spreadsheet
    numbers them) and the column, what the column must hold and what that cell holds."""
    i = int(np.flatnonzero(np.asarray(mask))[0])
    cell = "" if values is None else f"; {_cell_text(values[i])}"
    return InputError(f"{where}: {_label(names[i])}, column {col}: {rule}{cell}")


def _label(name) -> str:
    """``row 5`` for a row number, a label as given (``job 1234`` of a JSON log)."""
    return name if isinstance(name, str) else f"row {name}"


def job_columns(jobs) -> dict:
    """A job table's columns as numpy arrays (name -> shape ``(n,)``), in the table's column order: a
    DataFrame's (``Series.to_numpy``), or a mapping's as given."""
    if hasattr(jobs, "columns"):  # a pandas DataFrame
        return {c: jobs[c].to_numpy() for c in jobs.columns}
    return {c: np.asarray(v) for c, v in jobs.items()}


def job_frame(columns: dict) -> pd.DataFrame:
    """A job table's columns (:func:`job_columns`) as a pandas DataFrame (imports pandas)."""
    import pandas as pd

    return pd.DataFrame(columns)


def job_count(jobs) -> int:
    """Rows of a job table, a DataFrame or a mapping of columns."""
    return len(jobs) if hasattr(jobs, "columns") else len(next(iter(jobs.values()), ()))


def take_rows(jobs, keep):
    """The rows of a job table where the boolean array ``keep`` is true, of the table's kind (a DataFrame's
    rows keep their index)."""
    keep = np.asarray(keep, bool)
    if hasattr(jobs, "columns"):
        return jobs[keep]
    return {c: np.asarray(v)[keep] for c, v in jobs.items()}


def check_jobs(
    jobs,
    where: str = "jobs",
    rows=None,
    domain_gpus: int | None = None,
    tp_source: str = "column tp",
    cluster_gpus: int | None = None,
):
    """Validate a job table and return it sorted by arrival with ``job_id`` 0..n-1.

    Parameters
    ----------
    jobs : DataFrame or mapping
        The job table (:data:`JOB_COLUMNS`, ``job_id`` optional): a DataFrame, or a mapping of column
        name to array (:func:`job_columns`).
    where : str
        What the errors name first: the file's path, or ``jobs``.
    rows : array of int or str, optional
        The number each row is named by in an error: for a table read from a CSV file, the row a spreadsheet
        shows it on (the header is row 1, the first job row 2); default the table's rows 1..n. A string is
        the name itself (``job 1234`` of a JSON log).
    domain_gpus : int, optional
        GPUs of the cluster's scale-up domain: a job whose TP group (``tp``) is larger
        cannot keep the group inside one domain, so it is refused rather than run as smaller groups (a TP-72
        job on 8-GPU HGX domains is not the job the row describes). None: not checked.
    cluster_gpus : int, optional
        GPUs of the cluster: a job larger is rejected at submission whatever its TP group (counted in the
        run's ``rejected`` jobs), so only jobs of at most this many GPUs are held to ``domain_gpus``.
    tp_source : str
        What the error names as the origin of ``tp``: ``column tp``, or the trace's own columns a loader
        derived it from (``columns gpu_num and node_num``).

    Returns
    -------
    DataFrame or dict
        Of the kind given: a DataFrame for a DataFrame, a mapping of column name to numpy array otherwise.

    Raises
    ------
    InputError
        For a missing column, an unknown class, a non-positive size or duration, an infinite arrival,
        size, duration or tp, a count (gpus, gpu_milli, tp) that is not a whole number, a negative
        checkpoint period, a fraction of a GPU on a multi-GPU job, a TP group larger than the job's own
        ``gpus`` (refused, not lowered: a TP-8 row of a 4-GPU job is not a job that can run) or than
        ``domain_gpus`` (one line naming ``where``, the row and the column).
    """
    out = _checked_columns(job_columns(jobs), where, rows, (domain_gpus, cluster_gpus), tp_source)
    return job_frame(out) if hasattr(jobs, "columns") else out


def _checked_columns(jobs: dict, where: str, rows, fit=(None, None), tp_source: str = "column tp") -> dict:
    """:func:`check_jobs` on a mapping of column name to numpy array."""
    missing = [c for c in JOB_COLUMNS if c != "job_id" and c not in jobs]
    if missing and (hint := separator_hint(list(jobs))):
        raise InputError(f"{where}: {hint}")
    if missing:
        extra = [str(c) for c in jobs if c not in JOB_COLUMNS]
        typos = [f"{c} (did you mean {n}?)" for c in extra if (n := nearest_name(c, missing))]
        raise InputError(
            f"{where}: missing column(s) {', '.join(missing)}" + (f"; it has {', '.join(typos)}" if typos else "")
        )
    n = job_count(jobs)
    if not n:
        raise InputError(f"{where}: no jobs")
    names = np.arange(1, n + 1) if rows is None else np.asarray(rows)
    jobs = dict(jobs)
    for col in ("arrival_s", "gpus", "gpu_milli", "duration_s", "checkpoint_s", "tp"):
        jobs[col] = numeric_column(jobs, col, where, rows=names)
    cls = jobs["cls"]
    bad = ~np.isin(cls, CLASSES)
    if bad.any():
        raise row_error(where, names, bad, "cls", f"the class must be one of {', '.join(CLASSES)}", cls)
    for col in ("gpus", "gpu_milli", "duration_s"):
        bad = (jobs[col] <= 0) | np.isnan(jobs[col])
        if bad.any():
            raise row_error(where, names, bad, col, "must be > 0", jobs[col])
    # a job of infinite run time would hold its GPUs past any horizon: the simulation would never end
    for col in ("arrival_s", "gpus", "duration_s", "tp"):
        bad = ~np.isfinite(jobs[col].astype(float))
        if bad.any():
            raise row_error(where, names, bad, col, "must be finite", jobs[col])
    longest = MAX_JOB_YEARS * units.YEAR
    bad = jobs["duration_s"] > longest
    if bad.any():
        rule = f"a run time over {MAX_JOB_YEARS:g} years ({longest:.4g} s) is no cluster job's (seconds expected)"
        raise row_error(where, names, bad, "duration_s", rule, jobs["duration_s"])
    # counts of GPUs, milli-GPUs and a TP group's GPUs are whole: 8.5 GPUs was read as 8
    for col in ("gpus", "gpu_milli", "tp"):
        v = jobs[col].astype(float)
        bad = np.isfinite(v) & (v != np.round(v))
        if bad.any():
            raise row_error(where, names, bad, col, "must be a whole number", jobs[col])
    bad = jobs["checkpoint_s"] < 0
    if bad.any():
        rule = "must be >= 0 (0: stateless, inf: never checkpointed)"
        raise row_error(where, names, bad, "checkpoint_s", rule, jobs["checkpoint_s"])
    bad = jobs["gpu_milli"] > MILLI
    if bad.any():
        raise row_error(where, names, bad, "gpu_milli", f"must be <= {MILLI}", jobs["gpu_milli"])
    bad = (jobs["gpu_milli"] < MILLI) & (jobs["gpus"] > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{where}: {_label(names[i])}, column gpu_milli: a fractional GPU (gpu_milli {int(jobs['gpu_milli'][i])} "
            f"< {MILLI}) needs gpus = 1; the row has gpus = {int(jobs['gpus'][i])}"
        )
    gpus = jobs["gpus"].astype(np.int64)
    tp = jobs["tp"].astype(np.int64)
    small = tp < 1  # no group of 0 GPUs: it was named as one that "must divide the job's 8 GPUs"
    if small.any():
        i = int(np.flatnonzero(small)[0])
        raise InputError(
            f"{where}: {_label(names[i])}, {tp_source}: must be >= 1 (the GPUs of a tensor-parallel group; 1: none); "
            f"has {int(tp[i])}"
        )
    # a TP group larger than the job is not the job the row describes (a TP-8 group of a 4-GPU job): refused,
    # not lowered to the job's size
    big = tp > gpus
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise InputError(
            f"{where}: {_label(names[i])}, {tp_source}: a TP group of {int(tp[i])} GPUs is larger than the job's "
            f"{int(gpus[i])} GPUs; give tp <= gpus"
        )
    uneven = (tp < 1) | (gpus % np.maximum(tp, 1) != 0)
    if uneven.any():
        row = int(np.flatnonzero(uneven)[0])
        raise InputError(
            f"{where}: {_label(names[row])}, column tp: tp = {int(jobs['tp'][row])} must divide the job's "
            f"{int(jobs['gpus'][row])} GPUs (its tensor-parallel groups)"
        )
    domain_gpus, cluster_gpus = fit  # a job larger than the cluster is rejected at submission, not judged here
    over = np.zeros(n, bool) if domain_gpus is None else (tp > domain_gpus) & (gpus <= (cluster_gpus or np.inf))
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise InputError(
            f"{where}: {_label(names[i])}, {tp_source}: a TP group of {int(tp[i])} GPUs does not fit the design's "
            f"{domain_gpus}-GPU scale-up domain (the group must share one domain); give tp <= {domain_gpus} or "
            "a design with a larger domain"
        )
    order = np.argsort(jobs["arrival_s"], kind="stable")
    out = {"job_id": np.arange(n)}
    for col in JOB_COLUMNS[1:]:
        out[col] = jobs[col][order]
    out["gpus"] = out["gpus"].astype(np.int64)
    out["gpu_milli"] = out["gpu_milli"].astype(np.int64)
    out["tp"] = out["tp"].astype(np.int64)
    out["arrival_s"] = out["arrival_s"].astype(float) - float(out["arrival_s"].min())
    if GPU_SPEC in jobs:
        out[GPU_SPEC] = np.array([s.strip() if isinstance(s, str) else "" for s in jobs[GPU_SPEC][order]], dtype=object)
    return out


def gpu_spec_mask(spec, models) -> np.ndarray:
    """Bitmask of the GPU models each ``gpu_spec`` accepts (bit ``t``: ``models[t]``; 0: any model).

    ``gpu_spec`` is a ``|``-separated list of models, empty (or NaN) for no constraint. Models absent
    from ``models`` set one bit past them that no node has, so a job that names only such models can
    never be placed (as the Alibaba trace's simulator, hkust-adsl/kubernetes-scheduler-simulator,
    ``IsNodeAccessibleToPodByType``).

    >>> gpu_spec_mask(["", "b", "a|c", "h100"], ("a", "b", "c")).tolist()
    [0, 2, 5, 8]
    """
    index = {m: i for i, m in enumerate(models)}
    out = []
    for s in spec:
        mask = 0
        if isinstance(s, str):
            for m in filter(None, (x.strip() for x in s.split("|"))):
                mask |= 1 << index.get(m, len(models))
        out.append(mask)
    return np.array(out, dtype=np.int64)


# -- the Alibaba cluster-trace-gpu-v2023 (openb) format ---------------------------------------
def openb_class(qos) -> np.ndarray:
    """Priority class of openb pods from their Kubernetes QoS (array): LS (latency-sensitive) ->
    inference; BE (best effort) -> development; Burstable/Guaranteed -> fine-tuning. A labelled
    mapping: the trace gives QoS, not the job's purpose; it holds no large training jobs."""
    qos = np.asarray(qos).astype(str)
    cls = np.full(len(qos), "fine-tuning", dtype=object)
    cls[qos == "BE"] = "development"
    cls[qos == "LS"] = "inference"
    return cls


def numeric_column(table, col: str, where: str, line_offset: int = 1, rows=None) -> np.ndarray:
    """Column ``col`` of ``table`` (a DataFrame or a mapping of columns) as numbers; a cell that is not one
    (text, an empty cell, a value the CSV reader left as text) is bad input.

    ``line_offset`` turns a row's position into the number named in the error: 2 for a CSV file read whole
    (a spreadsheet shows its header as row 1), 1 for a table's row; ``rows``, where given, names each row
    instead (a filtered table's rows in the file).

    Returns
    -------
    ndarray
        The column as it is when it holds numbers already, else as ``pandas.to_numeric`` reads it.

    Raises
    ------
    InputError
        One line naming ``where``, the first offending row and the column, with the cell's value.
    """
    values = np.asarray(table[col])
    if values.dtype.kind in "biuf":  # numbers already: what pandas.to_numeric would return
        num = values
    else:
        import pandas as pd

        num = pd.to_numeric(values, errors="coerce")
    bad = np.isnan(num) if num.dtype.kind == "f" else np.zeros(len(num), bool)
    if bad.any():
        names = np.arange(line_offset, len(values) + line_offset) if rows is None else np.asarray(rows)
        raise row_error(where, names, bad, col, "must be a number", values)
    return num


def read_openb(
    path: str | Path,
    checkpoint_s: float = units.HOUR,
    domain_gpus: int | None = None,
    cluster_gpus: int | None = None,
) -> pd.DataFrame:
    """Jobs from an Alibaba cluster-trace-gpu-v2023 ``openb_pod_list_*.csv`` file (GPU pods only).

    Parameters
    ----------
    path : path
        CSV with columns ``name, num_gpu, gpu_milli, qos, creation_time, deletion_time, scheduled_time``
        (times in [s]; ``gpu_milli`` the share of each GPU [milli-GPU]), as in
        github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/csv``.
    checkpoint_s : float
        Checkpoint period given to training and fine-tuning jobs [s] (the trace has none); default one hour
        (assumption: a common period for large-model training, not taken from the trace's workload).
    domain_gpus, cluster_gpus : int, optional
        The simulated design's scale-up domain and cluster [GPU]: a pod of more GPUs than the domain, and no
        more than the cluster, is refused (:func:`check_jobs`).

    Returns
    -------
    DataFrame
        A job table (:func:`check_jobs`): arrival = ``creation_time``, duration =
        ``deletion_time - scheduled_time`` (pods still running at the end of the trace are cut there;
        at least 1 s, the trace's resolution), classes from :func:`openb_class`, ``tp`` = the GPU count
        of multi-GPU pods (one node), and ``gpu_spec`` (the GPU models a pod accepts) when some pod names
        one. A GPU pod deleted before it was scheduled (a blank ``scheduled_time``, ``pod_phase`` Pending
        in the trace, or a ``deletion_time`` before its ``scheduled_time``) was never bound to a node and
        held no GPU (the trace README: ``scheduled_time`` is the "timestamp of being scheduled"): it is
        left out, as the Helios and Acme loaders leave out jobs cancelled before they started, and
        counted in ``attrs["unscheduled_pods"]``.

    Raises
    ------
    InputError
        For a missing file or column, a cell that is not a number, or no GPU pod that ran.
    """
    import pandas as pd

    path = Path(path)
    raw = read_trace_csv(path, OPENB_COLUMNS, "openb_pod_list", keep_marks=True)
    for col in ("num_gpu", "gpu_milli", "creation_time", "deletion_time"):
        raw[col] = numeric_column(raw, col, str(path), rows=raw.index.to_numpy() + 2)
    # a blank scheduled_time is a pod never scheduled (pod_phase Pending in the trace); other text is a mistake
    blank = raw["scheduled_time"].isna().to_numpy()
    sched = np.full(len(raw), np.nan)
    sched[~blank] = numeric_column(raw[~blank], "scheduled_time", str(path), rows=np.flatnonzero(~blank) + 2)
    raw["scheduled_time"] = sched
    gpu = (raw["num_gpu"] > 0).to_numpy()
    # deleted before it was scheduled (or never scheduled): the pod was never bound to a node and held no GPU
    never_ran = gpu & (blank | (raw["deletion_time"].to_numpy(float) < sched))
    g = raw[gpu & ~never_ran]
    if g.empty:
        if never_ran.any():
            raise InputError(f"{path}: every GPU pod ({int(never_ran.sum()):,}) was deleted before it was scheduled")
        raise InputError(f"{path}: no pod requests a GPU")
    # scheduled and deleted within the same second: the trace's 1 s resolution is the floor
    dur = (g["deletion_time"] - g["scheduled_time"]).clip(lower=1).to_numpy(float)
    cls = openb_class(g["qos"])
    ckpt = np.where(np.isin(cls, ("training", "fine-tuning")), checkpoint_s, np.where(cls == "inference", 0.0, np.inf))
    milli = np.where(g["num_gpu"] > 1, MILLI, g["gpu_milli"].clip(1, MILLI))
    jobs = pd.DataFrame(
        {
            "arrival_s": g["creation_time"].to_numpy(float),
            "gpus": g["num_gpu"].to_numpy(),
            "gpu_milli": milli,
            "duration_s": dur,
            "cls": cls,
            "checkpoint_s": ckpt,
            "tp": g["num_gpu"].to_numpy(),
        }
    )
    if GPU_SPEC in g and g[GPU_SPEC].notna().any() and (g[GPU_SPEC].fillna("").astype(str).str.strip() != "").any():
        jobs[GPU_SPEC] = g[GPU_SPEC].to_numpy(object)
    rows = g.index.to_numpy() + 2  # the pods' rows in the file
    out = check_jobs(
        jobs, str(path), rows=rows, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus, tp_source="column num_gpu"
    )
    out.attrs[UNSCHEDULED] = int(never_ran.sum())
    return out


SLICING = ("fractional", "mig", "whole")
MIG_SEVENTHS = (1, 2, 3, 4, 7)
"""Compute slices of the MIG profiles of A100/H100 (1g, 2g, 3g, 4g, 7g of 7; NVIDIA Multi-Instance
GPU User Guide, "Supported MIG Profiles")."""


def apply_slicing(jobs, slicing: str = "fractional"):
    """GPU shares as the cluster can grant them: ``fractional`` as asked (time-sliced sharing),
    ``mig`` rounded up to the next MIG profile (1/7, 2/7, 3/7, 4/7 or a whole GPU; the placement
    geometry of MIG slices is not modelled), ``whole`` a whole GPU per job.

    >>> j = {"gpu_milli": np.array([100, 300, 500, 600, 1000])}
    >>> apply_slicing(j, "mig")["gpu_milli"].tolist()
    [143, 429, 572, 1000, 1000]

    ``jobs`` is a DataFrame or a mapping of columns; the result is of the same kind (a copy).

    Raises
    ------
    InputError
        For an unknown slicing mode.
    """
    from hnplan.errors import check_choice

    check_choice("slicing", slicing, SLICING)
    out = jobs.copy()
    if slicing == "whole":
        out["gpu_milli"] = np.full(job_count(jobs), MILLI, np.int64)
    elif slicing == "mig":
        sevenths = np.ceil(np.asarray(out["gpu_milli"]) * 7 / MILLI - 1e-9)
        fit = np.array([min(s for s in MIG_SEVENTHS if s >= k) for k in sevenths.astype(int)])
        out["gpu_milli"] = np.where(fit >= 7, MILLI, np.ceil(fit * MILLI / 7)).astype(np.int64)
    return out
