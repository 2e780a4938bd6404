"""Qwen3-235B-A22B on 64 H100 in fp8 under ZeRO-3 TP2 DP32 (once the search's answer): about 195 s of DP traffic exposed a
step (sequence 8,192, 2,048 sequences: the compare command's default shape), by hand: the bytes ZeRO-3 moves
every micro-batch, and the memory that rules the faster bf16 plan out in fp8 (and, with the gathered layers in
flight counted, every plan of the 64 GPUs in fp8)."""

import numpy as np
import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.planning.training import ParallelPlan, best_plan, estimate_plan, make_job
from hnplan.planning.training import collectives as co
from hnplan.planning.training import components as c
from hnplan.planning.training.plan import plans_frame

JOB = ("qwen3-235b-a22b", "hgx-h100-ib-ndr", 64, 8192, 2048)
# the launches alone: at EP 1 the 128 local experts' kernels carry the default stack's fitted MoE host work
# (moe_host_us_per_kernel, 37.5 us each), which makes every such plan host-bound; these tests isolate ZeRO-3's
# traffic and the fp8 weight copies' memory
GPU_SIDE = {"moe_host_us_per_kernel": 0.0}
ZERO3 = ParallelPlan(tp=2, pp=1, dp=32, microbatch_size=1, zero_stage=3, recompute="full")
H, LAYERS = 4096, 94
# per layer: 128 experts x 3 x h x 1,536 (SwiGLU); dense: attention (64 query, 4 KV heads of 128), the router
# (h x 128), two RMSNorms; plus embedding and LM head (151,936 x h, untied) and the final norm (the model leaves
# out Qwen3's per-head q/k norms, 2 x 128 weights a layer)
EXPERT = LAYERS * 128 * 3 * H * 1536  # 227,096,395,776
ATTN = H * 64 * 128 + 2 * H * 4 * 128 + 64 * 128 * H  # q, k, v, o projections
DENSE = LAYERS * (ATTN + H * 128 + 2 * H) + 2 * 151936 * H + H  # 7,997,214,720


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_parameters_a_tp_rank_gathers(cat):
    job = make_job(*JOB, "fp8", cat)
    assert job.params.expert_params == EXPERT
    assert job.params.total - job.params.expert_params == pytest.approx(DENSE, rel=1e-9)
    dense, expert = c.local_params(job, plans_frame([ZERO3]))
    # EP 1: every rank holds all 128 experts, half of each at TP 2: 113.5B expert + 4.0B dense parameters
    assert (float(dense[0]), float(expert[0])) == pytest.approx((DENSE / 2, EXPERT / 2))


def test_zero3_moves_every_parameter_three_times_a_micro_batch(cat):
    """ZeRO-3 (arXiv:1910.02054 Sec. 7) gathers each layer's bf16 parameters for the forward and again for the
    backward of every micro-batch and reduce-scatters its fp32 gradients: per micro-batch 2 x 2 + 4 = 8 bytes a
    parameter, 940 GB for the 117.5B a TP rank holds. Over 32 ranks, four a server, at about 185 GB/s of bus
    bandwidth (4 NICs of 47 GB/s a server for the group) that is 4.9 s, and a step has 2,048 / 32 = 64
    micro-batches: 316 s of DP traffic, of which what the 2.2 s of compute per micro-batch cannot hide is
    exposed, plus the stack's 14 % slowdown of the compute the hidden part runs beside."""
    job = make_job(*JOB, "fp8", cat, overrides=GPU_SIDE)
    per_rank = (DENSE + EXPERT) / 2
    assert 8 * per_rank == pytest.approx(940e9, rel=0.01)
    size, stride = np.array([32]), np.array([2])
    per_mb = 0.0
    for n in (DENSE / 2, EXPERT / 2):  # one unit a layer, as FSDP wraps them
        ag = co.collective_s(job, "allgather", np.array([n / LAYERS * 2.0]), size, stride)[0]
        rs = co.collective_s(job, "reducescatter", np.array([n / LAYERS * 4.0]), size, stride)[0]
        per_mb += LAYERS * (2 * ag + rs)
    assert per_mb == pytest.approx(4.9, abs=0.1)
    est = estimate_plan(job, ZERO3)
    m = est.num_microbatches
    assert m == 64
    t_c = est.breakdown_s["compute"] / m  # 2.2 s
    hand = m * (per_mb - t_c) + job.choices.overlap_gemm_slowdown * m * t_c
    assert est.breakdown_s["dp_comm_exposed"] == pytest.approx(hand, rel=0.02)
    assert est.breakdown_s["dp_comm_exposed"] == pytest.approx(193.3, abs=0.5)


def test_fp8_weight_copies_leave_no_plan_and_fp8_params_lift_it(cat):
    """bf16's best plan (TP2 PP16 DP2 EP2, ZeRO-1, 168 s; TP2 PP32 EP1 without ZeRO is 0.3 % behind, its 128 local
    experts' GEMMs in 32 rounds of Transformer Engine's four streams) fits in bf16 but not in fp8, whose cached fp8 weight and
    transpose add 2 bytes a GEMM weight; with fp8 parameters (no bf16 copy) it fits again and beats ZeRO-3 by
    about 2x. ZeRO-3 does not rescue fp8 on 64 GPUs either: ZeRO-3 shards the bf16 weights, but Transformer Engine's
    cached fp8 cast and transpose stay whole on every rank for every layer it computes (2 bytes a GEMM weight of
    the 117.5B a TP rank holds: Megatron-FSDP gives Transformer Engine no FSDP group, so the module's workspace is
    never resharded; hnplan.memory.state_accounting [9]); at TP2 EP1 one FSDP unit (a layer: its 128 experts and
    attention over TP 2) is 1.24B parameters a rank, two of them gathered in bf16 and two units' fp32 gradients in
    flight (hnplan.memory.zero_working). The one fp8 plan that fits is TP4 PP16 without ZeRO, at the edge and
    slower than bf16. The
    published H100 recipe for this model runs on 256 GPUs (Megatron-Bridge qwen3_workload_base_configs.py: TP2
    PP8 VP4 EP32)."""
    unit = (EXPERT / LAYERS + ATTN + H * 128 + 2 * H) / 2  # one layer on a TP-2 rank, EP 1: 1,243,877,376
    assert unit == 1_243_877_376
    fp8_job = make_job(*JOB, "fp8", cat, overrides=GPU_SIDE)
    z3 = estimate_plan(fp8_job, ZERO3)
    rank = (DENSE + EXPERT) / 2  # parameters a TP-2 rank holds
    unq = (LAYERS * 2 * H + 2 * 151936 * H + H) / 2  # norms, embedding, head: bf16, no cached cast
    weights = (rank - unq) * (2 / 32 + 2) + unq * 2 / 32  # bf16 shards + the whole fp8 cast and transpose
    assert z3.memory_breakdown_gib["params_gib"] == pytest.approx((weights + 2 * 2 * unit) / 2**30, rel=1e-6)
    grads = rank / 32 * 4  # fp32 gradient shards
    assert z3.memory_breakdown_gib["grads_gib"] == pytest.approx((grads + 2 * 4 * unit) / 2**30, rel=1e-6)
    assert not z3.fits and z3.memory_breakdown_gib["total_gib"] == pytest.approx(315.2, abs=0.1)
    # in fp8 one plan fits, at the edge: TP 4, PP 16, no ZeRO (its embedding, head and norms keep no fp8 copy,
    # Megatron-LM gpt_model.py: no Transformer Engine module), slower than bf16's best
    (fp8,), _, _ = best_plan(*JOB, "fp8", catalog=cat, overrides=GPU_SIDE)
    assert (fp8.plan.tp, fp8.plan.pp, fp8.plan.ep, fp8.plan.zero_stage) == (4, 16, 1, 0)
    assert fp8.memory_breakdown_gib["total_gib"] == pytest.approx(79.0, abs=0.05)  # of the H100's 79.11
    (bf16,), _, _ = best_plan(*JOB, "bf16", catalog=cat, overrides=GPU_SIDE)
    assert (bf16.plan.tp, bf16.plan.pp, bf16.plan.ep, bf16.plan.zero_stage) == (2, 16, 2, 1)
    assert fp8.step_time_s > 1.3 * bf16.step_time_s
    same = estimate_plan(fp8_job, bf16.plan)
    # the cached cast doubles the GEMM weights' bytes; the embedding, head and norms stay at bf16's 2
    assert not same.fits
    assert 1.9 < same.memory_breakdown_gib["params_gib"] / bf16.memory_breakdown_gib["params_gib"] < 2.0
    lifted = estimate_plan(make_job(*JOB, "fp8", cat, overrides={**GPU_SIDE, "fp8_params": True}), bf16.plan)
    assert lifted.fits and lifted.step_time_s < z3.step_time_s / 2
