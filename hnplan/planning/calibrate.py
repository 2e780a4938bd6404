"""Calibration as a user workflow: a software stack's few efficiencies fitted to the user's own
measured training runs (and, optionally, the network to an nccl-tests sweep of their cluster), with
the leave-one-out error of every run, written as a stack YAML with its provenance (``hnplan
calibrate``; README, "Calibrate to your own cluster").

What is fitted (physics, not rows: one value per stack and accelerator family):

* ``matmul_efficiency.<accelerator>.<dtype>``: the large-GEMM efficiency inside training with this
  stack (the GEMM law's large-shape ceiling, :mod:`hnplan.compute.gemm`), bounds
  :data:`MATMUL_BOUNDS`; one per accelerator and dtype the runs use.
* ``tp_comm_overlap_fraction`` when the stack overlaps TP communication (``tp_comm``), and
  ``ep_comm_overlap_fraction`` when it overlaps the expert all-to-all (``ep_comm``), bounds [0, 1]: one share
  wherever the EP group sits (the written stack drops its ``ep_comm_overlap_fraction_scale_out``).
* With an nccl-tests sweep, each system's scale-up and scale-out ``bw_efficiency``
  (:mod:`hnplan.planning.calibrate_comm`), fitted first and held fixed in the training fit: the
  sweep measures the network alone, so the training runs need not.

``overlap_gemm_slowdown`` is not fitted: a step time sees only the product ``(1 - slowdown) x
fraction`` (exposed communication ``t_comm (1 - (1 - s) f)``,
:func:`hnplan.planning.training.components.overlapped_comm`), so runs cannot separate the two, and
the slowdown has its own source (the SM share of the communication kernels). Which of the
rest the runs can identify is decided by :func:`hnplan.planning.calibrate_fit.identify` (one
parameter per run at most, none the runs do not exercise, none collinear with one already kept);
the others keep the stack's values and the answer says why.

Each run is predicted as the validation does (:func:`hnplan.planning.validation.predict_run`): the
planner's fastest plan that fits, with the knobs the run states (``fixed``) pinned and the rest
searched. Leave-one-out: each run is also predicted by the same identification and fit on the other
runs (the network, fitted to the sweep alone, stays as fitted). The candidates that fit are found
once per run (memory does not depend on the fitted efficiencies) and re-evaluated for each trial of
the solver.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.runs import collective_measurements, measured_runs
from hnplan.catalog.schemas import SoftwareStack
from hnplan.errors import HnplanError, InputError
from hnplan.planning.calibrate_fit import METHOD, Parameter, fit, identify
from hnplan.planning.calibrate_runs import (  # noqa: F401  (UNIT_FACTOR, METRIC_UNITS: public here)
    CHOICE_PARAMS,
    METRIC_UNITS,
    UNIT_FACTOR,
    _check_scale,
    _RunModel,
)

if TYPE_CHECKING:
    import pandas as pd

    from hnplan.planning.calibrate_comm import CommCalibration

#: bounds of a fitted in-training GEMM efficiency [fraction of the dense peak]; assumption: wide enough for
#: any production stack (Llama 3, arXiv:2407.21783 Table 4: 38-43 % MFU, so GEMMs below 0.2 mean a broken run)
MATMUL_BOUNDS = (0.2, 1.0)
#: the example inputs of the README's "Calibrate to your own cluster" (the repository's docs/examples/)
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
EXAMPLE_RUNS = EXAMPLES / "calibration_runs.yaml"
EXAMPLE_COLLECTIVES = EXAMPLES / "nccl_tests.csv"


def _candidates(models: list[_RunModel], stack: SoftwareStack) -> list[Parameter]:
    """The parameters the runs could fit, in priority order: GEMM efficiencies, then overlap fractions."""
    out: list[Parameter] = []
    seen = set()
    for m in models:
        if m.matmul_key not in seen:
            seen.add(m.matmul_key)
            out.append(Parameter(m.matmul_key, m.matmul_initial, *MATMUL_BOUNDS))
    for name, switch in CHOICE_PARAMS:
        if getattr(stack, switch):  # started at the runs' value (a stack's per-chip-family one where it has it)
            out.append(Parameter(name, getattr(models[0].job.choices if models else stack, name), 0.0, 1.0))
    return out


def _fit_runs(
    models: list[_RunModel], params: list[Parameter], scales: dict, start: dict[str, float] | None = None
) -> tuple[list[Parameter], dict]:
    """Identify and fit ``params`` on the runs of ``models``; parameters that none of them uses are
    fixed (another accelerator or dtype). ``start``: where the solver starts (:func:`fit`), the fit to
    all runs for a leave-one-out fit."""
    used = {m.matmul_key for m in models}
    own = [p for p in params if not p.name.startswith("matmul_efficiency.") or p.name in used]
    names = [p.name for p in own]
    published = np.array([m.run.published for m in models])

    def residuals(x):
        vals = dict(zip(names, map(float, x)))
        return np.log(np.array([m.predict(vals, scales) for m in models]) / published)

    own = identify(residuals, own, what="runs")
    own, solver = fit(residuals, own, start)
    by_name = {p.name: p for p in own}
    note = "fixed: no run left uses this accelerator and dtype"
    return [by_name.get(p.name, replace(p, value=p.initial, fitted=False, note=note)) for p in params], solver


#: a fitted GEMM ceiling this far from the catalog's (a MAMF measurement on the chip or one carried from its family)
#: is flagged: the GEMM law reproduces measured kernels within about 8 % (docs/compute.md), so a move of a
#: quarter is another cost the runs carry, put into the GEMMs (communication, host work, a layout the model
#: does not describe) [-]
FAR_FROM_MEASURED = 0.25


def _far_from_measured(p: Parameter) -> Parameter:
    """``p`` with a warning in its note when it is a fitted ``matmul_efficiency`` that moved more than
    :data:`FAR_FROM_MEASURED` from the catalog's value: the fit then likely absorbs a cost that is not the GEMMs'
    (two runs that differ in expert parallelism across servers fit a 44 % lower GEMM ceiling, which would slow
    every plan on the chip)."""
    if not (p.fitted and p.name.startswith("matmul_efficiency.") and p.initial > 0):
        return p
    moved = p.value / p.initial - 1.0
    if abs(moved) <= FAR_FROM_MEASURED:
        return p
    warn = (
        f"WARNING: {moved:+.0%} from the catalog's GEMM ceiling, more than the GEMM law misses measured kernels: "
        "it likely absorbs another cost of these runs (communication, host work, a layout the model does not "
        "describe) and would apply it to every GEMM on the chip; compare the runs' breakdowns (hnplan train "
        "with their plans) before using it"
    )
    return replace(p, note=f"{p.note}; {warn}" if p.note else warn)


@dataclass(frozen=True)
class Calibration:
    """The answer of :func:`calibrate`.

    Attributes
    ----------
    stack : SoftwareStack
        The stack as it was.
    calibrated : SoftwareStack
        The stack with the fitted values and their provenance (:func:`hnplan.planning.calibrate_write.write_calibration` writes it).
    parameters : list of Parameter
        Every candidate efficiency of the stack (and of the network with a sweep): fitted or fixed, why.
    run_rows : list of dict
        Per run: ``id, model, system, gpus, metric, published, before, after, loo`` (the run predicted
        by a fit to the other runs), ``error_before_pct, error_after_pct, loo_error_pct``
        (``100 (predicted / published - 1)``; LOO NaN with a single run), ``loo_note``, ``plan``;
        :attr:`runs` is the same as a table.
    comm : CommCalibration or None
        The nccl-tests fit, when a sweep was given.
    excluded : list of str
        Runs left out (on another accelerator than ``--accelerator``), with the reason.
    runs_path, collectives_path : str
    date : str
        ISO date of the calibration.
    solver : dict
        Solver report of the fit to all runs.
    """

    stack: SoftwareStack
    calibrated: SoftwareStack
    parameters: list[Parameter]
    run_rows: list[dict]
    comm: CommCalibration | None
    excluded: list[str]
    runs_path: str
    collectives_path: str | None
    date: str
    solver: dict = field(default_factory=dict)

    @property
    def runs(self) -> pd.DataFrame:
        """:attr:`run_rows` as a table (``attrs["units"]`` names the units of the error columns)."""
        import pandas as pd  # here, not at the top: the command line prints the rows without pandas

        table = pd.DataFrame(self.run_rows)
        table.attrs["units"] = {"error_before_pct": "%", "error_after_pct": "%", "loo_error_pct": "%"}
        return table

    def rms_pct(self, column: str) -> float:
        """Root-mean-square of an error column of :attr:`runs` (NaN rows skipped) [%]."""
        v = np.array([r[column] for r in self.run_rows], dtype=float)
        v = v[~np.isnan(v)]
        return float(np.sqrt(np.mean(v**2))) if v.size else math.nan

    @property
    def fit_warning(self) -> str | None:
        """One line when the fitted stack predicts the user's runs worse than the stack it started from (RMS of
        ``error_after_pct`` above that of ``error_before_pct``, as printed to 0.1 %), else None.

        The fit minimises the runs' log errors at the plans found for them at the start, with the network held
        at a sweep's fit where one was given; the errors after are of the fitted stack's own best plans with that
        network, so they can end worse (a run whose best plan changes, a network fit the runs disagree with)."""
        before, after = self.rms_pct("error_before_pct"), self.rms_pct("error_after_pct")
        if math.isnan(before) or math.isnan(after) or round(after, 1) <= round(before, 1):
            return None
        return (
            f"the fitted stack {self.calibrated.id} predicts these runs worse than {self.stack.id} did: RMS error "
            f"{after:.1f}% after the fit against {before:.1f}% before; keep --stack {self.stack.id}, or check the "
            "runs (plan, metric, published value) and the sweep before using it"
        )

    def parameters_table(self) -> pd.DataFrame:
        """One row per parameter: ``name, initial, value, lower, upper, fitted, at_bound, note``."""
        import pandas as pd  # here, not at the top: the command line prints the rows without pandas

        df = pd.DataFrame([p.as_dict() for p in self.parameters])
        df.attrs["units"] = {k: "fraction" for k in ("initial", "value", "lower", "upper")}
        return df

    def to_dict(self) -> dict:
        """The JSON answer of ``hnplan calibrate --json``."""
        return dict(
            stack=self.stack.id,
            calibrated_stack=self.calibrated.id,
            runs_file=self.runs_path,
            collectives_file=self.collectives_path,
            date=self.date,
            method=METHOD,
            parameters=[p.as_dict() for p in self.parameters],
            runs=[dict(r) for r in self.run_rows],
            collectives=None if self.comm is None else self.comm.table.to_dict(orient="records"),
            rms_error_before_pct=self.rms_pct("error_before_pct"),
            rms_error_after_pct=self.rms_pct("error_after_pct"),
            rms_loo_error_pct=self.rms_pct("loo_error_pct"),
            worse_than_start=self.fit_warning is not None,
            warning=self.fit_warning,
            excluded=self.excluded,
            solver=self.solver,
        )


def calibrate(
    runs_path,
    stack,
    accelerator: str | None = None,
    collectives_path=None,
    catalog: Catalog | None = None,
    date: _dt.date | None = None,
) -> Calibration:
    """Fit a software stack's efficiencies to measured training runs (see the module docstring).

    Parameters
    ----------
    runs_path : path
        YAML list of runs (:func:`hnplan.catalog.runs.measured_runs`: the schema of
        ``data/validation/training_runs.yaml``, ``id, model, system, gpus, seq_len,
        global_batch_seqs, dtype, metric, published`` required, ``fixed`` for the knobs the run used).
    stack : str or path
        The software stack the runs were made with (id or YAML path).
    accelerator : str, optional
        Fit only the runs on this accelerator (the others are reported as excluded).
    collectives_path : path, optional
        An nccl-tests sweep (:func:`hnplan.catalog.runs.collective_measurements`).
    date : datetime.date, optional
        Date recorded in the provenance (default today, UTC).

    Returns
    -------
    Calibration

    Raises
    ------
    InputError
        A bad runs or sweep file (one line naming the file, run or line, and field), an unknown stack,
        model, system or accelerator, no run left on ``accelerator``, or a run whose stated plan
        hnplan cannot fit in memory.
    InfeasiblePlan
        A run whose pinned knobs break a plan rule (the message names it).
    """
    cat = catalog or load_catalog()
    st = cat.stack(stack)
    day = (date or _dt.datetime.now(_dt.UTC).date()).isoformat()
    runs = measured_runs(runs_path, st.id)
    excluded: list[str] = []
    if accelerator is not None:
        acc_id = cat.accelerator(accelerator).id
        keep = [r for r in runs if cat.system(r.system).accelerator == acc_id]
        excluded = [f"{r.id}: on {cat.system(r.system).accelerator}, not {acc_id}" for r in runs if r not in keep]
        if not keep:
            raise InputError(f"{runs_path}: no run is on accelerator {acc_id} (--accelerator)")
        runs = keep
    comm = None
    if collectives_path is not None:
        systems = sorted({r.system for r in runs})
        from hnplan.planning.calibrate_comm import fit_collectives  # here: only a sweep needs it

        comm = fit_collectives(
            collective_measurements(collectives_path),
            systems[0] if len(systems) == 1 else None,
            cat,
            collectives_path,
        )
    scales = comm.scales() if comm is not None else {}
    models = []
    for r in runs:
        try:
            models.append(_RunModel(r, st, cat))
        except HnplanError as exc:  # name the file and the run, keep the kind (exit 2 input, 3 infeasible)
            raise type(exc)(f"{runs_path}: run {r.id}: {exc}") from None
        _check_scale(models[-1], runs_path, scales)
    params, solver = _fit_runs(models, _candidates(models, st), scales)
    params = [_far_from_measured(p) for p in params]
    if st.tp_comm or st.ep_comm:
        v = st.overlap_gemm_slowdown
        note = (
            "fixed by design: step times see only (1 - slowdown) x overlap fraction, so runs cannot separate "
            "the two; the slowdown has its own source (the SM share of the communication kernels, see the stack)"
        )
        params.append(Parameter("overlap_gemm_slowdown", v, 0.0, 1.0, value=v, fitted=False, note=note))
    values = {p.name: p.value for p in params}
    # each leave-one-out fit starts from the fit to all runs, near its answer: the first trials (the
    # values and the Jacobian's step there) are already evaluated, and fewer iterations follow
    start = {p.name: p.value for p in params if p.fitted}
    rows = []
    for i, m in enumerate(models):
        others = models[:i] + models[i + 1 :]
        if others:
            loo_params, _ = _fit_runs(others, _candidates(models, st), scales, start)
            loo = m.predict({p.name: p.value for p in loo_params}, scales)
            fitted = [p.name for p in loo_params if p.fitted]
            loo_note = f"fit to the other {len(others)} run(s): {', '.join(fitted) or 'nothing identified'}"
        else:
            loo, loo_note = math.nan, "one run: nothing to leave out"
        after = m.best(values, scales)
        before = m.predict({}, {})
        pub = m.run.published
        rows.append(
            dict(
                id=m.run.id,
                model=m.run.model,
                system=m.run.system,
                gpus=m.run.gpus,
                metric=m.run.metric,
                published=pub,
                before=before,
                after=float(after[m.run.metric]),
                loo=loo,
                error_before_pct=100.0 * (before / pub - 1.0),
                error_after_pct=100.0 * (float(after[m.run.metric]) / pub - 1.0),
                loo_error_pct=100.0 * (loo / pub - 1.0),
                loo_note=loo_note,
                plan=(
                    f"TP{after['tp']} PP{after['pp']} DP{after['dp']} CP{after['cp']} EP{after['ep']} "
                    f"mb{after['microbatch_size']} v{after['virtual_stages']} ZeRO{after['zero_stage']} "
                    f"rc-{after['recompute']}"
                ),
            )
        )
    all_params = params + (comm.parameters if comm is not None else [])
    calibrated = calibrated_stack(st, params, rows, str(Path(runs_path).resolve()), day, collectives_path)
    sweep = None if collectives_path is None else str(collectives_path)
    return Calibration(st, calibrated, all_params, rows, comm, excluded, str(runs_path), sweep, day, solver)


def _residual_text(rows: list[dict]) -> str:
    return "; ".join(
        f"{r['id']} {r['metric']} {r['published']:g}: {r['error_before_pct']:+.1f} % -> {r['error_after_pct']:+.1f} %"
        + ("" if math.isnan(r["loo_error_pct"]) else f" (leave-one-out {r['loo_error_pct']:+.1f} %)")
        for r in rows
    )


def calibrated_stack(
    stack: SoftwareStack,
    params: list[Parameter],
    table: pd.DataFrame | list[dict],
    runs_path: str,
    day: str,
    collectives_path=None,
) -> SoftwareStack:
    """The stack with the fitted values, id ``<stack>-calibrated``, and the provenance of each
    fitted field: the runs file, the date, the method, the residuals before and after and the
    leave-one-out errors (``field_sources``; a fitted field's assumption, if any, is dropped).

    ``table`` holds the runs as :attr:`Calibration.runs` (a table) or :attr:`Calibration.run_rows` (dicts).

    Raises
    ------
    InputError
        If the result does not validate as a :class:`SoftwareStack` (a bug: the bounds keep it valid).
    """
    rows = table if isinstance(table, list) else table.to_dict(orient="records")
    d = stack.model_dump(mode="json", exclude_unset=True)
    fitted = [p for p in params if p.fitted]
    runs = ", ".join(r["id"] for r in rows)
    net = f"; the network as fitted to the nccl-tests sweep {collectives_path}" if collectives_path else ""
    prov = (
        f"fitted by hnplan calibrate on {day} to the measured runs {runs} of {runs_path} ({METHOD}{net}): "
        f"{_residual_text(rows)}"
    )
    d["id"] = f"{stack.id.removesuffix('-calibrated')}-calibrated"  # a calibrated stack fitted again keeps one suffix
    d["name"] = f"{stack.name.split(', calibrated to ')[0]}, calibrated to {Path(runs_path).name}"  # once, on a refit
    d["source"] = f"{stack.source}; calibrated on {day} to the runs of {runs_path} (hnplan calibrate)"
    fs, assumptions = dict(d.get("field_sources") or {}), dict(d.get("assumptions") or {})
    mm = {k: dict(v) for k, v in (d.get("matmul_efficiency") or {}).items()}
    for p in fitted:
        bound = " (AT A BOUND: the runs ask for more than its range allows)" if p.at_bound else ""
        if p.name.startswith("matmul_efficiency."):
            _, acc, dtype = p.name.split(".", 2)
            mm.setdefault(acc, {})[dtype] = round(p.value, 4)
            before = fs.get("matmul_efficiency")
            fs["matmul_efficiency"] = f"{acc} {dtype} {prov}{bound}" + (
                f". Before calibration: {before}" if before else ""
            )
            assumptions.pop("matmul_efficiency", None)
        else:
            d[p.name] = round(p.value, 4)
            fs[p.name] = f"{prov}{bound}; was {p.initial:g}"
            assumptions.pop(p.name, None)
            for m in (fs, assumptions, d):  # a per-chip-family or scale-out value would shadow the fitted one
                for k in [k for k in m if k.split(".")[0] in (f"{p.name}_by_accelerator", f"{p.name}_scale_out")]:
                    del m[k]
            for values in (d.get("choices_by_accelerator") or {}).values():  # nor a per-accelerator choice
                values.pop(p.name, None)
    if mm:
        d["matmul_efficiency"] = mm
    d["field_sources"], d["assumptions"] = fs, assumptions
    fixed = [p for p in params if not p.fitted]
    done = "; ".join(f"{p.name} {p.initial:g} -> {round(p.value, 4):g}" for p in fitted) or "nothing identified"
    kept = "; ".join(f"{p.name} = {p.initial:g} ({p.note})" for p in fixed)
    d["notes"] = (
        f"{stack.id} calibrated on {day} to {len(rows)} measured run(s) of {runs_path} ({runs}){net}: fitted "
        f"{done}. " + (f"Kept at {stack.id}'s values: {kept}. " if kept else "") + f"Every other field is "
        f"{stack.id}'s (its notes describe the stack's configuration)."
    )
    try:
        return SoftwareStack.model_validate(d)
    except Exception as exc:  # pydantic ValidationError
        raise InputError(f"the calibrated stack does not validate: {exc}") from None
