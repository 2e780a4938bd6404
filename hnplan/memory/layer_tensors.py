"""Activation memory of training per layer: the tensors one layer keeps for its backward pass, from the
model's shapes (per pipeline stage in flight: :mod:`hnplan.memory.activations`).

Korthikanti et al. ([1]_ Sec. 4.1) count the 16-bit tensors a GPT layer keeps for its backward pass,
per token of a micro-batch (``s b`` tokens), in bytes:

* attention: layer-norm input ``2h``, QKV-projection input ``2h``, Q and K ``4h``, V ``2h``,
  output-projection input ``2h``, dropout mask ``h``; plus the ``s x s`` scores ``5 a s``
  (softmax output ``2as``, dropout mask ``as``, dropout output ``2as``);
* MLP: layer-norm input ``2h``, first linear input ``2h``, GELU input ``2f`` and output ``2f``
  (``f = 4h``), dropout mask ``h``;

which sum to ``s b h (34 + 5 a s / h)``. This module keeps that accounting but reads each tensor's
width from the model: Q is ``heads x d_qk`` wide and K, V ``kv_heads x d`` (GQA, MQA); a SwiGLU
MLP keeps its gate and up outputs and their product (``6f``); an MoE layer keeps, per token, the
router input and probabilities, ``top-k`` dispatched copies of the input, their expert intermediates
and routing weights (applied in the activation: the combine keeps nothing, [5]_), and the shared
experts' intermediates; MLA keeps its latent down-projections and the per-head Q, K, V it expands to
([3]_). With ``dropout=False`` (Llama-style training) masks and the dropout output are not stored.

Without sequence parallelism the tensors before the column-parallel GEMMs (norm inputs, GEMM
inputs, masks: ``10 s b h`` for GPT) are replicated over the ``t`` tensor-parallel ranks and the
rest is split; with it everything is split ([1]_ Table 2). Selective recomputation and
FlashAttention keep no ``s x s`` term; full recomputation keeps only the layer input ``2 s b h``
(``/ t`` with sequence parallelism). Context parallelism splits the sequence over ``cp`` ranks. In fp8
training the inputs of weight GEMMs are kept as 1-byte casts ([4]_).

References
----------
.. [1] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   MLSys 2023, arXiv:2205.05198, Sec. 4.1, 4.2, 4.2.3, 4.3 and Table 2.
.. [2] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.2 (1F1B and the interleaved schedule).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.1.1 (MLA).
.. [4] NVIDIA Transformer Engine, ``transformer_engine/pytorch/module/linear.py`` (fp8: the forward saves
   the fp8-cast GEMM input for the weight-gradient GEMM).
.. [5] NVIDIA Megatron-LM @ 92c8482e6dcd (since commit 2659630, core r0.12), ``transformer/moe/experts.py``
   (``TEGroupedMLP``: ``weighted_bias_swiglu_impl`` saves its input and the weights) and ``token_dispatcher.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES, RECOMPUTE_MODES, head_dim
from hnplan.errors import check_choice
from hnplan.memory.recompute import (
    DEFAULT_MODULES,
    check_modules,
    freed_bytes,
    mlp_intermediate,
)

FP32_BYTES = units.dtype_bytes("fp32")  # an fp32 element: the eager chains' upcasts, autocast's fp32 stream
MASK_BYTES = 1.0  # one byte per dropout-mask element ([1]_ Sec. 4.1)
LOGIT_BYTES = 4.0  # fp32 logits for the cross-entropy loss ([1]_ Sec. 4.3)
# The auxiliary-loss scores, one per expert a token, are fp32 whatever the router's dtype (Megatron-LM
# 6a6cd478839d ``transformer/moe/router.py`` ``compute_routing_scores_for_aux_loss``: softmax with
# ``dtype=torch.float32``, kept for its backward).
ROUTER_BYTES = 4.0
# The routing weight of each routed copy, which the experts keep to scale their activation ([5]_), takes the
# router logits' dtype (Megatron-LM 6a6cd478839d ``transformer/moe/moe_utils.py`` ``topk_softmax_with_capacity``:
# ``probs.type_as(logits)``): the model's bf16 under Megatron-Core's default ``moe_router_dtype`` None
# (``transformer_config.py``; ``router.py`` ``TopKRouter.gating`` casts the logits only when it is set), fp32
# with ``--moe-router-dtype fp32``, and fp32 behind the flex (DeepEP) dispatcher, which upcasts them before its
# dispatch (``token_dispatcher.py`` ``_DeepepManager.dispatch``: "DeepEP only supports float32 probs").
ROUTING_WEIGHT_BYTES = {"model": ACT_BYTES, "fp32": 4.0}


@dataclass(frozen=True)
class EagerSaved:
    """What a stack's eager PyTorch code keeps for the backward pass beyond the fused accounting of
    :func:`layer_activations` (Hugging Face transformers ``modeling_llama.py`` as it runs; autograd's saved tensors,
    pytorch/pytorch ``tools/autograd/derivatives.yaml``).

    Attributes
    ----------
    norm : bool
        Eager RMSNorm (``x.to(float32)``, ``pow(2).mean``, ``x * rsqrt``, ``.to(dtype)``, ``weight *``): ``pow`` keeps
        the fp32 copy of its input (``4h``) and the weight's multiply its normalised input (``2h``, ``4h`` in an fp32
        stream), where a fused norm keeps its input alone.
    act : bool
        Eager SwiGLU (``silu(gate) * up``): ``silu`` keeps the gate, the multiply its two inputs, so the activation's
        output (``2f``) is kept besides what a fused kernel keeps (gate, up and their product, ``6f``).
    fp32_stream : bool
        ``torch.autocast`` over fp32 parameters: the embedding's output and with it the residual stream and the norms
        are fp32 (4 bytes an element), and every linear casts its input to bf16 per call and keeps its own copy
        (autocast caches the casts of leaf parameters, not of activations): three for separate query, key and value
        projections, two for gate and up (``separate_projections``), one each otherwise.
    separate_projections : bool
        The query, key and value (and gate and up) projections are separate linears on one input (the stack's
        ``autograd_grad_sums``).
    loss : bool
        The eager loss (``logits.float()``, ``F.cross_entropy``): the bf16 logits the model returns stay referenced
        (``2 v``), the log-softmax output is kept in fp32 (``4 v``, what the fused accounting counts), and the backward
        starts with the fp32 gradients of the log-probabilities and of the logits beside them (``8 v``), the step's
        peak for a large vocabulary; on one H200 the step's peak less the memory after its forward was 8.0 bytes a
        logit at micro-batches 1, 2 and 4 (``data/reference/h200_hf_llama_step.csv``).
    """

    norm: bool = False
    act: bool = False
    fp32_stream: bool = False
    separate_projections: bool = False
    loss: bool = False

    def stream_bytes(self) -> float:
        """Bytes of one element of the residual stream [bytes]: fp32 under autocast over fp32 parameters, else bf16
        (a fully recomputed layer keeps its input at this width)."""
        return FP32_BYTES if self.fp32_stream else ACT_BYTES

    def norm_bytes(self) -> float:
        """Bytes a norm keeps per element of its input [bytes]: eager, the fp32 copy ``pow`` keeps (the stream
        itself when it is fp32) and the normalised tensor the weight multiplies at the stream's width; fused, its
        input."""
        return FP32_BYTES + self.stream_bytes() if self.norm else self.stream_bytes()

    def layer_extra(self, model: Model, moe_layer: bool = False) -> tuple[float, float]:
        """Per-token bytes one layer keeps beyond :func:`layer_activations`: ``(replicated, split)`` [bytes/token]:
        its two norms beyond a fused norm's bf16 input, the bf16 input casts of separate projections beyond the two
        shared inputs the fused count keeps (five under autocast: q, k, v, gate, up), and in a dense MLP
        (``moe_layer`` False) the eager activation's output."""
        h = model.hidden
        extra_norms = 2.0 * (self.norm_bytes() - ACT_BYTES) * h
        casts = 5.0 if (self.fp32_stream and self.separate_projections) else 2.0
        extra_casts = (casts - 2.0) * ACT_BYTES * h
        split = ACT_BYTES * model.ffn_hidden if (self.act and model.activation == "swiglu" and not moe_layer) else 0
        return extra_norms + extra_casts, float(split)

    def full_recompute_input(self) -> float:
        """Bytes of one element of the layer input a fully recomputed layer keeps [bytes]."""
        return self.stream_bytes()

    def output_extra(self, model: Model) -> tuple[float, float]:
        """Per-token bytes of the final norm and the loss beyond :func:`output_activation_bytes`: ``(replicated,
        split over the vocabulary's TP shards)`` [bytes/token]; the eager loss keeps the bf16 logits and, at the
        backward's start, two fp32 gradients of them, ``2 + 2 x 4`` bytes a logit beyond the fused fp32 logits."""
        loss = (ACT_BYTES + 2.0 * FP32_BYTES) * model.vocab if self.loss else 0.0
        return (self.norm_bytes() - ACT_BYTES) * model.hidden, loss


def routing_weight_bytes(router_dtype: str = "model", dispatcher: str = "alltoall") -> float:
    """Bytes of one routed copy's routing weight kept for the backward pass [bytes]: 2 (bf16) in the model's
    dtype, 4 with an fp32 router or the flex (DeepEP) dispatcher (:data:`ROUTING_WEIGHT_BYTES`, sources there).

    Raises
    ------
    InputError
        For an unknown ``router_dtype``.
    """
    check_choice("moe_router_dtype", router_dtype, tuple(ROUTING_WEIGHT_BYTES))
    return ROUTING_WEIGHT_BYTES["fp32"] if dispatcher == "flex" else ROUTING_WEIGHT_BYTES[router_dtype]


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one token of a micro-batch leaves in one layer for the backward pass [bytes/token].

    ``replicated`` is what tensor parallelism without sequence parallelism keeps on every rank,
    ``split`` what it divides over ``t``, ``score_per_key`` the ``s x s`` attention term per key
    position (multiply by the sequence length). ``gemm_inputs_*`` are the parts of ``replicated`` and
    ``split`` that are inputs of weight GEMMs: with fp8 training, Transformer Engine saves those as
    their 1-byte fp8 casts for the weight-gradient GEMM, halving them.
    """

    replicated: float
    split: float
    score_per_key: float
    gemm_inputs_replicated: float = 0.0
    gemm_inputs_split: float = 0.0


def layer_activations(
    model: Model, moe_layer: bool = False, dropout: bool = True, tp: int = 1, routing_weight: float = ACT_BYTES
) -> LayerActivations:
    """Per-token activation bytes of one layer, split by how tensor parallelism shards them.

    Parameters
    ----------
    model : Model
    moe_layer : bool
        The layer's MLP is the model's mixture of experts (else its dense MLP).
    dropout : bool
        Dropout is on (masks and dropout outputs are stored), as in [1]_; Llama-style recipes turn it off.
    tp : int or array of int
        Tensor-parallel degree, only to keep at least one K/V head per rank when ``kv_heads < tp`` (an array
        gives arrays of the same shape).
    routing_weight : float
        Bytes of a routed copy's routing weight (:func:`routing_weight_bytes`); default 2, bf16.

    Returns
    -------
    LayerActivations
    """
    h, a = model.hidden, model.heads
    mask = MASK_BYTES * h if dropout else 0.0
    rep = ACT_BYTES * h * 2 + mask  # layer-norm input, QKV (or down-projection) input, mask
    g_rep = ACT_BYTES * h  # QKV / down-projection input
    if model.mla is not None:
        m = model.mla
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        q_lat = 2 * m.q_lora_rank if m.q_lora_rank else 0  # latent-norm input and up-projection input
        rep += ACT_BYTES * (q_lat + 2 * m.kv_lora_rank + m.qk_rope_head_dim)
        g_rep += ACT_BYTES * (q_lat / 2 + m.kv_lora_rank)  # up-projection inputs
        split = ACT_BYTES * (a * d_qk * 2 + a * d_v * 2)  # per-head Q, K, V, attention output
        g_split = ACT_BYTES * a * d_v  # output-projection input
    else:
        d = head_dim(model)
        # fewer KV heads than ranks: each rank keeps one (tp may be an array over plans)
        kv = np.maximum(model.kv_heads, tp) if np.ndim(tp) else max(model.kv_heads, tp)
        split = ACT_BYTES * (a * d + kv * d * 2 + a * d)  # Q, K, V, attention output
        if model.qk_norm:  # the per-head norms' inputs (the projection's Q and K, kept for their backward)
            split = split + ACT_BYTES * (a + kv) * d
        g_split = ACT_BYTES * a * d
    rep += ACT_BYTES * h * 2 + mask  # MLP: layer-norm input, first GEMM / router input, mask
    g_rep += ACT_BYTES * h
    if moe_layer and model.moe is not None:
        e = model.moe
        rep += ROUTER_BYTES * e.experts
        inter = mlp_intermediate(e.expert_ffn_hidden, model.activation)
        # per routed copy: input 2h, intermediates, its routing weight (scales the activation; the combine keeps none, [5]_)
        split += e.active_experts * (ACT_BYTES * h + inter + routing_weight) + e.shared_experts * inter
        g_split += ACT_BYTES * ((e.active_experts + e.shared_experts) * e.expert_ffn_hidden + e.active_experts * h)
    else:
        split += mlp_intermediate(model.ffn_hidden, model.activation)
        g_split += ACT_BYTES * model.ffn_hidden  # second-GEMM input (GELU output / SwiGLU product)
    score = (ACT_BYTES + MASK_BYTES + ACT_BYTES if dropout else ACT_BYTES) * a
    return LayerActivations(
        replicated=rep, split=split, score_per_key=score, gemm_inputs_replicated=g_rep, gemm_inputs_split=g_split
    )


def _check_recompute(recompute: str):
    check_choice("recompute", recompute, RECOMPUTE_MODES)


def activation_bytes_per_layer(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = True,
    recompute: str = "none",
    flash_attention: bool = True,
    dropout: bool = True,
    moe_layer: bool | None = None,
    fp8_gemm_inputs: bool = False,
    recompute_modules: tuple[str, ...] = DEFAULT_MODULES,
    routing_weight: float = ACT_BYTES,
    attention_output_copy: bool = False,
    eager: EagerSaved | None = None,
) -> float:
    """Activation memory of one transformer layer for one micro-batch on one accelerator [bytes].

    For a GPT layer (MHA, GELU, ``f = 4h``, dropout) this is Korthikanti's ``s b h (34 + 5 a s / h)``
    and its Table 2 variants ([1]_); other shapes follow :func:`layer_activations`.

    Parameters
    ----------
    model : Model
    seq_len : int
        Sequence length ``s`` [tokens].
    microbatch : int
        Sequences per micro-batch ``b``.
    tp, cp : int
        Tensor- and context-parallel degrees.
    sequence_parallel : bool
        Megatron sequence parallelism (splits the replicated part over ``tp`` too).
    recompute : {"none", "selective", "full"}
    flash_attention : bool
        FlashAttention stores no ``s x s`` scores.
    dropout : bool
        Dropout masks are stored ([1]_ assumes dropout; Llama-style recipes have none).
    moe_layer : bool, optional
        Count an MoE layer; default: the model's MoE layers if it has any.
    fp8_gemm_inputs : bool
        fp8 training: GEMM inputs are saved as 1-byte fp8 casts (Transformer Engine).
    recompute_modules : tuple of str
        With ``recompute="selective"``, the modules re-run (:data:`hnplan.memory.recompute.RECOMPUTE_MODULES`);
        their internal tensors are not kept (:func:`hnplan.memory.recompute.freed_bytes`). Default the
        attention core.
    routing_weight : float
        Bytes of a routed copy's routing weight (:func:`routing_weight_bytes`); default 2, bf16.
    attention_output_copy : bool
        Transformer Engine's FlashAttention backend on the ``sbhd`` layout: at ``microbatch > 1`` the attention
        output is kept twice, flash-attn's ``bshd`` output for its backward and the output projection's ``sbhd``
        copy (TransformerEngine v2.4 ``attention/dot_product_attention/backends.py`` ``FlashAttention.forward``:
        ``output.view(b, s, -1).transpose(0, 1)``, ``output.contiguous()``), ``2 a d_v`` bytes a token more
        (split over ``tp``); not when the attention core is recomputed.
    eager : EagerSaved, optional
        What the stack's eager code keeps beyond the fused accounting (:class:`EagerSaved`); under full
        recomputation the layer input at the stream's width.

    Returns
    -------
    float
        [bytes]

    Raises
    ------
    InputError
        For an unknown recompute mode or module.

    Examples
    --------
    GPT-3 175B (s = 2048, b = 1, t = 8, sequence parallel, selective): ``34 s b h / t`` bytes.

    >>> from hnplan.catalog import load_catalog
    >>> gpt3 = load_catalog().model("gpt3-175b")
    >>> activation_bytes_per_layer(gpt3, 2048, 1, tp=8, recompute="selective") == 34 * 2048 * 12288 / 8
    True
    """
    _check_recompute(recompute)
    s = seq_len / cp
    tokens = s * microbatch
    if recompute == "full":
        width = eager.full_recompute_input() if eager is not None else ACT_BYTES
        return width * tokens * model.hidden / (tp if sequence_parallel else 1)
    moe = (model.moe is not None) if moe_layer is None else moe_layer
    la = layer_activations(model, moe, dropout, tp, routing_weight)
    modules = check_modules(recompute_modules) if recompute == "selective" else ()
    score = 0.0 if (flash_attention or "core_attn" in modules) else la.score_per_key * s
    f_rep, f_split, fg_rep, fg_split = freed_bytes(model, moe, modules)
    half = 0.5 if fp8_gemm_inputs else 0.0
    if attention_output_copy and "core_attn" not in modules:  # flash-attn's bshd output beside the sbhd copy
        d_out = model.mla.v_head_dim if model.mla is not None else head_dim(model)
        score = score + ACT_BYTES * model.heads * d_out * (np.asarray(microbatch) > 1)
    e_rep, e_split = eager.layer_extra(model, moe) if eager is not None else (0.0, 0.0)
    split = (la.split - f_split - half * (la.gemm_inputs_split - fg_split) + score + e_split) / tp
    rep = (la.replicated - f_rep - half * (la.gemm_inputs_replicated - fg_rep) + e_rep) / (
        tp if sequence_parallel else 1
    )
    return tokens * (rep + split)


def embedding_activation_bytes(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = True,
    dropout: bool = True,
) -> float:
    """Input-embedding activations of one micro-batch on the first stage: the dropout mask ``s b h``
    (``/ t`` with sequence parallelism) ([1]_ Sec. 4.3); nothing without dropout [bytes]."""
    if not dropout:
        return 0.0
    return MASK_BYTES * seq_len / cp * microbatch * model.hidden / (tp if sequence_parallel else 1)


def output_activation_bytes(
    model: Model,
    seq_len: int,
    microbatch: int,
    tp: int = 1,
    cp: int = 1,
    sequence_parallel: bool = True,
    eager: EagerSaved | None = None,
) -> float:
    """Final norm, LM head and loss of one micro-batch on the last stage: ``4 s b h / t (1 + v / h)``
    ([1]_ Sec. 4.3: norm input and LM-head input ``2 s b h`` each, fp32 logits ``4 s b v``), plus what a stack's
    eager norm and loss keep and the loss backward's first gradients (:meth:`EagerSaved.output_extra`) [bytes]."""
    tokens = seq_len / cp * microbatch
    e_rep, e_vocab = eager.output_extra(model) if eager is not None else (0.0, 0.0)
    norm_and_head = (2 * ACT_BYTES * model.hidden + e_rep) * tokens / (tp if sequence_parallel else 1)
    return norm_and_head + (LOGIT_BYTES * model.vocab + e_vocab) * tokens / tp
