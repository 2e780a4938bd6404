"""Storage cost model: how many units of a file system or object store (``data/storage/``) a training
job needs, and what its checkpoints and data loading ask of them.

Everything here takes resolved catalog objects and numbers (scalars or numpy arrays) and returns SI
values: bytes, bytes per second, operations per second, seconds, watts, US dollars. It imports no
planner; the claims audit (:mod:`hnplan.planning.claims`) and, later, the reliability and cost models
call it.

The model is the one storage vendors size with: the units of a parallel file system add their
capacity, bandwidth and IOPS (DDN and VAST reference architectures for NVIDIA DGX SuperPOD size the
file system in whole appliances from the aggregate read/write target); a job gets a share of that
aggregate, and the slowest of bandwidth and the clients' own links sets a transfer time.
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Storage
from hnplan.errors import InputError


def _fraction(name: str, value) -> None:
    v = np.asarray(value, dtype=float)
    if np.any(v <= 0) or np.any(v > 1):
        raise InputError(f"{name} must be in (0, 1]; got {value}")


def _non_negative(name: str, value) -> None:
    if np.any(np.asarray(value, dtype=float) < 0):
        raise InputError(f"{name} must be >= 0; got {value}")


def aggregate(storage: Storage, n_units) -> dict:
    """Capacity, bandwidth and IOPS of ``n_units`` units (they add, as in the vendors' sizing).

    Parameters
    ----------
    storage : Storage
    n_units : int or array of int

    Returns
    -------
    dict
        ``capacity_bytes`` [bytes], ``read_Bps``, ``write_Bps`` [bytes/s], ``read_iops`` [1/s].

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> a = aggregate(load_catalog().get("storage", "ddn-ai400x2"), 4)
    >>> a["read_Bps"] / 1e9, a["read_iops"]
    (360.0, 12000000.0)
    """
    n = np.asarray(n_units, dtype=float)
    _non_negative("n_units", n)
    out = {
        "capacity_bytes": n * units.TB_to_bytes(storage.capacity_tb_per_unit),
        "read_Bps": n * units.GBps_to_Bps(storage.read_GBps_per_unit),
        "write_Bps": n * units.GBps_to_Bps(storage.write_GBps_per_unit),
        "read_iops": n * storage.read_iops_per_unit,
    }
    return {k: (float(v) if np.ndim(v) == 0 else v) for k, v in out.items()}


def units_needed(storage: Storage, read_Bps=0.0, write_Bps=0.0, iops=0.0, capacity_bytes=0.0) -> dict:
    """Whole units of ``storage`` that meet every target at once, and which target binds.

    Parameters
    ----------
    storage : Storage
    read_Bps, write_Bps : float [bytes/s]
        Sustained read and write bandwidth wanted.
    iops : float [1/s]
        Random reads per second wanted (at the entry's ``iops_io_kib``).
    capacity_bytes : float [bytes]

    Returns
    -------
    dict
        ``units`` (int, at least 1), ``binding`` (``read``, ``write``, ``iops`` or ``capacity``) and
        ``by_target``, the units each target alone needs (fractional).

    Raises
    ------
    InputError
        For a negative target.

    Notes
    -----
    ``units = ceil(max(read / read_per_unit, write / write_per_unit, iops / iops_per_unit,
    capacity / capacity_per_unit))``.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> ddn = load_catalog().get("storage", "ddn-ai400x2")
    >>> units_needed(ddn, read_Bps=400e9, iops=1e6)["units"], units_needed(ddn, iops=1e7)["binding"]
    (5, 'iops')
    """
    for name, v in (
        ("read_Bps", read_Bps),
        ("write_Bps", write_Bps),
        ("iops", iops),
        ("capacity_bytes", capacity_bytes),
    ):
        _non_negative(name, v)
    per = aggregate(storage, 1)
    need = {
        "read": read_Bps / per["read_Bps"],
        "write": write_Bps / per["write_Bps"],
        "iops": iops / per["read_iops"],
        "capacity": capacity_bytes / per["capacity_bytes"],
    }
    binding = max(need, key=lambda k: need[k])
    return {"units": max(1, int(np.ceil(need[binding] - 1e-12))), "binding": binding, "by_target": need}


def transfer_s(n_bytes, storage_Bps, client_Bps=np.inf, bandwidth_share=1.0):
    """Time to move ``n_bytes`` between the job and the storage [s].

    Parameters
    ----------
    n_bytes : float or array [bytes]
    storage_Bps : float or array [bytes/s]
        Aggregate bandwidth of the storage in the direction moved (:func:`aggregate`).
    client_Bps : float or array [bytes/s]
        Aggregate bandwidth of the job's own links to the storage (its nodes' storage NICs); no limit
        by default.
    bandwidth_share : float [fraction 0-1]
        Share of the storage bandwidth this transfer gets (the rest serves the data loader and other
        jobs).

    Returns
    -------
    float or array [s]
        ``n_bytes / min(share x storage_Bps, client_Bps)``.

    Raises
    ------
    InputError
        For a share outside (0, 1].
    """
    _fraction("bandwidth_share", bandwidth_share)
    bw = np.minimum(np.asarray(storage_Bps, dtype=float) * bandwidth_share, client_Bps)
    out = np.asarray(n_bytes, dtype=float) / bw
    return float(out) if np.ndim(out) == 0 else out


def checkpoint_write_s(state_bytes, storage: Storage, n_units, bandwidth_share=1.0, client_Bps=np.inf):
    """Time to write a checkpoint of ``state_bytes`` to ``n_units`` units [s] (:func:`transfer_s` over
    the units' write bandwidth).

    >>> from hnplan.catalog import load_catalog
    >>> ddn = load_catalog().get("storage", "ddn-ai400x2")
    >>> round(checkpoint_write_s(13e12, ddn, 10, bandwidth_share=0.5))  # 13 TB at half of 650 GB/s
    40
    """
    return transfer_s(state_bytes, aggregate(storage, n_units)["write_Bps"], client_Bps, bandwidth_share)


def checkpoint_restore_s(state_bytes, storage: Storage, n_units, bandwidth_share=1.0, client_Bps=np.inf):
    """Time to read a checkpoint of ``state_bytes`` back from ``n_units`` units [s] (read bandwidth)."""
    return transfer_s(state_bytes, aggregate(storage, n_units)["read_Bps"], client_Bps, bandwidth_share)


def loader_need(
    tokens_per_s, bytes_per_token=None, tokens_per_sample=None, bytes_per_sample=None, io_kib=1024.0
) -> dict:
    """Sustained read bandwidth and read IOPS the data loader of a training job needs.

    Two shapes of data set:

    * **token shards** (pre-tokenized text read as large sequential blocks, e.g. Megatron-LM's
      indexed ``.bin`` files): give ``bytes_per_token``; reads are ``io_kib`` each.
    * **samples** (one object per sample: an image, an audio clip): give ``tokens_per_sample`` and
      ``bytes_per_sample``; each sample costs ``ceil(bytes_per_sample / io_kib)`` reads.

    Parameters
    ----------
    tokens_per_s : float or array [tokens/s]
        The job's training throughput.
    bytes_per_token : float, optional [bytes]
    tokens_per_sample, bytes_per_sample : float, optional [tokens], [bytes]
    io_kib : float [KiB]
        Size of one read.

    Returns
    -------
    dict
        ``read_Bps`` [bytes/s], ``iops`` [1/s], ``samples_per_s`` [1/s] (NaN for token shards).

    Raises
    ------
    InputError
        Unless exactly one of the two shapes is given, or for non-positive sizes.

    Examples
    --------
    >>> d = loader_need(1e6, tokens_per_sample=196, bytes_per_sample=110e3, io_kib=128)
    >>> round(d["samples_per_s"]), round(d["iops"])
    (5102, 5102)
    """
    shards = bytes_per_token is not None
    samples = tokens_per_sample is not None or bytes_per_sample is not None
    if shards == samples or (samples and (tokens_per_sample is None or bytes_per_sample is None)):
        raise InputError(
            "give either bytes_per_token (token shards) or tokens_per_sample and bytes_per_sample "
            "(one object per sample)"
        )
    for name, v in (
        ("bytes_per_token", bytes_per_token),
        ("tokens_per_sample", tokens_per_sample),
        ("bytes_per_sample", bytes_per_sample),
        ("io_kib", io_kib),
    ):
        if v is not None and np.any(np.asarray(v, dtype=float) <= 0):
            raise InputError(f"{name} must be > 0; got {v}")
    tps = np.asarray(tokens_per_s, dtype=float)
    io = io_kib * units.KiB
    if shards:
        read = tps * bytes_per_token
        iops, sps = read / io, np.full_like(tps, np.nan)
    else:
        sps = tps / tokens_per_sample
        read = sps * bytes_per_sample
        iops = sps * np.ceil(bytes_per_sample / io)
    out = {"read_Bps": read, "iops": iops, "samples_per_s": sps}
    return {k: (float(v) if np.ndim(v) == 0 else v) for k, v in out.items()}


def storage_power_w(storage: Storage, n_units):
    """IT power of ``n_units`` units [W] (0 for a cloud service)."""
    return (
        np.asarray(n_units, dtype=float) * storage.power_w_per_unit
        if np.ndim(n_units)
        else float(n_units) * storage.power_w_per_unit
    )


def storage_capex_usd(storage: Storage, n_units):
    """Purchase price of ``n_units`` units [USD] (0 for a service)."""
    return (
        np.asarray(n_units, dtype=float) * storage.usd_per_unit
        if np.ndim(n_units)
        else float(n_units) * storage.usd_per_unit
    )


def storage_usd_per_year(storage: Storage, n_units):
    """Service or support price of ``n_units`` units per year [USD] (12 x the monthly price)."""
    return (
        12.0 * (np.asarray(n_units, dtype=float) if np.ndim(n_units) else float(n_units)) * storage.usd_per_unit_month
    )


# -- a design's storage -------------------------------------------------------------------------
#: bytes per token of pre-tokenized text shards: Megatron-LM's indexed datasets store token ids as
#: int32 for vocabularies above 65,500 (uint16 below; ``DType.optimal_dtype`` in
#: megatron/core/datasets/indexed_dataset.py); every current large model's vocabulary is above
TEXT_BYTES_PER_TOKEN = 4.0
#: one read of a token shard [KiB]: Megatron-LM reads a sample's tokens as one contiguous span of the
#: shard (IndexedDataset.get), so reads are large and sequential; 1 MiB assumed as their size
TEXT_READ_KIB = 1024.0


def units_for(design, gpus: int, storage: Storage | None = None) -> int:
    """Units of the design's storage (or ``storage``) a cluster of ``gpus`` buys: ``ceil(gpus /
    storage_gpus_per_unit)``; one unit when the system gives no sizing rule; 0 without storage.

    Parameters
    ----------
    design : Design
    gpus : int
    storage : Storage, optional
        Overrides the system's ``storage``.
    """
    st = storage or design.storage
    if st is None:
        return 0
    per = design.system.storage_gpus_per_unit
    return max(1, int(np.ceil(gpus / per))) if per else 1


def job_storage(
    design,
    gpus: int,
    checkpoint_bytes: float,
    storage: Storage | None = None,
    n_units: int | None = None,
    tokens_per_s: float | None = None,
    bytes_per_token: float = TEXT_BYTES_PER_TOKEN,
) -> dict | None:
    """Checkpoint write and restore times of a job on the design's storage, beside its data loader.

    The data loader reads ``tokens_per_s x bytes_per_token`` continuously (:func:`loader_need`); the
    storage serves it for a fraction ``loader_read / read_Bps`` of its time, and checkpoints are
    written in the rest: write bandwidth share ``1 - loader_read / read_Bps`` (a parallel file
    system's servers and drives are shared by reads and writes). A restore runs while the loader is
    stopped, at the full read bandwidth. Both are also limited by the job's own storage links, the
    system's ``storage_write_GBps_per_node`` x nodes when given.

    Parameters
    ----------
    design : Design
    gpus : int
    checkpoint_bytes : float [bytes]
    storage : Storage, optional
        Overrides the system's ``storage``.
    n_units : int, optional
        Units bought; default :func:`units_for`.
    tokens_per_s : float, optional [tokens/s]
        The job's training throughput; none: no loader traffic.
    bytes_per_token : float [bytes]

    Returns
    -------
    dict or None
        None when the design names no storage; else ``storage, units, write_s, read_s`` [s],
        ``loader_read_Bps`` [bytes/s], ``loader_iops`` [1/s], ``write_share`` [fraction] and the
        units the loader and the checkpoint write alone need (``units_needed``).

    Raises
    ------
    InputError
        When the storage cannot sustain the data loader's read rate.
    """
    st = storage or design.storage
    if st is None:
        return None
    if n_units is None:  # the sizing rule, but never less than two checkpoints (the last good one and the next)
        n = max(units_for(design, gpus, st), units_needed(st, capacity_bytes=2 * checkpoint_bytes)["units"])
    else:
        n = n_units
        held = aggregate(st, n)["capacity_bytes"]
        if held < checkpoint_bytes:
            raise InputError(
                f"storage {st.id}: {n} unit(s) hold {units.to_TB(held):.3g} TB, less than one checkpoint of "
                f"{units.to_TB(checkpoint_bytes):.3g} TB; give at least "
                f"{units_needed(st, capacity_bytes=2 * checkpoint_bytes)['units']} units (two checkpoints)"
            )
    agg = aggregate(st, n)
    need = (
        loader_need(tokens_per_s, bytes_per_token=bytes_per_token, io_kib=TEXT_READ_KIB)
        if tokens_per_s
        else {"read_Bps": 0.0, "iops": 0.0}
    )
    read_frac = max(need["read_Bps"] / agg["read_Bps"], need["iops"] / agg["read_iops"])
    if read_frac >= 1:
        raise InputError(
            f"storage {st.id}: {n} unit(s) cannot sustain the data loader "
            f"({units.Bps_to_GBps(need['read_Bps']):.1f} GB/s, {need['iops']:.0f} IOPS); buy more units"
        )
    nodes = int(np.ceil(gpus / design.system.node_gpus))
    per_node = design.system.storage_write_GBps_per_node
    client = nodes * units.GBps_to_Bps(per_node) if per_node else np.inf
    return {
        "storage": st.id,
        "units": n,
        "write_s": checkpoint_write_s(checkpoint_bytes, st, n, 1.0 - read_frac, client),
        "read_s": checkpoint_restore_s(checkpoint_bytes, st, n, 1.0, client),
        "loader_read_Bps": need["read_Bps"],
        "loader_iops": need["iops"],
        "write_share": 1.0 - read_frac,
        "units_for_loader": units_needed(st, read_Bps=need["read_Bps"], iops=need["iops"])["units"],
    }
