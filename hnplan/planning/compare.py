"""Compare designs for one training job: best plan per system, time, power, energy and cost."""

from __future__ import annotations

import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.cost import design_cost
from hnplan.errors import HnplanError, InputError
from hnplan.planning.training import best_plan
from hnplan.power import design_power, run_energy


def compare_training_designs(model, systems, gpus: int, tokens: float, seq_len: int,
                             global_batch_seqs: int, dtype: str = "bf16",
                             catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per system: its fastest plan that fits, days to train, racks, power, energy, capex.

    Parameters
    ----------
    model : id or entry
    systems : list of ids or entries
    gpus : int
        Accelerators per design.
    tokens : float
        Training tokens.
    seq_len, global_batch_seqs : int
        Sequence length [tokens] and sequences per step.

    Returns
    -------
    pandas.DataFrame
        Columns ``system, kind, gpus, tp, pp, dp, ep, recompute, step_time_s, tokens_per_s, mfu,
        days, racks, it_power_mw, facility_power_mw, energy_mwh, capex_musd, status`` plus the
        step-time breakdown ``t_<part>_s``. A system with no feasible plan keeps its row with the
        reason in ``status``. A design whose accelerator lacks ``dtype`` (fp8 on Ascend 910C) is planned
        in bf16, said in ``dtype`` and ``status``. ``df.attrs['units']`` maps columns to units.
    """
    cat = catalog or load_catalog()
    if not systems:
        raise InputError("systems is empty: name at least one system id (data/systems)")
    rows = []
    for ref in systems:
        system = cat.system(ref)
        row = {"system": system.id, "kind": system.kind, "gpus": gpus, "dtype": dtype}
        acc = cat.accelerator(system.accelerator)
        run_dtype, note = dtype, ""
        if dtype not in acc.dense_tflops:  # e.g. fp8 on Ascend 910C: compare at the best dtype it has
            run_dtype, note = "bf16", f" ({dtype} unavailable on {acc.id}: bf16)"
            row["dtype"] = run_dtype
        try:
            (est,), _, _ = best_plan(model, system, gpus, seq_len, global_batch_seqs, run_dtype, catalog=cat)
        except HnplanError as exc:
            row["status"] = f"no plan: {exc}"
            rows.append(row)
            continue
        pw = design_power(cat.design(system), gpus)
        cost = design_cost(cat.design(system), gpus)
        seconds = tokens / est.tokens_per_s
        p = est.plan
        row.update(
            tp=p.tp, pp=p.pp, dp=p.dp, cp=p.cp, ep=p.ep, microbatch_size=p.microbatch_size,
            recompute=p.recompute, step_time_s=est.step_time_s, tokens_per_s=est.tokens_per_s,
            mfu=est.mfu, memory_per_gpu_gib=units.to_GiB(est.memory_per_gpu_bytes),
            days=units.s_to_days(seconds), racks=pw.racks,
            it_power_mw=units.w_to_mw(pw.it_w), facility_power_mw=units.w_to_mw(pw.facility_w),
            energy_mwh=run_energy(pw, seconds, cat.facility, tokens)["energy_mwh"], capex_musd=cost.capex_usd / 1e6,
            status="ok" + note,
        )
        row.update({f"t_{k}_s": v for k, v in est.breakdown_s.items()})
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"step_time_s": "s", "tokens_per_s": "tokens/s", "mfu": "fraction", "days": "days",
                         "it_power_mw": "MW", "facility_power_mw": "MW", "energy_mwh": "MWh",
                         "capex_musd": "million USD", "memory_per_gpu_gib": "GiB"}
    return df


def verdict(df: pd.DataFrame) -> str:
    """A sentence naming the fastest and the cheapest design of a comparison table."""
    ok = df[df["status"].str.startswith("ok")] if "status" in df else df
    if ok.empty:
        return "No design has a feasible plan for this job."
    fast = ok.loc[ok["days"].idxmin()]
    cheap = ok.loc[ok["capex_musd"].idxmin()]
    text = (f"{fast['system']} trains fastest ({fast['days']:.1f} days at {fast['mfu']:.0%} MFU); "
            f"{cheap['system']} costs least to buy (${cheap['capex_musd']:.0f}M capex).")
    if len(ok) > 1:
        slow = ok.loc[ok["days"].idxmax()]
        text += f" The slowest, {slow['system']}, takes {slow['days'] / fast['days']:.2f}x as long."
    return text
