"""Parameter counts of a transformer from its catalog entry: the weights its published config defines
(attention, MLP or experts, norms, embeddings). Arithmetic on the entry's fields, kept with the catalog so that
a model file's published parameter count can be checked against its dimensions when it is read
(:class:`hnplan.catalog.schemas.Model`); :mod:`hnplan.compute.counts` re-exports it for the cost models.

References
----------
Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC21,
arXiv:2104.04473, Sec. 5.1; DeepSeek-V2 report, arXiv:2405.04434, Sec. 2.1 (MLA projections).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hnplan.catalog.schemas import Model


def head_dim(model: Model) -> int:
    """Per-head dimension of queries/keys/values [elements]: ``head_dim`` or hidden / heads."""
    return model.head_dim or model.hidden // model.heads


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a model [parameters].

    ``per_layer_attention`` etc. are for one layer; ``moe_total_per_layer`` counts every expert and
    ``moe_active_per_layer`` only the routed top-k plus shared experts and the router;
    ``moe_shared_per_layer`` is the part of both that every expert-parallel rank holds whole: the shared
    experts and the router (Megatron-Core ``SharedExpertMLP`` and ``TopKRouter`` sit outside the
    expert-parallel ``experts`` module and are reduced over the data-parallel group).
    """

    embedding: float
    lm_head: float
    position: float
    attention_per_layer: float
    dense_mlp_per_layer: float
    moe_total_per_layer: float
    moe_active_per_layer: float
    norms_per_layer: float
    dense_layers: int
    moe_layers: int
    final_norm: float
    moe_shared_per_layer: float = 0.0

    @property
    def layers_total(self) -> float:
        """Parameters of the layer stack (all experts counted)."""
        per_dense = self.attention_per_layer + self.dense_mlp_per_layer + self.norms_per_layer
        per_moe = self.attention_per_layer + self.moe_total_per_layer + self.norms_per_layer
        return self.dense_layers * per_dense + self.moe_layers * per_moe

    @property
    def layers_active(self) -> float:
        """Parameters of the layer stack that one token touches."""
        per_dense = self.attention_per_layer + self.dense_mlp_per_layer + self.norms_per_layer
        per_moe = self.attention_per_layer + self.moe_active_per_layer + self.norms_per_layer
        return self.dense_layers * per_dense + self.moe_layers * per_moe

    @property
    def expert_params(self) -> float:
        """Parameters of routed experts (sharded by expert parallelism; shared experts and router excluded)."""
        return self.moe_layers * (self.moe_total_per_layer - self.moe_shared_per_layer)

    @property
    def total(self) -> float:
        """All parameters, embeddings included (tied embeddings counted once)."""
        return self.embedding + self.lm_head + self.position + self.layers_total + self.final_norm

    @property
    def active(self) -> float:
        """Parameters used per token (MoE: active experts only), embeddings included."""
        return self.embedding + self.lm_head + self.position + self.layers_active + self.final_norm


def _mlp_params(hidden: int, ffn: int, activation: str) -> float:
    # gated (SwiGLU) MLPs have gate, up and down projections; GELU MLPs up and down
    return (3 if activation == "swiglu" else 2) * hidden * ffn


def _mla_up_params(model: Model) -> tuple[float, float]:
    """Weights of the MLA up-projections per layer: ``(q_up, kv_up)`` [-], ``q_up`` 0 without a query
    latent (DeepSeek-V2 report, arXiv:2405.04434, Sec. 2.1: ``W^UQ``, and ``W^UK`` with ``W^UV``)."""
    m = model.mla
    assert m is not None, "an MLA model"
    q_up = (m.q_lora_rank or 0) * model.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    return q_up, m.kv_lora_rank * model.heads * (m.qk_nope_head_dim + m.v_head_dim)


def _attention_params(model: Model) -> float:
    h = model.hidden
    if model.mla is not None:
        m = model.mla
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        q_up, kv_up = _mla_up_params(model)
        q: float = h * m.q_lora_rank + m.q_lora_rank + q_up if m.q_lora_rank else h * model.heads * qk_dim
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + kv_up
        o = model.heads * m.v_head_dim * h
        return q + kv + o
    d = head_dim(model)
    return h * model.heads * d * 2 + h * model.kv_heads * d * 2  # Q, O and K, V


def param_counts(model: Model) -> ParamCounts:
    """Parameter counts of a transformer from its catalog entry.

    Biases are left out (Llama-family and DeepSeek models have none; for GPT-style models they are
    below 0.1% of the total).

    Returns
    -------
    ParamCounts

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> round(param_counts(load_catalog().model("llama3.1-8b")).total / 1e9, 2)
    8.03
    """
    h = model.hidden
    moe = model.moe
    moe_layers = 0 if moe is None else model.layers - moe.first_dense_layers
    dense_layers = model.layers - moe_layers
    if moe is not None:
        expert = _mlp_params(h, moe.expert_ffn_hidden, model.activation)
        router = h * moe.experts
        moe_total = (moe.experts + moe.shared_experts) * expert + router
        moe_active = (moe.active_experts + moe.shared_experts) * expert + router
    else:
        moe_total = moe_active = 0.0
    shared = 0.0 if moe is None else moe.shared_experts * expert + router
    return ParamCounts(
        embedding=model.vocab * h,
        lm_head=0.0 if model.tied_embeddings else model.vocab * h,
        position=model.max_seq * h if model.position_embedding == "learned" else 0.0,
        attention_per_layer=_attention_params(model),
        dense_mlp_per_layer=_mlp_params(h, model.ffn_hidden, model.activation),
        moe_total_per_layer=moe_total,
        moe_active_per_layer=moe_active,
        norms_per_layer=2 * h,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        final_norm=h,
        moe_shared_per_layer=shared,
    )
