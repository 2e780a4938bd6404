"""Catalog.design: one resolved object per system, its cached bills of materials, and the errors."""

import pytest

from hnplan.catalog import Catalog, Design
from hnplan.catalog.loader import DEFAULT_DATA_DIR
from hnplan.comm.placement import place_group
from hnplan.comm.topology import scaleout_bom, scaleup_bom, system_links
from hnplan.cost import design_cost
from hnplan.errors import CatalogError


def test_design_by_id_resolves_every_reference(cat):
    d = cat.design("gb200-nvl72")
    s = cat.system("gb200-nvl72")
    assert isinstance(d, Design) and d.system is s and d.id == "gb200-nvl72"
    assert d.accelerator is cat.accelerator(s.accelerator)
    assert d.scaleup_fabric is cat.interconnect(s.scaleup_fabric)
    assert d.scaleout_fabric is cat.interconnect(s.scaleout_fabric)
    assert d.scaleout_switch is cat.switch(s.scaleout_switch)
    assert d.scaleup_switch is (cat.switch(s.scaleup_switch) if s.scaleup_switch else None)
    assert d.facility is cat.facility and d.reliability is cat.reliability
    assert d.memory_overheads is cat.memory_overheads
    # liquid-cooled: the facility's liquid PUE and rack limit
    assert d.pue == cat.facility.pue_liquid.value
    assert d.rack_limit_kw == cat.facility.rack_limit_kw_liquid.value
    # storage: the system's own write figure or the reliability default, which is Llama 3's 0.65 GB/s per
    # 8-GPU server, the same per GPU on a 4-GPU GB200 tray: 0.65 x 4 / 8 = 0.325 GB/s; reads likewise
    assert s.storage_write_GBps_per_node is None and s.node_gpus == 4
    assert cat.reliability.storage_node_gpus.value == 8
    assert d.storage_write_GBps_per_node == pytest.approx(0.65 * 4 / 8)
    assert d.storage_read_GBps_per_node == pytest.approx(0.65 * 4 / 8)
    h100 = cat.design("hgx-h100-ib-ndr")  # 8-GPU servers: the figure as derived
    assert h100.storage_write_GBps_per_node == pytest.approx(0.65)
    assert d.prices.usd("system") == cat.price("gb200-nvl72").usd


def test_design_is_cached_per_catalog_and_system(cat):
    d = cat.design("hgx-h100-ib-ndr")
    assert cat.design("hgx-h100-ib-ndr") is d
    assert cat.design(cat.system("hgx-h100-ib-ndr")) is d  # the catalog's own entry
    assert cat.design(d) is d
    # a modified entry is a different design
    other = cat.design(cat.system("hgx-h100-ib-ndr").model_copy(update={"nic_gbps": 200}))
    assert other is not d and other.system.nic_gbps == 200


def test_design_by_path(cat, tmp_path):
    path = DEFAULT_DATA_DIR / "systems" / "dgx-a100-hdr.yaml"
    d = cat.design(str(path))
    assert d.id == "dgx-a100-hdr" and d.accelerator.id == cat.system("dgx-a100-hdr").accelerator
    assert cat.design(str(path)) is d
    own = tmp_path / "my-system.yaml"
    own.write_text(path.read_text().replace("id: dgx-a100-hdr", "id: my-system"))
    mine = cat.design(str(own))
    assert mine.id == "my-system" and mine.source == str(own)
    assert mine.prices.system is None  # no price entry: the cost model says so when asked
    with pytest.raises(CatalogError, match="no price for 'my-system'"):
        design_cost(mine, 8)


def test_bad_id_gives_the_nearest_ids(cat):
    with pytest.raises(CatalogError, match="unknown system id 'gb200-nvl7'; nearest: gb200-nvl72"):
        cat.design("gb200-nvl7")


@pytest.mark.parametrize("sid", ["gb200-nvl72", "hgx-h100-ib-ndr", "hgx-h100-roce-400g", "seed-40card"])
@pytest.mark.parametrize("gpus", [64, 72, 1152, 16384])
def test_cached_bom_equals_a_fresh_computation(cat, sid, gpus):
    d = cat.design(sid)
    first = scaleout_bom(d, gpus)
    assert scaleout_bom(d, gpus) is first  # memoised per GPU count
    fresh = Catalog(DEFAULT_DATA_DIR).design(sid)  # a new catalog: nothing cached
    assert fresh is not d
    assert first == scaleout_bom(fresh, gpus)
    assert scaleup_bom(d, gpus) == scaleup_bom(fresh, gpus)
    assert system_links(d, gpus=gpus) == system_links(fresh, gpus=gpus)
    assert place_group(d, 8, 8, gpus) == place_group(fresh, 8, 8, gpus)


def test_missing_facility_file_is_reported_when_needed(tmp_path):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, root)
    (root / "facility.yaml").unlink()
    d = Catalog(root).design("hgx-h100-ib-ndr")  # the topology needs no facility
    assert scaleout_bom(d, 128).tiers == 2  # 16 nodes x 8 NICs = 128 ports > one 64-port switch
    with pytest.raises(CatalogError, match="facility.yaml: file not found"):
        _ = d.pue
