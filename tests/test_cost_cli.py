"""`hnplan tco`: --help smoke test, JSON keys and values equal to the library's."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.planning.design import tco_summary

runner = CliRunner()
KEYS = {
    "it_power_kw",
    "facility_power_kw",
    "pue",
    "racks",
    "capex_usd",
    "opex_usd_per_year",
    "tco_usd",
    "usd_per_gpu_hour",
}


def test_tco_help():
    r = runner.invoke(app, ["tco", "--help"])
    assert r.exit_code == 0 and "--system" in r.output and "--pue" in r.output


def test_tco_json_keys_and_values(cat):
    r = runner.invoke(
        app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "1024", "--years", "4", "--pue", "1.3", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert KEYS <= set(d)
    ref = tco_summary(cat.system("hgx-h100-ib-ndr"), 1024, cat, years=4, pue=1.3)
    assert d["tco_usd"] == pytest.approx(ref["tco_usd"])
    assert d["facility_power_kw"] == pytest.approx(1.3 * d["it_power_kw"])
    assert d["racks"] == 43  # 128 servers of 10.2 kW, 3 per 40 kW air-cooled rack


def test_tco_unknown_system_exits_2():
    r = runner.invoke(app, ["tco", "--system", "hgx-h100-ib", "--gpus", "8"])
    assert r.exit_code == 2


def test_tco_simulated_utilisation(cat):
    """--utilisation simulated prices the GPU-hour at the simulation's useful utilisation of the design."""
    from hnplan.cluster.utilisation import simulated_utilisation

    r = runner.invoke(
        app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--utilisation", "simulated", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    sim = simulated_utilisation("hgx-h100-ib-ndr", 64, catalog=cat)
    assert d["utilisation"] == pytest.approx(sim["utilisation"]) and 0 < d["utilisation"] < 1
    assert d["utilisation_source"].startswith("simulated: 14 days of arrivals (")  # the mix's steady-state length
    assert (
        f"the mix's steady-state length) of mix 'default' at {sim['offered_load']:.0%} offered load"
        in (d["utilisation_source"])
    )
    assert "mean of 3 replications" in d["utilisation_source"]
    ref = tco_summary(cat.system("hgx-h100-ib-ndr"), 64, cat, utilisation=sim["utilisation"])
    assert d["usd_per_gpu_hour"] == pytest.approx(ref["usd_per_gpu_hour"])


@pytest.mark.parametrize("bad", ["1.5", "0", "busy"])
def test_tco_bad_utilisation_exits_2(bad):
    r = runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--utilisation", bad])
    assert r.exit_code == 2 and "utilisation" in r.output


def test_tco_availability_buys_spares(cat):
    r = runner.invoke(app, ["tco", "--system", "gb200-nvl72", "--gpus", "1296", "--availability", "0.99", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    ref = tco_summary("gb200-nvl72", 1296, cat, availability=0.99)
    assert d["spare_gpus"] == ref["spare_gpus"] > 0 and d["spare_gpus"] % 72 == 0  # whole NVL72 racks
    assert d["gpus_bought"] == 1296 + d["spare_gpus"]
