"""Workload kinds: models (with their MoE and MLA parts) and report scenarios."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hnplan import units
from hnplan.catalog.params import param_counts
from hnplan.catalog.schemas.base import (
    ID_PATTERN,
    Entry,
    PosInt,
    Positive,
    _Strict,
)

# -- upper bounds of a model's dimensions --------------------------------------------------------------
# Generous bounds, one to two orders of magnitude above the largest published values, so that a typo
# (``hidden: 1e12``) is refused with the field named instead of overflowing the floating-point time and
# memory arithmetic (a model of 1e26 parameters needs 1e17 GiB per GPU and numpy warns of overflow).
MAX_LAYERS = 10_000  # deepest published: DeepNet, 1,000 layers (Wang et al., arXiv:2203.00555)
MAX_HIDDEN = 2**20  # widest: Megatron-LM 1T, hidden 25,600 (Narayanan et al., SC21, Table 1)
MAX_FFN_HIDDEN = 2**22  # PaLM 540B: 73,728 (Chowdhery et al., arXiv:2204.02311, Table 1); Megatron 1T: 102,400
MAX_HEADS = 2**14  # Megatron-LM 1T: 160 heads (SC21, Table 1); DeepSeek-V3: 128
MAX_HEAD_DIM = 2**14  # usual 64-256
MAX_VOCAB = 2**24  # Gemma 3: 262,144 tokens (Gemma Team, arXiv:2503.19786)
MAX_SEQ = 2**30  # Llama 4 Scout: 10M tokens of context (Meta model card, 2025)
MAX_EXPERTS = 2**21  # PEER: 1,048,576 experts per layer (He, arXiv:2407.04153)
#: the largest parameter count accepted (about 600 times the 1.6T of Switch-C, Fedus et al.,
#: arXiv:2101.03961, Table 9): it keeps every product of dimensions exact in 64-bit integers
MAX_PARAMS = 1e15
#: the most training tokens a job may name (``hnplan size --tokens``, a report's or a sweep's ``tokens``):
#: about 3,000 times the stock of public human text (about 3e14 tokens, Villalobos et al., "Will we run
#: out of data?", arXiv:2211.04325) and 60,000 times Llama 3's 15.6T; a larger count is a typo, and its
#: answer (days of 30 digits) a misleading one
MAX_TRAINING_TOKENS = 1e18

Layers = Annotated[int, Field(gt=0, le=MAX_LAYERS)]
Width = Annotated[int, Field(gt=0, le=MAX_HIDDEN)]
FfnWidth = Annotated[int, Field(gt=0, le=MAX_FFN_HIDDEN)]
Heads = Annotated[int, Field(gt=0, le=MAX_HEADS)]
HeadDim = Annotated[int, Field(gt=0, le=MAX_HEAD_DIM)]


class MoE(_Strict):
    """Mixture-of-experts fields of a model."""

    experts: Annotated[int, Field(gt=0, le=MAX_EXPERTS)] = Field(description="routed experts per MoE layer")
    active_experts: PosInt = Field(description="routed experts per token (top-k)")
    shared_experts: Annotated[int, Field(ge=0, le=MAX_EXPERTS)] = 0
    expert_ffn_hidden: FfnWidth = Field(description="FFN hidden size of one expert")
    first_dense_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)] = Field(
        default=0, description="leading layers with a dense MLP of ffn_hidden instead of experts"
    )
    expert_groups: PosInt | None = Field(
        default=None, description="group-limited routing: experts fall in this many groups (HF n_group)"
    )
    groups_per_token: PosInt | None = Field(
        default=None,
        description="group-limited routing: a token's experts come from at most this many groups (HF topk_group)",
    )
    expert_bias: bool = Field(
        default=False,
        description="the routed experts' linear layers carry biases (Megatron-Core add_bias_linear; gpt-oss): in "
        "training the FC2 bias, scaled by the routing probability, is added as the stack's expert_bias_kernel says",
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

    q_lora_rank: Width | None = None
    kv_lora_rank: Width
    qk_nope_head_dim: HeadDim
    qk_rope_head_dim: HeadDim
    v_head_dim: HeadDim


#: how far the parameter count a model's dimensions give (:func:`hnplan.catalog.params.param_counts`) may lie
#: from its ``params_b_published``: the catalog's models agree within 4 % (Llama 2 7B: 6.74B against the
#: rounded 7B, -3.7 %), a mistyped width moves it by tens of per cent or more
PUBLISHED_PARAMS_TOLERANCE = 0.10


class Model(Entry):
    """A transformer model's architecture, as in its published config."""

    layers: Layers = Field(description="transformer layers")
    hidden: Width = Field(description="model (embedding) width [elements]")
    ffn_hidden: FfnWidth = Field(description="dense MLP hidden size")
    heads: Heads = Field(description="attention (query) heads")
    kv_heads: Heads = Field(description="key/value heads (= heads for MHA, 1 for MQA)")
    head_dim: HeadDim | None = Field(default=None, description="defaults to hidden / heads")
    vocab: Annotated[int, Field(gt=0, le=MAX_VOCAB)] = Field(description="vocabulary size [tokens]")
    max_seq: Annotated[int, Field(gt=0, le=MAX_SEQ)] = Field(description="maximum sequence length [tokens]")
    activation: Literal["gelu", "swiglu"] = Field(description="MLP type: plain GELU (2 matrices) or gated SwiGLU (3)")
    glu_gate: Literal["silu", "quick_gelu"] = Field(
        default="silu",
        description="the gate's non-linearity of a gated (swiglu) activation: silu (SwiGLU) or quick_gelu, "
        "x sigmoid(1.702 x) with the linear half offset by 1 (gpt-oss: Hugging Face modeling_gpt_oss.py "
        "GptOssExperts alpha 1.702, (up + 1) * glu; Megatron-Core quick_geglu with glu_linear_offset 1)",
    )
    # at most 1e4: a clamp that far out leaves every activation of a trained model untouched, so a larger value is a
    # typo (gpt-oss clamps at 7)
    activation_clamp: Annotated[float, Field(gt=0.0, le=1e4)] | None = Field(
        default=None,
        description="a gated activation's inputs clamped before it: the gate to at most this value, the linear "
        "half to within plus or minus it (gpt-oss: swiglu_limit 7.0, openai/gpt-oss-120b config.json). A stack that "
        "runs the clamps as PyTorch operators moves their bytes (hnplan.compute.eager_ops.act_clamp_op); None: "
        "no clamp",
    )
    position_embedding: Literal["learned", "rope", "alibi"]
    tied_embeddings: bool = Field(default=False, description="LM head shares the input embedding matrix")
    dropout: bool = Field(
        default=True,
        description="hidden and attention dropout on in training (masks stored for "
        "the backward, Korthikanti et al. arXiv:2205.05198 Sec. 4.1); "
        "False for recipes with zero dropout (Llama)",
    )
    qk_norm: bool = Field(
        default=False,
        description="an RMSNorm over each query and key head after the QKV projection, before the rotary "
        "embedding (Qwen3: q_norm and k_norm of head_dim, Hugging Face transformers modeling_qwen3_moe.py "
        "Qwen3MoeAttention; Megatron-Core qk_layernorm)",
    )
    moe: MoE | None = Field(default=None, description="mixture-of-experts fields (experts, active_experts, ...)")
    mla: MLA | None = Field(default=None, description="multi-head latent attention ranks (DeepSeek-V2/V3)")
    params_b_published: Positive | None = Field(
        default=None,
        description="published parameter count [1e9]; the dimensions must give it within 10 % (a typo check)",
    )
    sliding_window: Annotated[int, Field(gt=0, le=MAX_SEQ)] | None = Field(
        default=None,
        description="sliding-window attention: a query of a sliding layer attends to itself and the window - 1 "
        "keys before it, window keys at most [tokens] (Hugging Face config sliding_window; gpt-oss: 128, "
        "openai/gpt-oss-120b config.json); None: every layer attends causally to the whole sequence",
    )
    sliding_window_layers: Literal["all", "even", "odd"] | None = Field(
        default=None,
        description="which layers use sliding_window, by 0-based index: all, the even-indexed (0, 2, ...; the "
        "others full causal) or the odd-indexed (Hugging Face layer_types; gpt-oss: even, its layer_types "
        "starting with sliding_attention and alternating); set with sliding_window and only with it",
    )
    # at most 10: YaRN's 0.1 ln(s) + 1 reaches 10 only at an extension of e^90, so a larger value is a typo
    rope_attention_factor: Annotated[float, Field(gt=0.0, le=10.0)] | None = Field(
        default=None,
        description="the factor YaRN scales the rotary cos and sin by (its attention factor, 0.1 ln(s) + 1 for a "
        "context extension s > 1: Peng et al., YaRN, arXiv:2309.00071 Sec. 3.4; Megatron-Core "
        "yarn_rotary_pos_embedding.py _yarn_get_mscale; gpt-oss: s = 32, 1.3466); None or 1: plain RoPE. A "
        "training stack whose fused rotary kernel cannot apply it (rope_attention_factor_fused false) runs the "
        "model's rotary embedding as its eager chain",
    )
    mtp_modules: int = Field(
        default=0,
        ge=0,
        le=MAX_LAYERS,
        description="multi-token-prediction modules trained with the model (DeepSeek-V3: 1, arXiv:2412.19437 "
        "Sec. 2.2): each one more transformer layer and one more pass through the output head and loss",
    )

    @model_validator(mode="after")
    def _heads(self):
        if (self.sliding_window is None) != (self.sliding_window_layers is None):
            raise ValueError("sliding_window and sliding_window_layers go together (a window and the layers it is on)")
        if self.activation != "swiglu" and (self.glu_gate != "silu" or self.activation_clamp is not None):
            raise ValueError("glu_gate and activation_clamp describe a gated activation: they need activation swiglu")
        if self.sliding_window is not None and self.mla is not None:
            raise ValueError("sliding_window with mla is not modelled (no such published model)")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); set head_dim")
        params = self.params_bound()
        if params > MAX_PARAMS:
            raise ValueError(
                f"layers ({self.layers}), hidden ({self.hidden}) and the MLP sizes give about {params:.2g} "
                f"parameters, above the {MAX_PARAMS:.0e} this planner accepts; check them for a typo"
            )
        if self.params_b_published is not None:  # a mistyped dimension must not give another model silently
            derived = param_counts(self).total / units.GIGA  # [billion parameters]
            if abs(derived / self.params_b_published - 1) > PUBLISHED_PARAMS_TOLERANCE:
                raise ValueError(
                    f"the dimensions (layers {self.layers}, hidden {self.hidden}, ffn_hidden {self.ffn_hidden}, "
                    f"vocab {self.vocab}{', moe' if self.moe is not None else ''}) give {derived:,.4g}B parameters, "
                    f"{derived / self.params_b_published:.3g}x params_b_published ({self.params_b_published:g}B); "
                    f"they must agree within {PUBLISHED_PARAMS_TOLERANCE:.0%}: check the dimensions for a typo (a model of "
                    "your own: give it its own params_b_published, or none)"
                )
        return self

    def sliding_layer_count(self, layers: range | None = None) -> int:
        """Layers of ``layers`` (0-based indices; default all) that attend within :attr:`sliding_window` [-]:
        none without one, all, or those of even or odd index (:attr:`sliding_window_layers`).

        >>> m = Model(id="toy", name="toy", source="test", layers=5, hidden=64, ffn_hidden=128, heads=4, kv_heads=4,
        ...           vocab=100, max_seq=256, activation="swiglu", position_embedding="rope",
        ...           sliding_window=16, sliding_window_layers="even")
        >>> m.sliding_layer_count(), m.sliding_layer_count(range(1, 5))
        (3, 2)
        """
        layers = range(self.layers) if layers is None else layers
        kind = self.sliding_window_layers
        if kind is None:
            return 0
        if kind == "all":
            return len(layers)
        parity = 0 if kind == "even" else 1
        return sum(1 for i in layers if i % 2 == parity)

    def sliding_layer_share(self, layers: range | None = None) -> float:
        """Share of ``layers`` (default all) that attend within :attr:`sliding_window` [-]
        (:meth:`sliding_layer_count` over their number; 0 for no layers).

        >>> m = Model(id="toy", name="toy", source="test", layers=5, hidden=64, ffn_hidden=128, heads=4, kv_heads=4,
        ...           vocab=100, max_seq=256, activation="swiglu", position_embedding="rope",
        ...           sliding_window=16, sliding_window_layers="even")
        >>> m.sliding_layer_share(), m.sliding_layer_share(range(1, 5))
        (0.6, 0.5)
        """
        layers = range(self.layers) if layers is None else layers
        return self.sliding_layer_count(layers) / len(layers) if len(layers) else 0.0

    def params_bound(self) -> float:
        """An upper estimate of the parameter count from the dimensions alone (each layer: four attention
        matrices of ``hidden x max(hidden, heads x head_dim)``, three MLP matrices of every expert or of the
        dense MLP; plus input and output embeddings) [parameters]; a sanity bound, not the model's count
        (:func:`hnplan.compute.counts.param_counts` gives that)."""
        h = float(self.hidden)
        attn = 4.0 * h * max(h, float(self.heads * (self.head_dim or self.hidden // self.heads)))
        ffn = float(self.ffn_hidden)
        if self.moe is not None:
            ffn = max(ffn, float((self.moe.experts + self.moe.shared_experts) * self.moe.expert_ffn_hidden))
        return (self.layers + self.mtp_modules) * (attn + 3.0 * h * ffn) + 2.0 * self.vocab * h


class ScenarioNotebook(_Strict):
    notebook: str = Field(description="notebook name in notebooks/ without .ipynb")
    parameters: dict = Field(default_factory=dict)


class Scenario(_Strict):
    """A named study: which notebooks to run with which parameters."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    description: str = ""
    notebooks: list[ScenarioNotebook] = Field(min_length=1)
