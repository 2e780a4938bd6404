"""Design planner: the whole-design answers of ``hnplan tco`` and ``hnplan reliability`` (and the
procurement notebooks), composed from the power, cost and reliability cost models.

The planners resolve ids through the catalog once (:meth:`hnplan.catalog.loader.Catalog.design`) and
hand the resolved :class:`~hnplan.catalog.design.Design` to :mod:`hnplan.power`, :mod:`hnplan.cost` and
:mod:`hnplan.reliability`, which never see a catalog.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import check_fabric_gpus as fabric_check
from hnplan.comm.topology import max_scaleout_gpus, scaleout_bom, whole_units
from hnplan.cost import DesignCost, design_cost
from hnplan.deployment import deploy_time
from hnplan.errors import InputError, check_choice
from hnplan.planning.job_sizes import fallback_job_counts, job_gpu_options  # noqa: F401  (re-exported)
from hnplan.power import design_power
from hnplan.reliability import (
    CHECKPOINT_MODES,
    SPARE_QUANTILE,
    ReliabilityEstimate,
    reliability_estimate,
    spare_gpus,
)

__all__ = [
    "CHECKPOINT_MODES",
    "SPARE_QUANTILE",
    "ReliabilityEstimate",
    "cost_or_gap",
    "deployment_time",
    "design_of",
    "estimate_reliability",
    "purchase_fields",
    "rack_constraint",
    "tco_summary",
]


def design_of(system, catalog: Catalog | None = None) -> Design:
    """The :class:`~hnplan.catalog.design.Design` of a system id, path, entry or Design (passed through),
    from ``catalog`` (default :func:`hnplan.catalog.load_catalog`)."""
    return system if isinstance(system, Design) else (catalog or load_catalog()).design(system)


_design = design_of


def cost_or_gap(design: Design, gpus: int, **kwargs) -> tuple[DesignCost | None, str | None]:
    """:func:`hnplan.cost.design_cost` of ``gpus`` accelerators, or ``(None, why)`` when a part the cost
    counts has no price: the reason names the missing ``prices.yaml`` item and how a system file gives its
    own price (``unit_price_usd``, ``price_item``). Cost outputs then say "n/a" with it, and the rest of
    the answer (time, power, racks) stands."""
    missing = design.prices.missing
    if missing:
        return None, "; ".join(missing.values())
    return design_cost(design, gpus, **kwargs), None


def purchase_fields(
    design: Design,
    gpus: int,
    days: float,
    budget_usd: float | None = None,
    power_cap_mw: float | None = None,
) -> dict:
    """What buying ``gpus`` accelerators of a design (whole units) and running them ``days`` comes to, and
    whether it keeps to a capex budget and a facility power cap.

    Parameters
    ----------
    design : Design
    gpus : int
        GPUs bought (whole purchasable units: the job's spares included).
    days : float
        Run time [days], for ``run_usd`` at the design's TCO rate.
    budget_usd : float, optional
        Capex budget [USD]: ``within_budget`` is capex at most it (None without a budget or a price).
    power_cap_mw : float, optional
        Facility power cap [MW]: ``within_power_cap`` is the facility power (IT x PUE, at full load) at
        most it (None without a cap).

    Returns
    -------
    dict
        ``racks, it_power_mw, facility_power_mw, capex_usd, opex_usd_per_year, tco_usd, run_usd`` [MW, USD],
        ``within_budget``, ``within_power_cap``, and ``cost_note`` (``n/a: why``) where the design has no
        price (its costs NaN: :func:`cost_or_gap`).
    """
    pw = design_power(design, gpus)
    cost, gap = cost_or_gap(design, gpus)
    nan = float("nan")
    facility_mw = units.w_to_mw(pw.facility_w)
    out = dict(
        racks=pw.racks,
        it_power_mw=units.w_to_mw(pw.it_w),
        facility_power_mw=facility_mw,
        capex_usd=cost.capex_usd if cost else nan,
        opex_usd_per_year=cost.opex_usd_per_year if cost else nan,
        tco_usd=cost.tco_usd if cost else nan,
        run_usd=cost.usd_for(gpus, units.days_to_s(days)) if cost else nan,
        within_budget=None if budget_usd is None or cost is None else bool(cost.capex_usd <= budget_usd),
        within_power_cap=None if power_cap_mw is None else bool(facility_mw <= power_cap_mw),
    )
    out["racks_bound_by"] = rack_constraint(design, pw)
    if gap is not None:  # no price: the count, time and power stand; the costs are n/a, and why
        out["cost_note"] = f"n/a: {gap}"
    return out


def rack_constraint(design: Design, pw) -> str:
    """What sets a purchase's rack count (:func:`hnplan.power.design_power`: the larger of the space count and the
    power count), in words: ``"power: 40 kW a rack, 3 servers of 10.2 kW"`` when the facility's per-rack power
    limit for the system's cooling holds fewer nodes than the rack's slots (128 H100 in 8-GPU servers: 6 racks
    by power against 4 by 32 GPUs a rack), else ``"space: 32 GPUs a rack"`` (the system's ``gpus_per_rack``).

    Parameters
    ----------
    design : Design
    pw : hnplan.power.DesignPower
        The purchase's power and racks.
    """
    system = design.system
    if pw.racks_by_power > pw.racks_by_space and math.isfinite(pw.rack_limit_w):
        nodes = pw.units * system.unit_gpus / system.node_gpus
        node_w = pw.compute_w / nodes
        per_rack = max(1, math.floor(pw.rack_limit_w / node_w))
        what = "servers" if system.node_gpus > 1 else "nodes"
        return (
            f"power: {units.w_to_kw(pw.rack_limit_w):g} kW a rack, {per_rack} {what} of {units.w_to_kw(node_w):.1f} kW"
        )
    return f"space: {system.gpus_per_rack} GPUs a rack"


_COST_KEYS = (
    "capex_usd",
    "opex_usd_per_year",
    "tco_usd",
    "usd_per_gpu_hour",
    "idle_capital_usd",
    "systems_usd",
    "network_usd",
    "facility_usd",
    "energy_usd_per_year",
    "maintenance_usd_per_year",
    "storage_usd",
)


def tco_summary(system, gpus: int, catalog: Catalog | None = None, availability: float | None = None, **kwargs) -> dict:
    """The ``hnplan tco`` answer: power, racks, capex, opex, TCO and $ per GPU-hour of a design.

    ``system`` is an id, a path, a System or a Design; keyword arguments go to
    :func:`hnplan.cost.design_cost` (``years``, ``pue``, ``utilisation``, ...). With ``availability``
    (a probability in (0, 1)), the spare accelerators that keep ``gpus`` whole with that probability
    (:func:`hnplan.reliability.spare_gpus`, which depends on hot swap and the failure unit) are
    bought too; the idle GPUs of the whole units that hold ``gpus`` count toward them as the spares model
    counts them (:mod:`hnplan.reliability.spares`: the job spread evenly over its units, each unit's idle whole
    nodes standing in for its failed ones), so only the failures they cannot cover need spares beside.

    Returns
    -------
    dict
        ``system, gpus, gpus_bought, unit_gpus, it_power_kw, facility_power_kw, pue, racks, kw_per_rack,
        rack_limit_kw, over_rack_limit, capex_usd,
        opex_usd_per_year, tco_usd, usd_per_gpu_hour, years, utilisation, deploy_days,
        idle_capital_usd``, the capex/opex parts, ``spare_gpus`` and the storage (``storage, storage_units,
        storage_usd, storage_kw``). Without a price (:func:`cost_or_gap`) the cost keys that need it are NaN
        and ``cost_note`` says why; power, racks, GPUs and the costs that do not need it (energy, facility
        build, the network when its parts are priced) stand.
    """
    design = _design(system, catalog)
    system = design.system
    if availability is not None:
        held = whole_units(design, gpus)  # the whole units of the job, idle GPUs included
        kwargs["spare_gpus"] = spare_gpus(design, gpus, quantile=availability, gpus_bought=held)
    c, gap = cost_or_gap(design, gpus, **kwargs)
    spares = kwargs.get("spare_gpus", 0) if c is None else c.spare_gpus
    pw = design_power(design, gpus + spares, kwargs.get("pue"))
    power = {
        "system": system.id,
        "gpus": gpus,
        "gpus_bought": pw.units * system.unit_gpus,
        "unit_gpus": system.unit_gpus,
        "it_power_kw": units.w_to_kw(pw.it_w),
        "facility_power_kw": units.w_to_kw(pw.facility_w),
        "pue": pw.pue,
        "racks": pw.racks,
        "kw_per_rack": pw.kw_per_rack,
        "rack_limit_kw": units.w_to_kw(pw.rack_limit_w),
        "over_rack_limit": pw.over_rack_limit,
        "spare_gpus": spares,
        "storage": design.storage.id if design.storage is not None else None,
        "storage_units": pw.storage_units,
        "storage_kw": units.w_to_kw(pw.storage_w),
    }
    if c is None:  # no price: the costs that need it n/a, with the reason; energy and facility stand
        part = design_cost(design, gpus, missing_price_nan=True, **kwargs)  # its defaults, not repeated here
        return {
            **power,
            **dict.fromkeys(_COST_KEYS, float("nan")),
            "network_usd": part.network_usd,
            "facility_usd": part.facility_usd,
            "energy_usd_per_year": part.energy_usd_per_year,
            "years": part.years,
            "utilisation": part.utilisation,
            "staff_usd_per_year": part.staff_usd_per_year,
            "deploy_days": units.s_to_days(part.deploy_s),
            "cost_note": f"n/a: {gap}",
        }
    return {
        **power,
        "gpus_bought": c.gpus,
        "capex_usd": c.capex_usd,
        "opex_usd_per_year": c.opex_usd_per_year,
        "tco_usd": c.tco_usd,
        "usd_per_gpu_hour": c.usd_per_gpu_hour,
        "years": c.years,
        "utilisation": c.utilisation,
        "deploy_days": units.s_to_days(c.deploy_s),
        "idle_capital_usd": c.idle_capital_usd,
        "systems_usd": c.systems_usd,
        "network_usd": c.network_usd,
        "facility_usd": c.facility_usd,
        "energy_usd_per_year": c.energy_usd_per_year,
        "maintenance_usd_per_year": c.maintenance_usd_per_year,
        "staff_usd_per_year": c.staff_usd_per_year,
        "storage_usd": c.storage_usd,
    }


def estimate_reliability(
    system,
    gpus: int,
    model,
    mode: str = "async",
    catalog: Catalog | None = None,
    rate_factor: float = 1.0,
    write_GBps_per_node: float | None = None,
    restart_overhead_s: float | None = None,
    storage=None,
    storage_units: int | None = None,
    tokens_per_s: float | None = None,
    checkpoint_storage_share: float | None = None,
    step_s: float | None = None,
    gpus_bought: int | None = None,
) -> ReliabilityEstimate:
    """Interruptions, checkpoint interval, restart time and goodput of a job
    (:func:`hnplan.reliability.reliability_estimate` on the resolved design and model).

    Parameters
    ----------
    system : id, path, System or Design
    gpus : int
    model : id, path or Model
    mode : {"sync", "async"}
        Checkpoint mode. Async stalls only for the device-to-host copy; its background write must
        finish before the next checkpoint, so the interval is at least the write time.
    rate_factor : float
        Multiplies every failure rate (what-ifs).
    write_GBps_per_node : float, optional
        Storage write bandwidth [GB/s per node].
    restart_overhead_s : float, optional
        Restart time before the checkpoint read [s]; default reliability.yaml.
    storage : id, path or Storage, optional
        Storage the checkpoints go to; default the system's ``storage`` (none: per-node figures).
    storage_units : int, optional
        Units of it; default the system's sizing rule (:func:`hnplan.storage.units_for`).
    tokens_per_s : float, optional
        The job's throughput [tokens/s]: its data loader's reads share the storage.
    checkpoint_storage_share : float, optional
        Largest fraction of the time the storage may spend writing checkpoints (0, 1]; the interval is
        at least the write time over it. Default reliability.yaml's (a labelled assumption).
    step_s : float, optional
        The job's step time [s]: the interval is at least one step, in whole steps.
    gpus_bought : int, optional
        GPUs of the whole units bought (>= ``gpus``): their idle nodes are hot spares inside the unit's
        scale-up domain (64 of each NVL72 rack's 72 train: two spare trays), so a failure they cover costs
        the restart but not the repair wait (:mod:`hnplan.reliability.spares`). Default none idle.

    Returns
    -------
    ReliabilityEstimate

    Raises
    ------
    InputError
        For an unknown mode, a share outside (0, 1], or ``gpus_bought`` above what the scale-out fabric
        joins (the topology's message, :func:`hnplan.comm.topology.scaleout_bom`).
    CatalogError
        For an unknown system or model.
    """
    check_choice("mode", mode, CHECKPOINT_MODES)
    cat = catalog or load_catalog()
    design = _design(system, cat)
    if gpus_bought is not None and gpus_bought > gpus:  # the idle spares are wired in: one fabric holds them
        scaleout_bom(design, gpus_bought)  # (raises InputError beyond its largest fat-tree)
    return reliability_estimate(
        design,
        gpus,
        cat.model(model),
        mode,
        rate_factor,
        write_GBps_per_node,
        restart_overhead_s,
        storage=cat.get("storage", storage) if storage is not None else None,
        storage_units=storage_units,
        tokens_per_s=tokens_per_s,
        checkpoint_storage_share=checkpoint_storage_share,
        step_s=step_s,
        gpus_bought=gpus_bought,
    )


def failure_rates_basis(system, catalog: Catalog | None = None) -> dict:
    """What the failure rates a system gets were measured on: ``measured_on`` (accelerator ids of
    reliability.yaml's ``measured_on``), ``carried`` (True when the system's accelerator is not among them,
    so the rates are carried unchanged from another accelerator: an assumption) and ``note`` (one line
    saying so, None otherwise).

    >>> failure_rates_basis("gb200-nvl72")["note"]
    'measured on h100-sxm (llama3-h100); carried unchanged to gb200, an assumption: no published rates for it'
    >>> failure_rates_basis("hgx-h100-ib-ndr")["carried"]
    False
    """
    design = _design(system, catalog or load_catalog())
    rel, acc = design.reliability, design.accelerator.id
    measured = list(rel.measured_on)
    carried = bool(measured) and acc not in measured
    note = (
        f"measured on {', '.join(measured)} ({rel.id}); carried unchanged to {acc}, an assumption: no published "
        "rates for it"
        if carried
        else None
    )
    return {"measured_on": measured, "carried": carried, "note": note}


def checkpoint_fits_note(system, gpus: int, checkpoint_bytes: float, catalog: Catalog | None = None) -> str:
    """One sentence where a model's checkpoint (its weights and optimizer states, ``checkpoint_bytes`` [bytes]) is
    more than the HBM of ``gpus`` accelerators of ``system``: no training plan of it runs there (the reliability
    estimate reads only the model's size); ``""`` otherwise."""
    from hnplan.formatting import counted
    from hnplan.memory.breakdown import hbm_capacity_bytes

    cat = catalog or load_catalog()
    hbm = gpus * hbm_capacity_bytes(cat.accelerator(cat.system(system).accelerator))
    if checkpoint_bytes <= hbm:
        return ""
    return (
        f"the model's checkpoint alone ({units.to_GB(checkpoint_bytes):,.0f} GB: its weights and optimizer states) is "
        f"more than the {units.to_GB(hbm):,.0f} GB of HBM of {counted(gpus, 'GPU')}: no training plan of it runs there "
        "(hnplan train and memory say what does)"
    )


def whole_unit_gpus(system, gpus: int, catalog: Catalog | None = None) -> int:
    """GPUs of the fewest whole units of ``system`` that hold ``gpus`` (:func:`hnplan.comm.topology.whole_units`):
    what ``hnplan tco`` buys, and ``hnplan reliability``'s default ``--gpus-bought`` (``size``, ``compare`` and
    ``train`` buy the units that hold a plan's scale-up groups whole, :func:`packed_purchase_note`).

    >>> whole_unit_gpus("gb200-nvl72", 16384), whole_unit_gpus("hgx-h100-ib-ndr", 16384)
    (16416, 16384)
    """
    return int(whole_units(_design(system, catalog or load_catalog()), gpus))


def packed_purchase_note(system, gpus: int, gpus_bought: int, catalog: Catalog | None = None) -> str:
    """One sentence where a plan packed as ``size``, ``compare`` and ``train`` pack it needs more units than the
    ``gpus_bought`` a plan-agnostic estimate assumed; ``""`` otherwise. Where a unit's GPUs are not a power of two
    (72 of an NVL72 rack, 384 of a CloudMatrix supernode), a job's scale-up groups of the largest power of two a unit
    holds (64 GPUs: TP x CP or EP x ETP) fit once a unit, so the job needs ``ceil(gpus / 64)`` units
    (:func:`hnplan.planning.job_sizes.packed_units`): 1,024 GB200 GPUs are 15 whole racks, or 16 for such a plan.

    >>> packed_purchase_note("gb200-nvl72", 1024, 1080)[:70]
    'a plan whose scale-up groups are 64 GPUs (TP x CP or EP x ETP, packed '
    >>> packed_purchase_note("hgx-h100-ib-ndr", 1024, 1024)
    ''
    """
    from hnplan.formatting import counted
    from hnplan.planning.job_sizes import packed_units

    sys_ = (catalog or load_catalog()).system(system)
    u = sys_.unit_gpus
    group = 1 << (u.bit_length() - 1)  # the largest power of two a unit holds
    if group == u or gpus < group:
        return ""
    units_packed = packed_units(gpus, u, {"tp": group})
    if units_packed * u <= gpus_bought:
        return ""
    return (
        f"a plan whose scale-up groups are {group} GPUs (TP x CP or EP x ETP, packed {group} to a {u}-GPU unit as "
        f"size, compare and train buy) needs {counted(units_packed, 'unit')} ({units_packed * u:,} GPUs), not the "
        f"{gpus_bought // u:,} whole units that hold {gpus:,}: give --gpus-bought {units_packed * u} for its goodput"
    )


def check_gpus_bought(system, gpus: int, gpus_bought: int, catalog: Catalog | None = None) -> None:
    """Refuse a purchase the job's hot spares cannot come from (``hnplan reliability --gpus-bought``): fewer
    GPUs than the job's, more than one scale-out fabric joins (the idle spares are wired in to stand in for
    failed nodes; :func:`hnplan.comm.topology.max_scaleout_gpus`), or not whole units.

    Raises
    ------
    InputError
        Naming ``gpus_bought`` and its value, and for a count of part units the whole ones either side.
    """
    design = _design(system, catalog or load_catalog())
    if gpus_bought < gpus:
        raise InputError(f"gpus_bought {gpus_bought} must be at least the job's {gpus:,} GPUs")
    if gpus_bought > (most := max_scaleout_gpus(design)) >= gpus:  # (a job over it: the topology says so)
        sw = design.scaleout_switch
        raise InputError(
            f"gpus_bought {gpus_bought} exceeds the most GPUs of {design.system.id} one scale-out fabric joins, "
            f"{most:,} (a 3-tier fat-tree of {sw.ports}-port {sw.id} switches), which the spares must be wired into"
        )
    unit = design.system.unit_gpus
    if gpus_bought % unit:
        whole = [n * unit for n in (gpus_bought // unit, gpus_bought // unit + 1) if gpus <= n * unit <= most]
        raise InputError(
            f"gpus_bought {gpus_bought} is not a whole number of {design.system.id} units ({unit:,} GPUs each); "
            f"give {' or '.join(f'{n:,}' for n in whole)}"
        )


def check_fabric_gpus(system, gpus: int, name: str = "gpus", catalog: Catalog | None = None) -> None:
    """Refuse a GPU count larger than one scale-out fabric of the design joins
    (:func:`hnplan.comm.topology.max_scaleout_gpus`: a 3-tier fat-tree of ``k``-port switches, ``k^3/4``
    ports), naming the count as ``name`` (the flag that gave it: ``--gpus``) and the limit, before any
    bill of materials is drawn.

    >>> check_fabric_gpus("hgx-h100-ib-ndr", 70000, "--gpus")
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: --gpus 70000 exceeds the 65,536 GPUs of hgx-h100-ib-ndr one scale-out fabric joins (a 3-tier fat-tree of 64-port qm9700 switches); give at most 65,536

    Raises
    ------
    InputError
        One line naming ``name``, its value, the system and the limit.
    """
    fabric_check(_design(system, catalog or load_catalog()), gpus, name)


def deployment_time(system, gpus: int, catalog: Catalog | None = None) -> dict:
    """Deployment time of ``gpus`` accelerators of a design derived from its bill of materials
    (:func:`hnplan.deployment.deploy_time` on the resolved design): item counts, technician-hours,
    crew, install and commissioning days and ``deploy_days``."""
    return deploy_time(_design(system, catalog), gpus)


def resolve_utilisation(
    utilisation: float | str | None,
    system: str,
    gpus: int,
    mix: str = "default",
    catalog: Catalog | None = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[float | None, str]:
    """``(value, source)`` of a utilisation input: None stays None (sampled), a number (or its text)
    in (0, 1] is taken as given, ``"simulated"`` runs the cached shared-cluster simulation
    (:func:`simulated_utilisation_cached`, ``progress`` passed on).

    Raises
    ------
    InputError
        For anything else.
    """
    u = parse_utilisation(utilisation)
    if u is None:
        return None, ""
    if isinstance(u, str):  # "simulated"
        sim = simulated_utilisation_cached(system, gpus, mix=mix, catalog=catalog, progress=progress)
        return float(sim["utilisation"]), sim["source"]
    return u, "given"


def parse_utilisation(utilisation: float | str | None) -> float | str | None:
    """A utilisation input checked without simulating: None, ``"simulated"`` (any case, spaces around), or the
    number (or its text) in (0, 1], as :func:`resolve_utilisation` takes it; a report's parameter check calls it
    before any notebook runs.

    Raises
    ------
    InputError
        For anything else (a percentage is named as such: ``85%`` is 0.85).
    """
    if utilisation is None:
        return None
    if isinstance(utilisation, str) and utilisation.strip().lower() == "simulated":
        return "simulated"
    try:
        u = float(utilisation)
    except (TypeError, ValueError):
        pct = str(utilisation).strip().rstrip("%").strip() if str(utilisation).strip().endswith("%") else None
        hint = f" ({pct} % is {float(pct) / 100:g})" if pct and pct.replace(".", "", 1).isdigit() else ""
        raise InputError(f"utilisation must be a number in (0, 1] or 'simulated'{hint}; got {utilisation!r}") from None
    if not 0 < u <= 1:
        hint = f" (a percentage? {u:g} % is {u / 100:g})" if 2 <= u <= 100 else ""  # 1.5: no guess
        raise InputError(f"utilisation must be in (0, 1]{hint}; got {utilisation!r}")
    return u


def simulated_utilisation_cached(system, gpus: int, *, catalog: Catalog | None = None, **kw) -> dict:
    """:func:`hnplan.cluster.utilisation.simulated_utilisation` (same arguments and result) with its runs kept in
    the on-disk cache of predictions (:func:`hnplan.planning.prediction_cache.cached_points`, each run under the
    digest of its key: system, GPUs, mix, length and seed, with the catalog's content hash and the code;
    ``HNPLAN_NO_CACHE=1`` bypasses it): a later process reads a run back in milliseconds."""
    from hnplan.cluster.utilisation import simulated_utilisation
    from hnplan.planning.prediction_cache import run_cache

    cat = catalog or load_catalog()
    return simulated_utilisation(system, gpus, catalog=cat, cache=run_cache(cat), **kw)
