"""The supernode question as a user asks it: DeepSeek-V3 on GB200 NVL72 against 8-GPU B200 servers under one
software stack (``hnplan compare --stack megatron-bridge-2511-mxfp8``), and the choices a stack's recipes set per
accelerator (``SoftwareStack.choices_by_accelerator``)."""

from __future__ import annotations

import pytest
import yaml

from hnplan.catalog.runs import training_runs
from hnplan.errors import CatalogError
from hnplan.planning.compare import compare_training_designs
from hnplan.planning.training import make_job
from hnplan.planning.validation import best_row

STACK = "megatron-bridge-2511-mxfp8"
RUNS = {r.id: r for r in training_runs()}
B200 = "mbridge2511-b200-deepseek-v3-256-fp8"
GB200_GBS2048 = "mbridge2511-gb200-deepseek-v3-256-fp8-gbs2048"
B200_CHOICES = ("ep_dispatcher", "cuda_graph_scope", "norm_cudnn")


def _job(cat, system, stack=STACK, **overrides):
    return make_job("deepseek-v3", system, 256, 4096, 2048, "fp8", cat, stack=stack, overrides=overrides or None)


@pytest.mark.parametrize("stack", [STACK, "megatron-bridge-2511"])
def test_a_b200_job_takes_the_25_11_b200_recipes_choices(cat, stack):
    # Megatron-Bridge 25.11 skips HybridEP on any GPU but GB200 / GB300 (flex_dispatcher_backend.py) and its B200
    # DeepSeek-V3 presets capture no CUDA graphs: NCCL all-to-all, every MoE kernel launched from the host
    job = _job(cat, "dgx-b200-ib-ndr", stack)
    assert job.choices.ep_dispatcher == "alltoall"
    assert job.choices.cuda_graph_scope == ()
    assert job.provenance["ep_dispatcher"] == f"stack {stack} (choices_by_accelerator.b200)"
    gb200 = _job(cat, "gb200-nvl72", stack)  # the GB200 presets: HybridEP, router and preprocess captured
    assert gb200.choices.ep_dispatcher == "flex"
    assert gb200.choices.cuda_graph_scope == ("moe_router", "moe_preprocess")
    assert gb200.provenance["ep_dispatcher"] == f"stack {stack}"


@pytest.mark.parametrize("stack", [STACK, "megatron-bridge-2511"])
def test_a_b300_job_takes_the_all_to_all_dispatcher_of_25_11(cat, stack):
    # the same flex_dispatcher_backend.py check keeps HybridEP off the B300 in 25.11; graphs stay the stack's
    job = _job(cat, "dgx-b300", stack)
    assert job.choices.ep_dispatcher == "alltoall"
    assert job.provenance["ep_dispatcher"] == f"stack {stack} (choices_by_accelerator.b300)"
    assert job.choices.cuda_graph_scope == ("moe_router", "moe_preprocess")


def test_an_override_wins_over_the_accelerator_choice(cat):
    job = _job(cat, "dgx-b200-ib-ndr", ep_dispatcher="flex")
    assert job.choices.ep_dispatcher == "flex" and job.provenance["ep_dispatcher"] == "override"
    assert job.choices.norm_cudnn is False  # the others still the B200 recipes'


def test_the_b200_rows_overrides_are_now_the_stacks_own():
    # the DeepSeek-V3 B200 row states its recipe's dispatcher, graphs and norm kernel; without them the stack's
    # B200 choices give the same plan and figure (2,238 tokens/s per GPU against 2,139 published)
    run = RUNS[B200]
    bare = {k: v for k, v in run.overrides.items() if k not in B200_CHOICES}
    with_them = best_row(run)["tokens_per_s_per_gpu"]
    assert best_row(run.model_copy(update={"overrides": bare}))["tokens_per_s_per_gpu"] == with_them
    assert with_them == pytest.approx(2139, rel=0.08)


def test_the_accelerator_choices_need_known_names_values_and_accelerators(cat, tmp_path):
    from hnplan.catalog import validate_file

    raw = yaml.safe_load((cat.root / "stacks" / f"{STACK}.yaml").read_text())
    for bad, match in (
        ({"b200": {"ep_dispatch": "alltoall"}}, "unknown choice 'ep_dispatch'"),
        ({"b200": {"ep_dispatcher": "nccl"}}, "choices_by_accelerator.b200.ep_dispatcher: Input should be"),
        ({"b200": {"amax_passes": 7}}, "choices_by_accelerator.b200.amax_passes: Input should be less than"),
        ({"b201": {"ep_dispatcher": "alltoall"}}, "field 'choices_by_accelerator': unknown accelerator id"),
    ):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({**raw, "choices_by_accelerator": bad}))
        with pytest.raises(CatalogError, match=match):
            validate_file(tmp_path / "s.yaml", kind="stacks")


def test_the_users_compare_gives_the_like_for_like_ratio():
    # The command of docs/training.md ("The supernode question under one stack"): 256 GPUs, 4,096-token sequences,
    # 8Mi tokens (2,048 sequences) a step, the catalog's DeepSeek-V3 (one MTP layer). Measured at that batch with
    # MTP on both (Megatron-Bridge 25.11 performance summary): GB200 3,653 / B200 2,139 = 1.71x; the 1.88x pair
    # has the GB200 run at twice the batch without MTP, which one compare cannot ask. Before the stack carried
    # its B200 choices the compare gave 1.28x (B200 with HybridEP and captured router, which 25.11 does not run
    # there). The searched plans: GB200 3,911 tokens/s per GPU (the recipe's plan: 3,770 in hnplan), B200 2,676 at
    # PP 4, VP 8, micro-batch 4 with full recomputation (the recipe's micro-batch 1: 2,252): 1.46x. No published
    # B200 run is at a micro-batch above 1, so the B200 side may be optimistic and the ratio low: held at
    # 1.71x -15 % / +10 %. The lower margin: the one eager MoE row at micro-batch 8
    # (mbridge2511-gb300-qwen3-30b-a3b-8-fp8) is +15 % optimistic, so the B200 plan may be too (1 / 1.15), and
    # hnplan's ratio on the two recipes' plans is 1.67x against 1.71x measured (-2 %): 1.71 * 0.98 / 1.15 =
    # 1.457. Below that the B200 side is more optimistic than any measured eager MoE row supports: find out why
    # (or a published B200 run above micro-batch 1) before moving the band. The upper margin, 1.71 * 1.10 = 1.88,
    # is the pair at twice the batch without MTP, which this compare must not reproduce (with the B200 at its
    # recipe's plan the ratio would be 3,911 / 2,252 = 1.74x).
    df = compare_training_designs(
        "deepseek-v3",
        ["gb200-nvl72", "dgx-b200-ib-ndr"],
        256,
        1e12,
        4096,
        2048,
        "fp8",
        stack=STACK,
        goodput=False,
    ).set_index("system")
    b200, gb200 = df.loc["dgx-b200-ib-ndr"], df.loc["gb200-nvl72"]
    assert b200["ep"] <= 8  # the NCCL all-to-all keeps the experts inside a server (EP 16 over the NICs: 1,637)
    ratio = gb200["tokens_per_s"] / b200["tokens_per_s"]
    assert 1.71 * 0.85 < ratio < 1.71 * 1.10
    measured = RUNS[GB200_GBS2048].published / RUNS[B200].published
    assert measured == pytest.approx(1.71, abs=0.01)


def test_ep16_across_b200_servers_pays_the_nccl_all_to_all_over_the_nics(cat):
    # the plan the compare picked before (TP 1 PP 8 DP 32 EP 16, micro-batch 1): with DeepEP-style deduplicated
    # dispatch (flex) its all-to-all crosses the 400G NICs once per token and destination server; with the
    # 25.11 B200 recipe's NCCL all-to-all each of the 8 copies of a token goes on its own, half of them to the
    # other server, so the step's exposed all-to-all grows several-fold and in-server EP 8 wins
    from hnplan.planning.training import evaluate_plans, search_candidates

    fixed = dict(tp=1, pp=8, dp=32, ep=16, microbatch_size=1, recompute="none", virtual_stages=1, zero_stage=1)
    a2a = {}
    for disp in ("alltoall", "flex"):
        job = _job(cat, "dgx-b200-ib-ndr", ep_dispatcher=disp)
        a2a[disp] = float(evaluate_plans(job, search_candidates(job, fixed))["t_ep_comm_exposed_s"].iloc[0])
    assert a2a["alltoall"] > 4 * a2a["flex"]
