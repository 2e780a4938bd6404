"""Compare designs for one training job: best plan per system, time, power, energy and cost (the verdict in
words: :mod:`hnplan.planning.compare_verdict`, re-exported here)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import max_scaleout_gpus, whole_units
from hnplan.defaults import DEFAULT_STACK, TRAIN_DTYPES
from hnplan.errors import HnplanError, InputError, check_choice
from hnplan.planning import prediction_cache
from hnplan.planning.compare_trust import trust_notes as trust_notes  # re-exported: it lived here
from hnplan.planning.compare_verdict import (  # re-exported: they lived here
    SAME_GENERATION_PEAK_RATIO as SAME_GENERATION_PEAK_RATIO,
)
from hnplan.planning.compare_verdict import fabric_and_chip as fabric_and_chip
from hnplan.planning.compare_verdict import heading as heading
from hnplan.planning.compare_verdict import ok_rows as ok_rows
from hnplan.planning.compare_verdict import pins_text as pins_text
from hnplan.planning.compare_verdict import verdict as verdict
from hnplan.planning.design import cost_or_gap, estimate_reliability
from hnplan.planning.job_sizes import packed_past_fabric_text, packed_units, weigh_job_counts
from hnplan.planning.records import frame_records
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
    stack=DEFAULT_STACK,
    *,
    goodput: bool = True,
    mode: str = "async",
    fixed: dict | None = None,
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
        GEMM efficiency and the ZeRO stages and recomputation modes searched); default ``megatron-core``
        (:data:`hnplan.defaults.DEFAULT_STACK`, as ``hnplan train``); None: no stack entry (:class:`StackChoices`).
    goodput : bool
        Divide each design's throughput by the goodput of the reliability model on the GPUs that train
        (:func:`hnplan.planning.design.estimate_reliability`: failures, restarts, checkpoint stalls), as
        :func:`hnplan.planning.time_to_train.time_to_train` and ``hnplan size`` do (default); ``False``: no
        failures. Days, energy and the run's cost follow it; of the GPU counts weighed the one with the most
        tokens per second after the goodput is kept (the fewest days, as ``hnplan size``).
    mode : {"sync", "async"}
        Checkpoint mode of the goodput.
    fixed : dict, optional
        Knobs of the plan pinned on every design, as ``hnplan train``'s flags pin them (:func:`check_pins`: ``tp,
        pp, dp, cp, ep, etp, microbatch_size, virtual_stages, recompute, zero_stage``); the rest are searched. Each
        GPU count weighed (the count asked for and 64 of each 72-GPU rack alike) is searched with them; a count
        on which they cannot hold (a ``dp`` that does not divide it) has no plan, and a design on which no count
        has one keeps its row with the reason in ``status``. None or ``{}``: every knob searched.

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
        plan, time and power, with NaN costs, "cost n/a" in ``status`` and the reason in ``cost_note``. A design whose accelerator lacks ``dtype`` (fp8 on Ascend 910C), or
        cannot run the stack's fp8 recipe (MXFP8 on Hopper), is planned in bf16, said in ``dtype`` and ``status``. ``df.attrs['units']`` maps columns to units (:data:`UNITS`).

    Raises
    ------
    InputError
        Before anything is planned: no systems, a ``gpus``, ``seq_len`` or ``global_batch_seqs`` that is not a whole
        number >= 1, ``tokens`` not a finite number > 0, a ``dtype`` not bf16, fp8 or fp4, a bad pin (``fixed``).
    CatalogError
        An unknown model or system id (``systems`` may be one id or a list of them), or a file that does not
        validate.
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
            fixed=fixed,
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
    stack=DEFAULT_STACK,
    *,
    goodput: bool = True,
    mode: str = "async",
    fixed: dict | None = None,
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
            fixed=fixed,
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
    fixed: dict | None = None,
) -> list[dict]:
    """The rows of :func:`compare_training_designs`, each with the keys its design has."""
    cat = catalog or load_catalog()
    if isinstance(systems, str):  # one id or path, not its characters
        systems = [systems]
    if not systems:
        raise InputError("systems is empty: name at least one system id (data/systems)")
    _check_job(gpus, tokens, seq_len, global_batch_seqs, dtype)
    cat.model(model)  # an unknown model id raises here, as an unknown system does, not in every design's status
    pins = check_pins(fixed)
    rows = []
    for ref in systems:
        system = cat.system(ref)
        row = {"system": system.id, "kind": system.kind, "gpus": gpus, "dtype": dtype}
        acc = cat.accelerator(system.accelerator)
        run_dtype, note = dtype, ""
        if dtype not in acc.dense_tflops:  # e.g. fp8 on Ascend 910C: compare at the best dtype it has
            run_dtype, note = "bf16", f" ({dtype} unavailable on {acc.id}: bf16)"
            row["dtype"] = run_dtype
        elif dtype == "fp8" and (recipe := _unrunnable_fp8_recipe(cat, stack, acc)):  # MXFP8 on Hopper
            run_dtype, note = "bf16", f" (fp8 recipe {recipe} unavailable on {acc.id}: bf16)"
            row["dtype"] = run_dtype
        unit = system.unit_gpus
        bought = whole_units(cat.design(system), gpus)  # the design's whole units that hold the GPUs asked for
        # the count asked for, and where fewer, the sizing planner's other options on the same units (64 of
        # each 72-GPU rack): the faster is kept, as `hnplan size` does at a purchase; where the count asked
        # for has no plan, the counts the units hold, down to the first with one (time_on_purchase's walk)
        goods: dict[int, float] = {}

        def speed(g: int, e: dict, system=system, bought=bought, goods=goods) -> float:  # after the goodput
            goods[g] = _goodput(cat, system, g, model, mode, e, bought) if goodput else 1.0
            return e["tokens_per_s"] * goods[g]

        def plan(g: int, system=system, run_dtype=run_dtype) -> dict:  # (called within this design's turn)
            return _best(cat, model, system, g, seq_len, global_batch_seqs, run_dtype, stack, offload, pins)

        est, used, refused = weigh_job_counts(gpus, unit, bought // unit, plan, speed)
        good = goods.get(used, 1.0)
        if est is not None and (need := packed_units(used, unit, est) * unit) > bought:
            # the plan's scale-up groups cannot tile the units that hold the count (24 EP-64 groups in 22 racks of
            # 72): buy the units that hold them whole, their idle GPUs spares, if one scale-out fabric joins them
            if need > (most := max_scaleout_gpus(cat.design(system))):
                row["status"] = f"no plan: {packed_past_fabric_text(used, need, unit, most)}"
                rows.append(row)
                continue
            bought = need
            good = _goodput(cat, system, used, model, mode, est, bought) if goodput else 1.0
        asked = {"error": refused[gpus]} if gpus in refused else {}
        if est is None:
            status = f"no plan: {next(iter(refused.values()))}"
            if bought != gpus and bought in refused:  # the whole units' count fails too: say why, as the GPUs bought
                n = bought // unit
                whole = f"{n:,} whole unit{'s' if n != 1 else ''} of {unit:,}"
                status += f"; on the {bought:,} GPUs bought ({whole}): {refused[bought]}"
            row["status"] = status
            rows.append(row)
            continue
        if used != bought or used != gpus:  # idle GPUs bought, or a count other than the one asked: say so
            per = f"{used // (bought // unit)} of each {unit}-GPU unit" if used % (bought // unit) == 0 else "packed"
            why = f"{per}, faster than all {gpus:,}" if used != gpus else ""
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
            # the basis of the run's cost: the TCO per GPU-hour, its lifetime and the share of its hours used
            usd_per_gpu_hour=cost.usd_per_gpu_hour if cost else float("nan"),
            tco_years=cost.years if cost else float("nan"),
            tco_utilisation=cost.utilisation if cost else float("nan"),
        )
        row.update({f"t_{k}_s": v for k, v in est["breakdown_s"]})
        # fp8/fp4 slower than bf16 on this design: why (bf16's plan does not fit, or the recipe's passes)
        row["dtype_note"] = est.get("dtype_note", "")
        rows.append(row)
    return rows


_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "recompute", "virtual_stages", "zero_stage")


def _goodput(cat: Catalog, system, gpus: int, model, mode: str, est: dict, bought: int) -> float:
    """Goodput of a design's job on ``gpus`` of ``bought`` GPUs (the idle ones hot spares) at its best plan's
    throughput and step time, as :func:`hnplan.planning.time_to_train.time_to_train` takes it [fraction]."""
    return estimate_reliability(
        system, gpus, model, mode, cat, tokens_per_s=est["tokens_per_s"], step_s=est["step_time_s"], gpus_bought=bought
    ).goodput


def _best(
    cat: Catalog,
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str,
    stack,
    offload,
    pins: dict | None = None,
):
    """The fastest plan of one design at ``gpus`` (:func:`hnplan.planning.training.best_plan`) with the knobs of
    ``pins`` (:func:`check_pins`) fixed, as the numbers
    :func:`compare_training_designs` reads: the plan's knobs, ``step_time_s, tokens_per_s, mfu,
    memory_per_gpu_bytes`` and ``breakdown_s`` (pairs, in the estimate's order); ``{"error": message}`` when no
    plan runs. Cached on disk (:func:`hnplan.planning.prediction_cache.cached_point`) under the model, system
    and stack entries' fields, the job, the pins and the catalog's and code's hashes; a reference that does not resolve
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
                fixed=pins,
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
                fixed=pins,
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
    # the pins as sorted JSON ("{}" when none): a pinned design's best plan is never read back as an unpinned one's
    digest = prediction_cache.point_digest(
        "compare", *entries, gpus, seq_len, global_batch_seqs, dtype, offload, pins_key(pins)
    )
    return prediction_cache.cached_point(digest, cat, plan)


#: the knobs a comparison may pin, in the order they are said (``hnplan train``'s flags' order)
PIN_ORDER = ("tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "virtual_stages", "recompute", "zero_stage")


def check_pins(fixed: dict | None) -> dict:
    """The pinned knobs of a comparison, checked: None values dropped, each degree (``tp, pp, dp, cp, ep, etp,
    microbatch_size, virtual_stages``) a whole number of at least 1 (a whole float such as YAML's ``8.0`` read as
    8), ``zero_stage`` one of 0-3 and ``recompute`` one of :data:`hnplan.compute.RECOMPUTE_MODES`, in the order of
    :data:`PIN_ORDER`. Checked here, before any design is planned: a bad pin is bad input for every design, not a
    design's missing plan.

    Raises
    ------
    InputError
        For a field that is not a plan's knob, a degree that is not a whole number of at least 1, or a recompute mode
        or ZeRO stage hnplan does not know (the messages of :func:`hnplan.planning.training.plan.check_knobs`).

    >>> check_pins({"ep": 8, "tp": 1.0, "pp": None, "recompute": "none"})
    {'tp': 1, 'ep': 8, 'recompute': 'none'}
    >>> check_pins(None)
    {}
    """
    pins = {k: v for k, v in (fixed or {}).items() if v is not None}
    if not pins:
        return {}  # nothing pinned: the training planner is not imported (a cached comparison needs none of it)
    from hnplan.planning.training.plan import PLAN_FIELDS, check_knobs

    unknown = sorted(set(pins) - set(PLAN_FIELDS), key=str)
    if unknown:
        raise InputError(f"fixed: unknown plan fields {unknown}; allowed: {', '.join(PIN_ORDER)}")
    for k, v in pins.items():
        if k == "recompute":
            continue
        whole = isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
        if not whole or v < (0 if k == "zero_stage" else 1):
            raise InputError(f"{k} must be a whole number of at least {0 if k == 'zero_stage' else 1}; got {v!r}")
        pins[k] = int(v)
    if "recompute" in pins and not isinstance(pins["recompute"], str):
        raise InputError(f"recompute must be one of none, selective, full; got {pins['recompute']!r}")
    check_knobs(pins.get("recompute", "none"), pins.get("zero_stage", 1))
    return {k: pins[k] for k in PIN_ORDER if k in pins}


def pins_key(pins: dict | None) -> str:
    """The pins as the cache key holds them: sorted JSON, ``{}`` when none.

    >>> pins_key({"tp": 1, "ep": 8}), pins_key(None)
    ('{"ep": 8, "tp": 1}', '{}')
    """
    import json

    return json.dumps(dict(pins or {}), sort_keys=True)


def _check_job(gpus, tokens, seq_len, global_batch_seqs, dtype) -> None:
    """Refuse what the command line's options refuse before a comparison plans anything: a GPU count, sequence or
    batch that is not a whole number >= 1, a token count that is not a finite number > 0, an unknown dtype.

    >>> _check_job(0, 1e12, 8192, 2048, "bf16")
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: gpus must be a whole number >= 1; got 0
    """
    for name, v in (("gpus", gpus), ("seq_len", seq_len), ("global_batch_seqs", global_batch_seqs)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be a whole number >= 1; got {v!r}")
    if isinstance(tokens, bool) or not isinstance(tokens, (int, float, np.number)) or not (0 < tokens < math.inf):
        raise InputError(f"tokens must be a finite number > 0; got {tokens!r}")
    check_choice("dtype", dtype, TRAIN_DTYPES)


def _unrunnable_fp8_recipe(cat: Catalog, stack, acc) -> str:
    """The stack's fp8 recipe on ``acc`` (its ``choices_by_accelerator`` applied) when the chip cannot run it
    (:func:`hnplan.compute.fp8_recipes.check_recipe`: MXFP8 needs Blackwell tensor cores), else ""."""
    from hnplan.compute.fp8_recipes import check_recipe

    if stack is None:  # the planner's defaults
        from hnplan.catalog.schemas.software import StackChoices

        recipe = str(StackChoices().fp8_recipe)
    else:
        st = cat.stack(stack)
        recipe = str(((st.choices_by_accelerator or {}).get(acc.id) or {}).get("fp8_recipe", st.fp8_recipe))
    try:
        check_recipe(acc, recipe)
    except InputError:
        return recipe
    return ""


def _peak(dense_tflops: dict, dtype: str) -> float:
    """Dense peak of ``dtype`` [TFLOP/s] (the catalog's dict is keyed by the Dtype literal)."""
    return float(dense_tflops[dtype])
