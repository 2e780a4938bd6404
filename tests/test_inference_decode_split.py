"""The decode step split by term (hnplan.planning.inference.split) against the step it splits and hand sums."""

import pytest

from hnplan.planning.inference import Replica, decode_step, resolve
from hnplan.planning.inference.speculative import routing_peak
from hnplan.planning.inference.split import decode_split

CASES = [
    ("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8", overlap=True), 89, 4989),
    (
        "deepseek-v3",
        "hgx-h100-ib-ndr",
        Replica(tp=1, ep=64, dtype="fp8", overlap=True, engine="sglang-large-ep"),
        256,
        2000,
    ),
    ("llama2-70b", "hgx-h200-ib-ndr", Replica(tp=1, dtype="fp8", engine="tensorrt-llm"), 439, 657),
    ("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), 217, 2000),
]


@pytest.mark.parametrize("model,system,replica,batch,ctx", CASES)
def test_split_sums_to_the_decode_step(cat, model, system, replica, batch, ctx):
    s = resolve(model, system, replica, cat)
    d, sp = decode_step(s, batch, ctx), decode_split(s, batch, ctx)
    assert sp["compute_s"] == pytest.approx(d["compute_s"], rel=1e-9)
    assert sp["time_s"] == pytest.approx(d["time_s"], rel=1e-9)
    assert sp["ep_alltoall_s"] == pytest.approx(d["ep_alltoall_s"], rel=1e-9)
    groups = sum(sp[f"{g}_s"] for g in ("attention", "expert_gemm", "other_gemm", "elementwise"))
    # no engine (de)quantisation or draft passes in these cases: the groups are the operator time
    assert groups == pytest.approx(sp["compute_s"], rel=1e-9)
    assert sp["step_s"] == pytest.approx(sp["time_s"] + sp["host_s"])


def test_split_bytes_by_hand(cat):
    # Llama 2 70B in FP8 on one H200: 68.98e9 parameters less the bf16 embedding and LM head (2 x 32,000 x
    # 8,192) at 1 byte, those two at 2 bytes; KV: 439 sequences x 657 tokens x 80 layers x 8 KV heads x 128 x 2
    s = resolve("llama2-70b", "hgx-h200-ib-ndr", Replica(tp=1, dtype="fp8", engine="tensorrt-llm"), cat)
    sp = decode_split(s, 439, 657, 803)
    vocab = 2 * 32000 * 8192
    from hnplan.compute import param_counts

    total = param_counts(s.model).total
    assert sp["weights_bytes"] == pytest.approx(total - vocab + 2 * vocab)
    assert sp["kv_read_bytes"] == pytest.approx(439 * 657 * 80 * 8 * 128 * 2)
    assert sp["micro_batches"] == 1 and sp["tokens_per_expert"] == 0.0
    assert sp["max_batch_per_group"] == 536  # the KV budget at I + O = 803 tokens (the MLPerf row's point)


def test_split_tokens_per_expert_deepseek(cat):
    # DeepSeek-V3 at EP128, 89 sequences per GPU in two micro-batches (45 and 44): the busiest rank's experts
    # see routing_peak x 45 x 128 ranks x 8 active / 256 experts tokens each; two micro-batches read the weights
    s = resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8", overlap=True), cat)
    sp = decode_split(s, 89, 4989)
    assert sp["micro_batches"] == 2 and sp["sequences_per_micro_batch"] == 45
    assert sp["tokens_per_expert"] == pytest.approx(routing_peak(s, 45) * 45 * 128 * 8 / 256)
    one = decode_split(resolve("deepseek-v3", "hgx-h800-ib", Replica(tp=1, ep=128, dtype="fp8"), cat), 89, 4989)
    assert sp["weights_bytes"] == pytest.approx(2 * one["weights_bytes"])


def test_split_rejects_empty_batch(cat):
    s = resolve("llama2-70b", "hgx-h200-ib-ndr", Replica(tp=1, dtype="fp8"), cat)
    with pytest.raises(ValueError, match="batch and context"):
        decode_split(s, 0, 100)


def test_split_rows_tool_covers_the_large_batch_rows():
    from tests.toolmod import load_tool

    df = load_tool("decode_split_rows").split_rows().set_index("id")
    assert len(df) == 8  # RTP-LLM, DeepSeek day-6, SGLang, CloudMatrix decode; four MLPerf rows
    ds = df.loc["deepseek-v3-production-decode"]
    # 14,800 / 8 / 21 x 128 = 11,276 sequences over 128 attention groups: 89 per GPU
    assert ds["batch_per_group"] == 89 and ds["micro_batches"] == 2
    assert ds["step_ms"] == pytest.approx(ds["time_ms"] + ds["host_ms"])
