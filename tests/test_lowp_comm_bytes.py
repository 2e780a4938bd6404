"""The bytes low-precision recipes put on the wire: Transformer Engine's quantised sequence-parallel
all-gathers and the distributed optimizer's parameter all-gather (hnplan.compute.fp8_recipes,
hnplan.planning.training.collectives)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog import load_catalog
from hnplan.catalog.schemas import StackChoices
from hnplan.compute.fp8_recipes import param_gather_bytes_per_weight, sp_gather_bytes
from hnplan.planning.training import collectives as coll
from hnplan.planning.training.dp_buckets import param_gather_bytes
from hnplan.planning.training.evaluate import make_job


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_sp_gather_bytes_hand_derived():
    # per-tensor fp8: the row-wise fp8 data alone (Transformer Engine _all_gather_fp8), 1 byte both ways
    assert sp_gather_bytes("delayed") == sp_gather_bytes("current") == (1.0, 1.0)
    # MXFP8: 1 byte + one E8M0 scale per 32 elements; the output gradient gathers its row-wise and
    # column-wise copies: 2 x 1.03125 = 2.0625 bytes, more than bf16's 2
    assert sp_gather_bytes("mxfp8") == (1.03125, 2.0625)
    # blockwise: one fp32 scale per 1 x 128 tile, 1 + 4 / 128 = 1.03125 a copy
    assert sp_gather_bytes("blockwise") == (1.03125, 2.0625)
    # NVFP4: two E2M1 values a byte + one E4M3 scale per 16 elements = 0.5625 a copy
    assert sp_gather_bytes("nvfp4") == (0.5625, 1.125)


def test_param_gather_bytes_per_weight_by_recipe():
    assert param_gather_bytes_per_weight("current", "fp8", True, False) == 1.0
    assert param_gather_bytes_per_weight("delayed", "fp8", False, False) == 2.0  # bf16 weights
    # MXFP8 parameters are gathered in bf16 into the gradient buffer and cast after the gather
    assert param_gather_bytes_per_weight("mxfp8", "fp8", True, False) == 2.0
    # NVFP4 parameters: 0.5 byte packed + the all-reduce of one fp32 amax per 16 x 16 block, 2 x 4 / 256
    assert param_gather_bytes_per_weight("nvfp4", "fp4", False, True) == 0.5 + 8.0 / 256
    assert param_gather_bytes_per_weight("nvfp4", "fp4", True, False) == 2.0  # fp8_params means nothing in fp4


def _tp(job, tp=4, recompute="none", quantised=True):
    df = pd.DataFrame({"tp": [tp], "cp": [1], "microbatch_size": [1], "recompute": [recompute]})
    return coll.tp_comm_per_microbatch(job, df, 1, quantised=quantised)[0]


def test_tp_pairs_with_quantised_all_gathers_hand_derived(cat):
    # Llama 3.1 8B, 8K tokens: S = 8192 x 4096 x 2 bytes; per layer two pairs (reduce-scatter + all-gather)
    # forward and two backward, each pair timed as the all-reduce x (RS(S) + AG(S q / 2)) / (RS(S) + AG(S))
    ch = StackChoices(fp8_recipe="current", sequence_parallel=True)
    job = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp8", cat, choices=ch)
    s = 8192 * 4096 * 2.0
    ar, rs, ag = (coll.collective_s(job, op, s, [4], 1)[0] for op in ("allreduce", "reducescatter", "allgather"))
    ag_half = coll.collective_s(job, "allgather", s / 2, [4], 1)[0]  # fp8: 1 byte an element
    ratio = (rs + ag_half) / (rs + ag)
    assert _tp(job) == pytest.approx(2 * (ratio + ratio) * ar, rel=1e-12)
    assert _tp(job, quantised=False) == pytest.approx(4 * ar, rel=1e-12)  # bf16: two all-reduces a pass
    assert 0.5 < ratio < 1.0  # the reduce-scatter stays bf16
    # full recomputation gathers the forward inputs again, in fp8
    assert _tp(job, recompute="full") == pytest.approx(2 * (2 * ratio + ratio) * ar, rel=1e-12)
    # NVFP4: forward 0.5625, backward 1.125 bytes an element
    nv = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp4", cat, choices=StackChoices())
    f = (rs + coll.collective_s(nv, "allgather", s * 0.5625 / 2, [4], 1)[0]) / (rs + ag)
    b = (rs + coll.collective_s(nv, "allgather", s * 1.125 / 2, [4], 1)[0]) / (rs + ag)
    assert _tp(nv) == pytest.approx(2 * (f + b) * ar, rel=1e-12)
    # bf16 training and fp8 without sequence parallelism (all-reduces of bf16 GEMM outputs) are unchanged
    bf = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "bf16", cat, choices=ch)
    nosp = make_job(
        "llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp8", cat, choices=StackChoices(sequence_parallel=False)
    )
    assert _tp(bf) == _tp(nosp) == pytest.approx(4 * ar, rel=1e-12)


def test_moe_layers_quantise_only_the_attention_pair(cat):
    # the MoE MLP's TP gather is the token dispatcher's (bf16), not a Transformer Engine GEMM input
    ch = StackChoices(fp8_recipe="current", sequence_parallel=True)
    job = make_job("mixtral-8x7b", "gb200-nvl72", 72, 4096, 36, "fp8", cat, choices=ch)
    s = 4096 * job.model.hidden * 2.0
    ar, rs, ag = (coll.collective_s(job, op, s, [4], 1)[0] for op in ("allreduce", "reducescatter", "allgather"))
    ratio = (rs + coll.collective_s(job, "allgather", s / 2, [4], 1)[0]) / (rs + ag)
    per_pass = 2 * ar * (0.5 * ratio + 0.5)
    assert _tp(job) == pytest.approx(2 * per_pass, rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["delayed", "current", "mxfp8", "blockwise"]), st.sampled_from([2, 4, 8]))
def test_quantised_gathers_never_cost_more_than_half_again(cat, recipe, tp):
    # monotone in the bytes: a recipe's pair is at most the bf16 pair x 2.0625 / 2 on the gathered half
    acc = "gb200-nvl72"
    ch = StackChoices(fp8_recipe=recipe, sequence_parallel=True)
    job = make_job("llama3.1-8b", acc, 72, 8192, 36, "fp8", cat, choices=ch)
    q, b = _tp(job, tp=tp), _tp(job, tp=tp, quantised=False)
    assert 0.5 * b < q <= b * 2.0625 / 2
    if recipe in ("delayed", "current"):
        assert q < b


def test_nvfp4_reduces_its_amax_over_tp_with_sequence_parallelism(cat):
    # NVFP4's per-tensor scale: the amax all-reduced over the TP group before the cast (Transformer Engine
    # _customize_quantizers_nvfp4), two a pass as current scaling
    job = make_job("llama3.1-8b", "gb200-nvl72", 72, 8192, 36, "fp4", cat, choices=StackChoices())
    df = pd.DataFrame({"tp": [2], "cp": [1], "microbatch_size": [1], "recompute": ["none"]})
    one = coll.collective_s(job, "allreduce", 4.0, [2], 1)[0]
    assert coll.fp8_amax_per_microbatch(job, df, 32)[0] == pytest.approx(32 * 4 * one, rel=1e-12)


def test_param_gather_with_fp4_and_mxfp8_parameters(cat):
    # Llama 3.1 8B: GEMM weights 32 x 218,103,808; embedding and head 2 x 128,256 x 4096; norms 65 x 4096
    gemm = 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    rest = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096
    fp4 = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, "fp4", cat, choices=StackChoices(fp4_params=True))
    expected = (gemm * 0.53125 + rest * 2.0) / (gemm + rest)
    assert param_gather_bytes(fp4) == pytest.approx((expected, 0.53125), rel=1e-4)
    assert expected == pytest.approx(0.723, abs=0.001)
    mx = StackChoices(fp8_recipe="mxfp8", fp8_params=True)
    assert param_gather_bytes(make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 8192, 8, "fp8", cat, choices=mx)) == (
        2.0,
        2.0,
    )
    assert np.isfinite(expected)
