"""Memory of partial recomputation, the multi-token-prediction module and DualPipe's two parameter copies.

Selective recomputation by module ([1]_): Megatron-Core's ``--recompute-granularity selective
--recompute-modules`` checkpoints a few sub-modules of each layer: their input stays saved, their
internal tensors are freed after the forward pass and re-computed before the backward pass. Per token
of a layer, the bytes each module frees from :func:`hnplan.memory.activations.layer_activations`'s
accounting (``h`` hidden, ``f`` an MLP's intermediate width, ``a`` heads, bf16 = 2 bytes):

* ``core_attn``: the attention core; frees the ``s x s`` scores where they are stored (unfused
  attention; FlashAttention keeps none, Korthikanti et al. [2]_ Sec. 5);
* ``layernorm``: the norms before attention and before the MLP; frees their outputs, the inputs of
  the QKV (or MLA down-) projection and of the first MLP GEMM or router: ``2 x 2h``;
* ``mla_up_proj``: the latent norms, MLA up-projections and RoPE; frees the per-head queries, keys and
  values ``2 a (2 d_qk + d_v)`` and the normed latents the up-projections read ``2 (r_q + r_kv)`` (the
  latents themselves stay saved: the checkpoint's inputs, [1]_ ``multi_latent_attention.py``), as
  DeepSeek-V3 does ([3]_ Sec. 3.2.3);
* ``mlp``: a dense layer's MLP; frees its intermediates (``3f x 2`` for SwiGLU, ``2f x 2`` for GELU);
* ``moe_act``: the routed experts' activation function; frees its output, the down-projection input
  (``2 f_e`` per routed copy);
* ``shared_experts``: the shared experts; frees their intermediates.

The bytes a module frees that were inputs of weight GEMMs are reported apart (``gemm_*``): in fp8
training those were kept as 1-byte casts, so they free half as much.

Multi-token prediction ([3]_ Sec. 2.2): each MTP module is one more Transformer layer, two RMSNorms and
a ``2h x h`` projection of the concatenated hidden state and embedding, sharing the embedding and the
output head of the main model. Megatron-Core trains it on the last pipeline stage, which then also
keeps its own copy of the input embedding ([4]_: ``GPTModel`` builds the embedding where
``pre_process or mtp_process``). Its activations: the layer's, the embedding-norm input and the
projection input (``2h + 4h`` bytes a token) and one more pass through the output head and loss.

DualPipe ([3]_ Sec. 3.2.1, Table 2): each rank holds one stage of each direction of the bidirectional
pipeline, the first rank the first and the last stage: two copies of the parameters ("Parameter 2x")
and ``pp + 1`` micro-batches of activations where 1F1B keeps ``pp``. The MTP module there shares the
main model's embedding and output head ([3]_ Sec. 3.2.3): no second embedding copy.

References
----------
.. [1] NVIDIA Megatron-LM, ``megatron/core/transformer/transformer_config.py`` (``recompute_modules``:
   core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts; default ``["core_attn"]``) and
   ``transformer_layer.py`` / ``multi_latent_attention.py`` (``CheckpointWithoutOutput``).
.. [2] Korthikanti et al., arXiv:2205.05198, Sec. 5 (selective activation recomputation).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.2 (MTP modules), 3.2.1
   and Table 2 (DualPipe: parameters 2x, activations PP + 1), 3.2.3 (recomputation of RMSNorm and the
   MLA up-projections; embedding and output head shared with the MTP module).
.. [4] NVIDIA Megatron-LM, ``megatron/core/models/gpt/gpt_model.py`` (the MTP stage's embedding).
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES
from hnplan.compute.counts import RECOMPUTE_MODULES
from hnplan.errors import check_choice

# RECOMPUTE_MODULES: the modules selective recomputation may re-run (Megatron-Core names; ``moe``, the
# whole MoE layer with its all-to-alls, is not offered: the re-run dispatch is not in the communication model)
DEFAULT_MODULES = ("core_attn",)  # Megatron-Core's default and Korthikanti et al.'s selective recomputation


def check_modules(modules) -> tuple[str, ...]:
    """The modules as a tuple, each checked against :data:`RECOMPUTE_MODULES`.

    Raises
    ------
    InputError
        For an unknown module name; the message lists the known ones.
    """
    for m in modules:
        check_choice("recompute module", m, RECOMPUTE_MODULES)
    return tuple(modules)


def mlp_intermediate(ffn: float, activation: str) -> float:
    """Intermediate bytes an MLP keeps per token [bytes/token]: GELU its input and output (``2f x 2``),
    SwiGLU its gate and up outputs and their product (``3f x 2``)."""
    return ACT_BYTES * (3 if activation == "swiglu" else 2) * ffn


def freed_bytes(model: Model, moe_layer: bool, modules) -> tuple[float, float, float, float]:
    """Per-token bytes of one layer the recomputed ``modules`` free (see the module docstring) [bytes/token].

    Returns
    -------
    tuple of float
        ``(replicated, split, gemm_inputs_replicated, gemm_inputs_split)``, the parts of
        :class:`hnplan.memory.activations.LayerActivations` they come from (the ``s x s`` scores of
        ``core_attn`` are the caller's).

    Examples
    --------
    Llama 3.1 8B (h 4096, SwiGLU f 14336), ``layernorm`` and ``mlp``: ``4h`` replicated bytes (all
    GEMM inputs) and ``6f`` split ones, ``2f`` of them the down-projection input.

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("llama3.1-8b")
    >>> freed_bytes(m, False, ("layernorm", "mlp")) == (4 * 4096, 6 * 14336, 4 * 4096, 2 * 14336)
    True
    """
    check_modules(modules)
    h = model.hidden
    rep = g_rep = split = g_split = 0.0
    if "layernorm" in modules:  # the QKV / down-projection input and the MLP / router input
        rep += 2 * ACT_BYTES * h
        g_rep += 2 * ACT_BYTES * h
    if "mla_up_proj" in modules and model.mla is not None:
        m = model.mla
        split += ACT_BYTES * model.heads * (2 * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.v_head_dim)
        normed = ACT_BYTES * ((m.q_lora_rank or 0) + m.kv_lora_rank)  # the up-projections' inputs
        rep += normed
        g_rep += normed
    moe = model.moe if moe_layer else None
    if moe is None:
        if "mlp" in modules:
            split += mlp_intermediate(model.ffn_hidden, model.activation)
            g_split += ACT_BYTES * model.ffn_hidden
    else:
        if "moe_act" in modules:  # the activation output: the down-projection input of each routed copy
            split += ACT_BYTES * moe.active_experts * moe.expert_ffn_hidden
            g_split += ACT_BYTES * moe.active_experts * moe.expert_ffn_hidden
        if "shared_experts" in modules:
            split += moe.shared_experts * mlp_intermediate(moe.expert_ffn_hidden, model.activation)
            g_split += ACT_BYTES * moe.shared_experts * moe.expert_ffn_hidden
    return rep, split, g_rep, g_split


def mtp_extra_params(model: Model) -> float:
    """Parameters the multi-token-prediction modules add outside their Transformer layers [parameters]:
    per module the ``2h x h`` projection and two RMSNorms (``2h``), plus, once, the last stage's copy of
    the input embedding (none with tied embeddings, whose copy the last stage already keeps; [4]_).

    >>> from hnplan.catalog import load_catalog
    >>> mtp_extra_params(load_catalog().model("deepseek-v3")) == 2 * 7168**2 + 2 * 7168 + 129280 * 7168
    True
    """
    if not model.mtp_modules:
        return 0.0
    h = model.hidden
    emb = 0.0 if model.tied_embeddings else model.vocab * h
    return model.mtp_modules * (2.0 * h * h + 2.0 * h) + emb


def mtp_activation_bytes(model: Model, tokens, tp_sp, layer_bytes, output_bytes):
    """Activations of the multi-token-prediction modules for one micro-batch [bytes]: per module its
    layer (``layer_bytes``, one micro-batch), its output head and loss (``output_bytes``) and the
    embedding-norm input and projection input (``2h + 4h`` bytes a token of the ``tokens`` a rank
    holds, over ``tp_sp``: the TP degree where sequence parallelism splits them, else 1).

    >>> from hnplan.catalog import load_catalog
    >>> m = load_catalog().model("deepseek-v3")
    >>> float(mtp_activation_bytes(m, 4096, 1, 0.0, 0.0)) == 6 * 7168 * 4096
    True
    """
    extra = 3 * ACT_BYTES * model.hidden * np.asarray(tokens, dtype=float) / tp_sp
    return model.mtp_modules * (np.asarray(layer_bytes) + np.asarray(output_bytes) + extra)


def dualpipe_on(pp, v):
    """Where DualPipe's memory applies [bool array]: an even ``pp > 1`` without virtual stages (where the
    planner runs its bubble; otherwise the 1F1B schedule)."""
    pp, v = np.asarray(pp), np.asarray(v)
    return (pp > 1) & (pp % 2 == 0) & (v == 1)
