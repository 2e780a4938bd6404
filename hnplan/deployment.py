"""Deployment time of a design from its bill of materials.

The items a crew installs on site for ``gpus`` accelerators:

* ``rack``: racks placed, levelled and powered (:func:`hnplan.power.design_power`'s rack count);
* ``coolant-loop``: one manifold connection, fill and leak test per liquid-cooled rack;
* ``system-unit``: purchasable units racked and connected (a server, or a factory-integrated rack
  such as an NVL72), plus the units of the system's storage;
* ``cable`` and ``transceiver``: the scale-out links (:func:`hnplan.comm.scaleout_bom`: one cable
  and two optical modules per link), and the system's ``scaleup_field_links_per_domain`` per
  scale-up domain (a domain cabled on site between racks, e.g. CloudMatrix 384's optical UB links;
  a domain inside one rack is cabled in the factory, through a backplane or a copper spine);
* ``switch``: scale-out switches, and the scale-up switches of a domain cabled on site.

``technician-hours = sum_item count x install_hours[item]``; crews work in parallel, sized by the
IT power (``install_technicians_per_mw``, at least one technician) for ``install_shift_hours_per_day``;
then burn-in and acceptance take ``commission_days``::

    deploy_days = technician-hours / (technicians x shift hours per day) + commission_days

The rates are in ``data/reliability.yaml`` with their provenance. A system's own ``deploy_days``
(a measured figure) overrides the derivation in :func:`hnplan.cost.deploy_days_for`.
"""

from __future__ import annotations

import math

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.comm.topology import scaleout_bom, scaleup_bom
from hnplan.errors import CatalogError
from hnplan.power import design_power

ITEMS = ("rack", "coolant-loop", "system-unit", "cable", "transceiver", "switch")


def install_items(design: Design, gpus: int) -> dict:
    """Items installed on site for ``gpus`` accelerators (see the module docstring), by item kind."""
    system = design.system
    pw = design_power(design, gpus)
    bought = pw.units * system.unit_gpus
    out = scaleout_bom(design, bought)
    cables, transceivers, switches = out.cables, out.transceivers, out.switches
    if system.scaleup_field_links_per_domain:  # a domain across racks is cabled on site
        up = scaleup_bom(design, bought)
        links = up.domains * system.scaleup_field_links_per_domain
        cables += links
        if design.scaleup_fabric.transceiver_w is not None:  # optical scale-up: a module per link end
            transceivers += 2 * links
        switches += up.switches
    return {
        "rack": pw.racks,
        "coolant-loop": pw.racks if system.cooling == "liquid" else 0,
        "system-unit": pw.units + pw.storage_units,
        "cable": cables,
        "transceiver": transceivers,
        "switch": switches,
    }


def deploy_time(design: Design, gpus: int) -> dict:
    """Deployment time of ``gpus`` accelerators of a design, derived from its bill of materials.

    Returns
    -------
    dict
        ``items`` (counts by kind), ``technician_hours`` by kind and ``technician_hours_total`` [h],
        ``technicians``, ``install_days``, ``commission_days`` and ``deploy_days`` [days].

    Raises
    ------
    CatalogError
        When ``reliability.yaml`` lacks an install rate, the crew size or the commissioning time.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> d = deploy_time(load_catalog().design("hgx-h100-ib-ndr"), 1024)
    >>> d["items"]["system-unit"], d["items"]["cable"]
    (128, 2048)
    """
    rel = design.reliability
    missing = [i for i in ITEMS if i not in rel.install_hours]
    for name in ("install_technicians_per_mw", "install_shift_hours_per_day", "commission_days"):
        if getattr(rel, name) is None:
            missing.append(name)
    if missing:
        raise CatalogError(
            f"reliability.yaml: no {', '.join(missing)} (install_hours per item, crew and commissioning) "
            "to derive the deployment time",
            entry=rel.id,
            field="install_hours",
        )
    items = install_items(design, gpus)
    hours = {k: n * rel.install_hours[k].value for k, n in items.items()}
    total = sum(hours.values())
    it_mw = units.w_to_mw(design_power(design, gpus).it_w)
    techs = max(1, math.ceil(it_mw * rel.install_technicians_per_mw.value))  # type: ignore[union-attr]
    install_days = total / (techs * rel.install_shift_hours_per_day.value)  # type: ignore[union-attr]
    commission = rel.commission_days.value  # type: ignore[union-attr]
    return {
        "items": items,
        "technician_hours": hours,
        "technician_hours_total": total,
        "technicians": techs,
        "install_days": install_days,
        "commission_days": commission,
        "deploy_days": install_days + commission,
    }
