"""Training memory as Megatron-Core keeps it, by hand: the precision-aware optimizer's states, the MoE and
MLA layers' saved tensors, the interleaved schedule's in-flight micro-batches, and the DeepSeek-V3 run on
256 GB200 that Megatron-Bridge 25.11 published (TP 1, PP 4, VP 4, EP 64, recomputing the MLA up-projections)."""

import pytest
from pydantic import ValidationError

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.catalog.runs import training_runs
from hnplan.errors import InputError
from hnplan.memory import microbatches_in_flight
from hnplan.memory.activations import activation_bytes_per_layer, routing_weight_bytes
from hnplan.memory.states import stack_accounting
from hnplan.planning.training import StackChoices
from hnplan.planning.training.evaluate import resolve_choices
from hnplan.planning.validation import predict_run


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _bytes(a):
    return a.weight_bytes, a.grad_bytes, a.optimizer_bytes


def test_precision_aware_optimizer_bytes_per_parameter():
    # bf16 weights, bf16 gradient buffer read in place (decoupled_grad), fp32 master weights as 16-bit
    # remainders (store_param_remainders), bf16 moments: 2 + 2 + (2 + 2 + 2); fp32 moments: 2 + 2 + (2 + 8)
    assert _bytes(stack_accounting("bf16", 2.0, precision_aware=True, moment_bytes=2)) == (2, 2, 6)
    assert _bytes(stack_accounting("bf16", 2.0, precision_aware=True)) == (2, 2, 10)
    # without it: fp32 master weights, an fp32 copy of the bf16 gradient shard, fp32 moments (4 + 4 + 8)
    assert _bytes(stack_accounting("bf16", 2.0)) == (2, 2, 16)
    # MXFP8 (not delayed scaling): Megatron-Core keeps the fp32 master weights and gradient copy itself;
    # only the moments shrink (4 + 4 + 2 + 2); MXFP8 weights: row- and column-wise copies, 2 x (1 + 1/32)
    mx = stack_accounting("fp8", 2.0, fp8_params=True, precision_aware=True, moment_bytes=2, fp8_recipe="mxfp8")
    assert _bytes(mx) == (2.0625, 2, 12)
    # delayed scaling: the gradient is read in place, but fp8 weights leave no bf16 bits to complete: 4 + 8
    dl = stack_accounting("fp8", 2.0, fp8_params=True, precision_aware=True, fp8_recipe="delayed")
    assert _bytes(dl) == (2, 2, 12)


def test_bf16_moments_need_the_precision_aware_optimizer():
    with pytest.raises(ValidationError, match="precision_aware_optimizer"):
        StackChoices(adam_moment_bytes=2)
    with pytest.raises(InputError, match="adam_moment_bytes"):
        resolve_choices(overrides=dict(adam_moment_bytes=2))
    ch, _ = resolve_choices(overrides=dict(adam_moment_bytes=2, precision_aware_optimizer=True))
    assert (ch.adam_moment_bytes, ch.precision_aware_optimizer) == (2, True)


def test_deepseek_v3_layers_as_megatron_core_keeps_them(cat):
    """Bytes a token of DeepSeek-V3 (h 7168, 128 heads, MLA ranks 1536 / 512, RoPE 64, v 128; no dropout)
    keeps in one layer at TP 1 with the MLA up-projections recomputed (``mla_up_proj``)."""
    m = cat.model("deepseek-v3")
    h = 7168
    # attention: norm input and the down-projections' input (2 x 2h); the checkpoint's inputs, the
    # q and kv latents and the RoPE key (2 x (1536 + 512 + 64)); the attention output 2 x 128 x 128
    attention = 4 * h + 2 * (1536 + 512 + 64) + 2 * 128 * 128
    # dense MLP: norm input and fc1 input (4h), SwiGLU input (gate and up, 2 x 2f) and fc2 input (2f)
    dense = attention + 4 * h + 6 * 18432
    # MoE: norm input and router / shared-expert input (4h), fp32 aux-loss scores (4 x 256), per routed copy
    # (top 8) the expert input 2h, SwiGLU input 2 x 2 x 2048, fc2 input 2 x 2048 and its routing weight in the
    # router logits' dtype (moe_utils.py topk_softmax_with_capacity: .type_as(logits)), 2 bytes with the default
    # bf16 router, 4 with --moe-router-dtype fp32 or the flex (DeepEP) dispatcher, which upcasts them;
    # the shared expert's 6 x 2048; no expert output is kept (the weights scale the activation)
    moe = attention + 4 * h + 4 * 256 + 8 * (2 * h + 6 * 2048 + 2) + 6 * 2048
    assert (dense, moe) == (204928, 320656)
    kw = dict(recompute="selective", dropout=m.dropout, recompute_modules=("mla_up_proj",))
    assert activation_bytes_per_layer(m, 4096, 1, moe_layer=False, **kw) == 4096 * dense
    assert activation_bytes_per_layer(m, 4096, 1, moe_layer=True, **kw) == 4096 * moe
    for fp32 in (routing_weight_bytes("fp32"), routing_weight_bytes("model", "flex")):
        got = activation_bytes_per_layer(m, 4096, 1, moe_layer=True, routing_weight=fp32, **kw)
        assert got == 4096 * (moe + 8 * 2)  # 320,672
    assert not m.dropout  # DeepSeek-V3 trains without dropout (HF config, Megatron-Bridge provider)


def test_interleaved_schedule_in_flight_by_rank():
    # Megatron-Core's interleaved schedule: rank r runs 2 (p - r - 1) + (v - 1) p chunk forwards before its
    # first backward and holds one more: p = 4, v = 4 -> rank 0 19 chunks, rank 3 13 chunks, of 4 a stage
    assert microbatches_in_flight(4, 64, 4, "first") == 19 / 4
    assert microbatches_in_flight(4, 64, 4, "last") == 13 / 4
    assert microbatches_in_flight(4, 64, 1, "last") == 1  # plain 1F1B: the last stage holds one


def test_deepseek_v3_bf16_on_256_gb200_fits_by_hand():
    """The first of 4 stages holds the embedding and 16 layers (chunks 0, 4, 8, 12 of the recipe's layout:
    the 3 dense layers and 13 MoE layers); EP 64 leaves 4 routed experts a layer, whose data-parallel group
    is 256 / (64 x 4) = 1 (their optimizer states unsharded); the rest is sharded over DP 64."""
    run = next(r for r in training_runs() if r.id == "mbridge2511-gb200-deepseek-v3-256-bf16")
    b = predict_run(run)
    h, attn, norms = 7168, 187107328, 2 * 7168
    shared = 3 * h * 2048 + h * 256  # shared expert and router: whole on every EP rank
    dense = 129280 * h + 3 * (attn + norms + 3 * h * 18432) + 13 * (attn + norms + shared)
    expert = 13 * 256 * 3 * h * 2048 / 64
    assert b.params_bytes == pytest.approx(2 * (dense + expert))
    assert b.grads_bytes == pytest.approx(2 * (dense + expert))  # bf16 gradient buffer
    assert b.optimizer_bytes == pytest.approx(6 * (dense / 64 + expert))  # precision-aware, bf16 moments
    # 19 chunk micro-batches of 4 chunks on the first stage (4.75 of its 16 layers), 4,096 tokens each
    assert b.activations_bytes == pytest.approx(4.75 * 4096 * (3 * 204928 + 13 * 320672))
    tensors = 2 * 2 * (dense + expert) + 6 * (dense / 64 + expert) + b.activations_bytes
    # CUDA context 0.4 GiB, NCCL 0.64 GiB for each of the DP, PP and EP groups and 3 GiB for all-to-all, 5 %
    fixed = units.GiB_to_bytes(0.4 + 3 * 0.64 + 3.0)
    assert b.overhead_bytes == pytest.approx(fixed + 0.05 * tensors, rel=1e-5)  # slope as fixed + 5 % - fixed
    assert b.memory_per_gpu_bytes / 2**30 == pytest.approx(141.6, abs=0.1)
    assert b.fits  # of 185.0 GiB
