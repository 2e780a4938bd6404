"""Compare designs for one training job: best plan per system, time, power, energy and cost."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import HnplanError, InputError
from hnplan.planning import prediction_cache
from hnplan.planning.compare_trust import trust_notes as trust_notes  # re-exported: it lived here
from hnplan.planning.design import cost_or_gap, estimate_reliability, fallback_job_counts, job_gpu_options
from hnplan.planning.records import as_records, first_max, first_min, frame_records, is_na, n_unique
from hnplan.power import design_power, run_energy

if TYPE_CHECKING:
    import pandas as pd

UNITS = {
    "step_time_s": "s",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction of peak_tflops (the dense peak in the row's dtype)",
    "gpus": "GPUs the job trains on",
    "gpus_bought": "GPUs bought (whole units)",
    "days": "days",
    "goodput": "fraction of the wall time that trains (1.0: failures left out)",
    "it_power_mw": "MW",
    "facility_power_mw": "MW",
    "energy_mwh": "MWh",
    "capex_musd": "million USD",
    "memory_per_gpu_gib": "GiB",
    "peak_tflops": "TFLOP/s",
    "hbm_gb": "GB",
    "run_musd": "million USD",
    "usd_per_million_tokens": "USD per 1e6 tokens",
}


def compare_training_designs(
    model,
    systems,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    offload: str = "none",
    stack=None,
    *,
    goodput: bool = True,
    mode: str = "async",
) -> pd.DataFrame:
    """One row per system: its fastest plan that fits, days to train, racks, power, energy, capex.

    Parameters
    ----------
    model : id or entry
    systems : list of ids or entries
    gpus : int
        Accelerators per design. The design buys the whole units that hold them (``gpus_bought``: two 72-GPU
        racks for 128); where the unit's GPU count is not a power of two, the job is also planned on the
        largest power of two of each unit's GPUs where that is fewer than ``gpus`` (64 of each 72-GPU rack,
        :func:`hnplan.planning.sizing_search.job_gpu_options`, the option ``hnplan size`` weighs at a
        purchase) and the faster kept.
    tokens : float
        Training tokens.
    seq_len, global_batch_seqs : int
        Sequence length [tokens] and sequences per step.
    offload : {"none", "auto"}
        The stack choice ``offload`` (:mod:`hnplan.planning.training.offload`): ``auto`` lets a design
        with host or pooled memory train plans that do not fit in HBM.
    stack : str or SoftwareStack, optional
        Software stack every design is planned under (:func:`hnplan.planning.training.make_job`: its choices,
        GEMM efficiency and the ZeRO stages and recomputation modes searched); None: the planner's defaults.
    goodput : bool
        Divide each design's throughput by the goodput of the reliability model on the GPUs that train
        (:func:`hnplan.planning.design.estimate_reliability`: failures, restarts, checkpoint stalls), as
        :func:`hnplan.planning.time_to_train.time_to_train` and ``hnplan size`` do (default); ``False``: no
        failures. Days, energy and the run's cost follow it; of the GPU counts weighed the one with the most
        tokens per second after the goodput is kept (the fewest days, as ``hnplan size``).
    mode : {"sync", "async"}
        Checkpoint mode of the goodput.

    Returns
    -------
    pandas.DataFrame
        Columns ``system, kind, gpus`` (the GPUs the job trains on), ``gpus_bought`` (the units' GPUs),
        ``tp, pp, dp, cp, ep, etp`` (the expert layers' tensor-parallel degree), ``microbatch_size, recompute, step_time_s, tokens_per_s, mfu`` (of ``peak_tflops``, the dtype's dense peak),
        days, racks, it_power_mw, facility_power_mw, energy_mwh, capex_musd, status``, ``accelerator`` and its
        dense ``peak_tflops`` in the run's dtype and HBM capacity ``hbm_gb`` [GB], the cost of the run ``run_musd`` [million USD] and per million
        tokens ``usd_per_million_tokens`` [USD] at the design's TCO per GPU-hour (:meth:`DesignCost.usd_for`) for
        every GPU bought (power, energy and costs count ``gpus_bought``, the GPUs that do not train at their idle
        power, :func:`hnplan.power.training_draw_w`, as ``hnplan size``; ``status`` says when fewer train; ``days``,
        energy and the run's cost are after the goodput, ``goodput`` the fraction applied (1.0 when off) and
        ``goodput_mode`` the checkpoint mode or ``off``), plus the
        step-time breakdown ``t_<part>_s``, and ``dtype_note``: where the job planned in fp8 or fp4 comes out slower
        than in bf16 on the design, why (:func:`hnplan.planning.dtype_gap.dtype_gap_note`), else empty. A system with no feasible plan keeps its row with the
        reason in ``status``; one without a price (:func:`hnplan.planning.design.cost_or_gap`) keeps its
        plan, time and power, with NaN costs, "cost n/a" in ``status`` and the reason in ``cost_note``. A design whose accelerator lacks ``dtype`` (fp8 on Ascend 910C) is planned
        in bf16, said in ``dtype`` and ``status``. ``df.attrs['units']`` maps columns to units (:data:`UNITS`).
    """
    import pandas as pd  # here, not at the top: the command line reads the rows (compare_design_rows)

    df = pd.DataFrame(
        _design_rows(
            model,
            systems,
            gpus,
            tokens,
            seq_len,
            global_batch_seqs,
            dtype,
            catalog,
            offload,
            stack,
            goodput=goodput,
            mode=mode,
        )
    )
    df.attrs["units"] = dict(UNITS)
    return df


def compare_design_rows(
    model,
    systems,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    offload: str = "none",
    stack=None,
    *,
    goodput: bool = True,
    mode: str = "async",
) -> list[dict]:
    """:func:`compare_training_designs` as plain rows, without pandas: ``df.to_dict("records")`` of its frame
    (:func:`hnplan.planning.records.frame_records`: the same columns, values and NaN), what ``hnplan compare``
    prints; the units are :data:`UNITS`. Parameters and errors as there."""
    return frame_records(
        _design_rows(
            model,
            systems,
            gpus,
            tokens,
            seq_len,
            global_batch_seqs,
            dtype,
            catalog,
            offload,
            stack,
            goodput=goodput,
            mode=mode,
        )
    )


def _design_rows(
    model,
    systems,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str,
    catalog: Catalog | None,
    offload: str,
    stack,
    *,
    goodput: bool,
    mode: str,
) -> list[dict]:
    """The rows of :func:`compare_training_designs`, each with the keys its design has."""
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
        unit = system.unit_gpus
        bought = math.ceil(gpus / unit) * unit  # the design's whole units that hold the GPUs asked for
        est: dict | None = None
        used, good = gpus, 1.0
        errors: list[str] = []
        asked: dict = {}  # the estimate on the count asked for
        # the count asked for, and where fewer, the sizing planner's other options on the same units (64 of
        # each 72-GPU rack): the faster is kept, as `hnplan size` does at a purchase; where the count asked
        # for has no plan, the counts the units hold, down to the first with one (time_on_purchase's walk)
        counts = [gpus, *(g for g in job_gpu_options(unit, bought // unit) if g < gpus)]
        layouts, walk = fallback_job_counts(unit, bought // unit, counts)
        for g in counts + layouts + walk:
            if (g in layouts and "error" not in asked) or (g in walk and est is not None):
                break
            e = _best(cat, model, system, g, seq_len, global_batch_seqs, run_dtype, stack, offload)
            asked = e if g == gpus else asked
            if "error" in e:
                errors.append(e["error"])
                continue
            gp = _goodput(cat, system, g, model, mode, e, bought) if goodput else 1.0
            if est is None or e["tokens_per_s"] * gp > est["tokens_per_s"] * good:
                est, used, good = e, g, gp
        if est is None:
            row["status"] = f"no plan: {errors[0]}"
            rows.append(row)
            continue
        if used != bought:  # the idle GPUs are bought, powered and paid for: say so
            why = (
                f"{used // (bought // unit)} of each {unit}-GPU unit, faster than all {gpus:,}" if used != gpus else ""
            )
            why = f"the {gpus:,} asked for have no plan" if "error" in asked else why or "the rest idle"
            note += f"; {used:,} of {bought:,} GPUs bought train ({why})"
        row.update(gpus=used, gpus_bought=bought)
        pw = design_power(cat.design(system), bought)
        cost, gap = cost_or_gap(cat.design(system), bought)
        if gap is not None:  # no price: time and power stand, every cost is n/a with the reason
            note += f"; cost n/a: {system.id} has no price (unit_price_usd or price_item in its file)"
            row["cost_note"] = f"n/a: {gap}"
        seconds = tokens / (est["tokens_per_s"] * good)
        row.update({k: est[k] for k in _PLAN_KEYS})
        row.update(
            step_time_s=est["step_time_s"],
            tokens_per_s=est["tokens_per_s"],
            mfu=est["mfu"],
            memory_per_gpu_gib=units.to_GiB(est["memory_per_gpu_bytes"]),
            days=units.s_to_days(seconds),
            goodput=good,
            goodput_mode=mode if goodput else "off",
            racks=pw.racks,
            it_power_mw=units.w_to_mw(pw.it_w),
            facility_power_mw=units.w_to_mw(pw.facility_w),
            energy_mwh=run_energy(pw, seconds, cat.facility, tokens, training_gpus=used)["energy_mwh"],
            capex_musd=cost.capex_usd / units.MEGA if cost else float("nan"),
            status="ok" + note,
        )
        # the run at the design's TCO per GPU-hour, for every GPU bought: idle ones are paid for and powered too
        run_usd = cost.usd_for(bought, seconds) if cost else float("nan")
        row.update(
            accelerator=acc.id,
            peak_tflops=_peak(acc.dense_tflops, run_dtype),
            hbm_gb=acc.hbm_gb,
            run_musd=run_usd / units.MEGA,
            usd_per_million_tokens=run_usd / tokens * units.MEGA,
        )
        row.update({f"t_{k}_s": v for k, v in est["breakdown_s"]})
        # fp8/fp4 slower than bf16 on this design: why (bf16's plan does not fit, or the recipe's passes)
        row["dtype_note"] = est.get("dtype_note", "")
        rows.append(row)
    return rows


_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "recompute")


def _goodput(cat: Catalog, system, gpus: int, model, mode: str, est: dict, bought: int) -> float:
    """Goodput of a design's job on ``gpus`` of ``bought`` GPUs (the idle ones hot spares) at its best plan's
    throughput and step time, as :func:`hnplan.planning.time_to_train.time_to_train` takes it [fraction]."""
    return estimate_reliability(
        system, gpus, model, mode, cat, tokens_per_s=est["tokens_per_s"], step_s=est["step_time_s"], gpus_bought=bought
    ).goodput


def _best(cat: Catalog, model, system, gpus: int, seq_len: int, global_batch_seqs: int, dtype: str, stack, offload):
    """The fastest plan of one design at ``gpus`` (:func:`hnplan.planning.training.best_plan`), as the numbers
    :func:`compare_training_designs` reads: the plan's knobs, ``step_time_s, tokens_per_s, mfu,
    memory_per_gpu_bytes`` and ``breakdown_s`` (pairs, in the estimate's order); ``{"error": message}`` when no
    plan runs. Cached on disk (:func:`hnplan.planning.prediction_cache.cached_point`) under the model, system
    and stack entries' fields, the job and the catalog's and code's hashes; a reference that does not resolve
    is planned uncached, so that its error reads as ``best_plan`` gives it."""

    def plan() -> dict:
        from hnplan.planning.training import best_plan  # imported only to plan: a cached design needs none

        try:
            (e,), _, _ = best_plan(
                model,
                system,
                gpus,
                seq_len,
                global_batch_seqs,
                dtype,
                catalog=cat,
                stack=stack,
                overrides={"offload": offload},
            )
        except HnplanError as exc:
            return {"error": str(exc)}
        note = ""
        if dtype != "bf16":  # why a low-precision plan is slower than bf16's, where it is
            from hnplan.planning.dtype_gap import dtype_gap_note

            note = dtype_gap_note(
                model,
                system,
                gpus,
                seq_len,
                global_batch_seqs,
                dtype,
                e,
                catalog=cat,
                stack=stack,
                overrides={"offload": offload},
            )
        p = e.plan
        return {
            **{k: getattr(p, k) for k in _PLAN_KEYS},
            "step_time_s": e.step_time_s,
            "tokens_per_s": e.tokens_per_s,
            "mfu": e.mfu,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes,
            "breakdown_s": list(e.breakdown_s.items()),
            "dtype_note": note,
        }

    try:
        entries = (cat.model(model), system, None if stack is None else cat.stack(stack))
    except HnplanError:
        return prediction_cache.as_cached(plan())
    digest = prediction_cache.point_digest("compare", *entries, gpus, seq_len, global_batch_seqs, dtype, offload)
    return prediction_cache.cached_point(digest, cat, plan)


def _peak(dense_tflops: dict, dtype: str) -> float:
    """Dense peak of ``dtype`` [TFLOP/s] (the catalog's dict is keyed by the Dtype literal)."""
    return float(dense_tflops[dtype])


# two accelerators are one generation when their dense bf16 peaks differ by less than this factor (GB200's
# GPU and B200: 2,500 vs 2,250 TFLOP/s, datasheets in data/accelerators; H100: 989)
SAME_GENERATION_PEAK_RATIO = 1.25


def _name(row) -> str:
    return f"**{row['system']}**"


def _per_gpu(fast, slow) -> tuple[float, str]:
    """How many times as fast ``fast`` trains as ``slow`` per GPU, and the words that say so where the two train
    on different GPU counts (whole racks and servers bought: 1,024 of 1,152 GPUs of 72-GPU racks against 1,152
    on 8-GPU servers); ``(days ratio, "")`` where the counts agree or the table has none.

    Per GPU the speed is tokens/s over GPUs, so the ratio is ``(days_slow x gpus_slow) / (days_fast x gpus_fast)``
    (the job's tokens cancel). Divided by the ratio of the GPUs' dense peaks it is the ratio of MFUs.

    >>> _per_gpu({"days": 20.0, "gpus": 1024}, {"days": 45.0, "gpus": 1152})
    (2.53125, ', on 1,024 GPUs against 1,152: 2.53x the speed per GPU')
    """
    speed = slow["days"] / fast["days"]
    if "gpus" not in fast or "gpus" not in slow or fast["gpus"] == slow["gpus"]:
        return speed, ""
    per_gpu = speed * slow["gpus"] / fast["gpus"]
    return per_gpu, f", on {fast['gpus']:,} GPUs against {slow['gpus']:,}: {per_gpu:.2f}x the speed per GPU"


def ok_rows(rows: list[dict]) -> list[dict]:
    """The rows whose ``status`` starts with ``ok`` (all of them in a table without ``status``)."""
    return [r for r in rows if "status" not in r or (isinstance(r["status"], str) and r["status"].startswith("ok"))]


def fabric_and_chip(table: pd.DataFrame | list[dict]) -> str:
    """What the supernode fabric buys and what the newer chip buys, told apart from the numbers.

    The fabric: a supernode against a server cluster whose GPU is of the same generation (dense bf16 peaks
    within :data:`SAME_GENERATION_PEAK_RATIO`; of several, the nearest in peak and HBM capacity), e.g. GB200
    NVL72 against HGX B200 and GB300 NVL72 against DGX B300; the part of the speed-up
    the supernode's own GPU peak explains is said. The chip: two server clusters with different GPUs, e.g.
    HGX B200 against HGX H100, same kind of fabric. Empty when the table has no such pair. ``table``: the frame
    of :func:`compare_training_designs` or its rows (:func:`compare_design_rows`), read alike.
    """
    rows = as_records(table)
    columns = set(rows[0]) if rows else set()
    ok = ok_rows(rows)
    if not ok or "peak_tflops" not in columns or "kind" not in columns:
        return ""
    parts = []
    servers = [r for r in ok if r["kind"] != "supernode"]
    for sn in (r for r in ok if r["kind"] == "supernode"):
        peers = [
            r
            for r in servers
            if 1 / SAME_GENERATION_PEAK_RATIO <= r["peak_tflops"] / sn["peak_tflops"] <= SAME_GENERATION_PEAK_RATIO
        ]
        if not peers:
            continue
        # the nearest chip: peak, then (where given) HBM capacity, which sets the plans that fit (GB300 against
        # B300, 288 and 270 GB, rather than B200, 180 GB, at the same 2,250 TFLOP/s bf16)
        distance = [
            {
                "row": r,
                "d": abs(math.log(r["peak_tflops"] / sn["peak_tflops"]))
                + (abs(math.log(r["hbm_gb"] / sn["hbm_gb"])) if "hbm_gb" in columns else 0.0),
            }
            for r in peers
        ]
        sv = first_min(distance, "d")["row"]
        speed = sv["days"] / sn["days"]
        chip = sn["peak_tflops"] / sv["peak_tflops"]
        # like with like: where the designs train on different GPU counts, the fabric's part is per GPU
        per_gpu, counts = _per_gpu(sn, sv)
        text = (
            f"**What the supernode fabric buys**: {_name(sn)} trains {speed:.2f}x as fast as {_name(sv)}, "
            f"GPUs of the same generation on 8-GPU servers ({sn['days']:.1f} against {sv['days']:.1f} days{counts})"
        )
        if abs(chip - 1) > 0.02:
            text += (
                f"; its GPU peaks {chip:.2f}x as high ({sn['peak_tflops']:,.0f} against "
                f"{sv['peak_tflops']:,.0f} TFLOP/s), so {'per GPU ' if counts else ''}the fabric and the rest of "
                f"the rack account for about {per_gpu / chip:.2f}x"
            )
        elif counts:
            text += f"; per GPU the fabric and the rest of the rack account for about {per_gpu:.2f}x"
        if "run_musd" in columns:
            text += (
                f". The run costs {units.format_usd(sn['run_musd'] * units.MEGA)} on {sn['system']} against "
                f"{units.format_usd(sv['run_musd'] * units.MEGA)} on {sv['system']}"
            )
        parts.append(text + ".")
    if len(servers) > 1:
        new, old = first_max(servers, "peak_tflops"), first_min(servers, "peak_tflops")
        if new["peak_tflops"] / old["peak_tflops"] >= SAME_GENERATION_PEAK_RATIO:
            text = (
                f"**What the newer chip buys**: on the same kind of fabric (8-GPU servers), {_name(new)} trains "
                f"{old['days'] / new['days']:.2f}x as fast as {_name(old)} ({new['days']:.1f} against "
                f"{old['days']:.1f} days{_per_gpu(new, old)[1]}) with a {new['peak_tflops'] / old['peak_tflops']:.2f}x "
                "dense peak"
            )
            if "run_musd" in columns:
                text += (
                    f"; the run costs {units.format_usd(new['run_musd'] * units.MEGA)} against "
                    f"{units.format_usd(old['run_musd'] * units.MEGA)}"
                )
            parts.append(text + ".")
    return "\n\n".join(parts)


def verdict(table: pd.DataFrame | list[dict]) -> str:
    """A paragraph naming the fastest design, the cheapest to buy and per training run, and (where the table
    allows) what the supernode fabric buys apart from what the newer chip buys (:func:`fabric_and_chip`).
    ``table``: the frame of :func:`compare_training_designs` or its rows (:func:`compare_design_rows`), read
    alike."""
    rows = as_records(table)
    columns = set(rows[0]) if rows else set()
    ok = ok_rows(rows)
    if not ok:
        return "No design has a feasible plan for this job."
    if len(ok) == 1:
        return _only_design(ok[0], len(rows))
    fast = first_min(ok, "days")
    priced = [r for r in ok if not is_na(r["capex_musd"])]
    on = f" on {fast['gpus']:,} GPUs" if "gpus" in columns and n_unique(ok, "gpus") > 1 else ""
    text = f"{_name(fast)} trains fastest ({fast['days']:.1f} days at {fast['mfu']:.0%} MFU{on})"
    if not priced:
        text += "; no design has a price, so every cost is n/a."
    else:
        cheap = first_min(priced, "capex_musd")
        # whole units bought: say for how many GPUs where the designs buy different counts
        bought = f" for {cheap['gpus_bought']:,} GPUs" if n_unique(priced, "gpus_bought") > 1 else ""
        text += (
            f"; {_name(cheap)} costs least to buy ({units.format_usd(cheap['capex_musd'] * units.MEGA)} capex{bought})."
        )
    if len(priced) < len(ok):
        text += (
            " "
            + "; ".join(
                f"cost n/a for {r['system']}: it has no price (give its file `unit_price_usd` or `price_item`)"
                for r in ok
                if is_na(r["capex_musd"])
            )
            + "."
        )
    if "run_musd" in columns and priced:
        run = first_min(priced, "run_musd")
        text += (
            f" Per training run, at each design's TCO per GPU-hour, {_name(run)} costs least "
            f"({units.format_usd(run['run_musd'] * units.MEGA)}, "
            f"{units.format_usd(run['usd_per_million_tokens'])} per million tokens)."
        )
    if len(ok) > 1:
        slow = first_max(ok, "days")
        text += f" The slowest, {slow['system']}, takes {slow['days'] / fast['days']:.2f}x as long."
    split = fabric_and_chip(rows)
    return text + ("\n\n" + split if split else "")


def _only_design(row: dict, designs: int) -> str:
    """The verdict of a table with one design that has a plan: what it does, no ranking (it is the fastest and
    the cheapest of one)."""
    only = "the one design compared" if designs == 1 else f"the only one of {designs} designs with a plan"
    text = f"{_name(row)} is {only}, so there is nothing to rank: it trains in {row['days']:.1f} days at {row['mfu']:.0%} MFU"
    if not is_na(row.get("capex_musd")):
        text += f", costs {units.format_usd(row['capex_musd'] * units.MEGA)} to buy"
        if not is_na(row.get("run_musd")):
            text += (
                f" and {units.format_usd(row['run_musd'] * units.MEGA)} per training run at its TCO per GPU-hour "
                f"({units.format_usd(row['usd_per_million_tokens'])} per million tokens)"
            )
    else:
        text += "; cost n/a: it has no price (give its file `unit_price_usd` or `price_item`)"
    return text + "."
