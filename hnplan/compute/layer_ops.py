"""The operators of one transformer layer, the embedding and the output head on one GPU, per forward
pass (:class:`hnplan.compute._op._Op` records): the shapes :mod:`hnplan.compute.operators` expands into
the rows of each pass and times. Attention (MHA, GQA, MLA in its training and absorbed decode forms),
the dense MLP or the MoE layer (router, permutation, routed and shared experts), norms, residuals and
the embedding, final norm, LM head and loss; sequence parallelism shards the norms and residuals over TP.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute._op import ACT_BYTES, _ew, _gemm, _Op
from hnplan.compute.attention import unfused_attention
from hnplan.compute.counts import head_dim
from hnplan.compute.eager_ops import (
    GATE_UP_GRAD_SUMS,
    QKV_GRAD_SUMS,
    act_clamp_op,
    act_op,
    autocast_stream_ops,
    expert_bias_op,
    grad_sum_op,
    kv_expand_op,
    norm_op,
    residual_bwd_bytes,
    rope_op,
)
from hnplan.compute.fp8_recipes import DEFAULT_KERNELS, StepKernels, fused_expert_mlp

# Arithmetic operations per output element of element-wise operators: counts of the operations
# in each formula (assumption; they only matter for the small FLOP column of memory-bound rows).
NORM_FLOPS = 4.0  # square, sum, scale, weight (RMSNorm); LayerNorm is within a factor of 2
ROPE_FLOPS = 3.0  # x cos + rotate(x) sin
ACT_FLOPS = {"swiglu": 5.0, "gelu": 8.0}  # silu(g) * u ; tanh-GELU
LOSS_FLOPS = 5.0  # max, exp, sum, log, subtract per logit
DROPOUT_MASK_BYTES = 1.0  # a bool mask per element (torch.bool), written forward and read backward


def _mlp(
    prefix,
    scope,
    model,
    tokens,
    ffn_local,
    wb,
    groups=1.0,
    w_groups=None,
    kn=DEFAULT_KERNELS,
    fused_act=False,
    phase="train",
) -> list[_Op]:
    """Up (gate+up for SwiGLU), activation and down of an MLP of ``ffn_local`` columns per GPU; ``fused_act``:
    the activation runs in the up-projection's epilogue (:func:`hnplan.compute.fp8_recipes.fused_expert_mlp`),
    no operator of its own. In training a clamped activation adds the stack's clamps
    (:func:`hnplan.compute.eager_ops.act_clamp_op`); serving engines clamp inside their fused MoE kernels."""
    h, gated = model.hidden, model.activation == "swiglu"
    up_n = (2 if gated else 1) * ffn_local
    m = tokens / groups
    wg = groups if w_groups is None else w_groups
    rows = tokens * ffn_local
    act = act_op(f"{prefix}_act", scope, (2 if gated else 1) * rows, rows, gated, kn, ACT_FLOPS[model.activation])
    # the clamps of a clamped gated activation, where the stack runs them as PyTorch operators (gpt-oss under
    # Megatron-Core); a fused expert MLP clamps inside its one op
    clamp = (
        None
        if fused_act or phase != "train"
        else act_clamp_op(f"{prefix}_act", scope, rows, model.glu_gate, model.activation_clamp, kn)
    )
    return [
        _gemm(f"{prefix}_up", scope, m, up_n, h, wb, groups, w_elems=wg * h * up_n),
        *([] if clamp is None else [clamp]),
        *([] if fused_act and gated else [act]),
        _gemm(f"{prefix}_down", scope, m, h, ffn_local, wb, groups, w_elems=wg * ffn_local * h),
    ]


def _expert_mlp(
    model: Model,
    scope: str,
    tokens: float,
    tp: int,
    ep: int,
    wb: float,
    kn: StepKernels = DEFAULT_KERNELS,
    phase: str = "train",
) -> list[_Op]:
    """The routed experts of an MoE layer on one GPU: ``tokens x active_experts`` rows (balanced routing)
    through the ``experts / ep`` local experts, as GEMMs grouped over the experts the tokens touch; the SwiGLU
    in the FC1 epilogue where the stack runs the fused grouped MLP (:func:`~hnplan.compute.fp8_recipes.fused_expert_mlp`)."""
    moe = model.moe
    e_local = moe.experts / ep
    assigned = tokens * moe.active_experts
    # an expert receives no token when all tokens x ep tokens of the EP group miss it, each with probability
    # 1 - top-k / experts (assumption: independent uniform routing); at least one expert runs per GPU
    p_touched = 1.0 - (1.0 - moe.active_experts / moe.experts) ** (tokens * ep)
    if np.ndim(e_local) == 0 and np.ndim(p_touched) == 0:
        touched = max(e_local * p_touched, min(1.0, e_local))
    else:  # arrays over shapes (hnplan.compute.parts): the same expression element by element
        touched = np.maximum(e_local * p_touched, np.minimum(1.0, e_local))
    fused = fused_expert_mlp(kn, wb, phase)
    return _mlp(
        "expert",
        scope,
        model,
        assigned,
        moe.expert_ffn_hidden / tp,
        wb,
        groups=touched,
        kn=kn,
        fused_act=fused,
        phase=phase,
    )


def _layer_ops(
    model: Model,
    scope: str,
    phase: str,
    batch: int,
    seq_len: int,
    kv_len: int,
    tp: int,
    cp: int,
    ep: int,
    wb: float,
    attention: str = "flash",
    sequence_parallel: bool = True,
    kernels: StepKernels = DEFAULT_KERNELS,
    sliding_share: float | None = None,
) -> list[_Op]:
    """The operators of one layer of ``scope`` (module docstring). A model with a sliding window
    (:attr:`~hnplan.catalog.schemas.Model.sliding_window`) has two attention cores: ``attention`` (full causal)
    for ``1 - sliding_share`` of the layers and ``attention_sliding`` for ``sliding_share`` of them (their rows'
    counts scaled by that share, :attr:`~hnplan.compute._op._Op.share`; default the model's sliding layers over
    all its layers), except in the ``unfused`` form, which multiplies every tile of the score matrix whatever
    the mask: one full core then."""
    h, H = model.hidden, model.heads
    hq = H // tp
    hkv = max(1, math.ceil(model.kv_heads / tp)) if np.ndim(tp) == 0 else np.maximum(1, np.ceil(model.kv_heads / tp))
    decode = phase == "decode"
    tokens = batch if decode else batch * seq_len / cp
    sp = phase == "train" and sequence_parallel  # (tp = 1: tokens / 1, the same tokens)
    t_norm = tokens / tp if sp else tokens  # sequence parallel: norms and residuals on tokens / tp
    s_q, s_kv = (1, kv_len) if decode else (seq_len / cp, seq_len)
    kn = kernels
    # the attention runs as a ring of cp kernels (Transformer Engine) or, after an all-gather of K/V, as one
    # kernel of the rank's s / cp queries over the s keys (Llama 3's all-gather CP): no ring then
    ring = 1 if kn.cp_algorithm == "allgather" else cp
    ops = [norm_op("attn_norm", scope, t_norm * h, kn, NORM_FLOPS)]
    if model.mla is not None:
        ml = model.mla
        qk = ml.qk_nope_head_dim + ml.qk_rope_head_dim
        if ml.q_lora_rank:
            ops += [
                _gemm("q_down", scope, tokens, ml.q_lora_rank, h, wb),
                norm_op("q_norm", scope, tokens * ml.q_lora_rank, kn, NORM_FLOPS),
                _gemm("q_up", scope, tokens, hq * qk, ml.q_lora_rank, wb),
            ]
        else:
            ops.append(_gemm("q_proj", scope, tokens, hq * qk, h, wb))
        ops += [
            _gemm("kv_down", scope, tokens, ml.kv_lora_rank + ml.qk_rope_head_dim, h, wb),
            norm_op("kv_norm", scope, tokens * ml.kv_lora_rank, kn, NORM_FLOPS),
            rope_op(scope, tokens * (hq + 1) * ml.qk_rope_head_dim, kn, ROPE_FLOPS),
        ]
        latent = ml.kv_lora_rank + ml.qk_rope_head_dim
        if decode:  # absorbed form: attention runs in the latent space, one shared "KV head"
            ops.append(_gemm("q_absorb", scope, tokens, ml.kv_lora_rank, ml.qk_nope_head_dim, wb, groups=hq))
            attn = _Op(
                "attention",
                "attention",
                scope,
                b=batch,
                hq=hq,
                s_q=1,
                s_kv=s_kv,
                d_qk=latent,
                d_v=ml.kv_lora_rank,
                kv_width=latent,
            )
            ops += [
                _ew("kv_cache_write", scope, tokens * latent, tokens * latent, 0.0),
                attn,
                _gemm("o_absorb", scope, tokens, ml.v_head_dim, ml.kv_lora_rank, wb, groups=hq),
            ]
        else:
            ops.append(_gemm("kv_up", scope, tokens, hq * (ml.qk_nope_head_dim + ml.v_head_dim), ml.kv_lora_rank, wb))
            if phase == "prefill":
                ops.append(_ew("kv_cache_write", scope, tokens * latent, tokens * latent, 0.0))
            ops.append(
                _Op(
                    "attention",
                    "attention",
                    scope,
                    b=batch,
                    hq=hq,
                    s_q=s_q,
                    s_kv=s_kv,
                    d_qk=qk,
                    d_v=ml.v_head_dim,
                    kv_width=hq * (qk + ml.v_head_dim),
                    causal=True,
                    cp=ring,
                )
            )
        d_v_total = hq * ml.v_head_dim
    else:
        d = head_dim(model)
        ops.append(_gemm("qkv_proj", scope, tokens, (hq + 2 * hkv) * d, h, wb))
        qkv_sums = grad_sum_op("qkv_grad_sum", scope, tokens * h, QKV_GRAD_SUMS, kn)  # separate q, k, v inputs
        if qkv_sums is not None:
            ops.append(qkv_sums)
        if model.qk_norm:  # one norm per query head and per key head, over head_dim, on the rank's heads
            ops += [
                norm_op("q_head_norm", scope, tokens * hq * d, kn, NORM_FLOPS),
                norm_op("k_head_norm", scope, tokens * hkv * d, kn, NORM_FLOPS),
            ]
        if model.position_embedding == "rope":
            ops.append(rope_op(scope, tokens * (hq + hkv) * d, rope_kernels(model, phase, kn), ROPE_FLOPS))
        if phase != "train":
            ops.append(_ew("kv_cache_write", scope, tokens * 2 * hkv * d, tokens * 2 * hkv * d, 0.0))
        # K and V copied to every query head before an SDPA without grouped K/V (decode: the whole cache)
        expand = kv_expand_op(scope, (batch * kv_len if decode else tokens) * 2 * hkv * d, hq, hkv, kn)
        if expand is not None:
            ops.append(expand)
        attn = _Op(
            "attention",
            "attention",
            scope,
            b=batch,
            hq=hq,
            s_q=s_q,
            s_kv=s_kv,
            d_qk=d,
            d_v=d,
            kv_width=2 * hkv * d,
            causal=not decode,
            cp=1 if decode else ring,
        )
        ops += _sliding_split(model, attn, attention, sliding_share)
        d_v_total = hq * d
    if not (model.mla is not None and decode):
        ops.append(_gemm("o_proj", scope, tokens, h, d_v_total, wb))
    # hidden dropout (fused with the residual add, Megatron-LM bias_dropout_add): a 1-byte mask written
    res_b = (3 * ACT_BYTES + DROPOUT_MASK_BYTES) if (model.dropout and phase == "train") else 0.0
    res_bwd = residual_bwd_bytes(kn, bool(model.dropout))  # eager autograd: the fork's gradient sum
    ops += [
        _ew("attn_residual", scope, 2 * t_norm * h, t_norm * h, 1.0, res_b, res_bwd),
        norm_op("mlp_norm", scope, t_norm * h, kn, NORM_FLOPS),
    ]
    if scope == "moe-layer":
        moe = model.moe
        assigned = tokens * moe.active_experts  # expert rows this GPU computes (balanced routing)
        ffn_l = moe.expert_ffn_hidden / tp
        ops += [
            _gemm("router", scope, tokens, moe.experts, h, wb),
            _ew("moe_permute", scope, *permute_elements(tokens, assigned, h, kn.ep_dispatcher, phase), 0.0),
        ]
        ops += _expert_mlp(model, scope, tokens, tp, ep, wb, kn, phase)
        bias = expert_bias_op(scope, assigned * h, moe.expert_bias, kn, phase)
        if bias is not None:
            ops.append(bias)
        if moe.shared_experts:
            ops += _mlp("shared_expert", scope, model, tokens, moe.shared_experts * ffn_l, wb, kn=kn, phase=phase)
    else:
        ops += _mlp("mlp", scope, model, tokens, model.ffn_hidden / tp, wb, kn=kn, phase=phase)
        up_sums = grad_sum_op("mlp_up_grad_sum", scope, tokens * h, GATE_UP_GRAD_SUMS, kn)  # separate gate, up
        if up_sums is not None and model.activation == "swiglu":
            ops.append(up_sums)
    ops.append(_ew("mlp_residual", scope, 2 * t_norm * h, t_norm * h, 1.0, res_b, res_bwd))
    if phase == "train" and model.mla is None:  # torch.autocast over fp32 parameters: the fp32 stream's extra bytes
        ops += autocast_stream_ops(scope, t_norm * h, tokens * (hq + hkv) * head_dim(model), kn)
    if attention == "unfused":
        ops = [u for o in ops for u in (unfused_attention(o, phase) if o.kind == "attention" else [o])]
    return ops


def rope_kernels(model: Model, phase: str, kn: StepKernels) -> StepKernels:
    """``kn``, or in training with the eager rotary chain when the model's YaRN attention factor is not 1
    (:attr:`~hnplan.catalog.schemas.Model.rope_attention_factor`) and the stack's fused rotary kernel cannot apply it
    (``rope_attention_factor_fused``, :class:`hnplan.catalog.schemas.StackChoices`): Megatron-Core then runs
    ``q cos + rotate_half(q) sin`` as PyTorch operators. Serving engines fold the factor into their cached cos and
    sin: prefill and decode keep ``kn``."""
    factor = model.rope_attention_factor
    if (
        phase != "train"
        or factor is None
        or factor == 1.0
        or kn.rope_kernel != "fused"
        or kn.rope_attention_factor_fused
    ):
        return kn
    return replace(kn, rope_kernel="eager")


def _sliding_split(model: Model, attn: _Op, attention: str, sliding_share: float | None) -> list[_Op]:
    """``[attn]``, or for a model with a sliding window under fused attention ``attn`` for the full layers and
    ``attention_sliding`` for the sliding ones (:func:`_layer_ops`). The sliding core holds at most ``window``
    keys a query: in decode it reads ``min(kv_len, window)`` cached tokens (a sliding layer keeps only the last
    ``window``, Hugging Face transformers ``SlidingWindowCache``); under context parallelism it runs as one
    kernel of the rank's ``s / cp`` queries over their windows (no ring: a window of 128 tokens needs the
    neighbouring chunk's last keys at most, whose exchange is not counted)."""
    w = model.sliding_window
    if w is None or attention != "flash":
        return [attn]
    share = model.sliding_layer_share() if sliding_share is None else sliding_share
    decode = not attn.causal
    s_kv = np.minimum(attn.s_kv, w) if decode else attn.s_kv
    sliding = replace(attn, name="attention_sliding", s_kv=s_kv, window=float(w), cp=1, share=share)
    return [replace(attn, share=1.0 - share), sliding]


def _once_ops(
    model: Model,
    phase: str,
    batch: int,
    seq_len: int,
    tp: int,
    cp: int,
    wb: float,
    sequence_parallel: bool = True,
    kernels: StepKernels = DEFAULT_KERNELS,
):
    h = model.hidden
    tokens = batch if phase == "decode" else batch * seq_len / cp
    pos = model.position_embedding == "learned"
    emb = [_ew("embedding", "embedding", tokens * h * (2 if pos else 1), tokens * h, 1.0 if pos else 0.0)]
    logits_tokens = tokens if phase == "train" else batch  # inference: logits of the last token only
    t_norm = tokens / tp if (phase == "train" and sequence_parallel) else logits_tokens  # tp = 1: tokens
    lm_head = _gemm("lm_head", "head", logits_tokens, model.vocab / tp, h, wb)
    # The LM head stays bf16 under low-precision weights: in fp8 training (hnplan.compute.fp8_recipes) and
    # in serving checkpoints, which quantise only the linear layers inside the transformer blocks
    # (hnplan.memory.inference.weight_bytes_per_gpu gives the sources).
    if wb < ACT_BYTES and not kernels.fp8_head:  # fp8_output_proj: an MXFP8 Transformer Engine GEMM
        lm_head = replace(_gemm("lm_head", "head", logits_tokens, model.vocab / tp, h, ACT_BYTES), kind="gemm-bf16")
    head = [norm_op("final_norm", "head", t_norm * h, kernels, NORM_FLOPS), lm_head]
    if phase == "train":
        v = logits_tokens * model.vocab / tp
        head.append(_ew("loss", "head", v, v, LOSS_FLOPS))
    return emb, head


def permute_elements(
    tokens: float, assigned: float, hidden: int, dispatcher: str, phase: str = "train"
) -> tuple[float, float]:
    """Elements an MoE layer's token permutations read and write in the forward, ``(in, out)`` [-].

    ``assigned = tokens x k`` token copies. The ``flex`` dispatcher (DeepEP / HybridEP) fuses the global
    permute into its communication kernel and keeps the local permute by expert after the dispatch and
    its inverse before the combine (the weighted sum happens in the combine kernel): ``2 assigned h``
    read and written. The ``alltoall`` dispatcher (NCCL) also runs the global permute that writes the ``k``
    copies before the dispatch and the global unpermute that sums them into ``tokens`` rows after the
    combine: ``4 assigned h`` read, ``(3 assigned + tokens) h`` written (NVIDIA/Megatron-LM
    docs/discussions/deepseek-v3-gb200-optimization Sec. 2.1.1: one global and one local permute around
    the NCCL all-to-all; Megatron-Core ``MoEAlltoAllTokenDispatcher``).

    >>> permute_elements(4096, 4096 * 8, 7168, "flex") == (2 * 32768 * 7168, 2 * 32768 * 7168)
    True
    >>> permute_elements(4096, 4096 * 8, 7168, "alltoall") == (4 * 32768 * 7168, (3 * 32768 + 4096) * 7168)
    True

    Inference keeps the one permutation pair of ``flex``. Training charges the ``alltoall`` pairs at
    every EP degree (the operator rows are built once for all EP degrees), which overstates the
    permutation of an ``ep = 1`` plan, where no local permute is needed.
    """
    if dispatcher == "flex" or phase != "train":
        return 2.0 * assigned * hidden, 2.0 * assigned * hidden
    return 4.0 * assigned * hidden, (3.0 * assigned + tokens) * hidden


def attention_op(
    model: Model, batch: int | np.ndarray, seq_len: int, tp: int | np.ndarray, cp: int | np.ndarray
) -> _Op:
    """The fused attention-core operator of one training layer on one GPU (as :func:`_layer_ops` builds it:
    ``b`` sequences, ``heads / tp`` query heads, ``s / cp`` queries over ``s`` keys, causal); ``batch``,
    ``tp`` and ``cp`` may be arrays over shapes, the operator's sizes then arrays too."""
    scope = "moe-layer" if model.moe is not None else "dense-layer"
    ops = _layer_ops(model, scope, "train", batch, seq_len, 0, tp, cp, 1, ACT_BYTES)
    return next(o for o in ops if o.kind == "attention")
