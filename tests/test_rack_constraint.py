"""The sizing table names what sets a purchase's rack count: the per-rack power limit or the rack's space."""

from hnplan.catalog import load_catalog
from hnplan.planning.design import purchase_fields


def _fields(system, gpus):
    cat = load_catalog()
    return purchase_fields(cat.design(cat.system(system)), gpus, 1.0)


def test_128_h100_take_six_racks_by_power_not_four_by_space():
    # by hand: an HGX H100 server is rated 10.2 kW (unit_power_kw); an air-cooled rack takes 40 kW (the facility's
    # per-rack limit), so floor(40 / 10.2) = 3 servers a rack and 16 servers need ceil(16 / 3) = 6 racks, where the
    # rack's 32 GPU slots alone would need 128 / 32 = 4
    f = _fields("hgx-h100-ib-ndr", 128)
    assert f["racks"] == 6
    assert f["racks_bound_by"] == "power: 40 kW a rack, 3 servers of 10.2 kW"


def test_whole_nvl72_racks_are_bound_by_space():
    # a GB200 NVL72 rack is one 72-GPU unit, 132 kW within its liquid-cooled 140 kW: 144 GPUs are 2 racks by space
    f = _fields("gb200-nvl72", 144)
    assert f["racks"] == 2
    assert f["racks_bound_by"] == "space: 72 GPUs a rack"
