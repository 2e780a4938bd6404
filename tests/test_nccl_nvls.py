"""The ``nccl_nvls`` stack choice: a job launched with ``NCCL_NVLS_ENABLE=0`` reduces on the NVLink rings and
trees, not in the NVSwitches, however the system is deployed (issue 13: collectives as each run configured
them)."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog.runs import training_runs
from hnplan.cli import app
from hnplan.planning.training.collectives import collective_s
from hnplan.planning.training.job import make_job

GiB = 2.0**30


def _allreduce_8(job) -> float:
    return float(collective_s(job, "allreduce", [GiB], [8], [1])[0])


def test_eight_gpu_allreduce_with_and_without_nvls_on_h100():
    # One HGX H100 (8 GPUs, NVLink 4 through NVSwitch gen 3): B_u = 450 GB/s x 0.82 = 369 GB/s per
    # direction.
    b_u, s = 450e9 * 0.82, GiB
    # NVLS on (NCCL's default): S (q+1)/q through the switch at B_u x 0.85 (NCCL's Hopper nvlsEfficiency)
    # after NCCL's NVLS latency of 25 us (tuning.cc hwLat NVLINK NVLS/Simple): 25 us + 1.125 x 2^30 / 313.65e9
    # = 3.877 ms, busbw 2 (7/8) S / t = 485 GB/s (nccl-tests issues 212, 290 measure 476-480 GB/s).
    nvls = 25e-6 + s * 9 / 8 / (b_u * 0.85)
    # NVLS off: NCCL's ring (inside one node the tuner weighs ring, tree and NVLS, not halving-doubling) on its
    # Simple protocol: 8.4 us (baseLat) + 2 x 7 steps x 3.4 us (hwLat NVLINK Ring/Simple) + 1.75 x 2^30 / 369e9
    # = 5.148 ms, busbw 365 GB/s (the ~370 GB/s ring busbw of nccl-tests issue 212); LL128's 14 + 14 x 1.9 us at
    # 120/128 of the bandwidth and LL's 6.6 + 14 x 0.6 us at 141 GB/s do not pay.
    no_nvls = 8.4e-6 + 2 * 7 * 3.4e-6 + 2 * 7 / 8 * s / b_u
    on = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 8192, 128)
    off = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 8192, 128, overrides=dict(nccl_nvls=False))
    assert on.choices.nccl_nvls and not off.choices.nccl_nvls
    assert off.provenance["nccl_nvls"] == "override"
    assert _allreduce_8(on) == pytest.approx(nvls, rel=1e-9)
    assert _allreduce_8(off) == pytest.approx(no_nvls, rel=1e-9)
    assert 2 * 7 / 8 * s / _allreduce_8(on) == pytest.approx(484.8e9, rel=2e-3)
    assert 2 * 7 / 8 * s / _allreduce_8(off) == pytest.approx(365.0e9, rel=2e-3)
    # only the scale-up tier loses its reduction; bandwidths and latencies stay the system's
    assert off.links.scaleup.inr_efficiency is None and on.links.scaleup.inr_efficiency == 0.85
    assert off.links.scaleup.bw_Bps == on.links.scaleup.bw_Bps
    assert off.links.scaleout == on.links.scaleout


def test_choice_is_a_no_op_where_the_switches_cannot_reduce():
    # DGX A100: NVSwitch gen 2 has no NVLink SHARP, so NCCL_NVLS_ENABLE=0 changes nothing
    on = make_job("llama3.1-8b", "dgx-a100-hdr", 8, 8192, 128)
    off = make_job("llama3.1-8b", "dgx-a100-hdr", 8, 8192, 128, overrides=dict(nccl_nvls=False))
    assert off.links == on.links
    assert _allreduce_8(off) == _allreduce_8(on)


def test_runs_whose_launch_scripts_turn_nvls_off_are_evaluated_without_it(cat):
    # NCCL_NVLS_ENABLE=0 in the run's own launch environment: NVIDIA/dgxc-benchmarking llama3.1/configure.sh
    # (rows dgxc2409-*), the MLPerf NeMo implementations' config_common.sh (NVIDIA, Oracle, CoreWeave,
    # University of Florida, Cisco, Lambda, Dell; Nebius comments the line out) and Megatron-Bridge's
    # scripts/performance/utils/executors.py (25.11: the megatron-bridge-2511 stacks; 25.09: the row's override;
    # 26.02 and 26.04: executors.py @ v0.3.0 and v0.4.0; 26.04.01: executors.py @ v0.4.2; 26.06: executors.py @ v0.5.1; 26.08: the recipes' env_vars in
    # src/megatron/bridge/perf_recipes/*/*.py) and Megatron-LM's MoE recipes (ENV_VARS NCCL_NVLS_ENABLE: '0' in
    # examples/moe_recipes/qwen3_30b/gb200/bf16_16GPU_TP1PP1EP16.yaml and mxfp8_16GPU_TP1PP1EP16_partial_cg.yaml)
    def nvls(r):
        return r.overrides.get("nccl_nvls", cat.stack(r.stack).nccl_nvls)

    runs = training_runs()
    off = {r.id for r in runs if not nvls(r)}
    expected = {
        r.id
        for r in runs
        if r.id.startswith("dgxc2409-")
        or (r.id.startswith("mlperf-") and "nebius" not in r.id and r.id != "mlperf-v60-dell-b300-llama31-8b-16")
        or r.id.startswith(("mbridge25", "mbridge26", "mlm26"))
    }
    # 12 dgxc rows (9 BF16, 3 FP8), 46 MLPerf v4.0-v5.1 rows (8 of them NVFP4) and 24 of v6.0 (Dell's v6.0 B300
    # configuration exports NCCL_NVLS_ENABLE=1), 25 Megatron-Bridge 25.x rows, 24 of 26.04-26.08 (the 26.08 GB300 and H100 recipes' env_vars, two more since the
    # 26.08 gpt-oss-120b rows joined: their GB200 and GB300 recipes set NCCL_NVLS_ENABLE 0 too, 26.06's executors.py for the B300 and the Llama 3.1 405B rows) and the 4 Qwen3-30B-A3B
    # rows of 26.04.01 (B200, GB200, B300, GB300) with its B200 DeepSeek-V3 row (executors.py @ 17a381f95), 6 DeepSeek-V3 rows of 26.02 and 26.04, 2 Megatron-LM 26.03,
    # and 6 gpt-oss-120b rows (26.04.01 BF16 on GB300, GB200, B300, B200 and H100: executors.py @ v0.4.2; 26.06 MXFP8 on B300: @ 8f341b04f)
    assert len(expected) == 12 + 46 + 24 + 25 + 24 + 5 + 6 + 2 + 6 and off == expected
    assert all("NCCL_NVLS_ENABLE=0" in r.source for r in runs if r.id.startswith("dgxc2409-"))
    bridge = {r.stack for r in runs if r.stack.startswith("megatron-bridge-2511")}
    assert all("NCCL_NVLS_ENABLE=0" in cat.stack(s).field_sources["nccl_nvls"] for s in bridge)


def test_train_cli_no_nvls_times_the_tp_all_reduces_on_nvlink():
    # Llama 3.1 8B on one HGX H100, TP 8 without sequence parallelism, 16 micro-batches of 8,192 tokens:
    # 32 layers x 4 all-reduces (2 forward, 2 backward) x 16 = 2,048 all-reduces of 8,192 x 4,096 x 2 bytes
    # = 64 MiB, all exposed. NVLS: 25 us + 1.125 x 64 MiB / 313.65 GB/s = 265.7 us, plus its chunk steps: NCCL
    # moves 64 MiB in 64 KiB chunks over 16 channels x 8 heads (src/enqueue.cc), 8 steps each beyond the 4 of
    # 128 KiB chunks, at 5.69 us a step (nvlink4 inr_chunk_step_us): 22.8 us, 288.5 us each, 0.5908 s;
    # --no-nvls: NCCL's ring on Simple, 8.4 us + 14 x 3.4 us + 1.75 x 64 MiB / 369 GB/s = 374.3 us each, 0.7666 s
    # (LL128: 14 + 14 x 1.9 us + 1.75 x 64 MiB / (369 GB/s x 120/128) = 380.1 us).
    argv = "train --model llama3.1-8b --system hgx-h100-ib-ndr --gpus 8 --tp 8 --dp 1 --pp 1 --seq-len 8192"
    argv += " --global-batch-size 16 --microbatch-size 1 --recompute none --zero 1 --no-sequence-parallel --json"
    runs = {}
    for flag in ("", " --no-nvls"):
        res = CliRunner().invoke(app, (argv + flag).split())
        assert res.exit_code == 0, res.output
        runs[flag] = json.loads(res.stdout)
    b_u, s, n = 450e9 * 0.82, 8192 * 4096 * 2, 32 * 4 * 16
    on, off = runs[""], runs[" --no-nvls"]
    assert on["stack"]["overlap"]["nccl_nvls"] and not off["stack"]["overlap"]["nccl_nvls"]
    chunk = s / 128 * 5.69e-6 * (1 / 65536 - 1 / 131072)
    assert chunk == pytest.approx(22.76e-6, abs=0.01e-6)
    nvls = 25e-6 + s * 9 / 8 / (b_u * 0.85) + chunk
    assert on["breakdown_s"]["tp_comm_exposed"] == pytest.approx(n * nvls, rel=1e-6)
    assert on["breakdown_s"]["tp_comm_exposed"] == pytest.approx(0.5908, abs=1e-4)
    assert off["breakdown_s"]["tp_comm_exposed"] == pytest.approx(n * (8.4e-6 + 14 * 3.4e-6 + 1.75 * s / b_u), rel=1e-6)
    assert off["breakdown_s"]["compute"] == on["breakdown_s"]["compute"]
