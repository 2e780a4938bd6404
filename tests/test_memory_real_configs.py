"""Memory of configurations that ran in published runs (issue 13 item 6): hand-derived bytes.

Llama 3 405B (126 layers, h = 16,384, f = 53,248, 128 heads of 128, 8 KV heads, vocabulary 128,256;
arXiv:2407.21783 Table 3) at TP 8, PP 16, sequence 8,192, micro-batch 1, no activation
checkpointing (Sec. 3.3.2; Table 4), and the MLPerf v5.0 405B FP8 submission on 512 H200 (TP 4, PP 8,
CP 2, VP 8, distributed optimizer, fp8 parameters, bf16 gradients, embedding and loss in the pipeline
split: training_results_v5.0 Nebius config_DGXH200_64x8x144xtp4pp8cp2.sh, NVIDIA pretrain.py).
"""

import numpy as np
import pytest

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.memory import hbm_capacity_bytes, training_memory
from hnplan.memory.activations import balanced_in_flight, end_stage_layers
from hnplan.memory.states import end_stage_layer_range, stack_accounting
from hnplan.planning.training import ParallelPlan
from hnplan.planning.training.components import memory_recipe, stack_choices
from hnplan.planning.training.evaluate import estimate_plan, evaluate_plans, make_job
from hnplan.planning.training.plan import plans_frame

# Llama 3 405B, one layer, per token, sequence parallel, no dropout [bytes] (activations.py accounting):
# replicated 8h (two norm inputs, QKV and fc1 inputs), split Q 2h + K,V 2 x 2 x 8 x 128 + attention
# output 2h + SwiGLU 6f; everything / t.
H, F = 16384, 53248
LLAMA_TOKEN_LAYER = 8 * H + 2 * H + 4 * 8 * 128 + 2 * H + 6 * F  # 520,192 bytes


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_stack_accounting_bytes_per_parameter():
    # Megatron-Core distributed optimizer docs: bf16 params + fp32 grads 6 + 12/d; 16-bit grads 4 + 16/d
    assert (lambda a: (a.weight_bytes, a.grad_bytes, a.optimizer_bytes))(stack_accounting("bf16", 4.0)) == (2, 4, 12)
    assert (lambda a: (a.weight_bytes, a.grad_bytes, a.optimizer_bytes))(stack_accounting("bf16", 2.0)) == (2, 2, 16)
    # fp8 with bf16 weights: Transformer Engine's cached fp8 weight and transpose add 2 bytes
    assert stack_accounting("fp8", 4.0).weight_bytes == 4
    assert stack_accounting("fp8", 4.0, fp8_weight_cache=False).weight_bytes == 2
    # fp8 parameters: fp8 weight and transpose only
    assert stack_accounting("fp8", 2.0, fp8_params=True).weight_bytes == 2


def test_balanced_end_stages_and_in_flight(cat):
    m = cat.model("llama3.1-405b")
    assert end_stage_layers(m, np.array([16]))[0] == 8  # ceil(126 / 16)
    assert end_stage_layers(m, np.array([16]), balanced=True)[0] == 7  # ceil(128 / 16) - 1
    assert len(end_stage_layer_range(m, 16, "last", balanced=True)) == 7
    # p 16, v 8: one layer a chunk, the first chunk only the embedding: 16 micro-batches of 7 layers
    assert balanced_in_flight(np.array([7]), 16, 32, 8)[0] == 16
    # p 8, v 8, 16 places a stage: chunks of 2, the first one layer; 8 + 7 x 1 x 1 / 15
    assert balanced_in_flight(np.array([15]), 8, 144, 8)[0] == pytest.approx(8 + 7 / 15)


@pytest.mark.parametrize("dp,mbs", [(64, 32), (128, 16)])
def test_llama3_405b_as_run_fits_on_h100(cat, dp, mbs):
    m = cat.model("llama3.1-405b")
    ch = stack_choices(cat.stack("llama3-meta"))
    r = training_memory(
        m,
        8192,
        1,
        8,
        16,
        dp,
        zero=2,
        recompute="none",
        num_microbatches=mbs,
        virtual_stages=8,
        recipe=memory_recipe("bf16", ch),
        dropout=m.dropout,
        balanced=True,
        catalog=cat,
    )
    # 7 layers x 16 micro-batches x 8,192 tokens x 520,192 / 8 bytes; no embedding mask without dropout
    assert r.activations_bytes == pytest.approx(7 * 16 * 8192 * LLAMA_TOKEN_LAYER / 8)
    assert units.to_GiB(r.activations_bytes) == pytest.approx(55.56, abs=0.01)
    assert r.total_bytes < hbm_capacity_bytes(cat.accelerator("h100-sxm"))
    # the planner's memory term for the same plan (evaluate_plans: plan.py's rule pp x v <= L does not
    # yet count the embedding and loss places, 16 x 8 = 128 = 126 + 2)
    job = make_job(m, "hgx-h100-ib-ndr", 8 * 16 * dp, 8192, 2048, "bf16", cat, stack="llama3-meta")
    row = evaluate_plans(
        job, plans_frame([ParallelPlan(tp=8, pp=16, dp=dp, virtual_stages=8, zero_stage=2, recompute="none")])
    ).iloc[0]
    assert row["memory_per_gpu_bytes"] == pytest.approx(r.total_bytes)
    assert bool(row["fits"])


def test_llama31_405b_fp8_on_512_h200_fits(cat):
    m = cat.model("llama3.1-405b")
    job = make_job(m, "hgx-h200-ib-ndr", 512, 8192, 1152, "fp8", cat, stack="nemo-mlperf-v50")
    est = estimate_plan(job, ParallelPlan(tp=4, pp=8, dp=8, cp=2, virtual_stages=8, zero_stage=1, recompute="none"))
    # the fullest stage is a middle one: 16 layers (ceil(128 / 8)) of 3.19B parameters each, / TP 4, against
    # the first stage's 15 (ceil(128 / 8) - 1) plus the 2.10B-parameter vocabulary-parallel embedding;
    # 2 bytes weights (fp8 + transpose), 2 bytes bf16 grads, 16 / (dp cp)
    layer = 2 * H * H + 2 * H * 1024 + 3 * H * F + 2 * H  # 3,187,703,808 parameters
    first = (15 * layer + 128256 * H) / 4  # 12,479,225,856 a GPU
    n = 16 * layer / 4  # 12,750,815,232 a GPU
    assert n > first
    r = training_memory(
        m,
        8192,
        1,
        4,
        8,
        8,
        cp=2,
        zero=1,
        recompute="none",
        num_microbatches=144,
        virtual_stages=8,
        recipe=memory_recipe("fp8", job.choices),
        dropout=False,
        balanced=True,
        catalog=cat,
    )
    assert (r.params_bytes, r.grads_bytes, r.optimizer_bytes) == pytest.approx((2 * n, 2 * n, 16 * n / 16))
    assert est.memory_per_gpu_bytes == pytest.approx(r.total_bytes)
    assert est.memory_per_gpu_bytes < hbm_capacity_bytes(cat.accelerator("h200-sxm"))


def test_apex_distributed_adam_bytes_per_parameter():
    # NeMo 1 distributed_fused_adam (Apex): bf16 weights and gradient buffer; sharded 16-bit master-weight
    # remainders + fp32 moments + the reduce-scattered bf16 gradient shard: 4 + 12/d; fp8 params: fp32 masters
    a = stack_accounting("bf16", 2.0, optimizer="apex")
    assert (a.weight_bytes, a.grad_bytes, a.optimizer_bytes) == (2, 2, 2 + 8 + 2)
    assert (a.embedding_grad_extra, a.embedding_optimizer_extra) == (2, 2)  # the embeddings' fp32 gradients
    assert stack_accounting("fp8", 2.0, fp8_params=True, optimizer="apex").optimizer_bytes == 4 + 8 + 2
    assert stack_accounting("bf16", 4.0, optimizer="apex").embedding_grad_extra == 0


@pytest.mark.parametrize("dp", [4, 16])
def test_nemo_2409_llama31_405b_as_run_fits_on_h100(cat, dp):
    # NVIDIA/dgxc-benchmarking llama3.1_405b.yaml (NeMo 24.09): TP 8, PP 9, VP 7, CP 2, micro-batch 1,
    # GA 63, distributed_fused_adam with grad_sync_dtype bf16, no recomputation; ran on 576 and 2,304 H100
    m = cat.model("llama3.1-405b")
    layer = 2 * H * H + 2 * H * 1024 + 3 * H * F + 2 * H  # 3,187,703,808 parameters
    emb = 128256 * H / 8  # the first stage's vocabulary-parallel embedding a GPU
    n = 14 * layer / 8 + emb  # the first stage: ceil(126 / 9) = 14 layers and the embedding
    d = dp * 2  # the optimizer shards over data x context parallel ranks
    job = make_job(m, "hgx-h100-ib-ndr", 8 * 9 * 2 * dp, 8192, 63 * dp, "bf16", cat, stack="nemo-2409")
    r = training_memory(
        m,
        8192,
        1,
        8,
        9,
        dp,
        cp=2,
        zero=1,
        recompute="none",
        num_microbatches=63,
        virtual_stages=7,
        recipe=memory_recipe("bf16", job.choices),
        dropout=False,
        catalog=cat,
    )
    # weights 2; gradient buffer 2 (fp32 for the embedding: + 2); shard (2 + 8 + 2) / d (+ 2 / d embedding)
    assert (r.params_bytes, r.grads_bytes, r.optimizer_bytes) == pytest.approx(
        (2 * n, 2 * n + 2 * emb, (12 * n + 2 * emb) / d)
    )
    # interleaved 1F1B, first stage: p (1 + (p - 1) / (p v)) = 9 + 8 / 7 micro-batches of 14 layers, 4,096
    # tokens each (CP 2)
    assert r.activations_bytes == pytest.approx(14 * (9 + 8 / 7) * 4096 * LLAMA_TOKEN_LAYER / 8)
    assert units.to_GiB(r.total_bytes) == pytest.approx({4: 71.94, 16: 65.46}[dp], abs=0.01)
    assert r.total_bytes < hbm_capacity_bytes(cat.accelerator("h100-sxm"))
    est = estimate_plan(job, ParallelPlan(tp=8, pp=9, dp=dp, cp=2, virtual_stages=7, zero_stage=1, recompute="none"))
    assert est.memory_per_gpu_bytes == pytest.approx(r.total_bytes)
    # Megatron-Core's distributed optimizer with fp32 gradients (6 + 12/d) would not fit at DP 4
    if dp == 4:
        mc = training_memory(
            m, 8192, 1, 8, 9, dp, cp=2, zero=1, recompute="none", num_microbatches=63, virtual_stages=7,
            recipe=stack_accounting("bf16", 4.0), dropout=False, catalog=cat,
        )  # fmt: skip
        assert mc.total_bytes > hbm_capacity_bytes(cat.accelerator("h100-sxm"))


# ---- overlap as it is (issue 13 item 3) ----


def test_overlapped_comm_by_hand():
    from hnplan.planning.training.components import overlapped_comm

    # 1 s of TP traffic, 10 s of GEMMs: 0.75 hidden, 0.25 exposed, the hidden part slows the GEMMs by 0.14
    assert float(overlapped_comm(1.0, 10.0, 0.75, 0.14)) == pytest.approx(0.25 + 0.14 * 0.75)
    # only as much as the compute can hide: 0.5 s behind 0.5 s
    assert float(overlapped_comm(1.0, 0.5, 1.0, 0.18)) == pytest.approx(0.5 + 0.18 * 0.5)
    # the cost vanishes only with full overlap and no slowdown
    assert float(overlapped_comm(1.0, 10.0, 1.0, 0.0)) == 0.0


def test_tp_overlap_no_longer_hides_all_tp_traffic(cat):
    from hnplan.planning.training import StackChoices
    from hnplan.planning.training.search import estimate_training_step

    # TP 4, PP 8, micro-batch 2: the GPT-3 layout of NVIDIA's MLPerf H100 submissions. (At TP 8 and micro-batch 1
    # the userbuffers overlap's 8 GEMM chunks of 256 rows cost more than the overlap hides: 4.89 -> 4.91 s.)
    plan = ParallelPlan(tp=4, pp=8, dp=2, microbatch_size=2, recompute="selective")
    kw = dict(catalog=cat)
    base = estimate_training_step("gpt3-175b", "hgx-h100-ib-ndr", 64, plan, 2048, 64, **kw)
    ov = StackChoices(tp_comm=True)
    hid = estimate_training_step("gpt3-175b", "hgx-h100-ib-ndr", 64, plan, 2048, 64, choices=ov, **kw)
    t = base.breakdown_s["tp_comm_exposed"]
    assert t > 0
    # TP time (per micro-batch) is far below the GEMM time here, so hidden = 0.75 t
    assert hid.breakdown_s["tp_comm_exposed"] == pytest.approx(t * (1 - (1 - 0.14) * 0.75), rel=1e-9)
    assert 0 < hid.step_time_s < base.step_time_s
