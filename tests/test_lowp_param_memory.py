"""Memory of low-precision parameters (``fp8_params``: Megatron-Core ``fp8_param_gather``; ``fp4_params``:
``fp4_param_gather``, NVFP4 primary weights): the model keeps only the quantised GEMM weights (no bf16
copy), row-wise and column-wise, the embeddings, head and norms and the bf16 end layers in bf16.

Sources: Megatron-Core ``megatron/core/fp4_utils.py`` (``quantize_nvfp4_param_shard``: fp32 master shards
cast to NVFP4 model params, row-wise and column-wise), ``transformer/transformer_block.py`` (each layer
built inside ``get_fp8_context`` / ``get_fp4_context(..., is_init=True)``, which leave the
``first_last_layers_bf16`` layers in bf16); Transformer Engine ``pytorch/tensor/utils.py``
(``post_all_gather_processing``: NVFP4 column-wise copies rebuilt after the gather) and
``tensor/float8_tensor.py`` (the fp8 transpose only where non-TN fp8 GEMMs are unsupported).
"""

import pytest

from hnplan.catalog import load_catalog
from hnplan.compute.fp8_recipes import quantised_weight_bytes
from hnplan.memory.states import model_state_bytes_per_gpu, model_state_table, stack_accounting, stage_params
from hnplan.planning.training import ParallelPlan, StackChoices, evaluate_plans, make_job, plans_frame

# Llama 3.1 8B (hidden 4096, 32 layers, GQA 8 KV heads of 128, FFN 14336, vocabulary 128256, untied)
EMB = 128256 * 4096  # 525,336,576, as many again in the output head
LAYER_GEMMS = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336  # 41,943,040 + 176,160,768
NORMS = 32 * 2 * 4096 + 4096  # two RMSNorms a layer and the final one
TOTAL = 2 * EMB + 32 * LAYER_GEMMS + NORMS  # 8,030,261,248
# bf16 weights with the GEMM weights' two cached NVFP4 casts (2 + 1.125), the embeddings, head and norms bf16 (2)
CACHED = 3.125 * (TOTAL - 2 * EMB - NORMS) + 2.0 * (2 * EMB + NORMS)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_quantised_weight_bytes_by_recipe():
    # per-tensor fp8: 1 byte, plus its fp8 transpose where fp8 GEMMs take only TN (Hopper)
    assert quantised_weight_bytes("delayed") == 2.0 and quantised_weight_bytes("current", tn_only=False) == 1.0
    # block-scaled: row-wise and column-wise copies with their scales
    assert quantised_weight_bytes("mxfp8") == 2 * (1 + 1 / 32)
    assert quantised_weight_bytes("blockwise") == 2 * (1 + 4 / 128)
    # NVFP4: 2 x (E2M1 half byte + one E4M3 scale per 16)
    assert quantised_weight_bytes("nvfp4") == 1.125


def test_fp4_params_replace_the_bf16_copy():
    cached = stack_accounting("fp4", 4.0)  # bf16 weights + two cached NVFP4 casts
    a = stack_accounting("fp4", 4.0, fp4_params=True)
    assert (cached.weight_bytes, a.weight_bytes, a.unquantised_weight_bytes) == (3.125, 1.125, 2.0)
    # gradients and optimizer states unchanged: fp32 main grads, fp32 master weights and moments
    assert (a.grad_bytes, a.optimizer_bytes) == (cached.grad_bytes, cached.optimizer_bytes) == (4.0, 12.0)
    # fp4_params means nothing in fp8 or bf16 training, fp8_params nothing in fp4
    assert stack_accounting("fp8", 4.0, fp4_params=True) == stack_accounting("fp8", 4.0)
    assert stack_accounting("fp4", 4.0, fp8_params=True) == cached
    # MXFP8 parameters: both copies and their E8M0 scales
    assert stack_accounting("fp8", 4.0, fp8_params=True, fp8_recipe="mxfp8").weight_bytes == 2.0625


def test_llama3_8b_nvfp4_weights_by_hand(cat):
    m = cat.model("llama3.1-8b")
    a = stack_accounting("fp4", 4.0, fp4_params=True)
    assert stage_params(m, 1, 1).unquantised == 2 * EMB + NORMS
    # 1.125 x 6,979,321,856 GEMM weights + 2 x 1,050,939,392 bf16 ones = 9,953,615,872 bytes
    want = 1.125 * (TOTAL - 2 * EMB - NORMS) + 2.0 * (2 * EMB + NORMS)
    assert want == 9_953_615_872
    assert model_state_bytes_per_gpu(m, 1, 1, 8, 1, 1, a)[0] == want
    assert model_state_table(m, 1, 1, 8, 1, 1, a)[0] == want
    # against 3.125 x 6,979,321,856 + 2 x 1,050,939,392 = 23.9 GB with bf16 weights and the GEMM weights' cached
    # casts (the embeddings, head and norms run no NVFP4 GEMM: bf16 alone)
    assert model_state_bytes_per_gpu(m, 1, 1, 8, 1, 1, stack_accounting("fp4", 4.0))[0] == CACHED == 23_912_259_584
    # one bf16 layer at each end: their 2 x 218,103,808 GEMM weights at 2 bytes, not 1.125
    a1 = stack_accounting("fp4", 4.0, fp4_params=True, bf16_end_layers=1)
    assert model_state_bytes_per_gpu(m, 1, 1, 8, 1, 1, a1)[0] == want + 0.875 * 2 * LAYER_GEMMS == 10_335_297_536
    # ZeRO-3 shards the weights over 8 ranks: of the NVFP4 ones the row-wise copy (1/2 + 1/16), the column-wise one
    # being the transpose of the 16 x 16-block quantised weight, made after each all-gather (Megatron-FSDP shards a
    # second layout for MXFP8 only); the bf16 ones whole-width
    z3 = 0.5625 * (TOTAL - 2 * EMB - NORMS) / 8 + 2.0 * (2 * EMB + NORMS) / 8
    assert model_state_bytes_per_gpu(m, 1, 1, 8, 1, 3, a)[0] == pytest.approx(z3)


def test_bf16_end_layers_keep_their_experts_in_bf16(cat):
    # Mixtral 8x7B, last of 2 stages (its last layer in bf16), TP 2, EP 8: the layer's attention and router
    # (41,943,040 + 8 x 4096) over TP and its 8 experts (8 x 3 x 4096 x 14336 = 1,409,286,144) over ETP x EP
    m = cat.model("mixtral-8x7b")
    a0 = stack_accounting("fp4", 4.0, fp4_params=True)
    a1 = stack_accounting("fp4", 4.0, fp4_params=True, bf16_end_layers=1)
    for etp, expert_shards in ((None, 16), (1, 8)):
        w0 = model_state_bytes_per_gpu(m, 2, 2, 8, 8, 1, a0, stage="last", etp=etp)[0]
        w1 = model_state_bytes_per_gpu(m, 2, 2, 8, 8, 1, a1, stage="last", etp=etp)[0]
        assert w1 - w0 == 0.875 * ((41_943_040 + 32_768) / 2 + 1_409_286_144 / expert_shards)
        assert model_state_table(m, 2, 2, 8, 8, 1, a1, stage="last", etp=etp)[0] == w1


def test_fp4_params_job_memory(cat):
    # the planner's memory of an NVFP4 job on 8 B200 (TP1 PP1 DP8, ZeRO-1): only the weights move
    plan = plans_frame([ParallelPlan(tp=1, pp=1, dp=8, microbatch_size=1, zero_stage=1, recompute="none")])
    bf16_w = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, "fp4", cat)
    fp4_w = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, "fp4", cat, choices=StackChoices(fp4_params=True))
    r_bf16, r_fp4 = (evaluate_plans(j, plan).iloc[0] for j in (bf16_w, fp4_w))
    assert r_bf16["params_bytes"] == CACHED
    assert r_fp4["params_bytes"] == 9_953_615_872
    for part in ("grads_bytes", "optimizer_bytes", "activations_bytes"):
        assert r_bf16[part] == r_fp4[part]
    # the runtime overhead is partly a fraction of the tensors: the total drops a little more than the weights
    saved = r_bf16["memory_per_gpu_bytes"] - r_fp4["memory_per_gpu_bytes"]
    assert CACHED - 9_953_615_872 < saved < 1.1 * (CACHED - 9_953_615_872)
