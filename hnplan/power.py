"""Power model: IT power from the bill of materials, an accelerator power curve, facility power
through PUE, racks against a per-rack limit, energy and carbon.

IT power = purchasable units x ``unit_power_kw`` (accelerators at TDP, hosts, NICs and in-domain
scale-up switches, as the system datasheet rates them) + scale-out switches + transceivers counted
by :func:`hnplan.comm.scaleout_bom`. Scale-up switches are inside ``unit_power_kw`` and are not
added again. At an accelerator utilisation ``u`` the accelerators draw
``idle + (TDP - idle) u`` (a linear curve between idle and TDP; the rest of the unit is held at its
rating). Facility power = IT power x PUE ([1]_).

References
----------
.. [1] The Green Grid, "PUE: A Comprehensive Examination of the Metric", White Paper 49, 2012
   (PUE = total facility power / IT equipment power).
.. [2] Newkirk et al., "Empirically-Calibrated H100 Node Power Models for Reducing Uncertainty in AI
   Training Energy Estimation", arXiv:2506.14551 (training draws ~76% of the DGX H100 rating).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.schemas import Accelerator, Facility
from hnplan.comm.topology import scaleout_bom, whole_units
from hnplan.errors import InputError
from hnplan.storage import storage_power_w
from hnplan.storage import units_for as storage_units_for


def _check_fraction(name: str, value) -> None:
    arr = np.asarray(value, dtype=float)
    if np.any((arr < 0) | (arr > 1)) or np.any(np.isnan(arr)):
        raise InputError(f"{name} must lie in [0, 1]; got {value!r}")


def accelerator_idle_w(acc: Accelerator, facility: Facility) -> float:
    """Idle power of one accelerator [W]: its ``idle_w`` or ``facility.accelerator_idle_fraction``
    x TDP (a labelled assumption in ``data/facility.yaml``)."""
    if acc.idle_w is not None:
        return acc.idle_w
    fac = facility
    frac = fac.accelerator_idle_fraction.value if fac.accelerator_idle_fraction is not None else 0.0
    return frac * acc.tdp_w


def accelerator_power_w(acc: Accelerator, utilisation, facility: Facility):
    """Power of one accelerator at a utilisation, linear between idle and TDP [W].

    Parameters
    ----------
    acc : Accelerator
    utilisation : float or array [fraction 0-1]
        Power utilisation (0 idle, 1 at TDP).
    facility : Facility
        For the idle fraction of an accelerator without ``idle_w``.

    Returns
    -------
    float or numpy.ndarray [W], same shape as ``utilisation``.

    Raises
    ------
    InputError
        If ``utilisation`` is outside [0, 1].

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> round(float(accelerator_power_w(cat.accelerator("h100-sxm"), 0.5, cat.facility)), 1)
    385.0
    """
    _check_fraction("utilisation", utilisation)
    idle = accelerator_idle_w(acc, facility)
    return idle + (acc.tdp_w - idle) * np.asarray(utilisation, dtype=float)


@dataclass(frozen=True)
class DesignPower:
    """Rated IT power of a design and its parts [W], racks, and facility power at the PUE.

    ``racks`` is the larger of the space count (``gpus_per_rack``) and the power count (compute IT
    power / the facility's per-rack limit for the system's cooling).
    """

    gpus: int
    units: int
    racks: int
    compute_w: float
    network_w: float
    pue: float
    accel_tdp_w: float = 0.0
    accel_idle_w: float = 0.0
    racks_by_space: int = 0
    racks_by_power: int = 0
    rack_limit_w: float = math.inf
    storage_units: int = 0
    storage_w: float = 0.0
    gpus_bought: int = 0

    @property
    def it_w(self) -> float:
        """Rated IT power (compute + scale-out network + the named storage's units) [W]."""
        return self.compute_w + self.network_w + self.storage_w

    @property
    def facility_w(self) -> float:
        """Facility power = IT power x PUE ([1]_) [W]."""
        return self.it_w * self.pue

    @property
    def kw_per_rack(self) -> float:
        """Compute IT power per rack [kW]."""
        return units.w_to_kw(self.compute_w) / self.racks

    @property
    def over_rack_limit(self) -> bool:
        """True when one node alone exceeds the per-rack limit (the facility cannot host the design)."""
        return self.kw_per_rack > units.w_to_kw(self.rack_limit_w) * (1 + 1e-9)

    def it_w_at(self, utilisation):
        """IT power with the accelerators at a utilisation on the idle-TDP line [W] (float or array)."""
        _check_fraction("utilisation", utilisation)
        u = np.asarray(utilisation, dtype=float)
        out = self.it_w - (self.accel_tdp_w - self.accel_idle_w) * (1.0 - u)
        return float(out) if out.ndim == 0 else out

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(
            it_w=self.it_w,
            facility_w=self.facility_w,
            kw_per_rack=self.kw_per_rack,
            over_rack_limit=self.over_rack_limit,
        )
        return d


def pue_for(design: Design) -> float:
    """The facility default PUE for the system's cooling (``pue_liquid`` or ``pue_air``) [ratio]."""
    return design.pue


def rack_limit_w(design: Design) -> float:
    """Per-rack IT power limit of the facility for the system's cooling [W] (inf if not set)."""
    kw = design.rack_limit_kw
    return math.inf if kw is None else units.kw_to_w(kw)


def design_power(
    design: Design, gpus: int, pue: float | None = None, rack_limit_kw: float | None = None, *, scaleout: bool = True
) -> DesignPower:
    """Rated IT power of ``gpus`` accelerators of a system with their scale-out network (``scaleout=False``: without
    it, for a deployment whose work never leaves a scale-up domain, as serving replicas within one server or rack).

    Parameters
    ----------
    design : Design
        The system with its switches, fabrics and facility defaults
        (:meth:`hnplan.catalog.loader.Catalog.design`).
    gpus : int
        Accelerators wanted; bought in whole units (``ceil(gpus / unit_gpus)``).
    pue : float, optional
        Facility PUE [ratio >= 1]; default by cooling from ``facility.yaml``.
    rack_limit_kw : float, optional
        Per-rack IT limit [kW]; default by cooling from ``facility.yaml``.

    Returns
    -------
    DesignPower

    Raises
    ------
    InputError
        For ``gpus < 1``, ``pue < 1`` or a non-positive rack limit.

    Notes
    -----
    Compute: units x ``unit_power_kw`` (hosts, NICs and scale-up switches included). Network:
    scale-out switches x their power + transceivers x the fabric's ``transceiver_w``. Storage: the
    units of the system's ``storage`` (:func:`hnplan.storage.units_for`) x ``power_w_per_unit``.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> p = design_power(cat.design("gb200-nvl72"), 72)
    >>> p.units, p.racks, round(p.compute_w / 1e3)
    (1, 1, 132)
    """
    if gpus < 1:
        raise InputError(f"gpus must be >= 1; got {gpus}")
    if pue is not None and pue < 1:
        raise InputError(f"pue must be >= 1 (facility power / IT power); got {pue}")
    if rack_limit_kw is not None and rack_limit_kw <= 0:
        raise InputError(f"rack_limit_kw must be > 0; got {rack_limit_kw}")
    system = design.system
    bought = whole_units(design, gpus)
    n_units = bought // system.unit_gpus
    bom = scaleout_bom(design, bought)
    sw, fabric, acc = design.scaleout_switch, design.scaleout_fabric, design.accelerator
    network = (bom.switches * sw.power_w + bom.transceivers * (fabric.transceiver_w or 0.0)) if scaleout else 0.0
    compute = units.kw_to_w(n_units * system.unit_power_kw)
    limit = units.kw_to_w(rack_limit_kw) if rack_limit_kw is not None else rack_limit_w(design)
    by_space = math.ceil(bought / system.gpus_per_rack)
    # power-limited racks hold whole nodes: a rack takes floor(limit / node power) nodes
    node_w = compute / (bought / system.node_gpus)
    nodes_per_rack = max(1, math.floor(limit / node_w)) if math.isfinite(limit) else math.inf
    by_power = math.ceil((bought / system.node_gpus) / nodes_per_rack) if math.isfinite(limit) else 0
    return DesignPower(
        gpus=gpus,
        units=n_units,
        racks=max(by_space, by_power),
        compute_w=compute,
        network_w=network,
        pue=pue if pue is not None else design.pue,
        accel_tdp_w=bought * acc.tdp_w,
        accel_idle_w=bought * accelerator_idle_w(acc, design.facility),
        racks_by_space=by_space,
        racks_by_power=by_power,
        rack_limit_w=limit,
        storage_units=(n_sto := storage_units_for(design, bought)),
        storage_w=storage_power_w(design.storage, n_sto) if design.storage is not None else 0.0,
        gpus_bought=bought,
    )


def energy_j(power_w, seconds):
    """Energy of a constant power over a duration [J] (floats or arrays)."""
    return np.multiply(power_w, seconds) if isinstance(power_w, np.ndarray) else power_w * seconds


def training_draw_w(power: DesignPower, facility: Facility, training_gpus: int | None = None) -> float:
    """Average facility power of a purchase while a job trains on ``training_gpus`` of its GPUs [W].

    The whole purchase draws: its rated facility power x the measured ``facility.training_power_fraction``
    ([2]_), less, for each GPU bought that does not train (the rest of a whole rack or server), the
    difference between its share of that draw (fraction x TDP x PUE) and its idle power x PUE
    (:func:`accelerator_idle_w`: the catalog's ``idle_w``, or the facility's labelled idle fraction of
    TDP). Hosts, NICs, switches and storage of the purchase stay at the training draw. ``hnplan size`` and
    ``hnplan compare`` both count energy this way.

    Parameters
    ----------
    power : DesignPower
        The purchase (:func:`design_power`; ``gpus_bought`` whole units' GPUs).
    facility : Facility
    training_gpus : int, optional
        GPUs the job runs on, 1 to ``power.gpus_bought``; default all of them.

    Returns
    -------
    float [W]

    Raises
    ------
    InputError
        If ``training_gpus`` is outside 1 .. ``power.gpus_bought``.
    """
    f = facility.training_power_fraction.value
    draw = power.facility_w * f
    if training_gpus is None or not power.gpus_bought:
        return draw
    if not 1 <= training_gpus <= power.gpus_bought:
        raise InputError(f"training_gpus must lie in 1..{power.gpus_bought} (GPUs bought); got {training_gpus}")
    idle = power.gpus_bought - training_gpus
    per_gpu_tdp_w = power.accel_tdp_w / power.gpus_bought
    per_gpu_idle_w = power.accel_idle_w / power.gpus_bought
    return draw - idle * max(0.0, f * per_gpu_tdp_w - per_gpu_idle_w) * power.pue


def run_energy(
    power: DesignPower,
    seconds: float,
    facility: Facility,
    tokens: float | None = None,
    gco2_per_kwh: float | None = None,
    training_gpus: int | None = None,
) -> dict:
    """Facility energy and carbon of a training run (or serving period) at the training draw
    (:func:`training_draw_w`: every GPU bought, those that do not train at their idle power).

    Parameters
    ----------
    power : DesignPower
    seconds : float [s]
        Wall time of the run.
    facility : Facility
        For the training draw and the default grid intensity (``Design.facility``).
    tokens : float, optional
        Tokens processed, for the energy per million tokens.
    gco2_per_kwh : float, optional
        Grid carbon intensity [gCO2/kWh]; default ``facility.grid_gco2_per_kwh``.
    training_gpus : int, optional
        GPUs the job runs on (default every GPU of the purchase); the others idle.

    Returns
    -------
    dict
        ``energy_j``, ``energy_mwh``, ``co2_t`` (tonnes) and, with ``tokens``,
        ``kwh_per_million_tokens``.

    Raises
    ------
    InputError
        For ``seconds < 0`` or ``training_gpus`` outside 1 .. ``power.gpus_bought``.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> p = design_power(cat.design("hgx-h100-ib-ndr"), 8, pue=1.0)
    >>> e = run_energy(p, 3600.0, cat.facility, gco2_per_kwh=400.0)
    >>> round(e["energy_mwh"] * 1e3, 3) == round(p.it_w * 0.76 / 1e3, 3)
    True
    """
    if seconds < 0:
        raise InputError(f"seconds must be >= 0; got {seconds}")
    e = energy_j(training_draw_w(power, facility, training_gpus), seconds)
    g = facility.grid_gco2_per_kwh.value if gco2_per_kwh is None else gco2_per_kwh
    out = {"energy_j": e, "energy_mwh": units.j_to_mwh(e), "co2_t": units.j_to_kwh(e) * g / units.MEGA}
    if tokens:
        out["kwh_per_million_tokens"] = units.j_to_kwh(e) / (tokens / units.MEGA)
    return out
