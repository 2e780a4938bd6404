"""Cost model: capex from the bill of materials and dated prices, opex, TCO (first-order).

Capex = purchasable units x unit price + scale-out switches and transceivers + facility build cost
per MW of IT power. Opex per year = energy at the facility's average draw + maintenance as a fraction
of hardware capex. Every price and rate comes from ``data/prices.yaml`` and ``data/facility.yaml``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import System
from hnplan.comm.topology import scaleout_bom
from hnplan.power import design_power


@dataclass(frozen=True)
class DesignCost:
    """Capex and yearly opex of a design [USD]."""

    systems_usd: float
    network_usd: float
    facility_usd: float
    energy_usd_per_year: float
    maintenance_usd_per_year: float
    years: float

    @property
    def capex_usd(self) -> float:
        return self.systems_usd + self.network_usd + self.facility_usd

    @property
    def opex_usd_per_year(self) -> float:
        return self.energy_usd_per_year + self.maintenance_usd_per_year

    @property
    def tco_usd(self) -> float:
        """Capex + opex over the amortisation period."""
        return self.capex_usd + self.years * self.opex_usd_per_year

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(capex_usd=self.capex_usd, opex_usd_per_year=self.opex_usd_per_year, tco_usd=self.tco_usd)
        return d


def design_cost(system: System, gpus: int, catalog: Catalog | None = None, years: float | None = None,
                pue: float | None = None) -> DesignCost:
    """Capex and opex of ``gpus`` accelerators of a system.

    Raises
    ------
    CatalogError
        If the system has no price in ``prices.yaml``.
    """
    cat = catalog or load_catalog()
    fac = cat.facility
    pw = design_power(system, gpus, cat, pue)
    bom = scaleout_bom(system, pw.units * system.unit_gpus, cat)
    systems = pw.units * cat.price(system.id).usd
    # first-order optics: every link end is an OSFP module of the NIC's speed class
    optic = "transceiver-800g-osfp" if system.nic_gbps > 400 else "transceiver-400g-osfp"
    network = bom.switches * cat.price(bom.switch_model).usd + bom.transceivers * cat.price(optic).usd
    facility = units.w_to_mw(pw.it_w) * fac.dc_build_usd_per_mw.value
    avg_facility_w = pw.facility_w * fac.training_power_fraction.value
    energy = units.j_to_kwh(avg_facility_w * units.YEAR) * fac.electricity_usd_per_kwh.value
    maintenance = fac.maintenance_fraction_per_year.value * (systems + network)
    return DesignCost(systems, network, facility, energy, maintenance,
                      years if years is not None else fac.amortisation_years.value)
