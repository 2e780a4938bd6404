"""Context parallelism as Llama 3 ran it (arXiv:2407.21783 Sec. 3.3.2): K and V all-gathered over the CP
group before one attention kernel of the rank's load-balanced query chunks, the all-gather exposed; the
stack choice ``cp_algorithm="allgather"`` (hnplan.compute.layer_ops, hnplan.planning.training.collectives)."""

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.operators import operator_table
from hnplan.planning.training import ParallelPlan, estimate_training_step
from hnplan.planning.training.collectives import collective_s, cp_comm_per_layer
from hnplan.planning.training.evaluate import make_job

# Llama 3.1 405B at TP 8: 128 / 8 = 16 query heads, 8 / 8 = 1 KV head of 128 per rank
HQ, D = 16, 128
ALLGATHER = StackChoices(cp_algorithm="allgather")


def test_the_llama3_stack_gathers_kv(cat):
    assert cat.stack("llama3-meta").cp_algorithm == "allgather"
    assert cat.stack("megatron-core").cp_algorithm == "p2p_ring"


def test_allgather_attention_is_one_causal_kernel_of_the_ranks_queries_over_all_keys(cat):
    # 131,072 tokens over CP 16: the rank's 2 chunks of c = 4,096 queries (8,192) meet the gathered keys in
    # one kernel; executed FLOPs 2 b h (s/cp) s 2d x 1/2 = the causal total over cp, as the ring executes
    m, acc = cat.model("llama3.1-405b"), cat.accelerator("h100-sxm")
    s, cp = 131072, 16
    t = operator_table(m, acc, "train", 1, s, tp=8, cp=cp, stack=ALLGATHER)
    attn = t[(t["scope"] == "dense-layer") & t["name"].str.startswith(("attention", "attn_cp"))]
    assert sorted(set(attn["name"])) == ["attention"]  # no ring steps, no output / LSE corrections
    fwd = attn[attn["phase"] == "fwd"]
    assert (fwd["m"].iloc[0], fwd["n"].iloc[0]) == (8192, 131072)
    want = 2.0 * HQ * (s / cp) * s * 2 * D * 0.5
    assert want == 4_398_046_511_104.0
    assert fwd["flops"].sum() == pytest.approx(want, rel=1e-12)
    ring = operator_table(m, acc, "train", 1, s, tp=8, cp=cp)
    ring_attn = ring[(ring["scope"] == "dense-layer") & (ring["kind"] == "attention") & (ring["phase"] == "fwd")]
    assert ring_attn["flops"].sum() == pytest.approx(want, rel=1e-12)  # the same work, cut differently


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_allgather_exposes_two_gathers_and_a_reduce_scatter_a_layer(cat, recompute):
    # CP 16 at stride TP 8 on HGX H100: one GPU in each of 16 servers. The gathered K/V of a 131,072-token
    # micro-batch: 131,072 x (K, V) x 1 head x 128 x 2 bytes = 64 MiB; forward all-gather, backward all-gather
    # again and reduce-scatter of dK/dV, all exposed; full recomputation gathers once more
    s = 131072
    gathered = s * 2 * 1 * D * 2.0
    assert gathered == 64 * 2**20
    job = make_job("llama3.1-405b", "hgx-h100-roce-400g", 128, s, 16, catalog=cat)
    ag = collective_s(job, "allgather", gathered, [16], [8])[0]
    rs = collective_s(job, "reducescatter", gathered, [16], [8])[0]
    # one rank per server: NCCL's ring (it has no halving-doubling) on LL128 over the 16 servers: 14 us
    # (baseLat) + 15 steps of the tree's network latency (NCCL charges it when each node holds one rank) 8.5 us
    # plus 1 us of the fabric's links and switches, and 15/16 of the 64 MiB through the GPU's own 400 Gb/s NIC
    # at 0.92 of its 50 GB/s = 46 GB/s, of which LL128 lines carry 120/128 (Simple: 8.4 + 15 x (14 + 2) us at
    # 46 GB/s, 1.6161 ms; PAT: 8 + 4 x 16 / 3.5 + 16 x 2.8 us at 0.75 x 46 GB/s, 1.8947 ms)
    by_hand = 14e-6 + 15 * (8.5e-6 + 1e-6) + 15 / 16 * gathered / (46e9 * 120 / 128)
    assert by_hand == pytest.approx(1.6154e-3, rel=1e-4)
    assert ag == pytest.approx(by_hand, rel=1e-3) and rs == pytest.approx(by_hand, rel=1e-3)
    plan = ParallelPlan(tp=8, pp=1, dp=1, cp=16, recompute=recompute)
    est = estimate_training_step(
        cat.model("llama3.1-405b"),
        "hgx-h100-roce-400g",
        128,
        plan,
        s,
        1,
        catalog=cat,
        overrides={"cp_algorithm": "allgather"},
    )
    per_layer = est.breakdown_s["cp_comm_exposed"] / (est.num_microbatches * cat.model("llama3.1-405b").layers)
    n_ag = 3 if recompute == "full" else 2
    assert per_layer == pytest.approx(n_ag * ag + rs, rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(cp=st.sampled_from([2, 4, 8, 16]), k=st.integers(1, 8), mb=st.integers(1, 2))
def test_gathered_kv_costs_grow_with_the_sequence_and_never_hide(cat, cp, k, mb):
    # the exposed gather of one layer grows with the tokens gathered (s = 8,192 k), and an all-gather never
    # costs less than the P2P ring's exposed exchange, which hides behind the ring's kernels
    def exposed(seq, algorithm):
        job = make_job("llama3.1-405b", "hgx-h100-ib-ndr", 16 * cp, seq, 16, catalog=cat, overrides=algorithm)
        plans = pd.DataFrame(dict(tp=[8], cp=[cp], microbatch_size=[mb], recompute=["none"]))
        return float(cp_comm_per_layer(job, plans)[0])

    ag = {"cp_algorithm": "allgather"}
    s = 8192 * k
    assert exposed(s, ag) > 0.0
    assert exposed(2 * s, ag) > exposed(s, ag)
    assert exposed(s, ag) >= exposed(s, None)


def test_the_train_command_takes_the_cp_algorithm():
    # Llama 3.1 70B, 131,072 tokens over CP 16 at TP 8 (one GPU in each of 16 HGX servers): the flag overrides the
    # stack, JSON says so, and the gathered K/V shows where the ring hid its exchange; a typo exits 2 in one line
    from typer.testing import CliRunner

    from hnplan.cli import app

    base = "train --model llama3.1-70b --system hgx-h100-ib-ndr --gpus 128 --seq-len 131072 --global-batch-size 16"
    base += " --tp 8 --pp 1 --dp 1 --cp 16 --microbatch-size 1 --virtual-stages 1 --recompute full --zero 1 --json"
    runner = CliRunner()
    ring = json.loads(runner.invoke(app, base.split()).stdout)
    ag = json.loads(runner.invoke(app, base.split() + ["--cp-algorithm", "allgather"]).stdout)
    assert ring["stack"]["overlap"]["cp_algorithm"] == "p2p_ring"
    assert (ag["stack"]["overlap"]["cp_algorithm"], ag["stack"]["provenance"]["cp_algorithm"]) == (
        "allgather",
        "override",
    )
    assert ring["breakdown_s"]["cp_comm_exposed"] == 0.0 < ag["breakdown_s"]["cp_comm_exposed"]
    bad = runner.invoke(app, base.split() + ["--cp-algorithm", "allgathr"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "--cp-algorithm must be one of p2p_ring, allgather; got 'allgathr'" in bad.output
