"""Inference planner against published serving measurements, row by row within stated tolerances."""

import pytest

from hnplan.planning.inference import measurements, validation_table
from hnplan.planning.inference.validation import TRTLLM_ROWS

MODEL_NAMES = {"Llama 3.1 8B": "llama3.1-8b", "Llama 3.3 70B": "llama3.1-70b", "Llama 3.1 405B": "llama3.1-405b"}


def test_trtllm_rows_match_the_reference_csv(cat):
    ref = cat.reference("inference_measurements")
    ref = ref[ref["id"].str.startswith("trtllm")]
    got = {
        (MODEL_NAMES[r.model], int(r.parallelism[2:]), int(r.isl), int(r.osl)): float(r.throughput_value)
        for r in ref.itertuples()
    }
    assert {(m, tp, i, o): float(v) for m, tp, i, o, v in TRTLLM_ROWS} == got


@pytest.mark.parametrize("model", ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b"])
def test_trtllm_max_throughput_within_tolerance(cat, model):
    rows = [m for m in measurements() if m.model == model and m.family == f"TensorRT-LLM {model}"]
    df = validation_table(rows, cat)
    assert len(df) == 10
    bad = df[~df["within_tolerance"]]
    assert bad.empty, bad[["id", "published", "modelled", "error_pct", "tol_lo_pct", "tol_hi_pct"]].to_string()


@pytest.mark.parametrize("model", ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b"])
def test_trtllm_h200_rows_within_tolerance(cat, model):
    # the same perf-overview table's H200 column: 3x the KV room of H100 at 1.4x its bandwidth
    rows = [m for m in measurements() if m.family == f"TensorRT-LLM H200 {model}"]
    df = validation_table(rows, cat)
    assert len(df) == 10 and {m.system for m in rows} == {"hgx-h200-ib-ndr"}
    bad = df[~df["within_tolerance"]]
    assert bad.empty, bad[["id", "published", "modelled", "error_pct", "tol_lo_pct", "tol_hi_pct"]].to_string()


@pytest.mark.parametrize("model", ["llama3.1-70b", "llama3.1-405b"])
def test_trtllm_b200_fp4_rows_within_tolerance(cat, model):
    """The same table's B200 column (NVFP4, 70B at TP1, 405B at TP4): TensorRT-LLM's FP4 runs at the FP4 GEMM
    rate vLLM measured on B200 (b200.yaml) come out -8..+19 %, no more pessimistic than the FP8 rows on Hopper:
    the FP4 rate does not explain the MLPerf B200 rows' -21..-25 % (docs/inference.md)."""
    rows = [m for m in measurements() if m.family == f"TensorRT-LLM B200 {model}"]
    df = validation_table(rows, cat)
    assert len(df) == 10 and {(m.system, m.dtype) for m in rows} == {("dgx-b200-ib-ndr", "fp4")}
    bad = df[~df["within_tolerance"]]
    assert bad.empty, bad[["id", "published", "modelled", "error_pct", "tol_lo_pct", "tol_hi_pct"]].to_string()
    assert df["error_pct"].abs().mean() < 8.0


def test_trtllm_bench_limits_hand_derived(cat):
    # tensorrt_llm/bench/build/tuning.py on 8 x H100 (79.11 GiB each), Llama 3.1 405B FP8 with FP8 KV, 128/4096:
    # weights 405.9e9 B = 378 GiB, free 8 x 79.11 - 378 = 255 GiB, one sequence 2 x 126 x 8 x 128 B x 4,224 =
    # 1.015 GiB, 0.95 x 255 / 1.015 = 238.6 sequences -> 256 (multiple of 32); 238.6 x (1 + 128/4096) = 246
    # tokens -> 2,048 (the floor). Llama 3.1 8B at 128/128 on one H100: 4,355 sequences, capped at 4,096;
    # 4,096 x 2 = 8,192 tokens
    from hnplan.planning.inference import Replica, resolve
    from hnplan.planning.inference.validation import trtllm_bench_limits

    big = resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), cat)
    small = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="fp8", engine="tensorrt-llm"), cat)
    assert trtllm_bench_limits(big, 128, 4096) == (256, 2048)
    assert trtllm_bench_limits(big, 128, 2048) == (512, 2048)  # 478 sequences -> a multiple of 128
    assert trtllm_bench_limits(small, 128, 128) == (4096, 8192)
    # 20000/2000: 64 sequences and 2,048 tokens by the rule, but without chunked prefill trtllm-bench raises
    # max_num_tokens to the longest prompt plus max_batch_size (benchmark/utils/general.py): 20,000 + 64
    assert trtllm_bench_limits(big, 20000, 2000) == (64, 20064)


def test_h200_long_context_rows_within_tolerance(cat):
    df = validation_table([m for m in measurements() if m.family == "TensorRT-LLM H200 blog"], cat)
    assert len(df) == 3 and df["within_tolerance"].all(), df[["id", "published", "modelled", "error_pct"]].to_string()


def test_deepseek_serving_reports_within_tolerance(cat):
    rows = [m for m in measurements() if m.model == "deepseek-v3" and m.system != "cloudmatrix-384"]
    df = validation_table(rows, cat).set_index("id")
    assert len(df) == 4
    assert df["within_tolerance"].all(), df[["published", "modelled", "error_pct"]].to_string()
    # the H800 reports keep the pairwise all-to-all as a stand-in for their unmodelled share (the acceptance
    # rate of their MTP, docs/inference.md), so they are slower, never faster
    decode = ["rtp-llm-deepseek-v3-decode", "deepseek-v3-production-decode"]
    assert (df.loc[decode, "error_pct"] < 0).all()
    # SGLang on 96 x H100 (LMSYS, May 2025): 22,282 tokens/s per node = 2,785 per GPU at 256 sequences per GPU,
    # modelled as it ran (DeepEP low-latency kernels, two-batch overlap, EPLB's real routing): +2.4 % (+1.5 % before
    # the Hopper attention law took in head dimension 64 and the two-batch overlap was refitted, 0.66 -> 0.67)
    row = df.loc["lmsys-sglang-deepseek-v3-decode"]
    assert (row["published"], row["batch"], row["engine"]) == (22282 / 8, 256 * 64, "sglang-large-ep")
    assert abs(row["error_pct"]) < 2.5


def test_cloudmatrix_infer_int8_decode_row(cat):
    # CloudMatrix-Infer serves DeepSeek-R1 in INT8 W8A8 on the 910C (arXiv:2506.12708): 1,943 tokens/s per NPU at
    # 96 sequences per NPU and TPOT 49.4 ms (96 / 0.0494 = 1,943), 4K prompts, 256 output tokens
    m, pre = [m for m in measurements() if m.system == "cloudmatrix-384"]
    assert (m.dtype, m.engine, m.published, m.batch) == ("int8", "cloudmatrix-infer", 1943.0, 96 * 128)
    assert (m.input_tokens, m.output_tokens, m.context_tokens) == (4096, 256, 4096)
    # its prefill: 6,688 tokens/s per NPU with perfect EPLB, batches of 16,384 tokens: 2.45 s per pass of 4 x 4K
    assert (pre.quantity, pre.ep, pre.batch, pre.published) == ("prefill_s", 16, 4, pytest.approx(2.4498, abs=1e-4))
    df = validation_table([m, pre], cat)
    assert df["within_tolerance"].all(), df[["published", "modelled", "error_pct"]].to_string()
    # the decode row runs the pairwise stand-in without MTP (pessimistic, like the H800 reports): 1,476 modelled,
    # -24.0 %; the prefill row, bound by the 910C's operators, is optimistic: the shortfall both phases share
    # (docs/inference.md). Its INT8 GEMMs at the paper's measured 0.774 of 1,504 TFLOP/s (0.70 assumed before) put
    # the pass at 1.62 s against the published 16,384 / 6,688 = 2.45 s: -33.9 % (-29.8 % at 1.72 s before)
    assert df["error_pct"].iloc[0] == pytest.approx(-24.0, abs=0.3)
    assert df["modelled"].iloc[1] == pytest.approx(1.619, abs=0.005)
    assert df["error_pct"].iloc[1] == pytest.approx(-33.9, abs=0.3)


def test_trtllm_rows_run_on_the_tensorrt_llm_engine():
    trt = [m for m in measurements() if m.family.startswith("TensorRT-LLM") or m.family.startswith("MLPerf")]
    assert len(trt) == 89 and {m.engine for m in trt} == {"tensorrt-llm"}


def test_mlperf_llama2_rows_and_fp4_optimism(cat):
    rows = [m for m in measurements() if m.family == "MLPerf v4.1 Llama 2 70B"]
    df = validation_table(rows, cat).set_index("id")
    assert len(df) == 6 and df["within_tolerance"].all(), df[["published", "modelled", "error_pct"]].to_string()
    # published per-GPU ratio from the v4.1 logs: 11,264.4 / (31,302.7 / 8) = 2.879 offline
    ratio = df.loc["mlperf-v4.1-llama2-70b-b200-fp4-over-h200-fp8-offline"]
    assert ratio["published"] == pytest.approx(11264.4 / (31302.7 / 8))
    # the ratio row is computed from the same two per-GPU predictions as the absolute rows
    b = df.loc["mlperf-v4.1-llama2-70b-dgx-b200-ib-ndr-fp4-offline", "modelled"]
    h = df.loc["mlperf-v4.1-llama2-70b-hgx-h200-ib-ndr-fp8-offline", "modelled"]
    assert ratio["modelled"] == pytest.approx(b / h)
    # FP4 GEMMs at vLLM's measured 0.449 of peak (b200.yaml), which TensorRT-LLM's own B200 NVFP4 rows bear out
    # (test_trtllm_b200_fp4_rows_within_tolerance): the ratio is low for another reason; reported, not hidden
    assert -25 < ratio["error_pct"] < 0


def test_mlperf_server_rows_run_at_the_concurrency_their_logs_give(cat):
    # Little's law on the v4.1 Server logs (mlperf_log_summary.txt): completed samples/s x mean latency / GPUs.
    # H200: 100.35 x 35.855 s / 8 = 449.8 -> 450 per GPU; B200: 39.25 x 35.976 s = 1,412.1 -> 1,412. The same
    # from the tokens: tokens/s per GPU x mean TPOT = 3,653.5 x 0.1233 = 450 and 10,755.6 x 0.1315 = 1,415.
    from hnplan.planning.inference import Replica, resolve
    from hnplan.planning.inference.measurements import MLPERF_SERVER_LOGS
    from hnplan.planning.inference.validation import concurrency_point

    rows = {m.id: m for m in measurements() if m.family == "MLPerf v4.1 Llama 2 70B"}
    h200 = rows["mlperf-v4.1-llama2-70b-hgx-h200-ib-ndr-fp8-server"]
    b200 = rows["mlperf-v4.1-llama2-70b-dgx-b200-ib-ndr-fp4-server"]
    assert (h200.quantity, h200.batch, b200.quantity, b200.batch) == (
        "tokens_per_s_per_gpu_at_concurrency",
        450,
        "tokens_per_s_per_gpu_at_concurrency",
        1412,
    )
    assert rows["mlperf-v4.1-llama2-70b-b200-fp4-over-h200-fp8-server"].batch == 1412
    assert rows["mlperf-v4.1-llama2-70b-b200-fp4-over-h200-fp8-server"].ref_batch == 450
    assert rows["mlperf-v4.1-llama2-70b-hgx-h200-ib-ndr-fp8-offline"].batch is None  # Offline: max throughput
    for m, tpot in ((h200, 0.1233), (b200, 0.1315)):
        assert m.published * tpot == pytest.approx(m.batch, rel=0.01)
    # the scenario's bounds (p99 TTFT <= 2 s, p99 TPOT <= 200 ms) did not bind: the arrival rate set the batch
    assert all(p99_tpot < 0.2 and p99_ttft < 2.0 for _, _, p99_tpot, p99_ttft in MLPERF_SERVER_LOGS.values())
    # the modelled iteration at the run's own concurrency is slower than the log's mean TPOT (the rows are
    # pessimistic; docs/inference.md sizes the shares): 140 ms against 123 on H200, 167 against 132 on B200
    for m, tpot in ((h200, 0.123263268), (b200, 0.131536562)):
        s = resolve(m.model, m.system, Replica(tp=1, dtype=m.dtype, engine=m.engine), cat)
        p = concurrency_point(s, m.batch, m.input_tokens, m.output_tokens)
        assert p.tokens_per_s_per_gpu == pytest.approx(m.batch / p.tpot_s)
        assert 1.10 < p.tpot_s / tpot < 1.30


def test_mlperf_prompt_is_the_longest_the_submitted_batch_fits(cat):
    # NVIDIA's v4.1 H200 Offline config keeps up to 806 sequences in flight on each H200 (gpu_batch_size). In
    # steady state a sequence holds I + O/2 tokens of FP8 KV (O = 291 from the log): 806 x (I + 145.5) x
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte <= the 70.6 GB KV budget gives I <= 389.
    from hnplan.planning.inference import Replica, kv_budget_bytes, max_batch, resolve
    from hnplan.planning.inference.measurements import MLPERF_H200_OFFLINE_BATCH, MLPERF_LLAMA2_INPUT_TOKENS

    s = resolve("llama2-70b", "hgx-h200-ib-ndr", Replica(tp=1, dtype="fp8", engine="tensorrt-llm"), cat)
    per_token = 80 * 8 * 128 * 2 * 1
    assert kv_budget_bytes(s) == pytest.approx(70.6e9, rel=2e-3)
    assert int(kv_budget_bytes(s) / (MLPERF_H200_OFFLINE_BATCH * per_token) - 291 / 2) == MLPERF_LLAMA2_INPUT_TOKENS
    i = MLPERF_LLAMA2_INPUT_TOKENS
    assert max_batch(s, i + 291 / 2) >= MLPERF_H200_OFFLINE_BATCH > max_batch(s, i + 1 + 291 / 2)


def test_queue_run_counts_the_last_partial_batch(cat):
    # trtllm-bench's throughput is all output tokens over (last end - first start): N equal requests at batch B
    # run N // B generations at B and one of N mod B. Llama 3.1 405B FP8 on 8 x H100 at 128/4096 holds B = 213
    # sequences; the dataset has 1,500 requests: 7 generations of 213 and 9 left over, so
    # tokens/s = 1500 / (7 t_iter(213) + t_iter(9)); a multiple of B gives the steady state back.
    from hnplan.planning.inference import steady_state
    from hnplan.planning.inference.steady import queue_run_tokens_per_s
    from hnplan.planning.inference.validation import throughput_point

    m = next(r for r in measurements() if r.id == "trtllm-llama3.1-405b-tp8-128-4096")
    assert m.num_requests == 1500
    s, p = throughput_point(m, cat)
    assert p.batch == 213
    tail = steady_state(s, 9, 128, 4096).iteration_s
    assert queue_run_tokens_per_s(s, p, 1500) == pytest.approx(1500 / (7 * p.iteration_s + tail), rel=1e-12)
    assert queue_run_tokens_per_s(s, p, 7 * 213) == pytest.approx(p.tokens_per_s, rel=1e-12)
    # the 9-sequence tail steps cost half a full step (weights stream either way): the run is 5-7 % slower
    assert 0.4 < tail / p.iteration_s < 0.6
    assert 0.93 < queue_run_tokens_per_s(s, p, 1500) / p.tokens_per_s < 0.95
