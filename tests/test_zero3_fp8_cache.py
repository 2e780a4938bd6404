"""What a ZeRO-3 rank keeps of fp8 weights between micro-batches (hnplan.memory.state_accounting).

Megatron-FSDP (Megatron-LM megatron_fsdp: param_and_grad_buffer.py, megatron_fsdp.py, src/README.md) shards
the row-wise data of fp8 parameters (MXFP8: the column-wise too) and drops the transpose made after each
all-gather when the unit's forward ends, unless ``keep_fp8_transpose_cache`` (1 byte a parameter, whole);
with bf16 parameters, Transformer Engine's cached fp8 cast and transpose (``is_first_microbatch``) live in
each module, whole, for every layer the rank computes.
"""

import numpy as np
import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.memory.states import model_state_bytes_per_gpu, model_state_table, stack_accounting
from hnplan.planning.training.components import memory_recipe, stack_choices

# Llama 3.1 8B, a middle stage of pp 4: 8 layers of 218,112,000 parameters, 2 x 4,096 of them norms
LAYER, NORMS = 218_112_000, 2 * 4_096
GEMM, UNQ = 8 * (LAYER - NORMS), 8 * NORMS


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _weights(cat, a, zero, dp=8):
    m = cat.model("llama3.1-8b")
    w, _, _ = model_state_table(m, 1, 4, dp, 1, zero, a, stage="middle")
    one = model_state_bytes_per_gpu(m, 1, 4, dp, 1, zero, a, stage="middle")[0]
    assert float(w[()]) == pytest.approx(one)  # the table and the scalar path agree
    return one


def test_bf16_weights_with_the_cached_cast(cat):
    a = stack_accounting("fp8", 4.0)  # bf16 weights + Transformer Engine's cached fp8 cast and transpose
    # ZeRO 1: everything whole; the norms run no fp8 GEMM, so no cached cast: bf16 alone (Megatron-LM @
    # 6a6cd478839d, Transformer Engine caches GEMM weights only)
    assert _weights(cat, a, 1) == pytest.approx(4.0 * GEMM + 2.0 * UNQ)
    # ZeRO 3 over 8: bf16 shards (2 / 8) plus the cache (2), whole, of the GEMM weights; norms 2 / 8
    assert _weights(cat, a, 3) == pytest.approx(GEMM * (2 / 8 + 2) + UNQ * 2 / 8)
    # without the cache: bf16 shards only
    assert _weights(cat, stack_accounting("fp8", 4.0, fp8_weight_cache=False), 3) == pytest.approx(2 / 8 * (GEMM + UNQ))


def test_fp8_parameters(cat):
    a = stack_accounting("fp8", 2.0, fp8_params=True, fp8_recipe="current")
    # ZeRO 1: fp8 weight and transpose (2) a GEMM weight, norms bf16 (2)
    assert _weights(cat, a, 1) == pytest.approx(2.0 * (GEMM + UNQ))
    # ZeRO 3: the row-wise fp8 shard (1 / 8); the transpose is transient (the ZeRO-3 working set)
    assert _weights(cat, a, 3) == pytest.approx(GEMM / 8 + UNQ * 2 / 8)
    keep = stack_accounting("fp8", 2.0, fp8_params=True, fp8_recipe="current", keep_fp8_transpose_cache=True)
    assert _weights(cat, keep, 3) == pytest.approx(GEMM * (1 / 8 + 1) + UNQ * 2 / 8)
    # MXFP8: both copies sharded, 2 x (1 + 1/32) / 8; nothing whole even with the keep option
    mx = stack_accounting("fp8", 2.0, fp8_params=True, fp8_recipe="mxfp8", keep_fp8_transpose_cache=True)
    assert _weights(cat, mx, 3) == pytest.approx(GEMM * 2.0625 / 8 + UNQ * 2 / 8)


def test_zero3_weights_shrink_with_dp_to_the_whole_cache(cat):
    a = stack_accounting("fp8", 4.0)
    w = [_weights(cat, a, 3, dp) for dp in (1, 2, 8, 64, 512)]
    assert all(x > y for x, y in zip(w, w[1:]))
    assert w[-1] > 2.0 * GEMM  # never below the cache every rank keeps whole
    # one rank: as ZeRO 1 (the cache on the GEMM weights alone in both)
    assert w[0] == pytest.approx(_weights(cat, a, 1, 1))


def test_megatron_bridge_fsdp_rows_drop_the_transpose(cat):
    ch = stack_choices(cat.stack("megatron-bridge-2511"))
    assert ch.fp8_params and not ch.keep_fp8_transpose_cache
    a = memory_recipe("fp8", ch)
    assert a.zero3_whole_bytes == 0.0 and a.zero3_shard_bytes == 1.0
    assert np.isclose(a.zero3_weight_bytes(64), 1 / 64)


def test_mxfp8_stack_runs_on_quantised_parameters(cat):
    # Megatron-Bridge 25.11's MXFP8 precision (scripts/performance/utils/precision.py @ 00b7660be025 "fp8_mx":
    # bf16_with_mxfp8_mixed) sets fp8_param_gather with reuse_grad_buf_for_mxfp8_param_ag; in its Megatron-LM
    # (92c8482e6dcd) the layers are built under fp8_model_init and param_and_grad_buffer.py maps no parameter buffer
    # for them: under the distributed optimizer (ZeRO-1) the GEMM weights are MXFP8 tensors alone, both layouts,
    # 2 x (1 + 1/32) = 2.0625 bytes (the bf16 gather lands in the gradient buffer); Megatron-FSDP (ZeRO-3) shards them
    a = memory_recipe("fp8", stack_choices(cat.stack("megatron-bridge-2511-mxfp8")))
    assert a.weight_bytes == 2.0625 and a.zero3_whole_bytes == 0.0
    assert _weights(cat, a, 1) == pytest.approx(2.0625 * GEMM + 2.0 * UNQ)
    assert _weights(cat, a, 3) == pytest.approx(GEMM * 2.0625 / 8 + UNQ * 2 / 8)
    assert a.zero3_gathered_bytes == 2.0625  # a unit gathered as its two MXFP8 copies


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_embedding_head_and_norms_keep_no_cached_cast(cat, zero):
    """Megatron-LM @ 6a6cd478839d: the word embedding (VocabParallelEmbedding) and the output head
    (tensor_parallel.ColumnParallelLinear) are no Transformer Engine modules and run no fp8 GEMM, and a norm weight
    enters its fused norm in bf16: only the Transformer layers' GEMM weights carry the cached fp8 cast and transpose.
    Llama 3.1 8B on one stage (TP 1, PP 1): 32 x 218,103,808 GEMM weights at 2 + 2 bytes, the 2 x 525,336,576
    embedding and head weights and the 266,240 norm weights at 2, whatever ZeRO shards below stage 3."""
    m = cat.model("llama3.1-8b")
    gemm, other = 32 * 218_103_808, 2 * 128_256 * 4_096 + 65 * 4_096
    w = model_state_bytes_per_gpu(m, 1, 1, 8, 1, zero, stack_accounting("fp8", 4.0))[0]
    assert w == pytest.approx(4.0 * gemm + 2.0 * other)  # 27.9 GB + 2.1 GB, not 4 x 8.03e9 = 32.1 GB
    assert float(model_state_table(m, 1, 1, 8, 1, zero, stack_accounting("fp8", 4.0))[0][()]) == pytest.approx(w)


@pytest.mark.parametrize("stack", ["megatron-bridge-2604-mxfp8", "megatron-bridge-2608-mxfp8"])
def test_2026_mxfp8_stacks_shard_mxfp8_parameters_under_zero3(cat, stack):
    # Megatron-Bridge mixed_precision.py bf16_with_mxfp8_mixed() @ f171d7d30 (26.04) and @ 067f987df03b (26.08):
    # fp8_param_gather True, so Megatron-FSDP shards MXFP8 parameters, both layouts (2 x (1 + 1/32) / N), and
    # scripts/performance/utils/overrides.py keeps no fp8 transpose cache for FSDP runs
    ch = stack_choices(cat.stack(stack))
    a = memory_recipe("fp8", ch)
    assert not ch.keep_fp8_transpose_cache and a.zero3_whole_bytes == 0.0
    assert a.zero3_weight_bytes(64) == pytest.approx(2.0625 / 64) and a.zero3_gathered_bytes == 2.0625
    assert _weights(cat, a, 3) == pytest.approx(GEMM * 2.0625 / 8 + UNQ * 2 / 8)
