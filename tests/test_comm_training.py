"""The training step's communication lines use the placed groups and the collective tuner."""

import math

import pytest

from hnplan.comm.algorithms import best_time
from hnplan.comm.placement import place_group
from hnplan.comm.topology import system_links
from hnplan.planning.training import ParallelPlan, estimate_training_step


def test_tp_and_dp_times_come_from_the_tuner(cat):
    model, system = cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr")
    gpus, seq, batch = 64, 4096, 64
    plan = ParallelPlan(tp=8, pp=1, dp=8)
    est = estimate_training_step(model, system, gpus, plan, seq, batch, catalog=cat)
    links = system_links(cat.design(system), gpus=gpus)
    tp_group = place_group(cat.design(system), 8, 1, gpus, links)
    msg = seq * model.hidden * 2.0  # one micro-batch of bf16 activations
    t_tp, alg = best_time("allreduce", msg, tp_group)
    assert alg == "inr"  # NVLink SHARP inside the HGX baseboard
    m = est.num_microbatches
    assert est.breakdown_s["tp_comm_exposed"] == pytest.approx(m * model.layers * 4 * t_tp, rel=1e-12)
    # the DP group (stride 8) has one rank per server: 8 domains, each rank on its own NIC
    dp_group = place_group(cat.design(system), 8, 8, gpus, links)
    assert (dp_group.per_domain, dp_group.domains) == (1, 8)
    assert est.breakdown_s["dp_comm_exposed"] > 0


def test_supernode_keeps_the_tp_group_inside_its_domain(cat):
    # a model whose 64 KV heads TP 16 divides (Llama 3.1 70B's 8 do not: Megatron refuses TP 16 for it);
    # hidden 8192 and micro-batch 2 x 2048 tokens: the same 64 MiB TP message as 1 x 4096
    model = cat.model("megatron-39.1b")
    est = {
        s: estimate_training_step(
            model, s, 144, ParallelPlan(tp=16, pp=1, dp=9, microbatch_size=2), 2048, 144, catalog=cat
        )
        for s in ("gb200-nvl72", "hgx-h100-ib-ndr")
    }
    # TP 16 fits one NVL72 domain but spans two HGX servers; per micro-batch the all-reduce of 64 MiB
    # takes 17/16 x 64 MiB / (900 GB/s x 0.772 x 0.618) + 25 us (NCCL's NVLS latency) = 191.1 us at NVLink-5
    # SHARP speed (the rack's measured NVLS efficiency 0.618, gb200-nvl72 scaleup_inr_efficiency), against
    # 2 x 15/16 x 64 MiB / (8 heads x 57.7 GB/s) + 25 us + 2 x (20.9 + 2 x 1.19) us (NCCL's NVLS + tree
    # latency: hwLat NVLINK and NET NVLS_TREE, the flush twice the fabric's 1.19 us) = 344.2 us for two HGX
    # servers: NVLS inside each server (9/8 x 64 MiB / (450 GB/s x 0.82 x 0.85) = 240.7 us) and a tree
    # between them (the catalog's H100 systems do not enable IB SHARP; 64 MiB / (8 x 47 GB/s) = 178 us),
    # pipelined no faster than NCCL's NVLS_TREE heads allow (perChMaxNVLSTreeBws, Hopper, two nodes)
    for sid, (q, d) in (("gb200-nvl72", (16, 1)), ("hgx-h100-ib-ndr", (8, 2))):
        g = place_group(cat.design(sid), 16, 1, 144)
        assert (g.per_domain, g.domains) == (q, d)
    ratio = est["gb200-nvl72"].breakdown_s["tp_comm_exposed"] / est["hgx-h100-ib-ndr"].breakdown_s["tp_comm_exposed"]
    assert ratio == pytest.approx(191.1 / 344.2, rel=0.01)
    assert math.isfinite(est["gb200-nvl72"].step_time_s)


def test_pipeline_gather_without_sequence_parallelism(cat):
    # Narayanan et al. SC21 Sec. 4.1: each TP rank sends 1/t of the activation to the next stage over its own
    # NIC, and the receiver re-materialises the whole tensor with an all-gather over NVLink; with sequence
    # parallelism (Megatron-LM 2022) the received shard is what the next layer takes. GPT-3 175B, TP 8, PP 12,
    # DP 4, v 2 on 384 A100 (the SC21 Table 2 layout): 384 micro-batches, 2 v = 4 transfers each
    d = cat.design("dgx-a100-hdr")
    whole = 2048 * 12288 * 2.0  # one micro-batch of bf16 activations, 50.3 MB
    t_send, alg = best_time("sendrecv", whole / 8, place_group(d, 12, 32, 384))  # PP ranks 32 apart: across servers
    t_gather, _ = best_time("allgather", whole, place_group(d, 8, 1, 384))
    assert alg == "p2p"
    # 6.29 MB over one HDR 200G NIC (25 GB/s): about 0.27 ms; 7/8 x 50.3 MB over NVLink 3: about 0.25 ms
    assert t_send == pytest.approx(0.267e-3, rel=0.01) and t_gather == pytest.approx(0.245e-3, rel=0.01)
    plan = ParallelPlan(tp=8, pp=12, dp=4, virtual_stages=2, recompute="full")
    pp_s = {
        st: estimate_training_step("gpt3-175b", "dgx-a100-hdr", 384, plan, 2048, 1536, catalog=cat, stack=st)
        for st in ("megatron-lm-2021", "megatron-lm-2022")
    }
    assert pp_s["megatron-lm-2021"].num_microbatches == 384
    assert pp_s["megatron-lm-2021"].breakdown_s["pp_comm_exposed"] == pytest.approx(
        384 * 4 * (t_send + t_gather), rel=1e-9
    )  # 0.79 s
    assert pp_s["megatron-lm-2022"].breakdown_s["pp_comm_exposed"] == pytest.approx(384 * 4 * t_send, rel=1e-9)


def test_sendrecv_messages_timed_at_once_equal_the_scalar_tuner(cat):
    """collective_s times every send/receive of a call at once (alpha + S / bw of p2p_terms, numpy); each time
    equals best_time's on floats bit for bit, groups inside one domain and across domains, and a group of one
    rank costs nothing. The other ops keep the scalar/array tuner path; an all-reduce checks that too."""
    import numpy as np

    from hnplan.comm.algorithms import p2p_terms
    from hnplan.planning.training import make_job
    from hnplan.planning.training.collectives import collective_s

    job = make_job("llama3.1-405b", "hgx-h100-ib-ndr", 16384, 8192, 2048, catalog=cat)
    size = np.array([2, 2, 4, 16, 16, 1, 8, 2])
    stride = np.array([1, 8, 8, 1024, 1024, 8, 2, 4096])
    n = np.array([1e3, 6.7e7, 3.3e7, 1.2e8, 2.4e8, 5e6, 4096.0, 1.0])
    t = collective_s(job, "sendrecv", n, size, stride)
    want = [0.0 if p == 1 else best_time("sendrecv", x, job.group(p, s))[0] for x, p, s in zip(n, size, stride)]
    assert t.tolist() == want
    assert t[5] == 0.0
    inside, across = job.group(2, 1), job.group(16, 1024)
    assert (inside.domains, across.domains) == (1, 16)
    # inside a domain the NVLink link: 1 kB at its latency and bandwidth; across domains the slower link
    a, b = p2p_terms(inside)
    assert t[0] == a + 1e3 / b and b == inside.up.bw_Bps
    a, b = p2p_terms(across)
    assert t[3] == a + 1.2e8 / b and b == min(across.up.bw_Bps, across.out.bw_Bps) and a == across.out.alpha_s
    ar = collective_s(job, "allreduce", n, size, stride)
    assert ar.tolist() == [
        0.0 if p == 1 else best_time("allreduce", x, job.group(p, s))[0] for x, p, s in zip(n, size, stride)
    ]
