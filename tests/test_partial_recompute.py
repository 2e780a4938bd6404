"""Full recomputation of some layers (Megatron-Core's block method) and activation offloading of some
layers (Transformer Engine cpu_offload), memory and step time, by hand."""

from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hnplan.catalog.schemas import StackChoices
from hnplan.errors import InputError
from hnplan.memory import activation_bytes_per_layer
from hnplan.memory.activations import embedding_activation_bytes, output_activation_bytes, stage_activation_table
from hnplan.memory.pipeline import microbatches_in_flight
from hnplan.memory.recompute import block_recomputed_layers, offload_exposed_s, offload_kept_layers
from hnplan.memory.training import training_memory
from hnplan.planning.training import ParallelPlan, evaluate_plans, make_job, plans_frame

S = 8192  # tokens of a Llama 3 sequence


def _plan(**kw):
    base = dict(tp=1, pp=1, cp=1, microbatch_size=1, num_microbatches=8, virtual_stages=1, recompute="full")
    return pd.DataFrame([{**base, **kw}])


def test_block_method_recomputes_the_head_of_each_chunk():
    # one layer a chunk: 4 of 8 in 4 chunks, 1 of 32 in one, 2 of 8 in two; 5 a chunk: 5 of 32 in one chunk,
    # every layer of 8 in 2 chunks of 4 or 4 chunks of 2
    assert block_recomputed_layers([8, 32, 8], [4, 1, 2], 1).tolist() == [4.0, 1.0, 2.0]
    assert block_recomputed_layers([8, 32, 8], [4, 1, 2], 5).tolist() == [8.0, 5.0, 8.0]
    assert offload_kept_layers(80, 40) == 41.0 and offload_kept_layers(4, 9) == 2.0  # N capped at L - 1


def test_block_recomputation_memory_llama3_8b(cat):
    """Llama 3.1 8B (32 layers, h 4096), one 8192-token sequence, TP 1, PP 1, N = 5: 5 layers keep
    their input (2 h bytes a token = 67,108,864 bytes) and 27 keep everything; plus the embedding
    dropout mask and the output layer of the one stage."""
    m = cat.model("llama3.1-8b")
    kw = dict(dropout=False)
    a_full = activation_bytes_per_layer(m, S, 1, recompute="full", **kw)
    a_none = activation_bytes_per_layer(m, S, 1, recompute="none", **kw)
    assert a_full == 2 * 4096 * S
    ends = embedding_activation_bytes(m, S, 1, 1, 1, True, False) + output_activation_bytes(m, S, 1, 1, 1, True)
    got = stage_activation_table(m, _plan(), S, dropout=False, recompute_num_layers=5)[0]
    assert got == pytest.approx(5 * a_full + 27 * a_none + ends, rel=1e-12)
    # None: every layer (today's full recomputation); N >= the stage's layers: the same
    every = stage_activation_table(m, _plan(), S, dropout=False)[0]
    assert every == pytest.approx(32 * a_full + ends, rel=1e-12)
    assert stage_activation_table(m, _plan(), S, dropout=False, recompute_num_layers=32)[0] == pytest.approx(every)
    # other modes are untouched
    none = _plan(recompute="none")
    assert stage_activation_table(m, none, S, dropout=False, recompute_num_layers=5)[0] == pytest.approx(
        stage_activation_table(m, none, S, dropout=False)[0]
    )


def test_block_recomputation_memory_interleaved_pipeline(cat):
    """PP 4 with 2 virtual stages: 8 layers a stage in chunks of 4; N = 1 recomputes 2 of them. The
    first stage holds p (1 + (p - 1) / (p v)) = 4 x 1.375 = 5.5 micro-batches of its layers."""
    m = cat.model("llama3.1-8b")
    a_full = activation_bytes_per_layer(m, S, 1, recompute="full", dropout=False)
    a_none = activation_bytes_per_layer(m, S, 1, recompute="none", dropout=False)
    emb = embedding_activation_bytes(m, S, 1, 1, 1, True, False)
    f = microbatches_in_flight(4, 8, 2)
    assert f == 5.5
    got = stage_activation_table(m, _plan(pp=4, virtual_stages=2), S, dropout=False, recompute_num_layers=1)[0]
    assert got == pytest.approx(f * (2 * a_full + 6 * a_none) + f * emb, rel=1e-12)


def test_offloading_memory_llama3_70b(cat):
    """Llama 3.1 70B, 80 layers, PP 1, no recomputation, 40 layers offloaded: HBM keeps 41 layers (one
    prefetched group); with PP 2 or recomputation Megatron-Core does not offload."""
    m = cat.model("llama3.1-70b")
    a = activation_bytes_per_layer(m, S, 2, recompute="none", dropout=False)
    base = dict(microbatch=2, tp=1, pp=1, dp=64, zero=3, recompute="none", dropout=False, overheads=False)
    off = training_memory(m, S, offload_layers=40, **base)
    whole = training_memory(m, S, **base)
    assert whole.activations_bytes - off.activations_bytes == pytest.approx(39 * a, rel=1e-12)
    piped = {**base, "pp": 2, "dp": 32}
    assert (
        training_memory(m, S, offload_layers=40, **piped).activations_bytes
        == training_memory(m, S, **piped).activations_bytes
    )


def test_offload_copies_hide_behind_the_pass():
    # 40 layers of 3.5 GB at 225 GB/s: 0.622 s each way, behind a 1.1 s forward and a 2.2 s backward
    assert float(offload_exposed_s(3.5e9, 40, 225e9, 1.1, 2.2)) == 0.0
    # over PCIe at 64 GB/s: 2.1875 s each way, 1.0875 s exposed forward, none backward
    assert float(offload_exposed_s(3.5e9, 40, 64e9, 1.1, 2.2)) == pytest.approx(2.1875 - 1.1)


def _row(cat, system, gpus, overrides, **plan):
    job = make_job(
        "llama3.1-70b", system, gpus, S, 2 * gpus, "fp8", cat, stack="megatron-bridge-2511", overrides=overrides
    )
    p = ParallelPlan(dp=gpus, microbatch_size=2, zero_stage=3, **plan)
    return job, evaluate_plans(job, plans_frame([p])).iloc[0]


def test_offloading_in_the_step(cat):
    """GB200 NVL72 (NVLink-C2C, 225 GB/s a GPU each way): the copies of 40 layers hide behind the pass,
    the step is as without offloading and the plan fits; over a DGX B200's PCIe (64 GB/s) the forward
    copies are exposed by ``40 a / B - t_fwd`` a micro-batch."""
    _, whole = _row(cat, "gb200-nvl72", 64, None)
    _, off = _row(cat, "gb200-nvl72", 64, dict(cpu_offload_layers=40))
    assert not whole["fits"] and off["fits"]
    assert off["t_offload_exposed_s"] == 0.0 and off["step_time_s"] == pytest.approx(whole["step_time_s"])
    job, pcie = _row(cat, "dgx-b200-ib-ndr", 64, dict(cpu_offload_layers=40))
    a = activation_bytes_per_layer(job.model, S, 2, recompute="none", dropout=False, fp8_gemm_inputs=True)
    # 80 layers, 40 offloaded: HBM keeps 41 (one prefetched group), so 39 layers' activations leave HBM
    assert whole["activations_bytes"] - off["activations_bytes"] == pytest.approx(39 * a, rel=1e-12)
    copy = 40 * a / 64e9
    per_mb = pcie["t_offload_exposed_s"] / pcie["num_microbatches"]
    assert copy == pytest.approx(2.265, abs=0.001)  # 40 x 3.62 GB at 64 GB/s
    # the forward pass (about a third of the micro-batch's compute) is shorter than the copies: exposed
    assert 0 < per_mb < copy
    assert per_mb == pytest.approx(copy - pcie["t_compute_s"] / pcie["num_microbatches"] / 3, rel=0.15)


def test_offloading_needs_a_host_link(cat):
    job = make_job("llama3.1-8b", "gb200-nvl72", 8, S, 8, "bf16", cat, overrides=dict(cpu_offload_layers=4))
    bare = job.system.model_copy(update={"host_link_GBps_per_gpu": None})
    with pytest.raises(InputError, match="host_link_GBps_per_gpu"):
        evaluate_plans(replace(job, system=bare), plans_frame([ParallelPlan(dp=8)]))


def test_block_recomputation_in_the_step(cat):
    """Llama 3.1 8B on 8 H100, TP 2 (no TP overlap: the collectives add up): N = 5 of 16 layers a stage
    at PP 2 recompute 5/16 of what full recomputation re-runs; the TP collectives run 2 + 5/16 times
    a layer's forward ones."""
    ov = dict(tp_comm=False, cuda_graph_scope=["full_iteration"])

    def row(mode, n):
        job = make_job(
            "llama3.1-8b", "hgx-h100-ib-ndr", 8, S, 16, "bf16", cat, overrides={**ov, "recompute_num_layers": n}
        )
        p = ParallelPlan(tp=2, pp=2, dp=2, recompute=mode)
        return evaluate_plans(job, plans_frame([p])).iloc[0]

    none, full, block = row("none", None), row("full", None), row("full", 5)
    share = 5 / 16
    assert block["t_compute_s"] == pytest.approx(
        none["t_compute_s"] + share * (full["t_compute_s"] - none["t_compute_s"])
    )
    assert block["t_tp_comm_exposed_s"] == pytest.approx(none["t_tp_comm_exposed_s"] * (2 + share) / 2)
    assert none["memory_per_gpu_bytes"] > block["memory_per_gpu_bytes"] > full["memory_per_gpu_bytes"]
    assert row("full", 16)["step_time_s"] == pytest.approx(full["step_time_s"])
    # the hardware FLOPs count the recomputed forward of 2 x 5 of the 32 layers
    assert none["hardware_flops_per_token"] < block["hardware_flops_per_token"] < full["hardware_flops_per_token"]
    hw = none["hardware_flops_per_token"] + 10 / 32 * (
        full["hardware_flops_per_token"] - none["hardware_flops_per_token"]
    )
    assert block["hardware_flops_per_token"] == pytest.approx(hw)


def test_choices_are_checked():
    with pytest.raises(ValidationError):
        StackChoices(recompute_num_layers=0)
    with pytest.raises(ValidationError):
        StackChoices(cpu_offload_layers=-1)
    assert StackChoices().recompute_num_layers is None and StackChoices().cpu_offload_layers == 0
    assert StackChoices(recompute_num_layers=3).recompute_num_layers == 3


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), pp=st.sampled_from([1, 2, 4]), v=st.sampled_from([1, 2]), off=st.integers(0, 40))
def test_more_recomputed_or_offloaded_layers_never_need_more_memory(cat, n, pp, v, off):
    """Activations fall (weakly) as N grows, between the none level (no layer recomputed) and full
    recomputation of every layer; offloading more layers never needs more HBM."""
    m = cat.model("llama3.1-8b")
    plan = _plan(pp=pp, virtual_stages=v if pp > 1 else 1)
    at = lambda k: stage_activation_table(m, plan, S, dropout=False, recompute_num_layers=k)[0]  # noqa: E731
    assert at(n + 1) <= at(n) * (1 + 1e-12)
    assert at(None) <= at(n) <= stage_activation_table(m, plan.assign(recompute="none"), S, dropout=False)[0]
    none = _plan(recompute="none")
    kept = lambda k: stage_activation_table(m, none, S, dropout=False, offload_layers=k)[0]  # noqa: E731
    assert kept(off + 1) <= kept(off)
