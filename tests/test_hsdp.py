"""HSDP, PyTorch FSDP's HYBRID_SHARD (``zero3_shard_ranks``): ZeRO 3 within a shard group, replicas across groups.

Sources: pytorch/pytorch ``torch/distributed/fsdp/_init_utils.py`` (``_init_process_group_state_for_hybrid_shard``:
with no process group given, the intra-node group of the server's GPUs shards, the inter-node group replicates)
and ``_runtime_utils.py`` (``_reduce_grad``: reduce-scatter in the shard group, then ``all_reduce`` of the shard
over the inter-node group); foundation-model-stack/fms-fsdp @ 4ffb9bdfa30e (README: the 7B ran HSDP;
``fms_fsdp/utils/train_utils.py``: ``hsdp`` is ``ShardingStrategy.HYBRID_SHARD``; ``main_training.py`` passes no
process group)."""

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.runs import training_runs
from hnplan.catalog.schemas import StackChoices
from hnplan.memory.states import model_state_bytes_per_gpu, model_state_table, zero_shard_ranks
from hnplan.planning.training import collectives as coll
from hnplan.planning.training import dp_collectives
from hnplan.planning.training.job import make_job
from hnplan.planning.validation import best_row

FMS_7B = [r for r in training_runs() if r.id.startswith("fmsfsdp-") and "-7b-" in r.id]


def test_the_shard_group_divides_the_data_parallel_ranks():
    # ZeRO 3 at DP 128 with 8-GPU groups: 8; ZeRO 2 is not hybrid-sharded; DP 12 does not split into 8s and
    # DP 4 is smaller than a group: both shard over all their ranks, as FSDP's FULL_SHARD
    got = zero_shard_ranks(np.array([128, 128, 12, 4, 96]), np.array([3, 2, 3, 3, 3]), 8)
    assert got.tolist() == [8, 128, 12, 4, 8]
    assert zero_shard_ranks(np.array([128]), np.array([3])).tolist() == [128]  # no HSDP
    with pytest.raises(ValueError):
        StackChoices(zero3_shard_ranks=1)


def test_hsdp_model_states_are_those_of_one_shard_group(cat):
    # at ZeRO 3 every state is sharded: over 8 ranks a rank holds what FSDP over DP 8 gives it, 16x what FSDP over
    # DP 128 gives it (Llama 2 7B, 6.738e9 parameters, the ZeRO paper's 2 + 2 + 12 bytes: weights and gradients
    # 6.738e9 x 2 / 8 = 1.68 GB each, the optimizer 6.738e9 x 12 / 8 = 10.1 GB, 13.48 GB in all; 0.84 GB over 128)
    m = cat.model("llama2-7b")
    hsdp = model_state_table(m, 1, 1, 128, 1, 3, hsdp_ranks=8)
    dp8 = model_state_table(m, 1, 1, 8, 1, 3)
    fsdp = model_state_table(m, 1, 1, 128, 1, 3)
    assert [float(x) for x in hsdp] == pytest.approx([float(x) for x in dp8], rel=1e-12)
    assert [float(a / b) for a, b in zip(hsdp, fsdp)] == pytest.approx([16.0, 16.0, 16.0], rel=1e-12)
    assert float(hsdp[0]) == pytest.approx(2 * 6.738e9 / 8, rel=1e-3)
    assert float(sum(hsdp)) == pytest.approx(16 * 6.738e9 / 8, rel=1e-3)
    # one plan through model_state_bytes_per_gpu: the same shard group (one implementation), and without HSDP the
    # 128-rank shards; ZeRO 2 is not hybrid-sharded (FSDP's HYBRID_SHARD is ZeRO 3 here)
    one = model_state_bytes_per_gpu(m, 1, 1, 128, 1, 3, hsdp_ranks=8)
    assert one == tuple(float(x) for x in hsdp) == tuple(float(x) for x in dp8)
    assert model_state_bytes_per_gpu(m, 1, 1, 128, 1, 3) == tuple(float(x) for x in fsdp)
    z2 = model_state_bytes_per_gpu(m, 1, 1, 128, 1, 2, hsdp_ranks=8)
    assert z2 == tuple(float(x) for x in model_state_table(m, 1, 1, 128, 1, 2))


def _z3(job, dp, mb=1):
    df = pd.DataFrame({"tp": [1], "dp": [dp], "cp": [1], "ep": [1], "zero_stage": [3], "pp": [1], "etp": [1]})
    df["num_microbatches"], df["virtual_stages"] = mb, 1
    long = np.array([10.0])  # hidden behind a long compute: the first gather and the slowdown exposed
    return dp_collectives.dp_comm_exposed(job, df, long, long, long)[0]


def test_hsdp_gathers_in_the_server_and_all_reduces_the_shard_across_servers(cat):
    # Llama 2 7B on 16 DGX A100 (128 GPUs), bf16 gathers and reductions, no overlap slowdown: the work per layer and
    # micro-batch is two all-gathers and a reduce-scatter of the layer's 2-byte parameters in the server, then an
    # all-reduce of its eighth of the gradient over the 16 servers (one GPU of each: stride 8). What is exposed is
    # the first layer's all-gather, now over the 8 GPUs of a server (NVLink) instead of all 128, and, as FSDP1's
    # _post_backward_final_callback waits for the post-backward and all-reduce streams at the end of the backward
    # (the stack's zero3_grad_wait: microbatch), the last layer's reduce-scatter and its HSDP all-reduce
    ov = dict(grad_reduce_bytes=2.0, overlap_gemm_slowdown=0.0)
    fsdp = make_job("llama2-7b", "dgx-a100-hdr", 128, 4096, 256, "bf16", cat, stack="pytorch-eager-2403", overrides=ov)
    hsdp = make_job(
        "llama2-7b", "dgx-a100-hdr", 128, 4096, 256, "bf16", cat, stack="pytorch-eager-2403",
        overrides={**ov, "zero3_shard_ranks": 8},
    )  # fmt: skip
    assert hsdp.choices.zero3_grad_wait == "microbatch"
    layer = (hsdp.params.total) / 32 * 2.0  # bytes of one layer's share of the parameters (bf16)
    ag8, rs8 = (coll.collective_s(hsdp, op, layer, [8], [1])[0] for op in ("allgather", "reducescatter"))
    ag128, rs128 = (coll.collective_s(fsdp, op, layer, [128], [1])[0] for op in ("allgather", "reducescatter"))
    ar = coll.collective_s(hsdp, "allreduce", layer / 8, [16], [8])[0]  # the eighth across the 16 servers
    assert _z3(hsdp, 128) == pytest.approx(ag8 + rs8 + ar, rel=1e-9)
    assert _z3(fsdp, 128) == pytest.approx(ag128 + rs128, rel=1e-9)  # no replicas: no all-reduce
    assert ag8 < ag128 and ar > 0
    # the replicas' group: 16 ranks 8 apart, one per server, across the InfiniBand fabric
    g = hsdp.group(16, 8)
    assert (g.domains, g.per_domain) == (16, 1)
    # with the slowdown back, the hidden work is charged: the 32 layers' collectives less the exposed floor
    slow = make_job(
        "llama2-7b", "dgx-a100-hdr", 128, 4096, 256, "bf16", cat, stack="pytorch-eager-2403",
        overrides={**ov, "overlap_gemm_slowdown": 0.14, "zero3_shard_ranks": 8},
    )  # fmt: skip
    floor = ag8 + rs8 + ar
    hidden = 32 * (2 * ag8 + rs8 + ar) - floor
    assert _z3(slow, 128) == pytest.approx(floor + 0.14 * hidden, rel=1e-6)


def _hsdp_7b_jobs(cat, choice: str) -> dict:
    """Llama 2 7B on 128 A100 (16 servers) under HSDP in 8-GPU shard groups, bf16 gradient reduction, no GEMM
    slowdown, with the stack choice ``choice`` at each of its two values ``microbatch`` and ``step``."""
    ov = dict(grad_reduce_bytes=2.0, overlap_gemm_slowdown=0.0, zero3_shard_ranks=8)
    return {
        v: make_job(
            "llama2-7b",
            "dgx-a100-hdr",
            128,
            4096,
            256,
            "bf16",
            cat,
            stack="pytorch-eager-2403",
            overrides={**ov, choice: v},
        )  # fmt: skip
        for v in ("microbatch", "step")
    }


def test_zero3_waits_for_the_last_gradients_per_micro_batch_or_once_a_step(cat):
    # 4 micro-batches hidden behind a long compute, no slowdown. PyTorch FSDP (zero3_grad_wait: microbatch) waits
    # at the end of every backward: 4 x (AG1 + RS1 + AR1); Megatron-FSDP (step) reduce-scatters every backward but
    # waits once, in finish_grad_sync before the optimizer: 4 x AG1 + RS1 + AR1 (AG1, RS1: one layer's gather and
    # reduce-scatter in the 8-GPU shard group; AR1: its eighth all-reduced over the 16 servers)
    jobs = _hsdp_7b_jobs(cat, "zero3_grad_wait")
    job = jobs["step"]
    layer = job.params.total / 32 * 2.0
    ag1, rs1 = (coll.collective_s(job, op, layer, [8], [1])[0] for op in ("allgather", "reducescatter"))
    ar1 = coll.collective_s(job, "allreduce", layer / 8, [16], [8])[0]
    assert _z3(jobs["microbatch"], 128, mb=4) == pytest.approx(4 * (ag1 + rs1 + ar1), rel=1e-9)
    assert _z3(jobs["step"], 128, mb=4) == pytest.approx(4 * ag1 + rs1 + ar1, rel=1e-9)
    # one micro-batch: the same either way
    assert _z3(jobs["step"], 128) == pytest.approx(_z3(jobs["microbatch"], 128), rel=1e-12)


@pytest.mark.parametrize("run", FMS_7B, ids=lambda r: r.id)
def test_fms_fsdp_7b_runs_hsdp_within_each_server(cat, run):
    assert run.overrides["zero3_shard_ranks"] == 8 and run.fixed["zero_stage"] == 3
    hsdp = best_row(run, cat)
    fsdp = best_row(run.model_copy(update={"overrides": {"grad_reduce_bytes": 2.0}}), cat)
    # the AdamW step and the gradient norm run over an eighth of the model, not a 128th (96th): 16x (12x)
    assert hsdp["t_optimizer_s"] / fsdp["t_optimizer_s"] == pytest.approx(run.gpus / 8, rel=1e-9)
    assert hsdp["optimizer_bytes"] / fsdp["optimizer_bytes"] == pytest.approx(run.gpus / 8, rel=1e-6)
    assert hsdp["fits"]
    # on the 400 / 800 Gb/s per server the runs had (the PyTorch blog), HSDP's all-reduces of an eighth of each layer
    # by the 8 GPUs of a server carry 2 (n - 1) / n of a layer across its boundary (n = 16 / 12 servers: 1.88 / 1.83),
    # FSDP's two all-gathers and reduce-scatter over every rank 3 (p - 1) / p (p = 128 / 96: 2.98 / 2.97): less is
    # exposed, and the step is shorter by under 1 %, the optimizer step over an eighth of the model included
    assert hsdp["t_dp_comm_exposed_s"] < fsdp["t_dp_comm_exposed_s"]
    assert 0.99 < hsdp["step_time_s"] / fsdp["step_time_s"] < 1.0
    # docs/training.md: the optimizer states 6.738e9 parameters x 16 bytes (fp32 master weights, an fp32 gradient
    # copy, AdamW's two moments: hnplan.memory.state_accounting with bf16 gradients) / 8 = 13.5 GB; 73.2 GB
    # (68.2 GiB, not 68 GB) a GPU in all, the activations with what foundation-model-stack's eager RMSNorm (the fp32
    # copy pow keeps, 4h per norm) and SwiGLU (the activation's output, 2f) keep: 32 layers x 8,192 tokens x
    # (8 x 4,096 + 2 x 11,008) bytes = 14.36 GB more than the fused count's 58.0 GB
    assert hsdp["optimizer_bytes"] == pytest.approx(13.48e9, rel=1e-3)
    assert hsdp["memory_per_gpu_bytes"] == pytest.approx(73.19e9, rel=1e-3)
    assert hsdp["memory_per_gpu_bytes"] / 2**30 == pytest.approx(68.2, abs=0.05)


def test_hsdp_all_reduces_every_backward_or_the_last_micro_batch_only(cat):
    # 4 micro-batches with no compute to hide behind, no slowdown: every layer's collectives of every micro-batch are
    # exposed, AG, RS (one layer's gather and reduce-scatter in the 8-GPU shard group) and AR (its eighth all-reduced
    # over the 16 servers). PyTorch FSDP (hsdp_all_reduce: microbatch; FSDP1's _reduce_grad all-reduces after each
    # reduce-scatter) all-reduces in all 4 backwards: 4 x 32 x (2 AG + RS + AR); Megatron-FSDP (step) only in the
    # last, when is_last_microbatch (megatron_fsdp.py _process_post_backward_gradients): 4 x 32 x (2 AG + RS) + 32 AR
    assert cat.stack("pytorch-eager-2403").hsdp_all_reduce == "microbatch"
    assert cat.stack("megatron-core").hsdp_all_reduce == "step"
    jobs = _hsdp_7b_jobs(cat, "hsdp_all_reduce")
    job = jobs["step"]
    layer = job.params.total / 32 * 2.0
    ag, rs = (coll.collective_s(job, op, layer, [8], [1])[0] for op in ("allgather", "reducescatter"))
    ar = coll.collective_s(job, "allreduce", layer / 8, [16], [8])[0]
    df = pd.DataFrame({"tp": [1], "dp": [128], "cp": [1], "ep": [1], "zero_stage": [3], "pp": [1], "etp": [1]})
    df["num_microbatches"], df["virtual_stages"] = 4, 1
    none = np.array([0.0])
    got = {k: dp_collectives.dp_comm_exposed(j, df, none, none, none)[0] for k, j in jobs.items()}
    assert got["microbatch"] == pytest.approx(4 * 32 * (2 * ag + rs + ar), rel=1e-9)
    assert got["step"] == pytest.approx(4 * 32 * (2 * ag + rs) + 32 * ar, rel=1e-9)
    # one micro-batch: the same either way
    one = {k: _z3(j, 128) for k, j in jobs.items()}
    assert one["step"] == pytest.approx(one["microbatch"], rel=1e-12)
