"""Storage catalog kind and cost model: hand-derived values and monotonicity."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan import storage as sto
from hnplan.catalog import load_catalog
from hnplan.catalog.schemas import KINDS, Storage
from hnplan.errors import CatalogError, InputError

CAT = load_catalog()
DDN = CAT.get("storage", "ddn-ai400x2")
FSX = CAT.get("storage", "fsx-lustre-persistent2-1000")


def test_storage_is_a_catalog_kind():
    assert KINDS["storage"] is Storage
    assert CAT.ids("storage") == ["ddn-ai400x2", "fsx-lustre-persistent2-1000", "minio-nvme-node"]
    with pytest.raises(CatalogError, match="nearest: ddn-ai400x2"):
        CAT.get("storage", "ddn-ai400x")


def test_units_needed_hand_derived():
    # 1 TB/s of reads over 90 GB/s appliances: 1000 / 90 = 11.1 -> 12; 1M IOPS alone: 1/3 -> 1
    r = sto.units_needed(DDN, read_Bps=1e12, iops=1e6)
    assert r["units"] == 12 and r["binding"] == "read"
    assert r["by_target"]["iops"] == pytest.approx(1 / 3)
    # 1 PB on 295 TB appliances: 3.39 -> 4, capacity binds
    assert sto.units_needed(DDN, capacity_bytes=1e15) == {
        "units": 4,
        "binding": "capacity",
        "by_target": pytest.approx({"read": 0.0, "write": 0.0, "iops": 0.0, "capacity": 1e15 / 295e12}),
    }
    # FSx: 100 GB/s at 1 GB/s per TiB -> 100 TiB
    assert sto.units_needed(FSX, write_Bps=100e9)["units"] == 100


def test_object_store_sized_by_its_write_rate():
    # MinIO on NVMe servers (blog.min.io/nvme_benchmark): 165 GiB/s PUT over 32 nodes = 5.5 GB/s per node;
    # a 5.7 TB checkpoint written in 60 s needs 95 GB/s: 95 / 5.5 = 17.3 -> 18 nodes, where DDN AI400X2
    # appliances at 65 GB/s write need 2: an object store is a write-bound checkpoint target
    minio = CAT.get("storage", "minio-nvme-node")
    assert minio.kind == "object-store"
    assert minio.write_GBps_per_unit == pytest.approx(165 * 2**30 / 32 / 1e9, abs=0.05)
    assert sto.units_needed(minio, write_Bps=5.7e12 / 60) == {
        "units": 18,
        "binding": "write",
        "by_target": pytest.approx({"read": 0.0, "write": 95e9 / 5.5e9, "iops": 0.0, "capacity": 0.0}),
    }
    assert sto.units_needed(DDN, write_Bps=5.7e12 / 60)["units"] == 2


def test_checkpoint_times_hand_derived():
    # 5.7 TB over 4 appliances (4 x 65 GB/s write), a quarter of it for checkpoints: 5.7e12 / 65e9 = 87.7 s
    assert sto.checkpoint_write_s(5.7e12, DDN, 4, bandwidth_share=0.25) == pytest.approx(5.7e12 / 65e9)
    # restore reads at 4 x 90 GB/s, limited by the clients' 200 GB/s
    assert sto.checkpoint_restore_s(5.7e12, DDN, 4, client_Bps=200e9) == pytest.approx(5.7e12 / 200e9)
    with pytest.raises(InputError, match="bandwidth_share"):
        sto.checkpoint_write_s(1e12, DDN, 1, bandwidth_share=1.5)


def test_loader_need_hand_derived():
    # token shards: 1e7 tokens/s x 4 bytes = 40 MB/s, in 1 MiB reads = 38.1 IOPS
    d = sto.loader_need(1e7, bytes_per_token=4)
    assert d["read_Bps"] == pytest.approx(4e7) and d["iops"] == pytest.approx(4e7 / 2**20)
    # images: 196 tokens and 300 KB each, 128 KiB reads -> 3 reads per image
    d = sto.loader_need(196e4, tokens_per_sample=196, bytes_per_sample=300e3, io_kib=128)
    assert d["samples_per_s"] == pytest.approx(1e4) and d["iops"] == pytest.approx(3e4)
    assert d["read_Bps"] == pytest.approx(3e9)
    with pytest.raises(InputError, match="either"):
        sto.loader_need(1e6, bytes_per_token=4, tokens_per_sample=196, bytes_per_sample=1e5)


def test_power_and_price():
    assert sto.storage_power_w(DDN, 3) == pytest.approx(6000.0)
    assert sto.storage_capex_usd(DDN, 2) == pytest.approx(600000.0)
    assert sto.storage_usd_per_year(FSX, 10) == pytest.approx(12 * 10 * 614)
    assert np.allclose(sto.storage_power_w(DDN, np.array([1, 2])), [2000, 4000])


@given(st.floats(1e9, 1e14), st.integers(1, 64), st.integers(1, 64))
def test_more_storage_never_lengthens_a_checkpoint(n_bytes, a, b):
    lo, hi = sorted((a, b))
    assert sto.checkpoint_write_s(n_bytes, DDN, hi) <= sto.checkpoint_write_s(n_bytes, DDN, lo)
    assert sto.checkpoint_restore_s(n_bytes, FSX, hi) <= sto.checkpoint_restore_s(n_bytes, FSX, lo)


@given(st.floats(0, 1e13), st.floats(0, 1e8), st.floats(0, 1e16))
def test_units_needed_meet_every_target(read, iops, cap):
    n = sto.units_needed(DDN, read_Bps=read, iops=iops, capacity_bytes=cap)["units"]
    agg = sto.aggregate(DDN, n)
    assert agg["read_Bps"] >= read * (1 - 1e-9) and agg["read_iops"] >= iops * (1 - 1e-9)
    assert agg["capacity_bytes"] >= cap * (1 - 1e-9)


def test_storage_holds_two_checkpoints_unless_told_otherwise():
    # a 5,682 GB checkpoint on FSx units of 1 TiB (1.0995 TB): two checkpoints need 11,364 / 1,099.5 = 10.3
    # -> 11 units when no count is given; one unit cannot hold even one checkpoint: refused in one line
    d = CAT.design("hgx-h100-ib-ndr")
    r = sto.job_storage(d, 16384, 5682e9, FSX)
    assert r["units"] == 11
    with pytest.raises(
        InputError, match=r"1 unit\(s\) hold 1.1 TB, less than one checkpoint of 5.68 TB; give at least 11"
    ):
        sto.job_storage(d, 16384, 5682e9, FSX, n_units=1)
    assert sto.job_storage(d, 16384, 5682e9, DDN)["units"] == 1  # 295 TB per appliance
