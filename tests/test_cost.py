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


def test_deployment_time_comes_from_the_bill_of_materials(cat):
    # no system gives deploy_days of its own now: both are derived (hnplan.deployment, tests/test_deployment.py)
    seed = tco_summary(cat.system("seed-40card"), 400, cat)
    hgx = tco_summary(cat.system("hgx-h100-ib-ndr"), 400, cat)
    assert seed["deploy_days"] == pytest.approx(4.225) and hgx["deploy_days"] == pytest.approx(6.7)
    assert seed["idle_capital_usd"] / seed["capex_usd"] < hgx["idle_capital_usd"] / hgx["capex_usd"]
    # a measured figure on the system wins over the derivation
    fixed = cat.system("hgx-h100-ib-ndr").model_copy(
        update={"id": "hgx-fixed", "price_item": "hgx-h100-ib-ndr", "deploy_days": 19.0}
    )
    assert tco_summary(fixed, 400, cat)["deploy_days"] == 19.0


def test_spares_for_availability_are_bought_and_deliver_no_gpu_hours(cat):
    s = cat.system("hgx-h100-ib-ndr")
    base = design_cost(cat.design(s), 1024, deploy_days=0.0)
    spared = tco_summary(s, 1024, cat, availability=0.99, deploy_days=0.0)
    n = spared["spare_gpus"]
    assert n > 0 and n % 8 == 0  # whole 8-GPU failure units
    assert spared["gpus_bought"] == 1024 + n
    # the systems capex grows by the spare servers; the GPU-hours sold stay those of 1,024 GPUs
    unit_usd = base.systems_usd / 128
    assert spared["systems_usd"] == pytest.approx(base.systems_usd + n / 8 * unit_usd)
    assert spared["usd_per_gpu_hour"] > base.usd_per_gpu_hour
    c = design_cost(cat.design(s), 1024, deploy_days=0.0, spare_gpus=n)
    assert c.productive_gpu_hours == pytest.approx(base.productive_gpu_hours)


def test_named_storage_is_in_capex_opex_and_power(cat):
    s = cat.system("hgx-h100-ib-ndr")
    named = {"price_item": s.id, "storage_gpus_per_unit": 256}
    with_sto = s.model_copy(update={"id": "hgx-ddn", "storage": "ddn-ai400x2", **named})
    a = tco_summary(s, 1024, cat, deploy_days=0.0)
    b = tco_summary(with_sto, 1024, cat, deploy_days=0.0)
    # 1,024 GPUs / 256 per appliance = 4 AI400X2 at $300,000 and 2 kW each (data/storage/ddn-ai400x2.yaml)
    assert b["storage_units"] == 4 and b["storage_usd"] == pytest.approx(1.2e6)
    assert b["systems_usd"] - a["systems_usd"] == pytest.approx(1.2e6)
    assert b["it_power_kw"] - a["it_power_kw"] == pytest.approx(8.0)
    fsx = s.model_copy(
        update={
            "id": "hgx-fsx",
            "storage": "fsx-lustre-persistent2-1000",
            "price_item": s.id,
            "storage_gpus_per_unit": 8,
        }
    )
    c = tco_summary(fsx, 1024, cat, deploy_days=0.0)
    # a service: 128 TiB at $614 per TiB-month, no capex, no power
    assert c["storage_usd"] == 0 and c["storage_kw"] == 0
    assert c["opex_usd_per_year"] - a["opex_usd_per_year"] == pytest.approx(128 * 614 * 12)


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


def test_example_system_file_names_its_storage(cat):
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "hgx-h100-ib-ndr-ddn.yaml"
    d = tco_summary(str(path), 1024, cat, deploy_days=0.0)
    # 1,024 GPUs / 32 per appliance = 32 DDN AI400X2 at $300,000 and 2 kW (data/storage/ddn-ai400x2.yaml)
    assert d["storage"] == "ddn-ai400x2" and d["storage_units"] == 32
    assert d["storage_usd"] == pytest.approx(32 * 300_000) and d["storage_kw"] == pytest.approx(64.0)
