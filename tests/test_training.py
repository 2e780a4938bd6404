"""The first-order training estimate on a hand-worked case, its error paths, and the plan search."""

import pytest
import yaml

from hnplan.catalog import load_catalog
from hnplan.compute import megatron_flops_per_iteration, training_flops_per_token, training_stage_time_s
from hnplan.compute.clocks import sustained_accelerator
from hnplan.errors import InfeasiblePlan
from hnplan.planning.training import ParallelPlan, best_plan, estimate_training_step

TINY = dict(
    id="tiny-gpt",
    name="tiny GPT for a hand-worked case",
    source="hand-made test model",
    layers=2,
    hidden=1024,
    ffn_hidden=4096,
    heads=16,
    kv_heads=16,
    vocab=32000,
    max_seq=2048,
    activation="gelu",
    position_embedding="rope",
)


@pytest.fixture()
def tiny(tmp_path):
    path = tmp_path / "tiny-gpt.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return load_catalog().model(str(path))


def test_flops_per_token_by_hand(tiny):
    # matmul weights: per layer 4h^2 (Q,K,V,O) + 2 h f (GELU MLP) = 12,582,912; LM head V h = 32,768,000
    matmul = 2 * 12_582_912 + 32_768_000
    attention = 2 * 2 * 2048 * 16 * (64 + 64)  # layers x 2 s heads (d_qk + d_v), forward
    f = training_flops_per_token(tiny, 2048, "none")
    assert f.model == 3 * (2 * matmul + attention) == 397_934_592
    # Megatron-LM (Narayanan et al. 2021, Sec. 5.1): the 96 form is our full-recompute hardware count
    full = training_flops_per_token(tiny, 2048, "full")
    assert full.hardware * 8 * 2048 == pytest.approx(
        megatron_flops_per_iteration(8, 2048, 2, 1024, 32000, True), rel=1e-12
    )


def test_single_gpu_step_by_hand(tiny):
    cat = load_catalog()
    h100 = cat.accelerator("h100-sxm")
    est = estimate_training_step(tiny, "hgx-h100-ib-ndr", 1, ParallelPlan(), 2048, 8)
    # compute: 8 micro-batches of the operator-level stage time, on the H100 at the clock its 700 W limit
    # sustains (0.959 of the peak); its weight GEMMs alone (forward and two backward GEMMs: 3 x 2 x matmul
    # params per token) can run no faster than that peak x large-GEMM efficiency
    stage = training_stage_time_s(tiny, sustained_accelerator(h100), 1, 2048)
    gemm_only = 3 * 2 * (2 * 12_582_912 + 32_768_000) * 2048 / (989.4e12 * 0.959 * h100.matmul_efficiency["bf16"])
    assert est.breakdown_s["compute"] == pytest.approx(8 * stage, rel=1e-9)
    assert stage > gemm_only
    params = 2 * 32000 * 1024 + 2 * (12_582_912 + 2 * 1024) + 1024
    # Adam: 30 bytes moved per parameter, and the gradient-norm read of clipping (4-byte fp32 gradients), both
    # at the fused-AdamW fraction of the copy bandwidth measured on the H200 (memory_kernel_efficiency.optimizer)
    optimizer = params * (30 + 4) / (3.35e12 * h100.hbm_efficiency * h100.memory_kernel_efficiency["optimizer"])
    assert est.breakdown_s["optimizer"] == pytest.approx(optimizer, rel=1e-12)
    assert est.step_time_s == pytest.approx(8 * stage + optimizer, rel=1e-9)
    assert est.breakdown_s["pp_bubble"] == est.breakdown_s["dp_comm_exposed"] == 0
    assert est.mfu == pytest.approx(397_934_592 * 8 * 2048 / est.step_time_s / 989.4e12)
    assert est.fits


def test_pipeline_bubble_is_the_other_stage(tiny):
    # 1F1B over 2 stages: the last (with the output layer) is the slowest and runs its 8 micro-batches back
    # to back; the first stage's forward of the first micro-batch and backward of the last one frame them:
    # step = 8 t_last + t_first + t_dp + t_opt, the bubble t_first, less than a micro-batch of the last stage
    est = estimate_training_step(tiny, "hgx-h100-ib-ndr", 2, ParallelPlan(pp=2), 2048, 8)
    b = est.breakdown_s
    t_last = (est.step_time_s - b["optimizer"] - b["dp_comm_exposed"] - b["pp_bubble"]) / 8
    assert 0 < b["pp_bubble"] < t_last
    same = estimate_training_step(tiny, "hgx-h100-ib-ndr", 2, ParallelPlan(pp=2), 2048, 16)
    assert same.breakdown_s["pp_bubble"] == pytest.approx(b["pp_bubble"], rel=1e-9)  # once a step, whatever m


@pytest.mark.parametrize(
    "plan,gpus,match",
    [
        (ParallelPlan(tp=8, pp=16, dp=64), 16384, "not --gpus 16384"),
        (ParallelPlan(pp=256, dp=64), 16384, "exceeds the model's 126 layers"),
        (ParallelPlan(tp=3, dp=2), 6, "does not divide the 128 attention heads"),
        (ParallelPlan(tp=8, pp=16, dp=128, ep=8), 16384, "llama3.1-405b has no experts"),
        (ParallelPlan(tp=8, pp=16, dp=128, microbatch_size=3), 16384, "not divisible by dp x microbatch"),
    ],
)
def test_plan_errors_are_clear(plan, gpus, match):
    with pytest.raises(InfeasiblePlan, match=match):
        estimate_training_step("llama3.1-405b", "hgx-h100-ib-ndr", gpus, plan, 8192, 2048)


def test_ep_is_carved_from_dp():
    # the example: --ep 32 on 256 GPUs with --pp 8 --dp 32 is valid for DeepSeek-V3
    est = estimate_training_step(
        "deepseek-v3", "hgx-h800-ib", 256, ParallelPlan(pp=8, dp=32, ep=32, recompute="full"), 4096, 1024
    )
    assert est.breakdown_s["ep_comm_exposed"] > 0


def test_search_returns_a_fitting_plan_no_slower_than_a_fixed_one():
    fixed = estimate_training_step(
        "llama3.1-70b", "hgx-h100-ib-ndr", 64, ParallelPlan(tp=8, pp=4, dp=2, recompute="full"), 4096, 128
    )
    (best,), searched, feasible = best_plan("llama3.1-70b", "hgx-h100-ib-ndr", 64, 4096, 128)
    assert best.fits and searched >= feasible >= 1
    assert best.step_time_s <= fixed.step_time_s
