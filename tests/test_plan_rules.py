"""One set of plan rules (hnplan.compute.layout + hnplan.planning.training.plan_rules), one exception
class (PlanRuleError), one stage split, and one sizing answer for the CLI and the notebook."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.compute.layout import check_split, split_rules, stage_layer_range, stage_layers
from hnplan.errors import InfeasiblePlan, PlanRuleError
from hnplan.planning.training import (
    ParallelPlan,
    candidate_frame,
    estimate_training_step,
    make_job,
    rank_plans,
    valid_mask,
    validate_plan,
)

runner = CliRunner()


# ---------------------------------------------------------------------------------------------
# the stage split, by hand
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layers,pp,per,last,empty",
    [
        (126, 16, 8, 6, 0),  # Llama 3.1 405B: 15 x 8 + 6 = 126
        (126, 45, 3, -6, 3),  # 3 a stage fill 42 stages: 3 left empty (44 x 3 = 132 > 126)
        (80, 25, 4, -16, 5),  # 4 a stage fill 20 stages: 5 empty
        (128, 33, 4, 0, 1),  # 32 x 4 = 128: the 33rd stage is empty
        (128, 72, 2, -14, 8),  # 64 stages of 2: 8 empty
        (80, 9, 9, 8, 0),  # Llama 3.1 70B on PP 9: 8 x 9 + 8 = 80
        (32, 9, 4, 0, 1),  # Llama 3.1 8B on PP 9: 8 x 4 = 32, the ninth stage empty
        (61, 1, 61, 61, 0),
        (5, 8, 1, -2, 3),  # more stages than layers
    ],
)
def test_stage_split_by_hand(cat, layers, pp, per, last, empty):
    m = cat.model("llama3.1-8b").model_copy(update={"layers": layers})
    s = stage_layers(m, pp)
    assert (s.per_stage, s.last, s.empty) == (per, last, empty)
    # the vectorised form gives the same numbers
    v = stage_layers(m, np.array([pp, 1]))
    assert (v.per_stage.tolist(), v.last.tolist(), v.empty.tolist()) == ([per, layers], [last, layers], [empty, 0])


def test_stage_layer_range_follows_the_split(cat):
    # 126 layers on 16 stages: ceil(126 / 16) = 8 a stage, 126 - 15 x 8 = 6 on the last
    m = cat.model("llama3.1-405b")
    assert stage_layer_range(m, 16, "first") == range(0, 8)
    assert stage_layer_range(m, 16, "middle") == range(112, 120)
    assert stage_layer_range(m, 16, "last") == range(120, 126)
    # DeepSeek-V3, 61 layers: Megatron-Bridge's PP 16 layout leaves the last stage 1 decoder layer, PP 8 five
    ds = cat.model("deepseek-v3")
    assert len(stage_layer_range(ds, 16, "last")) == 1 and len(stage_layer_range(ds, 8, "last")) == 5
    assert stage_layer_range(ds, 2, "middle") == range(0, 0)  # two stages have no middle one
    assert stage_layer_range(ds, 1, "last") == range(0, 61)


# ---------------------------------------------------------------------------------------------
# each rule rejected with its message
# ---------------------------------------------------------------------------------------------


def test_tp_must_divide_the_kv_heads_in_training(cat):
    # a 48-head model with 16 KV heads: TP 6 divides the heads but not the 16 KV heads (Megatron's
    # divide(num_query_groups, tp) refuses it); inference replicates KV heads, so it is allowed there
    # (an MLP of 16,128 columns, which TP 6 and 8 divide: the 8B's 14,336 has no factor 3)
    m = cat.model("llama3.1-8b").model_copy(
        update={"id": "gqa-48-16", "heads": 48, "kv_heads": 16, "hidden": 6144, "ffn_hidden": 16128}
    )
    with pytest.raises(PlanRuleError, match=r"^tp = 6 does not divide the 16 KV heads of gqa-48-16 \(Megatron"):
        check_split(m, tp=6)
    check_split(m, tp=6, training=False)
    check_split(m, tp=8)
    # the search never proposes it
    df = candidate_frame(m, cat.system("gb200-nvl72"), 72, 4096, 144)
    assert set(df["tp"]) <= {1, 2, 4, 8} and len(df)


@pytest.mark.parametrize(
    "model,plan,gpus,batch,message",
    [
        (
            "llama3.1-405b",
            ParallelPlan(tp=8, pp=45, dp=1),
            360,
            45,
            "pp = 45 leaves 3 of its stages empty: llama3.1-405b has 126 layers, ceil(126 / 45) = 3 a stage",
        ),
        (
            "llama3.1-70b",
            ParallelPlan(tp=8, pp=25, dp=1),
            200,
            25,
            "pp = 25 leaves 5 of its stages empty: llama3.1-70b has 80 layers, ceil(80 / 25) = 4 a stage",
        ),
        ("llama3.1-405b", ParallelPlan(tp=16, pp=16, dp=8), 2048, 2048, "tp = 16 does not divide the 8 KV heads"),
        ("llama3.1-405b", ParallelPlan(tp=3, dp=2), 6, 2048, "tp = 3 does not divide the 128 attention heads"),
        ("llama3.1-405b", ParallelPlan(tp=8, pp=16, dp=128, ep=8), 16384, 2048, "llama3.1-405b has no experts"),
        (
            "llama3.1-405b",
            ParallelPlan(tp=8, pp=16, dp=128, microbatch_size=3),
            16384,
            2048,
            "global batch of 2048 sequences is not divisible by dp x microbatch = 128 x 3",
        ),
        ("llama3.1-405b", ParallelPlan(tp=8, pp=16, dp=64), 16384, 2048, "= 8192, not --gpus 16384"),
        ("llama3.1-405b", ParallelPlan(pp=256, dp=64), 16384, 2048, "exceeds the model's 126 layers"),
    ],
)
def test_each_rule_is_a_plan_rule_error_naming_it(model, plan, gpus, batch, message):
    with pytest.raises(PlanRuleError, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        estimate_training_step(model, "gb200-nvl72", gpus, plan, 8192, batch)
    assert isinstance(exc.value, InfeasiblePlan) and "\n" not in str(exc.value)


def test_the_search_drops_what_the_rules_forbid(cat):
    m, s = cat.model("llama3.1-405b"), cat.system("gb200-nvl72")
    df = candidate_frame(m, s, 72 * 64, 8192, 2304)
    assert len(df) and valid_mask(df, m, 72 * 64, 8192, 2304).all()
    split = stage_layers(m, df["pp"].to_numpy())
    assert (split.empty == 0).all() and (m.kv_heads % df["tp"] == 0).all()
    rules = split_rules(m, df["tp"], df["pp"], df["ep"])
    assert all(ok.all() for ok in rules.values())
    # a pinned pp that leaves stages empty: the search says which rule
    job = make_job(m, s, 360, 8192, 45)
    with pytest.raises(PlanRuleError, match="pp = 45 leaves 3 of its stages empty"):
        rank_plans(job, dict(tp=8, pp=45))


def test_train_cli_with_a_plan_megatron_rejects_exits_3_with_one_line():
    res = runner.invoke(
        app,
        [
            "train",
            "--model",
            "llama3.1-405b",
            "--system",
            "gb200-nvl72",
            "--gpus",
            "360",
            "--tp",
            "8",
            "--pp",
            "45",
            "--dp",
            "1",
            "--microbatch-size",
            "1",
            "--recompute",
            "full",
            "--zero",
            "1",
            "--virtual-stages",
            "1",
            "--seq-len",
            "8192",
            "--global-batch-size",
            "45",
        ],
    )
    assert res.exit_code == 3
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert "pp = 45 leaves 3 of its stages empty" in res.stderr and "Traceback" not in res.output
    assert len(lines) <= 2  # one message (rich may wrap it once)


# ---------------------------------------------------------------------------------------------
# one sizing answer
# ---------------------------------------------------------------------------------------------


def test_cli_and_notebook_size_the_same(cat):
    from hnplan.planning.sizing import size_designs

    args = [
        "size",
        "--model",
        "llama3.1-8b",
        "--tokens",
        "1e11",
        "--system",
        "hgx-h100-ib-ndr",
        "--seq-len",
        "4096",
        "--global-batch-tokens",
        str(4096 * 288),
        "--deadline-days",
        "2",
        "--json",
    ]
    cli = json.loads(runner.invoke(app, args).stdout)["results"][0]
    nb = size_designs("llama3.1-8b", ["hgx-h100-ib-ndr"], 1e11, 2, 4096, 288, catalog=cat).iloc[0]
    assert cli["gpus"] == nb["gpus"] and cli["days"] == pytest.approx(nb["days"], rel=1e-12)
    assert cli["goodput"] == pytest.approx(nb["goodput"], rel=1e-12) and cli["goodput"] < 1
    off = json.loads(runner.invoke(app, [*args, "--no-goodput"]).stdout)
    assert off["goodput"] is False and off["results"][0]["goodput"] == 1.0
    assert off["results"][0]["goodput_mode"] == "off" and off["results"][0]["gpus"] <= cli["gpus"]


def test_sizing_skips_counts_without_a_valid_plan_and_says_so(cat):
    from hnplan.planning.sizing import size_for_deadline

    # 72-GPU racks and a power-of-two batch: the factor 9 of a rack can only go to PP 9, which leaves a
    # stage of the 32 layers empty, so 72 GPUs have no valid plan (listed as skipped) and the job runs on
    # 64 of the rack's GPUs, the rack bought whole
    r = size_for_deadline("llama3.1-8b", "gb200-nvl72", 1e11, 2.0, 4096, 256, catalog=cat)
    assert (r["gpus"], r["gpus_bought"], r["units"]) == (64, 72, 1)
    assert [s["gpus"] for s in r["skipped"]] == [72] and "factor 9" in r["skipped"][0]["reason"]
    # a 405B model on 8-GPU servers: the first counts have no plan that fits or divides; they are listed
    r = size_for_deadline("llama3.1-405b", "hgx-h100-ib-ndr", 1e12, 30.0, 8192, 1024, catalog=cat)
    assert r["skipped"] and all(s["gpus"] < r["gpus"] and s["reason"] for s in r["skipped"])


def test_sizing_gives_up_after_a_doubling_of_counts_without_a_valid_plan(cat, monkeypatch):
    # the search's control flow with a planner that finds no layout at any count: on 72-GPU racks each
    # unit count is tried with the job on all 72 GPUs and on 64 of each rack; from the lower bound (1 rack)
    # the 2-3-5-smooth unit counts 1, 2 are tried, and at 2 = 2 x 1 a whole doubling had no valid plan
    import hnplan.planning.sizing_search as search

    asked = []

    def no_layout(model, system, gpus, *args, **kwargs):
        asked.append(gpus)
        raise PlanRuleError(f"no plan on {gpus} GPUs divides")

    monkeypatch.setattr(search, "time_to_train", no_layout)
    with pytest.raises(InfeasiblePlan, match="none of 2 successive counts of gb200-nvl72 from 72 to 144 GPUs"):
        search.size_for_deadline("llama3.1-8b", "gb200-nvl72", 1e9, 30.0, 4096, 256, catalog=cat)
    assert asked == [72, 64, 144, 128]


def test_balanced_ends_give_the_embedding_and_the_loss_a_chunk_each(cat):
    """Llama 3 (arXiv:2407.21783 Sec. 3.3.2): the first chunk of the first stage holds only the embedding,
    the last chunk of the last stage only the output projection and the loss. 126 layers on 16 stages of
    8 chunks: 16 x 8 = 128 chunk places = 126 layers + 2, one layer a chunk, so pp x v may reach L + 2
    with a stack that balances the ends, and only L without."""
    plan = ParallelPlan(tp=8, pp=16, dp=64, virtual_stages=8, zero_stage=2, recompute="none")
    with pytest.raises(PlanRuleError, match="pp x virtual_stages = 16 x 8 exceeds the model's 126 layers"):
        estimate_training_step("llama3.1-405b", "hgx-h100-roce-400g", 8192, plan, 8192, 2048, stack="megatron-core")
    est = estimate_training_step("llama3.1-405b", "hgx-h100-roce-400g", 8192, plan, 8192, 2048, stack="llama3-meta")
    assert est.num_microbatches == 32
    # v = 9 would need 144 places: more than 126 + 2, refused with the end chunks named
    with pytest.raises(PlanRuleError, match=r"exceeds the model's 126 layers and the 2 end chunks"):
        estimate_training_step(
            "llama3.1-405b",
            "hgx-h100-roce-400g",
            8192,
            ParallelPlan(tp=8, pp=16, dp=64, virtual_stages=9),
            8192,
            2048,
            stack="llama3-meta",
        )
    m, s = cat.model("llama3.1-405b"), cat.system("hgx-h100-roce-400g")
    fixed = dict(tp=8, pp=16, dp=64, microbatch_size=1)
    v_plain = set(candidate_frame(m, s, 8192, 8192, 2048, fixed)["virtual_stages"])
    v_balanced = set(candidate_frame(m, s, 8192, 8192, 2048, fixed, balanced_ends=True)["virtual_stages"])
    # plain split: 8 layers a stage and 6 on the last, so v divides both (Megatron-Core's whole layers per
    # model chunk): 1 or 2; the balanced ends leave the stack's own layout to decide, up to 16 x 8 = 128 places
    assert v_plain == {1, 2} and max(v_balanced) == 8  # 16 x 10 does not fit 126 + 2


# ---------------------------------------------------------------------------------------------
# virtual stages hold whole layers
# ---------------------------------------------------------------------------------------------


def test_virtual_stages_must_divide_each_stages_layers():
    """Llama 3.1 70B: 80 layers over 16 stages are 5 a stage (and 5 on the last), so the interleaved
    schedule's v must divide 5: Megatron-Core's TransformerConfig refuses "number of layers on each middle
    pipeline rank: 5 must be divisible by virtual pipeline parallel degree 3". v 5 runs (one layer a chunk).
    A stack whose recipes lay out the virtual stages themselves (pipeline_layout) is not held to it."""
    args = ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "512", "--seq-len", "8192"]
    args += ["--global-batch-size", "1024", "--tp", "8", "--pp", "16", "--dp", "4", "--stack", "megatron-lm-2022"]
    res = runner.invoke(app, [*args, "--virtual-stages", "3"])
    assert res.exit_code == 3 and "Traceback" not in res.output
    msg = " ".join(res.output.split())
    assert "virtual_stages = 3 (--virtual-stages) does not divide the layers of each pipeline stage" in msg
    assert "llama3.1-70b's 80 layers over pp = 16 stages put 5 on a stage" in msg
    ok = runner.invoke(app, [*args, "--virtual-stages", "5", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["parallel"]["virtual_stages"] == 5
    # 126 layers over 16 stages: 8 a stage and 6 on the last; v 4 divides 8 but not 6 (Megatron-Core's last-stage
    # check, for a stack that builds the uneven last stage without laying out its virtual stages)
    m405 = load_catalog().model("llama3.1-405b")
    with pytest.raises(PlanRuleError, match=r"8 on a stage and 6 on the last"):
        validate_plan(m405, 8192, ParallelPlan(tp=8, pp=16, dp=64, virtual_stages=4), 2048, 8192)
    # the Megatron-LM of 2022 builds no uneven last stage at all: pp 16 does not divide the 126 layers
    with pytest.raises(PlanRuleError, match=r"^pp = 16 does not divide the 126 layers of llama3.1-405b"):
        estimate_training_step(
            "llama3.1-405b",
            "hgx-h100-ib-ndr",
            8192,
            ParallelPlan(tp=8, pp=16, dp=64, virtual_stages=4),
            8192,
            2048,
            stack="megatron-lm-2022",
        )


def test_search_proposes_only_whole_layer_chunks():
    from hnplan.catalog import load_catalog

    cat = load_catalog()
    m, s = cat.model("llama3.1-70b"), cat.system("hgx-h100-ib-ndr")
    df = candidate_frame(m, s, 512, 8192, 1024, dict(tp=8, microbatch_size=1))
    per = -(-80 // df["pp"])  # ceil(80 / pp) layers a stage
    last = 80 - (df["pp"] - 1) * per
    assert len(df) and ((per % df["virtual_stages"] == 0) & (last % df["virtual_stages"] == 0)).all()
    assert set(df.loc[df["pp"] == 16, "virtual_stages"]) == {1, 5}  # 5 layers a stage: v 1 or 5
    laid_out = candidate_frame(m, s, 512, 8192, 1024, dict(tp=8, microbatch_size=1), pipeline_layout=True)
    assert {3, 4} <= set(laid_out.loc[laid_out["pp"] == 16, "virtual_stages"])  # an explicit layout runs them


def test_uneven_stages_only_where_the_stack_builds_them(cat):
    # GPT-3 175B has 96 layers: PP 5 gives stages of 20, 20, 20, 20 and 16. Megatron-Core builds such a last stage
    # (--decoder-last-pipeline-num-layers, core 0.9); the Megatron-LM of 2021 asserts num_layers % pp == 0
    # (megatron/model/transformer.py ParallelTransformer), so its stack refuses the plan with exit 3 and one line
    m = cat.model("gpt3-175b")
    plan = ParallelPlan(tp=8, pp=5, dp=1)
    assert validate_plan(m, 40, plan, 64, 2048) == 64  # the default stack's rule: no stage empty
    with pytest.raises(PlanRuleError, match=r"^pp = 5 does not divide the 96 layers of gpt3-175b, and the stack"):
        validate_plan(m, 40, plan, 64, 2048, uneven_stages=False)
    assert not cat.stack("megatron-lm-2021").pipeline_uneven_stages
    assert cat.stack("megatron-core").pipeline_uneven_stages
    args = ["train", "--model", "gpt3-175b", "--system", "dgx-a100-hdr", "--gpus", "40", "--seq-len", "2048",
            "--global-batch-size", "64", "--tp", "8", "--pp", "5", "--dp", "1", "--recompute", "full", "--zero", "0",
            "--microbatch-size", "1", "--virtual-stages", "1"]  # fmt: skip
    res = runner.invoke(app, [*args, "--stack", "megatron-lm-2021"])
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert "pp = 5 does not divide the 96 layers" in res.stderr
    assert len([x for x in res.stderr.splitlines() if x.strip()]) <= 2
    # the search with that stack proposes only dividing pipelines
    df = candidate_frame(m, cat.system("dgx-a100-hdr"), 480, 2048, 480, uneven_stages=False)
    assert len(df) and (96 % df["pp"] == 0).all()
    assert (96 % candidate_frame(m, cat.system("dgx-a100-hdr"), 480, 2048, 480)["pp"] != 0).any()
