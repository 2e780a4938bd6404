"""The bandwidth efficiencies of a system's scale-up and scale-out fabrics fitted to an nccl-tests sweep
of the user's own cluster (part of ``hnplan calibrate``, :mod:`hnplan.planning.calibrate`).

Each measured row (op, ranks, size, busbw or time) is predicted by the collective model of
:mod:`hnplan.comm` on ``gpus`` consecutive ranks of the system (:func:`hnplan.comm.place_group`,
the tuner's fastest algorithm as ``hnplan collective`` answers, or the one the row names: nccl-tests
run with ``NCCL_ALGO=RING`` measure the ring), with the per-rank bandwidth of each
tier scaled from the fabric's catalog ``bw_efficiency`` to the one being fitted: ``bw = line rate x
bw_efficiency``, :func:`hnplan.comm.topology.system_links`. A group inside one scale-up domain
identifies the scale-up efficiency; a group across domains the scale-out one (and the scale-up one
through its hierarchical phases).

Only rows at or above ``min_fit_bytes`` (default 16 MiB) enter the fit: below it the time is the
latency term (the fabric's ``software_overhead_us`` and hops, a separate calibration), which a
bandwidth efficiency must not absorb. All-to-all rows do not enter it either: their rate is the
expert-parallel library's (``alltoall_efficiency``), a different calibration. Every row is reported. Measured times come from nccl-tests'
busbw through its own definitions (``algbw = S / t``, ``busbw = algbw x factor(op, p)``,
NVIDIA/nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.comm import ALGORITHMS, OPS, GroupPlacement, busbw_factor, collective, place_group
from hnplan.errors import CatalogError, InputError, check_choice
from hnplan.planning.calibrate_fit import Parameter, fit, identify

if TYPE_CHECKING:
    import pandas as pd

#: bounds of a fitted fabric bandwidth efficiency [fraction of the per-direction line rate]; assumption:
#: a wide prior, the catalog's measured efficiencies (0.69-0.96) well inside it
BW_BOUNDS = (0.1, 1.0)
#: rows below this size are reported but not fitted (latency regime) [bytes]; assumption: near where
#: nccl-tests busbw curves start to flatten, so the latency term no longer dominates the time
MIN_FIT_BYTES = 16 * units.MiB
TIERS = ("scaleup", "scaleout")
#: a fitted row whose busbw after the fit is still further than this from the measured one is flagged
#: ``off_after_fit`` [%]; assumption: the catalog's fabric efficiencies reproduce published nccl-tests
#: bandwidth-regime busbw within about 10 % (the comm validation rows' tolerances), so a row beyond it after
#: fitting one efficiency per tier is one the model does not describe (another unit, algorithm or fabric)
OFF_AFTER_FIT_PCT = 10.0
#: collectives reported but not fitted: the all-to-all runs at the library's own efficiency where a fabric has one
#: (``Interconnect.alltoall_efficiency``; the flex expert-parallel dispatcher across domains at
#: ``flex_alltoall_efficiency``), which would otherwise be absorbed into ``bw_efficiency``
NOT_FITTED_OPS = ("alltoall",)
#: the most a fitted row's measured busbw may differ from the model's at the catalog's efficiencies (either way)
#: before its figure is taken for another unit: a fitted efficiency stays in BW_BOUNDS, so it moves a
#: bandwidth-bound row at most 1 / 0.69 = 1.45x up from the catalog's measured efficiencies (0.69-0.96) and
#: about 5-10x down, while a busbw in Gb/s is 8x, a time in ms 1,000x and one in s 1e6x off; the same factor
#: as a run's (:data:`hnplan.planning.calibrate_runs.UNIT_FACTOR`)
UNIT_FACTOR = 5.0
#: what each measured column is read in, named when a row looks like another unit
COLUMN_UNITS = {
    "busbw_GBps": "gigabytes per second as nccl-tests prints it (Gb/s / 8)",
    "time_us": "microseconds as nccl-tests prints it (not ms or s)",
}


@dataclass(frozen=True)
class _Row:
    line: int
    system: str
    op: str
    gpus: int
    size_bytes: float
    measured_s: float
    group: GroupPlacement
    algorithm: str | None
    column: str = "busbw_GBps"


def _rows(measurements: list[dict], default_system: str | None, cat: Catalog, path) -> list[_Row]:
    out = []
    for m in measurements:
        where = f"{path}: line {m['line']}"
        if m["op"] not in OPS:
            raise InputError(f"{where}: column op: {m['op']!r} is not one of {', '.join(OPS)}")
        sys_id = m["system"] or default_system
        if sys_id is None:
            raise InputError(
                f"{where}: column system: empty, and the runs are on several systems; name the system of each row"
            )
        try:
            design = cat.design(sys_id)
        except CatalogError as exc:  # an id in the sweep, named with its file and line
            raise CatalogError(
                f"{where}: column system: {exc}", path=path, entry=f"line {m['line']}", field="system"
            ) from None
        if m["gpus"] < 2:
            raise InputError(f"{where}: column gpus: a collective needs at least 2 ranks, got {m['gpus']}")
        try:
            group = place_group(design, m["gpus"], 1, m["gpus"])
        except InputError as exc:  # more ranks than the system's fabric joins
            raise InputError(f"{where}: column gpus: {exc}") from None
        if m["time_us"] is not None:
            t = units.us_to_s(m["time_us"])
        else:
            algbw = units.GBps_to_Bps(m["busbw_GBps"]) / busbw_factor(m["op"], m["gpus"])
            t = m["size_bytes"] / algbw
        alg = m.get("algorithm")
        if alg is not None:
            check_choice(f"{where}: column algorithm", alg, ALGORITHMS[m["op"]])
            try:
                collective(m["op"], m["size_bytes"], group, alg)
            except InputError as exc:
                raise InputError(f"{where}: column algorithm: {exc}") from None
        column = "time_us" if m["time_us"] is not None else "busbw_GBps"
        out.append(_Row(m["line"], design.id, m["op"], m["gpus"], m["size_bytes"], t, group, alg, column))
    return out


def _check_scale(rows: list[_Row], predicted_s: np.ndarray, path) -> None:
    """Each fitted row's measured busbw within :data:`UNIT_FACTOR` of the model's at the catalog's
    efficiencies (``predicted_s``, the rows' times); beyond it no fitted efficiency reaches it, so the row
    is refused as a likely unit slip (a busbw in Gb/s, a time in ms), naming the file, the line, the
    column and the unit it is read in.

    Raises
    ------
    CatalogError
        When measured / predicted busbw is above UNIT_FACTOR or below its inverse.
    """
    for r, t in zip(rows, predicted_s):
        ratio = t / r.measured_s  # measured busbw over the model's
        if 1.0 / UNIT_FACTOR <= ratio <= UNIT_FACTOR:
            continue
        measured, model = (f"{b:,.0f}" if b >= 1000 else f"{b:.4g}" for b in (_busbw(r, r.measured_s), _busbw(r, t)))
        raise CatalogError(
            f"{path}: line {r.line}: column {r.column}: a busbw of {measured} GB/s for {r.op} of "
            f"{r.size_bytes:,.0f} bytes on {r.gpus} GPUs of {r.system} is "
            f"{f'{ratio:,.0f}' if ratio >= 10 else f'{ratio:.2g}'}x hnplan's {model} GB/s at the catalog's "
            f"bw_efficiency, beyond the {UNIT_FACTOR:g}x a calibration can move it; {r.column} is "
            f"{COLUMN_UNITS[r.column]}",
            path=path,
            entry=f"line {r.line}",
            field=r.column,
        )


def _scaled(group: GroupPlacement, scale_up: float, scale_out: float) -> GroupPlacement:
    return replace(
        group,
        up=replace(group.up, bw_Bps=group.up.bw_Bps * scale_up),
        out=replace(group.out, bw_Bps=group.out.bw_Bps * scale_out),
    )


@dataclass(frozen=True)
class CommCalibration:
    """The fitted fabric efficiencies of the systems of an nccl-tests sweep.

    Attributes
    ----------
    parameters : list of Parameter
        ``bw_efficiency.<fabric>@<system>`` per system and tier the sweep covers.
    fabrics : dict
        ``{(system, tier): fabric id}`` for each parameter, tier ``scaleup`` or ``scaleout``.
    table : pandas.DataFrame
        One row per measurement: ``line, system, op, gpus, size_bytes, measured_busbw_GBps,
        before_busbw_GBps, after_busbw_GBps, error_before_pct, error_after_pct`` (busbw error,
        ``100 (model / measured - 1)``), ``in_fit``, ``off_after_fit`` (in the fit and still more than
        :data:`OFF_AFTER_FIT_PCT` off after it), ``algorithm`` (the row's, or ``tuner``: the model's fastest).
    solver : dict
        :func:`hnplan.planning.calibrate_fit.fit`'s report.
    """

    parameters: list[Parameter]
    fabrics: dict
    table: pd.DataFrame
    solver: dict

    def scales(self) -> dict[tuple[str, str], float]:
        """``{(system, tier): fitted / catalog bw_efficiency}`` [-]."""
        out = {}
        for (key, _), p in zip(self.fabrics.items(), self.parameters):
            out[key] = p.value / p.initial
        return out


def fit_collectives(
    measurements: list[dict],
    default_system: str | None,
    cat: Catalog,
    path="",
    min_fit_bytes: float = MIN_FIT_BYTES,
) -> CommCalibration:
    """Fit the ``bw_efficiency`` of each system's scale-up and scale-out fabric to an nccl-tests sweep.

    Parameters
    ----------
    measurements : list of dict
        From :func:`hnplan.catalog.runs.collective_measurements`.
    default_system : str or None
        System of rows without a ``system`` column (the runs' one system).
    cat : Catalog
    path : path
        The sweep file (for messages).
    min_fit_bytes : float
        Smallest message size fitted [bytes].

    Raises
    ------
    InputError
        For an unknown op, fewer than 2 ranks or more than the system's fabric joins, a row without a system
        when there is no default, an unknown system id, or a fitted row more than :data:`UNIT_FACTOR` from the
        model at the catalog's efficiencies (:class:`~hnplan.errors.CatalogError`, naming the line and column).
    """
    rows = _rows(measurements, default_system, cat, path)
    fabrics: dict[tuple[str, str], str] = {}
    params: list[Parameter] = []
    for r in rows:
        d = cat.design(r.system)
        for tier, fab in (("scaleup", d.scaleup_fabric), ("scaleout", d.scaleout_fabric)):
            if (r.system, tier) not in fabrics:
                fabrics[(r.system, tier)] = fab.id
                params.append(Parameter(f"bw_efficiency.{fab.id}@{r.system}", fab.bw_efficiency, *BW_BOUNDS))
    keys = list(fabrics)
    # all-to-all rows are reported, not fitted: their rate is the expert-parallel library's
    # (interconnect alltoall_efficiency, DeepEP-measured), not the fabric's bandwidth efficiency
    in_fit = [r.size_bytes >= min_fit_bytes and r.op not in NOT_FITTED_OPS for r in rows]
    fitted_rows = [r for r, f in zip(rows, in_fit) if f]

    def times(x, which) -> np.ndarray:
        s = dict(zip(keys, np.asarray(x) / np.array([p.initial for p in params])))
        return np.array(
            [
                float(collective(r.op, r.size_bytes, _scaled(r.group, *_pair(s, r.system)), r.algorithm).time_s[0])
                for r in which
            ]
        )

    def residuals(x):
        return np.log(times(x, fitted_rows) / np.array([r.measured_s for r in fitted_rows]))

    x0 = np.array([p.initial for p in params])
    t0 = times(x0, rows)
    _check_scale(fitted_rows, t0[np.array(in_fit, dtype=bool)], path)
    if fitted_rows:
        params = identify(residuals, params, what="nccl-tests rows")
        params, solver = fit(residuals, params)
    else:
        big = f"{units.to_MiB(min_fit_bytes):g} MiB (the bandwidth regime)"
        if any(r.op in NOT_FITTED_OPS and r.size_bytes >= min_fit_bytes for r in rows):
            note = (
                f"fixed: the rows at or above {big} are all-to-alls, reported and not fitted (an all-to-all's rate "
                "is the fabric's alltoall_efficiency where it has one, the expert-parallel dispatcher's its "
                "flex_alltoall_efficiency); give all-reduce, all-gather or reduce-scatter rows to fit bw_efficiency"
            )
        else:
            note = f"fixed: no row at or above {big}"
        params = [replace(p, value=p.initial, note=note) for p in params]
        solver = dict(nfev=0, cost=None, status=None, message="")
    x1 = np.array([p.value for p in params])
    t1 = times(x1, rows)
    measured = np.array([r.measured_s for r in rows])
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    table = pd.DataFrame(
        dict(
            line=[r.line for r in rows],
            system=[r.system for r in rows],
            op=[r.op for r in rows],
            gpus=[r.gpus for r in rows],
            size_bytes=[r.size_bytes for r in rows],
            measured_busbw_GBps=[_busbw(r, r.measured_s) for r in rows],
            before_busbw_GBps=[_busbw(r, t) for r, t in zip(rows, t0)],
            after_busbw_GBps=[_busbw(r, t) for r, t in zip(rows, t1)],
            error_before_pct=100.0 * (measured / t0 - 1.0),
            error_after_pct=100.0 * (measured / t1 - 1.0),
            in_fit=in_fit,
            off_after_fit=np.array(in_fit, dtype=bool) & (np.abs(100.0 * (measured / t1 - 1.0)) > OFF_AFTER_FIT_PCT),
            algorithm=[r.algorithm or "tuner" for r in rows],
        )
    )
    table.attrs["units"] = {
        "size_bytes": "bytes",
        "measured_busbw_GBps": "GB/s",
        "before_busbw_GBps": "GB/s",
        "after_busbw_GBps": "GB/s",
        "error_before_pct": "%",
        "error_after_pct": "%",
    }
    return CommCalibration(params, fabrics, table, solver)


def _pair(scales: dict, system: str) -> tuple[float, float]:
    return scales[(system, "scaleup")], scales[(system, "scaleout")]


def _busbw(r: _Row, t: float) -> float:
    """nccl-tests busbw of a row at time ``t`` [GB/s]."""
    return units.Bps_to_GBps(r.size_bytes / t * busbw_factor(r.op, r.gpus)) if t > 0 else math.nan
