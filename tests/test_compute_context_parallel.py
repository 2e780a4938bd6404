"""Context parallelism as Transformer Engine's P2P ring runs it: the step kernels, their corrections and the
exposed K/V exchange (hnplan.compute.context_parallel, hnplan.planning.training.collectives)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.compute import attention_op, ring_step_times_s, totals
from hnplan.compute.attention import attention_compute_s, slower_ring_step
from hnplan.compute.context_parallel import ring_correction_bytes, ring_correction_kernels, ring_steps
from hnplan.compute.counts import achievable_hbm_Bps
from hnplan.compute.operators import operator_table
from hnplan.planning.training import ParallelPlan, estimate_training_step
from hnplan.planning.training.collectives import collective_s
from hnplan.planning.training.evaluate import make_job

# Llama 3.1 405B at TP 8: 128 / 8 = 16 query heads, 8 / 8 = 1 KV head of 128 per rank
HQ, D = 16, 128


def test_405b_ring_at_cp2_is_a_causal_4096_block_and_a_2048_by_4096_block(cat):
    op = attention_op(cat.model("llama3.1-405b"), 1, 8192, 8, 2)
    assert (op.s_q, op.s_kv, op.hq, op.d_qk, op.cp) == (4096, 8192, HQ, D, 2)
    diag, step = ring_steps(op, 2)
    # 2 cp = 4 chunks of c = 2,048 tokens; the rank holds 2c = 4,096 queries and, at step 0, 4,096 keys
    assert (diag.s_q, diag.s_kv, diag.causal) == (4096, 4096, True)
    assert (step.s_q, step.s_kv, step.causal) == (2048, 4096, False)


@settings(max_examples=30, deadline=None)
@given(cp=st.sampled_from([2, 4, 8, 16]), chunks=st.integers(1, 64), b=st.integers(1, 4))
def test_the_ring_executes_the_flops_of_one_causal_kernel(cat, cp, chunks, b):
    # every rank executes 2 cp blocks of c x c: the causal s/cp x s kernel's 2 b h (s/cp) s 2d x 1/2
    s = 2 * cp * 64 * chunks
    op = attention_op(cat.model("llama3.1-405b"), b, s, 8, cp)
    exe = sum(
        2.0 * x.b * x.hq * x.s_q * x.s_kv * (x.d_qk + x.d_v) * (0.5 if x.causal else 1.0) for x in ring_steps(op, cp)
    )
    assert exe == pytest.approx(2.0 * b * HQ * (s / cp) * s * 2 * D * 0.5, rel=1e-12)


def test_405b_ring_correction_bytes(cat):
    op = attention_op(cat.model("llama3.1-405b"), 1, 8192, 8, 2)
    q = o = 4096 * HQ * D  # 8,388,608 query / output elements on the rank
    kv = 4096 * 2 * 1 * D  # 1,048,576 K and V elements (one KV head)
    lse = HQ * 4096  # 65,536 fp32 log-sum-exp entries
    assert (q, kv, lse) == (8_388_608, 1_048_576, 65_536)
    fwd, bwd = ring_correction_bytes(op, 2)
    # forward: concatenate K/V (2 KV), first merge (2 O), second merge (3 O), bf16; one lse merge (3 L), fp32
    assert fwd == 2 * (2 * kv + 2 * o + 3 * o) + 4 * 3 * lse == 88_866_816
    # backward: K/V into the ring buffer (2 KV), dQ copy + add (2 Q + 3 Q), dK/dV copy + add (2 KV + 3 KV)
    assert bwd == 2 * (2 * kv + 5 * q + 5 * kv) == 98_566_144


def test_the_operator_table_times_the_ring_steps_and_keeps_model_flops(cat):
    m, acc = cat.model("llama3.1-405b"), cat.accelerator("h200-sxm")
    t = operator_table(m, acc, "train", 1, 8192, tp=8, cp=2)
    attn = t[(t["scope"] == "dense-layer") & t["name"].str.startswith(("attention", "attn_cp"))]
    assert sorted(set(attn["name"])) == ["attention_cp_diagonal", "attention_cp_step", "attn_cp_correction"]
    fwd = attn[(attn["phase"] == "fwd") & (attn["kind"] == "attention")]["flops"].sum()
    assert fwd == pytest.approx(2.0 * HQ * 4096 * 8192 * 2 * D * 0.5, rel=1e-12)
    corr = attn[attn["name"] == "attn_cp_correction"].set_index("phase")
    # each pass's bytes over its kernels: cp + 2 = 4 forward, 3 cp + 1 = 7 backward, in every one of 126 layers
    assert (corr.loc["fwd", "count"], corr.loc["bwd", "count"]) == (126 * 4, 126 * 7)
    layer = corr["bytes"] * corr["count"] / 126
    assert (layer["fwd"], layer["bwd"]) == pytest.approx((88_866_816, 98_566_144), rel=1e-12)
    # the model convention (MFU) still counts one s/cp x s kernel: half the cp = 1 FLOPs
    one = totals(operator_table(m, acc, "train", 1, 8192, tp=8, convention="model"))["flops"]
    two = totals(operator_table(m, acc, "train", 1, 8192, tp=8, cp=2, convention="model"))["flops"]
    assert 2 * two == pytest.approx(one, rel=1e-12)


def test_h200_off_diagonal_step_under_the_attention_law(cat):
    acc = cat.accelerator("h200-sxm")
    op = attention_op(cat.model("llama3.1-405b"), 1, 8192, 8, 2)
    fwd, bwd = ring_step_times_s(acc, op)
    # forward of 2,048 queries x 4,096 keys, 16 heads, d 128: 2 x 16 x 2048 x 4096 x 256 = 68.72 GFLOP;
    # 16 x 2048 / 128 = 256 query tiles on 132 SMs: wave 256 / 264; 4,096 keys per row; H200 law
    # (data/accelerators/h200-sxm.yaml): peak 989.4 TFLOP/s, eta 0.788, c0 327.3 keys, tail 0.597
    f = 2 * 16 * 2048 * 4096 * 256
    main = f * (1 + 327.3 / 4096) / (989.4e12 * 0.788 * 256 / 264)  # 98.16 us
    tail = 0.597 * 4 * 128 * 128 * (4096 + 327.3) / (989.4e12 * 0.788 / 132)  # 29.30 us
    # the scalar pipelines: rho = 4,096 x 0.788 x (1/16 + 6.42/128) / 512 = 0.7102, (1 + rho^4.08)^(1/4.08) = 1.0557
    rho = 4096 * 0.788 * (1 / 16 + 6.42 / 128) / 512
    scalar = (1 + rho**4.08) ** (1 / 4.08)
    assert fwd[1] == pytest.approx((main + tail) * scalar + 2.85e-6, rel=1e-9)  # + the chip's 2.85 us per kernel
    assert fwd[1] == pytest.approx(137.4e-6, rel=1e-3)
    assert len(fwd) == len(bwd) == 2 and all(bwd > 2.5 * fwd)


@pytest.mark.parametrize("acc_id", ["h100-sxm", "h200-sxm", "b200", "gb200"])
@pytest.mark.parametrize(
    ("model", "tp", "cp", "tall"),
    [("llama3.1-405b", 8, 2, False), ("llama3.1-405b", 4, 4, True), ("llama3.1-70b", 8, 2, False)],
)
def test_the_slower_off_diagonal_shape_sets_the_ring_step(cat, acc_id, model, tp, cp, tall):
    # the ring waits for its slowest rank: c x 2c (ranks r < i) against 2c x c (ranks r >= i). Under the law
    # c x 2c costs the longer tail (tau 4 tq d c more per unit) and 2c x c twice the tiles' prologues
    # (c0 / c more per FLOP): c x 2c is slower below tau tq units / c0 = 0.601 x 128 x 132 / 383.8 = 26.5
    # heads per rank (16 at TP 8, 8 for the 70B), 2c x c above (32 at TP 4)
    acc = cat.accelerator(acc_id)
    op = slower_ring_step(acc, attention_op(cat.model(model), 1, 8192, tp, cp))
    assert op.ring_tall is tall
    c = 8192 / (2 * cp)
    f = 2.0 * op.hq * c * 2 * c * 2 * D * np.array([1.0, 2.5])
    bwd = np.array([False, True])
    wide = attention_compute_s(acc, f, [c] * 2, [2 * c] * 2, [D] * 2, [op.hq] * 2, bwd).sum()
    tall_t = attention_compute_s(acc, f, [2 * c] * 2, [c] * 2, [D] * 2, [op.hq] * 2, bwd).sum()
    step = ring_steps(op, cp)[1]
    assert (step.s_q, step.s_kv) == ((2 * c, c) if tall else (c, 2 * c))
    assert max(wide, tall_t) == (tall_t if tall else wide)


def _cp_exposed(cat, model, system, seq, plan, **over):
    est = estimate_training_step(cat.model(model), system, 16, plan, seq, 16, catalog=cat, overrides=over or None)
    return est.breakdown_s["cp_comm_exposed"] / (est.num_microbatches * cat.model(model).layers)


def test_405b_kv_exchange_hides_behind_each_ring_step_across_servers(cat):
    # TP 8 fills an HGX server: the CP pair (stride 8) crosses InfiniBand. The block is 4,096 tokens x one
    # KV head x (K, V) x 128 x 2 bytes = 2 MiB; forward it must hide behind the diagonal step
    plan = ParallelPlan(tp=8, pp=1, dp=1, cp=2)
    job = make_job("llama3.1-405b", "hgx-h100-ib-ndr", 16, 8192, 16, catalog=cat)
    t1 = collective_s(job, "sendrecv", 4096 * 2 * 128 * 2.0, [2], [8])[0]
    kf, kb = ring_step_times_s(job.acc, attention_op(job.model, 1, 8192, 8, 2))
    assert t1 < kf.min()  # ~ 2 MiB / 50 GB/s = 42 us against a 137 us forward step
    assert _cp_exposed(cat, "llama3.1-405b", "hgx-h100-ib-ndr", 8192, plan) == 0.0
    # without overlap: one block forward, K/V then dK/dV backward
    raw = _cp_exposed(cat, "llama3.1-405b", "hgx-h100-ib-ndr", 8192, plan, cp_comm=False)
    assert raw == pytest.approx(3 * t1, rel=1e-12)


def test_short_steps_expose_what_their_kernels_cannot_hide(cat):
    # Llama 3.1 8B at TP 8, CP 2, 2,048 tokens: 4 query heads against one KV head, so a 1,024-token K/V
    # block (512 KiB) over 400G RoCE takes about as long as the 15.7 us forward diagonal step (at the clock the
    # 700 W limit sustains, the step's kernels as the planner times them); each step exposes max(transfer - kernel, 0)
    plan = ParallelPlan(tp=8, pp=1, dp=1, cp=2)
    job = make_job("llama3.1-8b", "hgx-h100-roce-400g", 16, 2048, 16, catalog=cat)
    t1 = collective_s(job, "sendrecv", 1024 * 2 * 128 * 2.0, [2], [8])[0]
    kf, kb = ring_step_times_s(job.kernel_acc, attention_op(job.model, 1, 2048, 8, 2))
    want = max(t1 - kf[0], 0) + max(t1 - kb[0], 0) + max(t1 - kb[1], 0)
    got = _cp_exposed(cat, "llama3.1-8b", "hgx-h100-roce-400g", 2048, plan)
    assert want > 0  # a case that exposes something, else the equality below would check only zeros
    assert got == pytest.approx(want, rel=1e-12)
    assert got < _cp_exposed(cat, "llama3.1-8b", "hgx-h100-roce-400g", 2048, plan, cp_comm=False)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_a_ring_counted_once_times_as_its_steps_listed(cat, recompute):
    """The parts' rows (one off-diagonal step counted cp - 1 times, cp an array over shapes) sum to the
    time of each shape's ring listed step by step: 405B on an H100, TP 8, cp 2, 4 and 32."""
    from hnplan.compute.attention import attention_rows
    from hnplan.compute.operator_rows import _columns, _times

    m, acc = cat.model("llama3.1-405b"), cat.accelerator("h100-sxm")
    cps, mbs = np.array([2, 4, 32]), np.array([1, 2, 1])

    def timed(rows):
        c = _columns(rows)
        return _times(None, acc, "bf16", c)[2], c["count"]

    listed = []
    for b, cp in zip(mbs.tolist(), cps.tolist()):
        t, c = timed(
            attention_rows(slower_ring_step(acc, attention_op(m, b, 8192, 8, cp)), "train", recompute, True, 1.0)
        )
        listed.append((t * c).sum())  # the corrections' rows count their kernels
    op = slower_ring_step(acc, attention_op(m, mbs, 8192, np.full(3, 8), cps))
    rows = attention_rows(op, "train", recompute, True, 1.0, ring_once=True)
    # each row split into one row per shape (its numbers, or the number all shapes share)
    t, count = timed([(*r[:4], *(v if np.ndim(v) == 0 else v[i] for v in r[4:])) for r in rows for i in range(3)])
    once = np.bincount(np.tile(np.arange(3), len(rows)), weights=t * count)
    np.testing.assert_allclose(once, listed, rtol=1e-13)


def test_ring_kernel_times_over_shapes_equal_each_shape(cat):
    """The diagonal and off-diagonal step times of shapes of different cp, timed together, equal each
    shape's ring timed alone, bit for bit (405B on an H100, TP 8 and 4)."""
    from hnplan.compute.attention import ring_pair_times_s

    m, acc = cat.model("llama3.1-405b"), cat.accelerator("h100-sxm")
    mb, tp, cp = np.array([1, 2, 1, 4]), np.array([8, 8, 4, 8]), np.array([2, 4, 16, 32])
    fd, fs, bd, bs = ring_pair_times_s(acc, attention_op(m, mb, 8192, tp, cp))
    for i, (b, t, c) in enumerate(zip(mb.tolist(), tp.tolist(), cp.tolist())):
        fwd, bwd = ring_step_times_s(acc, attention_op(m, b, 8192, t, c))
        assert fwd.tolist() == [fd[i]] + [fs[i]] * (c - 1)
        assert bwd.tolist() == [bd[i]] + [bs[i]] * (c - 1)


def test_ring_corrections_run_as_kernels_of_their_own(cat):
    # Transformer Engine's AttnFuncWithCPAndKVP2P on rank cp - 1: forward the K/V concatenation, the cp output
    # merges after the loop and the last log-sum-exp merge the stream waits for (cp + 2); backward the ring
    # buffer's copy and a dQ, a dK and a dV copy or add at each of the cp steps (3 cp + 1)
    assert ring_correction_kernels(2) == (4, 7) and ring_correction_kernels(4) == (6, 13)
    # Llama 3.1 8B at TP 4 CP 4 on a GB200 (NVIDIA's 1,024-GPU MLPerf layout): each kernel pays the chip's
    # 3.67 us beside its share of the bytes at the achievable HBM rate, so the forward's corrections of a layer
    # take bytes / HBM + 6 x 3.67 us where one pass took bytes / HBM + 3.67 us
    acc = cat.accelerator("gb200")
    t = operator_table(cat.model("llama3.1-8b"), acc, "train", 1, 8192, tp=4, cp=4)
    corr = t[t["name"] == "attn_cp_correction"].set_index("phase")
    op = attention_op(cat.model("llama3.1-8b"), 1, 8192, 4, 4)
    fwd_bytes, bwd_bytes = ring_correction_bytes(op, 4)
    assert (corr.loc["fwd", "count"], corr.loc["bwd", "count"]) == (32 * 6, 32 * 13)
    per_layer = corr["time_s"] * corr["count"] / 32
    hbm = achievable_hbm_Bps(acc)
    assert per_layer["fwd"] == pytest.approx(fwd_bytes / hbm + 6 * 3.67e-6, rel=1e-9)
    assert per_layer["bwd"] == pytest.approx(bwd_bytes / hbm + 13 * 3.67e-6, rel=1e-9)
