"""Memory footprints against published worked examples (ZeRO paper figure 1, serving KV caches) and the peaks of a
plain-PyTorch training step measured on one H200 (``data/reference/h200_hf_llama_step.csv``)."""

from __future__ import annotations

from hnplan import units
from hnplan.memory import kv_cache_bytes_per_token, zero_model_state_bytes
from hnplan.validation.rows import Row, area

ZERO_SRC = "Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054, Fig. 1 (7.5B parameters, 64-way data parallel)"
STEP_SRC = (
    "data/reference/h200_hf_llama_step.csv: Llama 3.2 1B and 3B in Hugging Face transformers 5.17 on one H200, "
    "torch.autocast bf16 over fp32 parameters, fused AdamW, torch.cuda.max_memory_allocated (tools/measure_h200.py, "
    "2026-12-04)"
)
STEP_TOL = 0.2  # the peaks were predicted within 0.25 %; the band is the per-row one of the GEMM law's kernels
# the device's memory as PyTorch reported it in the rows' OutOfMemoryError ("a total capacity of 139.80 GiB")
H200_VISIBLE_GIB = 139.80


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
    return out + step_rows(cat)


def step_rows(cat) -> list[Row]:
    """The peak allocated memory of each measured configuration of ``h200_hf_llama_step`` (the ``step`` run) against
    the training planner's footprint on the ``pytorch-eager`` stack less its runtime overheads (CUDA context and
    allocator slack, which ``max_memory_allocated`` does not count); the configurations that ran out of memory as
    bounds: the planner's whole footprint must exceed the memory the device had (:data:`H200_VISIBLE_GIB`)."""
    from hnplan.planning.memory import memory_summary

    ref = cat.reference("h200_hf_llama_step")
    ref = ref[ref["run"].isin(("step", "step8k"))]
    out = []
    for r in ref.itertuples():
        mb, rc, model = int(r.micro_batch), str(r.recompute), str(r.config).split()[0]
        m = memory_summary(
            model,
            mode="train",
            seq_len=int(r.seq_len),
            microbatch_size=mb,
            zero=0,
            recompute=rc,
            stack="pytorch-eager",
            catalog=cat,
        )
        case = (
            f"{model} on one H200, plain PyTorch (autocast over fp32), micro-batch {mb} x {int(r.seq_len):,}, "
            f"recompute {rc}"
        )
        oom = isinstance(r.error, str) and "OutOfMemory" in r.error
        if oom:
            out.append(
                Row(
                    "memory",
                    case,
                    f"memory needed over the {H200_VISIBLE_GIB} GiB available (ran out of memory)",
                    "GiB",
                    H200_VISIBLE_GIB,
                    m["total_gib"],
                    "bound",
                    1.5,
                    STEP_SRC,
                    f"ran out of memory ({r.error.split('.')[0]}); the planner must find it does not fit",
                )
            )
            continue
        if str(r.optimizer) != "AdamW fused" or (out and out[-1].case == case):
            continue
        out.append(
            Row(
                "memory",
                case,
                "peak allocated memory",
                "GiB",
                float(r.peak_alloc_gib),
                m["total_gib"] - m["overhead_gib"],
                "prediction",
                STEP_TOL,
                STEP_SRC,
                "the planner's footprint less its runtime overheads, with the eager norms, SwiGLU, fp32 residual "
                "stream, per-linear bf16 casts and the eager loss's first fp32 gradients (EagerSaved), the gradients "
                "allocated during the backward (grads_in_backward) and, fully recomputed, no bf16 weight copies but "
                "the LM head's",
            )
        )
    return out
