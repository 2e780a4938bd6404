"""Cost model: capex from the bill of materials and dated prices, opex, TCO, unit costs.

* Capex = purchasable units x unit price + scale-out switches and transceivers + facility build
  cost per MW of (rated) IT power.
* Opex per year = energy + maintenance (a fraction of hardware capex) + optional staff. Energy:
  the cluster trains a fraction ``utilisation`` of the hours at the measured training draw
  (``facility.training_power_fraction`` of rated power) and idles the rest with the accelerators at
  idle power (:meth:`hnplan.power.DesignPower.it_w_at`), both x PUE, at the electricity price.
* TCO = capex + lifetime x opex. $ per GPU-hour = TCO / (GPUs x productive hours x utilisation),
  where productive hours are the lifetime less the deployment time; the capital idle during
  deployment costs ``capex x deploy time / lifetime`` (straight-line depreciation of idle hardware).

Every price and rate comes from ``data/prices.yaml``, ``data/facility.yaml``,
``data/reliability.yaml`` (default deployment time) or the system entry, or is an argument.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.comm.topology import scaleout_bom
from hnplan.errors import InputError
from hnplan.power import _check_fraction, design_power, training_draw_w


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
        """GPU-hours delivered over the lifetime: GPUs x (lifetime - deployment) x utilisation [h]."""
        return self.gpus * units.s_to_hours(units.years_to_s(self.years) - self.deploy_s) * self.utilisation

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


def deploy_days_for(design: Design) -> float:
    """Delivery-to-production time of one cluster of a design [days]: the system's ``deploy_days``
    or the default in ``reliability.yaml``."""
    if design.system.deploy_days is not None:
        return design.system.deploy_days
    return design.reliability.deploy_days.value


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

    Returns
    -------
    DesignCost

    Raises
    ------
    CatalogError
        If the system or a BOM part has no price in ``prices.yaml``.
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
    deploy_s = units.days_to_s(deploy_days if deploy_days is not None else deploy_days_for(design))
    if deploy_s >= units.years_to_s(years):
        raise InputError(
            f"deployment ({units.s_to_days(deploy_s):.0f} days) is not shorter than the lifetime ({years} years)"
        )
    pw = design_power(design, gpus, pue)
    bom = scaleout_bom(design, pw.units * system.unit_gpus)
    price = design.prices
    systems = hardware_price_factor * pw.units * price.usd("system")
    # first-order optics: every link end is an OSFP module of the NIC's speed class
    # (hnplan.catalog.design.transceiver_item)
    network = hardware_price_factor * (
        bom.switches * price.usd("scaleout_switch") + bom.transceivers * price.usd("transceiver")
    )
    build = fac.dc_build_usd_per_mw.value if dc_build_usd_per_mw is None else dc_build_usd_per_mw
    facility = units.w_to_mw(pw.it_w) * build
    avg_w = utilisation * training_draw_w(pw, fac) + (1 - utilisation) * pw.it_w_at(0.0) * pw.pue
    kwh_usd = fac.electricity_usd_per_kwh.value if electricity_usd_per_kwh is None else electricity_usd_per_kwh
    energy = units.j_to_kwh(avg_w * units.YEAR) * kwh_usd
    maint = fac.maintenance_fraction_per_year.value if maintenance_fraction is None else maintenance_fraction
    return DesignCost(
        systems,
        network,
        facility,
        energy,
        maint * (systems + network),
        years,
        staff_usd_per_year,
        pw.units * system.unit_gpus,
        utilisation,
        deploy_s,
    )
