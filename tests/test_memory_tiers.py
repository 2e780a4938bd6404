"""Memory tiers per accelerator and spill placement, by hand."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan import units
from hnplan.errors import InputError
from hnplan.memory import (
    MemoryBreakdown,
    decode_step_time_s,
    memory_tiers,
    spill_plan,
    zero_model_state_bytes,
)


def test_h100_server_tiers(cat):
    t = {x.name: x for x in memory_tiers(cat.design("hgx-h100-ib-ndr"))}
    assert list(t) == ["hbm", "host", "nvme"]
    assert units.to_GiB(t["hbm"].capacity_bytes) == pytest.approx(79.11)
    assert t["hbm"].bw_Bps == 3.35e12
    # 2 TB (32 x 64 GB DIMMs = 2,048 GiB) of DDR per 8-GPU node over PCIe Gen5 x16 (64 GB/s per direction)
    assert (t["host"].capacity_bytes, t["host"].bw_Bps, t["host"].link) == (256 * 2**30, 64e9, "PCIe")
    # 30.72 TB of NVMe at 52 GB/s per node, shared by 8
    assert t["nvme"].capacity_bytes == pytest.approx(3.84e12)
    assert t["nvme"].bw_Bps == pytest.approx(6.5e9)


def test_gb200_host_tier_over_c2c(cat):
    t = {x.name: x for x in memory_tiers(cat.design("gb200-nvl72"))}
    # 2 Grace x 480 GiB LPDDR5X per 4-GPU tray; NVLink-C2C 225 GB/s per GPU per direction
    assert (t["host"].capacity_bytes, t["host"].bw_Bps, t["host"].link) == (240 * 2**30, 225e9, "NVLink-C2C")
    assert t["hbm"].capacity_bytes == 185.03 * 2**30  # visible capacity: nvidia-smi 189,471 MiB on GB200


def test_fits_when_under_hbm(cat):
    tiers = memory_tiers(cat.design("hgx-h100-ib-ndr"))
    plan = spill_plan(MemoryBreakdown(10e9, 10e9, 10e9, 10e9), tiers)
    assert plan.fits and plan.status == "fits" and plan.spills == [] and plan.spill_time_s == 0


def test_7b_fp32_finetune_spills_optimizer_to_host(cat):
    # 28 GB weights, 28 GB gradients, 56 GB Adam moments: 112 GB on an 84.94 GB card. The excess of
    # optimizer states moves to host memory and streams through the GPU, which runs the update
    # (ZeRO-Infinity; the training planner's offload): read and written back once per step, 64 GB/s
    # per direction, hidden behind the optimizer window (0.2 s here) only.
    w, g, o = zero_model_state_bytes(7e9, 1, 0, "fp32")
    tiers = memory_tiers(cat.design("hgx-h100-ib-ndr"))
    hbm = tiers[0].capacity_bytes
    plan = spill_plan(MemoryBreakdown(w, g, o, 0.0), tiers, "train", compute_time_s=1.0, window_optimizer_s=0.2)
    assert plan.status == "spills"
    (s,) = plan.spills
    assert (s.part, s.tier) == ("optimizer", "host")
    assert s.bytes == pytest.approx(112e9 - hbm)
    assert s.seconds_per_step == pytest.approx((112e9 - hbm) / 64e9)
    assert plan.exposed_s == pytest.approx((112e9 - hbm) / 64e9 - 0.2)
    # gradients never move: a footprint of gradients alone over HBM does not fit
    assert spill_plan(MemoryBreakdown(0.0, 2 * hbm, 0.0, 0.0), tiers, "train").status == "does-not-fit"


def test_spill_fills_tiers_in_order_and_can_fail(cat):
    tiers = memory_tiers(cat.design("hgx-h100-ib-ndr"))
    hbm = tiers[0].capacity_bytes
    # inference: 400 GB of KV cache on one GPU: host (256 GiB) first, the rest on NVMe
    kv, host_cap = 400e9, 256 * 2**30
    plan = spill_plan(MemoryBreakdown(16e9, 0, 0, 1e9, kv), tiers, "inference")
    assert [(s.part, s.tier) for s in plan.spills] == [("kv_cache", "host"), ("kv_cache", "nvme")]
    host, nvme = plan.spills
    assert host.bytes == host_cap and nvme.bytes == pytest.approx(16e9 + 1e9 + kv - hbm - host_cap)
    assert plan.spill_time_s == pytest.approx(max(host_cap / 64e9, nvme.bytes / 6.5e9))
    # 5 TB of weights do not fit anywhere: NVMe share is 3.84 TB
    plan = spill_plan(MemoryBreakdown(5e12, 0, 0, 0, 0), tiers, "inference")
    assert plan.status == "does-not-fit" and plan.unplaced_bytes > 0
    with pytest.raises(InputError, match="train, inference"):
        spill_plan(MemoryBreakdown(1, 0, 0, 0), tiers, "serve")


def test_decode_step_time(cat):
    """Weights and KV cache read once from HBM at the achievable bandwidth."""
    acc = cat.accelerator("h100-sxm")
    from hnplan.compute import achievable_hbm_Bps

    mem = MemoryBreakdown(16e9, 0, 0, 0, 4e9)
    assert decode_step_time_s(mem, acc) == pytest.approx(20e9 / achievable_hbm_Bps(acc))


@settings(max_examples=50, deadline=None)
@given(parts=st.lists(st.floats(0, 400e9), min_size=6, max_size=6), mode=st.sampled_from(["train", "inference"]))
def test_spill_conserves_bytes(cat, parts, mode):
    tiers = memory_tiers(cat.design("hgx-h100-ib-ndr"))
    mem = MemoryBreakdown(*parts)
    plan = spill_plan(mem, tiers, mode)
    placed = sum(s.bytes for s in plan.spills)
    if plan.status == "fits":
        assert mem.total_bytes <= tiers[0].capacity_bytes and placed == 0
    else:
        assert placed + plan.unplaced_bytes == pytest.approx(mem.total_bytes - tiers[0].capacity_bytes, rel=1e-9)
        assert (plan.status == "spills") == (plan.unplaced_bytes == 0)
