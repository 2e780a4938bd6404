"""Selective recomputation by module, the MTP module's activations and DualPipe's memory, by hand."""

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute import operator_table
from hnplan.compute.parts import training_part_times
from hnplan.errors import InputError
from hnplan.memory import activation_bytes_per_layer, model_state_bytes_per_gpu, stage_activation_bytes
from hnplan.memory.recompute import RECOMPUTE_MODULES, freed_bytes
from hnplan.memory.training import training_memory

S = 8192  # tokens of a Llama 3 sequence


def _layer(m, modules, **kw):
    return activation_bytes_per_layer(m, S, 1, recompute="selective", dropout=False, recompute_modules=modules, **kw)


def test_schema_and_memory_model_name_the_same_modules():
    literal = StackChoices.model_fields["recompute_modules"].annotation.__args__[0].__args__
    assert tuple(literal) == RECOMPUTE_MODULES
    assert StackChoices().recompute_modules == ("core_attn",)


def test_layernorm_and_mlp_free_the_norm_outputs_and_the_mlp_intermediates(cat):
    """Llama 3.1 8B (h 4096, SwiGLU f 14336), one 8192-token sequence, TP 1: the two norm outputs are
    2 x 2h bytes a token, the MLP keeps gate, up and product, 3 x 2f; in fp8 the GEMM inputs among them
    (both norm outputs, the product) were 1-byte casts, so they free half: 2h + (6f - f)."""
    m = cat.model("llama3.1-8b")
    h, f = 4096, 14336
    base = _layer(m, ("core_attn",))
    assert base - _layer(m, ("core_attn", "layernorm", "mlp")) == S * (4 * h + 6 * f)
    fp8 = dict(fp8_gemm_inputs=True)
    assert _layer(m, ("core_attn",), **fp8) - _layer(m, ("core_attn", "layernorm", "mlp"), **fp8) == S * (2 * h + 5 * f)
    # the modules are what "selective" re-runs: without it nothing is freed
    none = activation_bytes_per_layer(m, S, 1, recompute="none", dropout=False, recompute_modules=("mlp",))
    assert none == base


def test_mla_up_proj_and_moe_act_on_deepseek_v3(cat):
    """DeepSeek-V3: 128 heads, q/k 192 wide, v 128; top-8 experts and one shared of width 2048. The MLA up-projections
    free Q, K, V: 2 x 128 x (2 x 192 + 128) = 131,072 bytes a token, and the normed latents they read
    (GEMM inputs) 2 x (1536 + 512) = 4,096 (the checkpoint keeps the latents); the experts' activation output is
    2 x 8 x 2048 = 32,768 bytes a token of an MoE layer (none of a dense one)."""
    m = cat.model("deepseek-v3")
    assert freed_bytes(m, True, ("mla_up_proj",)) == (4096.0, 131072.0, 4096.0, 0.0)
    assert freed_bytes(m, True, ("moe_act",)) == (0.0, 32768.0, 0.0, 32768.0)
    assert freed_bytes(m, False, ("moe_act",)) == (0.0, 0.0, 0.0, 0.0)
    # the one shared expert's gate, up and product (3 x 2 x 2048), its down-projection input 2 x 2048
    assert freed_bytes(m, True, ("shared_experts",)) == (0.0, 12288.0, 0.0, 4096.0)
    # a dense layer (the first three) frees its MLP under "mlp": 3 x 2 x 18432
    assert freed_bytes(m, False, ("mlp",)) == (0.0, 110592.0, 0.0, 36864.0)
    kw = dict(dropout=False, moe_layer=True, tp=2)
    a = activation_bytes_per_layer(m, 4096, 1, recompute="selective", **kw)
    b = activation_bytes_per_layer(m, 4096, 1, recompute="selective", recompute_modules=("mla_up_proj",), **kw)
    assert a - b == 4096 * (131072 + 4096) / 2  # split over TP (the latents by sequence parallelism)


def test_attention_scores_stay_unless_the_core_is_recomputed(cat):
    m = cat.model("gpt3-175b")
    kw = dict(tp=8, recompute="selective", flash_attention=False)
    core = activation_bytes_per_layer(m, 2048, 1, **kw)
    mlp = activation_bytes_per_layer(m, 2048, 1, recompute_modules=("mlp",), **kw)
    # GPT-3: 5 a s bytes a token of scores (a = 96), over t = 8, and the GELU MLP's 2 x 2f (f = 4h) freed
    assert mlp - core == pytest.approx(2048 * (5 * 96 * 2048 - 16 * 12288) / 8)


def test_unknown_module_is_refused(cat):
    with pytest.raises(InputError, match="core_attn"):
        _layer(cat.model("llama3.1-8b"), ("attention",))
    with pytest.raises(ValueError):
        StackChoices(recompute_modules=("moe",))


def test_recompute_time_is_the_forward_of_the_recomputed_operators(cat):
    """``rc_sel`` re-runs the stack's modules: for ``mlp`` the dense MLP's forward rows (up, activation,
    down), for the default the attention core; modules add up."""
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("h100-sxm")
    shapes = pd.DataFrame(dict(microbatch_size=[1], tp=[1], cp=[1], ep=[1]))

    def rc_sel(modules):
        st = StackChoices(recompute_modules=modules)
        return float(training_part_times(m, acc, shapes, S, stack=st)["dense_rc_sel"].iloc[0])

    ops = operator_table(m, acc, "train", 1, S, recompute="full")
    fwd_all = ops[(ops.scope == "dense-layer") & (ops.phase == "fwd")]
    fwd = fwd_all[fwd_all.name.isin(["mlp_up", "mlp_act", "mlp_down"])]
    per_layer = float(fwd.time_s.sum())  # time_s: one occurrence (``count`` layers of them)
    assert rc_sel(("mlp",)) == pytest.approx(per_layer, rel=1e-9)
    attn = float(training_part_times(m, acc, shapes, S)["dense_rc_attn"].iloc[0])
    assert rc_sel(("core_attn",)) == pytest.approx(attn)
    assert rc_sel(("core_attn", "mlp")) == pytest.approx(attn + per_layer)
    # layernorm: the forward of the layer's two RMSNorms (before attention and before the MLP)
    norms = float(fwd_all[fwd_all.name.isin(["attn_norm", "mlp_norm"])].time_s.sum())
    assert rc_sel(("layernorm",)) == pytest.approx(norms, rel=1e-9)


def test_mtp_activations_on_the_last_stage(cat):
    """DeepSeek-V3 on 16 stages, one 4096-token micro-batch: the MTP module adds to the last stage its
    MoE layer, a second output layer (norm and head input 2 x 2h, fp32 logits 4V a token) and the
    embedding-norm and projection inputs (2h + 4h a token)."""
    m = cat.model("deepseek-v3")
    plain = m.model_copy(update={"mtp_modules": 0})
    kw = dict(pp=16, recompute="none", dropout=False, stage="last")
    extra = stage_activation_bytes(m, 4096, 1, **kw) - stage_activation_bytes(plain, 4096, 1, **kw)
    layer = activation_bytes_per_layer(m, 4096, 1, dropout=False, moe_layer=True)
    h, v = 7168, 129280
    assert extra == pytest.approx(layer + 4096 * (4 * h + 4 * v) + 4096 * 6 * h)
    first = dict(kw, stage="first")
    assert stage_activation_bytes(m, 4096, 1, **first) == stage_activation_bytes(plain, 4096, 1, **first)


def test_dualpipe_two_stages_and_one_more_microbatch(cat):
    """Llama 3.1 8B (32 layers) on PP 4, 8 micro-batches, no recomputation: under 1F1B the first stage
    holds 4 micro-batches of its 8 layers; under DualPipe the first rank holds the first and the last
    stage (model states of both) and 4 + 1 micro-batches of 8 layers plus the output layer of one."""
    m = cat.model("llama3.1-8b")
    kw = dict(dropout=False, num_microbatches=8, recipe="megatron-bf16", overheads=False)
    one = training_memory(m, S, 1, 1, 4, 8, **kw)
    dual = training_memory(m, S, 1, 1, 4, 8, dualpipe=True, **kw)
    first = model_state_bytes_per_gpu(m, 1, 4, 8, zero=1, recipe="megatron-bf16", stage="first")
    last = model_state_bytes_per_gpu(m, 1, 4, 8, zero=1, recipe="megatron-bf16", stage="last")
    assert (dual.params_bytes, dual.grads_bytes, dual.optimizer_bytes) == pytest.approx(tuple(np.add(first, last)))
    layer = activation_bytes_per_layer(m, S, 1, dropout=False)
    out = S * (4 * 4096 + 4 * 128256)  # final-norm and LM-head inputs 2 x 2h, fp32 logits 4V, a token
    assert one.activations_bytes == pytest.approx(4 * 8 * layer)
    assert dual.activations_bytes == pytest.approx(5 * 8 * layer + out)
    assert dual.stage == "first"
    # DualPipe applies to an even pp without virtual stages only (as its bubble)
    odd = training_memory(m, S, 1, 1, 2, 8, virtual_stages=2, dualpipe=True, **kw)
    assert odd.activations_bytes == training_memory(m, S, 1, 1, 2, 8, virtual_stages=2, **kw).activations_bytes


def test_deepseek_v3_as_run_still_fits(cat):
    """The published DeepSeek-V3 configuration (2,048 H800, PP 16, EP 64, ZeRO-1 data parallel, DualPipe)
    fits with DualPipe's two parameter copies and the MTP module counted, at full recomputation; the
    recompute DeepSeek describes (RMSNorm and MLA up-projections) does not in hnplan's model, which does
    not cache activations in FP8 (reported in the validation row)."""
    from hnplan.planning.training import ParallelPlan, estimate_plan, make_job

    job = make_job("deepseek-v3", "hgx-h800-ib", 2048, 4096, 15360, "fp8", catalog=cat, stack="deepseek-v3-dualpipe")
    plan = dict(tp=1, pp=16, dp=128, ep=64, zero_stage=1, microbatch_size=1)
    full = estimate_plan(job, ParallelPlan(recompute="full", **plan))
    assert full.fits
    sel = estimate_plan(job, ParallelPlan(recompute="selective", **plan))
    assert not sel.fits and sel.memory_per_gpu_bytes > 1.5 * full.memory_per_gpu_bytes


def test_hardware_flops_of_the_recomputed_modules(cat):
    """HFU counts what selective recomputation re-runs: DeepSeek-V3's MLA up-projections
    2 x 61 x (1536 x 128 x 192 + 512 x 128 x 256) FLOP a token; Llama 3.1 8B's MLPs 2 x 32 x 3 x 4096 x 14336;
    norms and activation functions none (the model convention counts no element-wise FLOPs)."""
    from hnplan.compute import training_flops_per_token

    ds = cat.model("deepseek-v3")
    none = training_flops_per_token(ds, 4096).hardware
    up = training_flops_per_token(ds, 4096, "selective", ("mla_up_proj", "layernorm", "moe_act")).hardware
    assert up - none == 2 * 61 * (1536 * 128 * 192 + 512 * 128 * 256)
    ll = cat.model("llama3.1-8b")
    base = training_flops_per_token(ll, S)
    assert training_flops_per_token(ll, S, "selective", ("mlp",)).hardware - base.hardware == 2 * 32 * 3 * 4096 * 14336
    # the default is the attention core, as before
    assert training_flops_per_token(ll, S, "selective").hardware - base.hardware == pytest.approx(
        base.attention_part / 3
    )
