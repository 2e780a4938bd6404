"""Compare designs for one training job: best plan per system, time, power, energy and cost."""

from __future__ import annotations

import math

import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import HnplanError, InputError
from hnplan.planning import prediction_cache, trust
from hnplan.planning.design import cost_or_gap, job_gpu_options
from hnplan.power import design_power, run_energy


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

    Returns
    -------
    pandas.DataFrame
        Columns ``system, kind, gpus`` (the GPUs the job trains on), ``gpus_bought`` (the units' GPUs),
        ``tp, pp, dp, ep, recompute, step_time_s, tokens_per_s, mfu`` (of ``peak_tflops``, the dtype's dense peak),
        days, racks, it_power_mw, facility_power_mw, energy_mwh, capex_musd, status``, ``accelerator`` and its
        dense ``peak_tflops`` in the run's dtype and HBM capacity ``hbm_gb`` [GB], the cost of the run ``run_musd`` [million USD] and per million
        tokens ``usd_per_million_tokens`` [USD] at the design's TCO per GPU-hour (:meth:`DesignCost.usd_for`) for
        every GPU bought (power, energy and costs count ``gpus_bought``, the GPUs that do not train at their idle
        power, :func:`hnplan.power.training_draw_w`, as ``hnplan size``; ``status`` says when fewer train; ``days``
        and energy assume no failures, as ``hnplan size --no-goodput``), plus the
        step-time breakdown ``t_<part>_s``, and ``dtype_note``: where the job planned in fp8 or fp4 comes out slower
        than in bf16 on the design, why (:func:`hnplan.planning.dtype_gap.dtype_gap_note`), else empty. A system with no feasible plan keeps its row with the
        reason in ``status``; one without a price (:func:`hnplan.planning.design.cost_or_gap`) keeps its
        plan, time and power, with NaN costs, "cost n/a" in ``status`` and the reason in ``cost_note``. A design whose accelerator lacks ``dtype`` (fp8 on Ascend 910C) is planned
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
        unit = system.unit_gpus
        bought = math.ceil(gpus / unit) * unit  # the design's whole units that hold the GPUs asked for
        est: dict | None = None
        used = gpus
        errors: list[str] = []
        # the count asked for, and where fewer, the sizing planner's other options on the same units (64 of
        # each 72-GPU rack): the faster is kept, as `hnplan size` does at a purchase
        for g in (gpus, *(g for g in job_gpu_options(unit, bought // unit) if g < gpus)):
            e = _best(cat, model, system, g, seq_len, global_batch_seqs, run_dtype, stack, offload)
            if "error" in e:
                errors.append(e["error"])
                continue
            if est is None or e["tokens_per_s"] > est["tokens_per_s"]:
                est, used = e, g
        if est is None:
            row["status"] = f"no plan: {errors[0]}"
            rows.append(row)
            continue
        if used != bought:  # the idle GPUs are bought, powered and paid for: say so
            why = (
                f"{used // (bought // unit)} of each {unit}-GPU unit, faster than all {gpus:,}" if used != gpus else ""
            )
            note += f"; {used:,} of {bought:,} GPUs bought train ({why or 'the rest idle'})"
        row.update(gpus=used, gpus_bought=bought)
        pw = design_power(cat.design(system), bought)
        cost, gap = cost_or_gap(cat.design(system), bought)
        if gap is not None:  # no price: time and power stand, every cost is n/a with the reason
            note += f"; cost n/a: {system.id} has no price (unit_price_usd or price_item in its file)"
            row["cost_note"] = f"n/a: {gap}"
        seconds = tokens / est["tokens_per_s"]
        row.update({k: est[k] for k in _PLAN_KEYS})
        row.update(
            step_time_s=est["step_time_s"],
            tokens_per_s=est["tokens_per_s"],
            mfu=est["mfu"],
            memory_per_gpu_gib=units.to_GiB(est["memory_per_gpu_bytes"]),
            days=units.s_to_days(seconds),
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
    df = pd.DataFrame(rows)
    df.attrs["units"] = {
        "step_time_s": "s",
        "tokens_per_s": "tokens/s",
        "mfu": "fraction of peak_tflops (the dense peak in the row's dtype)",
        "gpus": "GPUs the job trains on",
        "gpus_bought": "GPUs bought (whole units)",
        "days": "days",
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
    return df


_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "microbatch_size", "recompute")


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


def fabric_and_chip(df: pd.DataFrame) -> str:
    """What the supernode fabric buys and what the newer chip buys, told apart from the numbers.

    The fabric: a supernode against a server cluster whose GPU is of the same generation (dense bf16 peaks
    within :data:`SAME_GENERATION_PEAK_RATIO`; of several, the nearest in peak and HBM capacity), e.g. GB200
    NVL72 against HGX B200 and GB300 NVL72 against DGX B300; the part of the speed-up
    the supernode's own GPU peak explains is said. The chip: two server clusters with different GPUs, e.g.
    HGX B200 against HGX H100, same kind of fabric. Empty when the table has no such pair.
    """
    ok = df[df["status"].str.startswith("ok")] if "status" in df else df
    if ok.empty or "peak_tflops" not in ok or "kind" not in ok:
        return ""
    parts = []
    servers = ok[ok["kind"] != "supernode"]
    for _, sn in ok[ok["kind"] == "supernode"].iterrows():
        peers = servers[
            (servers["peak_tflops"] / sn["peak_tflops"]).between(
                1 / SAME_GENERATION_PEAK_RATIO, SAME_GENERATION_PEAK_RATIO
            )
        ]
        if peers.empty:
            continue
        # the nearest chip: peak, then (where given) HBM capacity, which sets the plans that fit (GB300 against
        # B300, 288 and 270 GB, rather than B200, 180 GB, at the same 2,250 TFLOP/s bf16)
        distance = (peers["peak_tflops"] / sn["peak_tflops"]).map(math.log).abs()
        if "hbm_gb" in peers:
            distance = distance + (peers["hbm_gb"] / sn["hbm_gb"]).map(math.log).abs()
        sv = peers.loc[distance.idxmin()]
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
        if "run_musd" in ok:
            text += (
                f". The run costs {units.format_usd(sn['run_musd'] * units.MEGA)} on {sn['system']} against "
                f"{units.format_usd(sv['run_musd'] * units.MEGA)} on {sv['system']}"
            )
        parts.append(text + ".")
    if len(servers) > 1:
        new, old = servers.loc[servers["peak_tflops"].idxmax()], servers.loc[servers["peak_tflops"].idxmin()]
        if new["peak_tflops"] / old["peak_tflops"] >= SAME_GENERATION_PEAK_RATIO:
            text = (
                f"**What the newer chip buys**: on the same kind of fabric (8-GPU servers), {_name(new)} trains "
                f"{old['days'] / new['days']:.2f}x as fast as {_name(old)} ({new['days']:.1f} against "
                f"{old['days']:.1f} days{_per_gpu(new, old)[1]}) with a {new['peak_tflops'] / old['peak_tflops']:.2f}x "
                "dense peak"
            )
            if "run_musd" in ok:
                text += (
                    f"; the run costs {units.format_usd(new['run_musd'] * units.MEGA)} against "
                    f"{units.format_usd(old['run_musd'] * units.MEGA)}"
                )
            parts.append(text + ".")
    return "\n\n".join(parts)


def verdict(df: pd.DataFrame) -> str:
    """A paragraph naming the fastest design, the cheapest to buy and per training run, and (where the table
    allows) what the supernode fabric buys apart from what the newer chip buys (:func:`fabric_and_chip`)."""
    ok = df[df["status"].str.startswith("ok")] if "status" in df else df
    if ok.empty:
        return "No design has a feasible plan for this job."
    if len(ok) == 1:
        return _only_design(ok.iloc[0], len(df))
    fast = ok.loc[ok["days"].idxmin()]
    priced = ok[ok["capex_musd"].notna()]
    on = f" on {fast['gpus']:,} GPUs" if "gpus" in ok and ok["gpus"].nunique() > 1 else ""
    text = f"{_name(fast)} trains fastest ({fast['days']:.1f} days at {fast['mfu']:.0%} MFU{on})"
    if priced.empty:
        text += "; no design has a price, so every cost is n/a."
    else:
        cheap = priced.loc[priced["capex_musd"].idxmin()]
        # whole units bought: say for how many GPUs where the designs buy different counts
        bought = f" for {cheap['gpus_bought']:,} GPUs" if priced.get("gpus_bought", pd.Series()).nunique() > 1 else ""
        text += (
            f"; {_name(cheap)} costs least to buy ({units.format_usd(cheap['capex_musd'] * units.MEGA)} capex{bought})."
        )
    if len(priced) < len(ok):
        text += (
            " "
            + "; ".join(
                f"cost n/a for {r['system']}: it has no price (give its file `unit_price_usd` or `price_item`)"
                for _, r in ok[ok["capex_musd"].isna()].iterrows()
            )
            + "."
        )
    if "run_musd" in priced and not priced.empty:
        run = priced.loc[priced["run_musd"].idxmin()]
        text += (
            f" Per training run, at each design's TCO per GPU-hour, {_name(run)} costs least "
            f"({units.format_usd(run['run_musd'] * units.MEGA)}, "
            f"{units.format_usd(run['usd_per_million_tokens'])} per million tokens)."
        )
    if len(ok) > 1:
        slow = ok.loc[ok["days"].idxmax()]
        text += f" The slowest, {slow['system']}, takes {slow['days'] / fast['days']:.2f}x as long."
    split = fabric_and_chip(df)
    return text + ("\n\n" + split if split else "")


def _only_design(row, designs: int) -> str:
    """The verdict of a table with one design that has a plan: what it does, no ranking (it is the fastest and
    the cheapest of one)."""
    only = "the one design compared" if designs == 1 else f"the only one of {designs} designs with a plan"
    text = f"{_name(row)} is {only}, so there is nothing to rank: it trains in {row['days']:.1f} days at {row['mfu']:.0%} MFU"
    if pd.notna(row.get("capex_musd")):
        text += f", costs {units.format_usd(row['capex_musd'] * units.MEGA)} to buy"
        if pd.notna(row.get("run_musd")):
            text += (
                f" and {units.format_usd(row['run_musd'] * units.MEGA)} per training run at its TCO per GPU-hour "
                f"({units.format_usd(row['usd_per_million_tokens'])} per million tokens)"
            )
    else:
        text += "; cost n/a: it has no price (give its file `unit_price_usd` or `price_item`)"
    return text + "."


# published metrics a run's MFU follows from: model TFLOP/s per GPU, or tokens/s per GPU times the model's FLOPs
# per token at the run's sequence length
_MFU_METRICS = {"model_tflops_per_gpu": "model TFLOP/s per GPU", "tokens_per_s_per_gpu": "tokens/s per GPU"}


def _run_mfu(run, model, cat: Catalog) -> float:
    """MFU of a published run [-]: its model FLOP/s per GPU over the dense peak of its dtype (PaLM's definition,
    :func:`hnplan.compute.mfu`)."""
    from hnplan.compute import mfu, peak_flops_per_s, training_flops_per_token

    peak = peak_flops_per_s(cat.accelerator(cat.system(run.system).accelerator), run.dtype)
    if run.metric == "model_tflops_per_gpu":
        return run.published * units.TERA / peak
    return mfu(training_flops_per_token(model, run.seq_len).model, run.published, peak)


def trust_notes(df: pd.DataFrame, model, catalog: Catalog | None = None, stack=None) -> str:
    """How far to trust the comparison: the caveats the catalog and the validation set give for its designs.

    These kinds, each only where it applies to a design of ``df`` (the rows of
    :func:`compare_training_designs` whose status is ok):

    * how many published training runs on the design's accelerator the validation set holds
      (``data/validation/training_runs.yaml``, :func:`hnplan.catalog.runs.training_runs`), and that a design
      with none is not validated;
    * hnplan's speed error over those runs per accelerator, and which way an accelerator's designs likely err
      where its runs lean one way (:func:`hnplan.planning.trust.error_sentences`);
    * where the same job was published on two of the accelerators: the measured speed ratio beside hnplan's,
      and whether hnplan likely understates or overstates the lead (:func:`hnplan.planning.trust.paired_sentences`);
    * where ``df`` has ``gpus``, ``mfu`` and ``dtype``: the published run of the same model, accelerator and
      dtype whose GPU count is nearest (metric ``model_tflops_per_gpu`` or ``tokens_per_s_per_gpu``), its MFU
      (:func:`_run_mfu`) beside the plan's;
    * the clock: compute-bound kernels run at the accelerator's ``sustained_compute_fraction`` of the
      short-run rates the GEMM and attention laws were fitted to (the power-limited clock,
      :mod:`hnplan.compute.clocks`);
    * which accelerators' GEMM ceiling and sustained clock are labelled assumptions carried from another chip
      (:func:`hnplan.planning.trust.assumption_sentence`);
    * the system price each design is costed at (``data/prices.yaml``: amount, what it buys, date, and
      whether it is assumed), on which the cost ranking rests;
    * for a mixture-of-experts model planned under the default stack, which captures no MoE kernel in a
      CUDA graph: the host work of such MoE layers is one value fitted to published runs, with their
      remaining errors (docs/training.md, "The MoE layer's host work, fitted");
    * where a design's plan in fp8 or fp4 is slower than its plan in bf16 (``dtype_note`` of
      :func:`compare_training_designs`): why, first after the opening sentence;
    * for a mixture-of-experts model planned with a MoE dispatch that missed a published run beyond its
      tolerance where another dispatch matched the same run: the two errors and the stacks with the other
      dispatch (:func:`hnplan.planning.trust.moe_dispatch_sentence`).

    Parameters
    ----------
    df : pandas.DataFrame
        The table of :func:`compare_training_designs` (columns ``system``, ``accelerator``, ``status``;
        ``gpus``, ``mfu`` and ``dtype`` where present), or any table of designs with ``system`` and ``status``
        (:func:`hnplan.planning.sizing.size_designs`): the accelerator is then the system's.
    model : id or entry
        The model it compared.
    catalog : Catalog, optional
    stack : id, path or entry, optional
        The software stack the designs were planned with; default the planner's defaults.

    Returns
    -------
    str
        Markdown sentences, one paragraph; empty when no design has a plan.
    """
    from hnplan.catalog.schemas.software import StackChoices
    from hnplan.planning.prediction_cache import cached_training_runs

    cat = catalog or load_catalog()
    ok = df[df["status"].str.startswith("ok")] if "status" in df else df
    if "accelerator" not in ok and "system" in ok and not ok.empty:  # e.g. the table of sizing.size_designs
        ok = ok.assign(accelerator=[cat.system(s).accelerator for s in ok["system"]])
    if ok.empty or "accelerator" not in ok:
        return ""
    accs = list(dict.fromkeys(ok["accelerator"]))
    runs_on: dict[str, list] = {a: [] for a in accs}
    for run in cached_training_runs():
        acc = cat.system(run.system).accelerator
        if acc in runs_on:
            runs_on[acc].append(run)
    parts = [
        "Every figure here is a model's prediction, not a measurement; the `validation` report "
        "(`hnplan report --scenario audit`) puts hnplan beside each published run with its error."
    ]
    if "dtype_note" in ok:  # a low-precision plan slower than bf16's: the reason before anything else
        parts.extend(n for n in ok["dtype_note"] if isinstance(n, str) and n)
    counted = [f"{len(r)} on {a}" for a, r in runs_on.items() if r]
    if counted:
        parts.append(f"Published training runs in the validation set: {', '.join(counted)}.")
    for a, r in runs_on.items():
        if not r:
            names = ", ".join(ok.loc[ok["accelerator"] == a, "system"])
            parts.append(f"No published training run on {a} is in the validation set: {names} is not validated.")
    if counted:
        errors = trust.speed_errors([r for rs in runs_on.values() for r in rs], cat)
        parts.extend(trust.error_sentences(runs_on, errors))
        parts.extend(trust.paired_sentences(runs_on, errors))
    m = cat.model(model)
    planned = ok if {"gpus", "mfu"} <= set(ok) else ok.iloc[:0]
    for _, row in planned.iterrows():  # the same model on the same accelerator, measured: its MFU beside ours
        # the same dtype only: an fp8 run's MFU is of the fp8 peak, twice the bf16 one on these chips
        same = [
            r
            for r in runs_on[row["accelerator"]]
            if r.model == m.id and r.metric in _MFU_METRICS and r.dtype == row.get("dtype")
        ]
        if same:
            run = min(same, key=lambda r: abs(math.log(r.gpus / row["gpus"])))
            parts.append(
                f"The nearest published run of {m.id} on {row['accelerator']}, {run.id} ({run.gpus:,} GPUs of "
                f"{run.system}, {run.dtype}), measured {run.published:,.0f} {_MFU_METRICS[run.metric]}, "
                f"{_run_mfu(run, m, cat):.1%} MFU, against {row['mfu']:.1%} for {row['system']}'s plan here (the "
                "plans need not be the same)."
            )
    clocks: dict[float, list[str]] = {}
    for a in accs:
        frac = cat.accelerator(a).sustained_compute_fraction
        if frac is not None and frac < 1:
            clocks.setdefault(frac, []).append(a)
    if clocks:
        said = "; ".join(f"{frac:.3g} on {' and '.join(a)}" for frac, a in clocks.items())
        parts.append(
            "Compute-bound kernels run at the share of the short-run rates their laws were fitted to that the "
            "power-limited clock sustains through a training step (the accelerators' "
            f"`sustained_compute_fraction`, each with its source): {said}."
        )
    if said := trust.assumption_sentence(accs, trust.frame_dtypes(ok), cat):
        parts.append(said)
    priced = []
    for system in dict.fromkeys(ok["system"]):  # the cost ranking rests on one system price per design
        try:
            p = cat.design(system).prices.system
        except HnplanError:
            continue
        if p is not None:
            priced.append(
                f"{system} {units.format_usd(p.usd)} per {p.per}, as of {p.as_of}"
                + (" (assumed)" if p.assumption else "")
            )
    if priced:
        parts.append(
            "The costs and their ranking rest on one dated system price per design (`data/prices.yaml`, each "
            f"with its source): {'; '.join(priced)}."
        )
    scope = set(StackChoices().cuda_graph_scope)
    if m.moe is not None and not scope & {"moe", "full_iteration"}:
        parts.append(
            f"{m.id} is a mixture of experts and the default stack captures none of its MoE kernels in CUDA "
            "graphs: published MoE runs that ran that way (the router, permutes and dispatch launched from the "
            "host) were slower than their kernel launches explain; hnplan adds the host work of their MoE layers "
            "as one value fitted to those runs (moe_host_us_per_kernel, 43 us a kernel), which leaves them "
            "between 27 % slower and 71 % faster than measured, the bf16 runs up to 28 % faster "
            '(docs/training.md, "The MoE layer\'s host work, fitted").'
        )
    if said := trust.moe_dispatch_sentence(m, stack, cat):
        parts.append(said)
    return " ".join(parts)
