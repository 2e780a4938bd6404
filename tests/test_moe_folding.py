"""MoE parallel folding (Liu et al. 2025, arXiv:2504.14960; Megatron-Core ``expert_tensor_parallel_size``):
the expert layers decompose a pipeline stage's ``tp x cp x dp`` ranks as ``etp x ep x expert-dp``, ranks
ordered ETP innermost, then EP, then expert-DP (Megatron-Core's expert ``RankGenerator``, order
``tp-ep-dp-pp``); ``etp`` defaults to ``tp``."""

import numpy as np
import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.memory.states import expert_dp, model_state_bytes_per_gpu, stage_params
from hnplan.planning.training import (
    ParallelPlan,
    candidate_frame,
    estimate_training_step,
    evaluate_plans,
    make_job,
    plans_frame,
    valid_mask,
)
from hnplan.planning.training.components import placement_summary

runner = CliRunner()

# Qwen3-235B-A22B as Megatron-Bridge runs it on 256 H100 (QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_*): TP 2, PP 8,
# VP 4, EP 32 with expert_tensor_parallel_size 1, DP 16
QWEN = dict(model="qwen3-235b-a22b", system="hgx-h100-ib-ndr", gpus=256, seq_len=4096, global_batch_seqs=8192)
FOLDED = ParallelPlan(tp=2, pp=8, dp=16, cp=1, ep=32, etp=1, microbatch_size=1, virtual_stages=4, recompute="none")
# one routed-expert layer of Qwen3-235B-A22B: 128 experts of SwiGLU 4096 -> 1536 (three matrices)
ROUTED_PER_LAYER = 128 * 3 * 4096 * 1536  # 2,415,919,104 parameters


def test_etp_defaults_to_tp():
    assert ParallelPlan(tp=4, ep=8).etp == 4  # Megatron-Core: expert_tensor_parallel_size = tensor_model_parallel_size
    assert ParallelPlan(tp=4, ep=8, etp=1).etp == 1


def test_expert_group_sizes_by_hand():
    # etp x ep x expert-dp = tp x cp x dp
    assert int(expert_dp(2, 16, 1, 32, 1)) == 1  # 2 x 16 / 32
    assert int(expert_dp(4, 8, 1, 8, 1)) == 4  # 4 x 8 / 8: Megatron-MoE's TP4 EP8 ETP1 layout, EDP 4
    assert int(expert_dp(2, 4, 1, 8, 1)) == 1  # TP2 DP4 EP8: EP 8 > DP 4, only folded
    assert int(expert_dp(4, 8, 2, 8)) == 2  # ETP = TP: dp x cp / ep = 16 / 8


def test_rule_ep_times_etp_divides_tp_cp_dp(cat):
    model = cat.model("qwen3-235b-a22b")
    df = plans_frame([FOLDED, ParallelPlan(**{**FOLDED.as_dict(), "etp": 2})])
    # EP 32 x ETP 1 divides 2 x 1 x 16 = 32; EP 32 x ETP 2 = 64 does not (the old rule: 32 does not divide dp 16).
    # 94 layers at PP 8 x VP 4 leave 10 on the last stage: the ModelZoo configs lay the stages out themselves
    # (--pipeline-model-parallel-layout), so the stack's pipeline_layout admits it
    assert valid_mask(df, model, 256, 4096, 8192, pipeline_layout=True).tolist() == [True, False]
    assert valid_mask(df, model, 256, 4096, 8192).tolist() == [False, False]  # without a layout: 10 / 4 not whole


def test_folded_placement_follows_the_expert_rank_order(cat):
    job = make_job(QWEN["model"], QWEN["system"], 256, 4096, 8192, catalog=cat)
    p = placement_summary(job, tp=2, pp=8, dp=16, cp=1, ep=32, etp=1)
    # EP ranks are consecutive (stride etp = 1): 32 ranks fill 4 servers of 8
    assert (p["ep"]["ranks"], p["ep"]["per_domain"], p["ep"]["domains"]) == (32, 8, 4)
    assert (p["edp"]["ranks"], p["edp"]["level"]) == (1, "none")  # 2 x 16 / 32: no expert gradient reduction
    assert (p["dp"]["ranks"], p["dp"]["per_domain"]) == (16, 4)  # dense layers unchanged: stride tp 2 over 32 GPUs
    # EP 4 at TP 4: folded, one server; at ETP = TP 4, the 4 ranks sit 4 apart: 16 GPUs, 2 servers
    fold = placement_summary(job, tp=4, pp=8, dp=8, cp=1, ep=4, etp=1)
    plain = placement_summary(job, tp=4, pp=8, dp=8, cp=1, ep=4)
    assert (fold["ep"]["domains"], fold["ep"]["level"]) == (1, "domain")
    assert plain["ep"]["domains"] == 2 and plain["ep"]["per_domain"] == 2
    # expert-DP: 4 x 8 / 4 = 8 ranks spaced etp x ep = 4 apart (folded); 8 / 4 = 2 spaced 16 apart (plain)
    assert (fold["edp"]["ranks"], fold["edp"]["per_domain"]) == (8, 2)
    assert (plain["edp"]["ranks"], plain["edp"]["per_domain"]) == (2, 1)


def test_folded_expert_states_by_hand(cat):
    model = cat.model("qwen3-235b-a22b")
    # 94 layers on PP 8: 12 on the first stage, every one an MoE layer; experts whole (ETP 1) over EP 32
    assert stage_params(model, 2, 8, 32, etp=1).expert == pytest.approx(12 * ROUTED_PER_LAYER / 32)
    assert stage_params(model, 2, 8, 32).expert == pytest.approx(12 * ROUTED_PER_LAYER / 64)  # ETP = TP 2
    dense = stage_params(model, 2, 8, 32, etp=1).dense
    assert dense == stage_params(model, 2, 8, 32).dense  # attention and embedding: unchanged by the fold
    # ZeRO-1, "zero-paper" bytes (2 weights, 2 gradients, 12 optimizer): the experts' optimizer states are
    # sharded over expert-DP = 2 x 16 / 32 = 1 (none), the dense ones over dp x cp = 16
    w, g, o = model_state_bytes_per_gpu(model, 2, 8, 16, 32, zero=1, etp=1)
    e = 12 * ROUTED_PER_LAYER / 32
    assert w == pytest.approx(2 * (dense + e))
    assert g == pytest.approx(2 * (dense + e))
    assert o == pytest.approx(12 * dense / 16 + 12 * e / 1)
    # TP 4 DP 8 EP 8 ETP 1: expert-DP 4 shards the expert optimizer states by 4
    e4, d4 = stage_params(model, 4, 8, 8, etp=1).expert, stage_params(model, 4, 8, 8).dense
    assert model_state_bytes_per_gpu(model, 4, 8, 8, 8, zero=1, etp=1)[2] == pytest.approx(12 * d4 / 8 + 12 * e4 / 4)


def test_published_folded_layout_evaluates_and_fits(cat):
    est = estimate_training_step(
        QWEN["model"], QWEN["system"], 256, FOLDED, 4096, 8192, "fp8", cat, stack="megatron-core-ep-overlap"
    )
    assert est.fits
    assert est.plan.etp == 1 and est.placement["ep"]["domains"] == 4
    assert est.to_dict()["parallel"]["etp"] == 1


def test_folded_moe_layers_skip_the_mlp_tp_collectives(cat):
    # Qwen3 has no shared expert: with ETP 1 an MoE layer keeps only its attention's TP collectives (1 of 2)
    job = make_job(QWEN["model"], QWEN["system"], 256, 4096, 8192, catalog=cat, overrides=dict(tp_comm=False))
    df = evaluate_plans(job, plans_frame([FOLDED, ParallelPlan(**{**FOLDED.as_dict(), "ep": 16, "etp": 2})]))
    t_fold, t_plain = df["t_tp_comm_exposed_s"].tolist()
    assert t_fold == pytest.approx(0.5 * t_plain, rel=1e-9)


def test_search_offers_the_fold_where_only_it_divides(cat):
    model, system = cat.model(QWEN["model"]), cat.system(QWEN["system"])
    fixed = dict(tp=2, pp=8, ep=32, microbatch_size=1, virtual_stages=4, zero_stage=1, recompute="none")
    df = candidate_frame(model, system, 256, 4096, 8192, fixed=fixed, pipeline_layout=True)  # ModelZoo layout
    assert len(df) and set(df["etp"]) == {1} and set(df["dp"] * df["cp"]) == {16}
    # without TP there is nothing to fold: each layout once
    df1 = candidate_frame(model, system, 256, 4096, 8192, fixed={**fixed, "tp": 1, "pp": 8}, pipeline_layout=True)
    assert set(df1["etp"]) == {1} and not df1.duplicated(list(fixed) + ["dp", "cp"]).any()
    # a dense model is never folded
    dense = candidate_frame(cat.model("llama3.1-8b"), system, 16, 4096, 64)
    assert np.array_equal(dense["etp"].to_numpy(), dense["tp"].to_numpy())


ARGS = ["train", "--model", "qwen3-235b-a22b", "--system", "hgx-h100-ib-ndr", "--gpus", "256", "--seq-len", "4096"]
ARGS += ["--global-batch-size", "8192", "--tp", "2", "--pp", "8", "--dp", "16", "--microbatch-size", "1"]
ARGS += ["--virtual-stages", "4", "--recompute", "none", "--zero", "1"]


@pytest.mark.parametrize(
    "extra,words",
    [
        (["--ep", "32"], "ep x etp = 32 x 2 must divide tp x cp x dp = 32"),  # ETP defaults to TP 2
        (["--ep", "32", "--etp", "4"], "ep x etp = 32 x 4"),
        (["--ep", "3", "--etp", "1"], "ep = 3 needs a number of experts divisible by it"),  # 128 experts
    ],
)
def test_invalid_fold_exits_3_with_one_line(extra, words):
    r = runner.invoke(app, ARGS + extra)
    assert r.exit_code == 3, r.output
    assert words in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_cli_evaluates_the_folded_plan():
    r = runner.invoke(app, ARGS + ["--ep", "32", "--etp", "1", "--dtype", "fp8", "--json"])
    assert r.exit_code == 0, r.output
    assert '"etp": 1' in r.output and '"fits": true' in r.output


def test_folded_experts_run_the_ranks_own_tokens_through_whole_experts(cat):
    # ETP 1 at TP 2: a rank's routed experts take its own b s / (cp tp) tokens through whole experts (the
    # expert GEMMs of micro-batch 1 at TP 1); ETP 2 takes the TP pair's tokens through half of each expert:
    # the same FLOPs, other GEMM shapes, so a different time of the same order
    from hnplan.compute.layer_ops import _expert_mlp
    from hnplan.compute.parts import part_time_table

    m, acc = cat.model("qwen3-235b-a22b"), cat.accelerator("h100-sxm")
    whole, split = _expert_mlp(m, "moe-layer", 4096, 1, 32, 2.0), _expert_mlp(m, "moe-layer", 8192, 2, 32, 2.0)
    # per local expert (128 / 32 = 4, all touched) the rows of 8 experts a token; gate + up of 1536 each
    assert (whole[0].m, whole[0].n, whole[0].k) == (4096 * 8 / 4, 2 * 1536, 4096)
    assert (split[0].m, split[0].n, split[0].k) == (8192 * 8 / 4, 1536, 4096)
    assert whole[0].m * whole[0].n == split[0].m * split[0].n  # the same FLOPs
    names, t = part_time_table(m, acc, [(2, 2, 1, 32, 1), (2, 2, 1, 32, 2)], 4096)
    fwd = names.index("moe_routed_fwd")
    assert t[0, fwd] != t[1, fwd] and 0.5 < t[0, fwd] / t[1, fwd] < 2.0
    _, t4 = part_time_table(m, acc, [(2, 2, 1, 32)], 4096)  # a 4-tuple shape is ETP = TP
    assert np.array_equal(t4[0], t[1])
