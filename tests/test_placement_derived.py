"""A placement's own numbers (``GroupPlacement.derived``: a ring's protocol latencies and bandwidths, the tuner's
caps, the tree, PAT and in-network latencies) are derived once and kept on it, outside its identity: equal
placements hash and compare equal whatever either has derived, a changed copy derives its own, and a time read
from the kept numbers equals the time derived afresh."""

import dataclasses

import pytest

from hnplan.comm.algorithms import best_time, collective
from hnplan.comm.placement import flat_placement, place_group
from hnplan.comm.topology import LinkParams

MiB = 2.0**20


def test_flat_ring_from_kept_numbers():
    # ring all-reduce of 1 GB on 8 ranks of 100 GB/s, no latency: 2 x 7/8 x 1e9 / 1e11 = 17.5 ms, twice
    lk = LinkParams(1e11, 0.0, 1e11)
    g = flat_placement(8, 8, lk, lk)
    first = float(collective("allreduce", 1e9, g, "ring").time_s[0])
    assert g.derived  # the ring's alpha steps and bandwidth kept
    assert first == pytest.approx(17.5e-3, rel=1e-12)
    assert float(collective("allreduce", 1e9, g, "ring").time_s[0]) == first


@pytest.mark.parametrize(("size", "stride"), [(8, 1), (64, 8), (2048, 8), (16384, 1)])
def test_kept_numbers_outside_identity(cat, size, stride):
    g = place_group(cat.design(cat.system("hgx-h100-ib-ndr")), size, stride, 16384)
    fresh = dataclasses.replace(g)
    assert not fresh.derived
    times = {op: [best_time(op, s, g) for s in (1.0 * MiB, 64 * MiB, 4096 * MiB)] for op in ("allreduce", "allgather")}
    assert g.derived and not fresh.derived
    assert g == fresh and hash(g) == hash(fresh) and {g: 1}[fresh] == 1
    for op, got in times.items():  # afresh on the copy, and again from the kept numbers
        assert [best_time(op, s, fresh) for s in (1.0 * MiB, 64 * MiB, 4096 * MiB)] == got
        assert [best_time(op, s, g) for s in (1.0 * MiB, 64 * MiB, 4096 * MiB)] == got
    other = dataclasses.replace(g, channels=7)  # a changed placement: its own numbers, none of g's
    assert other != g and not other.derived
