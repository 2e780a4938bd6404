"""All-reduce at 1-16 MiB inside one NVLink node: NCCL's protocol latencies (src/graph/tuning.cc) and the
published 8 x H100 NCCL curve (ByteDance-Seed/Triton-distributed issue 57; data/reference/comm_at_scale.csv
rows td57_*)."""

import pytest

from hnplan.comm.algorithms import best_time, collective
from hnplan.comm.placement import place_group
from hnplan.validation.comm_mid_size import mid_size_rows

MiB = 2.0**20
B_U = 450e9 * 0.82  # NVLink 4 ring bandwidth per direction (nccl-tests issue 212 calibration)
A_U = 2.4e-6  # alpha of an algorithm NCCL lacks (rhd): 1.9 us software + 2 links x 100 ns + 1 switch x 300 ns


def _group(cat, system="hgx-h100-ib-ndr", gpus=8, **update):
    s = cat.system(system)
    if update:
        s = s.model_copy(update=update)
    return place_group(cat.design(s), gpus, 1, gpus)


def test_ring_is_the_fastest_of_ll_ll128_and_simple(cat):
    g = _group(cat)
    # 1 MiB on 8 GPUs: LL 6.6 + 14 x 0.6 us + 1.75 x 2^20 / 141 GB/s (llMaxBws Hopper, under B_u/2 = 184.5)
    # = 15.0 + 13.01 = 28.01 us; LL128 14 + 14 x 1.9 us + 1.75 x 2^20 / (369 GB/s x 120/128) = 40.6 + 5.30
    # = 45.90 us; Simple 8.4 + 14 x 3.4 us + 1.75 x 2^20 / 369 GB/s = 56.0 + 4.97 = 60.97 us
    ll = 6.6e-6 + 14 * 0.6e-6 + 1.75 * MiB / 141e9
    ll128 = 14e-6 + 14 * 1.9e-6 + 1.75 * MiB / (B_U * 120 / 128)
    simple = 8.4e-6 + 14 * 3.4e-6 + 1.75 * MiB / B_U
    t = float(collective("allreduce", MiB, g, "ring").time_s[0])
    assert t == pytest.approx(min(ll, ll128, simple), rel=1e-9) and t == pytest.approx(28.01e-6, abs=0.01e-6)
    # 16 MiB: LL 15 + 208.2 us; LL128 40.6 + 84.87 = 125.47 us; Simple 56.0 + 79.57 = 135.57 us
    t16 = float(collective("allreduce", 16 * MiB, g, "ring").time_s[0])
    assert t16 == pytest.approx(14e-6 + 14 * 1.9e-6 + 1.75 * 16 * MiB / (B_U * 120 / 128), rel=1e-9)
    assert t16 == pytest.approx(125.47e-6, abs=0.01e-6)
    # 1 GiB: Simple, 56.0 us + 5.092 ms (LL128 40.6 us + 5.432 ms)
    t1g = float(collective("allreduce", 1024 * MiB, g, "ring").time_s[0])
    assert t1g == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 1.75 * 1024 * MiB / B_U, rel=1e-9)


def test_nvls_pays_ncclS_25_us_and_its_chunk_steps(cat):
    g = _group(cat)
    # 8 MiB: 25 us + 9/8 x 8 MiB / (369 GB/s x 0.85) = 25 + 30.08 = 55.08 us, and the chunk steps: NCCL moves
    # 8 MiB in 32 KiB chunks (not below 2 x 128 x 32 KiB = 8 MiB, below 8 x 128 x 64 KiB = 64 MiB; 16 channels x
    # 8 heads), 2 steps per pipeline where 128 KiB chunks would take 0.5: 8 MiB / 128 x (1/32 KiB - 1/128 KiB)
    # x 5.69 us = 1.5 x 5.69 = 8.53 us; 63.62 us in all
    t = float(collective("allreduce", 8 * MiB, g, "inr").time_s[0])
    chunk = 8 * MiB / 128 * (1 / 32768 - 1 / 131072) * 5.69e-6
    assert chunk == pytest.approx(8.535e-6, abs=0.001e-6)
    assert t == pytest.approx(25e-6 + 9 / 8 * 8 * MiB / (B_U * 0.85) + chunk, rel=1e-9)
    assert t == pytest.approx(63.62e-6, abs=0.01e-6)
    # 8 GiB: 128 KiB chunks, no extra steps (the large-message busbw inr_efficiency reproduces)
    big = float(collective("allreduce", 8192 * MiB, g, "inr").time_s[0])
    assert big == pytest.approx(25e-6 + 9 / 8 * 8192 * MiB / (B_U * 0.85), rel=1e-9)


def test_nvls_chunk_rule_is_ncclS():
    # NVIDIA/nccl src/enqueue.cc calcCollChunking, NVLS: 128 KiB, then 64 / 32 / 16 KiB below 64 / 8 / 2 x
    # ops x chunk bytes; 8 H100: ops = 16 channels x 8 heads = 128
    from hnplan.comm.nccl import nvls_chunk_bytes

    sizes = [1, 7.99, 8, 63.99, 64, 1023.99, 1024]
    assert [nvls_chunk_bytes(s * MiB, 128) for s in sizes] == [16384, 16384, 32768, 32768, 65536, 65536, 131072]
    assert list(nvls_chunk_bytes([s * MiB for s in sizes], 128)) == [nvls_chunk_bytes(s * MiB, 128) for s in sizes]


def test_nvls_chunk_step_is_solved_from_the_h200_curve(cat):
    # the two bands of the measured 8 x H200 curve (NCCL 2.30.4): 2 -> 4 MiB, 12.48 us (16 KiB chunks) and
    # 8 -> 32 MiB, 115.96 us (32 KiB chunks), against the step-free NVLS slope 9/8 / (369 GB/s x 0.85):
    # (12.48 us - 7.52 us) / (2 MiB / 128 x (1/16 KiB - 1/128 KiB)) = 5.67 us and (115.96 - 90.25) /
    # (24 MiB / 128 x (1/32 KiB - 1/128 KiB)) = 5.71 us; the mean 5.69 us is the fabric's inr_chunk_step_us
    from hnplan.validation.comm_mid_size import nvls_chunk_step_us

    t0 = nvls_chunk_step_us(cat)
    assert t0 == pytest.approx(5.69, abs=0.005)
    assert cat.get("interconnects", "nvlink4").inr_chunk_step_us == pytest.approx(t0, abs=0.005)
    free16 = 9 / 8 * 2 * MiB / (B_U * 0.85)
    assert (12.48e-6 - free16) / (2 * MiB / 128 * (1 / 16384 - 1 / 131072)) == pytest.approx(5.67e-6, abs=0.01e-6)


def test_tuner_inside_a_node_weighs_ncclS_algorithms_only(cat):
    g = _group(cat)
    r = collective("allreduce", [MiB, 4 * MiB], g)
    assert list(r.algorithm) == ["ring", "inr"]  # LL ring below about 1 MiB, NVLS above
    assert best_time("allreduce", 4 * MiB, g) == (pytest.approx(float(r.time_s[1]), rel=1e-12), "inr")
    off = _group(cat, scaleup_in_network_reduction=False)
    assert str(collective("allreduce", 8 * MiB, off).algorithm[0]) == "ring"
    # halving-doubling stays available when forced: 14 + 3 x 2 x 2.4 us + 1.75 x 8 MiB / B_u
    rhd = float(collective("allreduce", 8 * MiB, off, "rhd").time_s[0])
    assert rhd == pytest.approx(14e-6 + 6 * A_U + 1.75 * 8 * MiB / B_U, rel=1e-9)


def test_fabrics_without_ncclS_constants_are_unchanged(cat):
    # CloudMatrix 384's Unified Bus is not an NCCL fabric (HCCL): no fixed latency, no protocols, rhd stays a
    # tuner choice inside the supernode
    g = _group(cat, "cloudmatrix-384", 16)
    assert g.domains == 1 and g.up.nccl_link is None
    t = collective("allreduce", 8 * MiB, g, "rhd").time_s[0]
    assert t == pytest.approx(2 * 4 * g.up.alpha_s + 2 * 15 / 16 * 8 * MiB / g.up.bw_Bps, rel=1e-9)


def test_mid_size_rows_predict_the_ring_curve_within_15_percent(cat):
    rows = mid_size_rows(cat)
    assert len(rows) == 20
    pred = {r.case: r for r in rows if r.role == "prediction"}
    assert len(pred) == 9 and all(r.within for r in pred.values())
    # 8 x H100 at 1 / 4 / 8 / 16 MiB (us): 32.4, 59.4, 90.5, 135.7; hnplan with NVLS off 28.0 (ring LL),
    # 61.8, 83.0 and 125.5 (ring LL128). At 4 MiB the tree LL128 would take 31.5 + 29.2 = 60.7 us (14 + 2 x 7 x
    # 1.25 us + 2 x 4 MiB / (369 GB/s x 7/9)), but NCCL's tuner rates it at 0.92 x 0.8 of that bandwidth (the
    # tree all-reduce factor and treeCorrectionFactor LL128 at 2^16 lines of 64 B): 31.5 + 29.2 / 0.736 =
    # 71.2 us, above the ring LL128's 40.6 + 2 x 7/8 x 4 MiB / (369 GB/s x 120/128) = 61.8 us, so the ring runs
    got = sorted((r.published, round(r.predicted, 1)) for r in pred.values() if r.case.startswith("8 x"))
    assert got == [(32.42, 28.0), (59.43, 61.8), (90.51, 83.0), (135.68, 125.5)]
    # 6 x H100 at 1 MiB: LL, 6.6 + 10 x 0.6 us + (10/6) x 2^20 / 141 GB/s = 12.6 + 12.39 = 25.0 us (published 25)
    six = next(r for r in pred.values() if r.case.startswith("6 x H100, all-reduce 1 MiB"))
    assert six.predicted == pytest.approx(6.6 + 10 * 0.6 + 10 / 6 * 2**20 / 141e9 * 1e6, rel=1e-9)
