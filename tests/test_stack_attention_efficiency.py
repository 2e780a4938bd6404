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
    assert job.acc.attention_efficiency == {"fwd": 0.371, "bwd": 0.371}
    assert job.provenance["attention_efficiency"] == "stack llama3-meta (its attention kernel)"
    assert _fwd_bwd_rate(job.acc) == pytest.approx(335e12, rel=0.005)
    # the catalog's law (fitted on the 2026 kernels timed on an H200) runs the same kernels at 577 TFLOP/s
    assert _fwd_bwd_rate(cat.accelerator("h100-sxm")) == pytest.approx(577e12, rel=0.005)


def test_other_accelerators_and_stacks_keep_the_catalog_law(cat):
    h200 = make_job("llama3.1-405b", "hgx-h200-ib-ndr", 8192, 8192, 2048, catalog=cat, stack="llama3-meta")
    assert h200.acc.attention_efficiency == cat.accelerator("h200-sxm").attention_efficiency
    assert "attention_efficiency" not in h200.provenance
    core = make_job("llama3.1-405b", "hgx-h100-roce-400g", 8192, 8192, 2048, catalog=cat, stack="megatron-core")
    assert core.acc.attention_efficiency == cat.accelerator("h100-sxm").attention_efficiency


def test_a_stack_attention_efficiency_needs_its_provenance():
    with pytest.raises(ValueError, match="attention_efficiency"):
        SoftwareStack(id="x", name="x", source="a test", attention_efficiency={"h100-sxm": {"fwd": 0.4, "bwd": 0.4}})
