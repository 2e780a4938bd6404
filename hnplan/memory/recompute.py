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

Full recomputation of some layers ([5]_): Megatron-Core's ``--recompute-method block
--recompute-num-layers N`` checkpoints the input of the first ``N`` layers of each model chunk (its
``TransformerBlock``: a pipeline stage, or each of its virtual stages) and runs the others plainly.
A stage of ``n`` layers in ``v`` chunks recomputes ``min(N, n / v)`` layers a chunk,
``min(N v, n)`` in all (:func:`block_recomputed_layers`): those keep their input only and run their
forward again, the rest keep every activation (the ``none`` level). The uniform method (chunks of
``N`` layers, each keeping its input) recomputes every layer; hnplan models it as ``N = 1``, every layer.

Activation offloading ([6]_): Transformer Engine's ``cpu_offload`` context copies the saved activations
of ``N`` layers to host memory on a side stream during the forward pass and back, one group ahead,
during the backward pass ("completely hidden behind computation if computation time of a layer is
longer than host-device communication time"); the offloaded groups are spread over the ``L`` layers
(``layer_window_map``), so the copies of one micro-batch run behind its whole forward (and the
reloads behind its whole backward) pass: each direction exposes ``max(0, N a / B - t_pass)`` with ``a``
the bytes of one layer and ``B`` the host link per GPU (:func:`offload_exposed_s`). HBM keeps
``L - N + 1`` layers (the group prefetched for the first backward step stays on the GPU;
:func:`offload_kept_layers`); host memory holds ``N a``. Megatron-Core allows it only with ``pp = 1``
and no recomputation ([5]_ ``transformer_config.py``).

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
.. [5] NVIDIA Megatron-LM, ``megatron/core/transformer/transformer_block.py`` (``_checkpointed_forward``:
   ``recompute_method`` ``uniform`` and ``block``), ``megatron/training/arguments.py``
   (``--recompute-method``, ``--recompute-num-layers``: "the number of individual Transformer layers to
   recompute within each pipeline stage") and ``megatron/core/transformer/transformer_config.py``
   (``cpu_offloading_num_layers``; no CPU offloading with pipeline parallelism or recomputation).
.. [6] NVIDIA TransformerEngine, ``transformer_engine/pytorch/cpu_offload.py``
   (``AsyncDoubleBufferGroupOffloadHandler``, ``get_cpu_offload_context``).
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


def block_recomputed_layers(stage_layers, virtual_stages, recompute_num_layers: int | None):
    """Layers of a pipeline stage the block method recomputes [count array]: ``min(N v, n)`` for a stage
    of ``n`` layers in ``v`` model chunks (``N`` layers at the head of each chunk, [5]_); all ``n`` when
    ``recompute_num_layers`` is None (every layer recomputed).

    >>> block_recomputed_layers(8, 4, 1).tolist(), block_recomputed_layers(32, 1, 5).tolist()
    (4.0, 5.0)
    >>> block_recomputed_layers(8, 2, 5).tolist(), block_recomputed_layers(8, 2, None).tolist()
    (8.0, 8.0)
    """
    n = np.asarray(stage_layers, dtype=float)
    if recompute_num_layers is None:
        return n
    return np.minimum(recompute_num_layers * np.asarray(virtual_stages, dtype=float), n)


def recomputed_share(stage_layers, virtual_stages, recompute_num_layers: int | None):
    """The share of a stage's layers the block method recomputes [fraction array]
    (:func:`block_recomputed_layers` over ``n``; 1 for an empty stage)."""
    n = np.asarray(stage_layers, dtype=float)
    r = block_recomputed_layers(n, virtual_stages, recompute_num_layers)
    return np.where(n > 0, r / np.maximum(n, 1.0), 1.0)


def offload_kept_layers(layers, offload_layers: int):
    """Layers whose activations stay in HBM with ``offload_layers`` offloaded ([6]_) [count array]:
    ``L - N + 1`` (one group prefetched for the first backward step), ``L`` without offloading; ``N``
    is capped at ``L - 1`` (Megatron-Core's limit).

    >>> offload_kept_layers(80, 40).tolist(), offload_kept_layers(80, 0).tolist()
    (41.0, 80.0)
    """
    L = np.asarray(layers, dtype=float)
    n = np.minimum(float(offload_layers), np.maximum(L - 1.0, 0.0))
    return np.where(n > 0, L - n + 1.0, L)


def offload_exposed_s(layer_bytes, offload_layers, host_bw_Bps: float, t_fwd_s, t_bwd_s):
    """Copy time activation offloading leaves exposed in one micro-batch [s]: each direction's copies
    ``N a / B`` (``a`` the bytes of one layer, ``B`` the host link per GPU per direction) less the pass
    they run behind (the forward for the copies out, the backward for the copies back; [6]_), at least 0.

    >>> float(offload_exposed_s(4e9, 40, 200e9, 1.0, 2.0))   # 0.8 s each way, hidden
    0.0
    >>> float(offload_exposed_s(4e9, 40, 100e9, 1.0, 2.0))   # 1.6 s each way: 0.6 s out, hidden back
    0.6000000000000001
    """
    copy = np.asarray(offload_layers, dtype=float) * np.asarray(layer_bytes, dtype=float) / host_bw_Bps
    return np.maximum(copy - np.asarray(t_fwd_s), 0.0) + np.maximum(copy - np.asarray(t_bwd_s), 0.0)
