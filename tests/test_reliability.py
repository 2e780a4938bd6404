"""Reliability: Llama 3 interruptions, MTBI monotonicity, Young/Daly, checkpoints, the failure unit."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from hnplan import units
from hnplan.errors import InputError
from hnplan.planning.design import estimate_reliability
from hnplan.reliability import (
    checkpoint_bytes,
    checkpoint_times,
    daly_goodput,
    daly_interval_s,
    failure_unit_gpus,
    mtbi_s,
    spare_gpus,
    young_interval_s,
)

DAYS_54 = 54 * units.DAY


@pytest.mark.parametrize("sid", ["hgx-h100-roce-400g", "hgx-h100-ib-ndr"])
def test_llama3_interruptions_16k_gpus_54_days(cat, sid):
    # Llama 3 paper Sec 3.3.4: 419 unexpected (+47 planned = 466) interruptions in 54 days on 16,384 H100
    s = cat.system(sid)
    unexpected = DAYS_54 / mtbi_s(cat.design(s), 16384)
    assert 400 <= unexpected <= 440
    est = estimate_reliability(s, 16384, "llama3.1-405b", catalog=cat)
    total = est.to_dict()["interruptions_per_day"] * 54
    assert 445 <= total <= 490
    # "one unexpected interruption every ~3.1 h"
    assert est.to_dict()["mtbi_h"] == pytest.approx(54 * 24 / 419, rel=0.05)
    assert est.goodput > 0.9  # the paper reports > 90% effective training time


@settings(max_examples=30, deadline=None)
@given(
    sid=st.sampled_from(["hgx-h100-ib-ndr", "gb200-nvl72", "cloudmatrix-384", "hgx-h100-roce-400g"]),
    gpus=st.integers(1, 40_000),
    extra=st.integers(1, 5_000),
)
def test_more_gpus_never_raise_mtbi(cat, sid, gpus, extra):
    s = cat.system(sid)
    assert mtbi_s(cat.design(s), gpus + extra) <= mtbi_s(cat.design(s), gpus)


def test_young_closed_form_and_daly():
    assert young_interval_s(50.0, 10_000.0) == pytest.approx(math.sqrt(2 * 50 * 10_000))
    # Daly eq. 37 by hand: sqrt(2 d M) (1 + sqrt(x)/3 + x/9) - d with x = d / 2M
    d, m = 120.0, 3 * 3600.0
    x = d / (2 * m)
    assert daly_interval_s(d, m) == pytest.approx(math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d)
    assert daly_interval_s(3 * m, m) == m  # delta >= 2M: checkpoint every M


@pytest.mark.parametrize("d,m,r", [(5.0, 11_000.0, 600.0), (120.0, 3 * units.HOUR, 600.0), (300.0, units.DAY, 900.0)])
def test_daly_interval_near_numerical_optimum_of_goodput(d, m, r):
    best = minimize_scalar(lambda t: -daly_goodput(t, d, r, m), bounds=(1.0, 10 * m), method="bounded")
    tau = daly_interval_s(d, m)
    assert tau == pytest.approx(best.x, rel=0.05)
    assert daly_goodput(tau, d, r, m) == pytest.approx(-best.fun, rel=1e-3)
    assert daly_goodput(young_interval_s(d, m), d, r, m) <= -best.fun + 1e-12


def test_checkpoint_field_case_llama3_8b_on_8_h100(cat):
    # 8.03e9 parameters x (2 bf16 + 12 fp32 master/Adam) bytes = 112 GB
    model = cat.model("llama3.1-8b")
    n = checkpoint_bytes(model)
    assert n == pytest.approx(112.4e9, rel=0.01)
    s = cat.system("hgx-h100-ib-ndr")
    # published: synchronous save stalls 27 s, asynchronous 0.5 s. Async stall = 14 GB per GPU over
    # 64 GB/s PCIe Gen5 = 0.22 s (model, -56%); the sync stall needs the storage rate: 27 s implies
    # 112.4 GB / 27 s = 4.2 GB/s for the node; the Llama 3 per-node share (0.65 GB/s) gives 173 s.
    t = checkpoint_times(n, cat.design(s), 8)
    assert t["async_stall_s"] == pytest.approx(n / 8 / 64e9)
    assert 0.1 < t["async_stall_s"] < 1.0
    assert t["sync_stall_s"] == pytest.approx(n / 0.65e9)
    t_fast = checkpoint_times(n, cat.design(s), 8, write_GBps_per_node=n / 27 / 1e9)
    assert t_fast["sync_stall_s"] == pytest.approx(27.0)
    assert t_fast["sync_stall_s"] / t_fast["async_stall_s"] > 50  # published ratio 54
    # a 70B checkpoint: 70.6e9 x 14 = 988 GB; ~10 minutes on one node means ~1.6 GB/s
    n70 = checkpoint_bytes(cat.model("llama3.1-70b"))
    assert n70 == pytest.approx(988e9, rel=0.01)
    assert checkpoint_times(n70, cat.design(s), 8, write_GBps_per_node=1.65)["write_s"] == pytest.approx(600, rel=0.01)


def test_async_mode_raises_goodput_when_writes_are_slow(cat):
    sync = estimate_reliability("hgx-h100-ib-ndr", 1024, "llama3.1-70b", "sync", cat, write_GBps_per_node=0.2)
    asyn = estimate_reliability("hgx-h100-ib-ndr", 1024, "llama3.1-70b", "async", cat, write_GBps_per_node=0.2)
    assert asyn.checkpoint_stall_s < sync.checkpoint_stall_s
    assert asyn.goodput > sync.goodput
    assert asyn.checkpoint_interval_s >= asyn.checkpoint_write_s  # background write finishes first


def test_failure_unit_and_spares(cat):
    hgx, nvl, cm = (cat.system(s) for s in ("hgx-h100-ib-ndr", "gb200-nvl72", "cloudmatrix-384"))
    assert (failure_unit_gpus(hgx), failure_unit_gpus(nvl), failure_unit_gpus(cm)) == (8, 72, 384)
    # an NVL72 with 8 in-rack spares absorbs a tray failure: the unit shrinks to one 4-GPU tray
    assert failure_unit_gpus(nvl.model_copy(update={"spare_gpus_per_unit": 8})) == 4
    # spares scale with the blast radius: units in repair are Poisson(lambda x repair time)
    assert spare_gpus(cat.design(nvl), 16416) > spare_gpus(cat.design(hgx), 16384)
    assert spare_gpus(cat.design(hgx), 16384) % 8 == 0 and spare_gpus(cat.design(nvl), 16416) % 72 == 0
    with pytest.raises(InputError, match="quantile"):
        spare_gpus(cat.design(hgx), 8, quantile=1.0)


def test_bad_mode(cat):
    with pytest.raises(InputError, match="sync, async"):
        estimate_reliability("hgx-h100-ib-ndr", 8, "llama3.1-8b", "lazy", cat)


def test_reliability_and_uncertainty_catalog_errors(data_copy):
    import yaml

    from hnplan.catalog import Catalog

    rel = yaml.safe_load((data_copy / "reliability.yaml").read_text())
    rel["rates"]["accelerator"]["per"] = "gpu"
    (data_copy / "reliability.yaml").write_text(yaml.safe_dump(rel))
    unc = yaml.safe_load((data_copy / "uncertainty.yaml").read_text())
    unc[0]["low"], unc[0]["high"] = unc[0]["high"], unc[0]["low"]
    (data_copy / "uncertainty.yaml").write_text(yaml.safe_dump(unc))
    problems = Catalog(data_copy).validate()
    assert any("reliability.yaml" in p and "per" in p for p in problems)
    assert any("uncertainty.yaml" in p and "must be below high" in p for p in problems)


@pytest.mark.parametrize("mean", [1e-6, 0.3, 1.0, 7.5, 42.0, 500.0, 20000.0])
def test_poisson_pmf_matches_scipy(mean):
    """The spares' Poisson counts, written out in log space (no scipy.stats import on the CLI path), agree
    with scipy.stats.poisson term by term and stop where scipy's ppf(1 - 1e-12) + 1 stops."""
    import numpy as np
    from scipy import stats

    from hnplan.reliability import poisson_pmf

    p = poisson_pmf(mean)
    k = np.arange(len(p))
    assert len(p) - 1 == int(stats.poisson.ppf(1 - 1e-12, mean)) + 1
    np.testing.assert_allclose(p, stats.poisson.pmf(k, mean), rtol=1e-9, atol=0)
    assert poisson_pmf(0.0).tolist() == [1.0]  # no failures expected: no spares


@pytest.mark.parametrize(("n", "p"), [(2, 0.5), (114, 0.01), (910, 0.766), (65520, 0.3)])
def test_binomial_pmf_matches_scipy(n, p):
    """The finite-source spares' binomial counts (hnplan.reliability.spares.binomial_pmf, written out for the reason
    poisson_pmf is) agree with scipy.stats.binom term by term; the edges p = 0 and 1 put all the mass on 0 and n."""
    import numpy as np
    from scipy import stats

    from hnplan.reliability.spares import binomial_pmf

    np.testing.assert_allclose(binomial_pmf(n, p), stats.binom.pmf(np.arange(n + 1), n, p), rtol=1e-9, atol=1e-300)
    assert binomial_pmf(5, 0.0).tolist() == [1.0] and binomial_pmf(3, 1.0).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_async_interval_respects_the_storage(cat):
    """Llama 3.1 405B at 16,384 H100 (2,048 nodes): a 14 B/parameter checkpoint written at reliability.yaml's
    0.65 GB/s per node takes bytes / (2,048 x 0.65e9) = 4.27 s. An async save stalls for ~5 ms, so Daly's
    optimum alone is ~11 s and the storage would write 40% of the time; with checkpoints allowed 10% of the
    storage's time the interval is 4.27 / 0.1 = 42.7 s, and the estimate says the storage set it."""
    e = estimate_reliability("hgx-h100-roce-400g", 16384, "llama3.1-405b", "async", cat)
    write = e.checkpoint_bytes / (2048 * 0.65e9)
    assert e.checkpoint_bytes == pytest.approx(5.68e12, rel=0.01)
    assert e.checkpoint_write_s == pytest.approx(write) and write == pytest.approx(4.27, abs=0.01)
    assert e.checkpoint_storage_share == 0.1
    assert e.checkpoint_interval_s == pytest.approx(write / 0.1)
    assert e.checkpoint_interval_bound == "storage"
    assert e.checkpoint_daly_interval_s == pytest.approx(daly_interval_s(e.checkpoint_stall_s, e.mtbi_s))
    # Daly 2006 eq. 37 (delta < 2M): sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta; delta = 5.4 ms
    # of stall, M = 3.09 h: 10.98 s
    d, m = e.checkpoint_stall_s, e.mtbi_s
    daly = math.sqrt(2 * d * m) * (1 + math.sqrt(d / (2 * m)) / 3 + d / (18 * m)) - d
    assert e.checkpoint_daly_interval_s == pytest.approx(daly, rel=1e-9) and daly == pytest.approx(10.98, abs=0.01)
    # a synchronous save stalls for the whole write: Daly's optimum (~300 s) is longer and sets the interval
    s = estimate_reliability("hgx-h100-roce-400g", 16384, "llama3.1-405b", "sync", cat)
    assert s.checkpoint_interval_bound == "daly" and s.checkpoint_interval_s == s.checkpoint_daly_interval_s
    assert s.checkpoint_interval_s > 10 * s.checkpoint_write_s


@settings(max_examples=15, deadline=None)
@given(share=st.floats(0.01, 1.0), gpus=st.sampled_from([1024, 4096, 16384]), mode=st.sampled_from(["sync", "async"]))
def test_checkpoints_never_take_more_than_their_share_of_the_storage(cat, share, gpus, mode):
    e = estimate_reliability("hgx-h100-roce-400g", gpus, "llama3.1-405b", mode, cat, checkpoint_storage_share=share)
    assert e.checkpoint_write_s / e.checkpoint_interval_s <= share * (1 + 1e-9)
    assert e.checkpoint_interval_s >= e.checkpoint_daly_interval_s


def test_checkpoint_storage_share_out_of_range(cat):
    with pytest.raises(InputError, match="checkpoint_storage_share"):
        estimate_reliability("hgx-h100-roce-400g", 64, "llama3.1-8b", "async", cat, checkpoint_storage_share=0.0)


def test_gb200_checkpoint_inputs_hand_worked(cat):
    """Llama 3.1 405B on 16,384 GB200 (4,096 trays of 4 GPUs). Storage: reliability.yaml's 0.65 GB/s per
    node comes from Llama 3's 2 TB/s over 3,072 servers of 8 GPUs, so a 4-GPU tray gets 0.65 x 4 / 8 =
    0.325 GB/s (the same storage per GPU): 5.68 TB / (4,096 x 0.325 GB/s) = 4.27 s, as on 16,384 H100, not
    the 2.13 s a per-tray 0.65 GB/s gave. Async stall: each GPU's 5.68 TB / 16,384 = 347 MB over
    NVLink-C2C's 225 GB/s per GPU (the first tier, host memory) = 1.54 ms. MTBI: accelerators 16,384 x
    1.2621e-5 + hosts 4,096 x 1.7331e-5 + NICs, links and software = 0.3588 / h -> 2.79 h. Young/Daly with
    1.54 ms: sqrt(2 x 1.54e-3 x 10,034) = 5.56 s; the storage bound 4.27 / 0.1 = 42.7 s sets the interval."""
    e = estimate_reliability("gb200-nvl72", 16384, "llama3.1-405b", "async", cat)
    assert e.checkpoint_write_s == pytest.approx(e.checkpoint_bytes / (4096 * 0.325e9))
    assert e.checkpoint_write_s == pytest.approx(4.27, abs=0.01)
    assert e.checkpoint_stall_s == pytest.approx(e.checkpoint_bytes / 16384 / 225e9)
    assert e.checkpoint_stall_s == pytest.approx(1.54e-3, abs=0.01e-3)
    assert e.checkpoint_host_link_GBps == 225
    assert units.s_to_hours(e.mtbi_s) == pytest.approx(2.79, abs=0.01)
    assert e.checkpoint_daly_interval_s == pytest.approx(5.56, abs=0.01)
    assert e.checkpoint_interval_bound == "storage" and e.checkpoint_interval_s == pytest.approx(42.7, abs=0.05)
    # the stall is never shorter than the copy to the first tier, nor longer than the whole write
    assert e.checkpoint_stall_s <= e.checkpoint_write_s


@pytest.mark.parametrize(
    "step_s,interval,bound",
    [
        (None, 42.7, "storage"),
        (10.0, 50.0, "storage"),  # ceil(42.7 / 10) = 5 steps
        (4.0, 44.0, "storage"),  # 11 steps
        (100.0, 100.0, "step"),  # a checkpoint is taken between steps: at least one
    ],
)
def test_checkpoint_interval_in_whole_steps(cat, step_s, interval, bound):
    e = estimate_reliability("gb200-nvl72", 16384, "llama3.1-405b", "async", cat, step_s=step_s)
    assert e.checkpoint_interval_s == pytest.approx(interval, abs=0.05)
    assert e.checkpoint_interval_bound == bound and e.step_s == step_s
    # Daly's goodput at the interval used: a longer interval than the optimum never helps
    assert e.job_goodput <= estimate_reliability("gb200-nvl72", 16384, "llama3.1-405b", "async", cat).job_goodput


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_bad_step_time(cat, bad):
    with pytest.raises(InputError, match="step time"):
        estimate_reliability("gb200-nvl72", 64, "llama3.1-8b", "async", cat, step_s=bad)
