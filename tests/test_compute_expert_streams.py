"""Routed-expert GEMMs as Transformer Engine's ``GroupedLinear`` runs them: one cuBLAS GEMM per local expert,
expert ``i`` on compute stream ``i % 4`` (``nvte_multi_stream_cublas_gemm``), so the SMs fill in rounds of four
concurrent GEMMs, each round with its own wave quantisation, against one grouped kernel over all the experts."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.gemm import gemm_compute_s, gemm_device_time_s, multi_stream_gemm_time_s
from hnplan.compute.operator_rows import expert_streams
from hnplan.compute.operators import operator_columns
from hnplan.compute.parts import part_time_table


@pytest.fixture(scope="module")
def h100(cat):
    return cat.accelerator("h100-sxm")


def test_one_round_is_the_grouped_kernel(h100):
    # 4 experts on 4 streams: floor(4 / 4) = 1 round of 4 concurrent GEMMs, nothing left: the grouped law itself
    t = multi_stream_gemm_time_s(h100, "bf16", 512, 1536, 2048, 4, 4)
    assert t == gemm_device_time_s(h100, "bf16", 512, 1536, 2048, 4)[2]


def test_small_experts_pay_a_wave_per_round(h100):
    # Qwen3-30B-A3B's down projection at 128 tokens per expert: M 128 x N 768 (a 1,536-wide FFN at expert TP 2)
    # x K 2,048, 16 local experts. H100 law: tiles 64 x 128, 132 SMs, wave weight 0, split-K from K 1,024, k0 40.4.
    # Per expert 2 x 6 = 12 tiles. A round of 4 streams: 48 tiles, split = min(132 // 48, 2048 // 1024) = 2,
    # work 96 < 132: one full wave of K / 2 + k0 = 1,064.4 each, 4 rounds -> 4,257.6 tile-K units.
    # One grouped kernel: 192 tiles, split 1, 192 / 132 = 1.4545 waves of K + k0 = 2,088.4 -> 3,037.7 units.
    unit = 2 * 64 * 128 / (989.4e12 * 0.737 / 132)  # seconds per tile-K unit of one wave
    tc, split = gemm_compute_s(h100, "bf16", 128, 768, 2048, 4)
    assert float(split) == 2.0
    assert float(tc) == pytest.approx(1 * (1024 + 40.4) * unit, rel=1e-12)
    tc16, split16 = gemm_compute_s(h100, "bf16", 128, 768, 2048, 16)
    assert float(split16) == 1.0
    assert float(tc16) == pytest.approx(192 / 132 * (2048 + 40.4) * unit, rel=1e-12)
    # the streamed bytes split evenly over the rounds: 4 rounds of a quarter each
    nbytes = 16 * (128 * 2048 + 2048 * 768) * 2 + 2 * 16 * 128 * 768
    t_round = gemm_device_time_s(h100, "bf16", 128, 768, 2048, 4, nbytes / 4, 2 * 4 * 128 * 768)[2]
    t = multi_stream_gemm_time_s(h100, "bf16", 128, 768, 2048, 16, 4)
    assert t == pytest.approx(4 * t_round, rel=1e-12)
    grouped = gemm_device_time_s(h100, "bf16", 128, 768, 2048, 16)[2]
    # above the compute ratio 4,257.6 / 3,037.7 = 1.40: each round also pays a kernel's fixed 2.85 us and the
    # split-K reduction's 3.09 us (4 x 5.94 = 23.8 us against the grouped kernel's 2.85 us)
    assert t / grouped > 4257.6 / 3037.7
    fixed = 4 * (2.85 + 3.09) * 1e-6
    assert t - fixed == pytest.approx(4 * (t_round - (2.85 + 3.09) * 1e-6), rel=1e-9)
    assert t - fixed > float(4 * tc)  # the rounds' work at least their compute


def test_a_partial_round(h100):
    # 5 experts on 4 streams: one round of 4 and one of 1
    per = (512 * 2048 + 2048 * 1536) * 2 + 2 * 512 * 1536
    r4 = gemm_device_time_s(h100, "bf16", 512, 1536, 2048, 4, 4 * per, 2 * 4 * 512 * 1536)[2]
    r1 = gemm_device_time_s(h100, "bf16", 512, 1536, 2048, 1, per, 2 * 512 * 1536)[2]
    assert multi_stream_gemm_time_s(h100, "bf16", 512, 1536, 2048, 5, 4) == pytest.approx(r4 + r1, rel=1e-12)


@given(
    m=st.floats(1, 16384),
    n=st.sampled_from([256, 768, 1536, 2048, 4096]),
    k=st.sampled_from([768, 2048, 7168]),
    g=st.floats(1, 64),
    s=st.integers(1, 8),
)
def test_never_below_one_grouped_kernel(cat, m, n, k, g, s):
    acc = cat.accelerator("h100-sxm")
    t = multi_stream_gemm_time_s(acc, "bf16", m, n, k, g, s)
    assert t >= gemm_device_time_s(acc, "bf16", m, n, k, g)[2] * (1 - 1e-12)


def test_vectorised_equals_one_by_one(h100):
    m, g = np.array([32.0, 300.0, 4096.0]), np.array([16.0, 5.5, 8.0])
    t = multi_stream_gemm_time_s(h100, "bf16", m, 1536, 2048, g, 4)
    one = [multi_stream_gemm_time_s(h100, "bf16", a, 1536, 2048, b, 4) for a, b in zip(m, g)]
    assert np.allclose(t, one, rtol=1e-12, atol=0)


def test_the_stack_choice(cat):
    assert expert_streams(None) is None
    assert expert_streams(StackChoices()) == 4  # Transformer Engine's num_compute_streams
    assert expert_streams(StackChoices(expert_gemm_launch="grouped")) is None
    assert expert_streams(StackChoices(expert_gemm_streams=2)) == 2


def _routed(cat, model, stack):
    ep = 16 if cat.model(model).moe is not None else 1
    names, t = part_time_table(
        cat.model(model), cat.accelerator("h100-sxm"), [(1, 1, 1, ep)], 4096, "bf16", stack=stack
    )
    return dict(zip(names, t[0]))


def test_only_the_routed_experts_move(cat):
    per, grouped = StackChoices(), StackChoices(expert_gemm_launch="grouped")
    a, b = _routed(cat, "qwen3-30b-a3b", per), _routed(cat, "qwen3-30b-a3b", grouped)
    assert a["moe_routed_fwd"] > b["moe_routed_fwd"]  # 8 local experts: 2 rounds of 4
    assert a["moe_attn"] == b["moe_attn"]  # the attention of the MoE layer does not move
    dense_a, dense_b = _routed(cat, "llama3.1-8b", per), _routed(cat, "llama3.1-8b", grouped)
    assert {k: v for k, v in dense_a.items() if "host" not in k} == {
        k: v for k, v in dense_b.items() if "host" not in k
    }


def test_operator_table_follows_the_stack(cat):
    model, acc = cat.model("qwen3-30b-a3b"), cat.accelerator("h100-sxm")
    kw = dict(tp=1, ep=16, dtype="bf16")
    t = {
        name: operator_columns(model, acc, "train", 1, 4096, stack=s, **kw)
        for name, s in (("none", None), ("grouped", StackChoices(expert_gemm_launch="grouped")))
    }
    assert np.array_equal(t["none"]["time_s"], t["grouped"]["time_s"])  # no stack: one grouped kernel
    per = operator_columns(model, acc, "train", 1, 4096, stack=StackChoices(), **kw)
    up = np.array([str(x).startswith("expert_up") for x in per["name"]]) & (per["kind"] == "gemm")
    assert up.any() and (per["time_s"][up] > t["grouped"]["time_s"][up]).all()
