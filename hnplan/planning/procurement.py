"""Procurement what-ifs: sensitivity (tornado), Monte Carlo bands, and the best mix of designs under a
budget and a power cap.

A :class:`WhatIfCase` fixes a design, a GPU count and a training job and evaluates its throughput
once with :func:`hnplan.planning.training.best_plan`; :func:`evaluate` then maps the uncertain
inputs (``hnplan.catalog.schemas.WHATIF_INPUTS``: electricity price, PUE, hardware price, utilisation,
failure rates, checkpoint bandwidth, lifetime, build cost, maintenance) to TCO, $ per GPU-hour,
run cost and time-to-train (``tokens / (tokens_per_s x goodput)``). Their ranges are catalog data
(``data/uncertainty.yaml``, each with a source or a labelled assumption).

The mix of designs is a mixed-integer linear program solved with :func:`scipy.optimize.milp`
(HiGHS): integer units ``x[w, d]`` of design ``d`` given to workload ``w``, served fractions
``f_w in [0, 1]``; maximise ``sum f_w`` (then minimise capex) subject to
``sum_d r[w, d] x[w, d] >= demand_w f_w``, ``sum c_d x <= budget`` and ``sum p_d x <= power cap``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import WHATIF_INPUTS, Model, System, whatif_range_problem
from hnplan.cost import design_cost
from hnplan.errors import HnplanError, InfeasiblePlan, InputError, check_choice
from hnplan.planning.design import estimate_reliability, resolve_utilisation  # noqa: F401 (re-exported)
from hnplan.planning.training import best_plan
from hnplan.power import design_power, pue_for

METRICS = {
    "tco_usd": "USD",
    "usd_per_gpu_hour": "USD per GPU-hour",
    "run_usd": "USD",
    "days_to_train": "days",
    "goodput": "fraction",
}


@dataclass(frozen=True)
class WhatIfCase:
    """One design, GPU count and training job, with its throughput from the training planner."""

    system: System
    model: Model
    gpus: int
    tokens: float
    tokens_per_s: float
    mode: str = "async"
    utilisation: float | None = None  # share of hours busy; None: sampled from its catalog range
    utilisation_source: str = ""
    #: the whole units' GPUs bought when more than ``gpus`` train (64 of each 72-GPU rack; a count no layout divides,
    #: run on fewer): costs and power count them, the idle ones are hot spares in the goodput, as ``hnplan compare``
    #: prices a purchase; None: the whole units that hold ``gpus``, none idle beyond them
    gpus_bought: int | None = None


def whatif_case(
    model,
    system,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    mode: str = "async",
    utilisation: float | str | None = None,
    mix: str = "default",
    catalog: Catalog | None = None,
) -> WhatIfCase:
    """Plan the job once (fastest plan that fits) and keep its throughput [tokens/s].

    ``utilisation``: None samples it from its catalog range (``data/uncertainty.yaml``); a number in
    (0, 1] fixes it; ``"simulated"`` fixes it at the useful utilisation the shared-cluster simulation
    gives the design under job mix ``mix`` (:func:`hnplan.cluster.utilisation.simulated_utilisation`).

    Raises
    ------
    InfeasiblePlan
        If no plan divides and fits.
    InputError
        For a utilisation outside (0, 1] or a word other than ``simulated``.
    """
    cat = catalog or load_catalog()
    system, model = cat.system(system), cat.model(model)
    u, src = resolve_utilisation(utilisation, system.id, gpus, mix, cat)
    (est,), _, _ = best_plan(model, system, gpus, seq_len, global_batch_seqs, dtype, catalog=cat)
    return WhatIfCase(system, model, gpus, tokens, est.tokens_per_s, mode, u, src)


def base_inputs(case: WhatIfCase, catalog: Catalog | None = None) -> dict:
    """The catalog default of every what-if input for a case."""
    cat = catalog or load_catalog()
    fac, s = cat.facility, case.system
    return {
        "electricity_usd_per_kwh": fac.electricity_usd_per_kwh.value,
        "pue": pue_for(cat.design(s)),
        "hardware_price_factor": 1.0,
        "utilisation": 1.0 if case.utilisation is None else case.utilisation,
        "rate_factor": 1.0,
        "write_GBps_per_node": cat.design(s).storage_write_GBps_per_node,
        "years": fac.amortisation_years.value,
        "dc_build_usd_per_mw": fac.dc_build_usd_per_mw.value,
        "maintenance_fraction": fac.maintenance_fraction_per_year.value,
    }


def evaluate(case: WhatIfCase, catalog: Catalog | None = None, **inputs) -> dict:
    """TCO, $ per GPU-hour, run cost [USD], time-to-train [days] and goodput at the given inputs
    (missing inputs take :func:`base_inputs`).

    Raises
    ------
    InputError
        For an input name outside ``WHATIF_INPUTS`` or a value outside its range
        (:data:`hnplan.catalog.schemas.WHATIF_RANGES`: a negative electricity price, a PUE below 1).
    """
    cat = catalog or load_catalog()
    unknown = set(inputs) - set(WHATIF_INPUTS)
    if unknown:
        raise InputError(f"unknown what-if inputs {sorted(unknown)}; allowed: {', '.join(WHATIF_INPUTS)}")
    x = {**base_inputs(case, cat), **inputs}
    for name, value in inputs.items():  # a negative price or a lifetime of 0 gives costs with no meaning
        problem = whatif_range_problem(name, float(value))
        if problem:
            raise InputError(problem)
    bought = case.gpus_bought or case.gpus  # what is paid for and powered; the job trains on case.gpus
    cost = design_cost(
        cat.design(case.system),
        bought,
        years=x["years"],
        pue=x["pue"],
        utilisation=x["utilisation"],
        electricity_usd_per_kwh=x["electricity_usd_per_kwh"],
        hardware_price_factor=x["hardware_price_factor"],
        maintenance_fraction=x["maintenance_fraction"],
        dc_build_usd_per_mw=x["dc_build_usd_per_mw"],
    )
    rel = estimate_reliability(
        case.system,
        case.gpus,
        case.model,
        case.mode,
        cat,
        rate_factor=x["rate_factor"],
        write_GBps_per_node=x["write_GBps_per_node"],
        gpus_bought=case.gpus_bought,
    )
    seconds = case.tokens / (case.tokens_per_s * rel.goodput)
    return {
        "tco_usd": cost.tco_usd,
        "usd_per_gpu_hour": cost.usd_per_gpu_hour,
        "run_usd": cost.usd_for(bought, seconds),
        "days_to_train": units.s_to_days(seconds),
        "goodput": rel.goodput,
    }


def tornado(
    case: WhatIfCase, metric: str = "tco_usd", catalog: Catalog | None = None, inputs: list[str] | None = None
) -> pd.DataFrame:
    """One-at-a-time sensitivity of ``metric`` to each uncertain input over its catalog range
    (utilisation left out when the case fixes it, e.g. from the cluster simulation).

    Returns
    -------
    pandas.DataFrame
        One row per input, largest swing first: ``input, name, unit, low, base, high, metric_low,
        metric_base, metric_high, swing`` (``swing = |metric_high - metric_low|``);
        ``attrs['metric']`` and ``attrs['unit']`` name the metric.
    """
    check_choice("metric", metric, METRICS)
    cat = catalog or load_catalog()
    base = base_inputs(case, cat)
    ranges = cat.uncertainties
    names = inputs or [i for i in WHATIF_INPUTS if i in ranges and not _fixed(case, i)]
    m0 = evaluate(case, cat)[metric]
    rows = []
    for name in names:
        u = ranges[name]
        lo, hi = evaluate(case, cat, **{name: u.low})[metric], evaluate(case, cat, **{name: u.high})[metric]
        rows.append(
            {
                "input": name,
                "name": u.name,
                "unit": u.unit,
                "low": u.low,
                "base": base[name],
                "high": u.high,
                "metric_low": lo,
                "metric_base": m0,
                "metric_high": hi,
                "swing": abs(hi - lo),
            }
        )
    df = pd.DataFrame(rows).sort_values("swing", ascending=False, ignore_index=True)
    df.attrs.update(metric=metric, unit=METRICS[metric], system=case.system.id)
    return df


def _fixed(case: WhatIfCase, name: str) -> bool:
    """Whether the case fixes this input (utilisation given or simulated) rather than sampling it."""
    return name == "utilisation" and case.utilisation is not None


def _distribution(u):
    if u.distribution == "triangular":
        return stats.triang(c=(u.mode - u.low) / (u.high - u.low), loc=u.low, scale=u.high - u.low)
    return stats.uniform(loc=u.low, scale=u.high - u.low)


def monte_carlo(case: WhatIfCase, n: int = 200, seed: int = 0, catalog: Catalog | None = None) -> pd.DataFrame:
    """Sample every uncertain input from its catalog distribution (scipy.stats, independent; a
    utilisation the case fixes is held at its value) and
    evaluate the case; reproducible for a seed.

    Returns
    -------
    pandas.DataFrame
        ``n`` rows: the sampled inputs and the metrics of :func:`evaluate`.
    """
    if n < 1:
        raise InputError(f"n must be >= 1; got {n}")
    cat = catalog or load_catalog()
    rng = np.random.default_rng(seed)
    samples = {
        name: (
            np.full(n, case.utilisation)  # an outcome of the simulation, not an uncertain input
            if _fixed(case, name)
            else _distribution(u).rvs(size=n, random_state=rng)
        )
        for name, u in cat.uncertainties.items()
    }
    rows = [
        {
            **{k: float(v[i]) for k, v in samples.items()},
            **evaluate(case, cat, **{k: float(v[i]) for k, v in samples.items()}),
        }
        for i in range(n)
    ]
    df = pd.DataFrame(rows)
    df.attrs.update(system=case.system.id, seed=seed)
    return df


def mc_bands(df: pd.DataFrame, metrics=("tco_usd", "days_to_train"), q=(0.05, 0.5, 0.95)) -> pd.DataFrame:
    """Quantile bands of Monte Carlo metrics: one row per metric, columns ``p5, p50, p95`` (per ``q``)."""
    out = df[list(metrics)].quantile(list(q)).T
    out.columns = [f"p{round(x * 100)}" for x in q]
    out.index.name = "metric"
    return out.reset_index()


# -- the best mix of designs ------------------------------------------------------------------
@dataclass(frozen=True)
class MixResult:
    """Units of each design per workload, what they serve, and the binding constraint."""

    units: pd.DataFrame
    served: pd.Series
    capex_usd: float
    facility_power_w: float
    budget_usd: float
    power_cap_w: float
    binding: str


def unit_gpus(systems, catalog: Catalog | None = None) -> dict[str, int]:
    """Accelerators in one purchasable unit of each system (id -> ``unit_gpus``), for the mix figures."""
    cat = catalog or load_catalog()
    return {str(s): cat.design(s).system.unit_gpus for s in systems}


def solve_mix(
    rate, demand, unit_capex, unit_power_w, budget_usd: float, power_cap_w: float, eps: float = 1e-3
) -> tuple[np.ndarray, np.ndarray, str]:
    """The MILP core on arrays.

    Parameters
    ----------
    rate : array [W x D] [tokens/s per unit]
        Throughput one unit of design d gives workload w (0 where it cannot run it).
    demand : array [W] [tokens/s]
        Throughput each workload needs to meet its deadline.
    unit_capex : array [D] [USD]; unit_power_w : array [D] [W]
    budget_usd, power_cap_w : float

    Returns
    -------
    (units [W x D] int, served fraction [W], binding constraint name)
        ``binding`` is ``"budget"``, ``"power cap"``, ``"budget and power cap"``, or ``"none"``
        (every workload met) -- a cap binds when no further unit of a useful design fits under it.

    Raises
    ------
    InputError
        For non-positive caps or shape mismatches.
    InfeasiblePlan
        If the solver fails.
    """
    rate = np.asarray(rate, float)
    demand, c, p = (np.asarray(a, float) for a in (demand, unit_capex, unit_power_w))
    W, D = rate.shape
    if demand.shape != (W,) or c.shape != (D,) or p.shape != (D,):
        raise InputError(f"shapes: rate {rate.shape}, demand {demand.shape}, capex {c.shape}, power {p.shape}")
    if budget_usd <= 0 or power_cap_w <= 0:
        raise InputError(f"budget and power cap must be > 0; got {budget_usd}, {power_cap_w}")
    nx = W * D
    obj = np.concatenate([np.tile(eps * c / budget_usd, W), -np.ones(W)])
    a_dem = np.zeros((W, nx + W))
    for w in range(W):
        a_dem[w, w * D : (w + 1) * D] = rate[w]
        a_dem[w, nx + w] = -demand[w]
    a_caps = np.zeros((2, nx + W))
    a_caps[0, :nx], a_caps[1, :nx] = np.tile(c, W), np.tile(p, W)
    ub_x = np.floor(np.minimum(budget_usd / c, power_cap_w / p))
    bounds = optimize.Bounds(np.zeros(nx + W), np.concatenate([np.tile(ub_x, W), np.ones(W)]))
    res = optimize.milp(
        obj,
        integrality=np.concatenate([np.ones(nx), np.zeros(W)]),
        bounds=bounds,
        constraints=[
            optimize.LinearConstraint(a_dem, 0, np.inf),
            optimize.LinearConstraint(a_caps, -np.inf, [budget_usd, power_cap_w]),
        ],
    )
    if not res.success:
        raise InfeasiblePlan(f"the mix optimiser failed: {res.message}")
    x = np.round(res.x[:nx]).reshape(W, D).astype(int)
    served = np.minimum(1.0, (rate * x).sum(axis=1) / demand)
    useful = rate.max(axis=0) > 0
    if np.all(served >= 1 - 1e-9) or not useful.any():
        return x, served, "none"
    spare_budget = budget_usd - (x.sum(axis=0) * c).sum()
    spare_power = power_cap_w - (x.sum(axis=0) * p).sum()
    tight = [
        name
        for name, spare, need in (
            ("budget", spare_budget, c[useful].min()),
            ("power cap", spare_power, p[useful].min()),
        )
        if spare < need
    ]
    return x, served, " and ".join(tight) if tight else "integrality"


def _case_near(wl: dict, system: System, mode: str, cat: Catalog, tries: int = 6) -> WhatIfCase | None:
    """The workload planned on the power-of-two unit count nearest its ``ref_gpus`` that has a
    feasible plan (a count such as 15 NVL72 racks rarely divides a power-of-two batch)."""
    counts = sorted((1 << k for k in range(18)), key=lambda n: abs(np.log(n * system.unit_gpus / wl["ref_gpus"])))
    for n in counts[:tries]:
        try:
            return whatif_case(
                wl["model"],
                system,
                n * system.unit_gpus,
                wl["tokens"],
                wl["seq_len"],
                wl["global_batch_seqs"],
                mode=mode,
                catalog=cat,
            )
        except HnplanError:
            continue
    return None


def best_mix(
    workloads: list[dict],
    systems,
    budget_usd: float,
    power_cap_w: float,
    catalog: Catalog | None = None,
    mode: str = "async",
) -> MixResult:
    """The mix of designs that serves the most of a set of training workloads by their deadlines
    under a budget [USD] and a facility power cap [W].

    Parameters
    ----------
    workloads : list of dict
        Each: ``model, tokens, deadline_days, seq_len, global_batch_seqs, ref_gpus`` (the scale at
        which a design's throughput per GPU is evaluated, at the nearest feasible power-of-two
        number of units; first-order: throughput linear in units).
    systems : list of ids or entries

    Returns
    -------
    MixResult
    """
    cat = catalog or load_catalog()
    systems = [cat.system(s) for s in systems]
    rate = np.zeros((len(workloads), len(systems)))
    capex, power = np.zeros(len(systems)), np.zeros(len(systems))
    for d, s in enumerate(systems):
        ref = max(w["ref_gpus"] for w in workloads)
        n_units = -(-ref // s.unit_gpus)
        capex[d] = design_cost(cat.design(s), n_units * s.unit_gpus).capex_usd / n_units
        power[d] = design_power(cat.design(s), n_units * s.unit_gpus).facility_w / n_units
        for w, wl in enumerate(workloads):
            case = _case_near(wl, s, mode, cat)
            if case is not None:
                rate[w, d] = case.tokens_per_s / case.gpus * s.unit_gpus * evaluate(case, cat)["goodput"]
    demand = np.array([wl["tokens"] / units.days_to_s(wl["deadline_days"]) for wl in workloads])
    x, served, binding = solve_mix(rate, demand, capex, power, budget_usd, power_cap_w)
    names = [f"{wl['model']} #{i}" for i, wl in enumerate(workloads)]
    df = pd.DataFrame(x, index=names, columns=[s.id for s in systems])
    used = x.sum(axis=0)
    return MixResult(
        df, pd.Series(served, index=names), float(used @ capex), float(used @ power), budget_usd, power_cap_w, binding
    )


def whatif_summary(tornado_df: pd.DataFrame, bands: pd.DataFrame, mix: MixResult | None = None) -> str:
    """A short Markdown reading of a tornado table, Monte Carlo bands and a mix result, numbers written for
    people (:func:`hnplan.units.format_quantity`: $63.9M, 9.3 MW)."""
    fq = units.format_quantity
    names = {"tco_usd": ("TCO", "USD"), "days_to_train": ("Time to train", "days")}
    lines = []
    if len(tornado_df):
        top = tornado_df.iloc[0]
        metric, unit = tornado_df.attrs.get("metric", "the metric"), tornado_df.attrs.get("unit", "")
        metric = names.get(metric, (metric,))[0]
        lines.append(
            f"- The largest driver of {metric} is **{top['name']}**: across {fq(top['low'], top['unit'])} "
            f"to {fq(top['high'], top['unit'])} it moves from {fq(top['metric_low'], unit)} to "
            f"{fq(top['metric_high'], unit)}."
        )
    b = bands.set_index("metric")
    for metric, (name, unit) in names.items():
        if metric in b.index:
            r = b.loc[metric]
            lines.append(
                f"- {name}: 90% band {fq(r['p5'], unit)} to {fq(r['p95'], unit)} (median {fq(r['p50'], unit)})."
            )
    if mix is not None:
        bought = [f"{int(v):,} x {k}" for k, v in mix.units.sum(axis=0).items() if v]
        served = ", ".join(f"{k} {v:.0%}" for k, v in mix.served.items())
        lines.append(
            f"- Best mix: {', '.join(bought) or 'nothing'} (units) for {units.format_usd(mix.capex_usd)} "
            f"capex and {units.format_power(mix.facility_power_w)}; "
            + (
                f"binding constraint: **{mix.binding}**; "
                if mix.binding != "none"
                else "neither the budget nor the power cap binds (every workload is served in full within both); "
                if all(v >= 1 - 1e-9 for v in mix.served.values)
                else "no cap binds: no design serves the workloads; "
            )
            + f"workloads served: {served}."
        )
    return "\n".join(lines)
