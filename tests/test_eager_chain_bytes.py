"""The bytes eager PyTorch's element-wise chains move, forward and backward, derived by hand from the ops each
model code runs and the autograd function of each (pytorch/pytorch tools/autograd/derivatives.yaml): every op
reads its inputs and writes its output once (bf16 2 bytes, fp32 4), broadcast per-token tables and per-row
statistics not counted. Sources: foundation-model-stack @ 6440fee8 (fms/modules/positions.py, layernorm.py,
feedforward.py, attention.py), Hugging Face transformers modeling_llama.py, pytorch/torchtitan @ 395a526276ee
(torchtitan/models/llama/model.py), pytorch/pytorch @ 4537ef6cfa51 (torch/csrc/autograd/input_buffer.cpp)."""

import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.eager_ops import act_op, grad_sum_op, kv_expand_op, norm_op, rope_op
from hnplan.compute.fp8_recipes import StepKernels, kernel_class
from hnplan.compute.host import kernels_per_row
from hnplan.compute.layer_ops import _layer_ops
from hnplan.compute.operator_rows import _rows


def fwd_bwd(op):
    """(forward bytes, backward bytes) of one element-wise operator's training rows."""
    rows = {r[3]: r[6] for r in _rows(op, "train", "none", "executed", 1)}
    return rows["fwd"], rows["bwd"]


def test_fms_rotary_is_a_2x2_rotation_in_fp32():
    # q.float() read 2 + write 4; freqs.mul(q_.unsqueeze(-2)) read 4 + write 2 x 4 (two products per element);
    # .sum(5) read 8 + write 4; .type_as(q) read 4 + write 2
    fwd = (2 + 4) + (4 + 8) + (8 + 4) + (4 + 2)
    # the cast back 4 <- 2; the sum's backward an expand (a view); grad x freqs read 4 + write 8; the sum over the
    # broadcast dimension read 8 + write 4; the upcast's backward read 4 + write 2
    bwd = (2 + 4) + (4 + 8) + (8 + 4) + (4 + 2)
    assert (fwd, bwd) == (36, 36)
    assert fwd_bwd(rope_op("dense-layer", 1.0, StepKernels(rope_kernel="eager_matrix"), 3.0)) == (36.0, 36.0)


def test_complex_and_rotate_half_rotaries():
    # torchtitan: float() 6, complex multiply read 4 + write 4 per real element, type_as 6; backward the two casts
    # and grad x conj(freqs_cis)
    assert fwd_bwd(rope_op("dense-layer", 1.0, StepKernels(rope_kernel="eager_complex"), 3.0)) == (20.0, 20.0)
    # Hugging Face: q cos 4, neg of half 2, cat 4, x sin 4, add 6; backward grad cos 4, grad sin 4, neg 2, two
    # slice backwards (zeros 2 + copy of the half 1 + 1) 8, two additions of the three gradients of q 12
    fwd, bwd = 4 + 2 + 4 + 4 + 6, 4 + 4 + 2 + 2 * (2 + 1 + 1) + 2 * 6
    assert fwd_bwd(rope_op("dense-layer", 1.0, StepKernels(rope_kernel="eager"), 3.0)) == (fwd, bwd) == (20, 30)
    # the fused kernel: read and write bf16, the backward twice that (hnplan's assumption for fused operators)
    assert fwd_bwd(rope_op("dense-layer", 1.0, StepKernels(), 3.0)) == (4.0, 8.0)


def test_eager_rmsnorm_backward():
    fwd = 6 + 8 + 4 + 8 + 6 + 4  # to(fp32), pow, mean, * rsqrt, to(bf16), weight *
    # weight *: grad weight 4, grad y 6 + sum over tokens 2; to(bf16) back 6; * rsqrt: grad r 8, grad xf 12 + row
    # sum 4; mean: expand / width 4; pow: xf.pow(1) 8, 2 x 8, grad x 12; the two gradients of xf added 12; to(fp32)
    # back 6
    bwd = (4 + 6 + 2) + 6 + (8 + 12 + 4) + 4 + (8 + 8 + 12) + 12 + 6
    assert (fwd, bwd) == (36, 92)
    assert fwd_bwd(norm_op("attn_norm", "dense-layer", 1.0, StepKernels(norm_kernel="eager"), 4.0)) == (36.0, 92.0)


def test_eager_swiglu_is_two_streaming_kernels():
    fwd = (2 + 2) + (2 + 2 + 2)  # silu(gate); * up
    bwd = 3 * (2 + 2 + 2)  # grad x up; grad x silu(gate) (saved); silu_backward(grad, gate)
    op = act_op("mlp_act", "dense-layer", 2.0, 1.0, True, StepKernels(act_kernel="eager"), 5.0)
    assert fwd_bwd(op) == (fwd, bwd) == (10, 18)
    assert op.name == "mlp_act_eager" and kernel_class(op.name) == "residual"
    assert kernels_per_row(op.name, "dense-layer", "elementwise", 1.0, StackChoices(act_kernel="eager")) == 2.0
    # the fused kernel reads gate and up and writes the output: 6, backward 12; a GELU is one kernel either way
    assert fwd_bwd(act_op("mlp_act", "dense-layer", 2.0, 1.0, True, StepKernels(), 5.0)) == (6.0, 12.0)
    assert act_op("mlp_act", "dense-layer", 1.0, 1.0, False, StepKernels(act_kernel="eager"), 8.0).name == "mlp_act"


def test_gqa_kv_expansion_of_llama2_70b(cat):
    # 64 query heads, 8 K/V heads of 128: per token K and V read 2 x 8 x 128 x 2 bytes, written 2 x 64 x 128 x 2;
    # the expand's backward sums the 8 copies back (read the 64 heads' gradients, write the 8)
    per_token = 2 * 8 * 128 * 2 + 2 * 64 * 128 * 2
    op = kv_expand_op("dense-layer", 2 * 8 * 128, 64, 8, StepKernels(gqa_kv_copy=True))
    assert fwd_bwd(op) == pytest.approx((per_token, per_token)) and per_token == 36864
    assert kv_expand_op("dense-layer", 2 * 8 * 128, 64, 8, StepKernels()) is None  # SDPA's enable_gqa
    assert kv_expand_op("dense-layer", 2 * 32 * 128, 32, 32, StepKernels(gqa_kv_copy=True)) is None  # MHA
    kn = StepKernels.of(cat.stack("pytorch-eager-2403"))
    ops = _layer_ops(cat.model("llama2-70b"), "dense-layer", "train", 2, 4096, 0, 1, 1, 1, 2.0, kernels=kn)
    (kv,) = [o for o in ops if o.name == "kv_expand"]
    assert (kv.e_in, kv.e_out) == (2 * 4096 * 2 * 8 * 128, 2 * 4096 * 2 * 64 * 128)
    names = [o.name for o in ops]
    assert names.index("rope_eager") < names.index("kv_expand") < names.index("attention")
    assert "mlp_act_eager" in names and "attn_norm_eager" in names


def _bwd_bytes(ops, names):
    """Backward bytes of the named element-wise operators of a layer, summed."""
    rows = [r for o in ops if o.name in names for r in _rows(o, "train", "none", "executed", 1)]
    return sum(r[6] for r in rows if r[3] == "bwd")


def test_autograd_gradient_sums_of_the_fms_llama_block(cat):
    # LLaMABlock: the normed input feeds query, key and value (three nn.Linear): autograd adds the second and the
    # third gradient into the first, two adds over tokens x hidden; the MLP norm's output feeds wg and w1: one add;
    # each add reads two bf16 gradients and writes one (input_buffer.cpp accumulate, in place or not): 6 bytes
    tokens, h = 2 * 4096, 4096  # Llama 2 7B, 2 sequences of 4,096 tokens
    qkv = 2 * (2 + 2 + 2) * tokens * h
    up = 1 * (2 + 2 + 2) * tokens * h
    # x = x + residual: AddBackward0 hands the same gradient to both inputs (no kernel); the block input and the
    # mid-block residual each feed a norm and the add, one sum each
    forks = 2 * (2 + 2 + 2) * tokens * h
    assert (qkv, up, forks) == (402653184, 201326592, 402653184)
    kn = StepKernels.of(cat.stack("pytorch-eager-2403"))
    assert kn.grad_sums and StepKernels.of(cat.stack("pytorch-eager")).grad_sums
    ops = _layer_ops(cat.model("llama2-7b"), "dense-layer", "train", 2, 4096, 0, 1, 1, 1, 2.0, kernels=kn)
    assert _bwd_bytes(ops, {"qkv_grad_sum"}) == qkv and _bwd_bytes(ops, {"mlp_up_grad_sum"}) == up
    assert _bwd_bytes(ops, {"attn_residual", "mlp_residual"}) == forks
    # the fused default: no sums counted, each residual add's backward twice its forward (read 2, write 1): 12
    fused = _layer_ops(cat.model("llama2-7b"), "dense-layer", "train", 2, 4096, 0, 1, 1, 1, 2.0)
    assert not any(o.name.endswith("_grad_sum") for o in fused)
    assert _bwd_bytes(fused, {"attn_residual", "mlp_residual"}) == 2 * 12 * tokens * h
    # per layer and element of the hidden state: 12 + 6 + 12 = 30 bytes of backward against 24
    assert (qkv + up + forks) / (tokens * h) == 30


def test_gradient_sums_are_backward_only_streaming_kernels():
    op = grad_sum_op("qkv_grad_sum", "dense-layer", 10.0, 2, StepKernels(grad_sums=True))
    rows = _rows(op, "train", "full", "executed", 1)  # no forward and no recomputation: the sums are autograd's
    assert [(r[3], r[6]) for r in rows] == [("bwd", 2 * 6 * 10.0)]
    assert _rows(op, "decode", "none", "executed", 1) == []
    assert kernel_class(op.name) == "residual" and kernel_class("mlp_up_grad_sum") == "residual"
    assert kernels_per_row(op.name, "dense-layer", "elementwise", 1.0, StackChoices(autograd_grad_sums=True)) == 2.0
    assert kernels_per_row("mlp_up_grad_sum", "dense-layer", "elementwise", 1.0, StackChoices()) == 1.0
    assert grad_sum_op("qkv_grad_sum", "dense-layer", 10.0, 2, StepKernels()) is None
