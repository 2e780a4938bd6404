"""What eager PyTorch code keeps for the backward beyond the fused accounting (hnplan.memory.layer_tensors.EagerSaved),
and the gradients a set_to_none loop allocates during its backward (grads_in_backward), against the peaks measured on
one H200 (data/reference/h200_hf_llama_step.csv). Hand-derived values."""

import pytest

from hnplan.memory.layer_tensors import EagerSaved, activation_bytes_per_layer, output_activation_bytes
from hnplan.planning.memory import memory_summary

HF = EagerSaved(norm=True, act=True, fp32_stream=True, separate_projections=True, loss=True)


def test_hugging_face_layer_keeps_18h_plus_2f_more(cat):
    m = cat.model("llama3.2-1b")  # h 2,048, f 8,192, 32 heads / 8 KV heads of 64
    # two eager norms on an fp32 stream keep 8h each against a fused norm's 2h (+12h); five bf16 casts of the
    # normalised input against two shared inputs (+3 x 2h = 6h); the eager SwiGLU's activation output (+2f)
    assert HF.layer_extra(m) == (18 * 2048, 2 * 8192)
    fused = activation_bytes_per_layer(m, 4096, 1, dropout=False)
    eager = activation_bytes_per_layer(m, 4096, 1, dropout=False, eager=HF)
    assert eager - fused == 4096 * (18 * 2048 + 2 * 8192)
    # the fused count: norms and GEMM inputs 8h, Q, K, V and the output 2 (2,048 + 2 x 512 + 2,048), SwiGLU 6f
    assert fused == 4096 * (8 * 2048 + 2 * (2048 + 1024 + 2048) + 6 * 8192)
    # a fully recomputed layer keeps its fp32 input
    assert activation_bytes_per_layer(m, 4096, 1, recompute="full", eager=HF) == 4096 * 4 * 2048
    # the loss: the fp32 final norm (8h against 2h) and 10 bytes a logit beyond the fused 4 (the returned bf16 logits
    # 2, the backward's two fp32 gradients 8)
    assert HF.output_extra(m) == (6 * 2048, 10 * 128256)
    assert output_activation_bytes(m, 4096, 1, eager=HF) == 4096 * (4 * 2048 + 6 * 2048 + 14 * 128256)


def test_a_bf16_stream_keeps_the_upcast_copies_only(cat):
    m = cat.model("llama2-7b")  # foundation-model-stack: FSDP's bf16 parameters, eager norm and SwiGLU
    fms = EagerSaved(norm=True, act=True, separate_projections=True)
    assert fms.layer_extra(m) == (2 * 4 * 4096, 2 * 11008)  # the fp32 copy pow keeps, per norm; the act output
    assert fms.full_recompute_input() == 2.0 and fms.output_extra(m) == (4 * 4096, 0.0)
    assert EagerSaved(act=True).layer_extra(cat.model("mixtral-8x7b"), moe_layer=True) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("model", "mb", "measured"),
    [("llama3.2-1b", 1, 30.99), ("llama3.2-1b", 2, 45.80), ("llama3.2-1b", 4, 75.42), ("llama3.2-3b", 3, 114.75)],
)
def test_plain_pytorch_peaks_as_measured(cat, model, mb, measured):
    d = memory_summary(model, "train", seq_len=4096, microbatch_size=mb, zero=0, stack="pytorch-eager", catalog=cat)
    assert d["total_gib"] - d["overhead_gib"] == pytest.approx(measured, rel=0.005)
    assert d["grads_gib"] == 0.0  # the activations outweigh the gradients: the peak is the backward's start
    assert "allocated during its backward" in d["gradients_note"]


def test_gradients_count_in_full_where_a_buffer_keeps_them(cat):
    kw = dict(seq_len=4096, microbatch_size=1, zero=0, catalog=cat)
    ddp = memory_summary("llama3.2-1b", "train", dp=8, stack="pytorch-eager", **kw)  # DDP's buckets
    solo = memory_summary("llama3.2-1b", "train", stack="pytorch-eager", **kw)
    core = memory_summary("llama3.2-1b", "train", stack="megatron-core", **kw)
    assert ddp["grads_gib"] == pytest.approx(1.2358e9 * 4 / 2**30, rel=1e-3)  # fp32 gradients, 4.60 GiB
    assert solo["grads_gib"] == 0.0 and "gradients_note" not in ddp and "gradients_note" not in core


def test_recomputed_layers_keep_no_bf16_weight_copies(cat):
    # under autocast a fully recomputed layer saves none of its weights' bf16 casts: only the LM head's remain, the
    # tied 128,256 x 2,048 embedding in bf16 (0.49 GiB); measured 44.08 GiB at micro-batch 4 (h200_hf_llama_step.csv)
    kw = dict(seq_len=4096, microbatch_size=4, zero=0, stack="pytorch-eager", catalog=cat)
    full = memory_summary("llama3.2-1b", "train", recompute="full", **kw)
    none = memory_summary("llama3.2-1b", "train", recompute="none", **kw)
    assert full["params_gib"] == pytest.approx(2 * 128256 * 2048 / 2**30, rel=1e-9)
    assert none["params_gib"] == pytest.approx(2 * 1.2358e9 / 2**30, rel=1e-3)  # every bf16 copy saved
    assert full["total_gib"] - full["overhead_gib"] == pytest.approx(44.08, rel=0.005)
    # the loss's 14 bytes a logit (27.4 GiB at 4 x 4,096 tokens) still outweigh the 4.6 GiB of gradients
    assert full["grads_gib"] == 0.0 and "holds none of them" in full["gradients_note"]
    # Llama 3.1 8B at one sequence: 29.9 GiB of fp32 gradients outgrow the 7.9 GiB of activations, the peak the
    # backward's end
    big = memory_summary("llama3.1-8b", "train", recompute="full", **{**kw, "microbatch_size": 1})
    assert big["grads_gib"] == pytest.approx(8.03e9 * 4 / 2**30 - big["activations_gib"], rel=2e-3)
    assert "what they outgrow the activations by" in big["gradients_note"]


def test_memory_takes_the_stacks_zero_stage_when_none_is_given(cat):
    # pytorch-eager has ZeRO 0, 2 and 3 (DDP, FSDP): without --zero memory plans its 0, as train's search does
    kw = dict(seq_len=4096, microbatch_size=4, stack="pytorch-eager", catalog=cat)
    assert memory_summary("llama3.2-1b", "train", zero=None, **kw) == memory_summary(
        "llama3.2-1b", "train", zero=0, **kw
    )
    assert memory_summary("llama3.1-8b", "train", 4096, zero=None, catalog=cat)["parallel"]["zero"] == 1
