"""One rule for the energy of a training run on a purchase, shared by ``hnplan size`` and ``hnplan compare``:
every GPU bought draws (whole racks or servers), the ones the job does not train on at their idle power, the
rest of the purchase (hosts, NICs, switches) at the measured training draw (data/facility.yaml
training_power_fraction 0.76 of the rating, Newkirk et al. arXiv:2506.14551)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning.compare import compare_training_designs
from hnplan.planning.sizing import size_for_deadline
from hnplan.planning.time_to_train import purchase_energy
from hnplan.power import design_power, run_energy, training_draw_w

runner = CliRunner()


def test_idle_gpus_of_one_gb200_rack_draw_their_idle_power_by_hand():
    # one GB200 NVL72 rack: 132 kW rated (data/systems unit_power_kw) + 6,804 W of scale-out network = 138,804 W
    # IT, PUE 1.1 (liquid). All 72 training: 1.1 x 0.76 x 138,804 = 116,040.144 W. With the job on 64, the 8
    # idle GPUs draw 120 W (10 % of the 1,200 W TDP, facility accelerator_idle_fraction) instead of their share
    # of the training draw (0.76 x 1,200 = 912 W): 1.1 x (105,491.04 - 8 x 792) = 109,070.544 W
    cat = load_catalog()
    d = cat.design("gb200-nvl72")
    p = design_power(d, 72)
    assert (p.it_w, p.pue, p.gpus_bought) == (pytest.approx(138804.0), 1.1, 72)
    assert training_draw_w(p, cat.facility) == pytest.approx(116040.144)
    assert training_draw_w(p, cat.facility, 72) == pytest.approx(116040.144)
    assert training_draw_w(p, cat.facility, 64) == pytest.approx(109070.544)
    e = run_energy(p, 3600.0, cat.facility, training_gpus=64)
    assert e["energy_mwh"] == pytest.approx(109070.544 * 3600.0 / 3.6e9)
    with pytest.raises(InputError, match=r"training_gpus must lie in 1\.\.72"):
        training_draw_w(p, cat.facility, 73)


@settings(max_examples=20, deadline=None)
@given(units_bought=st.integers(1, 40), idle=st.integers(0, 63))
def test_fewer_training_gpus_never_draw_more_nor_less_than_all_idle(units_bought, idle):
    cat = load_catalog()
    p = design_power(cat.design("hgx-h100-ib-ndr"), 8 * units_bought)
    idle = min(idle, p.gpus_bought - 1)
    full = training_draw_w(p, cat.facility)
    part = training_draw_w(p, cat.facility, p.gpus_bought - idle)
    assert part <= full
    # what one idle H100 saves: (0.76 x 700 - 70) W x PUE 1.3 = 600.6 W
    assert full - part == pytest.approx(idle * 600.6)


def test_size_and_compare_count_the_same_energy_on_nine_racks():
    """Llama 3.1 8B with 2,304 sequences of 8,192 tokens per step on 648 GB200 GPUs (9 NVL72 racks): no layout
    divides 648 = 8 x 81, so both commands train on 576 (64 of each rack) and buy 9 racks. The energy counts the
    9 racks with the 72 idle GPUs at 120 W (before, `size` counted the 8 racks 576 GPUs fill, 1.96 MWh, and
    `compare` all 648 GPUs at the training draw, 2.21 MWh)."""
    args = ["--model", "llama3.1-8b", "--gpus", "648", "--tokens", "1e11", "--seq-len", "8192"]
    args += ["--global-batch-tokens", str(2304 * 8192), "--json"]
    rs = runner.invoke(app, ["size", "--system", "gb200-nvl72", *args, "--no-goodput"])
    rc = runner.invoke(app, ["compare", "--systems", "gb200-nvl72", *args, "--no-trust", "--no-goodput"])
    assert rs.exit_code == 0 and rc.exit_code == 0, rs.output + rc.output
    s, c = json.loads(rs.stdout)["results"][0], json.loads(rc.stdout)["designs"][0]
    assert (s["gpus"], s["gpus_bought"]) == (c["gpus"], c["gpus_bought"]) == (576, 648)
    assert s["days"] == pytest.approx(c["days"], rel=1e-12)
    assert s["energy_mwh"] == pytest.approx(c["energy_mwh"], rel=1e-12)
    cat = load_catalog()
    p = design_power(cat.design("gb200-nvl72"), 648)
    draw_w = 1.1 * (0.76 * p.it_w - 72 * (0.76 * 1200.0 - 120.0))
    assert c["energy_mwh"] == pytest.approx(draw_w * units.days_to_s(c["days"]) / 3.6e9, rel=1e-12)
    assert c["energy_mwh"] == pytest.approx(2.093, abs=1e-3)
    # with the goodput (both commands' default) they agree too
    rs = runner.invoke(app, ["size", "--system", "gb200-nvl72", *args])
    rc = runner.invoke(app, ["compare", "--systems", "gb200-nvl72", *args, "--no-trust"])
    sg, cg = json.loads(rs.stdout)["results"][0], json.loads(rc.stdout)["designs"][0]
    assert sg["goodput"] == pytest.approx(cg["goodput"], rel=1e-12) and cg["goodput"] < 1
    for k in ("days", "energy_mwh"):
        assert sg[k] == pytest.approx(cg[k], rel=1e-12) and cg[k] == pytest.approx(c[k] / cg["goodput"], rel=1e-9)


def test_deadline_sizing_counts_the_units_it_buys_as_compare_does():
    # as tests/test_compare_purchase.py: one rack meets 2 days, the job on 64 of its 72 GPUs
    cat = load_catalog()
    s = size_for_deadline("llama3.1-8b", "gb200-nvl72", 1e11, 2.0, 8192, 2048, catalog=cat, goodput=False)
    r = compare_training_designs("llama3.1-8b", ["gb200-nvl72"], 72, 1e11, 8192, 2048, catalog=cat, goodput=False)
    r = r.iloc[0]
    assert (s["gpus"], s["gpus_bought"]) == (r["gpus"], r["gpus_bought"]) == (64, 72)
    assert s["energy_mwh"] == pytest.approx(r["energy_mwh"], rel=1e-12)
    e = purchase_energy(cat.design("gb200-nvl72"), 64, 72, units.days_to_s(s["days"]), 1e11)
    assert s["energy_mwh"] == pytest.approx(e["energy_mwh"], rel=1e-12)
    assert s["energy_mwh"] == pytest.approx(109070.544 * units.days_to_s(s["days"]) / 3.6e9, rel=1e-9)
    with pytest.raises(InputError, match="gpus_bought"):
        purchase_energy(cat.design("gb200-nvl72"), 64, 8, 1.0, 1e11)
