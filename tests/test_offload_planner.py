"""Offload in the training planner (hnplan.planning.training.offload): a hand-worked exposed time, a plan
infeasible in HBM made feasible, and a memory pool that never makes a plan slower."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.memory.tiers import memory_tiers
from hnplan.planning.training import components as c
from hnplan.planning.training import make_job, search_plans
from hnplan.planning.training.offload import apply_offload
from hnplan.units import DAY, GiB_to_bytes

GB = 1e9


def _pool(cat, sid="hgx-h100-ib-ndr", tb=16.0, nodes=4, gbps=8.0, latency_ns=None, host=True):
    s = cat.system(sid)
    update = dict(
        id=f"{sid}-pool-{tb}-{nodes}-{gbps}-{latency_ns}-{host}",
        price_item=sid,
        pooled_memory_tb=tb,
        pooled_memory_nodes=nodes,
        pooled_memory_GBps_per_gpu=gbps,
        pooled_memory_latency_ns=latency_ns,
    )
    if not host:
        update.update(host_memory_gib_per_node=None, host_link_GBps_per_gpu=None)
    return s.model_copy(update=update)


def test_pool_shared_by_nodes_is_a_tier(cat):
    s = _pool(cat, tb=128.0, nodes=32)
    tiers = {t.name: t for t in memory_tiers(cat.design(s))}
    # 128 TB shared by 32 nodes of 8 GPUs: 0.5 TB per GPU at 8 GB/s per GPU
    assert tiers["pooled"].capacity_bytes == pytest.approx(128e12 / 256)
    assert tiers["pooled"].bw_Bps == pytest.approx(8 * GB) and tiers["pooled"].link == "CXL / fabric-attached"


def test_exposed_offload_hand_worked(cat):
    s = _pool(cat, tb=1.0, nodes=1, gbps=10.0, latency_ns=1000.0)  # 125 GB of pool per GPU at 10 GB/s
    job = make_job("llama3.1-70b", s, 8, 4096, 8, overrides={"offload": "auto"})
    hbm = c.hbm_bytes(job.acc)
    # one plan 300 GB over HBM: optimizer 200 GB, weights 150 GB, activations 100 GB (per GPU)
    df = pd.DataFrame(
        dict(
            memory_per_gpu_bytes=[hbm + 300 * GB],
            optimizer_bytes=[200 * GB],
            params_bytes=[150 * GB],
            activations_bytes=[100 * GB],
            num_microbatches=[4],
            t_optimizer_s=[0.5],
            t_compute_s=[10.0],
            fits=[False],
        )
    )
    comp = pd.DataFrame(dict(layers=[80], t_bwd_mb=[1.5]))
    apply_offload(job, df, comp)
    r = df.iloc[0]
    # host (fastest, 64 GB/s, 2,048 GiB / 8 = 256 GiB = 274.88 GB per GPU) takes 200 GB of optimizer states
    # and 74.88 GB of weights; the pool (10 GB/s) takes the rest of the 300 GB, 25.12 GB of weights
    host = GiB_to_bytes(256)
    pooled = 300 * GB - host
    assert r["offload_host_bytes"] == pytest.approx(host) and r["offload_pooled_bytes"] == pytest.approx(pooled)
    assert pooled / GB == pytest.approx(25.122, abs=1e-3)
    assert bool(r["fits"])
    # host: optimizer 200/64 = 3.125 s against a 0.5 + 1.5 s window -> 1.125 s exposed; weights
    # 2 x 4 x 74.88 / 64 = 9.36 s behind 10 s of compute -> 0. Pool: weights 2 x 4 x 25.12 / 10 = 20.10 s
    # + 80 layers x 1 us -> 10.10 s exposed. The step waits for the slower tier.
    pool_s = 2 * 4 * pooled / (10 * GB) + 80e-6
    assert r["t_offload_exposed_s"] == pytest.approx(pool_s - 10.0)
    assert r["offload_transfer_s"] == pytest.approx(pool_s)


def test_exposed_activation_offload_hand_worked(cat):
    s = _pool(cat, tb=1.0, nodes=1, gbps=10.0)
    job = make_job("llama3.1-70b", s, 8, 4096, 8, overrides={"offload": "auto"})
    hbm = c.hbm_bytes(job.acc)
    # 150 GB over HBM: 100 GB of optimizer states and 50 GB of activations both fit in the host's 256 GB
    df = pd.DataFrame(
        dict(
            memory_per_gpu_bytes=[hbm + 150 * GB],
            optimizer_bytes=[100 * GB],
            params_bytes=[0.0],
            activations_bytes=[50 * GB],
            num_microbatches=[4],
            t_optimizer_s=[0.5],
            t_compute_s=[2.0],
            fits=[False],
        )
    )
    apply_offload(job, df, pd.DataFrame(dict(layers=[80], t_bwd_mb=[1.5])))
    r = df.iloc[0]
    assert r["offload_host_bytes"] == pytest.approx(150 * GB) and r["offload_pooled_bytes"] == 0
    # optimizer 100/64 = 1.5625 s within its 2 s window; activations out and back per micro-batch:
    # 4 x 50 / 64 = 3.125 s against 2 s of compute -> 1.125 s exposed
    assert r["t_offload_exposed_s"] == pytest.approx(4 * 50 / 64 - 2.0)


def test_a_plan_infeasible_in_hbm_becomes_feasible_with_offload(cat):
    fixed = dict(tp=8, pp=1, zero_stage=0, recompute="full")
    off = search_plans("llama3.1-70b", "hgx-h100-ib-ndr", 8, 4096, 8, fixed=fixed)
    on = search_plans("llama3.1-70b", "hgx-h100-ib-ndr", 8, 4096, 8, fixed=fixed, overrides={"offload": "auto"})
    assert not off["fits"].any() and on["fits"].all()
    # offload moves exactly the overflow: the footprint less what an H100 lets a program allocate
    # (79.11 GiB, hbm_visible_gib); 175.8 GB at micro-batch 8 (row 0) leaves 90.8 GB on the host
    overflow = on["memory_per_gpu_bytes"] - GiB_to_bytes(79.11)
    assert np.allclose(on["offloaded_bytes"], overflow, rtol=1e-9)
    assert on["offloaded_bytes"].iloc[0] == pytest.approx(90.84e9, rel=1e-3)
    assert (on["t_offload_exposed_s"] >= 0).all()
    # the exposed transfer is part of the step
    same = on.merge(off, on=["microbatch_size"], suffixes=("", "_hbm"))
    assert np.allclose(same["step_time_s"], same["step_time_s_hbm"] + same["t_offload_exposed_s"])


@settings(max_examples=8, deadline=None)
@given(tb=st.sampled_from([0.5, 4.0, 128.0]), gbps=st.sampled_from([1.0, 8.0, 64.0]))
def test_a_pool_never_makes_a_plan_slower(cat, tb, gbps):
    base = cat.system("hgx-h100-ib-ndr").model_copy(
        update=dict(id="hgx-no-host", price_item="hgx-h100-ib-ndr", host_memory_gib_per_node=None)
    )
    pooled = _pool(cat, tb=tb, nodes=4, gbps=gbps, host=False)
    kw = dict(overrides={"offload": "auto"}, fixed=dict(pp=1))
    a = search_plans("llama3.1-70b", base, 16, 4096, 16, **kw).set_index(list(_keys()))
    b = search_plans("llama3.1-70b", pooled, 16, 4096, 16, **kw).set_index(list(_keys()))
    b = b.loc[a.index]
    # a plan that fits without the pool is the same plan with it; the pool only adds feasible plans
    fit_a = a["fits"].to_numpy()
    assert np.allclose(b["step_time_s"].to_numpy()[fit_a], a["step_time_s"].to_numpy()[fit_a])
    assert (b["fits"].to_numpy() >= fit_a).all()
    best = lambda df: df.loc[df["fits"], "step_time_s"].min() if df["fits"].any() else np.inf  # noqa: E731
    assert best(b) <= best(a)


def test_a_faster_pool_never_slows_an_offloaded_plan(cat):
    kw = dict(overrides={"offload": "auto"}, fixed=dict(tp=8, pp=1, zero_stage=0, recompute="full"))
    slow = search_plans("llama3.1-70b", _pool(cat, gbps=2.0, host=False), 8, 4096, 8, **kw)
    fast = search_plans("llama3.1-70b", _pool(cat, gbps=32.0, host=False), 8, 4096, 8, **kw)
    slow = slow.set_index(list(_keys()))
    fast = fast.set_index(list(_keys())).loc[slow.index]
    both = slow["fits"] & fast["fits"]
    assert both.any()
    assert (fast.loc[both, "step_time_s"] <= slow.loc[both, "step_time_s"] + 1e-12).all()


def _keys():
    from hnplan.planning.training.plan import PLAN_FIELDS

    return PLAN_FIELDS


def test_size_and_time_to_train_offload_on_request(cat):
    from typer.testing import CliRunner

    from hnplan.cli import app
    from hnplan.errors import InfeasiblePlan
    from hnplan.planning.time_to_train import time_to_train

    # Llama 3.1 70B needs ~1.1 TB of training state: more than one HGX H100's 640 GB of HBM
    with pytest.raises(InfeasiblePlan):
        time_to_train("llama3.1-70b", "hgx-h100-ib-ndr", 8, 1e9, 4096, 8, catalog=cat)
    r = time_to_train("llama3.1-70b", "hgx-h100-ib-ndr", 8, 1e9, 4096, 8, catalog=cat, offload="auto")
    # days = tokens / throughput / goodput, throughput = 8 sequences x 4,096 tokens a step
    assert r["tokens_per_s"] == pytest.approx(8 * 4096 / r["step_time_s"], rel=1e-9)
    assert r["days"] == pytest.approx(1e9 / r["tokens_per_s"] / r["goodput"] / DAY, rel=1e-9)
    args = ["size", "--model", "llama3.1-70b", "--tokens", "1e9", "--system", "hgx-h100-ib-ndr", "--gpus", "8"]
    out = CliRunner().invoke(app, [*args, "--seq-len", "4096", "--global-batch-tokens", "32768", "--offload", "auto"])
    assert out.exit_code == 0, out.output


def test_train_says_what_hbm_holds_when_offloaded():
    # the footprint alone (245.7 GiB on a 79.1 GiB H100) would read as not fitting: the line says what HBM
    # holds, the footprint and where the rest went
    from hnplan.cli.train_cmd import _memory_text

    d = {
        "memory_per_gpu_gib": 245.7,
        "hbm_gib": 79.1,
        "fits": True,
        "memory_breakdown_gib": {"weights": 10.0, "offload_host": 166.6, "offload_pooled": 0.0},
    }
    assert _memory_text(d) == ("79.1 GiB in HBM of 79.1 GiB (fits); footprint 245.7 GiB, 166.6 GiB in host memory")
    d2 = {"memory_per_gpu_gib": 60.0, "hbm_gib": 79.1, "fits": True, "memory_breakdown_gib": {"weights": 60.0}}
    assert _memory_text(d2) == "60.0 GiB of 79.1 GiB (fits)"


def test_offload_flag_names_itself():
    # a bad --offload value names the flag, not the stack choice behind it (exit 2, one line)
    from typer.testing import CliRunner

    from hnplan.cli import app

    args = ["train", "--model", "llama3.1-8b", "--system", "dgx-b200-ib-ndr", "--gpus", "8", "--seq-len", "4096"]
    res = CliRunner().invoke(app, [*args, "--global-batch-size", "64", "--offload", "yes"])
    assert res.exit_code == 2 and "--offload must be one of none, auto; got 'yes'" in res.output
