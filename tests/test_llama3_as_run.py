"""Llama 3 405B as the paper ran it (arXiv:2407.21783 Sec. 3.3.2, Table 4): the step's parts by hand."""

import pytest

from hnplan.planning.training import ParallelPlan, estimate_training_step


@pytest.mark.parametrize("gpus,dp,m", [(8192, 64, 32), (16384, 128, 16)])
def test_as_run_schedule_by_hand(gpus, dp, m):
    # TP 8, PP 16, no checkpointing, one layer a chunk: 8 virtual stages (16 x 8 = 126 layers + embedding + loss)
    plan = ParallelPlan(tp=8, pp=16, dp=dp, virtual_stages=8, zero_stage=2, recompute="none")
    est = estimate_training_step("llama3.1-405b", "hgx-h100-roce-400g", gpus, plan, 8192, 2048, stack="llama3-meta")
    b = est.breakdown_s
    assert est.num_microbatches == m and est.fits  # 2,048 sequences / DP at micro-batch 1
    t_mb = (b["compute"] + b["tp_comm_exposed"] + b["pp_comm_exposed"]) / m  # the slowest stage's micro-batch
    # interleaved 1F1B: (p - 1) / v micro-batch times of bubble (Narayanan et al. SC21 Sec. 2.2.2; Llama 3 Sec. 3.3.2),
    # each the other stage's own: 14 stages of 8 layers as the slowest, the last one 6 layers and the output layer
    # (2 x 16,384 x 128,256 FLOP a token, 0.65 of a layer's 2 x 3.2e9): (14 + 6.65 / 8) / 8 = 1.85 micro-batch times
    assert (14 + 6 / 8) / 8 * t_mb < b["pp_bubble"] < 15 / 8 * t_mb
    assert b["pp_bubble"] == pytest.approx((14 + 6.65 / 8) / 8 * t_mb, rel=0.01)
    # the bubble's share of the ideal step is about (p - 1) / (v m): 5.8 % on 8,192 GPUs, 11.6 % on 16,384
    assert b["pp_bubble"] / (m * t_mb) == pytest.approx(15 / (8 * m), rel=0.015)
