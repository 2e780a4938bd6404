"""Reliability mechanisms that matter: hot swap and the failure unit in goodput and spares, and the
checkpoint on the design's storage beside the data loader (hand-worked values and monotonicity)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.errors import InputError
from hnplan.planning.design import estimate_reliability
from hnplan.reliability import checkpoint_bytes, drained_per_failure, gpus_in_repair, spare_gpus
from hnplan.storage import job_storage

# data/reliability.yaml, per component-hour
ACC, HOST, NIC, LINK = 1.2621e-5, 1.7331e-5, 3.2967e-7, 5.4945e-7


def _copy(cat, sid, **update):
    s = cat.system(sid)
    return s.model_copy(update={"id": f"{sid}-{len(update)}-{abs(hash(str(update)))}", "price_item": sid, **update})


def test_gpus_in_repair_hand_worked_hgx_1024(cat):
    d = cat.design("hgx-h100-ib-ndr")
    # 1,024 GPUs, 128 hosts, 1,024 NICs, 2,048 links (1,024 NIC + 1,024 leaf-spine); each failure drains
    # one 8-GPU server for the 24 h default repair (Little's law: servers in repair a = rate x time), of the 128
    # servers a server in repair cannot fail again (a finite source): a / (1 + a / 128) servers, 8 GPUs each
    per_h = ACC * 1024 + HOST * 128 + NIC * 1024 + LINK * 2048
    a = per_h * 24
    held = 8 * a / (1 + a / 128)
    assert gpus_in_repair(d, 1024) == pytest.approx(held, rel=1e-4)
    assert held == pytest.approx(per_h * 8 * 24, rel=0.01)  # Little's law within 1 % at these rates
    est = estimate_reliability("hgx-h100-ib-ndr", 1024, "llama3.1-8b", catalog=cat)
    assert est.gpus_in_repair == pytest.approx(held, rel=1e-4)
    assert est.goodput == pytest.approx(est.job_goodput * 1024 / (1024 + held))


def test_hot_swap_drains_one_card_for_the_swap_time(cat):
    seed = cat.system("seed-40card")  # hot swap, repair_hours 1 (the seed's claim)
    d = drained_per_failure(cat.design(seed))
    assert d["accelerator"] == (1, 1.0) and d["host"] == (40, 1.0)
    cold = _copy(cat, "seed-40card", hot_swap=False, failure_unit_gpus=40, repair_hours=24.0)
    assert set(drained_per_failure(cat.design(cold)).values()) == {(40, 24.0)}
    hot_r = estimate_reliability(seed, 1280, "megatron-1t", catalog=cat)
    cold_r = estimate_reliability(cold, 1280, "megatron-1t", catalog=cat)
    # the job's own restart and rework are the same; hot swap keeps less capacity out and needs fewer spares
    assert hot_r.job_goodput == pytest.approx(cold_r.job_goodput)
    assert hot_r.goodput > cold_r.goodput and hot_r.spare_gpus < cold_r.spare_gpus
    # hand: 1,280 cards on 32 nodes: accelerator failures x 1 card x 1 h + host failures x 40 cards x 1 h ...
    rates = hot_r.rates_per_h
    # (finite source: cards in repair a / (1 + a / 1,280), nodes a / (1 + a / 32))
    cards, nodes = rates["accelerator"] * 1, rates["host"] + rates["nic"] + rates["scaleout-link"]
    hand = cards / (1 + cards / 1280) + 40 * nodes / (1 + nodes / 32)
    assert hot_r.gpus_in_repair == pytest.approx(hand)


@pytest.mark.parametrize("sid", ["hgx-h100-ib-ndr", "gb200-nvl72", "seed-40card"])
def test_hot_swap_never_lowers_goodput(cat, sid):
    s = cat.system(sid)
    on = _copy(cat, sid, hot_swap=True)
    off = _copy(cat, sid, hot_swap=False)
    g = s.unit_gpus * max(1, 1024 // s.unit_gpus)
    a = estimate_reliability(on, g, "megatron-18.4b", catalog=cat)
    b = estimate_reliability(off, g, "megatron-18.4b", catalog=cat)
    assert a.goodput >= b.goodput and a.spare_gpus <= b.spare_gpus


def test_larger_failure_unit_never_raises_goodput_or_lowers_spares(cat):
    prev = None
    for unit in (4, 8, 36, 72):  # one NVL72 tray ... the whole rack
        s = _copy(cat, "gb200-nvl72", failure_unit_gpus=unit)
        r = estimate_reliability(s, 1296, "megatron-145.6b", catalog=cat)
        if prev is not None:
            assert r.goodput <= prev.goodput and r.spare_gpus >= prev.spare_gpus
        prev = r


def test_spares_with_one_unit_size_are_the_poisson_quantile(cat):
    from scipy import stats

    d = cat.design("gb200-nvl72")
    rates = estimate_reliability("gb200-nvl72", 1296, "megatron-1t", catalog=cat).rates_per_h
    hw = sum(v for k, v in rates.items() if k != "software")
    assert spare_gpus(d, 1296) == int(stats.poisson.ppf(0.99, hw * 24)) * 72


# -- storage ------------------------------------------------------------------------------------------
def test_checkpoint_on_named_storage_hand_worked(cat):
    s = _copy(cat, "hgx-h100-ib-ndr", storage="ddn-ai400x2", storage_gpus_per_unit=128)
    d = cat.design(s)
    n_bytes = checkpoint_bytes(cat.model("llama3.1-405b"))
    # 16,384 GPUs / 128 per appliance = 128 AI400X2: 11.52 TB/s read, 8.32 TB/s write; the loader reads
    # 2.5M tokens/s x 4 bytes = 10 MB/s (text is light), a 0.01 / 11,520 share of the storage's time
    j = job_storage(d, 16384, n_bytes, tokens_per_s=2.5e6)
    assert j["units"] == 128
    share = 1 - 10e6 / 11.52e12
    assert j["write_share"] == pytest.approx(share)
    assert j["write_s"] == pytest.approx(n_bytes / (8.32e12 * share))
    assert j["read_s"] == pytest.approx(n_bytes / 11.52e12)
    est = estimate_reliability(s, 16384, "llama3.1-405b", catalog=cat, tokens_per_s=2.5e6)
    assert est.checkpoint_write_s == pytest.approx(j["write_s"])
    assert est.checkpoint_interval_s >= est.checkpoint_write_s  # async: the next save waits for the write
    # the job's storage links cap it: 2,048 nodes x 1 GB/s
    capped = _copy(
        cat, "hgx-h100-ib-ndr", storage="ddn-ai400x2", storage_gpus_per_unit=128, storage_write_GBps_per_node=1.0
    )
    assert job_storage(cat.design(capped), 16384, n_bytes)["write_s"] == pytest.approx(n_bytes / 2.048e12)


def test_loader_beyond_the_storage_is_an_error(cat):
    s = _copy(cat, "hgx-h100-ib-ndr", storage="ddn-ai400x2", storage_gpus_per_unit=1024)
    with pytest.raises(InputError, match="cannot sustain the data loader"):
        estimate_reliability(s, 1024, "llama3.1-8b", catalog=cat, tokens_per_s=1e12)


@settings(max_examples=25, deadline=None)
@given(
    units=st.integers(1, 64),
    extra=st.integers(1, 64),
    tokens=st.sampled_from([0.0, 1e6, 1e8]),
    mode=st.sampled_from(["sync", "async"]),
)
def test_more_storage_bandwidth_never_lengthens_a_checkpoint(cat, units, extra, tokens, mode):
    s = _copy(cat, "gb200-nvl72", storage="ddn-ai400x2")
    kw = dict(catalog=cat, tokens_per_s=tokens or None, mode=mode)
    a = estimate_reliability(s, 2304, "megatron-1t", storage_units=units, **kw)
    b = estimate_reliability(s, 2304, "megatron-1t", storage_units=units + extra, **kw)
    assert b.checkpoint_write_s <= a.checkpoint_write_s
    assert b.checkpoint_stall_s <= a.checkpoint_stall_s and b.restart_s <= a.restart_s
    assert b.goodput >= a.goodput - 1e-12
    assert math.isfinite(b.checkpoint_interval_s)
