"""Megatron-Bridge 26.04.01's Qwen3-30B-A3B MXFP8 pair on 8 B200 (x86 host) and 8 GB200 (Grace host) at one
layout: the published figures, the recipes' one difference (graph scopes) and what hnplan makes of the host
(docs/training.md, "Grace against x86 at one MoE layout")."""

from __future__ import annotations

import pytest
from toolmod import load_tool

from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import best_row

B200, GB200 = "mbridge2604-b200-qwen3-30b-a3b-8-fp8", "mbridge2604-gb200-qwen3-30b-a3b-8-fp8"


@pytest.fixture(scope="module")
def pair():
    runs = {r.id: r for r in training_runs()}
    return runs[B200], runs[GB200]


def test_the_pair_is_one_layout_on_two_hosts(pair):
    b, g = pair
    assert (b.model, b.dtype, b.seq_len, b.global_batch_seqs, b.gpus, b.stack) == (
        g.model,
        g.dtype,
        g.seq_len,
        g.global_batch_seqs,
        g.gpus,
        g.stack,
    )
    assert b.fixed == g.fixed and b.fixed["ep"] == 8 and b.fixed["microbatch_size"] == 4
    assert (b.system, g.system) == ("dgx-b200-ib-ndr", "gb200-nvl72")
    # the presets' one difference: the B200 one also captures the attention (QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1)
    assert b.overrides["cuda_graph_scope"] == ["attn", "moe_router", "moe_preprocess"]
    assert "cuda_graph_scope" not in g.overrides  # the stack's default, router and preprocess, is the GB200 preset's
    # the table: 26,112 / 27,136 tokens/s per GPU; 599 / 619 model TFLOP/s, the same ~22.9 GFLOP a token
    assert g.published / b.published == pytest.approx(0.9623, abs=1e-4)
    assert 599e12 / 26112 == pytest.approx(619e12 / 27136, rel=0.01)


def test_hnplan_charges_the_grace_host_more_than_the_pair_shows(pair):
    b, g = pair
    pb, pg = (best_row(r)["tokens_per_s_per_gpu"] for r in pair)
    # step = 512 x 4,096 tokens / 8 GPUs / tokens per s per GPU: 9.06 s (B200) and 11.77 s (GB200)
    assert 512 * 4096 / 8 / pb == pytest.approx(9.057, abs=0.01)
    assert 512 * 4096 / 8 / pg == pytest.approx(11.765, abs=0.01)
    assert 100 * (pb / b.published - 1) == pytest.approx(6.7, abs=0.1)
    assert 100 * (pg / g.published - 1) == pytest.approx(-14.7, abs=0.1)
    # GB200 / B200: 0.770 planned against 0.962 measured
    assert pg / pb == pytest.approx(0.770, abs=0.002) and pg / pb < 0.85 * g.published / b.published


def test_rows_alone_would_close_below_and_above_the_fitted_moe_host_work(pair):
    tool = load_tool("moe_breakdown")
    b, g = pair
    # the catalog's 37.5 us a kernel of the MoE scopes is the fit over all eager family rows; alone the GB200 row asks
    # for less (its host-bound step is too long), the B200 row for more
    assert tool._closing_moe_host_us(g) == pytest.approx(24.0, abs=1.0)
    assert tool._closing_moe_host_us(b) == pytest.approx(49.0, abs=1.0)


def test_blackwell_ultra_pair_is_gpu_bound_and_planned_at_its_measured_ratio():
    runs = {r.id: r for r in training_runs()}
    b, g = runs["mbridge2604-b300-qwen3-30b-a3b-8-fp8"], runs["mbridge2604-gb300-qwen3-30b-a3b-8-fp8"]
    # the two presets are the same in every field: only the node differs
    assert (b.fixed, b.overrides, b.stack) == (g.fixed, g.overrides, g.stack) and b.fixed["microbatch_size"] == 8
    assert g.published / b.published == pytest.approx(31744 / 30720) == pytest.approx(1.033, abs=0.001)
    pb, pg = best_row(b)["tokens_per_s_per_gpu"], best_row(g)["tokens_per_s_per_gpu"]
    assert 100 * (pb / b.published - 1) == pytest.approx(5.8, abs=0.1)
    assert 100 * (pg / g.published - 1) == pytest.approx(6.9, abs=0.1)
    assert pg / pb == pytest.approx(1.045, abs=0.002)  # within 1.2 % of the measured 1.033
    # the 25.11 run of the GB300 layout measured 28,934: the 26.04.01 software is 1.097x faster on the same plan
    assert g.published / runs["mbridge2511-gb300-qwen3-30b-a3b-8-fp8"].published == pytest.approx(1.097, abs=0.001)
