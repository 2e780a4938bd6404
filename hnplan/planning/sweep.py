"""Design-space sweeps on Dask: every point of a spec through the full planner, into a Parquet dataset.

A point is one design, model, GPU count, batch, sequence, stack, dtype and token count (the *plan
inputs*) with one value of each procurement what-if input (electricity price, PUE, hardware price,
utilisation, failure-rate factor, checkpoint bandwidth, lifetime, build cost, maintenance). Its
answer is the training planner's best plan (:func:`hnplan.planning.training.best_plan`: the fastest
plan that fits, searched over every parallel degree and knob) and the procurement evaluation at the
point's inputs (:func:`hnplan.planning.procurement.evaluate`: TCO, $ per GPU-hour, run cost, goodput
and time-to-train ``tokens / (tokens_per_s x goodput)``) plus the design's rated IT and facility
power (:func:`hnplan.power.design_power` at the point's PUE).

Points come from a :class:`hnplan.catalog.sweeps.SweepSpec` (:mod:`hnplan.planning.sweep_points`: the
Cartesian product of its list axes crossed with ``samples`` draws of its distribution axes, common
random numbers across the grid).

Execution (:func:`run_sweep`) is a Dask graph: one task per distinct set of plan inputs runs the
vectorised training search once; the points that share it are evaluated in chunks of ``chunk_size``
points, one task each, depending on their plan's task. The client writes each finished chunk to a
hive-partitioned Parquet dataset (one folder per ``system``) as it arrives, so an interrupted sweep
keeps what it finished; a re-run skips every ``point_id`` already in the dataset (the id hashes the
point's spec-given inputs and the bytes of each system, model or stack file given by path). A point that fails keeps its row with the message in ``error``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import WHATIF_INPUTS
from hnplan.catalog.sweeps import load_sweep_spec
from hnplan.errors import HnplanError, InputError
from hnplan.planning.calibration_note import uncalibrated_sentence
from hnplan.planning.prediction_cache import source_fingerprint
from hnplan.planning.sweep_io import (  # noqa: F401 - the dataset functions re-exported
    COLUMNS,
    LAYOUT_OUTPUTS,
    OUTPUTS,
    PLAN_KEY,
    PLAN_OUTPUTS,
    PROVENANCE,
    UNITS,
    _given,
    _schema,
    default_dataset,
    done_catalogs,
    done_point_ids,
    done_rows,
    read_sweep,
    replace_rows,
    write_chunk,
)
from hnplan.planning.sweep_points import (  # noqa: F401 - the points re-exported
    plan_groups,
    point_id,
    sweep_points,
)
from hnplan.planning.sweep_signals import _quiet_on_interrupt, _sigint_held, _sigterm_as_interrupt, _sigterm_held

#: local Dask workers per core a sweep may start: each is a Python process with the planner loaded, and
#: the planner's work is CPU-bound (1,000 workers on a 2-core machine did not start within 100 s)
MAX_WORKERS_PER_CORE = 4
#: seconds a sweep waits for a ``--scheduler`` address to answer before it gives up (Dask's own default,
#: ``distributed.comm.timeouts.connect``, is 30 s: a mistyped host or port answered only after that)
CONNECT_TIMEOUT_S = 5.0
#: seconds the Dask client, once connected, may take to connect again after losing the scheduler
RECONNECT_TIMEOUT_S = 20.0


# -- the tasks (run on Dask workers) -------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _worker_catalog(root: str | None) -> tuple[Catalog, str]:
    cat = load_catalog(root if root and Path(root).is_dir() else None)
    return cat, cat.content_hash()


def _message(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text if isinstance(exc, HnplanError) else f"{type(exc).__name__}: {text}"


def plan_task(key: dict, data_root: str | None = None) -> dict:
    """The best training plan for one set of plan inputs; ``{"error": ...}`` when it has none (no plan divides
    or fits on any count the purchase holds, an unknown id) -- never raises. The point's ``gpus`` is a purchase,
    weighed as ``hnplan compare`` weighs one (:func:`hnplan.planning.job_sizes.weigh_job_counts`): the whole
    units that hold it are bought, the job runs on the count asked for or on 64 of each 72-GPU rack when that
    is faster, and where the count asked for has no plan on the counts the units hold (``gpus_used``,
    ``gpus_bought``)."""
    from hnplan.allocator import keep_freed_memory
    from hnplan.comm.topology import whole_units
    from hnplan.planning.job_sizes import weigh_job_counts
    from hnplan.planning.training import best_plan

    keep_freed_memory()  # a worker runs many searches: keep their freed arrays in the heap (once per process)
    cat, _ = _worker_catalog(data_root)
    stack = None if key["stack"] == "none" else key["stack"]

    def plan(g: int) -> dict:  # one vectorised search on g GPUs
        try:
            (est,), searched, feasible = best_plan(
                key["model"],
                key["system"],
                g,
                int(key["seq_len"]),
                int(key["global_batch_seqs"]),
                key["dtype"],
                catalog=cat,
                stack=stack,
            )
        except Exception as exc:  # noqa: BLE001 -- recorded per point, the sweep goes on
            return {"error": _message(exc)}
        return {"est": est, "tokens_per_s": est.tokens_per_s, "searched": searched, "feasible": feasible}

    gpus = int(key["gpus"])
    try:
        system = cat.system(key["system"])
        bought = int(whole_units(cat.design(system), gpus))
    except Exception as exc:  # noqa: BLE001 -- an unknown id or a count beyond the fabric: the point's error
        return {"error": _message(exc)}
    found, used, refused = weigh_job_counts(gpus, system.unit_gpus, bought // system.unit_gpus, plan,
                                            lambda g, e: e["tokens_per_s"])  # fmt: skip
    if found is None:
        return {"error": refused.get(gpus) or next(iter(refused.values()))}
    est = found["est"]
    p = est.parallel_dict()
    return dict(
        tokens_per_s=est.tokens_per_s,
        mfu=est.mfu,
        step_time_s=est.step_time_s,
        searched=found["searched"],
        feasible=found["feasible"],
        gpus_used=used,
        gpus_bought=bought,
        **{k: p[k] for k in LAYOUT_OUTPUTS},
    )


def evaluate_chunk(
    points: pd.DataFrame, plan: dict, data_root: str | None = None, provenance: dict | None = None
) -> pd.DataFrame:
    """Procurement outputs of a chunk of points that share one plan; one row per point in
    :data:`COLUMNS` order, failures in ``error`` (never raises).

    Parameters
    ----------
    points : DataFrame
        Rows of :func:`sweep_points` with the same plan inputs.
    plan : dict
        :func:`plan_task`'s answer for them.
    """
    from hnplan import units
    from hnplan.planning.procurement import WhatIfCase, base_inputs, evaluate
    from hnplan.power import design_power, energy_j

    cat, chash = _worker_catalog(data_root)
    prov = {
        **(provenance or {}),
        "catalog_hash": chash,
        "code_fingerprint": source_fingerprint(),  # this worker's code: a remote one may run another
        "evaluated_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    rows = []
    for pt in points.to_dict("records"):
        row = {c: pt.get(c) for c in COLUMNS}
        row.update({k: plan.get(k) for k in PLAN_OUTPUTS}, **prov, sample=pt.get("sample", 0))
        try:
            if "error" in plan:
                raise InputError(plan["error"])
            system, model = cat.system(pt["system"]), cat.model(pt["model"])
            # the job on the GPUs its plan runs on, the purchase's whole units paid for, powered and spares
            used, bought = int(plan.get("gpus_used") or pt["gpus"]), plan.get("gpus_bought")
            case = WhatIfCase(system, model, used, float(pt["tokens"]), plan["tokens_per_s"], gpus_bought=bought)
            x = {**base_inputs(case, cat), **{k: float(pt[k]) for k in WHATIF_INPUTS if _given(pt.get(k))}}
            res = evaluate(case, cat, **x)
            pw = design_power(cat.design(system), bought or used, pue=x["pue"])
            seconds = units.days_to_s(res["days_to_train"])
            # energy as hnplan.planning.time_to_train: rated facility power x the average training draw
            row.update(
                x,
                **res,
                it_power_w=pw.it_w,
                facility_power_w=pw.facility_w,
                energy_mwh=units.j_to_mwh(
                    energy_j(pw.facility_w * cat.facility.training_power_fraction.value, seconds)
                ),
            )
        except Exception as exc:  # noqa: BLE001 -- recorded per point, the sweep goes on
            row["error"] = _message(exc)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


@dataclass
class SweepSummary:
    """What a run did: points in the spec, skipped (already in the dataset; ``stale`` of them evaluated with
    another catalog than ``catalog_hash``, this run's, and ``other_code`` by other code than ``code_fingerprint``
    or before rows recorded it; ``failed_kept`` of them failed), ``retried`` (failed rows evaluated again), evaluated, failed (written with
    their ``error``), and ``lost``: points whose Dask task itself failed (a worker killed, ``lost_reason``),
    not written."""

    spec_id: str
    out: str
    points: int
    skipped: int
    stale: int = 0
    catalog_hash: str = ""
    other_code: int = 0
    code_fingerprint: str = ""
    retried: int = 0
    failed_kept: int = 0  # skipped points whose row has an error (--retry-failed evaluates them again)
    evaluated: int = 0
    failed: int = 0
    plans: int = 0
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    lost: int = 0  # points whose Dask task failed (a worker died): not written, evaluated by the next run
    lost_reason: str = ""
    calibration_note: str = ""  # the spec's chips planned at the ideal default calibrations (optimistic)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def run_sweep(
    spec,
    out: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    processes: bool = True,
    progress: bool = True,
    catalog: Catalog | None = None,
    retry_failed: bool = False,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> SweepSummary:
    """Evaluate every point of a spec not yet in ``out`` on Dask and append the rows to the dataset.

    Parameters
    ----------
    spec : SweepSpec, id or YAML path
    out : path
        The dataset folder (created; a re-run resumes it).
    workers : int, optional
        Workers of the local cluster (one thread each); default: the machine's cores; at most
        :data:`MAX_WORKERS_PER_CORE` per core; refused with ``scheduler`` (its cluster has its own workers).
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:8786``); its workers need hnplan and the
        same catalog (each row records the catalog hash its worker saw).
    processes : bool
        Local workers as processes (default) or threads of this process.
    progress : bool
        Show a progress bar (on stderr).
    retry_failed : bool
        Also evaluate again the spec's points whose row has an ``error``; each file holding such rows is
        replaced whole, its retried rows by their new ones (:func:`~hnplan.planning.sweep_io.replace_rows`).
    connect_timeout_s : float
        Seconds to wait for ``scheduler`` to answer (default :data:`CONNECT_TIMEOUT_S`); once connected,
        the client may take :data:`RECONNECT_TIMEOUT_S` to connect again after a lost connection.

    Returns
    -------
    SweepSummary

    Raises
    ------
    InputError
        For a bad spec or worker count, or a scheduler that cannot be reached; a point's own failure is
        recorded in the dataset instead.
    """
    import logging
    import os
    import time

    import hnplan

    cat = catalog or load_catalog()
    spec = load_sweep_spec(spec, cat)
    if not connect_timeout_s > 0:
        raise InputError(f"--connect-timeout must be > 0 seconds; got {connect_timeout_s:g}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be >= 1; got {workers}")
    if workers is not None and scheduler is not None:
        # a Dask client does not size a cluster it connects to: the scheduler runs tasks on the workers that
        # joined it (``dask worker --nworkers``), so the number would be silently ignored
        raise InputError(
            f"--workers {workers} sizes the local cluster only; with --scheduler the points run on that cluster's "
            "own workers (`dask worker ADDRESS --nworkers N`): give one or the other"
        )
    cores = os.cpu_count() or 1
    if workers is not None and workers > MAX_WORKERS_PER_CORE * cores:
        raise InputError(
            f"--workers {workers} is more than {MAX_WORKERS_PER_CORE} per core of this machine's {cores} "
            f"(at most {MAX_WORKERS_PER_CORE * cores}): the planner is CPU-bound, so local workers beyond the "
            "cores only queue, each its own Python process; give --scheduler for a larger Dask cluster"
        )
    t0 = time.perf_counter()
    out = Path(out)
    pts = sweep_points(spec, cat)
    done = done_rows(out)
    done = done[done["point_id"].isin(pts["point_id"])]
    retry = done[done["failed"]] if retry_failed else done.iloc[:0]
    kept = done[~done["point_id"].isin(retry["point_id"])]
    todo = pts[~pts["point_id"].isin(kept["point_id"])]
    chash, code = cat.content_hash(), source_fingerprint()
    summary = SweepSummary(
        spec.id,
        str(out),
        len(pts),
        len(pts) - len(todo),
        stale=int((kept["catalog_hash"] != chash).sum()),
        catalog_hash=chash,
        other_code=int((kept["code_fingerprint"] != code).sum()),  # None (not recorded) counts
        code_fingerprint=code,
        retried=len(retry),
        failed_kept=int(kept["failed"].sum()),
        calibration_note=uncalibrated_sentence([cat.system(x).accelerator for x in pts["system"].unique()], cat),
    )
    retry_files = dict(zip(retry["point_id"], retry["file"], strict=True))
    if todo.empty:
        summary.seconds = time.perf_counter() - t0
        return summary
    from dask.distributed import Client, LocalCluster, as_completed
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    groups = plan_groups(todo, spec.chunk_size)
    summary.plans = len(groups)
    prov = dict(spec_id=spec.id, sampling=spec.sampling, seed=spec.seed, hnplan_version=hnplan.__version__)
    root = None if scheduler else str(cat.root)
    with _quiet_on_interrupt() as quiet, _sigterm_as_interrupt(quiet), contextlib.ExitStack() as stack:
        if scheduler:
            try:
                _reach(scheduler, connect_timeout_s)
                client = stack.enter_context(Client(scheduler, timeout=f"{RECONNECT_TIMEOUT_S}s"))
            except (OSError, TimeoutError, ValueError) as exc:
                if made:  # nothing was written: leave no empty folder behind
                    out.rmdir()
                if isinstance(exc, ValueError):
                    raise InputError(f"--scheduler {scheduler}: not a Dask address ({exc})") from None
                raise InputError(
                    f"--scheduler {scheduler}: cannot reach a Dask scheduler there within --connect-timeout "
                    f"{connect_timeout_s:g} s ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                ) from None
        else:
            # the worker processes ignore Ctrl-C: the client alone stops them; a SIGTERM waits for the cluster
            with _sigint_held(), _sigterm_held():
                cluster = stack.enter_context(
                    LocalCluster(
                        n_workers=workers or os.cpu_count() or 1,
                        threads_per_worker=1,
                        processes=processes,
                        # no dashboard, and its HTTP endpoint on a free port: with None distributed still binds
                        # 8787 and warns when another Dask cluster on the machine holds it
                        dashboard_address=":0",
                        # the workers' own logs: a Ctrl-C closes the cluster under their heartbeats, whose failures
                        # they log at ERROR; a worker lost for real is counted in the summary instead
                        silence_logs=logging.CRITICAL,
                    )
                )
            client = stack.enter_context(Client(cluster))
        # closed in reverse: on an error (an interruption among them) silence the loggers, then close the client,
        # then the cluster
        stack.push(lambda kind, exc, tb: quiet() if kind is not None else None)
        futures = {}
        for key, chunks in groups:
            plan_f = client.submit(plan_task, key, root, pure=False)
            for chunk in chunks:
                f = client.submit(evaluate_chunk, chunk, plan_f, root, prov, pure=False)
                futures[f] = len(chunk)
        bar = Progress(
            TextColumn(f"sweep {spec.id}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not progress,
            transient=False,
        )
        with bar:
            task = bar.add_task("points", total=len(todo))
            for f in as_completed(futures):
                n_pts = futures[f]
                try:
                    df = f.result()
                except Exception as exc:  # noqa: BLE001 -- a worker lost (KilledWorker), not a point's failure
                    # nothing is written: the next run evaluates these points again
                    summary.lost += n_pts
                    summary.lost_reason = summary.lost_reason or _message(exc)
                    bar.advance(task, n_pts)
                    continue
                again = df["point_id"].isin(retry_files)
                if again.any():  # in place of their failed rows, file by file
                    replace_rows(df[again], out, retry_files)
                if not again.all():  # named by a point of its own: a retried point's name is a file already
                    write_chunk(df[~again], out, f"part-{df.loc[~again, 'point_id'].iloc[0]}")
                errs = df["error"].dropna()
                summary.evaluated += len(df)
                summary.failed += len(errs)
                for e in errs:
                    summary.errors[e] = summary.errors.get(e, 0) + 1
                bar.advance(task, n_pts)
    summary.seconds = time.perf_counter() - t0
    return summary


def _reach(address: str, timeout_s: float) -> None:
    """Open and close one connection to a Dask scheduler, waiting at most ``timeout_s`` seconds.

    The Dask client's own ``timeout`` bounds both its first connection and its reconnection after a lost
    one; a short wait for the first is checked here so that the reconnection keeps its longer window.
    Runs in a thread of its own (its own event loop), so it works under a running loop (Jupyter) too.

    Raises
    ------
    OSError
        When nothing answered in time (``distributed.comm.connect`` retries until the timeout).
    ValueError
        For an address Dask cannot parse.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect

    async def probe() -> None:
        comm = await connect(address, timeout=timeout_s)
        await comm.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, probe()).result()
