"""fp8 against bf16: at one plan fp8 is never slower for DeepSeek-V3 on the GPU side (the MoE layers' host work
aside, which can make its per-expert casts cost more than its GEMMs save); where the search's fp8 plan is slower than
bf16's, the note says why (bf16's plan does not fit once the fp8 weight copies are cached)."""

import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.planning.compare import compare_training_designs, trust_notes
from hnplan.planning.dtype_gap import dtype_gap_note
from hnplan.planning.training import ParallelPlan, best_plan, estimate_plan, make_job

GIB = 2**30
# DeepSeek-V3 on 2,048 H100 at the compare command's default shape (sequence 8,192, 16Mi tokens a step)
JOB = ("deepseek-v3", "hgx-h100-ib-ndr", 2048, 8192, 2048)
BF16_PLAN = ParallelPlan(tp=2, pp=16, dp=32, cp=2, ep=4, microbatch_size=1, virtual_stages=1, zero_stage=1)
# where memory binds: DeepSeek-V3 on 256 H100, sequence 4,096, 4Mi tokens a step. On 2,048 GPUs fp8's search is
# faster than bf16's once every pipeline stage is weighed (the middle stages' four MoE layers and 15 micro-batches
# in flight rule out the plan above in bf16 too), so the note needs the smaller job.
NOTE_JOB = ("deepseek-v3", "hgx-h100-ib-ndr", 256, 4096, 1024)
NOTE_PLAN = ParallelPlan(tp=2, pp=16, dp=8, ep=4, microbatch_size=1, virtual_stages=1, zero_stage=1, recompute="full")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_fp8_weight_cache_doubles_the_weight_bytes_of_the_fullest_stage(cat):
    """Megatron-Core keeps bf16 weights (2 bytes a parameter) and fp32 main gradients (4); Transformer Engine's
    cached fp8 cast and transpose add 1 + 1 bytes to each fp8 GEMM's weight (not to the embedding, the head or the
    norms). So on the stage that binds in fp8 the weights weigh nearly as much as the gradients (4 against 4 for
    the GEMM weights), where without the cache they weigh half (2 against 4)."""
    cached = estimate_plan(make_job(*NOTE_JOB, "fp8", cat), NOTE_PLAN).memory_breakdown_gib
    plain = estimate_plan(make_job(*NOTE_JOB, "fp8", cat, overrides={"fp8_weight_cache": False}), NOTE_PLAN)
    assert 0.9 * cached["grads_gib"] < cached["params_gib"] < cached["grads_gib"]
    assert plain.memory_breakdown_gib["params_gib"] == pytest.approx(cached["grads_gib"] / 2, rel=1e-9)
    # gradients, optimizer states and activations do not change: the cache is the difference (plus the
    # runtime overheads that grow with the footprint)
    for part in ("grads_gib", "optimizer_gib", "activations_gib"):
        assert cached[part] == pytest.approx(plain.memory_breakdown_gib[part], rel=1e-9)
    extra = cached["params_gib"] - plain.memory_breakdown_gib["params_gib"]
    assert cached["total_gib"] - plain.memory_breakdown_gib["total_gib"] >= extra
    assert cached["total_gib"] > 79.11 >= plain.memory_breakdown_gib["total_gib"]  # H100's 79.11 GiB


@pytest.mark.parametrize(
    ("system", "plan", "stack"),
    [
        (JOB[1], BF16_PLAN, None),
        (
            JOB[1],
            ParallelPlan(tp=1, pp=16, dp=32, cp=4, ep=16, microbatch_size=1, virtual_stages=1, zero_stage=1),
            None,
        ),
        # deepseek-v3-2048 and its DualPipe row: 2,048 H800, TP1 PP16 EP64 (arXiv:2412.19437 Sec. 3.1-3.2)
        ("hgx-h800-ib", ParallelPlan(tp=1, pp=16, dp=128, ep=64, zero_stage=1, recompute="full"), None),
        (
            "hgx-h800-ib",
            ParallelPlan(tp=1, pp=16, dp=128, ep=64, zero_stage=1, recompute="full"),
            "deepseek-v3-dualpipe",
        ),
    ],
)
def test_at_one_plan_fp8_is_faster_than_bf16(cat, system, plan, stack):
    """fp8 GEMMs at twice the bf16 peak (H100/H800 datasheets) less the recipe's casts: a step is shorter in
    fp8 than in bf16 at the same plan, and no communication part grows (DeepSeek-V3 trained in FP8,
    arXiv:2412.19437 Sec. 3.3)."""
    seq, batch = (8192, 2048) if system == JOB[1] else (4096, 15360)
    # the GPU side: with the launches alone (the MoE layers' fitted host work, moe_host_us_per_kernel, makes the
    # first plan host-bound in its MoE layers, where fp8's per-expert casts cost more host time than its GEMMs
    # save: 6.925 against 6.918 s; docs/training.md, "The MoE layer's host work, fitted")
    over = {"moe_host_us_per_kernel": 0.0}
    steps = {
        d: estimate_plan(make_job("deepseek-v3", system, 2048, seq, batch, d, cat, stack=stack, overrides=over), plan)
        for d in ("bf16", "fp8")
    }
    assert steps["fp8"].step_time_s < steps["bf16"].step_time_s
    assert steps["fp8"].breakdown_s["compute"] < steps["bf16"].breakdown_s["compute"]
    for part in ("tp_comm_exposed", "cp_comm_exposed", "ep_comm_exposed", "pp_comm_exposed"):
        assert steps["fp8"].breakdown_s[part] <= steps["bf16"].breakdown_s[part] + 1e-12


def test_the_note_says_bf16_s_plan_does_not_fit_in_fp8_and_what_the_fp8_plan_pays(cat):
    (fp8,), _, _ = best_plan(*NOTE_JOB, "fp8", catalog=cat)
    (bf16,), _, _ = best_plan(*NOTE_JOB, "bf16", catalog=cat)
    assert (bf16.plan.tp, bf16.plan.pp, bf16.plan.ep, bf16.plan.recompute) == (2, 16, 8, "full")
    same = estimate_plan(make_job(*NOTE_JOB, "fp8", cat), bf16.plan)
    assert fp8.step_time_s > bf16.step_time_s > same.step_time_s  # slower searched, faster at bf16's plan
    assert not same.fits
    note = dtype_gap_note(*NOTE_JOB, "fp8", fp8, catalog=cat)
    assert note.startswith(f"On hgx-h100-ib-ndr, fp8 comes out slower than bf16 ({fp8.step_time_s:.2f} against ")
    assert f"needs {same.memory_per_gpu_bytes / GIB:.1f} GiB in fp8, more than the 79.1 GiB of HBM" in note
    assert "4 bytes of weights a parameter in fp8 against 2 in bf16" in note
    assert f"where it fit it would take {same.step_time_s:.2f} s" in note
    assert "EP communication exposed" in note  # the fp8 plan's all-to-all crosses nodes
    assert "fp8_params: true" in note  # fp8 weights only: 2 bytes a parameter again, and the plan fits


def test_no_note_in_bf16_or_where_fp8_is_faster(cat):
    (bf16,), _, _ = best_plan(*JOB, "bf16", catalog=cat)
    assert dtype_gap_note(*JOB, "bf16", bf16, catalog=cat) == ""
    (fp8,), _, _ = best_plan(*JOB, "fp8", catalog=cat)  # 2,048 H100: fp8's plan is the faster one
    (bf16,), _, _ = best_plan(*JOB, "bf16", catalog=cat)
    assert fp8.step_time_s < bf16.step_time_s and dtype_gap_note(*JOB, "fp8", fp8, catalog=cat) == ""
    job = ("deepseek-v3", "hgx-b200-ib-xdr", 2048, 8192, 2048)
    (fp8,), _, _ = best_plan(*job, "fp8", catalog=cat)
    assert dtype_gap_note(*job, "fp8", fp8, catalog=cat) == ""


def test_compare_carries_the_note_into_the_trust_paragraph(cat):
    df = compare_training_designs("deepseek-v3", ["hgx-h100-ib-ndr"], 256, 14.8e12, 4096, 1024, "fp8", catalog=cat)
    note = df.loc[0, "dtype_note"]
    assert note.startswith("On hgx-h100-ib-ndr, fp8 comes out slower than bf16")
    assert note in trust_notes(df, "deepseek-v3", cat)
