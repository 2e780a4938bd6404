"""Model states per accelerator: the field cases of issue 5 and the ZeRO paper, by hand."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan import units
from hnplan.compute import param_counts
from hnplan.errors import InputError
from hnplan.memory import (
    ACCOUNTINGS,
    ZERO_STAGES,
    hbm_capacity_bytes,
    model_state_bytes_per_gpu,
    stage_params,
    training_overheads,
    zero_model_state_bytes,
)


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020 Fig. 1: 7.5B parameters, Nd = 64, K = 12: 120 / 31.4 / 16.6 / 1.9 GB
    got = [sum(zero_model_state_bytes(7.5e9, 64, z)) / 1e9 for z in ZERO_STAGES]
    assert got == pytest.approx([120.0, 31.4, 16.6, 1.9], abs=0.05)
    # by hand: stage 1 = (2 + 2) * 7.5 + 12 * 7.5 / 64 = 31.406 GB
    assert got[1] == pytest.approx(30 + 90 / 64)


def test_2851m_zero2_with_fp32_gradient_buffer():
    # DeepSpeed PR #5099: 2 bytes of fp16 weights + a 1/8 shard of 2 (fp16 grads) + 4 (fp32 grads)
    # + 4 (fp32 weights) + 8 (Adam moments) = 2 + 18/8 = 4.25 bytes per parameter
    w, g, o = zero_model_state_bytes(2.851e9, 8, 2, "fp32-grad-accum")
    assert (w, g, o) == pytest.approx((2 * 2.851e9, 2 * 2.851e9 / 8, 16 * 2.851e9 / 8))
    assert units.to_GiB(w + g + o) == pytest.approx(11.28, abs=0.005)


def test_2851m_textbook_accountings_differ():
    # the ZeRO paper's 2 + 2 + 12 at stage 2 is 2 + 14/8 = 3.75 B/param = 9.96 GiB; its stage-1 form,
    # the "4 + 12/N" many write for ZeRO-2, is 5.5 B/param = 14.60 GiB: neither is the 11.28 GiB above
    assert units.to_GiB(sum(zero_model_state_bytes(2.851e9, 8, 2, "zero-paper"))) == pytest.approx(9.957, abs=0.001)
    assert units.to_GiB(sum(zero_model_state_bytes(2.851e9, 8, 1, "zero-paper"))) == pytest.approx(14.604, abs=0.001)


def test_megatron_distributed_optimizer_table():
    # Megatron Core "Distributed Optimizer": bytes per parameter with d-way data parallelism
    d = 8
    per_param = {k: sum(zero_model_state_bytes(1.0, d, 1, k)) for k in ("fp32-grad-accum", "megatron-bf16", "fp32")}
    assert per_param == pytest.approx({"fp32-grad-accum": 4 + 16 / d, "megatron-bf16": 6 + 12 / d, "fp32": 8 + 8 / d})
    totals = {k: ACCOUNTINGS[k].total_bytes for k in per_param}
    assert totals == {"fp32-grad-accum": 20, "megatron-bf16": 18, "fp32": 16}


def test_7b_fp32_full_finetune_does_not_fit_on_80gb(cat):
    # fp32 weights (4 B) + Adam moments (8 B) = 12 B/param: 84 GB for 7B, above the datasheet's 80 GB
    w, g, o = zero_model_state_bytes(7e9, 1, 0, "fp32")
    assert (w + o) / 1e9 == pytest.approx(84.0)
    assert w + o > units.GB_to_bytes(cat.accelerator("h100-sxm").hbm_gb)
    # the card exposes 79.11 GiB = 84.9 GB; with the CUDA context and the allocator's reserve the two
    # states alone still do not fit, before 28 GB of gradients and the activations
    hbm = hbm_capacity_bytes(cat.accelerator("h100-sxm"))
    over = training_overheads(w + o, catalog=cat)
    assert w + o + over["cuda_context"] + over["fragmentation"] > hbm
    assert w + g + o > hbm


def test_stage_params_place_embeddings_and_head(cat):
    m = cat.model("llama3.1-8b")
    pc = param_counts(m)
    per_layer = pc.attention_per_layer + pc.dense_mlp_per_layer + pc.norms_per_layer
    first, last = stage_params(m, 2, 4, stage="first"), stage_params(m, 2, 4, stage="last")
    assert first.dense == pytest.approx((8 * per_layer + m.vocab * m.hidden) / 2)
    assert last.dense == pytest.approx((8 * per_layer + m.vocab * m.hidden + m.hidden) / 2)
    assert stage_params(m, 1, 1).dense == pytest.approx(pc.total)


def test_tied_embeddings_copied_on_last_stage(cat):
    m = cat.model("gpt3-175b")  # tied: Megatron keeps a copy of the word embedding on the last stage
    pc = param_counts(m)
    assert stage_params(m, 1, 8, stage="last").dense - stage_params(m, 1, 8, stage="first").dense == pytest.approx(
        pc.final_norm - pc.position
    )


def test_deepseek_dense_layers_on_first_stage(cat):
    m = cat.model("deepseek-v3")  # first 3 of 61 layers are dense
    first, last = stage_params(m, 1, 16, ep=8, stage="first"), stage_params(m, 1, 16, ep=8, stage="last")
    middle = stage_params(m, 1, 16, ep=8, stage="middle")
    # 61 layers on 16 stages: 4 a stage, 61 - 15 x 4 = 1 on the last (Megatron-Bridge's PP 16 layout)
    assert (first.layers, first.moe_layers, middle.moe_layers, last.layers, last.moe_layers) == (4, 1, 4, 1, 1)
    pc = param_counts(m)
    # the last stage also trains the MTP module (arXiv:2412.19437 Sec. 2.2): one more MoE layer; EP shards
    # the 256 routed experts (3 x 7168 x 2048 each), not the shared expert and the router
    assert last.expert == pytest.approx((1 + 1) * 256 * 3 * 7168 * 2048 / 8)
    assert middle.expert == pytest.approx(4 * 256 * 3 * 7168 * 2048 / 8)
    assert pc.moe_shared_per_layer == 3 * 7168 * 2048 + 7168 * 256


def test_mtp_module_params_on_the_last_stage(cat):
    """DeepSeek-V3's MTP module on the last of 16 stages, by hand (h = 7168, V = 129,280): its layer's
    attention, norms, shared expert (3 x h x 2048) and router (h x 256), the 2h x h projection, two RMSNorms
    and the stage's own embedding copy."""
    m = cat.model("deepseek-v3")
    pc = param_counts(m)
    h, v = 7168, 129280
    no_mtp = m.model_copy(update={"mtp_modules": 0})
    extra = stage_params(m, 1, 16, stage="last").dense - stage_params(no_mtp, 1, 16, stage="last").dense
    shared = 3 * h * 2048 + h * 256
    assert extra == pytest.approx(pc.attention_per_layer + pc.norms_per_layer + shared + 2 * h * h + 2 * h + v * h)
    # 0.19B MLA attention + 0.05B shared expert and router + 0.10B projection + 0.93B embedding
    assert extra == pytest.approx(1.26e9, rel=0.01)
    # the first stage holds no MTP parameters; with pp = 1 the embedding is not counted twice
    assert stage_params(m, 1, 16, stage="first").dense == stage_params(no_mtp, 1, 16, stage="first").dense
    one = stage_params(m, 1, 1, stage="last").dense - stage_params(no_mtp, 1, 1, stage="last").dense
    assert one == pytest.approx(pc.attention_per_layer + pc.norms_per_layer + shared + 2 * h * h + 2 * h)


def test_unknown_accounting_and_stage():
    with pytest.raises(InputError, match="zero-paper"):
        zero_model_state_bytes(1e9, 8, 1, "adam16")
    with pytest.raises(InputError, match="0, 1, 2, 3"):
        zero_model_state_bytes(1e9, 8, 4)


MODELS = ["llama3.1-8b", "llama3.1-70b", "gpt3-175b", "mixtral-8x7b", "deepseek-v3"]


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([2, 4, 8]),
    dp=st.sampled_from([1, 2, 8, 64]),
    zero=st.sampled_from(ZERO_STAGES),
    recipe=st.sampled_from(sorted(ACCOUNTINGS)),
    stage=st.sampled_from(["first", "last"]),
)
def test_more_sharding_never_raises_model_states(cat, model, tp, pp, dp, zero, recipe, stage):
    m = cat.model(model)
    ep = 8 if m.moe else 1
    base = sum(model_state_bytes_per_gpu(m, tp, pp, dp * ep, ep, zero, recipe, stage=stage))
    for more in (dict(tp=2 * tp), dict(pp=2 * pp), dict(dp=2 * dp * ep), dict(zero=min(zero + 1, 3))):
        kw = dict(tp=tp, pp=pp, dp=dp * ep, ep=ep, zero=zero) | more
        assert sum(model_state_bytes_per_gpu(m, recipe=recipe, stage=stage, **kw)) <= base * (1 + 1e-12)


def test_overheads_catalog_rejects_a_placeholder_source(data_copy):
    from hnplan.catalog import Catalog

    p = data_copy / "memory.yaml"
    p.write_text(p.read_text().replace('source: "labelled assumption: the PyTorch', 'source: "TODO the PyTorch'))
    problems = Catalog(data_copy).validate()
    assert any("memory.yaml" in msg and "allocator_fragmentation_fraction" in msg for msg in problems)


def test_overheads_by_parallel_group(cat):
    o = cat.memory_overheads
    gib = units.GiB
    # TP, DP x CP and PP groups of more than one rank, plus EP with its all-to-all buffers
    got = training_overheads(100 * gib, tp=8, pp=4, dp=8, ep=8, catalog=cat)
    assert got["nccl"] == pytest.approx((4 * o.nccl_gib_per_communicator.value + o.nccl_alltoall_extra_gib.value) * gib)
    assert got["cuda_context"] == o.cuda_context_gib.value * gib
    assert got["fragmentation"] == pytest.approx(o.allocator_fragmentation_fraction.value * 100 * gib)
    assert training_overheads(1.0, catalog=cat)["nccl"] == 0


def test_alltoall_buffers_follow_the_nvlink_channels(cat):
    """NCCL (src/graph/paths.cc @ v2.26.3-1) opens 2 send/recv channels per NVLink to an NVLink peer, rounded up
    to a power of two and at most the communicator's: the 8 x H100 reading of the all-to-all buffers (NVIDIA/nccl
    issue #1685) has 32 a peer; an H800's 8 links open 16 (2 x 8), so its all-to-all holds half the buffers."""
    from hnplan.memory.training import nccl_alltoall_scale
    from hnplan.planning.training import ParallelPlan, estimate_plan, make_job

    o, gib = cat.memory_overheads, units.GiB
    h800, h100 = cat.accelerator("h800-sxm"), cat.accelerator("h100-sxm")
    assert (h800.nvlink_links, h100.nvlink_links, o.nccl_alltoall_channels_per_peer.value) == (8, 18, 32)
    assert nccl_alltoall_scale(h800, cat) == 16 / 32 and nccl_alltoall_scale(h100, cat) == 1.0  # pow2Up(36) > 32
    assert nccl_alltoall_scale(cat.accelerator("mi300x"), cat) == 1.0  # no NVLink count: the reading
    half = training_overheads(0.0, ep=8, catalog=cat, alltoall_scale=0.5)["nccl"]
    assert half == pytest.approx((o.nccl_gib_per_communicator.value + 0.5 * o.nccl_alltoall_extra_gib.value) * gib)
    # the planner passes the system's accelerator: the same plan on H800 and H100 servers differs by that 1.5 GiB
    # (and the allocator's reserve of nothing more: the tensors are the same)
    plan = ParallelPlan(tp=1, pp=2, dp=8, ep=8, microbatch_size=1, zero_stage=1, recompute="full")
    on = {
        s: estimate_plan(make_job("qwen3-30b-a3b", s, 16, 4096, 64, "bf16", cat), plan).memory_breakdown_gib
        for s in ("hgx-h800-ib", "hgx-h100-ib-ndr")
    }
    delta = on["hgx-h100-ib-ndr"]["overhead_gib"] - on["hgx-h800-ib"]["overhead_gib"]
    assert delta == pytest.approx(0.5 * o.nccl_alltoall_extra_gib.value)
