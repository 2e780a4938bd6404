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
"""

from __future__ import annotations

from hnplan import units
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
