"""Host time in the step: kernel launches per operator, CUDA-graph scopes, device-host syncs (hnplan.compute.host)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.host import (
    ROUTER_PREPROCESS_KERNELS,
    SYNC_LATENCY_S,
    captured,
    graph_scope,
    kernels_per_row,
    router_host_s,
    stage_times,
    sync_s,
)
from hnplan.compute.parts import training_part_times
from hnplan.planning.training import ParallelPlan, estimate_training_step
from hnplan.planning.training.components import stack_choices

LAUNCH_S = 13.1e-6  # the megatron-core stacks' kernel_launch_us
MOE_KERNEL_S = (13.1 + 37.5) * 1e-6  # their kernel_launch_us + moe_host_us_per_kernel: a kernel of the MoE scopes


def test_kernels_per_row_by_hand():
    ch = StackChoices()
    # Transformer Engine GroupedLinear: one GEMM per local expert; a grouped GEMM launches one
    assert kernels_per_row("expert_down", "moe-layer", "gemm", 16.0, ch) == 16.0
    assert kernels_per_row("expert_up_x_mxfp8", "moe-layer", "elementwise", 16.0, ch) == 16.0
    # the fused multi-tensor fp8 cast-transpose: 64 splits a launch (the weights are cast one by one)
    assert kernels_per_row("expert_down_dy_fp8", "moe-layer", "elementwise", 65.0, ch, True) == 2.0
    assert kernels_per_row("expert_down_w_fp8", "moe-layer", "elementwise", 65.0, ch, True) == 65.0
    assert kernels_per_row("expert_up", "moe-layer", "gemm", 16.0, StackChoices(expert_gemm_launch="grouped")) == 1.0
    assert kernels_per_row("expert_act", "moe-layer", "elementwise", 16.0, ch) == 1.0  # one pass over all rows
    # eager RMSNorm: to(fp32), pow, mean, add, rsqrt, mul, to(bf16), mul by the weight = 8 kernels
    eager = StackChoices(norm_kernel="eager", rope_kernel="eager")
    assert kernels_per_row("attn_norm", "dense-layer", "elementwise", 1.0, eager) == 8.0
    assert kernels_per_row("rope", "dense-layer", "elementwise", 1.0, eager) == 10.0  # 5 for q, 5 for k
    assert kernels_per_row("attn_norm", "dense-layer", "elementwise", 1.0, ch) == 1.0


def test_graph_scopes_follow_megatron_layer_halves():
    assert graph_scope("qkv_proj", "moe-layer") == "attn"
    assert graph_scope("attention", "dense-layer") == "attn"
    assert graph_scope("mlp_up_x_mxfp8", "dense-layer") == "mlp"
    assert graph_scope("router", "moe-layer") == "moe_router"
    assert graph_scope("mlp_norm", "moe-layer") == "moe_router"
    assert graph_scope("shared_expert_up", "moe-layer") == "moe_preprocess"
    assert graph_scope("moe_permute", "moe-layer") == "moe"
    assert graph_scope("lm_head", "head") is None  # never captured
    ch = StackChoices(cuda_graph_scope=("moe_router", "moe_preprocess"))
    assert captured("moe_router", ch) and not captured("attn", ch) and not captured(None, ch)
    full = StackChoices(cuda_graph_scope=("full_iteration",))
    assert captured("attn", full) and captured(None, full)
    # router and preprocess kernels the rows do not list: 17 with DeepEP less hnplan's router row
    # (each at the launch and the default stack's MoE host work per kernel)
    assert router_host_s(StackChoices(ep_dispatcher="flex")) == pytest.approx(16 * MOE_KERNEL_S)
    assert router_host_s(StackChoices()) == pytest.approx((ROUTER_PREPROCESS_KERNELS["alltoall"] - 1) * MOE_KERNEL_S)
    assert router_host_s(ch) == 0.0
    assert sync_s(StackChoices()) == pytest.approx(SYNC_LATENCY_S + LAUNCH_S)


def test_stage_times_by_hand():
    # GPU-bound, no sync: nothing changes
    f, b = stage_times(3.0, 6.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1e-3)
    assert (f, b) == (3.0, 6.0)
    # host-bound everywhere: 4 MoE layers, forward 1 ms GPU / 2 ms host each, one sync each at 0.1 ms:
    # synced stretch 4 x max(1, 2) + 4 x 0.1 = 8.4 ms; backward 8 ms GPU / 10 ms host, one free stretch:
    # max(8, 10) = 10 ms, all of its 2 ms idle on the backward (the free stretch holds no forward host time)
    f, b = stage_times(4e-3, 8e-3, 8e-3, 10e-3, 4e-3, 8e-3, 4.0, 1e-4)
    assert f == pytest.approx(8.4e-3) and b == pytest.approx(10e-3)
    # a dense stage, host 12 ms (4 forward, 8 backward) over 9 ms of GPU (3 + 6): 3 ms idle, 1/3 to the forward
    f, b = stage_times(3e-3, 6e-3, 4e-3, 8e-3, 0.0, 0.0, 0.0, 0.0)
    assert f == pytest.approx(4e-3) and b == pytest.approx(8e-3)


@settings(max_examples=60, deadline=None)
@given(
    g=st.tuples(*(st.floats(1e-4, 1.0) for _ in range(2))),
    h=st.tuples(*(st.floats(0.0, 1.0) for _ in range(2))),
    frac=st.floats(0.0, 1.0),
    n=st.integers(0, 64),
)
def test_stage_times_never_below_the_gpu_nor_the_host(g, h, frac, n):
    g_f, g_b = g
    h_f, h_b = h
    f, b = stage_times(g_f, g_b, h_f, h_b, frac * g_f, frac * h_f, float(n), 2e-5)
    assert f >= g_f * (1 - 1e-12) and b >= g_b * (1 - 1e-12)
    assert f + b >= max(g_f + g_b, h_f + h_b) * (1 - 1e-12)


def test_qwen3_moe_layer_host_time_by_hand(cat):
    # Qwen3-30B-A3B on a B200, micro-batch 1 of 4,096 tokens, EP 8: 128 / 8 = 16 local experts. The forward of
    # an MoE layer launches, outside the stack's moe_router / moe_preprocess graphs: attn_norm, qkv_proj and its
    # MXFP8 cast, the query and key head norms (Qwen3's QK-norm), rope, attention, o_proj and its cast,
    # attn_residual (10), the permute, expert_up and expert_down with their casts one per expert (4 x 16 = 64),
    # expert_act, mlp_residual (3): 77 kernels. The 10 of the attention half cost the launch alone (13.1 us), the
    # 67 of the MoE scopes the launch and the stack's MoE host work per kernel (13.1 + 37.5 us):
    # 10 x 13.1 + 67 x 50.6 = 131.0 + 3,390.2 = 3,521.2 us
    ch = stack_choices(cat.stack("megatron-bridge-2511-mxfp8"))
    assert ch.moe_host_us_per_kernel == 37.5
    shapes = pd.DataFrame([dict(microbatch_size=1, tp=1, cp=1, ep=8)])
    acc = cat.accelerator("b200")
    t = training_part_times(cat.model("qwen3-30b-a3b"), acc, shapes, 4096, "fp8", "flash", True, ch).iloc[0]
    assert t["moe_host_fwd"] == pytest.approx(10 * LAUNCH_S + 67 * MOE_KERNEL_S)
    assert t["moe_host_fwd"] == pytest.approx(3521.2e-6)
    launches = ch.model_copy(update={"moe_host_us_per_kernel": 0.0})  # the launches alone: 77 x 13.1 us
    tl = training_part_times(cat.model("qwen3-30b-a3b"), acc, shapes, 4096, "fp8", "flash", True, launches).iloc[0]
    assert tl["moe_host_fwd"] == pytest.approx(77 * LAUNCH_S)
    # without the graphs: + mlp_norm and the router row, + 16 more router/preprocess kernels of DeepEP (17 - 1)
    t0 = training_part_times(
        cat.model("qwen3-30b-a3b"),
        acc,
        shapes,
        4096,
        "fp8",
        "flash",
        True,
        ch.model_copy(update={"cuda_graph_scope": ()}),
    ).iloc[0]
    assert t0["moe_host_fwd"] == pytest.approx(10 * LAUNCH_S + (67 + 2 + 16) * MOE_KERNEL_S)
    # the micro-batch is host-bound in that layer: launching takes longer than the kernels run
    assert t["moe_host_fwd"] > t["moe_fwd"]


def test_delayed_scaling_casts_expert_splits_in_one_fused_launch_on_hopper(cat):
    # Transformer Engine's split_quantize: per-tensor delayed scaling with transposed copies (Hopper) runs the
    # fused multi-tensor cast-transpose, up to 64 splits a launch; without transposes (Blackwell) each split is
    # its own cast. Qwen3-30B-A3B at EP 8 holds 16 local experts: the forward casts the inputs of expert_up and
    # expert_down (2 x 16 kernels on B200, 2 x 1 on H100), the backward their output gradients (the same):
    # 2 x (16 - 1) = 30 launches fewer each way on H100. The rest is launched alike, but for the transpose of
    # the QKV input that H100 adds in the forward (the norm writes the row-wise fp8 copy, 1 kernel): 29 and 30
    ch = stack_choices(cat.stack("megatron-core")).model_copy(update={"moe_host_us_per_kernel": 0.0})  # launches
    assert ch.fp8_recipe == "delayed" and ch.fp8_cast_transpose_fusion
    shapes = pd.DataFrame([dict(microbatch_size=1, tp=1, cp=1, ep=8)])
    m = cat.model("qwen3-30b-a3b")
    t = {
        a: training_part_times(m, cat.accelerator(a), shapes, 4096, "fp8", "flash", True, ch).iloc[0]
        for a in ("h100-sxm", "b200")
    }
    for part, fewer in (("moe_host_fwd", 29), ("moe_host_bwd", 30)):
        assert t["b200"][part] - t["h100-sxm"][part] == pytest.approx(fewer * LAUNCH_S)
    # current scaling has no fused path: an amax and a cast kernel per split, 2 x (2 x 16 - 1) more launches,
    # and an amax before the casts of the QKV and output-projection inputs (the QKV cast no longer fused into
    # the norm: its amax, then one cast-transpose where delayed scaling ran the transpose alone): 2 more
    cur = ch.model_copy(update={"fp8_recipe": "current"})
    tc = training_part_times(m, cat.accelerator("h100-sxm"), shapes, 4096, "fp8", "flash", True, cur).iloc[0]
    assert tc["moe_host_fwd"] - t["h100-sxm"]["moe_host_fwd"] == pytest.approx((2 * (2 * 16 - 1) + 2) * LAUNCH_S)


NO_HOST = dict(kernel_launch_us=0.0, moe_host_us_per_kernel=0.0, moe_host_syncs_per_layer=0)


def _qwen3(cat, system, mb, **over):
    plan = ParallelPlan(tp=1, pp=1, dp=8, ep=8, microbatch_size=mb, zero_stage=1)
    return estimate_training_step(
        "qwen3-30b-a3b", system, 8, plan, 4096, 512, "fp8", cat, stack="megatron-bridge-2511-mxfp8", overrides=over
    )


def test_host_time_slows_small_micro_batches_more(cat):
    # the same model and plan on one 8-GPU server: micro-batch 1 is host-bound, micro-batch 4 runs 4x the tokens
    # per launch; the host costs micro-batch 1 a larger share of its step
    slow = {}
    for mb in (1, 4):
        with_host = _qwen3(cat, "dgx-b200-ib-ndr", mb).step_time_s
        without = _qwen3(cat, "dgx-b200-ib-ndr", mb, **NO_HOST).step_time_s
        assert with_host > without
        slow[mb] = with_host / without
    assert slow[1] > slow[4]
    # monotone in the launch cost; capturing the whole iteration in a graph leaves only the syncs
    steps = [_qwen3(cat, "dgx-b200-ib-ndr", 1, kernel_launch_us=us).step_time_s for us in (0.0, 5.0, 13.1, 30.0)]
    assert np.all(np.diff(steps) > 0)
    graphed = _qwen3(cat, "dgx-b200-ib-ndr", 1, cuda_graph_scope=["full_iteration"], moe_host_syncs_per_layer=0)
    assert graphed.step_time_s == pytest.approx(_qwen3(cat, "dgx-b200-ib-ndr", 1, **NO_HOST).step_time_s)


def test_large_dense_layers_hide_their_launches(cat):
    # Llama 3.1 70B, TP 8, micro-batch 1 of 8,192 tokens on H100: a layer's kernels run for milliseconds, its
    # ~60 launches take under 1 ms, so the host never shows and the step is the device-time step
    plan = ParallelPlan(tp=8, pp=1, dp=8, microbatch_size=1, zero_stage=1, recompute="selective")
    step = {
        us: estimate_training_step(
            "llama3.1-70b", "hgx-h100-ib-ndr", 64, plan, 8192, 64, "bf16", cat, overrides={"kernel_launch_us": us}
        ).step_time_s
        for us in (0.0, 13.1)
    }
    assert step[13.1] == step[0.0]


def test_full_recomputation_syncs_again(cat):
    # full recomputation re-runs each MoE layer's forward, its router and its device-host sync: with one sync per
    # layer costing 1 ms (an exaggerated launch cost), 48 layers x 64 micro-batches x (1 + 1) syncs dominate
    plan = ParallelPlan(tp=1, pp=1, dp=8, ep=8, microbatch_size=1, zero_stage=1, recompute="full")

    def step(syncs):
        return estimate_training_step(
            "qwen3-30b-a3b",
            "dgx-b200-ib-ndr",
            8,
            plan,
            4096,
            512,
            "fp8",
            cat,
            stack="megatron-bridge-2511-mxfp8",
            overrides={"kernel_launch_us": 1000.0, "moe_host_syncs_per_layer": syncs},
        ).step_time_s

    # each sync idles the GPU 10 us + one 1 ms launch; the stretches themselves are host-bound either way
    extra = step(1) - step(0)
    assert extra == pytest.approx(48 * 64 * 2 * (10e-6 + 1e-3), rel=0.02)


def test_grace_hosts_dispatch_slower(cat):
    # NVIDIA/TransformerEngine issue 2053: one torch.nn.Linear forward costs 37.08 us of CPU on GB200 (Grace) and
    # 13.48 us on a DGX H100 (x86): the stacks' per-call figure, measured on x86, times 37.08 / 13.48 = 2.75
    from hnplan.planning.training.job import host_scaled, make_job

    gb200 = cat.system("gb200-nvl72")
    assert gb200.host_dispatch_factor == pytest.approx(37.08 / 13.48, abs=0.005)
    assert host_scaled(StackChoices(), gb200).kernel_launch_us == pytest.approx(13.1 * 2.75)
    x86 = cat.system("dgx-b200-ib-ndr")
    assert x86.host_dispatch_factor is None and host_scaled(StackChoices(), x86) == StackChoices()
    job = make_job("qwen3-30b-a3b", "gb200-nvl72", 8, 4096, 512, "fp8", cat, stack="megatron-bridge-2511-mxfp8")
    assert job.choices.kernel_launch_us == pytest.approx(36.025)
    assert job.provenance["kernel_launch_us"].endswith("x 2.75 (system gb200-nvl72 host_dispatch_factor)")
    # the sync's idle grows with the launch after it: 10 us + 36.0 us on Grace
    assert sync_s(job.choices) == pytest.approx(SYNC_LATENCY_S + 36.025e-6)


def test_moe_host_work_per_kernel_by_hand():
    # one MoE layer's forward rows as the operator table lists them, 16 local experts, nothing captured, launch
    # 13.1 us, MoE host work 43 us a kernel: qkv_proj (attention half: 13.1 us), router (moe_router, 56.1 us),
    # shared_expert_up (moe_preprocess, 56.1 us), expert_up (moe, 16 GEMMs: 16 x 56.1 = 897.6 us); the router and
    # all-to-all preprocess kernels the rows do not list: 30 x 56.1 = 1,683 us a pass
    from hnplan.compute.host import MOE_SCOPES, moe_kernel_host_s, row_host_s

    ch = StackChoices(kernel_launch_us=13.1, moe_host_us_per_kernel=43.0)
    rows = [
        (name, "moe-layer", kind, "fwd", *[0.0] * 6, g)
        for name, kind, g in (
            ("qkv_proj", "gemm", 1.0),
            ("router", "gemm", 1.0),
            ("shared_expert_up", "gemm", 1.0),
            ("expert_up", "gemm", 16.0),
        )
    ]
    assert [graph_scope(r[0], r[1]) for r in rows] == ["attn", *MOE_SCOPES]
    got = row_host_s(rows, ch, 16.0)
    assert got * 1e6 == pytest.approx([13.1, 56.1, 56.1, 897.6])
    assert moe_kernel_host_s(ch) == pytest.approx(56.1e-6)
    assert router_host_s(ch) == pytest.approx(1683e-6)
    # a dense layer's rows and a captured scope take none of it
    dense = [("mlp_up", "dense-layer", "gemm", "fwd", *[0.0] * 6, 1.0)]
    assert row_host_s(dense, ch)[0] == pytest.approx(13.1e-6)
    moe_graph = ch.model_copy(update={"cuda_graph_scope": ("moe",)})
    assert row_host_s(rows, moe_graph, 16.0)[3] == 0.0


@settings(max_examples=12, deadline=None)
@given(st.floats(0.0, 150.0), st.floats(0.0, 150.0))
def test_more_moe_host_work_never_makes_a_step_faster(cat, a, b):
    lo, hi = sorted((a, b))
    steps = [_qwen3(cat, "dgx-b200-ib-ndr", 1, moe_host_us_per_kernel=us).step_time_s for us in (lo, hi)]
    assert steps[1] >= steps[0]


def test_moe_host_work_leaves_dense_and_graphed_steps_alone(cat):
    # a dense model has no MoE scope; a full-iteration graph captures the MoE layer's kernels
    plan = ParallelPlan(tp=8, pp=1, dp=1, microbatch_size=1, zero_stage=1)
    dense = [
        estimate_training_step(
            "llama3.1-8b", "dgx-b200-ib-ndr", 8, plan, 8192, 8, "bf16", cat, overrides={"moe_host_us_per_kernel": us}
        ).step_time_s
        for us in (0.0, 1000.0)
    ]
    assert dense[0] == dense[1]
    graphed = [
        _qwen3(cat, "dgx-b200-ib-ndr", 1, cuda_graph_scope=["full_iteration"], moe_host_us_per_kernel=us).step_time_s
        for us in (0.0, 1000.0)
    ]
    assert graphed[0] == graphed[1]


def test_moe_host_work_carries_its_fit(cat):
    # one value for the Megatron-Core family, fitted by least squares over their published eager MoE runs, with
    # its rows, leave-one-out errors and the published per-call host costs that bound it; not scaled on Grace
    from hnplan.planning.training.job import host_scaled

    family = (
        "megatron-core",
        "megatron-core-ep-overlap",
        "megatron-bridge-2511",
        "megatron-bridge-2511-mxfp8",
        "megatron-bridge-2608-mxfp8",
        "megatron-bridge-2604-mxfp8",
    )
    for sid in family:
        s = cat.stack(sid)
        assert s.moe_host_us_per_kernel == 37.5
        assert "least squares" in s.field_sources["moe_host_us_per_kernel"] or sid == "megatron-core"
    src = cat.stack("megatron-core").field_sources["moe_host_us_per_kernel"]
    for needle in ("least_squares", "leave-one-out", "30 published runs", "issue 2053", "issue 1499", "PR 924"):
        assert needle in src
    # the default choices are the megatron-core stack's; DeepSeek's own framework keeps the launches alone
    assert StackChoices().moe_host_us_per_kernel == 37.5
    assert cat.stack("deepseek-v3-dualpipe").moe_host_us_per_kernel == 0.0
    ch = StackChoices(moe_host_us_per_kernel=43.0)
    assert host_scaled(ch, cat.system("gb200-nvl72")).moe_host_us_per_kernel == 43.0
