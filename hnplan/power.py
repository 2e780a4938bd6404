"""Power model: IT power from the bill of materials, facility power through PUE, energy.

References
----------
.. [1] The Green Grid, "PUE: A Comprehensive Examination of the Metric", White Paper 49, 2012
   (PUE = total facility power / IT equipment power).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import System
from hnplan.comm.topology import scaleout_bom


@dataclass(frozen=True)
class DesignPower:
    """Rated IT power of a design and its parts [W], racks, and facility power at the PUE."""

    gpus: int
    units: int
    racks: int
    compute_w: float
    network_w: float
    pue: float

    @property
    def it_w(self) -> float:
        return self.compute_w + self.network_w

    @property
    def facility_w(self) -> float:
        """Facility power = IT power x PUE ([1]_) [W]."""
        return self.it_w * self.pue

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(it_w=self.it_w, facility_w=self.facility_w)
        return d


def pue_for(system: System, catalog: Catalog | None = None) -> float:
    """The facility default PUE for the system's cooling (``pue_liquid`` or ``pue_air``)."""
    fac = (catalog or load_catalog()).facility
    return (fac.pue_liquid if system.cooling == "liquid" else fac.pue_air).value


def design_power(system: System, gpus: int, catalog: Catalog | None = None, pue: float | None = None) -> DesignPower:
    """Rated IT power of ``gpus`` accelerators of a system with their scale-out network.

    Compute: purchasable units (``ceil(gpus / unit_gpus)``) x ``unit_power_kw`` (hosts, NICs and
    scale-up switches included). Network: scale-out switches x their power plus transceivers x the
    fabric's ``transceiver_w``.
    """
    cat = catalog or load_catalog()
    n_units = math.ceil(gpus / system.unit_gpus)
    bom = scaleout_bom(system, n_units * system.unit_gpus, cat)
    sw = cat.switch(bom.switch_model)
    fabric = cat.interconnect(system.scaleout_fabric)
    network = bom.switches * sw.power_w + bom.transceivers * (fabric.transceiver_w or 0.0)
    return DesignPower(
        gpus=gpus,
        units=n_units,
        racks=math.ceil(n_units * system.unit_gpus / system.gpus_per_rack),
        compute_w=units.kw_to_w(n_units * system.unit_power_kw),
        network_w=network,
        pue=pue if pue is not None else pue_for(system, cat),
    )


def energy_j(power_w: float, seconds: float) -> float:
    """Energy of a constant power over a duration [J]."""
    return power_w * seconds
