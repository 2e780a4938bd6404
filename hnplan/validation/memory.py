"""Memory footprints against published worked examples (ZeRO paper figure 1, serving KV caches)."""

from __future__ import annotations

from hnplan import units
from hnplan.memory import kv_cache_bytes_per_token, zero_model_state_bytes
from hnplan.validation.rows import Row, area

ZERO_SRC = "Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054, Fig. 1 (7.5B parameters, 64-way data parallel)"


@area("memory")
def rows(cat) -> list[Row]:
    out = []
    for stage, published in zip((0, 1, 2, 3), (120.0, 31.4, 16.6, 1.9)):
        gb = sum(zero_model_state_bytes(7.5e9, 64, stage)) / units.GB
        out.append(
            Row(
                "memory",
                f"ZeRO stage {stage}, 7.5B on 64 GPUs",
                "model states per GPU",
                "GB",
                published,
                gb,
                "prediction",
                0.02,
                ZERO_SRC,
            )
        )
    models = cat.reference("models").set_index("name")
    for mid, name in (
        ("llama3.1-8b", "Llama 3.1 8B"),
        ("llama3.1-70b", "Llama 3.1 70B"),
        ("llama3.1-405b", "Llama 3.1 405B"),
        ("deepseek-v3", "DeepSeek-V3"),
    ):
        published = float(str(models.loc[name, "kv_cache_bytes_per_token_bf16"]).split()[0])
        out.append(
            Row(
                "memory",
                f"{mid} KV cache, bf16",
                "bytes per token",
                "B",
                published,
                kv_cache_bytes_per_token(cat.model(mid), "bf16"),
                "prediction",
                0.001,
                models.loc[name, "source"],
                "MLA latent cache for DeepSeek-V3",
            )
        )
    return out
