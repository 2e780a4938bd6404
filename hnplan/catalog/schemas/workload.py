"""Workload kinds: models (with their MoE and MLA parts) and report scenarios."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hnplan.catalog.schemas.base import (
    ID_PATTERN,
    Entry,
    PosInt,
    Positive,
    _Strict,
)


class MoE(_Strict):
    """Mixture-of-experts fields of a model."""

    experts: PosInt = Field(description="routed experts per MoE layer")
    active_experts: PosInt = Field(description="routed experts per token (top-k)")
    shared_experts: Annotated[int, Field(ge=0)] = 0
    expert_ffn_hidden: PosInt = Field(description="FFN hidden size of one expert")
    first_dense_layers: Annotated[int, Field(ge=0)] = Field(
        default=0, description="leading layers with a dense MLP of ffn_hidden instead of experts"
    )
    expert_groups: PosInt | None = Field(
        default=None, description="group-limited routing: experts fall in this many groups (HF n_group)"
    )
    groups_per_token: PosInt | None = Field(
        default=None,
        description="group-limited routing: a token's experts come from at most this many groups (HF topk_group)",
    )

    @model_validator(mode="after")
    def _k_le_e(self):
        if self.active_experts > self.experts:
            raise ValueError(f"active_experts ({self.active_experts}) exceeds experts ({self.experts})")
        if (self.expert_groups is None) != (self.groups_per_token is None):
            raise ValueError("expert_groups and groups_per_token go together (group-limited routing)")
        if (
            self.expert_groups is not None
            and self.groups_per_token is not None
            and (self.experts % self.expert_groups or self.groups_per_token > self.expert_groups)
        ):
            raise ValueError(
                f"expert_groups ({self.expert_groups}) must divide experts ({self.experts}) and be "
                f">= groups_per_token ({self.groups_per_token})"
            )
        return self


class MLA(_Strict):
    """DeepSeek multi-head latent attention fields (DeepSeek-V2/V3 config names)."""

    q_lora_rank: PosInt | None = None
    kv_lora_rank: PosInt
    qk_nope_head_dim: PosInt
    qk_rope_head_dim: PosInt
    v_head_dim: PosInt


class Model(Entry):
    """A transformer model's architecture, as in its published config."""

    layers: PosInt = Field(description="transformer layers")
    hidden: PosInt = Field(description="model (embedding) width [elements]")
    ffn_hidden: PosInt = Field(description="dense MLP hidden size")
    heads: PosInt = Field(description="attention (query) heads")
    kv_heads: PosInt = Field(description="key/value heads (= heads for MHA, 1 for MQA)")
    head_dim: PosInt | None = Field(default=None, description="defaults to hidden / heads")
    vocab: PosInt = Field(description="vocabulary size [tokens]")
    max_seq: PosInt = Field(description="maximum sequence length [tokens]")
    activation: Literal["gelu", "swiglu"] = Field(description="MLP type: plain GELU (2 matrices) or gated SwiGLU (3)")
    position_embedding: Literal["learned", "rope", "alibi"]
    tied_embeddings: bool = Field(default=False, description="LM head shares the input embedding matrix")
    dropout: bool = Field(
        default=True,
        description="hidden and attention dropout on in training (masks stored for "
        "the backward, Korthikanti et al. arXiv:2205.05198 Sec. 4.1); "
        "False for recipes with zero dropout (Llama)",
    )
    moe: MoE | None = Field(default=None, description="mixture-of-experts fields (experts, active_experts, ...)")
    mla: MLA | None = Field(default=None, description="multi-head latent attention ranks (DeepSeek-V2/V3)")
    params_b_published: Positive | None = Field(default=None, description="published parameter count [1e9]")
    mtp_modules: int = Field(
        default=0,
        ge=0,
        description="multi-token-prediction modules trained with the model (DeepSeek-V3: 1, arXiv:2412.19437 "
        "Sec. 2.2): each one more transformer layer and one more pass through the output head and loss",
    )

    @model_validator(mode="after")
    def _heads(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); set head_dim")
        return self


class ScenarioNotebook(_Strict):
    notebook: str = Field(description="notebook name in notebooks/ without .ipynb")
    parameters: dict = Field(default_factory=dict)


class Scenario(_Strict):
    """A named study: which notebooks to run with which parameters."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    description: str = ""
    notebooks: list[ScenarioNotebook] = Field(min_length=1)
