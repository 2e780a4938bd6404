"""Deployment time from the bill of materials (hnplan.deployment): hand-worked counts and hours."""

import pytest

from hnplan.deployment import deploy_time, install_items


def test_hand_worked_hgx_h100_400_gpus(cat):
    d = deploy_time(cat.design("hgx-h100-ib-ndr"), 400)
    items = d["items"]
    # 50 servers of 8 GPUs; 400 NIC links + 400 leaf-to-spine links of a non-blocking 2-tier fat-tree,
    # one cable and two optical modules each; air-cooled: no coolant loops
    assert items["system-unit"] == 50 and items["cable"] == 800 and items["transceiver"] == 1600
    assert items["coolant-loop"] == 0
    # hours: racks x 4 + servers x 1 + cables x 0.25 + modules x 0.05 + switches x 2 (reliability.yaml)
    hours = items["rack"] * 4 + 50 * 1 + 800 * 0.25 + 1600 * 0.05 + items["switch"] * 2
    assert d["technician_hours_total"] == pytest.approx(hours)
    # 0.54 MW of IT power x 10 technicians per MW -> 6 technicians, 20 h a day, then 3 days of burn-in
    assert d["technicians"] == 6
    assert d["deploy_days"] == pytest.approx(hours / (6 * 20) + 3)


def test_factory_cabled_domain_adds_no_field_links_but_cloudmatrix_does(cat):
    nvl = install_items(cat.design("gb200-nvl72"), 1296)
    # 18 NVL72 racks: their NVLink spines are cabled in the factory, only scale-out links on site
    assert nvl["system-unit"] == 18 and nvl["coolant-loop"] == nvl["rack"]
    cm = cat.design("cloudmatrix-384")
    items = install_items(cm, 384)
    no_ub = cat.design(cm.system.model_copy(update={"id": "cm-no-ub", "scaleup_field_links_per_domain": 0}))
    base = install_items(no_ub, 384)
    # one domain: 3,456 UB links cabled between its 16 racks, with an optical module at each end
    assert items["cable"] - base["cable"] == 3456 and items["transceiver"] - base["transceiver"] == 6912


def test_more_items_never_shorten_the_deployment(cat):
    d = cat.design("hgx-h100-ib-ndr")
    fast = deploy_time(d, 1024)
    slower_cables = cat.design(
        d.system.model_copy(update={"id": "hgx-16-nics", "nics_per_node": 16, "nic_gbps": 200})
    )  # same bandwidth per node in twice as many cables
    assert deploy_time(slower_cables, 1024)["technician_hours_total"] > fast["technician_hours_total"]
