"""All-reduce at 1-16 MiB inside one NVLink node (the TP all-reduce of serving and of small training jobs)
against published NCCL times (``data/reference/comm_at_scale.csv`` rows ``td57_*``).

At these sizes the time is mostly latency: NCCL's fixed cost per collective and per ring step of the
protocol it picks (LL up to about 2 MiB, LL128 above, Simple from tens of MiB; NVIDIA/nccl
src/graph/tuning.cc, :mod:`hnplan.comm.nccl`), or the 25 us it charges NVLS. The measured 8 x H100 curve (ByteDance-Seed/Triton-distributed issue 57, NCCL through
torch.distributed) rises by 45.2 us from 8 to 16 MiB, an algbw of 186 GB/s: under the NVLink ring's 211
(369 GB/s busbw x 8/14) and far under NVLS's 279, so the run reduced on rings (NVLS off or not picked); the
rows are predicted with NVLS off and hnplan's default (NVLS on) is reported beside them. The 6 x H100 points
(vllm-project/vllm pull 24111, vLLM's pynccl) ran without NVLS: vLLM runs NCCL with cuMem off
(``NCCL_CUMEM_ENABLE=0``), which NVLS needs (pull 24532 turns both on to use it); SGLang's server sets
``NCCL_NVLS_ENABLE=0`` outright (sgl-project/sglang python/sglang/srt/server.py, ``_set_envs_and_config``).
Sizes below 1 MiB are outside the scope of these rows.

The 8 x H200 curve (NCCL 2.30.4 through nccl-tests, C-TC/multi-gpu-programming-models; rows ``ctc_h200_8_*``)
ran with NVLS available and picked from 2 MiB, yet its times sit at the ring's: NCCL moves a single-node NVLS
all-reduce in chunks that shrink with the message (16 KiB below 8 MiB, 32 KiB below 64 MiB, 128 KiB from
1 GiB; NVIDIA/nccl src/enqueue.cc), and each chunk step costs a fixed time besides its bytes
(:func:`hnplan.comm.nccl.nvls_chunk_time_s`). :func:`nvls_chunk_step_us` solves that time from the curve's
slopes; the NVLink 4 fabric carries it (``inr_chunk_step_us``). The same repository's CUDA-graph runs on
registered buffers (``ctc_h200_8_graph_*``, NCCL's symmetric kernels, no launch per collective) are
reported beside them: 1.15-2.5x faster than any NCCL path the model times (2.5x at 1 MiB, 1.15x at 64 MiB).
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.comm import nccl
from hnplan.comm.algorithm_times import nvls_pipelines
from hnplan.comm.algorithms import collective
from hnplan.comm.placement import place_group
from hnplan.validation.rows import Row

TOL = 0.15


def _time_us(cat, system: str, gpus: int, size: float, **update) -> tuple[float, str]:
    s = cat.system(system)
    if update:
        s = s.model_copy(update=update)
    r = collective("allreduce", size, place_group(cat.design(s), gpus, 1, gpus))
    return units.s_to_us(float(r.time_s[0])), str(r.algorithm[0])


def mid_size_rows(cat) -> list[Row]:
    """One row per published size: hnplan's all-reduce time with NVLS off (the setting the curve's slope
    shows) as a prediction, and with the system's default (NVLS on) as a reported row; the 2 MiB outlier is
    reported only."""
    ref = cat.reference("comm_at_scale")
    out = []
    for _, r in ref[ref["id"].str.match(r"(td57|v24111)_")].iterrows():
        size = float(r["message_size_bytes"])
        mib = size / units.MiB
        published = float(r["time_us"])
        gpus = int(r["n_ranks"])
        src = f"{r['source']} ({r['nccl_setting']})"
        ring, alg = _time_us(cat, "hgx-h100-ib-ndr", gpus, size, scaleup_in_network_reduction=False)
        nvls, alg_on = _time_us(cat, "hgx-h100-ib-ndr", gpus, size)
        outlier = "outlier" in str(r["notes"])
        steps = 2 * (gpus - 1)
        out.append(
            Row(
                "communication",
                f"{gpus} x H100, all-reduce {mib:g} MiB, time, NVLS off",
                "time",
                "us",
                published,
                ring,
                "reported" if outlier else "prediction",
                TOL,
                src,
                f"hnplan's {alg} on the fastest of NCCL's protocols; ring: LL (6.6 + {steps} x 0.6 us, 141 GB/s "
                f"busbw), LL128 (14 + {steps} x 1.9 us, 120/128 of the ring bandwidth), Simple (8.4 + {steps} x "
                "3.4 us, the ring bandwidth); tree: 6.8/14/8.4 us + 2(q-1) x 0.6/1.25/4.0 us"
                + ("; the published point is an outlier of its curve" if outlier else ""),
            )
        )
        out.append(
            Row(
                "communication",
                f"{gpus} x H100, all-reduce {mib:g} MiB, time, hnplan default (NVLS on)",
                "time",
                "us",
                published,
                nvls,
                "reported",
                TOL,
                src,
                (
                    f"hnplan's {alg_on}: NCCL's NVLS latency 25 us + S (q+1)/q at 0.85 of the ring bandwidth"
                    if alg_on == "inr"
                    else f"hnplan's {alg_on} (LL) beats NVLS's 25 us latency here"
                )
                + "; the run reduced on rings (module docstring)",
            )
        )
    return out


def _ctc(cat, graph: bool):
    ref = cat.reference("comm_at_scale")
    pat = r"ctc_h200_8_graph_" if graph else r"ctc_h200_8_\d"
    rows = ref[ref["id"].str.match(pat)]
    return rows.iloc[np.argsort(rows["message_size_bytes"].astype(float).to_numpy())]


def nvls_chunk_step_us(cat=None) -> float:
    """The fixed time of one NVLS chunk step on NVLink 4 solved from the measured 8 x H200 curve [us].

    In each band of one chunk size ``c`` (16 KiB at 2-4 MiB, 32 KiB at 8-32 MiB; NVIDIA/nccl
    src/enqueue.cc, 16 channels x 8 heads = 128 pipelines) the measured time rises with the message at
    ``1/B + t0 / 128 x (1/c - 1/128 KiB)`` per byte, ``B`` the 128 KiB-chunk NVLS bandwidth hnplan's
    ``inr_efficiency`` gives; ``t0`` from each band's end points, the mean of the two returned
    (``data/interconnects/nvlink4.yaml`` ``inr_chunk_step_us``; a test holds the two together).
    """
    from hnplan.catalog import load_catalog

    cat = cat or load_catalog()
    ref = _ctc(cat, graph=False)
    rows = dict(zip(ref["message_size_bytes"].astype(float), ref["time_us"].astype(float)))
    g = place_group(cat.design(cat.system("hgx-h200-ib-ndr")), 8, 1, 8)
    ops = nvls_pipelines(g)  # 16 channels x 8 heads, as the planner's collectives count them
    steps = []
    for lo, hi in ((2 * units.MiB, 4 * units.MiB), (8 * units.MiB, 32 * units.MiB)):
        c = nccl.nvls_chunk_bytes(lo, ops)
        assert c == nccl.nvls_chunk_bytes(hi - 1, ops)  # one chunk size across the band
        free = [
            float(collective("allreduce", s, g, "inr").time_s[0])
            - nccl.nvls_chunk_time_s(s, ops, g.up.inr_chunk_step_s or 0.0)
            for s in (lo, hi)
        ]
        measured = units.us_to_s(float(rows[hi] - rows[lo]))
        per_step = (hi - lo) / ops * (1.0 / c - 1.0 / nccl.NVLS_CHUNK_BYTES)
        steps.append((measured - (free[1] - free[0])) / per_step)
    return units.s_to_us(float(np.mean(steps)))


def h200_rows(cat) -> list[Row]:
    """8 x H200 with NCCL 2.30.4, reported beside hnplan's default (NVLS on): the eager curve with NVLS
    available (its slopes set the NVLS chunk step, :func:`nvls_chunk_step_us`, so it is not a prediction) and
    the CUDA-graph curve on registered buffers (NCCL's symmetric kernels, which the model does not time)."""
    out = []
    for graph in (False, True):
        for _, r in _ctc(cat, graph).iterrows():
            size = float(r["message_size_bytes"])
            t, alg = _time_us(cat, "hgx-h200-ib-ndr", 8, size)
            ring, _ = _time_us(cat, "hgx-h200-ib-ndr", 8, size, scaleup_in_network_reduction=False)
            mib = size / units.MiB
            label = "CUDA graph, registered buffers" if graph else "NVLS available"
            note = f"hnplan's {alg} (NVLS with its chunk steps; ring with NVLS off {ring:.1f} us); " + (
                "NCCL 2.30.4's symmetric kernels on registered buffers inside CUDA graphs: no host launch "
                "and no chunked copy through NCCL's buffers, not modelled"
                if graph
                else "the chunk step time is solved from this curve's slopes (2-4 and 8-32 MiB), not its level: "
                "at 8-32 MiB the measured calls sit 18-20 us above the model (at 2-4 MiB 3 us, at 1 MiB on the LL "
                "ring 10 us), a per-call cost of these launches that NCCL's tuner latencies do not carry"
            )
            out.append(
                Row(
                    "communication",
                    f"8 x H200, all-reduce {mib:g} MiB, time, NCCL 2.30.4, {label}",
                    "time",
                    "us",
                    float(r["time_us"]),
                    t,
                    "reported",
                    TOL,
                    str(r["source"]),
                    note,
                )
            )
    return out
