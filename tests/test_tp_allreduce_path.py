"""Which implementation a serving engine runs a TP all-reduce on (``tp_allreduce_custom_max_bytes``).

TensorRT-LLM's AUTO strategy (cpp/tensorrt_llm/thop/allreduceOp.cpp, ifFallbackToNCCL) sends a message above
its custom all-reduce workspace to NCCL: 16,000,000 bytes at TP <= 2 and 8,000,000 above
(cpp/tensorrt_llm/common/customAllReduceUtils.h getMaxRequiredWorkspaceSize). A decode step's message is
``tokens x hidden x 2`` bytes (bf16 activations).
"""

from __future__ import annotations

import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.comm import best_time
from hnplan.comm.messages import tp_message_bytes
from hnplan.planning.inference import Replica, decode_step, resolve, tp_allreduce_path


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_trtllm_record_is_its_workspace(cat):
    assert cat.get("engines", "tensorrt-llm").tp_allreduce_custom_max_bytes == {2: 16e6, 4: 8e6, 8: 8e6}
    assert cat.get("engines", "vllm").tp_allreduce_custom_max_bytes == {}


def test_405b_tp8_message_against_the_8_mb_workspace(cat):
    s = resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), cat)
    # hidden 16,384: 192 tokens x 16,384 x 2 B = 6,291,456 B <= 8,000,000; 256 tokens = 8,388,608 B > 8,000,000
    assert tp_message_bytes(s.model, 192, 1) == 6_291_456
    assert tp_allreduce_path(s, 6_291_456) == "custom"
    assert tp_allreduce_path(s, 8_000_000) == "custom"  # at the limit: still the workspace
    assert tp_allreduce_path(s, 8_388_608) == "nccl"
    # 244 tokens (7,995,392 B) is the largest decode step of 405B the custom kernels take
    assert tp_allreduce_path(s, tp_message_bytes(s.model, 244, 1)) == "custom"
    assert tp_allreduce_path(s, tp_message_bytes(s.model, 245, 1)) == "nccl"


def test_70b_tp2_has_the_16_mb_workspace(cat):
    s = resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=2, dtype="fp8", engine="tensorrt-llm"), cat)
    # hidden 8,192: 976 tokens x 8,192 x 2 B = 15,990,784 B <= 16,000,000; 977 tokens = 16,007,168 B
    assert tp_allreduce_path(s, tp_message_bytes(s.model, 976, 1)) == "custom"
    assert tp_allreduce_path(s, tp_message_bytes(s.model, 977, 1)) == "nccl"


def test_no_record_no_tp(cat):
    tp8 = Replica(tp=8, dtype="fp8", engine="vllm")
    assert tp_allreduce_path(resolve("llama3.1-405b", "hgx-h100-ib-ndr", tp8, cat), 1e6) == "nccl"
    tp1 = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(tp=1, dtype="fp8", engine="tensorrt-llm"), cat)
    assert tp_allreduce_path(tp1, 1e6) == "none"


def test_both_paths_are_timed_as_nccl(cat):
    """The custom path is timed with NCCL's model (an upper bound: the engine's table picks it only where it
    measured faster): a 192-sequence 405B decode step charges 2 x 126 NCCL all-reduces of 6,291,456 B."""
    s = resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), cat)
    step = decode_step(s, 192, 2048)
    one = best_time("allreduce", 6_291_456, s.placements["tp"])[0]
    assert step["tp_allreduce_s"] == pytest.approx(2 * 126 * one, rel=1e-9)
