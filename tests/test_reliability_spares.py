"""Idle GPUs of the units bought as hot spares: pools, the probability a failure finds none, goodput."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan.errors import InputError
from hnplan.planning.design import estimate_reliability
from hnplan.reliability import drained_per_failure, gpus_in_repair, interruption_rates_per_h
from hnplan.reliability.spares import short_probability, spare_pools


def test_short_probability_hand_worked():
    # a = 0.24 nodes in repair on average, 2 spares: P(N >= 2) = 1 - e^-0.24 (1 + 0.24) = 1 - 0.7866279 x 1.24 = 0.024581
    assert short_probability(0.24, 2) == pytest.approx(0.024581, rel=1e-4)
    # one spare: P(N >= 1) = 1 - e^-a
    assert short_probability(0.5, 1) == pytest.approx(1 - math.exp(-0.5))
    assert short_probability(0.5, 0) == 1.0  # no spares: every failure waits for its repair
    assert short_probability(0.0, 1) == 0.0


@given(a=st.floats(0.0, 50.0), k=st.integers(0, 30))
def test_more_spares_never_raise_the_shortfall(a, k):
    assert 0.0 <= short_probability(a, k + 1) <= short_probability(a, k) <= 1.0


def test_spare_pools(cat):
    nvl72, server = cat.system("gb200-nvl72"), cat.system("dgx-b200-ib-ndr")
    assert spare_pools(nvl72, 64 * 128, 72 * 128) == (128, 2)  # 16 of 18 trays train: 2 spare trays a rack
    assert spare_pools(nvl72, 72 * 128, 72 * 128) == (1, 0)
    assert spare_pools(nvl72, 68 * 2, 72 * 2) == (2, 1)  # 4 idle GPUs a rack: one tray
    assert spare_pools(nvl72, 8192, None) == (1, 0)  # nothing bought beside the job: no spares
    assert spare_pools(server, 8192, 8208) == (1, 2)  # two idle servers, anywhere in the fabric
    assert spare_pools(server, 8190, 8192) == (1, 0)  # a part of a server is no swap unit
    with pytest.raises(InputError, match="gpus_bought"):
        spare_pools(server, 16, 8)


def test_nvl72_two_spare_trays_per_rack_hand_worked(cat):
    # 128 racks, 64 GPUs (16 trays) training in each: a rack's failures are 1/128 of the job's, each drains
    # a tray for the 24 h repair; a = sum(lambda_k x 24 h) / 128, and the rack's 2 spare trays run out with
    # P(N >= 2) = 1 - e^-a (1 + a); only then is the 72-GPU rack drained
    design = cat.design("gb200-nvl72")
    rates = interruption_rates_per_h(design, 8192)
    drained = drained_per_failure(design)
    assert {g for g, _ in drained.values()} == {72} and {h for _, h in drained.values()} == {24}
    per_rack_h = sum(rates[k] for k in drained) / 128
    a = per_rack_h * 24
    assert 0.02 < a < 0.05  # ~0.03 trays of a rack in repair on average
    short = 1 - math.exp(-a) * (1 + a)
    without = gpus_in_repair(design, 8192)
    # Little's law holds m racks in repair; a rack in repair does not fail again (a finite source of 114 racks'
    # worth of the job's 8,192 GPUs): m / (1 + m / 114) racks, 72 GPUs each
    m, racks = sum(rates[k] for k in drained) * 24, math.ceil(8192 / 72)
    assert without == pytest.approx(72 * m / (1 + m / racks))
    assert without == pytest.approx(72 * m, rel=0.05)
    assert gpus_in_repair(design, 8192, gpus_bought=9216) == pytest.approx(72 * m * short / (1 + m * short / racks))
    without = 72 * m  # Little's law: the goodput below takes the repair wait at its thinned value
    # goodput: the repair wait all but vanishes, the restart (Daly's job goodput) stays
    est = estimate_reliability("gb200-nvl72", 8192, "llama3.1-405b", catalog=cat, gpus_bought=9216)
    base = estimate_reliability("gb200-nvl72", 8192, "llama3.1-405b", catalog=cat)
    assert est.job_goodput == base.job_goodput
    held = without * short / (1 + without * short / 72 / racks)
    assert est.goodput == pytest.approx(est.job_goodput * 8192 / (8192 + held))
    assert base.goodput < est.goodput <= est.job_goodput
    assert est.job_goodput - est.goodput < 1e-4
    assert (est.spare_nodes, est.gpus_bought, base.spare_nodes) == (2, 9216, 0)


def test_idle_servers_pool_across_the_fabric(cat):
    # 8,192 GPUs of 8-GPU servers with two idle servers bought: one pool of 2 spares for all 1,024 servers
    design = cat.design("dgx-b200-ib-ndr")
    rates = interruption_rates_per_h(design, 8192)
    drained = drained_per_failure(design)
    a = sum(rates[k] * h for k, (_, h) in drained.items())
    short = 1 - math.exp(-a) * (1 + a)
    # servers in repair a x short, of 1,024 (a finite source: a / (1 + a / 1,024)), 8 GPUs each
    assert gpus_in_repair(design, 8192, gpus_bought=8208) == pytest.approx(8 * a * short / (1 + a * short / 1024))


def test_compare_counts_the_idle_trays_of_the_racks_bought(cat):
    """Llama 3.1 70B on 128 GB300 GPUs: two 72-GPU racks bought, 64 training in each, 2 idle trays per rack.
    The comparison's goodput is the reliability model's with those trays as spares: above the one that
    charges each failure the 72-GPU rack's 24 h repair, at most the job's own (Daly's) goodput."""
    from hnplan.planning.compare import compare_training_designs

    r = compare_training_designs("llama3.1-70b", ["gb300-nvl72"], 128, 1e12, 8192, 2048, catalog=cat).iloc[0]
    assert (r["gpus"], r["gpus_bought"]) == (128, 144)
    kw = dict(catalog=cat, tokens_per_s=r["tokens_per_s"], step_s=r["step_time_s"])
    spared = estimate_reliability("gb300-nvl72", 128, "llama3.1-70b", gpus_bought=144, **kw)
    bare = estimate_reliability("gb300-nvl72", 128, "llama3.1-70b", **kw)
    assert r["goodput"] == pytest.approx(spared.goodput, rel=1e-12)
    assert bare.goodput < spared.goodput <= spared.job_goodput
    assert spared.spare_nodes == 2


def test_tco_availability_counts_the_idle_trays_of_the_racks_bought(cat):
    """128 GB200 GPUs buy two 72-GPU racks: 64 train in each (the job spread evenly), 2 idle trays a rack.
    Without them every hardware failure drains its rack for 24 h: racks in repair ~ Poisson(m), m = sum(lambda_k)
    x 24 h, and 99 % availability needs a spare rack when e^-m < 0.99. With them a failure drains the rack only
    when both trays of its rack are out, P = 1 - e^-a (1 + a), a = m / 2: the drains are Poisson(m P), and
    e^-(m P) >= 0.99 needs no spare rack, as `compare` and `size` count the same trays in the goodput."""
    from hnplan.planning.design import tco_summary
    from hnplan.reliability import spare_gpus

    design = cat.design("gb200-nvl72")
    rates = interruption_rates_per_h(design, 128)
    m = sum(rates[k] for k in drained_per_failure(design)) * 24
    short = 1 - math.exp(-m / 2) * (1 + m / 2)
    assert math.exp(-m) < 0.99 <= math.exp(-m * short)  # one spare rack without the trays, none with them
    assert spare_gpus(design, 128) == 72 and spare_gpus(design, 128, gpus_bought=144) == 0
    d = tco_summary("gb200-nvl72", 128, cat, availability=0.99)
    assert (d["spare_gpus"], d["gpus_bought"]) == (0, 144)
    # a job that fills its racks leaves no idle tray: the spare racks stay (8,208 GPUs hold 8,192 packed)
    assert tco_summary("gb200-nvl72", 8192, cat, availability=0.99)["spare_gpus"] == spare_gpus(design, 8192) > 0
    est = estimate_reliability("gb200-nvl72", 128, "llama3.1-70b", catalog=cat, gpus_bought=144)
    assert est.spare_gpus == 0  # the reliability answer says the same
