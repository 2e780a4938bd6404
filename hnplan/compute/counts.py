"""Whole-model counts: parameters, model and hardware FLOPs per token, MFU, the roofline primitive.

The operator-level roofline (:mod:`hnplan.compute.operators`) reproduces these counts operator by
operator (tests assert the equality) and adds bytes, shapes and times.

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, arXiv:2104.04473, Sec. 5.1 (FLOPs per iteration).
.. [2] Chowdhery et al., "PaLM: Scaling Language Modeling with Pathways", arXiv:2204.02311,
   Appendix B (model FLOPs utilisation, 6N + 12 L H Q T per token).
.. [3] Kaplan et al., "Scaling Laws for Neural Language Models", arXiv:2001.08361, Sec. 2.1.
.. [4] Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009.
.. [5] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
   arXiv:2205.05198, Sec. 5 (selective recomputation of the attention core).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from hnplan import units
from hnplan.catalog.params import (  # noqa: F401  (the parameter counts, re-exported for the cost models)
    ParamCounts,
    _mla_up_params,
    _mlp_params,
    head_dim,
    param_counts,
)
from hnplan.catalog.schemas import Accelerator, Model
from hnplan.errors import InputError, check_choice

RECOMPUTE_MODES = ("none", "selective", "full")
#: modules selective recomputation may re-run (Megatron-Core ``recompute_modules``; memory in
#: :mod:`hnplan.memory.recompute`)
RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act", "shared_experts")


def mean_layer_context(model: Model, tokens):
    """Tokens a layer attends to (and keeps in its KV cache) for a context of ``tokens``, averaged over the
    model's layers [tokens]: ``tokens`` without a sliding window; with a window ``w`` on ``L_s`` of the ``L``
    layers (:attr:`~hnplan.catalog.schemas.Model.sliding_window`, a sliding layer attends to and keeps the last
    ``w``), ``((L - L_s) tokens + L_s min(tokens, w)) / L``. ``tokens`` may be an array.

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("gpt-oss-20b")  # 12 of 24 layers with a window of 128: (12 x 8192 + 12 x 128) / 24
    >>> float(mean_layer_context(m, 8192)), float(mean_layer_context(m, 100))
    (4160.0, 100.0)
    """
    if model.sliding_window is None:
        return tokens
    sliding = model.sliding_layer_count()
    kept = (model.layers - sliding) * tokens + sliding * np.minimum(tokens, model.sliding_window)
    return kept / model.layers


def attention_core_flops_per_token(model: Model, seq_len: int) -> float:
    """Forward FLOPs of the attention score and value products for one token, all layers [FLOP].

    ``2 * s * heads * d_qk + 2 * s * heads * d_v`` per layer: the causal mask is *not* applied, as in
    the Megatron-LM and PaLM conventions ([1]_, [2]_), so that MFU stays comparable across tools. A layer
    with a sliding window (:attr:`~hnplan.catalog.schemas.Model.sliding_window`) counts ``min(window, s)``
    keys in place of ``s``: every query against a whole window, the same convention without the causal
    halving (:func:`hnplan.compute.attention._attention_fwd_flops`; Megatron-Bridge's MFU halves both, the
    window's ``w - w (w - 1) / (2 s)`` keys a query).

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("gpt-oss-20b")  # 12 of 24 layers with a window of 128
    >>> attention_core_flops_per_token(m, 4096) == 2.0 * 64 * (64 + 64) * (12 * 4096 + 12 * 128)
    True
    """
    if model.mla is not None:
        d_qk = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim
        d_v = model.mla.v_head_dim
    else:
        d_qk = d_v = head_dim(model)
    return float(model.layers * 2.0 * mean_layer_context(model, seq_len) * model.heads * (d_qk + d_v))


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token [FLOP].

    ``model`` counts forward + backward once (the MFU numerator); ``hardware`` adds what
    recomputation re-executes (the HFU numerator).
    """

    model: float
    hardware: float
    dense_part: float
    attention_part: float

    def as_dict(self) -> dict:
        return asdict(self)


def training_flops_per_token(
    model: Model, seq_len: int, recompute: str = "none", recompute_modules: tuple[str, ...] = ("core_attn",)
) -> FlopsPerToken:
    """Model and hardware FLOPs per trained token.

    ``model = 6 * (active layer params + LM-head params) + 3 * attention core`` which is PaLM's
    ``6N + 12 L H Q T`` ([2]_) with N the parameters that do matrix multiplies (input-embedding lookups
    do no FLOPs; tied embeddings still multiply in the LM head). Recomputation adds one more forward
    pass of the layer stack (``full``) or of the ``recompute_modules`` (``selective``): the attention
    core ([5]_, the default), the MLA up-projections, the dense MLPs, the shared experts (the norms and
    activation functions do no FLOPs in this convention).

    Parameters
    ----------
    model : Model
    seq_len : int
        Sequence length [tokens].
    recompute : {"none", "selective", "full"}
    recompute_modules : tuple of str
        What ``selective`` re-runs (:data:`RECOMPUTE_MODULES`).

    Returns
    -------
    FlopsPerToken

    Raises
    ------
    InputError
        For an unknown recompute mode.
    """
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    pc = param_counts(model)
    matmul_params = pc.layers_active - model.layers * pc.norms_per_layer + model.vocab * model.hidden
    if model.mla is not None:  # the MLA latent norms' weights sit in the attention count but do no matmul
        matmul_params -= model.layers * ((model.mla.q_lora_rank or 0) + model.mla.kv_lora_rank)
    dense = 2.0 * matmul_params  # forward FLOPs of the weight matmuls per token
    attn = attention_core_flops_per_token(model, seq_len)
    model_flops = 3.0 * (dense + attn)
    layer_fwd = dense - 2.0 * model.vocab * model.hidden  # the LM head is not recomputed
    extra = {"none": 0.0, "selective": 0.0, "full": layer_fwd + attn}[recompute]
    if recompute == "selective":
        for m in recompute_modules:
            check_choice("recompute module", m, RECOMPUTE_MODULES)
        extra = _selective_flops(model, attn, recompute_modules)
    return FlopsPerToken(
        model=model_flops, hardware=model_flops + extra, dense_part=3.0 * dense, attention_part=3.0 * attn
    )


def _selective_flops(model: Model, attn: float, modules) -> float:
    """Forward FLOPs per token of the modules selective recomputation re-runs, all layers [FLOP]."""
    pc = param_counts(model)
    out = attn if "core_attn" in modules else 0.0
    if "mla_up_proj" in modules and model.mla is not None:
        q_up, kv_up = _mla_up_params(model)
        out += 2.0 * model.layers * (q_up + kv_up)
    if "mlp" in modules:
        out += 2.0 * pc.dense_layers * pc.dense_mlp_per_layer
    if "shared_experts" in modules and model.moe is not None:
        out += (
            2.0
            * pc.moe_layers
            * model.moe.shared_experts
            * _mlp_params(model.hidden, model.moe.expert_ffn_hidden, model.activation)
        )
    return out


def megatron_flops_per_iteration(
    batch: int, seq_len: int, layers: int, hidden: int, vocab: int, full_recompute: bool = True
) -> float:
    """The closed form of Narayanan et al. 2021 ([1]_, Sec. 5.1, Eq. 3) for a GPT model [FLOP/iteration].

    ``F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))`` with full recomputation: four passes of the layer
    stack (forward, recomputed forward, backward = 2 x forward) and three of the LM head, which is
    not recomputed. This is exactly our hardware count with ``recompute="full"`` (tests assert it).

    With ``full_recompute=False`` this returns the paper's ``72 B s l h^2 (1 + s/(6h) + V/(16 l h))``
    as printed. That form understates the LM head: scaling the whole bracket by 72/96 gives the head
    ``4.5 B s h V`` instead of the ``6 B s h V`` of its three passes. Our model FLOPs without
    recomputation are ``72 B s l h^2 (1 + s/(6h)) + 6 B s h V`` (see :func:`megatron_model_flops_per_iteration`).

    Parameters
    ----------
    batch : int
        Sequences per iteration ``B``.
    seq_len, layers, hidden, vocab : int
        ``s`` [tokens], ``l``, ``h``, ``V``.
    full_recompute : bool

    Returns
    -------
    float
        FLOPs per iteration [FLOP].

    Examples
    --------
    >>> f = megatron_flops_per_iteration(1, 2048, 24, 2304, 51200)
    >>> round(f / 1e12, 1)   # GPT 1.7B of Megatron-LM Table 1, one sequence
    30.2
    """
    k = 96.0 if full_recompute else 72.0
    return k * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))


def megatron_model_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """Model FLOPs (no recomputation) of a GPT model, LM head counted with its three passes [FLOP].

    ``72 B s l h^2 (1 + s/(6h)) + 6 B s h V``: the corrected no-recompute form of [1]_ Eq. 3 (see
    :func:`megatron_flops_per_iteration` for why the printed 72 form differs in its vocabulary term).
    """
    return (
        72.0 * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden))
        + 6.0 * batch * seq_len * hidden * vocab
    )


def megatron_vocab_term(layers: int, hidden: int, vocab: int) -> float:
    """The vocabulary (logit) term ``V / (16 l h)`` of [1]_ Eq. 3, relative to the layers' ``h^2`` term [-].

    Dropping it halves the FLOPs of a small model: 6 layers, hidden 512, vocabulary 50,257 give 1.02
    (102%); 44 layers, hidden 6,144 give 0.012 (1.2%).

    >>> round(megatron_vocab_term(6, 512, 50257), 3)
    1.022
    """
    return vocab / (16.0 * layers * hidden)


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops_per_s_: float) -> float:
    """Model FLOPs utilisation ``flops_per_token x tokens_per_s / peak`` [-] (PaLM [2]_ Appendix B).

    ``flops_per_token`` is :attr:`FlopsPerToken.model` for MFU and ``.hardware`` for HFU; ``tokens_per_s``
    and the peak are per accelerator [tokens/s], [FLOP/s]. Use the *dense* peak: a 2:4-sparse peak
    halves the result.
    """
    return flops_per_token * tokens_per_s / peak_flops_per_s_


def peak_flops_per_s(acc: Accelerator, dtype: str) -> float:
    """Dense peak of an accelerator for a dtype [FLOP/s].

    Raises
    ------
    InputError
        If the accelerator has no peak for that dtype (e.g. fp8 on A100); lists the ones it has.
    """
    try:
        return units.tflops_to_flops_per_s(acc.dense_tflops[dtype])
    except KeyError:
        raise InputError(f"accelerator {acc.id!r} has no {dtype} peak; it has: {', '.join(acc.dense_tflops)}") from None


def achievable_flops_per_s(acc: Accelerator, dtype: str) -> float:
    """Dense peak x the large-GEMM efficiency of that dtype [FLOP/s]: the GEMM law's fitted ceiling
    ``gemm_efficiency`` where the catalog has one, else the measured ``matmul_efficiency`` (catalog data)."""
    eff = (acc.gemm_efficiency or {}).get(dtype, acc.matmul_efficiency.get(dtype))
    if eff is None:
        return peak_flops_per_s(acc, dtype) * acc.matmul_efficiency[dtype]
    return peak_flops_per_s(acc, dtype) * eff


def achievable_hbm_Bps(acc: Accelerator) -> float:
    """HBM bandwidth x its achievable fraction (catalog data) [bytes/s]."""
    return units.TBps_to_Bps(acc.hbm_bw_TBps) * acc.hbm_efficiency


def roofline_time_s(flops, nbytes, flops_per_s, bytes_per_s, launch_s=0.0):
    """Roofline time of an operator: ``max(flops / flops_per_s, nbytes / bytes_per_s) + launch_s`` [s].

    Works on scalars and numpy arrays alike ([4]_).

    >>> roofline_time_s(2e12, 1e9, 1e12, 1e12)
    2.0
    """
    t = np.maximum(np.divide(flops, flops_per_s), np.divide(nbytes, bytes_per_s)) + launch_s
    return float(t) if np.ndim(t) == 0 else t
