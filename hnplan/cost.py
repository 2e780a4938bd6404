"""Cost model: capex from the bill of materials and dated prices, opex, TCO, unit costs.

* Capex = purchasable units (the GPUs wanted plus any spares) x unit price + the named storage's
  units + scale-out switches and transceivers + facility build cost per MW of (rated) IT power.
* Opex per year = energy + maintenance (a fraction of hardware capex) + optional staff. Energy:
  the cluster trains a fraction ``utilisation`` of the hours at the measured training draw
  (``facility.training_power_fraction`` of rated power) and idles the rest with the accelerators at
  idle power (:meth:`hnplan.power.DesignPower.it_w_at`), both x PUE, at the electricity price.
* TCO = capex + lifetime x opex. $ per GPU-hour = TCO / (GPUs x productive hours x utilisation),
  where productive hours are the lifetime less the deployment time; the capital idle during
  deployment costs ``capex x deploy time / lifetime`` (straight-line depreciation of idle hardware).

Every price and rate comes from ``data/prices.yaml``, ``data/facility.yaml``, ``data/storage/``,
``data/reliability.yaml`` (install rates of the deployment time, :mod:`hnplan.deployment`) or the
system entry, or is an argument.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.comm.topology import scaleout_bom
from hnplan.deployment import deploy_time
from hnplan.errors import InputError
from hnplan.power import _check_fraction, design_power, training_draw_w
from hnplan.storage import storage_capex_usd, storage_usd_per_year


@dataclass(frozen=True)
class DesignCost:
    """Capex and yearly opex of a design [USD], and what they buy."""

    systems_usd: float
    network_usd: float
    facility_usd: float
    energy_usd_per_year: float
    maintenance_usd_per_year: float
    years: float
    staff_usd_per_year: float = 0.0
    gpus: int = 0
    utilisation: float = 1.0
    deploy_s: float = 0.0
    spare_gpus: int = 0
    storage_usd: float = 0.0

    @property
    def capex_usd(self) -> float:
        return self.systems_usd + self.network_usd + self.facility_usd

    @property
    def opex_usd_per_year(self) -> float:
        return self.energy_usd_per_year + self.maintenance_usd_per_year + self.staff_usd_per_year

    @property
    def tco_usd(self) -> float:
        """Capex + opex over the amortisation period."""
        return self.capex_usd + self.years * self.opex_usd_per_year

    @property
    def idle_capital_usd(self) -> float:
        """Capital idle while the cluster is deployed: capex x deploy time / lifetime [USD]."""
        return self.capex_usd * self.deploy_s / units.years_to_s(self.years)

    @property
    def productive_gpu_hours(self) -> float:
        """GPU-hours delivered over the lifetime: (GPUs bought - spares) x (lifetime - deployment) x
        utilisation [h]."""
        working = self.gpus - self.spare_gpus
        return working * units.s_to_hours(units.years_to_s(self.years) - self.deploy_s) * self.utilisation

    @property
    def usd_per_gpu_hour(self) -> float:
        """TCO / productive GPU-hours [USD per GPU-hour]."""
        return self.tco_usd / self.productive_gpu_hours

    def usd_for(self, gpus: int, seconds: float) -> float:
        """Cost of using ``gpus`` for ``seconds`` at :attr:`usd_per_gpu_hour` [USD]."""
        return self.usd_per_gpu_hour * gpus * units.s_to_hours(seconds)

    def usd_per_million_tokens(self, gpus: int, tokens_per_s: float) -> float:
        """Cost of a million tokens trained or served by ``gpus`` at ``tokens_per_s`` [USD per 1e6 tokens].

        ``usd_per_gpu_hour x gpus x (1e6 / tokens_per_s) s``.
        """
        if tokens_per_s <= 0:
            raise InputError(f"tokens_per_s must be > 0; got {tokens_per_s}")
        return self.usd_for(gpus, units.MEGA / tokens_per_s)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(
            capex_usd=self.capex_usd,
            opex_usd_per_year=self.opex_usd_per_year,
            tco_usd=self.tco_usd,
            idle_capital_usd=self.idle_capital_usd,
            usd_per_gpu_hour=self.usd_per_gpu_hour,
        )
        return d


def deploy_days_for(design: Design, gpus: int) -> float:
    """Delivery-to-production time of ``gpus`` accelerators of a design [days]: the system's own
    ``deploy_days`` (a measured figure), else derived from the bill of materials
    (:func:`hnplan.deployment.deploy_time`)."""
    if design.system.deploy_days is not None:
        return design.system.deploy_days
    return deploy_time(design, gpus)["deploy_days"]


def design_cost(
    design: Design,
    gpus: int,
    years: float | None = None,
    pue: float | None = None,
    utilisation: float = 1.0,
    electricity_usd_per_kwh: float | None = None,
    hardware_price_factor: float = 1.0,
    maintenance_fraction: float | None = None,
    dc_build_usd_per_mw: float | None = None,
    staff_usd_per_year: float = 0.0,
    deploy_days: float | None = None,
    spare_gpus: int = 0,
    missing_price_nan: bool = False,
    scaleout: bool = True,
) -> DesignCost:
    """Capex and opex of ``gpus`` accelerators of a system.

    Parameters
    ----------
    design : Design
        The system with its switches, prices and facility defaults
        (:meth:`hnplan.catalog.loader.Catalog.design`).
    gpus : int
        Accelerators wanted (bought in whole units).
    years : float, optional
        Amortisation period [years]; default ``facility.amortisation_years``.
    pue : float, optional
        [ratio]; default by cooling.
    utilisation : float [fraction 0-1]
        Share of the hours the cluster runs jobs (the rest it idles).
    electricity_usd_per_kwh, maintenance_fraction, dc_build_usd_per_mw : float, optional
        Override the facility values [USD/kWh], [fraction of hardware capex per year], [USD/MW].
    hardware_price_factor : float
        Multiplies every system and network price (procurement what-ifs).
    staff_usd_per_year : float
        Operations staff [USD/year], default 0.
    deploy_days : float, optional
        Delivery-to-production time [days]; default :func:`deploy_days_for`.
    spare_gpus : int
        Spare accelerators bought beside ``gpus`` (e.g. :func:`hnplan.reliability.spare_gpus` for a
        target availability): they are paid for and powered, but deliver no GPU-hours.
    missing_price_nan : bool
        A part without a price costs NaN instead of raising, so the costs that do not depend on it
        (energy, facility build, the network when only the system is unpriced) stay numbers and the
        sums that do come out NaN. Default False.
    scaleout : bool
        Buy the scale-out network (default True); False for a deployment whose work never leaves a scale-up
        domain (serving replicas within one server or rack: their units need no backend fabric), its switches and
        transceivers neither bought nor powered.

    Notes
    -----
    The system's ``storage`` (if named) is in the bill of materials: its units
    (:func:`hnplan.storage.units_for`) at ``usd_per_unit`` in the systems capex, at
    ``usd_per_unit_month`` in the opex, and their power in the IT power.

    Returns
    -------
    DesignCost

    Raises
    ------
    CatalogError
        If the system or a BOM part has no price in ``prices.yaml`` (unless ``missing_price_nan``).
    InputError
        For a utilisation outside (0, 1], non-positive years, a negative price factor, or a
        deployment longer than the lifetime.

    Examples
    --------
    Hand-worked: one DGX H100 at PUE 1.0, no maintenance or build cost, training all year.

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> c = design_cost(cat.design("hgx-h100-ib-ndr"), 8, years=1, pue=1.0, maintenance_fraction=0.0,
    ...                 dc_build_usd_per_mw=0.0, electricity_usd_per_kwh=0.10, deploy_days=0.0)
    >>> round(c.energy_usd_per_year)  # (10,200 + 750 switch + 16 x 8 optics) W x 0.76 x 8,766 h x $0.10/kWh
    7380
    """
    _check_fraction("utilisation", utilisation)
    if utilisation == 0:
        raise InputError("utilisation must be > 0 (a cluster that never runs has no cost per GPU-hour)")
    if hardware_price_factor < 0:
        raise InputError(f"hardware_price_factor must be >= 0; got {hardware_price_factor}")
    system, fac = design.system, design.facility
    years = years if years is not None else fac.amortisation_years.value
    if years <= 0:
        raise InputError(f"years must be > 0; got {years}")
    if spare_gpus < 0:
        raise InputError(f"spare_gpus must be >= 0; got {spare_gpus}")
    pw = design_power(design, gpus + spare_gpus, pue, scaleout=scaleout)
    deploy_s = units.days_to_s(deploy_days if deploy_days is not None else deploy_days_for(design, gpus + spare_gpus))
    if deploy_s >= units.years_to_s(years):
        raise InputError(
            f"the lifetime (years, --years: {years:g} years = {units.s_to_days(units.years_to_s(years)):,.1f} days) "
            f"is not longer than the deployment ({units.s_to_days(deploy_s):,.1f} days): give a longer lifetime"
        )
    bom = scaleout_bom(design, pw.units * system.unit_gpus)
    prices = design.prices

    def usd(part: str) -> float:  # the part's price, or NaN for an unpriced part when asked to
        if missing_price_nan and getattr(prices, part) is None:
            return float("nan")
        return prices.usd(part)

    storage = (
        storage_capex_usd(design.storage, pw.storage_units) if design.storage is not None and pw.storage_units else 0.0
    )
    systems = hardware_price_factor * (pw.units * usd("system") + storage)
    # first-order optics: every link end is an OSFP module of the NIC's speed class
    # (hnplan.catalog.design.transceiver_item)
    network = (
        hardware_price_factor * (bom.switches * usd("scaleout_switch") + bom.transceivers * usd("transceiver"))
        if scaleout
        else 0.0
    )
    build = fac.dc_build_usd_per_mw.value if dc_build_usd_per_mw is None else dc_build_usd_per_mw
    facility = units.w_to_mw(pw.it_w) * build
    avg_w = utilisation * training_draw_w(pw, fac) + (1 - utilisation) * pw.it_w_at(0.0) * pw.pue
    kwh_usd = fac.electricity_usd_per_kwh.value if electricity_usd_per_kwh is None else electricity_usd_per_kwh
    energy = units.j_to_kwh(avg_w * units.YEAR) * kwh_usd
    maint = fac.maintenance_fraction_per_year.value if maintenance_fraction is None else maintenance_fraction
    service = (
        storage_usd_per_year(design.storage, pw.storage_units)
        if design.storage is not None and pw.storage_units
        else 0.0
    )
    return DesignCost(
        systems,
        network,
        facility,
        energy,
        maint * (systems + network) + service,
        years,
        staff_usd_per_year,
        pw.units * system.unit_gpus,
        utilisation,
        deploy_s,
        spare_gpus,
        storage,
    )
