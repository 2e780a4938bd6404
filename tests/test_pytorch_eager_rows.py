"""Plain PyTorch against published runs: IBM's fms-fsdp Llama 2 table (foundation-model-stack/fms-fsdp README.md
@ 4ffb9bdfa30e, eager FSDP1, SDPA, bf16) on the ``pytorch-eager-2403`` stack (data/validation/training_runs.yaml)."""

import pytest

from hnplan.catalog.runs import training_runs
from hnplan.catalog.schemas import StackChoices
from hnplan.planning.validation import best_row

FMS = [r for r in training_runs() if r.id.startswith("fmsfsdp-")]


def test_the_2024_stack_is_pytorch_eager_with_flashattention2_on_hopper(cat):
    old, now, titan = cat.stack("pytorch-eager-2403"), cat.stack("pytorch-eager"), cat.stack("torchtitan-2506")
    # every choice as the plain-PyTorch stack's, so its rows validate that stack's kernels and overlaps, but for the
    # model code the fms-fsdp runs ran: foundation-model-stack's rotary and its K/V expansion for GQA
    # the model code and the training loop: foundation-model-stack's rotary and K/V copies; its FSDP bf16 parameters
    # (no autocast over fp32) and loss on the bf16 logits, against Hugging Face's Trainer(bf16=True) and fp32 loss
    model_code = {
        "rope_kernel": ("eager_matrix", "eager"),
        "gqa_kv_copy": (True, False),
        "autocast_fp32_params": (False, True),
        "loss_kernel": ("fused", "eager"),
        "grads_in_backward": (False, True),
    }
    assert {k: getattr(old, k) for k in StackChoices.model_fields if k not in model_code} == {
        k: getattr(now, k) for k in StackChoices.model_fields if k not in model_code
    }
    assert {k: (getattr(old, k), getattr(now, k)) for k in model_code} == model_code
    assert old.norm_kernel == now.norm_kernel == "eager" and old.act_kernel == now.act_kernel == "eager"
    # SDPA's FLASH_ATTENTION backend is FlashAttention-2 on Hopper, the kernel torchtitan-2506 also runs there;
    # the A100's own ceilings are FlashAttention-2's already (data/accelerators/a100-sxm-80gb.yaml)
    assert old.attention_efficiency == {acc: titan.attention_efficiency[acc] for acc in ("h100-sxm", "h200-sxm")}
    assert old.attention_efficiency["h100-sxm"] == {"fwd": 0.385, "bwd": 0.370}
    assert now.attention_efficiency is None and old.zero_stages == now.zero_stages


def test_the_rows_are_the_readme_table():
    # README @ 4ffb9bdfa30e: tokens/sec/GPU, 128 A100 80G and 96 H100, batch size 2 per GPU, 4k context
    published = {
        ("a100", "7b"): 3700, ("a100", "13b"): 1800, ("a100", "34b"): 700, ("a100", "70b"): 370,
        ("h100", "7b"): 7500, ("h100", "13b"): 3800, ("h100", "34b"): 1550, ("h100", "70b"): 800,
    }  # fmt: skip
    assert {(r.id.split("-")[1], r.id.split("-")[3]): r.published for r in FMS} == published
    for r in FMS:
        assert r.stack == "pytorch-eager-2403" and r.dtype == "bf16" and r.seq_len == 4096
        assert r.global_batch_seqs == 2 * r.gpus and r.fixed["microbatch_size"] == 2 and r.fixed["dp"] == r.gpus
        assert r.gpus == (128 if "-a100-" in r.id else 96)
        assert r.overrides["grad_reduce_bytes"] == 2.0  # bfSixteen: reduce_dtype bf16
        assert r.fixed["recompute"] == ("none" if "-7b-" in r.id else "full")


@pytest.mark.parametrize(("mfu", "hfu"), [(0.51, 0.59), (0.35, 0.40)])  # README: 13B on the A100, the H100
def test_13b_selective_checkpointing_is_every_second_block(mfu, hfu):
    # HFU counts the recomputed forward (2 of 6 parts per recomputed layer): HFU / MFU = (6 + 2 r) / 6
    r = 3 * (hfu / mfu - 1)
    assert r == pytest.approx(0.5, abs=0.08)
    # fms-fsdp checkpoints every k-th LLaMABlock (policies/ac_handler.py): the nearest k is 2
    assert min(range(1, 5), key=lambda k: abs(1 / k - r)) == 2
    rows = [x for x in FMS if "-13b-" in x.id]
    assert len(rows) == 2 and all(x.overrides["recompute_num_layers"] == 20 for x in rows)  # 40 layers / 2


def test_flashattention2_slows_the_h100_rows(cat):
    # the same run on the stack whose Hopper attention is the catalog's (cuDNN, PyTorch 2.11): FlashAttention-2's
    # lower ceilings cost the 7B H100 step (4,096 tokens, attention about a tenth of it) 6-8 %
    run = next(r for r in FMS if r.id == "fmsfsdp-h100-llama2-7b-96")
    fa2 = best_row(run, cat)["step_time_s"]
    # (FSDP's bf16 parameters and loss as the run had them: not the Trainer's autocast over fp32 of the stack)
    same = {**run.overrides, "autocast_fp32_params": False, "loss_kernel": "fused"}
    cudnn = best_row(run.model_copy(update={"stack": "pytorch-eager", "overrides": same}), cat)["step_time_s"]
    assert 1.05 < fa2 / cudnn < 1.09


def test_pytorch_eager_itself_has_a_published_row():
    # torchtitan's April 2024 70B on 64 A100 (docs/performance.md @ 395a526276ee): eager RMSNorm with the fp32
    # upcast, eager rotary, SDPA, FSDP2 with fp32 gradient reduction: the stack as it is, on a chip whose catalog
    # attention ceilings are FlashAttention-2's
    runs = {r.id: r for r in training_runs() if r.stack == "pytorch-eager"}
    # and the Llama 3.2 1B steps timed on an H200 (data/reference/h200_hf_llama_step.csv)
    assert {i for i in runs if i.startswith("hnplan-h200-hf-llama32-")} == set(runs) - {
        "torchtitan2404-a100-llama2-70b-64"
    }
    run = runs["torchtitan2404-a100-llama2-70b-64"]
    assert run.published == 353 and run.expect == "within"
    # FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16): bf16 parameters, a bf16 residual stream
    assert run.overrides["autocast_fp32_params"] is False
    assert run.fixed["recompute"] == "full" and run.global_batch_seqs == 2 * run.gpus == 128
    # torchtitan's model.py, not Hugging Face's: an fp32 complex-multiply rotary and repeat_kv copies of K and V
    assert run.overrides == {"rope_kernel": "eager_complex", "gqa_kv_copy": True, "autocast_fp32_params": False}


FUSED = {
    "norm_kernel": "fused", "rope_kernel": "fused", "act_kernel": "fused", "gqa_kv_copy": False,
    "autograd_grad_sums": False,
}  # fmt: skip


@pytest.mark.parametrize(
    ("run_id", "compiled"), [("fmsfsdp-a100-llama2-7b-128", 1.23), ("fmsfsdp-h100-llama2-7b-96", 1.28)]
)
def test_eager_chains_cost_most_of_what_compiling_saved(cat, run_id, compiled):
    # README @ ed74fd5ddec0: torch.compile ran the 7B 1.23x (A100) and 1.28x (H100) faster. hnplan's eager step over
    # the same step with the norms, rotary and SwiGLU fused and no autograd gradient sums: 1.16x and 1.23x on the 400 /
    # 800 Gb/s per server the PyTorch blog states (1.17x and 1.24x on 8 NICs per server; 1.14x and 1.20x when only the
    # norms and rotary were eager, their backward twice the forward); compiling fuses more
    run = next(r for r in FMS if r.id == run_id)
    eager = best_row(run, cat)["step_time_s"]
    fused = best_row(run.model_copy(update={"overrides": {**run.overrides, **FUSED}}), cat)["step_time_s"]
    # 0.71 and 0.83 of it (0.74 and 0.88 on 8 NICs per server; 0.6 and 0.7 before)
    assert 0.7 * (compiled - 1) < eager / fused - 1 < compiled - 1
