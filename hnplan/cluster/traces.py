"""Job traces of large training clusters (Slurm job logs): SenseTime Helios and Shanghai AI Lab Acme,
and :func:`read_trace`, which picks the loader of a CSV file by its columns.

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

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hnplan.cluster.jobs import CLASSES, check_jobs, read_openb
from hnplan.cluster.topology import MILLI
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


def _slurm_log(
    path: Path, columns: tuple[str, ...], fmt: str, states: Iterable[str] | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw file and its kept rows (GPU jobs that ran, in ``states``), with ``submit_time`` parsed
    and the numeric columns checked."""
    if not path.is_file():
        raise InputError(f"trace file {path} not found")
    try:
        raw = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: not a CSV file ({exc})") from None
    missing = [c for c in columns if c not in raw]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} of the {fmt} format")
    for col in ("gpu_num", "node_num", "duration"):
        num = pd.to_numeric(raw[col], errors="coerce")
        bad = num.isna() & raw[col].notna() | (num < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"{path}: column {col} must be a number >= 0; line {row + 2} has {raw[col].iloc[row]!r}")
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
        row = int(np.flatnonzero(submit.isna().to_numpy())[0])
        raise InputError(f"{path}: column submit_time must be a date-time; got {g['submit_time'].iloc[row]!r}")
    g["arrival_s"] = (submit - submit.min()).dt.total_seconds().to_numpy(float)
    return raw, g


def _job_table(g: pd.DataFrame, cls: np.ndarray, checkpoint_s: float, where: str) -> pd.DataFrame:
    gpus = g["gpu_num"].to_numpy().astype(np.int64)
    nodes = np.maximum(g["node_num"].to_numpy().astype(np.int64), 1)
    ckpt = np.where(np.isin(cls, ("training", "fine-tuning")), checkpoint_s, np.where(cls == "inference", 0.0, np.inf))
    jobs = pd.DataFrame(
        {
            "arrival_s": g["arrival_s"].to_numpy(float),
            "gpus": gpus,
            "gpu_milli": np.full(len(g), MILLI),
            "duration_s": g["duration"].to_numpy(float),
            "cls": cls,
            "checkpoint_s": ckpt,
            "tp": np.maximum(-(-gpus // nodes), 1),
        }
    )
    return check_jobs(jobs, where)


def read_helios(
    path: str | Path,
    checkpoint_s: float = 3600.0,
    states: Iterable[str] | None = TERMINAL_STATES,
    cls: str = "training",
) -> pd.DataFrame:
    """Jobs from a Helios ``cluster_log.csv`` (SenseTime; Earth, Saturn, Uranus or Venus cluster).

    Parameters
    ----------
    path : path
        CSV with at least the columns :data:`HELIOS_COLUMNS` (github.com/S-Lab-System-Group/HeliosData,
        README "Schema and Description"): ``gpu_num`` [GPU], ``node_num``, ``state``, ``submit_time``
        (``YYYY-MM-DD HH:MM:SS``), ``duration`` [s].
    checkpoint_s : float
        Checkpoint period of the jobs [s] (the trace has none).
    states : iterable of str, optional
        End states kept (default all of :data:`TERMINAL_STATES`; ``None`` keeps every row).
    cls : str
        Class of every job: the trace gives no purpose (Helios is a datacenter for developing
        deep-learning models, HeliosData README), so all are ``training`` unless told otherwise.

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
    _, g = _slurm_log(path, HELIOS_COLUMNS, "Helios cluster_log.csv", states)
    return _job_table(g, np.full(len(g), cls, dtype=object), checkpoint_s, str(path))


def read_acme(
    path: str | Path,
    checkpoint_s: float = 3600.0,
    states: Iterable[str] | None = TERMINAL_STATES,
) -> pd.DataFrame:
    """Jobs from an Acme ``trace_seren.csv`` or ``trace_kalos.csv`` (Shanghai AI Lab LLM clusters).

    Parameters
    ----------
    path : path
        CSV with at least the columns :data:`ACME_COLUMNS` (github.com/InternLM/AcmeTrace, README
        "Job Trace"): those of Helios plus the workload ``type``.
    checkpoint_s : float
        Checkpoint period of training and fine-tuning jobs [s] (the trace has none).
    states : iterable of str, optional
        End states kept (default all of :data:`TERMINAL_STATES`; ``None`` keeps every row).

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
    _, g = _slurm_log(path, ACME_COLUMNS, "Acme job trace", states)
    types = g["type"].astype(str)
    bad = sorted(set(types) - set(ACME_CLASS))
    if bad:
        raise InputError(f"{path}: column type must be one of {', '.join(ACME_CLASS)}; got {bad[0]!r}")
    return _job_table(g, types.map(ACME_CLASS).to_numpy(object), checkpoint_s, str(path))


def read_trace(path: str | Path) -> pd.DataFrame:
    """A job table from a CSV, its format told by its columns: Alibaba openb (``num_gpu``), Acme
    (``gpu_num``, ``submit_time`` and ``type``), Helios (``gpu_num`` and ``submit_time``), else
    hnplan's own (:data:`hnplan.cluster.jobs.JOB_COLUMNS`, ``job_id`` optional).

    Raises
    ------
    InputError
        For a missing file or a CSV in none of these formats.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"trace file {path} not found")
    try:
        head = set(pd.read_csv(path, nrows=0).columns)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: not a CSV file ({exc})") from None
    if "num_gpu" in head:
        return read_openb(path)
    if {"gpu_num", "submit_time"} <= head:
        return read_acme(path) if "type" in head else read_helios(path)
    return check_jobs(pd.read_csv(path), str(path))
