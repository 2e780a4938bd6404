"""Published serving measurements the inference planner is validated against: every row names its source and
the quantity it measured (:class:`Measurement`, :func:`measurements`); the predictions and the errors are
:mod:`hnplan.planning.inference.validation`'s. The MLPerf Inference rows are built in
:mod:`hnplan.planning.inference.measurements_mlperf`, the row type is
:mod:`hnplan.planning.inference.measurement_row`'s.

Sources: TensorRT-LLM ``trtllm-bench`` on H100, H200 and B200 (NVIDIA/TensorRT-LLM
docs/source/performance/perf-overview.md at commit 00f37686), Llama 3.1 405B on 8 x H200 (NVIDIA technical
blog), the DeepSeek-V3 serving reports, CloudMatrix-Infer, and MLPerf Inference v4.1 Llama 2 70B (NVIDIA's
closed submissions' logs).

The TensorRT-LLM perf-overview rows are the runs the benchmark made: each names the requests of its dataset
(:data:`TRTLLM_NUM_REQUESTS`, ``Measurement.num_requests``), all of one length and queued at once, and is
predicted as that finite run, its last partial batch included; the H200 blog rows do not publish theirs and
are predicted in steady state.
"""

from __future__ import annotations

from hnplan.planning.inference.measurement_row import Measurement
from hnplan.planning.inference.measurements_mlperf import (  # noqa: F401 - the MLPerf rows, public here as before
    MLPERF_H200_OFFLINE_BATCH,
    MLPERF_LLAMA2_INPUT_TOKENS,
    MLPERF_ROWS,
    MLPERF_SERVER_LOGS,
    MLPERF_V41,
    mlperf_rows,
)

TRTLLM_SOURCE = (
    "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (commit 00f37686): trtllm-bench, "
    "PyTorch backend, FP8, infinite request rate, output tokens/s of the TP group"
)
# (model id, TP, input tokens, output tokens, output tokens/s of the TP group)
TRTLLM_ROWS = [
    ("llama3.1-8b", 1, 128, 128, 28312),
    ("llama3.1-8b", 1, 128, 2048, 22714),
    ("llama3.1-8b", 1, 128, 4096, 14325),
    ("llama3.1-8b", 1, 500, 2000, 17660),
    ("llama3.1-8b", 1, 1000, 1000, 15220),
    ("llama3.1-8b", 1, 1000, 2000, 13899),
    ("llama3.1-8b", 1, 2048, 128, 3450),
    ("llama3.1-8b", 1, 2048, 2048, 9305),
    ("llama3.1-8b", 1, 5000, 500, 3459),
    ("llama3.1-8b", 1, 20000, 2000, 1351),
    ("llama3.1-70b", 2, 128, 128, 6378),
    ("llama3.1-70b", 2, 128, 2048, 6651),
    ("llama3.1-70b", 2, 128, 4096, 4199),
    ("llama3.1-70b", 2, 500, 2000, 5222),
    ("llama3.1-70b", 2, 1000, 1000, 4205),
    ("llama3.1-70b", 2, 1000, 2000, 4146),
    ("llama3.1-70b", 2, 2048, 128, 762),
    ("llama3.1-70b", 2, 2048, 2048, 3082),
    ("llama3.1-70b", 2, 5000, 500, 898),
    ("llama3.1-70b", 2, 20000, 2000, 437),
    ("llama3.1-405b", 8, 128, 128, 3627),
    ("llama3.1-405b", 8, 128, 2048, 4340),
    ("llama3.1-405b", 8, 128, 4096, 3116),
    ("llama3.1-405b", 8, 500, 2000, 3994),
    ("llama3.1-405b", 8, 1000, 1000, 2919),
    ("llama3.1-405b", 8, 1000, 2000, 2895),
    ("llama3.1-405b", 8, 2048, 128, 453),
    ("llama3.1-405b", 8, 2048, 2048, 2296),
    ("llama3.1-405b", 8, 5000, 500, 610),
    ("llama3.1-405b", 8, 20000, 2000, 345),
]
# The same table's H200 column (DGX H200, FP8, same commit and trtllm-bench settings): Llama 3.1 8B and
# Llama 3.3 70B at TP1, Llama 3.1 405B at TP8. (model id, TP, input tokens, output tokens, output tokens/s)
_SHAPES = (
    (128, 128),
    (128, 2048),
    (128, 4096),
    (500, 2000),
    (1000, 1000),
    (1000, 2000),
    (2048, 128),
    (2048, 2048),
    (5000, 500),
    (20000, 2000),
)
TRTLLM_H200_ROWS = [
    (m, tp, i, o, v)
    for m, tp, values in (
        ("llama3.1-8b", 1, (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804)),
        ("llama3.1-70b", 1, (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283)),
        ("llama3.1-405b", 8, (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505)),
    )
    for (i, o), v in zip(_SHAPES, values, strict=True)
]
TRTLLM_H200_TOLERANCE_PCT = {
    "llama3.1-8b": (-10.0, 25.0),
    "llama3.1-70b": (-10.0, 20.0),
    "llama3.1-405b": (-10.0, 25.0),
}
# The same perf-overview's B200 column (DGX B200, 180 GB): NVIDIA's NVFP4 checkpoints (Llama 3.3 70B at TP1,
# Llama 3.1 405B at TP4), the same trtllm-bench runs; the FP4 GEMMs as TensorRT-LLM runs them on Blackwell
TRTLLM_B200_ROWS = [
    (m, tp, i, o, v)
    for m, tp, values in (
        ("llama3.1-70b", 1, (11147, 9922, 6831, 7762, 7007, 6271, 1339, 4783, 1459, 665)),
        ("llama3.1-405b", 4, (6281, 8020, 6345, 6244, 5209, 4933, 749, 4212, 1048, 672)),
    )
    for (i, o), v in zip(_SHAPES, values, strict=True)
]
# Stated error bands per model [%] (model - published) / published
TRTLLM_TOLERANCE_PCT = {"llama3.1-8b": (-10.0, 15.0), "llama3.1-70b": (-10.0, 20.0), "llama3.1-405b": (-10.0, 25.0)}
# Requests in each synthetic dataset of the same perf-overview (its table of $num_requests per input/output
# length, "Preparing a dataset"; every request of a dataset has the same lengths, stdev 0), for both columns:
# (input tokens, output tokens) -> requests. The run's throughput counts its ramp and its last, partial batch.
TRTLLM_NUM_REQUESTS = {
    (128, 128): 30000,
    (128, 2048): 3000,
    (128, 4096): 1500,
    (1000, 2000): 1500,
    (2048, 128): 3000,
    (2048, 2048): 1500,
    (5000, 500): 1500,
    (1000, 1000): 3000,
    (500, 2000): 3000,
    (20000, 2000): 1000,
}


def measurements() -> list[Measurement]:
    """Every validation row: the 30 TensorRT-LLM rows on H100, 30 on H200 and 20 on B200 (FP4), three Llama 3.1 405B
    rows on H200, the DeepSeek-V3 serving reports (RTP-LLM, DeepSeek's day-6 overview, SGLang's 96 x H100 decode),
    CloudMatrix-Infer's INT8 decode and prefill on CloudMatrix 384 and the MLPerf
    Inference Llama 2 70B rows (:data:`MLPERF_ROWS`)."""
    out = [
        Measurement(
            f"trtllm-{m}-tp{tp}-{i}-{o}",
            "tokens_per_s",
            m,
            "hgx-h100-ib-ndr",
            tp,
            1,
            "fp8",
            i,
            o,
            float(v),
            "output tokens/s per TP group",
            TRTLLM_SOURCE,
            *TRTLLM_TOLERANCE_PCT[m],
            note="Llama 3.3 70B has the Llama 3.1 70B architecture" if m == "llama3.1-70b" else "",
            family=f"TensorRT-LLM {m}",
            engine="tensorrt-llm",
            engine_fills=True,
            num_requests=TRTLLM_NUM_REQUESTS[i, o],
        )
        for m, tp, i, o, v in TRTLLM_ROWS
    ]
    columns = (  # the same table's H200 (FP8) and B200 (NVFP4) columns: (rows, gpu, system, dtype, column, bands)
        (TRTLLM_H200_ROWS, "h200", "hgx-h200-ib-ndr", "fp8", "H200 SXM 141GB column", TRTLLM_H200_TOLERANCE_PCT),
        (TRTLLM_B200_ROWS, "b200", "dgx-b200-ib-ndr", "fp4", "B200 180GB column, NVFP4 checkpoints", None),
    )
    out += [
        Measurement(
            f"trtllm-po-{gpu}-{m}-tp{tp}-{i}-{o}",
            "tokens_per_s",
            m,
            system,
            tp,
            1,
            dtype,
            i,
            o,
            float(v),
            "output tokens/s per TP group",
            f"{TRTLLM_SOURCE} ({column})",
            *(bands[m] if bands else (-10.0, 20.0)),
            note="Llama 3.3 70B has the Llama 3.1 70B architecture" if m == "llama3.1-70b" else "",
            family=f"TensorRT-LLM {gpu.upper()} {m}",
            engine="tensorrt-llm",
            engine_fills=True,
            num_requests=TRTLLM_NUM_REQUESTS[i, o],
        )
        for rows, gpu, system, dtype, column, bands in columns
        for m, tp, i, o, v in rows
    ]
    h200 = (
        "NVIDIA Technical Blog 'Boosting Llama 3.1 405B Performance up to 1.44x with NVIDIA TensorRT Model "
        "Optimizer on NVIDIA H200 GPUs' (Aug 2024), Table 1, maximum throughput, TensorRT Model Optimizer FP8 "
        "(FP8 KV cache), 8 x H200 (secondary: transcribed alike by several news mirrors of the blog)"
    )
    out += [
        Measurement(
            f"trtllm-h200-llama3.1-405b-tp8-{i}-{o}",
            "tokens_per_s",
            "llama3.1-405b",
            "hgx-h200-ib-ndr",
            8,
            1,
            "fp8",
            i,
            o,
            v,
            "output tokens/s per TP group",
            h200,
            -10.0,
            40.0,
            family="TensorRT-LLM H200 blog",
            engine="tensorrt-llm",
        )
        for i, o, v in ((2048, 128, 463.1), (32768, 2048, 320.1), (120000, 2048, 71.5))
    ]
    rtp = (
        "alibaba/rtp-llm docs 'RTP-LLM DeepSeek Reproduce Tech Report': Alibaba Cloud Lingjun H800 over RoCE "
        "(system hgx-h800-roce-400g), PD-disaggregated, TP1 DP=EP; "
        "4K input / 2K output"
    )
    out += [
        Measurement(
            "rtp-llm-deepseek-v3-decode",
            "tokens_per_s_per_gpu_at_batch",
            "deepseek-v3",
            "hgx-h800-roce-400g",
            1,
            128,
            "fp8",
            4096,
            2048,
            1850.0,
            "output tokens/s per GPU",
            rtp + "; decode EP144 (128 + 16 redundant), "
            "13,200 concurrent requests reach the 20 tokens/s-per-user SLA: 1,850 tokens/s per GPU",
            -70.0,
            0.0,
            context_tokens=4096 + 1024,
            tpot_bound_s=1 / 20,
            batch=round(13200 / 144 * 128),
            note="modelled with EP128 (the 128 non-redundant ranks), two-micro-batch overlap and NCCL's pairwise "
            "all-to-all; the source's MTP and DeepEP low-latency kernels with SGLang's measured overlap and EPLB "
            "routing (engine sglang-large-ep) would make it +20 % at 85 % MTP acceptance, +10 % at 70 %, +4 % at "
            "60 %: the acceptance is not published (docs/inference.md). Step split (decode_split): operators "
            "35.2 ms, pairwise dispatch + combine 92.0 ms over RoCE (94.2 ms on the InfiniBand hgx-h800-ib); DeepEP's "
            "low-latency kernels would take 29.8 ms",
            family="RTP-LLM DeepSeek-V3",
            overlap=True,
        ),
        Measurement(
            "rtp-llm-deepseek-v3-prefill",
            "prefill_s",
            "deepseek-v3",
            "hgx-h800-roce-400g",
            1,
            32,
            "fp8",
            4096,
            1,
            1.5,
            "s per prefill pass of 2 x 4K prompts on one GPU",
            rtp + "; prefill EP32: one GPU runs 2 requests of 4K tokens in 1.5 s (5,333 tokens/s per GPU)",
            -30.0,
            30.0,
            batch=2,
            note="two-micro-batch overlap modelled; the pass is bound by the pairwise EP all-to-all",
            family="RTP-LLM DeepSeek-V3",
            overlap=True,
        ),
        Measurement(
            "deepseek-v3-production-decode",
            "tokens_per_s_per_gpu_at_batch",
            "deepseek-v3",
            "hgx-h800-ib",
            1,
            128,
            "fp8",
            4989,
            1000,
            14800.0 / 8,
            "output tokens/s per GPU",
            "deepseek-ai/open-infra-index 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_"
            "overview.md: ~14.8k output tokens/s per H800 node in decode, average KV length 4,989 tokens per "
            "output token, 20-22 tokens/s per user; decode EP144 DP144 over 18 nodes",
            -70.0,
            0.0,
            context_tokens=4989,
            tpot_bound_s=1 / 21,
            batch=round(14800 / 8 / 21 * 128),
            note="a day's production average (cache hits, varying lengths); concurrency by Little's law "
            "(1,850 tokens/s per GPU x 1/21 s = 88 sequences per GPU, derived); output length not "
            "published (1000 assumed for memory sizing only); overlap and NCCL's pairwise all-to-all modelled; with "
            "DeepEP's low-latency kernels, SGLang's measured overlap and EPLB routing and MTP +19 % at 85 % "
            "acceptance, +3 % at 60 % (docs/inference.md). Step split (decode_split): operators 34.4 ms, "
            "pairwise dispatch + combine 93.6 ms; DeepEP's low-latency kernels would take 28.9 ms",
            family="DeepSeek production",
            overlap=True,
        ),
        Measurement(
            "lmsys-sglang-deepseek-v3-decode",
            "tokens_per_s_per_gpu_at_batch",
            "deepseek-v3",
            "hgx-h100-ib-ndr",
            1,
            64,
            "fp8",
            2000,
            100,
            22282.0 / 8,
            "output tokens/s per GPU",
            "LMSYS blog 'Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 "
            "GPUs' (SGLang team, May 2025), Evaluation: decode on 9 nodes (EP72, DP attention, DeepEP low-latency "
            "kernels, two-batch overlap, EPLB with 32 redundant experts) at 22,282 output tokens/s per node for "
            "2K inputs, 256 sequences per GPU with a 2,000-token KV cache (Profile Results table), no MTP",
            -10.0,
            5.0,
            context_tokens=2000,
            batch=256 * 64,
            note="modelled with EP64 (the 256 routed experts on 8 nodes; the source's EP72 holds 288 with the "
            "redundant copies); output length not stated (100 assumed for memory sizing, the source's EPLB case "
            "study); engine sglang-large-ep: DeepEP's low-latency all-to-all, two-batch overlap at its measured "
            "efficiency and the busiest rank under EPLB's real routing (1.18x random routing, the blog's prefill "
            "comparison)",
            family="LMSYS SGLang DeepSeek-V3",
            overlap=True,
            engine="sglang-large-ep",
        ),
        Measurement(
            "cloudmatrix-infer-deepseek-r1-decode",
            "tokens_per_s_per_gpu_at_batch",
            "deepseek-v3",
            "cloudmatrix-384",
            1,
            128,
            "int8",
            4096,
            256,
            1943.0,
            "output tokens/s per NPU (Ascend 910C package)",
            "Zuo et al., 'Serving Large Language Models on Huawei CloudMatrix384', arXiv:2506.12708, abstract "
            "and Sec 5: CloudMatrix-Infer serving DeepSeek-R1 in INT8 W8A8, PD-disaggregated, decode EP320 "
            "on 160 NPUs with microbatch pipelining and MTP: 1,943 output tokens/s per NPU at 96 sequences per "
            "NPU, 4,096-token prompts (KV cache 4K), 256 output tokens, TPOT 49.4 ms (its decode tables)",
            -50.0,
            10.0,
            context_tokens=4096,
            tpot_bound_s=0.05,
            batch=96 * 128,
            note="DeepSeek-R1 has the DeepSeek-V3 architecture; modelled with EP128 (2 of the 256 routed "
            "experts per NPU; the paper's EP320 over the 320 dies also holds shared-expert and redundant "
            "copies) at the paper's 96 sequences per NPU; microbatch pipelining modelled as overlap. The "
            "engine keeps the pairwise all-to-all over UB as a stand-in and no MTP: the stack as run (one "
            "speculative token at the paper's 70 % acceptance, its FusedDispatch/FusedCombine at their measured "
            "rate, 0.381 of the UB line rate, EPLB's 1.18) comes out +17.5 % (serial) to +53.5 % (full overlap) "
            "optimistic, because the modelled 910C decode layer (0.55 ms without MTP, 0.90 ms with) is faster "
            "than the paper's measured 874 and 1,260 us per layer (docs/inference.md, CloudMatrix-Infer decode)",
            family="CloudMatrix-Infer DeepSeek-R1",
            overlap=True,
            engine="cloudmatrix-infer",
        ),
        Measurement(
            "cloudmatrix-infer-deepseek-r1-prefill",
            "prefill_s",
            "deepseek-v3",
            "cloudmatrix-384",
            1,
            16,
            "int8",
            4096,
            1,
            16384 / 6688,
            "s per prefill pass of 4 x 4K prompts on one NPU (Ascend 910C package)",
            "Zuo et al., 'Serving Large Language Models on Huawei CloudMatrix384', arXiv:2506.12708, Sec 5 prefill "
            "table: CloudMatrix-Infer, DeepSeek-R1 INT8 W8A8, prefill instances of 16 NPUs (32 dies, EP32) with "
            "microbatch pipelining, 4,096-token prompts, batches of 16,384 tokens: 6,688 tokens/s per NPU with "
            "perfect EPLB (5,655 with its default EPLB)",
            -40.0,
            10.0,
            batch=4,
            note="the perfect-EPLB figure, as the model routes at random without an expert_load_imbalance; one "
            "pass of the 16,384-token batch per NPU, 16,384 / 6,688 = 2.45 s (derived; per-NPU throughput is what "
            "is compared: the modelled pass time per token changes by 0.1 % between 4 and 8 prompts per NPU). The "
            "modelled pass is compute-bound (1.62 s of operators, 0.47 s of all-to-all hidden under them): the "
            "910C's modelled operators are faster than the stack as measured, as in its decode row",
            family="CloudMatrix-Infer DeepSeek-R1",
            overlap=True,
            engine="cloudmatrix-infer",
        ),
    ]
    out += mlperf_rows()
    return out
