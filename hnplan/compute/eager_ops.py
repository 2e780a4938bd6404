"""The element-wise chains eager PyTorch runs where a tuned stack runs one kernel, and the bytes each moves.

Every op of a chain is its own kernel that reads its inputs and writes its output in HBM (bf16 2 bytes per
element, fp32 4); the backward runs the autograd function of each forward op. Per-token tables (rotary
frequencies) and per-row statistics (a norm's mean square) are small beside the activations and not counted.
These are operators of :mod:`hnplan.compute.layer_ops`, chosen by the stack (``norm_kernel``, ``rope_kernel``,
``act_kernel``, ``gqa_kv_copy`` of :class:`hnplan.catalog.schemas.StackChoices`, through
:class:`hnplan.compute.fp8_recipes.StepKernels`); their kernel classes follow from their names
(:func:`hnplan.compute.fp8_recipes.kernel_class`).

Eager PyTorch chains ([1]_): Hugging Face's ``LlamaRMSNorm`` upcasts to fp32, squares, takes the mean,
multiplies by the reciprocal square root, casts back and multiplies by the weight, each its own
kernel: per element 6 (cast up) + 8 (square) + 4 (mean) + 8 (scale) + 6 (cast down) + 4 (weight) = 36
bytes against the fused kernel's 4, timed at the ``norm_eager`` class fitted to the eager RMSNorm
measured on an H200 (``data/reference/h200_kernels.csv``). Its backward runs the autograd function of each of
those ops ([4]_; foundation-model-stack's ``LayerNormParameterized`` with ``use_high_precision_pow`` runs the
same ops [2]_): the weight multiply's ``grad x weight`` 4 and ``grad x y`` 6 with its sum over the tokens 2; the
cast back to fp32 6; the scale's ``grad x rsqrt`` 8 and ``grad x xf`` 12 with its sum over the row 4; the mean's
expand divided by the width 4; the square's ``grad x (2 x xf.pow(1))`` 8 + 8 + 12; the sum of the two gradients
of ``xf`` 12; the cast to bf16 6: 92 bytes per element (:data:`NORM_EAGER_BWD_BYTES`) against the 72 of twice the
forward, at the same class (assumption: the backward kernels stream as the forward ones measured).
``apply_rotary_pos_emb`` computes ``q cos + rotate_half(q) sin``: 4 (x cos), 2 (rotate_half's negation of half
the elements), 4 (its concatenation), 4 (x sin), 6 (add) = 20 bytes per element against 4; backward 4 (grad x
cos), 4 (grad x sin), 2 (the negation), 8 (each slice's backward writes a zeroed full-size gradient and copies
its half in: 2 x 4) and 12 (two additions gathering the three gradients of q): 30; streaming kernels at the
``residual`` class. Other model codes run other rotary chains (``rope_kernel``), counted the same way per
element of q and k ([2]_, [3]_, [4]_):

* ``eager_matrix`` (foundation-model-stack ``RotaryEmbedding.adjusted_qk``, as the fms-fsdp runs): ``q.float()``
  6 (read 2, write 4), the broadcast multiply by the 2 x 2 rotation ``freqs.mul(q_.unsqueeze(-2))`` 12 (read 4,
  write 8: two fp32 products per element; the rotation, per token and shared by the heads, not counted),
  ``.sum(5)`` 12 (read 8, write 4), ``.type_as(q)`` 6 (read 4, write 2): 36 forward. Backward: the cast back 6,
  the sum's backward an expand (a view), the multiply's ``grad x freqs`` 12 (read 4, write 8) and the sum over
  the broadcast dimension 12 (read 8, write 4), the upcast's backward 6: 36, once the forward, not twice.
* ``eager_complex`` (Meta's Llama and torchtitan ``apply_rotary_emb``): ``float()`` 6, the complex multiply by
  ``freqs_cis`` 8 (read and write 4 bytes per real element), ``type_as`` 6: 20 forward; backward the casts 6 + 6
  and ``grad x conj(freqs_cis)`` 8: 20.

The SwiGLU ``act(gate) x up`` runs as two eager kernels wherever the model writes it so (Hugging Face
``LlamaMLP``, foundation-model-stack ``GatedLinearUnit``, torchtitan ``FeedForward``; ``act_kernel: eager``):
``silu`` 4 (read 2, write 2) and the multiply 6 (read 4, write 2) per output element, 10 against the fused
kernel's 6; backward (PyTorch ``MulBackward0`` and ``silu_backward``) ``grad x up`` 6, ``grad x silu(gate)`` 6
(the saved output) and ``silu_backward(grad, gate)`` 6: 18 against the fused 12. These plain streaming kernels run
at the ``residual`` class (``<prefix>_act_eager``): the SwiGLU timed on the H200 (``swiglu_fwd``, 8,192 x 14,336
outputs in 284.0 us) is PyTorch's, which has no fused SwiGLU operator, so two kernels: its 10 bytes per output
stream at 4,135 GB/s, the residual add's 4,112 (inferred: the table does not name the call). The ``activation``
class of a fused SwiGLU is fitted to the same timing at 6 bytes.

Grouped-query attention on an SDPA without ``enable_gqa`` (PyTorch before 2.5; foundation-model-stack
``MultiHeadAttention.forward`` and torchtitan's ``repeat_kv`` expand K and V to every query head before the call;
``gqa_kv_copy``) copies them: per token ``2 x kv_heads x head_dim`` elements read and ``2 x heads x head_dim``
written (``kv_expand``, two kernels), and the backward of the expand sums the copies back: the same bytes.

Autograd sums the gradients of a tensor that feeds several ops ([5]_, ``accumulate``: ``old_var.add_(var)`` in
place when the engine holds the buffer's last reference, else ``old_var + var``; either kernel reads both bf16
gradients and writes one, 6 bytes per element, :data:`GRAD_SUM_BYTES`). Foundation-model-stack's Llama block
([2]_, ``LLaMABlock.forward``: ``residual = x; x = self.ln(x); x = self.attn(q=x, k=x, v=x, ...); x = x +
residual``, then the same around ``ff_ln`` and ``ff_sub_layer``) feeds the attention norm's output to three
separate ``nn.Linear`` (``query``, ``key``, ``value``): two sums over ``tokens x hidden`` elements; the MLP norm's
output to ``wg`` and ``w1``: one; and each block input and mid-block residual to its norm and to the residual
add: one each, where the add's backward passes the gradient through to both inputs (``add``: ``grad`` and
``maybe_multiply(grad, alpha)``, no kernel at alpha 1 [4]_). Hugging Face's ``LlamaAttention`` (``q_proj``,
``k_proj``, ``v_proj``), ``LlamaMLP`` (``gate_proj``, ``up_proj``) and torchtitan's ``Attention`` (``wq``, ``wk``,
``wv``) and ``FeedForward`` (``w1``, ``w3``) [3]_ fork alike. ``autograd_grad_sums`` counts these (backward
rows ``qkv_grad_sum`` and ``mlp_up_grad_sum`` at the ``residual`` class, one kernel per sum) and times each
residual add's backward as its fork's sum (6 bytes per element) instead of twice its forward (12); per layer
and element of the hidden state 2 x 6 + 6 + 2 x 6 = 30 bytes of backward against the 24 of before. In an MoE
layer only the attention's sums are counted (the router's and the experts' forks of the MLP input are not), and
the separate projections' GEMMs stay one GEMM each (``qkv_proj``, ``mlp_up``).

An MoE model whose experts carry biases (``MoE.expert_bias``: gpt-oss) has Megatron-Core add the FC2 bias after
the grouped GEMM, scaled by each token copy's routing probability (the probability is applied before FC2, in the
activation, so the bias must take it too) ([6]_, ``expert_bias_kernel``; FC1's bias rides in the GEMM's
epilogue, ``skip_bias_add=False``, and is not counted). ``per_expert``, ``TEGroupedMLP._apply_bias`` from gpt-oss's
support (September 2025) to its packed form (August 2026): per local expert ``t + b * p``, the bf16 bias times the
fp32 probabilities written in fp32 (4 bytes per element), the bf16 output added in fp32 (read 2 + 4, write 4), the
pieces concatenated (read 4, write 4) and cast back (read 4, write 2): 28 bytes per element of the FC2 output, in
``2 x local experts + 2`` kernels. Backward ([4]_): the cast's backward 6 (read 2, write 4), the add's gradient
to ``t`` cast to bf16 6, the multiply's ``grad x p`` 8 with its sum over the tokens to the bias gradient 4 and
``grad x b`` 8 with its sum over the row to the probabilities' gradient 4, the split's backward concatenating the
pieces' gradients 4: 40 bytes. ``packed`` (``_apply_packed_bias``: ``.float()`` 6, the biases repeated to one fp32
row per token 4, multiplied by the probabilities 8, added 12, cast back 6) moves 36 forward and the same 40
backward in five kernels; ``fused`` adds the scaled bias inside Transformer Engine's grouped GEMM op (no row).
Streaming kernels at the ``residual`` class (``expert_bias_eager``); training only: serving engines add the
bias inside their fused MoE kernels.

A gated activation whose inputs are clamped (``Model.activation_clamp``: gpt-oss's ``swiglu_limit`` 7.0, the gate
to at most 7, the linear half to within 7) runs the clamps where the stack writes them ([7]_). Megatron-Core
clamps inside its compiled SwiGLU (``clamped_swiglu``, no bytes of its own), but in front of its compiled
quick-GEGLU (``glu_gate: quick_gelu``, gpt-oss's activation) ``weighted_bias_quick_geglu_impl`` runs them as PyTorch
operators: ``chunk`` (views), ``clamp`` of each half (read 2, write 2 per output element each: 8) and ``torch.cat``
of the two (read 4, write 4): 16 bytes per output element forward, in 3 kernels. Backward ([4]_, ``clamp_backward``):
the cat's backward slices its gradient (views); the gate's one-sided clamp ``where(x <= max, grad, 0)``, a comparison
(read 2, write a 1-byte mask) and the ``where`` (read 1 + 2, write 2): 8; the linear half's two-sided clamp
``where((x >= -c).logical_and_(x <= c), grad, 0)``: two comparisons 3 + 3, the ``logical_and_`` 3 and the ``where`` 5:
14; ``chunk``'s backward concatenating the two gradients (read 4, write 4): 8; 30 bytes in 7 kernels
(``act_clamp_op``, :data:`CLAMP_CHAIN_BYTES`, ``<prefix>_act_clamp_eager`` at the ``residual`` class; a stack whose
expert MLP is one fused Transformer Engine op clamps inside it: no row). Under ``act_kernel: eager`` (Hugging Face's
``GptOssExperts``) the two clamps alone: 8 forward, 22 backward (the halves' slicing counted with the eager chain).
The clamps' saved inputs (the FC1 output beside the concatenation the activation keeps) are not counted in memory.

Under ``torch.autocast`` over fp32 parameters (Hugging Face ``Trainer(bf16=True)``; ``autocast_fp32_params``) the
embedding's output, and with it the residual stream, the norms and the rotary embedding, are fp32, and every linear
casts its fp32 input to bf16 per call (autocast caches the casts of leaf parameters only): the bytes this adds to
the chains above are :func:`autocast_stream_ops`. On one H200 the Hugging Face Llama 3.2 1B step ran 68 ms of
ATen elementwise, copy, cast and reduction kernels at micro-batch 2 (``data/reference/h200_hf_llama_step_parts.csv``),
against 40 ms for the bf16-stream chains and 49 ms with these.

References
----------
.. [1] Hugging Face transformers, ``src/transformers/models/llama/modeling_llama.py``
   (``LlamaRMSNorm.forward``, ``rotate_half``, ``apply_rotary_pos_emb``).
.. [2] foundation-model-stack/foundation-model-stack @ 6440fee8, ``fms/modules/positions.py``
   (``RotaryEmbedding.adjusted_qk``), ``fms/modules/feedforward.py`` (``GatedLinearUnit.forward``:
   ``self.a(self.wg(x)) * self.w1(x)``), ``fms/modules/attention.py`` (``keys.unsqueeze(2).expand(...).flatten(1, 2)``
   before ``F.scaled_dot_product_attention``).
.. [3] pytorch/torchtitan @ 395a526276ee, ``torchtitan/models/llama/model.py`` (``apply_rotary_emb``:
   ``view_as_complex(xq.float())``, ``xq_ * freqs_cis``, ``type_as``; ``repeat_kv``: ``expand`` then ``reshape``;
   ``FeedForward``: ``F.silu(self.w1(x)) * self.w3(x)``).
.. [4] pytorch/pytorch ``tools/autograd/derivatives.yaml`` (``mul``: ``grad * other`` and ``grad * self``;
   ``silu``: ``silu_backward(grad, self)``; ``_to_copy``: the cast back; ``expand``: ``sum_to_size``; ``add``:
   ``grad`` and ``maybe_multiply(grad, alpha.conj())``).
.. [5] pytorch/pytorch @ 4537ef6cfa51, ``torch/csrc/autograd/input_buffer.cpp`` (``InputBuffer::add``,
   ``accumulate``, ``can_accumulate_inplace``).
.. [6] NVIDIA/Megatron-LM ``megatron/core/transformer/moe/experts.py`` (``TEGroupedMLP._apply_bias``, added in
   a329dd6da5 "Enable bias in expert mlp [gpt-oss 5/5]", 2025-09-22; ``_apply_packed_bias``, 883533e049,
   2026-08-14; ``_is_fused_impl_supported``: the op fuser needs Transformer Engine's ``GroupedLinear(scale_bias)``,
   NVIDIA/TransformerEngine 580e7aa28 "Bias Prob Scaling for GroupedLinear", first in v2.15).
.. [7] NVIDIA/Megatron-LM ``megatron/core/fusions/fused_bias_geglu.py`` (``weighted_bias_quick_geglu_impl``: the
   clamps and ``torch.cat`` before the compiled ``WeightedBiasQuickGeGLUFunction``, 2e29a5e1e3 "Add quick geglu
   activation for gpt-oss", 2025-09-09, unchanged through 2026), ``fused_bias_swiglu.py`` (``clamped_swiglu`` under
   ``jit_fuser``), ``megatron/core/transformer/moe/experts.py`` (``TEGroupedMLP.bias_act_func``); NVIDIA-NeMo/
   Megatron-Bridge ``src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py`` @ 067f987df03b (``activation_func =
   quick_gelu``, ``activation_func_clamp_value = 7.0``, ``glu_linear_offset = 1.0``, ``bias_activation_fusion``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hnplan.compute._op import _ew, above_one
from hnplan.compute.lowp_bytes import BF16

if TYPE_CHECKING:
    from hnplan.compute.fp8_recipes import StepKernels

NORM_EAGER_BYTES = 36.0  # bytes per element of the eager RMSNorm chain (module docstring)
NORM_EAGER_BWD_BYTES = 92.0  # bytes per element of its autograd backward (module docstring)
ROPE_EAGER_BYTES = 20.0  # bytes per element of the eager rotate_half rotary chain (module docstring)
#: eager rotary chains by ``rope_kernel``: (forward, backward) bytes per element of q and k (module docstring)
ROPE_CHAIN_BYTES = {"eager": (ROPE_EAGER_BYTES, 30.0), "eager_matrix": (36.0, 36.0), "eager_complex": (20.0, 20.0)}
#: the eager SwiGLU (silu, then the multiply): (forward, backward) bytes per output element (module docstring)
SWIGLU_EAGER_BYTES = (10.0, 18.0)
#: autograd's sum of two bf16 gradients: read both, write one, per element (module docstring)
GRAD_SUM_BYTES = 3 * BF16
#: the sums at the input of separate projections: query, key and value (three consumers), gate and up (two)
QKV_GRAD_SUMS, GATE_UP_GRAD_SUMS = 2, 1
#: the expert FC2 bias scaled by the routing probability, by ``expert_bias_kernel``: (forward, backward) bytes per
#: element of the FC2 output (module docstring)
EXPERT_BIAS_BYTES = {"per_expert": (28.0, 40.0), "packed": (36.0, 40.0)}
#: kernels of the packed form a pass: the upcast, repeat_interleave, multiply, add and cast back
EXPERT_BIAS_PACKED_KERNELS = 5
#: the clamps of a clamped gated activation run as PyTorch operators, by where they sit: (forward, backward) bytes
#: per output element and (forward, backward) kernels (module docstring). ``quick_geglu``: Megatron-Core's chain in
#: front of its fused quick-GEGLU; ``eager``: the two clamps of an eager activation
CLAMP_CHAIN_BYTES = {"quick_geglu": (16.0, 30.0), "eager": (8.0, 22.0)}
CLAMP_CHAIN_KERNELS = {"quick_geglu": (3, 7), "eager": (2, 6)}


def clamp_chain(glu_gate: str, clamp: float | None, k: StepKernels) -> str | None:
    """Which clamp chain (a key of :data:`CLAMP_CHAIN_BYTES`) a clamped gated activation runs under the stack's
    kernels, or None (no clamp, or clamped inside a compiled SwiGLU)."""
    if clamp is None:
        return None
    if k.act_kernel == "eager":
        return "eager"
    return "quick_geglu" if glu_gate == "quick_gelu" else None


def act_clamp_op(name: str, scope: str, e_out: float, glu_gate: str, clamp: float | None, k: StepKernels):
    """The clamps in front of a gated activation of ``e_out`` output elements (``<name>_clamp_eager``,
    :data:`CLAMP_CHAIN_BYTES` per output element), or None (:func:`clamp_chain`).

    gpt-oss's experts under Megatron-Core, one routed copy (2,880 outputs): 16 bytes each forward, 30 backward:

    >>> from hnplan.compute.fp8_recipes import StepKernels
    >>> op = act_clamp_op("expert_act", "moe-layer", 2880.0, "quick_gelu", 7.0, StepKernels())
    >>> (op.name, op.e_out * op.bytes_per_out, op.e_out * op.bwd_bytes_per_out)
    ('expert_act_clamp_eager', 46080.0, 86400.0)
    >>> act_clamp_op("expert_act", "moe-layer", 2880.0, "silu", 7.0, StepKernels()) is None
    True
    """
    chain = clamp_chain(glu_gate, clamp, k)
    if chain is None:
        return None
    fwd, bwd = CLAMP_CHAIN_BYTES[chain]
    return _ew(f"{name}_clamp_eager", scope, 2 * e_out, e_out, 2.0, fwd, bwd)


def expert_bias_op(scope: str, elems: float, expert_bias: bool, k: StepKernels, phase: str = "train"):
    """The routed experts' FC2 bias scaled by the routing probability over ``elems`` FC2 output elements (token
    copies x hidden), as the stack adds it (``expert_bias_eager``, :data:`EXPERT_BIAS_BYTES`), or None: no expert
    biases, a stack that fuses it (``expert_bias_kernel: fused``), or not training.

    >>> from hnplan.compute.fp8_recipes import StepKernels
    >>> op = expert_bias_op("moe-layer", 10.0, True, StepKernels())
    >>> (op.name, op.e_out * op.bytes_per_out, op.e_out * op.bwd_bytes_per_out)
    ('expert_bias_eager', 280.0, 400.0)
    >>> expert_bias_op("moe-layer", 10.0, True, StepKernels(expert_bias_kernel="fused")) is None
    True
    """
    if not expert_bias or phase != "train" or k.expert_bias_kernel not in EXPERT_BIAS_BYTES:
        return None
    fwd, bwd = EXPERT_BIAS_BYTES[k.expert_bias_kernel]
    return _ew("expert_bias_eager", scope, elems, elems, 2.0, fwd, bwd)


def norm_op(name: str, scope: str, elems: float, k: StepKernels, flops: float):
    """A norm over ``elems`` elements: the fused kernel (read + write bf16) or the eager chain
    (``<name>_eager``, :data:`NORM_EAGER_BYTES` per element, :data:`NORM_EAGER_BWD_BYTES` backward)."""
    if k.norm_kernel == "eager":
        return _ew(f"{name}_eager", scope, elems, elems, flops, NORM_EAGER_BYTES, NORM_EAGER_BWD_BYTES)
    return _ew(name, scope, elems, elems, flops)


def rope_op(scope: str, elems: float, k: StepKernels, flops: float):
    """Rotary embedding of ``elems`` query and key elements: fused, or one of the eager chains of
    :data:`ROPE_CHAIN_BYTES` (``rope_eager``).

    >>> from hnplan.compute.fp8_recipes import StepKernels
    >>> from hnplan.compute.operator_rows import _rows
    >>> op = rope_op("dense-layer", 1.0, StepKernels(rope_kernel="eager_matrix"), 3.0)
    >>> [r[6] for r in _rows(op, "train", "none", "executed", 1)]
    [36.0, 36.0]
    """
    if k.rope_kernel in ROPE_CHAIN_BYTES:
        fwd, bwd = ROPE_CHAIN_BYTES[k.rope_kernel]
        return _ew("rope_eager", scope, elems, elems, flops, fwd, bwd)
    return _ew("rope", scope, elems, elems, flops)


def act_op(name: str, scope: str, e_in: float, e_out: float, gated: bool, k: StepKernels, flops: float):
    """The MLP activation of ``e_out`` output elements from ``e_in`` inputs: one kernel, or for a gated
    activation under ``act_kernel: eager`` the two eager kernels (``<name>_eager``, :data:`SWIGLU_EAGER_BYTES` per
    output element)."""
    if gated and k.act_kernel == "eager":
        return _ew(f"{name}_eager", scope, e_in, e_out, flops, *SWIGLU_EAGER_BYTES)
    return _ew(name, scope, e_in, e_out, flops)


def kv_expand_op(scope: str, kv_elems: float, q_heads, kv_heads, k: StepKernels):
    """The copy of K and V to every query head before attention (``gqa_kv_copy``, module docstring), or None
    (no copy: the stack's attention takes grouped K/V, or there are as many K/V heads as query heads).
    ``kv_elems``: K and V elements of the rank's keys (``tokens x 2 x kv_heads x head_dim``); its backward
    (the sum of the copies) moves the forward's bytes."""
    if not k.gqa_kv_copy or not above_one(q_heads / kv_heads):
        return None
    e_out = kv_elems * q_heads / kv_heads
    per_out = (kv_elems + e_out) * BF16 / e_out
    return _ew("kv_expand", scope, kv_elems, e_out, 0.0, per_out, per_out)


def grad_sum_op(name: str, scope: str, elems: float, sums: int, k: StepKernels):
    """Autograd's ``sums`` gradient sums at one tensor of ``elems`` elements that feeds ``sums + 1`` ops under
    ``autograd_grad_sums`` (module docstring), a backward-only row of :data:`GRAD_SUM_BYTES` per element and sum,
    or None (the choice off, or no sum).

    The query, key and value projections of a Llama 2 7B layer at 2 x 4,096 tokens (hidden 4,096): two sums of
    33.6 M elements, 6 bytes each:

    >>> from hnplan.compute.fp8_recipes import StepKernels
    >>> from hnplan.compute.operator_rows import _rows
    >>> op = grad_sum_op("qkv_grad_sum", "dense-layer", 8192 * 4096, 2, StepKernels(grad_sums=True))
    >>> [(r[3], r[6]) for r in _rows(op, "train", "full", "executed", 1)]
    [('bwd', 402653184.0)]
    >>> _rows(op, "prefill", "none", "executed", 1)
    []
    """
    if not k.grad_sums or sums < 1:
        return None
    op = _ew(name, scope, 2 * sums * elems, sums * elems, 1.0, GRAD_SUM_BYTES)
    return replace(op, bwd_only=True)


#: torch.autocast over fp32 parameters, per element of the layer's hidden width a token, beyond the bf16-stream
#: chains above (module docstring): (forward, backward) bytes; and per query and key element of the fp32 rotary
AUTOCAST_HIDDEN_BYTES = (22.0, 72.0)
AUTOCAST_ROPE_BYTES = (16.0, 16.0)


def autocast_stream_ops(scope: str, elems: float, qk_elems: float, k: StepKernels) -> list:
    """What an fp32 residual stream under ``torch.autocast`` adds to one layer's eager chains (``autocast_fp32``,
    module docstring): streaming rows at the ``residual`` class, one over the layer's ``elems`` hidden elements
    (tokens x hidden), one over its ``qk_elems`` query and key elements; none without it.

    Forward, per hidden element: the five bf16 casts of the fp32 normalised input for the separate q, k, v, gate and
    up projections, 5 x 6 = 30; the two norms' chains on an fp32 input, 28 against the bf16 chain's 36, -16; the two
    residual adds reading fp32 and writing fp32, 10 against 6, +8: 22 (:data:`AUTOCAST_HIDDEN_BYTES`). Per query and
    key element the fp32 rotary (``q * cos`` and ``rotate_half(q) * sin`` promote to fp32 beside fp32 cos and sin:
    6 + 6, the rotate_half 6, the add 12) and SDPA's cast of it back to bf16 (6), 36 against 20: 16
    (:data:`AUTOCAST_ROPE_BYTES`). Backward: the casts' backward (a bf16 gradient to fp32) 30, the gradient sums at the
    normalised input in fp32 (three, 12 against 6) 18, the residual branches' gradients cast to bf16 (two, 6) 12 and
    the sums at the forks in fp32 (two, 12 against 6) 12: 72; the rotary's as its forward, 16.

    >>> from hnplan.compute.fp8_recipes import StepKernels
    >>> ops = autocast_stream_ops("dense-layer", 40.0, 5.0, StepKernels(autocast_fp32=True))
    >>> [(op.name, op.e_out * op.bytes_per_out, op.e_out * op.bwd_bytes_per_out) for op in ops]
    [('autocast_stream_residual', 880.0, 2880.0), ('autocast_rope_residual', 80.0, 80.0)]
    >>> autocast_stream_ops("dense-layer", 40.0, 5.0, StepKernels())
    []
    """
    if not k.autocast_fp32:
        return []
    return [
        _ew("autocast_stream_residual", scope, elems, elems, 0.0, *AUTOCAST_HIDDEN_BYTES),
        _ew("autocast_rope_residual", scope, qk_elems, qk_elems, 0.0, *AUTOCAST_ROPE_BYTES),
    ]


def residual_bwd_bytes(k: StepKernels, dropout: bool) -> float:
    """Backward bytes per element of a residual add: the sum of the two gradients at its fork under
    ``autograd_grad_sums`` without dropout (:data:`GRAD_SUM_BYTES`; the add's own backward passes the gradient
    through), else 0 (the default, twice the forward's bytes)."""
    return GRAD_SUM_BYTES if k.grad_sums and not dropout else 0.0
