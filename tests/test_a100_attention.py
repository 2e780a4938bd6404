"""The A100's fused attention at FlashAttention-2's published ceilings (Dao, arXiv:2307.08691, Sec. 4.1).

On an A100 80GB SXM4 FlashAttention-2 reaches up to 73 % of the dense bf16 peak in the forward pass and up to 63 %
in the backward pass (backward FLOPs counted as 2.5x the forward's). Before, the chip had no attention ceiling and
attention ran at the GEMM ceiling (0.798), faster than the published kernel.
"""

import pytest

from hnplan.catalog.loader import load_catalog
from hnplan.compute.attention import attention_compute_s

PEAK = 312e12  # A100 dense bf16 [FLOP/s], NVIDIA A100 datasheet


def test_a100_attention_runs_at_flashattention2_published_ceilings():
    acc = load_catalog().accelerator("a100-sxm-80gb")
    assert acc.attention_efficiency == {"fwd": 0.73, "bwd": 0.63}
    assert "2307.08691" in acc.field_sources["attention_efficiency"]
    # Llama 3.1 8B, 2 sequences of 4,096 tokens, 32 heads of 128, causal: forward 4 x 2 x 4096^2 x 4096 / 2 FLOPs
    fwd = 4 * 2 * 4096**2 * 4096 / 2
    t = attention_compute_s(acc, [fwd, 2.5 * fwd], [4096, 4096], [4096, 4096], [128, 128], [64, 64], [False, True])
    rate = [fwd / t[0] / PEAK, 2.5 * fwd / t[1] / PEAK]
    # at 4K tokens the work fills every SM (wave efficiency above 0.99): each pass within 1 % under its ceiling
    assert rate[0] == pytest.approx(0.73, rel=0.01) and rate[0] <= 0.73
    assert rate[1] == pytest.approx(0.63, rel=0.01) and rate[1] <= 0.63
