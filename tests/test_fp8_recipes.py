"""FP8 recipe bytes, eager PyTorch kernels and the stacks that choose them (hnplan.compute.fp8_recipes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog import load_catalog
from hnplan.catalog.schemas import StackChoices
from hnplan.compute import operator_table
from hnplan.planning.training.evaluate import estimate_plan, make_job
from hnplan.planning.training.plan import ParallelPlan

TOKENS, H = 8192, 4096  # Llama 3.1 8B, one 8K sequence, TP 1
FFN = 14336


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _rows(cat, acc="h100-sxm", dtype="fp8", **stack):
    df = operator_table(
        cat.model("llama3.1-8b"), cat.accelerator(acc), "train", 1, TOKENS, dtype=dtype, stack=StackChoices(**stack)
    )
    return df[df["scope"].isin(["dense-layer", "head"])].set_index(["name", "phase"])


def test_eager_rmsnorm_bytes_hand_derived(cat):
    # Hugging Face LlamaRMSNorm: cast up (2 + 4), square (4 + 4), mean (4), scale (4 + 4), cast down (4 + 2),
    # weight (2 + 2) = 36 bytes per element, against 2 + 2 for the fused kernel
    eager = _rows(cat, dtype="bf16", norm_kernel="eager", rope_kernel="eager")
    fused = _rows(cat, dtype="bf16")
    assert eager.loc[("attn_norm_eager", "fwd"), "bytes"] == 36 * TOKENS * H
    assert fused.loc[("attn_norm", "fwd"), "bytes"] == 4 * TOKENS * H
    # backward, the autograd function of each op (tests/test_eager_chain_bytes.py): 92 bytes per element
    assert eager.loc[("attn_norm_eager", "bwd"), "bytes"] == 92 * TOKENS * H
    # rotary over the 32 query + 8 key heads of 128: x cos 4, rotate_half's neg of half 2 and cat 4, x sin 4,
    # add 6 = 20 bytes; backward 30
    assert eager.loc[("rope_eager", "fwd"), "bytes"] == 20 * TOKENS * 40 * 128
    assert eager.loc[("rope_eager", "bwd"), "bytes"] == 30 * TOKENS * 40 * 128
    # at the norm_eager class (0.637 of the copy) the eager norm takes 36 / 4 x 0.753 / 0.637 = 10.6x the
    # fused kernel's memory time; measured on the H200: 445.4 / 44.5 us = 10.0x with the launches
    ratio = eager.loc[("attn_norm_eager", "fwd"), "memory_time_s"] / fused.loc[("attn_norm", "fwd"), "memory_time_s"]
    assert ratio == pytest.approx(9 * 0.753 / 0.637, rel=1e-9)


def test_delayed_scaling_on_hopper_hand_derived(cat):
    r = _rows(cat)  # megatron-core: delayed scaling, norm-cast and cast-transpose fusion, weight cast per step
    # QKV input comes out of the norm already in fp8: only its transpose for the weight gradient (1 + 1 bytes)
    assert ("qkv_proj_x_fp8", "fwd") not in r.index
    assert r.loc[("qkv_proj_x_fp8_t", "fwd"), "bytes"] == 2 * TOKENS * H
    # o_proj input: read bf16, write fp8 and its transpose (2 + 1 + 1); no amax pass
    assert r.loc[("o_proj_x_fp8", "fwd"), "bytes"] == 4 * TOKENS * H
    assert not r.index.get_level_values(0).str.endswith("_amax").any()
    # output gradient of mlp_up (gate and up, 2 x 14,336 columns): cast + transpose in the backward
    assert r.loc[("mlp_up_dy_fp8", "bwd"), "bytes"] == 4 * TOKENS * 2 * FFN
    # the weight cast and its transpose, once per optimizer step: 4 bytes per weight
    assert r.loc[("mlp_down_w_fp8", "step"), "bytes"] == 4 * FFN * H
    # the LM head stays a bf16 GEMM
    assert r.loc[("lm_head", "fwd"), "kind"] == "gemm-bf16"


def test_current_scaling_adds_an_amax_read_and_cannot_fuse_the_norm(cat):
    r = _rows(cat, fp8_recipe="current")
    assert r.loc[("qkv_proj_x_amax", "fwd"), "bytes"] == 2 * TOKENS * H
    assert r.loc[("qkv_proj_x_fp8", "fwd"), "bytes"] == 4 * TOKENS * H
    h100 = cat.accelerator("h100-sxm")
    # Transformer Engine's amax (the default stack): one read at the per-pass amax class (0.835)
    assert r.loc[("qkv_proj_x_amax", "fwd"), "memory_time_s"] == pytest.approx(
        2 * TOKENS * H / (h100.hbm_bw_TBps * 1e12 * h100.hbm_efficiency * 0.835)
    )


def test_amax_passes_are_the_stacks_and_the_class_is_one_pass_of_the_h200_measurement(cat):
    # the H200 amax: 8,192 x 14,336 bf16 (234.9 MB read once) in 200.0 us; as eager PyTorch's max(abs(x)) it streams
    # three passes (abs reads and writes, the reduction reads): 3 x 234.9 MB / (200.0 - 2.85 us) / 4,278 GB/s
    h200 = cat.accelerator("h200-sxm")
    by = 8192 * 14336 * 2
    per_pass = 3 * by / ((200.0 - h200.kernel_overhead_us) * 1e-6) / 4278e9
    assert per_pass == pytest.approx(0.8355, abs=5e-4)
    assert h200.memory_kernel_efficiency["amax"] == pytest.approx(per_pass, abs=1e-3)
    # one rule per stack family: Transformer Engine and compiled torchao one pass, eager PyTorch three
    assert {s: cat.stack(s).amax_passes for s in ("megatron-bridge-2511", "nemo-mlperf-v60", "torchtitan-2506")} == {
        "megatron-bridge-2511": 1,
        "nemo-mlperf-v60": 1,
        "torchtitan-2506": 1,
    }
    assert cat.stack("pytorch-eager").amax_passes == 3
    one = _rows(cat, acc="h200-sxm", fp8_recipe="current")
    three = _rows(cat, acc="h200-sxm", fp8_recipe="current", amax_passes=3)
    key = ("mlp_down_x_amax", "fwd")  # the down projection's input: 8,192 x 14,336, the tensor timed
    assert three.loc[key, "bytes"] == 3 * one.loc[key, "bytes"] == 3 * by
    # the eager amax costs what was measured (memory time plus the model's kernel overhead), TE's a third of the bytes
    assert three.loc[key, "memory_time_s"] + h200.kernel_overhead_us * 1e-6 == pytest.approx(200.0e-6, rel=2e-3)
    assert one.loc[key, "memory_time_s"] == pytest.approx(three.loc[key, "memory_time_s"] / 3, rel=1e-12)


def test_current_scaling_amax_from_te_norm_and_op_fuser_hand_derived(cat):
    # Transformer Engine 2.8+ (FUSED_NORM_AMAX_FP8, FUSED_ACTIVATION_AMAX_FP8): its own norm returns the amax of the
    # QKV and MLP-up inputs, the op fuser's SwiGLU that of the MLP-down input and of the MLP-up output gradient
    r = _rows(cat, acc="b200", fp8_recipe="current", fp8_current_amax_fusion=True, fp8_act_cast_fusion=True)
    amax = {n: b for (n, ph), b in r["bytes"].items() if n.endswith("_amax") and ph != "step"}
    # left: o_proj x (4,096), dy of qkv (6,144), o_proj (4,096), mlp_down (4,096): 2 bytes an element
    assert sorted(amax) == ["mlp_down_dy_amax", "o_proj_dy_amax", "o_proj_x_amax", "qkv_proj_dy_amax"]
    assert sum(amax.values()) == 2 * TOKENS * (6144 + 3 * H)
    # the cast is unchanged (bf16 read, fp8 write: 3 bytes on Blackwell, no transpose)
    assert r.loc[("qkv_proj_x_fp8", "fwd"), "bytes"] == 3 * TOKENS * H
    # cuDNN's norm returns none; without the flag (Transformer Engine before 2.8) all eight passes stay
    cudnn = _rows(cat, acc="b200", fp8_recipe="current", fp8_current_amax_fusion=True, norm_cudnn=True)
    assert ("qkv_proj_x_amax", "fwd") in cudnn.index and ("mlp_down_x_amax", "fwd") in cudnn.index
    old = _rows(cat, acc="b200", fp8_recipe="current", fp8_act_cast_fusion=True)
    assert old.index.get_level_values(0).str.endswith("_amax").sum() == 8 + 4  # 8 tensors + 4 weights (phase step)


def test_mxfp8_on_blackwell_hand_derived(cat):
    r = _rows(cat, acc="b200", fp8_recipe="mxfp8", norm_cudnn=True)
    # bf16 read, row-wise and column-wise fp8 copies with one scale byte per 32 elements each
    assert r.loc[("o_proj_x_mxfp8", "fwd"), "bytes"] == pytest.approx((2 + 2 * (1 + 1 / 32)) * TOKENS * H)
    # cuDNN's norm writes the row-wise MXFP8 copy (normalization.cpp Impl::FULLY_FUSED): only the column-wise remains
    assert r.loc[("qkv_proj_x_mxfp8", "fwd"), "bytes"] == pytest.approx((1 + 1 / 32) * TOKENS * H)
    # Transformer Engine's own norm writes bf16 (Impl::UNFUSED): the cast reads it and writes both copies
    te_norm = _rows(cat, acc="b200", fp8_recipe="mxfp8")
    assert te_norm.loc[("qkv_proj_x_mxfp8", "fwd"), "bytes"] == pytest.approx((2 + 2 * (1 + 1 / 32)) * TOKENS * H)
    names = r.index.get_level_values(0)
    assert not names.str.endswith(("_amax", "_fp8_t")).any()


def test_per_tensor_fp8_on_blackwell_needs_no_transposes(cat):
    r = _rows(cat, acc="b200")
    assert r.loc[("o_proj_x_fp8", "fwd"), "bytes"] == 3 * TOKENS * H
    assert ("qkv_proj_x_fp8_t", "fwd") not in r.index


def test_weight_cast_follows_the_stack(cat):
    assert ("o_proj_w_fp8", "fwd") in _rows(cat, fp8_weight_cache=False).index
    names = _rows(cat, fp8_params=True).index.get_level_values(0)
    assert not names.str.contains("_w_").any()


def test_no_recipe_rows_in_bf16_or_inference(cat):
    names = _rows(cat, dtype="bf16").index.get_level_values(0)
    assert not names.str.contains("_fp8|_amax").any()
    df = operator_table(cat.model("llama3.1-8b"), cat.accelerator("h100-sxm"), "prefill", 1, 2048, dtype="fp8")
    assert not df["name"].str.contains("_fp8|_amax").any()


def test_pytorch_eager_stack_choices(cat):
    s = cat.stack("pytorch-eager")
    assert (s.norm_kernel, s.rope_kernel, s.sequence_parallel, s.tp_comm) == ("eager", "eager", False, False)
    assert cat.stack("megatron-bridge-2511").fp8_recipe == "current"
    assert cat.stack("megatron-bridge-2511-mxfp8").fp8_recipe == "mxfp8"


@settings(max_examples=8, deadline=None)
@given(
    model=st.sampled_from(["llama3.1-8b", "llama3.1-70b"]),
    tp=st.sampled_from([1, 2, 8]),
    mb=st.sampled_from([1, 2]),
    dtype=st.sampled_from(["bf16", "fp8"]),
)
def test_pytorch_eager_is_slower_than_megatron_core(cat, model, tp, mb, dtype):
    plan = ParallelPlan(tp=tp, pp=1, dp=8 // tp, microbatch_size=mb, zero_stage=3, recompute="full")
    steps = {}
    for stack in ("pytorch-eager", "megatron-core"):
        job = make_job(model, "hgx-h100-ib-ndr", 8, 4096, 64, dtype, cat, stack=stack)
        steps[stack] = estimate_plan(job, plan).step_time_s
    assert steps["pytorch-eager"] > steps["megatron-core"]


def test_per_step_kernels_hand_derived(cat):
    from hnplan.compute.fp8_recipes import StepKernels, optimizer_step_s, weight_cast_step_s

    h100 = cat.accelerator("h100-sxm")
    copy = h100.hbm_bw_TBps * 1e12 * h100.hbm_efficiency  # streaming copy [B/s]
    # Adam 30 B/param + the gradient-norm read of 4-byte gradients, at the fused-AdamW class (0.811)
    assert optimizer_step_s(h100, 1e9, 30.0, 4.0) == pytest.approx(1e9 * 34 / (copy * 0.811))
    # delayed scaling, weights cached per step: cast + transpose, 2 + 1 + 1 bytes at the fp8_cast class (0.774)
    delayed = StepKernels.of(StackChoices())
    assert weight_cast_step_s(h100, delayed, 1e9) == pytest.approx(1e9 * 4 / (copy * 0.774))
    # current scaling adds the 2-byte amax read, one pass at the per-pass amax class (0.835); eager, three passes
    current = StepKernels.of(StackChoices(fp8_recipe="current"))
    assert weight_cast_step_s(h100, current, 1e9) == pytest.approx(1e9 * (4 / (copy * 0.774) + 2 / (copy * 0.835)))
    eager = StepKernels.of(StackChoices(fp8_recipe="current", amax_passes=3))
    assert weight_cast_step_s(h100, eager, 1e9) == pytest.approx(1e9 * (4 / (copy * 0.774) + 6 / (copy * 0.835)))
    # fp8 parameters: no cast; uncached: the casts are operator rows of every micro-batch instead
    assert weight_cast_step_s(h100, StepKernels.of(StackChoices(fp8_params=True)), 1e9) == 0.0
    assert weight_cast_step_s(h100, StepKernels.of(StackChoices(fp8_weight_cache=False)), 1e9) == 0.0


def test_sequence_parallel_quantises_the_local_shard_and_transposes_the_gathered_tensor(cat):
    # TP 4 with sequence parallelism: the QKV input and the o_proj output gradient live on tokens / 4 per rank
    # and are all-gathered in fp8; the transpose for the weight gradient needs the gathered tensor
    df = operator_table(
        cat.model("llama3.1-8b"),
        cat.accelerator("h100-sxm"),
        "train",
        1,
        TOKENS,
        tp=4,
        dtype="fp8",
        stack=StackChoices(fp8_recipe="current"),
    )
    r = df[df["scope"] == "dense-layer"].set_index(["name", "phase"])["bytes"]
    assert r[("qkv_proj_x_amax", "fwd")] == 2 * TOKENS * H / 4
    assert r[("qkv_proj_x_fp8", "fwd")] == 3 * TOKENS * H / 4
    assert r[("qkv_proj_x_fp8_t", "fwd")] == 2 * TOKENS * H
    assert r[("o_proj_dy_fp8", "bwd")] == 3 * TOKENS * H / 4
    assert r[("o_proj_dy_fp8_t", "bwd")] == 2 * TOKENS * H
    # the o_proj input (the attention output, split by heads) is local: fused cast + transpose on its share
    assert r[("o_proj_x_fp8", "fwd")] == 4 * TOKENS * H / 4


def test_roofline_cli_takes_a_stack():
    import json

    from typer.testing import CliRunner

    from hnplan.cli import app

    base = ["roofline", "--accelerator", "h100-sxm", "--model", "llama3.1-8b", "--phase", "train"]
    base += ["--batch", "1", "--seq-len", "2048", "--dtype", "fp8", "--json"]
    r = CliRunner().invoke(app, [*base, "--stack", "pytorch-eager"])
    assert r.exit_code == 0, r.output
    names = {o["name"] for o in json.loads(r.output)["ops"]}
    assert {"attn_norm_eager", "rope_eager", "o_proj_x_amax"} <= names
    bad = CliRunner().invoke(app, [*base, "--stack", "no-such-stack"])
    assert bad.exit_code == 2 and "no-such-stack" in bad.output


def test_bf16_end_layers_slow_the_end_stages_by_the_bf16_minus_fp8_layer_time(cat):
    # Llama 3.1 8B on one stage: two of 32 layers in bf16 add 2 x (bf16 layer - fp8 layer) to the micro-batch
    from hnplan.compute.parts import training_part_times
    from hnplan.planning.training.components import compute_per_microbatch
    from hnplan.planning.training.plan import plans_frame

    plan = ParallelPlan(tp=1, pp=1, dp=8, microbatch_size=1, zero_stage=1, recompute="none")
    df = plans_frame([plan])
    t = {}
    for n in (0, 1):
        job = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 4096, 64, "fp8", cat, overrides={"fp8_bf16_end_layers": n})
        t[n] = compute_per_microbatch(job, df)["t_compute_mb"].iloc[0]
    shapes = df[["microbatch_size", "tp", "cp", "ep"]]
    h100 = job.kernel_acc  # the H100 at the clock its 700 W limit sustains, as the planner times a step
    layer = {
        dt: training_part_times(cat.model("llama3.1-8b"), h100, shapes, 4096, dt)[["dense_fwd", "dense_bwd"]].sum(
            axis=1
        )
        for dt in ("bf16", "fp8")
    }
    assert t[1] - t[0] == pytest.approx(2 * float(layer["bf16"].iloc[0] - layer["fp8"].iloc[0]), rel=1e-9)
    assert t[1] > t[0]


def test_mxfp8_output_projection_hand_derived(cat):
    # Megatron-Core fp8_output_proj (MLPerf v6.0 DeepSeek-V3 GB300 configs, FP8_OUTPUT_PROJ=True): the LM head is an
    # MXFP8 Transformer Engine GEMM with its input's cast; Llama 3.1 8B's head: 8,192 tokens x 128,256 x 4,096
    base = _rows(cat, acc="b200", fp8_recipe="mxfp8")
    head = _rows(cat, acc="b200", fp8_recipe="mxfp8", fp8_output_proj=True)
    assert base.loc[("lm_head", "fwd"), "kind"] == "gemm-bf16"
    assert head.loc[("lm_head", "fwd"), "kind"] == "gemm"
    assert head.loc[("lm_head", "fwd"), "flops"] == base.loc[("lm_head", "fwd"), "flops"] == 2 * TOKENS * 128_256 * H
    assert any(n.startswith("lm_head_") for n in head.index.get_level_values(0))  # its quantisation rows
    assert not any(n.startswith("lm_head_") for n in base.index.get_level_values(0))
    # the GEMM at the fp8 ceiling (twice bf16's on a B200), at an efficiency a little below bf16's: about half
    # the bf16 GEMM's compute time
    ratio = head.loc[("lm_head", "fwd"), "compute_time_s"] / base.loc[("lm_head", "fwd"), "compute_time_s"]
    assert ratio == pytest.approx(0.5, rel=0.05)


def test_rows_whose_recipes_set_the_mxfp8_lm_head_carry_it():
    # fp8_output_proj entered the DeepSeek-V3 recipes with the full-iteration CUDA-graph ones (Megatron-Bridge PR 3983,
    # 2026-06-06, GB300; PR 4226, 2026-06-10, GB200: _enable_deepseek_full_iteration_mxfp8(cfg, fp8_output_proj=True));
    # MLPerf v6.0's GB300 configs set FP8_OUTPUT_PROJ=True, its GB200 configs do not; the 26.08 GB300 recipe sets it as the
    # GB200 one does (perf_recipes/deepseek/gb300/deepseek_v3.py @ 067f987df03b). Rows of older recipes keep bf16.
    from hnplan.catalog.runs import training_runs

    rows = {r.id: bool((r.overrides or {}).get("fp8_output_proj")) for r in training_runs() if r.model == "deepseek-v3"}
    on = {rid for rid, v in rows.items() if v}
    gb300_v60 = {f"mlperf-v60-{s}-gb300-deepseek-v3-{n}" for s, n in (("nvidia", 256), ("nvidia", 512))}
    gb300_v60 |= {f"mlperf-v60-coreweave-gb300-deepseek-v3-{n}" for n in (2048, 4096, 8192)}
    assert on == gb300_v60 | {f"mbridge2608-{chip}-deepseek-v3-256-fp8-fullcg" for chip in ("gb200", "gb300")}


def test_bf16_end_layers_are_charged_to_the_stages_that_hold_them(cat):
    # Llama 3.1 8B (32 layers) on pp = 4 stages of 8 (tp 2): with n = 2 the first stage holds layers 0-1 and the
    # last 30-31 in bf16, the middle stages none; with n = 10 (more than a stage's 8 layers) the first end is
    # layers 0-9: 8 on the first stage and 2 on the second, the last end 22-31: 2 on the third and 8 on the last.
    # Each such layer adds its bf16 - fp8 compute time and its TP all-gather/reduce-scatter's bf16 - fp8 time.
    import numpy as np

    from hnplan.compute.parts import training_part_times
    from hnplan.planning.training import collectives as coll
    from hnplan.planning.training.plan import plans_frame
    from hnplan.planning.training.slowest import slowest_stage
    from hnplan.planning.training.stage_compute import bf16_end_layers_held, compute_per_microbatch

    plan = ParallelPlan(tp=2, pp=4, dp=1, microbatch_size=1, zero_stage=1, recompute="none")
    df = plans_frame([plan])
    z = np.zeros(1)
    comp, out, jobs = {}, {}, {}
    for n in (0, 2, 10):
        over = {"fp8_bf16_end_layers": n, "pipeline_balanced_ends": False, "tp_comm": False}
        jobs[n] = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 4096, 64, "fp8", cat, overrides=over)
        comp[n] = compute_per_microbatch(jobs[n], df, per_stage=True)[:, 0, 0]  # first, middle, last [s]
        out[n] = [float(o[0]) for o in slowest_stage(jobs[n], df, z, (z, z, z))]
    held = {
        n: {k: (int(a[0]), int(b[0])) for k, (a, b) in bf16_end_layers_held(jobs[n], np.array([4])).items()}
        for n in (2, 10)
    }
    assert held[2] == {"first": (2, 0), "middle": (0, 0), "last": (0, 2)}
    assert held[10] == {"first": (8, 0), "middle": (2, 0), "last": (0, 8)}
    shapes = df[["microbatch_size", "tp", "cp", "ep"]]
    layer = {
        dt: float(
            training_part_times(cat.model("llama3.1-8b"), jobs[0].kernel_acc, shapes, 4096, dt)[
                ["dense_fwd", "dense_bwd"]
            ]
            .sum(axis=1)
            .iloc[0]
        )
        for dt in ("bf16", "fp8")
    }
    d_comp = layer["bf16"] - layer["fp8"]  # one layer's bf16 - fp8 forward + backward [s]
    assert d_comp > 0
    for n, counts in ((2, (2, 0, 2)), (10, (8, 2, 8))):
        assert comp[n] - comp[0] == pytest.approx(np.array(counts) * d_comp, rel=1e-9, abs=1e-12)
    job = jobs[2]
    d_tp = float(
        np.asarray(coll.tp_comm_per_microbatch(job, df, 1, quantised=False) - coll.tp_comm_per_microbatch(job, df, 1))[
            0
        ]
    )
    assert d_tp > 0
    # the slowest stage is the last (it holds the output head): its exposed TP time grows by its bf16 layers'
    assert out[2][2] - out[0][2] == pytest.approx(2 * d_tp, rel=1e-9)
    assert out[10][2] - out[0][2] == pytest.approx(8 * d_tp, rel=1e-9)
    # the other stages' micro-batches (the bubble's): the first and pp - 2 = 2 middle ones
    assert out[2][-1] - out[0][-1] == pytest.approx(2 * (d_comp + d_tp), rel=1e-9)
    assert out[10][-1] - out[0][-1] == pytest.approx((8 + 2 * 2) * (d_comp + d_tp), rel=1e-9)


def _moe_rows(cat, acc="gb300", dtype="fp8", **stack):
    # DeepSeek-V3's MoE layer on one GPU: micro-batch 1 of 4,096 tokens, EP 32 (8 local experts), MXFP8
    df = operator_table(
        cat.model("deepseek-v3"),
        cat.accelerator(acc),
        "train",
        1,
        4096,
        ep=32,
        dtype=dtype,
        stack=StackChoices(**stack),
    )
    return df[df["scope"] == "moe-layer"].set_index(["name", "phase"])


def test_fused_grouped_mlp_drops_the_experts_swiglu_and_its_two_quantisations(cat):
    # Transformer Engine's fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, ops/fused/grouped_mlp.py): under MXFP8 the
    # FC1 grouped GEMM applies the SwiGLU and writes the FC2 input quantised, the FC2 data-gradient GEMM the SwiGLU
    # backward and the FC1 output gradient quantised: the expert_act rows and the expert_down_x / expert_up_dy casts go,
    # every other row stays as it was
    base = _moe_rows(cat, fp8_recipe="mxfp8")
    fused = _moe_rows(cat, fp8_recipe="mxfp8", fused_grouped_mlp=True)
    gone = {("expert_act", "fwd"), ("expert_act", "bwd"), ("expert_down_x_mxfp8", "fwd"), ("expert_up_dy_mxfp8", "bwd")}
    assert gone <= set(base.index) and not gone & set(fused.index)
    assert set(base.index) - set(fused.index) == gone
    kept = fused.index
    assert (fused["time_s"] == base.loc[kept, "time_s"]).all()
    # the bytes they moved, by hand: 4,096 tokens x 8 routed copies x 2,048 columns per expert = 67.1M rows x columns;
    # the SwiGLU reads 2 bf16 inputs and writes 1 (6 bytes) forward, the MXFP8 cast reads bf16 and writes a row-wise and a
    # column-wise copy with one scale byte per 32 (2 + 2 x 1.03125 = 4.0625 bytes)
    rows = 4096 * 8 * 2048
    assert base.loc[("expert_act", "fwd"), "bytes"] == pytest.approx(6 * rows)
    assert base.loc[("expert_down_x_mxfp8", "fwd"), "bytes"] == pytest.approx(4.0625 * rows)
    saved = base.loc[list(gone), "time_s"].sum() / base["time_s"].sum()
    assert 0.04 < saved < 0.07  # about 5 % of the MoE layer's operator time
    # bf16 steps and the other recipes keep the separate kernels (the fused path is MXFP8's; NVFP4 quantises apart)
    for dtype, recipe in (("bf16", "mxfp8"), ("fp8", "current"), ("fp4", "nvfp4")):
        a = _moe_rows(cat, dtype=dtype, fp8_recipe=recipe)
        b = _moe_rows(cat, dtype=dtype, fp8_recipe=recipe, fused_grouped_mlp=True)
        assert a.index.equals(b.index) and (a["time_s"] == b["time_s"]).all(), (dtype, recipe)


def test_the_full_iteration_mxfp8_stack_runs_the_fused_grouped_mlp(cat):
    # every row of megatron-bridge-2608-mxfp8 runs it (the 26.08 recipes' NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, MLPerf v6.0's
    # DeepSeek-V3 configs) but the Megatron-LM MoE recipe on that stack, whose ENV_VARS leave it unset
    from hnplan.catalog.runs import training_runs

    st = cat.stack("megatron-bridge-2608-mxfp8")
    assert st.fused_grouped_mlp and "grouped_mlp.py" in st.field_sources["fused_grouped_mlp"]
    runs = [r for r in training_runs() if r.stack == st.id]
    off = {r.id for r in runs if not r.overrides.get("fused_grouped_mlp", True)}
    assert off == {"mlm2603-gb200-qwen3-30b-a3b-16-fp8"}
    assert not cat.stack("megatron-bridge-2604-mxfp8").fused_grouped_mlp  # 26.02-26.04: before the recipes had it


def test_the_full_iteration_recipe_stack_is_the_rows_overrides(cat):
    # megatron-bridge-2608-mxfp8-fullcg carries what the 26.08 full-iteration MoE recipes add to megatron-bridge-2608-mxfp8
    # (whole-step graph, 1F1B all-to-all overlap, MXFP8 attention): a row planned on it with only its other overrides gives
    # the same prediction as on the base stack with all of them
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predicted

    moved = {"cuda_graph_scope", "ep_comm", "fp8_attention"}
    runs = {r.id: r for r in training_runs()}
    for rid in (
        "mbridge2608-gb300-deepseek-v3-256-fp8-fullcg",
        "mbridge2608-gb300-qwen3-30b-a3b-8-fp8-fullcg",
        "mbridge2606-b300-qwen3-30b-a3b-8-fp8-fullcg",
    ):
        r = runs[rid]
        assert moved <= set(r.overrides)
        rest = {k: v for k, v in r.overrides.items() if k not in moved}
        on_recipe = r.model_copy(update={"stack": "megatron-bridge-2608-mxfp8-fullcg", "overrides": rest})
        assert predicted(on_recipe, cat) == pytest.approx(predicted(r, cat), rel=1e-12), rid
