"""Job traces of large training clusters: the Slurm job logs of SenseTime Helios and Shanghai AI Lab
Acme, the Microsoft Philly job log (:func:`read_philly`), and :func:`read_trace`, which picks the loader
of a file by its content.

Both traces are one row per job as the scheduler logged it, with the columns of
:data:`HELIOS_COLUMNS` (Helios ``data/<cluster>/cluster_log.csv``, github.com/S-Lab-System-Group/HeliosData,
README "Schema and Description"; Hu et al., "Characterization and Prediction of Deep Learning Workloads
in Large-Scale GPU Datacenters", SC '21) or :data:`ACME_COLUMNS` (Acme ``data/job_trace/trace_seren.csv``
and ``trace_kalos.csv``, github.com/InternLM/AcmeTrace, README "Job Trace"; Hu et al., "Characterization
of Large Language Model Development in the Datacenter", NSDI '24). Times are wall-clock strings
(``2020-06-09 18:41:01``; Acme adds a UTC offset, ``2023-03-01 00:18:22+08:00``), ``duration`` is
``end_time - start_time`` [s]. A job ends in one of :data:`TERMINAL_STATES`; both READMEs note that
``TIMEOUT`` and ``NODE_FAIL`` are rare.

What a loader keeps (the job table of :mod:`hnplan.cluster.jobs`):

* GPU jobs that ran: ``gpu_num > 0`` and ``duration > 0`` (CPU jobs and jobs cancelled before they
  started are left out);
* every terminal state by default: a cancelled or failed job held its GPUs for ``duration`` as a
  completed one did (on Seren, cancelled jobs used 66 % of the GPU time, ``data/cluster_summary.csv``
  of AcmeTrace), so a replay that dropped them would under-load the cluster; ``states=`` narrows it;
* arrival = ``submit_time`` relative to the first kept job; duration = ``duration`` (the run time on
  the allocation the job got, taken as its ideal run time);
* ``tp`` = GPUs per node (``gpu_num / node_num``): the group that stays inside one server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.cluster.jobs import (
    CLASSES,
    CSV_OPTIONS,
    JOB_COLUMNS,
    MAX_JOB_YEARS,
    check_jobs,
    check_trace_file,
    read_openb,
    read_trace_csv,
    row_error,
)
from hnplan.cluster.topology import MILLI
from hnplan.cluster.trace_csv import check_trace_text
from hnplan.errors import InputError

TERMINAL_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")
"""Slurm end states of the Helios and Acme traces (both READMEs, note on ``state``)."""
HELIOS_COLUMNS = ("job_id", "gpu_num", "node_num", "state", "submit_time", "duration")
"""Columns of a Helios ``cluster_log.csv`` a loader needs (the file also has ``user, vc, cpu_num,
start_time, end_time, queue``)."""
ACME_COLUMNS = (*HELIOS_COLUMNS, "type")
"""Columns of an Acme ``trace_seren.csv`` / ``trace_kalos.csv`` a loader needs."""
ACME_CLASS = {
    "Pretrain": "training",
    "MLLM": "training",
    "SFT": "fine-tuning",
    "Eval": "development",
    "Debug": "development",
    "Other": "development",
}
"""Priority class of an Acme workload ``type`` (the six types that AcmeTrace ``analysis.ipynb`` counts
on Seren). A labelled mapping: pretraining and multimodal LLM training are the
long, checkpointed training jobs; SFT is fine-tuning; evaluation, debugging and other jobs are short
and restart from scratch, so they take the lowest class. No Acme job is production inference."""


def _slurm_log(path: Path, columns: tuple[str, ...], fmt: str, states: Iterable[str] | None) -> pd.DataFrame:
    """The kept rows of a Slurm job log (GPU jobs that ran, in ``states``), with ``submit_time`` parsed
    and the numeric columns checked."""
    raw = read_trace_csv(path, columns, fmt)
    for col in ("gpu_num", "node_num", "duration"):
        num = pd.to_numeric(raw[col], errors="coerce")
        bad = num.isna() & raw[col].notna() | (num < 0)
        if bad.any():  # a spreadsheet shows the header as row 1
            raise row_error(str(path), raw.index.to_numpy() + 2, bad, col, "must be a number >= 0", raw[col].to_numpy())
        raw[col] = num
    keep = (raw["gpu_num"] > 0) & (raw["duration"] > 0)
    if states is not None:
        wanted = {str(s).upper() for s in states}
        unknown = wanted - set(TERMINAL_STATES)
        if unknown:
            raise InputError(f"states must be among {', '.join(TERMINAL_STATES)}; got {sorted(unknown)[0]!r}")
        keep &= raw["state"].astype(str).str.upper().isin(wanted)
    g = raw[keep].copy()
    if g.empty:
        raise InputError(f"{path}: no GPU job with duration > 0 in the states kept")
    submit = pd.to_datetime(g["submit_time"], errors="coerce", utc=True, format="mixed")
    if submit.isna().any():
        rows = g.index.to_numpy() + 2
        raise row_error(
            str(path), rows, submit.isna(), "submit_time", "must be a date-time", g["submit_time"].to_numpy()
        )
    g["arrival_s"] = (submit - submit.min()).dt.total_seconds().to_numpy(float)
    return g


def _job_table(
    g: pd.DataFrame,
    cls: np.ndarray,
    checkpoint_s: float,
    where: str,
    names=None,
    sizes: str = "columns gpu_num and node_num",
    domain_gpus: int | None = None,
    cluster_gpus: int | None = None,
) -> pd.DataFrame:
    """The job table of a Slurm log's kept rows ``g`` (or a JSON log's jobs), each named in an error by
    ``names`` (default its row in the CSV file: ``g``'s index + 2, the header being row 1); ``sizes`` names
    the fields the GPU and node counts come from; a job of more GPUs per node than ``domain_gpus`` (and no more
    GPUs than ``cluster_gpus``) is refused."""
    names = [f"row {int(r) + 2}" for r in g.index] if names is None else list(names)
    gpus = g["gpu_num"].to_numpy().astype(np.int64)
    nodes = np.maximum(g["node_num"].to_numpy().astype(np.int64), 1)
    per_node = np.maximum(-(-gpus // nodes), 1)
    uneven = gpus % per_node != 0
    if uneven.any():  # the job's GPUs are placed in equal groups, one per node: name the file's columns
        i = int(np.flatnonzero(uneven)[0])
        raise InputError(
            f"{where}: {names[i]}, {sizes}: {gpus[i]} GPUs on {nodes[i]} nodes "
            f"do not split into equal groups of ceil({gpus[i]} / {nodes[i]}) = {per_node[i]} GPUs per node, as the "
            "simulation places a job"
        )
    ckpt = np.where(np.isin(cls, ("training", "fine-tuning")), checkpoint_s, np.where(cls == "inference", 0.0, np.inf))
    jobs = pd.DataFrame(
        {
            "arrival_s": g["arrival_s"].to_numpy(float),
            "gpus": gpus,
            "gpu_milli": np.full(len(g), MILLI),
            "duration_s": g["duration"].to_numpy(float),
            "cls": cls,
            "checkpoint_s": ckpt,
            "tp": per_node,
        }
    )
    return check_jobs(jobs, where, rows=names, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus, tp_source=sizes)


def read_helios(
    path: str | Path,
    checkpoint_s: float = units.HOUR,
    states: Iterable[str] | None = TERMINAL_STATES,
    cls: str = "training",
    domain_gpus: int | None = None,
    cluster_gpus: int | None = None,
) -> pd.DataFrame:
    """Jobs from a Helios ``cluster_log.csv`` (SenseTime; Earth, Saturn, Uranus or Venus cluster).

    Parameters
    ----------
    path : path
        CSV with at least the columns :data:`HELIOS_COLUMNS` (github.com/S-Lab-System-Group/HeliosData,
        README "Schema and Description"): ``gpu_num`` [GPU], ``node_num``, ``state``, ``submit_time``
        (``YYYY-MM-DD HH:MM:SS``), ``duration`` [s].
    checkpoint_s : float
        Checkpoint period of the jobs [s] (the trace has none); default one hour (assumption, as read_openb).
    states : iterable of str, optional
        End states kept (default all of :data:`TERMINAL_STATES`; ``None`` keeps every row).
    cls : str
        Class of every job: the trace gives no purpose (Helios is a datacenter for developing
        deep-learning models, HeliosData README), so all are ``training`` unless told otherwise.
    domain_gpus, cluster_gpus : int, optional
        The simulated design's scale-up domain and cluster [GPU]: a job of more GPUs per node than the domain,
        and no more GPUs than the cluster, is refused (:func:`hnplan.cluster.jobs.check_jobs`).

    Returns
    -------
    DataFrame
        A job table (:func:`hnplan.cluster.jobs.check_jobs`; what is kept: module docstring).

    Raises
    ------
    InputError
        For a missing file or column, a non-numeric or negative ``gpu_num``/``node_num``/``duration``,
        an unparseable ``submit_time``, an unknown class or state, or no GPU job left.
    """
    if cls not in CLASSES:
        raise InputError(f"class must be one of {', '.join(CLASSES)}; got {cls!r}")
    path = Path(path)
    g = _slurm_log(path, HELIOS_COLUMNS, "Helios cluster_log.csv", states)
    return _job_table(
        g,
        np.full(len(g), cls, dtype=object),
        checkpoint_s,
        str(path),
        domain_gpus=domain_gpus,
        cluster_gpus=cluster_gpus,
    )


def read_acme(
    path: str | Path,
    checkpoint_s: float = units.HOUR,
    states: Iterable[str] | None = TERMINAL_STATES,
    domain_gpus: int | None = None,
    cluster_gpus: int | None = None,
) -> pd.DataFrame:
    """Jobs from an Acme ``trace_seren.csv`` or ``trace_kalos.csv`` (Shanghai AI Lab LLM clusters).

    Parameters
    ----------
    path : path
        CSV with at least the columns :data:`ACME_COLUMNS` (github.com/InternLM/AcmeTrace, README
        "Job Trace"): those of Helios plus the workload ``type``.
    checkpoint_s : float
        Checkpoint period of training and fine-tuning jobs [s] (the trace has none); default one hour
        (assumption, as read_openb).
    states : iterable of str, optional
        End states kept (default all of :data:`TERMINAL_STATES`; ``None`` keeps every row).
    domain_gpus, cluster_gpus : int, optional
        As :func:`read_helios`.

    Returns
    -------
    DataFrame
        A job table; classes from :data:`ACME_CLASS` (what is kept: module docstring).

    Raises
    ------
    InputError
        As :func:`read_helios`, and for a ``type`` outside :data:`ACME_CLASS`.
    """
    path = Path(path)
    g = _slurm_log(path, ACME_COLUMNS, "Acme job trace", states)
    types = g["type"].astype(str)
    bad = ~types.isin(ACME_CLASS).to_numpy()
    if bad.any():
        rows = g.index.to_numpy() + 2
        raise row_error(str(path), rows, bad, "type", f"must be one of {', '.join(ACME_CLASS)}", g["type"].to_numpy())
    return _job_table(
        g,
        types.map(ACME_CLASS).to_numpy(object),
        checkpoint_s,
        str(path),
        domain_gpus=domain_gpus,
        cluster_gpus=cluster_gpus,
    )


# -- Philly (msr-fiddle/philly-traces, cluster_job_log) -------------------------------------------
PHILLY_STATES = ("Pass", "Killed", "Failed")
"""End states of a Philly job (philly-traces README, key ``status``)."""


def _philly_time(value, path: Path, jobid, key: str) -> pd.Timestamp | None:
    if value is None or value in ("", "None"):
        return None
    t = pd.to_datetime(value, errors="coerce", format="%Y-%m-%d %H:%M:%S")
    if pd.isna(t):
        raise InputError(f"{path}: job {jobid}: {key} must be YYYY-MM-DD HH:MM:SS; got {value!r}")
    return t


def read_philly(
    path: str | Path,
    checkpoint_s: float = units.HOUR,
    states: Iterable[str] | None = PHILLY_STATES,
    cls: str = "training",
    domain_gpus: int | None = None,
    cluster_gpus: int | None = None,
) -> pd.DataFrame:
    """Jobs from the Philly ``cluster_job_log`` (Microsoft; Jeon et al., "Analysis of Large-Scale
    Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC '19).

    Parameters
    ----------
    path : path
        The JSON list of jobs of github.com/msr-fiddle/philly-traces (``trace-data/cluster_job_log``),
        each with ``status``, ``jobid``, ``submitted_time`` and ``attempts`` (``start_time``,
        ``end_time`` and ``detail``, a list of servers with their ``gpus``), as in that README.
    checkpoint_s : float
        Checkpoint period of the jobs [s] (the trace has none); default one hour (assumption, as read_openb).
    states : iterable of str, optional
        Statuses kept (default all of :data:`PHILLY_STATES`; ``None`` keeps every job).
    cls : str
        Class of every job (Philly's jobs are DNN training, README "Overview").
    domain_gpus, cluster_gpus : int, optional
        As :func:`read_helios` (GPUs per server of the first attempt).

    Returns
    -------
    DataFrame
        A job table. As the trace's own analysis notebook (``analysis/Philly Trace Analysis.ipynb``)
        defines them: GPUs = the GPUs of the first attempt, run time = last attempt's end - first
        attempt's start (retries and the gaps between them included); ``tp`` = GPUs per server of the
        first attempt. Left out: jobs without attempts or without a first start time, jobs still
        running (last ``end_time`` empty), jobs of 0 GPUs or 0 s.

    Raises
    ------
    InputError
        For a missing file, a file that is not a JSON list of jobs, a job without ``jobid``,
        ``status``, ``submitted_time`` or ``attempts``, an unparseable time, an unknown class or
        status, or no job left.
    """
    if cls not in CLASSES:
        raise InputError(f"class must be one of {', '.join(CLASSES)}; got {cls!r}")
    wanted = None if states is None else set(states)
    if wanted is not None and wanted - set(PHILLY_STATES):
        raise InputError(
            f"states must be among {', '.join(PHILLY_STATES)}; got {sorted(wanted - set(PHILLY_STATES))[0]!r}"
        )
    path = Path(path)
    check_trace_file(path)
    try:
        log = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(log, list):
        raise InputError(f"{path}: a Philly cluster_job_log is a JSON list of jobs")
    rows = []
    for job in log:
        missing = [
            k for k in ("jobid", "status", "submitted_time", "attempts") if not isinstance(job, dict) or k not in job
        ]
        if missing:
            raise InputError(f"{path}: a job lacks key(s) {', '.join(missing)} of the Philly cluster_job_log format")
        jid, att = job["jobid"], job["attempts"] or []
        if not isinstance(att, list) or not all(isinstance(a, dict) for a in att):
            raise InputError(f"{path}: job {jid}: attempts must be a list of objects")
        if (wanted is not None and job["status"] not in wanted) or not att:
            continue
        start = _philly_time(att[0].get("start_time"), path, jid, "start_time")
        end = _philly_time(att[-1].get("end_time"), path, jid, "end_time")
        submit = _philly_time(job["submitted_time"], path, jid, "submitted_time")
        if submit is None:
            raise InputError(f"{path}: job {jid}: submitted_time is empty")
        detail = att[0].get("detail") or []
        gpus = sum(len(d.get("gpus") or []) for d in detail if isinstance(d, dict))
        if start is None or end is None or gpus == 0 or end <= start:
            continue
        rows.append((submit, gpus, len(detail), (end - start).total_seconds(), f"job {jid}"))
    if not rows:
        raise InputError(f"{path}: no finished GPU job in the statuses kept")
    submit_t, gpus_a, nodes_a, dur, names = (np.array(c) for c in zip(*rows, strict=True))
    arrival = (pd.DatetimeIndex(submit_t) - pd.DatetimeIndex(submit_t).min()).total_seconds().to_numpy(float)
    g = pd.DataFrame({"arrival_s": arrival, "gpu_num": gpus_a, "node_num": nodes_a, "duration": dur})
    return _job_table(
        g,
        np.full(len(g), cls, dtype=object),
        checkpoint_s,
        str(path),
        names=names.tolist(),
        sizes="attempts[0].detail (its machines' gpus)",
        domain_gpus=domain_gpus,
        cluster_gpus=cluster_gpus,
    )


def read_trace(path: str | Path, domain_gpus: int | None = None, cluster_gpus: int | None = None) -> pd.DataFrame:
    """A job table from a file, its format told by its content: a JSON list is the Philly
    ``cluster_job_log``; a CSV is Alibaba openb (a ``num_gpu`` column), Acme (``gpu_num``,
    ``submit_time`` and ``type``), Helios (``gpu_num`` and ``submit_time``), else hnplan's own
    (:data:`hnplan.cluster.jobs.JOB_COLUMNS`, ``job_id`` optional and unique). With ``domain_gpus`` (the simulated
    design's scale-up domain [GPU]) a job whose TP group is larger is refused, naming its row in the file
    (unless it has more GPUs than ``cluster_gpus``: the simulation rejects it at submission and counts it).

    Raises
    ------
    InputError
        For a missing file, a file in none of these formats, a ``job_id`` repeated in hnplan's own CSV, or a
        TP group larger than ``domain_gpus``; its ``path`` is the file's.
    """
    path = Path(path)
    try:
        return _read_trace(path, domain_gpus, cluster_gpus)
    except InputError as exc:
        if exc.path is None:  # every error of a trace is the file's (``--json`` gives it as the error's path)
            exc.path = str(path)
        raise


def _read_trace(path: Path, domain_gpus: int | None, cluster_gpus: int | None) -> pd.DataFrame:
    """:func:`read_trace` on a :class:`~pathlib.Path`."""
    check_trace_file(path)
    with path.open("rb") as f:
        head = f.read(4096)
    check_trace_text(path, head)  # a binary file whose bytes decode read as a CSV "missing column(s) ..."
    first = head.lstrip()[:1]
    if first == b"[":
        return read_philly(path, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
    if first == b"{":  # a JSON object was read as a CSV: "missing column(s) arrival_s, ..." said nothing of JSON
        raise InputError(
            f"{path}: starts with '{{', a JSON object; the JSON trace read is Philly's cluster_job_log, a list of "
            f"jobs ([{{...}}, ...]), and hnplan's own trace is a CSV of columns {', '.join(c for c in JOB_COLUMNS if c != 'job_id')}"
        )
    try:
        head = {str(c).strip() for c in pd.read_csv(path, nrows=0, **CSV_OPTIONS).columns}
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: not a CSV file ({str(exc).strip()})") from None
    if "num_gpu" in head:
        return read_openb(path, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
    if {"gpu_num", "submit_time"} <= head:
        return (
            read_acme(path, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
            if "type" in head
            else read_helios(path, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
        )
    # a file pandas cannot parse: one line, not a traceback; a cell nan is quoted as written, not called empty
    table = read_trace_csv(path, (), "hnplan job table", keep_marks=True)
    rows = table.index.to_numpy() + 2  # as a spreadsheet shows them
    if "job_id" in table:  # optional, renumbered 0..n-1 by arrival: a repeated id is two rows for one job
        ids = table["job_id"]
        again = (ids.duplicated() & ids.notna()).to_numpy()
        if again.any():
            i = int(np.flatnonzero(again)[0])
            first = int(np.flatnonzero((ids == ids.iloc[i]).to_numpy())[0])
            value = ids.iloc[i].item() if hasattr(ids.iloc[i], "item") else ids.iloc[i]
            if isinstance(value, float) and value.is_integer():  # a column with an empty cell is read as floats
                value = int(value)
            raise InputError(
                f"{path}: row {rows[i]}, column job_id: id {value!r} is row {rows[first]}'s too; each job_id must "
                "be unique (or drop the column: jobs are numbered by arrival)"
            )
    jobs = check_jobs(table, str(path), rows=rows, domain_gpus=domain_gpus, cluster_gpus=cluster_gpus)
    # arrivals past any cluster's life (a Unix time beside a 0, 1e300) are a unit mistake; 1e300 never ended
    if "arrival_s" in table and len(table):
        arrival = pd.to_numeric(table["arrival_s"], errors="coerce").to_numpy(float)
        longest = MAX_JOB_YEARS * units.YEAR
        bad = arrival - np.nanmin(arrival) > longest
        if bad.any():
            rule = f"arrives more than {MAX_JOB_YEARS:g} years ({longest:.4g} s) after the first job (seconds expected)"
            raise row_error(str(path), rows, bad, "arrival_s", rule, table["arrival_s"].to_numpy())
    return jobs
