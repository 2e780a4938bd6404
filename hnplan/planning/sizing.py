"""Hardware sizing: the smallest purchase of each design that trains a model by a deadline, and
what it costs (GPUs, racks, MW, capex, opex, TCO, run cost), checked against a budget.

Time-to-train = ``tokens / (tokens_per_s x goodput)`` with ``tokens_per_s`` from
:func:`hnplan.planning.training.best_plan` and goodput from :func:`hnplan.reliability.estimate_reliability`.
The search starts at the smallest feasible power-of-two number of units, extrapolates the GPU count
that meets the deadline (time ~ 1 / GPUs), then walks up the unit counts whose only prime factors
are 2, 3 and 5 (counts a parallel layout can divide) until the planner confirms it.
"""

from __future__ import annotations

import math

import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cost import design_cost
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.planning.design import estimate_reliability
from hnplan.planning.training import best_plan
from hnplan.power import design_power, run_energy

MAX_GPUS = 1 << 20


def _next_smooth(n: int) -> int:
    """The smallest integer >= n whose only prime factors are 2, 3 and 5.

    >>> [_next_smooth(k) for k in (1, 7, 11, 13, 49)]
    [1, 8, 12, 15, 50]
    """
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def _train_days(model, system, gpus, tokens, seq_len, gbs, dtype, mode, cat):
    (est,), _, _ = best_plan(model, system, gpus, seq_len, gbs, dtype, catalog=cat)
    rel = estimate_reliability(system, gpus, model, mode, cat)
    return units.s_to_days(tokens / (est.tokens_per_s * rel.goodput)), est, rel


def size_for_deadline(model, system, tokens: float, deadline_days: float, seq_len: int, global_batch_seqs: int,
                      dtype: str = "bf16", mode: str = "async", catalog: Catalog | None = None,
                      budget_usd: float | None = None, max_evals: int = 40) -> dict:
    """The smallest whole-unit GPU count of one design that trains ``tokens`` within the deadline.

    Parameters
    ----------
    model, system : id or entry
    tokens : float
        Training tokens.
    deadline_days : float [days]
    seq_len, global_batch_seqs : int
        [tokens], [sequences per step].
    budget_usd : float, optional
        Flags ``within_budget`` (capex + opex over the run, i.e. the run cost at TCO rates, is not
        used: the purchase is compared on capex).

    Returns
    -------
    dict
        ``system, gpus, units, racks, it_power_mw, facility_power_mw, capex_usd, opex_usd_per_year,
        tco_usd, run_usd, energy_mwh, co2_t, days, mfu, goodput, within_budget, status`` (energy and
        CO2 [tonnes] of the run at the facility's training draw and grid intensity).

    Raises
    ------
    InputError
        For a non-positive deadline or token count.
    InfeasiblePlan
        If no count up to ``MAX_GPUS`` (or within ``max_evals`` planner calls) meets the deadline.
    """
    if deadline_days <= 0 or tokens <= 0:
        raise InputError(f"deadline_days and tokens must be > 0; got {deadline_days}, {tokens}")
    cat = catalog or load_catalog()
    system, model = cat.system(system), cat.model(model)
    u = system.unit_gpus
    n, evals, found = 1, 0, None
    while n * u <= MAX_GPUS and found is None:  # smallest feasible power-of-two units
        evals += 1
        try:
            found = (n, *_train_days(model, system, n * u, tokens, seq_len, global_batch_seqs, dtype, mode, cat))
        except InfeasiblePlan:
            n *= 2
    if found is None:
        raise InfeasiblePlan(f"{model.id} has no feasible plan on up to {MAX_GPUS} x {system.id}")
    n, days, est, rel = found
    if days > deadline_days:
        n = _next_smooth(max(n + 1, math.ceil(n * days / deadline_days)))
        days = math.inf
    while days > deadline_days:
        if evals >= max_evals or n * u > MAX_GPUS:
            raise InfeasiblePlan(f"{system.id} does not train {model.id} on {tokens:.3g} tokens within "
                                 f"{deadline_days} days at up to {n * u} GPUs ({evals} plans evaluated)")
        evals += 1
        try:
            days, est, rel = _train_days(model, system, n * u, tokens, seq_len, global_batch_seqs, dtype, mode, cat)
        except InfeasiblePlan:
            days = math.inf
        if days > deadline_days:
            n = _next_smooth(n + 1)
    gpus = n * u
    pw = design_power(cat.design(system), gpus)
    cost = design_cost(cat.design(system), gpus)
    run_usd = cost.usd_for(gpus, units.days_to_s(days))
    energy = run_energy(pw, units.days_to_s(days), cat.facility, tokens)
    return {
        "system": system.id, "gpus": gpus, "units": n, "racks": pw.racks,
        "it_power_mw": units.w_to_mw(pw.it_w), "facility_power_mw": units.w_to_mw(pw.facility_w),
        "capex_usd": cost.capex_usd, "opex_usd_per_year": cost.opex_usd_per_year, "tco_usd": cost.tco_usd,
        "run_usd": run_usd, "energy_mwh": energy["energy_mwh"], "co2_t": energy["co2_t"], "days": days, "mfu": est.mfu, "goodput": rel.goodput,
        "within_budget": None if budget_usd is None else bool(cost.capex_usd <= budget_usd), "status": "ok",
    }


def size_designs(model, systems, tokens: float, deadline_days: float, seq_len: int, global_batch_seqs: int,
                 budget_usd: float | None = None, dtype: str = "bf16", mode: str = "async",
                 catalog: Catalog | None = None) -> pd.DataFrame:
    """:func:`size_for_deadline` for each design: one row per system (a design that cannot meet the
    deadline keeps its row with the reason in ``status``); ``attrs['units']`` maps columns to units."""
    cat = catalog or load_catalog()
    rows = []
    for s in systems:
        sid = cat.system(s).id
        try:
            rows.append(size_for_deadline(model, sid, tokens, deadline_days, seq_len, global_batch_seqs, dtype, mode,
                                          cat, budget_usd))
        except InfeasiblePlan as exc:
            rows.append({"system": sid, "status": f"infeasible: {exc}"})
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"it_power_mw": "MW", "facility_power_mw": "MW", "capex_usd": "USD",
                         "opex_usd_per_year": "USD/year", "tco_usd": "USD", "run_usd": "USD", "days": "days",
                         "energy_mwh": "MWh", "co2_t": "t CO2"}
    return df


def sizing_verdict(df: pd.DataFrame) -> str:
    """A Markdown sentence per design of a :func:`size_designs` table: what it takes, and the cheapest."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "No design meets the deadline with this global batch; relax the deadline or raise the batch."
    lines = [f"- **{r['system']}**: {int(r['gpus']):,} GPUs in {int(r['racks'])} racks, "
             f"{r['facility_power_mw']:.1f} MW facility power, ${r['capex_usd'] / 1e6:,.0f}M capex, "
             f"{r['days']:.1f} days" + ("" if r["within_budget"] in (None, True) or pd.isna(r["within_budget"])
                                         else " (over budget)") for _, r in ok.iterrows()]
    cheap = ok.loc[ok["capex_usd"].idxmin()]
    lines.append(f"\nThe cheapest design to buy for this deadline is **{cheap['system']}** "
                 f"(${cheap['capex_usd'] / 1e6:,.0f}M).")
    missing = df[df["status"] != "ok"]["system"].tolist()
    if missing:
        lines.append(f" Cannot meet it: {', '.join(missing)}.")
    return "\n".join(lines)
