"""A design: one system with everything the cost models need, resolved from the catalog once.

A :class:`~hnplan.catalog.schemas.System` entry holds ids (its accelerator, fabrics, switches); a
:class:`Design` holds the entries themselves, the facility, reliability and memory defaults the power,
cost and reliability models read, and the prices of the parts the cost model counts. Cost models
(``hnplan.comm``, ``hnplan.power``, ``hnplan.cost``, ``hnplan.reliability``, ``hnplan.memory``) take a
Design and numbers and never look anything up; only the planners hold a
:class:`~hnplan.catalog.loader.Catalog`.

Get one with :meth:`hnplan.catalog.loader.Catalog.design` (by system id, file path or entry; cached per
catalog and system, so repeated calls are cheap)::

    >>> from hnplan.catalog import load_catalog
    >>> d = load_catalog().design("gb200-nvl72")
    >>> d.accelerator.id, d.scaleup_fabric.id, d.scaleout_switch.ports
    ('gb200', 'nvlink5', 64)

Figures that depend on the number of accelerators (the scale-out and scale-up bills of materials, the
per-rank links) are computed by :mod:`hnplan.comm.topology` and memoised on the Design per GPU count
(:meth:`Design.memo`), so a planner that places many groups builds each fat-tree once. The catalog
layer imports no physics: the Design only stores what the cost models computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from hnplan.catalog.schemas import (
    Accelerator,
    Facility,
    Interconnect,
    MemoryOverheads,
    Price,
    Reliability,
    Storage,
    Switch,
    System,
)
from hnplan.errors import CatalogError

V = TypeVar("V")

#: the price items the cost model reads (:func:`hnplan.cost.design_cost`): one system unit, one scale-out
#: switch, one optical transceiver of the NIC's speed class (first-order optics: every link end is an OSFP module)
PRICE_PARTS = ("system", "scaleout_switch", "transceiver")


def transceiver_item(system: System) -> str:
    """The price item of one scale-out optical module for the system's NIC speed: 800G OSFP above
    400 Gb/s, else 400G OSFP (``data/prices.yaml``)."""
    return "transceiver-800g-osfp" if system.nic_gbps > 400 else "transceiver-400g-osfp"


@dataclass(frozen=True)
class DesignPrices:
    """Dated prices of the parts a design's cost counts; ``None`` where ``prices.yaml`` has none.

    Attributes
    ----------
    system, scaleout_switch, transceiver : Price or None
        One purchasable unit of the system, one scale-out switch, one optical module [USD each].
    missing : dict
        Part -> the catalog's message naming the missing item and the nearest priced ones.
    """

    system: Price | None
    scaleout_switch: Price | None
    transceiver: Price | None
    missing: dict = field(default_factory=dict, compare=False)

    def usd(self, part: str) -> float:
        """Price of one ``part`` (one of :data:`PRICE_PARTS`) [USD].

        Raises
        ------
        CatalogError
            When ``prices.yaml`` has no entry for it (the message names the item and the nearest ones).
        """
        p = getattr(self, part)
        if p is None:
            raise CatalogError(self.missing[part], entry=part)
        return p.usd


@dataclass(frozen=True, eq=False)
class Design:
    """A system and everything it refers to, resolved once (see the module docstring).

    Attributes
    ----------
    system : System
        The system entry (node, scale-up domain, NICs, power per unit, storage, reliability fields).
    accelerator : Accelerator
    scaleup_fabric, scaleout_fabric : Interconnect
        The scale-up (NVLink, UB, ...) and scale-out (InfiniBand, RoCE) link technologies.
    scaleout_switch : Switch
        The scale-out network's switch (radix ``ports`` at ``port_gbps`` [Gb/s]).
    scaleup_switch : Switch or None
        The scale-up domain's switch chip, if the system names one.
    source : str
        Where the system came from: its catalog id, or the path of the YAML file it was read from.
    storage : Storage or None
        The file system or object store the system names (``storage``), if any.

    The prices (:attr:`prices`), the facility (PUE, electricity, rack limits, idle fraction, training
    draw), reliability (failure rates, storage and restart defaults) and memory-overhead entries are
    properties resolved on first use, once (a topology or collective question never parses
    ``prices.yaml``); they raise the catalog's own :class:`~hnplan.errors.CatalogError` when the data
    folder lacks the file.
    """

    system: System
    accelerator: Accelerator
    scaleup_fabric: Interconnect
    scaleout_fabric: Interconnect
    scaleout_switch: Switch
    scaleup_switch: Switch | None
    source: str = ""
    storage: Storage | None = None
    _lookups: dict = field(default_factory=dict, repr=False)
    _resolved: dict = field(default_factory=dict, repr=False)
    _memo: dict = field(default_factory=dict, repr=False)

    def __hash__(self) -> int:
        return id(self)

    @property
    def id(self) -> str:
        """The system's id."""
        return self.system.id

    def _default(self, name: str):
        if name not in self._resolved:
            self._resolved[name] = self._lookups[name]()
        return self._resolved[name]

    @property
    def prices(self) -> DesignPrices:
        """Prices of one system unit, one scale-out switch and one optical module (``prices.yaml``)."""
        return self._default("prices")

    @property
    def facility(self) -> Facility:
        """Facility and finance defaults (``facility.yaml``)."""
        return self._default("facility")

    @property
    def reliability(self) -> Reliability:
        """Failure rates and checkpoint/restart defaults (``reliability.yaml``)."""
        return self._default("reliability")

    @property
    def memory_overheads(self) -> MemoryOverheads:
        """Runtime memory overheads and serving defaults (``memory.yaml``)."""
        return self._default("memory_overheads")

    # -- storage -----------------------------------------------------------------------------
    @property
    def storage_write_GBps_per_node(self) -> float:
        """Checkpoint write bandwidth of one node [GB/s]: the system's figure, else the
        ``reliability.yaml`` default scaled to the system's node (:attr:`storage_node_scale`)."""
        own = self.system.storage_write_GBps_per_node
        return own or self.reliability.storage_write_GBps_per_node.value * self.storage_node_scale

    @property
    def storage_read_GBps_per_node(self) -> float:
        """Checkpoint read bandwidth of one node [GB/s] (``reliability.yaml``, scaled to the system's node
        as :attr:`storage_node_scale`)."""
        return self.reliability.storage_read_GBps_per_node.value * self.storage_node_scale

    @property
    def storage_node_scale(self) -> float:
        """``node_gpus`` over the GPUs per node of the cluster ``reliability.yaml``'s per-node storage figures
        come from (``storage_node_gpus``; 1 when it names none): that storage, sized per GPU, gives a 4-GPU
        GB200 tray half of what an 8-GPU server gets [ratio]."""
        ref = self.reliability.storage_node_gpus
        return self.system.node_gpus / ref.value if ref is not None else 1.0

    # -- facility figures by cooling -----------------------------------------------------------
    @property
    def pue(self) -> float:
        """The facility's default PUE for the system's cooling (``pue_liquid`` or ``pue_air``) [ratio]."""
        fac = self.facility
        return (fac.pue_liquid if self.system.cooling == "liquid" else fac.pue_air).value

    @property
    def rack_limit_kw(self) -> float | None:
        """The facility's per-rack IT power limit for the system's cooling [kW]; None when not set."""
        fac = self.facility
        sv = fac.rack_limit_kw_liquid if self.system.cooling == "liquid" else fac.rack_limit_kw_air
        return None if sv is None else sv.value

    # -- figures per GPU count, computed by the cost models ---------------------------------------
    def memo(self, key: tuple, compute: Callable[[], V]) -> V:
        """The value stored under ``key``, computing and storing it on first use.

        Used by :mod:`hnplan.comm.topology` for the bills of materials and links per GPU count; the
        values are frozen dataclasses, so sharing them is safe.
        """
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value


def _own_price(system: System) -> Price | None:
    """The system file's own unit price (``unit_price_usd``) as a Price entry, or None."""
    if system.unit_price_usd is None:
        return None
    import datetime as _dt

    why = system.field_sources.get("unit_price_usd") or system.assumptions.get("unit_price_usd")
    return Price(
        id=f"{system.id}-unit",
        name=f"one unit of {system.name}",
        item=system.id,
        kind="system-unit",
        usd=system.unit_price_usd,
        per="unit",
        as_of=_dt.date.today(),
        source=why or system.source,
        assumption="unit_price_usd" in system.assumptions,
    )


def _prices(
    system: System, price: Callable[[str], Price], source: str = "", get: Callable[[str, Any], Any] | None = None
) -> DesignPrices:
    """The design's price items; a missing one is recorded (costs read n/a with the reason), except a
    ``price_item`` the system names, which is bad input (a typo must not turn every cost into n/a), as is
    a ``price_item`` naming a catalog system of another unit size (its price buys that system's unit: an
    8-GPU server's price for a 72-GPU rack would cost the rack as 8 GPUs).

    Raises
    ------
    CatalogError
        If ``price_item`` is given and ``prices.yaml`` has no price for it, or it names a system whose
        ``unit_gpus`` differs.
    """
    found: dict[str, Price | None] = {}
    missing: dict[str, str] = {}
    own = _own_price(system)
    items = (system.price_item or system.id, system.scaleout_switch, transceiver_item(system))
    for part, item in zip(PRICE_PARTS, items, strict=True):
        if part == "system" and own is not None:
            found[part] = own
            continue
        try:
            found[part] = price(item)
        except CatalogError as exc:
            if part == "system" and system.price_item is not None:
                where = f"{source}: " if source not in ("", "(entry)", system.id) else ""
                raise CatalogError(
                    f"{where}system {system.id!r}, field 'price_item': {exc}",
                    path=source if where else None,
                    entry=system.id,
                    field="price_item",
                ) from exc
            found[part], missing[part] = None, str(exc)
            if part == "system":
                missing[part] += (
                    "; give the system file its own unit_price_usd [USD per unit], or price_item: "
                    "the id of a priced system it costs the same as"
                )
    if own is None and system.price_item is not None and get is not None:
        try:
            priced = get("systems", system.price_item)
        except CatalogError:  # an item of prices.yaml that is no catalog system: its unit is not known here
            priced = None
        if priced is not None and priced.unit_gpus != system.unit_gpus:
            where = f"{source}: " if source not in ("", "(entry)", system.id) else ""
            raise CatalogError(
                f"{where}system {system.id!r}, field 'price_item': {system.price_item!r} is priced per unit of "
                f"{priced.unit_gpus} GPUs, this system's unit is {system.unit_gpus}; name a priced system of "
                f"{system.unit_gpus}-GPU units, or give the file its own unit_price_usd [USD per unit]",
                path=source if where else None,
                entry=system.id,
                field="price_item",
            )
    return DesignPrices(found["system"], found["scaleout_switch"], found["transceiver"], missing)


def resolve_design(
    system: System,
    get: Callable[[str, Any], Any],
    price: Callable[[str], Price],
    defaults: Callable[[str], Any],
    source: str,
) -> Design:
    """Build a :class:`Design` from a system entry with the catalog's lookups (used by
    :meth:`hnplan.catalog.loader.Catalog.design`; references must already be checked). The entries
    are looked up now; the prices and the facility, reliability and memory defaults on first use."""
    lookups: dict[str, Callable[[], Any]] = {
        "prices": partial(_prices, system, price, source, get),
        **{name: partial(defaults, name) for name in ("facility", "reliability", "memory_overheads")},
    }
    return Design(
        system=system,
        accelerator=get("accelerators", system.accelerator),
        scaleup_fabric=get("interconnects", system.scaleup_fabric),
        scaleout_fabric=get("interconnects", system.scaleout_fabric),
        scaleout_switch=get("switches", system.scaleout_switch),
        scaleup_switch=get("switches", system.scaleup_switch) if system.scaleup_switch else None,
        source=source,
        storage=get("storage", system.storage) if system.storage else None,
        _lookups=lookups,
    )
