"""A stack's attention kernel: ``SoftwareStack.attention_efficiency`` replaces the accelerator's attention-law
ceilings for the jobs run with it (Llama 3's FlashAttention-2-class kernel on H100)."""

import numpy as np
import pytest

from hnplan.catalog.schemas import SoftwareStack
from hnplan.compute.attention import FLASH_BWD_FACTOR, attention_compute_s
from hnplan.planning.training.evaluate import make_job

# FlashAttention-2 on H100: up to 335 TFLOP/s forward + backward (Dao, arXiv:2307.08691, Sec. 4.1, Fig. 7),
# measured at 16K tokens, hidden 2,048 and head dim 128 (16 heads), without the causal mask
S, H, D = 16384, 16, 128


def _fwd_bwd_rate(acc) -> float:
    f = 2.0 * H * S * S * 2 * D  # forward FLOPs: QK^T and PV, 4 H S^2 D = 2.2 TFLOP
    t = attention_compute_s(acc, np.array([f, FLASH_BWD_FACTOR * f]), [S] * 2, [S] * 2, [D] * 2, [H] * 2, [False, True])
    return f * (1 + FLASH_BWD_FACTOR) / t.sum()


def test_the_llama3_kernel_runs_flashattention2s_published_rate(cat):
    job = make_job("llama3.1-405b", "hgx-h100-roce-400g", 8192, 8192, 2048, catalog=cat, stack="llama3-meta")
    assert job.acc.attention_efficiency == {"fwd": 0.390, "bwd": 0.390}
    assert job.provenance["attention_efficiency"] == "stack llama3-meta (its attention kernel)"
    assert _fwd_bwd_rate(job.acc) == pytest.approx(335e12, rel=0.005)
    # the catalog's law (fitted on the 2026 kernels timed on an H200) runs the same kernels at 568 TFLOP/s
    assert _fwd_bwd_rate(cat.accelerator("h100-sxm")) == pytest.approx(568e12, rel=0.005)


def test_other_accelerators_and_stacks_keep_the_catalog_law(cat):
    h200 = make_job("llama3.1-405b", "hgx-h200-ib-ndr", 8192, 8192, 2048, catalog=cat, stack="llama3-meta")
    assert h200.acc.attention_efficiency == cat.accelerator("h200-sxm").attention_efficiency
    assert "attention_efficiency" not in h200.provenance
    core = make_job("llama3.1-405b", "hgx-h100-roce-400g", 8192, 8192, 2048, catalog=cat, stack="megatron-core")
    assert core.acc.attention_efficiency == cat.accelerator("h100-sxm").attention_efficiency


def test_a_stack_attention_efficiency_needs_its_provenance():
    with pytest.raises(ValueError, match="attention_efficiency"):
        SoftwareStack(id="x", name="x", source="a test", attention_efficiency={"h100-sxm": {"fwd": 0.4, "bwd": 0.4}})


# FP8 attention (Transformer Engine fp8_dot_product_attention, NeMo FP8_DPA): the kernel times of the stack's bf16
# law divided by its FP8 / bf16 ratio of one cuDNN 9.13.1 benchmark run (NVIDIA/cudnn-frontend sdpa_benchmark_training,
# sdpa_fp8_benchmark_results_NVIDIA_GB300.csv @ 0b1577c; geometric mean over 8K-32K tokens)
def test_fp8_attention_divides_the_kernel_time_by_the_stacks_measured_ratio(cat):
    over = {"fp8_attention": True}
    job = make_job("llama3.1-8b", "gb300-nvl72", 8, 8192, 16, "fp4", cat, stack="nemo-mlperf-v50", overrides=over)
    bf16 = make_job("llama3.1-8b", "gb300-nvl72", 8, 8192, 16, "fp4", cat, stack="nemo-mlperf-v50")
    # the bf16 ceilings stay (the balance of the tensor-core and exponential pipelines is the bf16 kernel's)
    assert job.acc.attention_efficiency == bf16.acc.attention_efficiency == {"fwd": 0.740, "bwd": 0.576}
    # GB300 forward: 2,074 / 1,716, 2,267 / 1,836, 2,352 / 1,884 -> geometric mean 1.230; backward 1.353
    assert job.acc.attention_fp8_ratio == pytest.approx({"fwd": 1.230, "bwd": 1.353})
    assert bf16.acc.attention_fp8_ratio is None
    assert job.provenance["attention_fp8_ratio"].startswith("stack nemo-mlperf-v50")
    f = 2.0 * H * S * S * 2 * D
    args = (np.array([f, FLASH_BWD_FACTOR * f]), [S] * 2, [S] * 2, [D] * 2, [H] * 2, [False, True])
    t8, t16 = attention_compute_s(job.acc, *args), attention_compute_s(bf16.acc, *args)
    assert t16 / t8 == pytest.approx([1.230, 1.353])
    # Blackwell Ultra's doubled SFU rate: its forward gains more from FP8 than the B200's (1.230 against 1.135)
    b200 = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 16, "fp8", cat, stack="nemo-mlperf-v50", overrides=over)
    assert b200.acc.attention_fp8_ratio["fwd"] == pytest.approx(1.135)
    assert b200.acc.attention_fp8_ratio["fwd"] < job.acc.attention_fp8_ratio["fwd"]


def test_fp8_attention_without_a_ratio_stays_bf16_and_needs_an_fp8_dtype(cat):
    from hnplan.errors import InputError

    over = {"fp8_attention": True}
    h100 = make_job(
        "llama3.1-8b", "hgx-h100-roce-400g", 8, 8192, 16, "fp8", cat, stack="nemo-mlperf-v50", overrides=over
    )
    assert h100.acc.attention_efficiency == cat.accelerator("h100-sxm").attention_efficiency
    assert "attention timed in bf16" in h100.provenance["attention_fp8_ratio"]
    with pytest.raises(InputError, match="fp8_attention needs an fp8 or fp4 dtype"):
        make_job("llama3.1-8b", "gb300-nvl72", 8, 8192, 16, "bf16", cat, stack="nemo-mlperf-v50", overrides=over)
