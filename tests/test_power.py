"""Power model: hand-worked IT/facility power, the accelerator curve, racks against the rack limit."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.errors import InputError
from hnplan.power import accelerator_power_w, design_power, run_energy


def test_hand_worked_dgx_h100_power_and_pue(cat):
    s = cat.system("hgx-h100-ib-ndr")
    p = design_power(cat.design(s), 8, pue=1.5)
    # one 10.2 kW DGX H100 + one QM9700 (750 W) + 8 links x 2 ends x 8 W optics = 11,078 W
    assert p.compute_w == pytest.approx(10_200)
    assert p.network_w == pytest.approx(750 + 16 * 8)
    assert p.it_w == pytest.approx(11_078)
    assert p.facility_w == pytest.approx(11_078 * 1.5)  # PUE = facility / IT


def test_scaleup_switches_not_counted_twice(cat):
    # NVL72: compute power is exactly the 132 kW rack rating (NVLink switch trays inside it)
    p = design_power(cat.design("gb200-nvl72"), 72)
    assert p.compute_w == pytest.approx(132_000)


def test_accelerator_curve_between_idle_and_tdp(cat):
    h100 = cat.accelerator("h100-sxm")
    idle = cat.facility.accelerator_idle_fraction.value * 700
    assert accelerator_power_w(h100, 0.0, cat.facility) == pytest.approx(idle)
    assert accelerator_power_w(h100, 1.0, cat.facility) == pytest.approx(700)
    curve = accelerator_power_w(h100, [0.0, 0.5, 1.0], cat.facility)
    assert list(curve) == pytest.approx([idle, (idle + 700) / 2, 700])
    with pytest.raises(InputError, match="utilisation"):
        accelerator_power_w(h100, 1.2, cat.facility)


def test_design_curve_idle_drops_only_accelerators(cat):
    p = design_power(cat.design("hgx-h100-ib-ndr"), 16)
    # two servers: 16 x (700 - 70) W less at idle
    assert p.it_w - p.it_w_at(0.0) == pytest.approx(16 * 630)
    assert p.it_w_at(1.0) == pytest.approx(p.it_w)


def test_racks_against_the_rack_limit(cat):
    s = cat.system("hgx-h100-ib-ndr")
    # 4 x 10.2 kW = 40.8 kW exceeds the 40 kW air limit: 3 servers per rack
    p = design_power(cat.design(s), 32 * 3)
    assert p.racks_by_space == 3 and p.racks_by_power == 4 and p.racks == 4
    assert design_power(cat.design(s), 96, rack_limit_kw=50).racks == 3
    assert p.kw_per_rack <= 40
    nvl = design_power(cat.design("gb200-nvl72"), 720)
    assert nvl.racks == 10 and nvl.kw_per_rack == pytest.approx(132)


def test_run_energy_hand_worked(cat):
    p = design_power(cat.design("hgx-h100-ib-ndr"), 8, pue=1.2)
    e = run_energy(p, 10 * 3600, cat.facility, tokens=1e9, gco2_per_kwh=367)
    kwh = 11_078 * 1.2 * cat.facility.training_power_fraction.value * 10 / 1e3
    assert e["energy_mwh"] == pytest.approx(kwh / 1e3)
    assert e["co2_t"] == pytest.approx(kwh * 367 / 1e6)
    assert e["kwh_per_million_tokens"] == pytest.approx(kwh / 1e3)


def test_bad_inputs(cat):
    s = cat.system("hgx-h100-ib-ndr")
    with pytest.raises(InputError, match="pue"):
        design_power(cat.design(s), 8, pue=0.9)
    with pytest.raises(InputError, match="gpus"):
        design_power(cat.design(s), 0)


@settings(max_examples=25, deadline=None)
@given(gpus=st.integers(1, 20_000), pue=st.floats(1.0, 2.5))
def test_facility_power_grows_with_pue_and_gpus(cat, gpus, pue):
    s = cat.system("hgx-h100-ib-ndr")
    a = design_power(cat.design(s), gpus, pue=pue)
    assert design_power(cat.design(s), gpus, pue=pue + 0.1).facility_w > a.facility_w
    assert design_power(cat.design(s), gpus + 8, pue=pue).it_w >= a.it_w


def test_a_node_above_the_rack_limit_is_flagged(cat):
    # the seed's 40-card node draws 150 kW, above the 140 kW liquid-cooled rack limit
    p = design_power(cat.design("seed-40card"), 40)
    assert p.racks == 1 and p.kw_per_rack == pytest.approx(150) and p.over_rack_limit
    assert not design_power(cat.design("gb200-nvl72"), 72).over_rack_limit
