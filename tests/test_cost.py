"""Cost model: hand-worked TCO, $ per GPU-hour, deployment idle capital, monotonicity properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.cost import design_cost
from hnplan.errors import InputError
from hnplan.planning.design import tco_summary

HOURS_PER_YEAR = 365.25 * 24


def test_hand_worked_tco_one_dgx_h100(cat):
    s = cat.system("hgx-h100-ib-ndr")
    c = design_cost(
        cat.design(s),
        8,
        years=4,
        pue=1.25,
        utilisation=1.0,
        electricity_usd_per_kwh=0.10,
        maintenance_fraction=0.05,
        dc_build_usd_per_mw=10e6,
        deploy_days=0.0,
    )
    hw = 270_000 + 36_000 + 16 * 700  # server + one QM9700 + 16 x 400G optics
    it_w = 10_200 + 750 + 16 * 8
    assert c.systems_usd + c.network_usd == pytest.approx(hw)
    assert c.facility_usd == pytest.approx(it_w / 1e6 * 10e6)
    energy = it_w * 1.25 * 0.76 / 1e3 * HOURS_PER_YEAR * 0.10
    assert c.energy_usd_per_year == pytest.approx(energy)
    assert c.maintenance_usd_per_year == pytest.approx(0.05 * hw)
    tco = hw + it_w * 10 + 4 * (energy + 0.05 * hw)
    assert c.tco_usd == pytest.approx(tco)
    assert c.usd_per_gpu_hour == pytest.approx(tco / (8 * 4 * HOURS_PER_YEAR))


def test_utilisation_and_deployment_raise_the_gpu_hour_price(cat):
    s = cat.system("hgx-h100-ib-ndr")
    full = design_cost(cat.design(s), 64, deploy_days=0.0)
    half = design_cost(cat.design(s), 64, utilisation=0.5, deploy_days=0.0)
    # idle hours draw less energy, but each GPU-hour carries twice the capital
    assert half.energy_usd_per_year < full.energy_usd_per_year
    assert half.usd_per_gpu_hour == pytest.approx(2 * half.tco_usd / full.tco_usd * full.usd_per_gpu_hour)
    slow = design_cost(cat.design(s), 64, deploy_days=73.05)  # a fifth of a year of a 5-year life ...
    assert slow.idle_capital_usd == pytest.approx(slow.capex_usd * 73.05 / (5 * 365.25))
    assert slow.usd_per_gpu_hour == pytest.approx(full.usd_per_gpu_hour / (1 - 73.05 / (5 * 365.25)))


def test_supernode_deploys_faster_than_cabled_cluster(cat):
    seed = tco_summary(cat.system("seed-40card"), 400, cat)
    hgx = tco_summary(cat.system("hgx-h100-ib-ndr"), 400, cat)
    assert seed["deploy_days"] == 0.5 and hgx["deploy_days"] == 19
    assert seed["idle_capital_usd"] / seed["capex_usd"] < hgx["idle_capital_usd"] / hgx["capex_usd"]


def test_tco_summary_keys(cat):
    d = tco_summary(cat.system("gb200-nvl72"), 144, cat, years=4)
    for k in (
        "it_power_kw",
        "facility_power_kw",
        "pue",
        "racks",
        "capex_usd",
        "opex_usd_per_year",
        "tco_usd",
        "usd_per_gpu_hour",
    ):
        assert d[k] > 0
    assert d["racks"] == 2 and d["years"] == 4


def test_bad_cost_inputs(cat):
    s = cat.system("hgx-h100-ib-ndr")
    with pytest.raises(InputError, match="utilisation"):
        design_cost(cat.design(s), 8, utilisation=0.0)
    with pytest.raises(InputError, match="years"):
        design_cost(cat.design(s), 8, years=0)
    with pytest.raises(InputError, match="deployment"):
        design_cost(cat.design(s), 8, years=0.01, deploy_days=30)


SYSTEMS = ["hgx-h100-ib-ndr", "gb200-nvl72", "cloudmatrix-384", "hgx-b200-ib-xdr"]


@settings(max_examples=30, deadline=None)
@given(
    sid=st.sampled_from(SYSTEMS),
    gpus=st.integers(1, 5000),
    pue=st.floats(1.0, 2.0),
    price=st.floats(0.02, 0.3),
    factor=st.floats(0.5, 2.0),
    util=st.floats(0.05, 1.0),
)
def test_higher_pue_or_price_never_lowers_cost(cat, sid, gpus, pue, price, factor, util):
    s = cat.system(sid)
    base = design_cost(
        cat.design(s), gpus, pue=pue, electricity_usd_per_kwh=price, hardware_price_factor=factor, utilisation=util
    )
    for more in (
        dict(pue=pue * 1.1),
        dict(electricity_usd_per_kwh=price * 1.1),
        dict(hardware_price_factor=factor * 1.1),
    ):
        args = {**dict(pue=pue, electricity_usd_per_kwh=price, hardware_price_factor=factor, utilisation=util), **more}
        c = design_cost(cat.design(s), gpus, **args)
        assert c.tco_usd >= base.tco_usd
        assert c.usd_per_gpu_hour >= base.usd_per_gpu_hour


def test_usd_per_million_tokens_hand_worked(cat):
    c = design_cost(cat.design("hgx-h100-ib-ndr"), 8, deploy_days=0.0)
    # 8 GPUs at 10,000 tokens/s: one million tokens take 100 s = 8 x 100/3600 GPU-hours
    assert c.usd_per_million_tokens(8, 10_000) == pytest.approx(c.usd_per_gpu_hour * 8 * 100 / 3600)
    with pytest.raises(InputError, match="tokens_per_s"):
        c.usd_per_million_tokens(8, 0)
