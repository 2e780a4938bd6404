"""Chunk counts of the overlapped GEMMs by Transformer Engine userbuffers method (:mod:`hnplan.compute.tp_overlap`).

Hand derivations: GPT-3 175B (hidden 12,288, 96 heads, FFN 49,152) at TP 8 with one 2,048-token sequence, so
every sequence-parallel GEMM runs ``m = 2,048`` rows after the all-gather. Transformer Engine's defaults
(``initialize_ub``: ring exchange for the all-gathers, pipeline in 4 for the reduce-scatters) give the QKV and
MLP-up forwards and the row-parallel data gradients ``tp`` = 8 chunks of 256 rows, the output projection and
MLP-down forwards 4 chunks of 512; NeMo's H100 TP 8 configuration (``aggregate`` all-gathers) gives 4 chunks
of 512 throughout; Megatron-Bridge's fp8 configurations (ring exchange everywhere) 8 of 256 throughout.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.operator_rows import _raw_rows
from hnplan.compute.tp_overlap import TE_DEFAULT_METHODS, layer_chunks
from hnplan.planning.training import ParallelPlan, evaluate_plans, make_job, plans_frame

M = 2048  # tokens of one sequence: rows of every sequence-parallel GEMM after the all-gather


def _rows(cat, cfg, tp=8, recompute="none", acc="h100-sxm", tp_comm=True, model="gpt3-175b", dtype="bf16"):
    ch = StackChoices(tp_comm=tp_comm, tp_overlap_cfg=cfg)
    rows = _raw_rows(
        cat.model(model), "train", 1, M, 0, tp, 1, 1, dtype, recompute, "executed", acc=cat.accelerator(acc), stack=ch
    )
    return {(r[0], r[3]): r for r in rows}, rows


def _chunks(rows, gemm, phase):
    """(kernels per layer, rows each) of a GEMM row; 96 layers."""
    r = rows[(gemm, phase)]
    return r[4] / 96, r[7]


def test_transformer_engine_defaults_at_tp8(cat):
    rows, _ = _rows(cat, {})
    for gemm in ("qkv_proj", "mlp_up"):
        assert _chunks(rows, gemm, "fwd") == (8, 256)  # ring exchange all-gather: tp chunks of m / tp
        assert _chunks(rows, gemm, "bwd-data") == (1, M)  # bulk reduce-scatter beside the whole GEMM
    for gemm in ("o_proj", "mlp_down"):
        assert _chunks(rows, gemm, "fwd") == (4, 512)  # pipelined reduce-scatter: num_splits 4
        assert _chunks(rows, gemm, "bwd-data") == (8, 256)  # ring exchange all-gather of the output gradient
    for gemm in ("qkv_proj", "o_proj", "mlp_up", "mlp_down"):
        assert _chunks(rows, gemm, "bwd-weight")[0] == 1  # bulk


def test_nemo_h100_tp8_configuration_aggregates_the_ring(cat):
    rows, _ = _rows(cat, cat.stack("nemo-2407-fp8").tp_overlap_cfg)
    for gemm, phase in (("qkv_proj", "fwd"), ("mlp_up", "fwd"), ("o_proj", "bwd-data"), ("mlp_down", "bwd-data")):
        assert _chunks(rows, gemm, phase) == (4, 512)  # tp / 2 GEMMs of 2 m / tp rows
    for gemm in ("o_proj", "mlp_down"):
        assert _chunks(rows, gemm, "fwd") == (4, 512)


def test_megatron_bridge_fp8_configurations_ring_everywhere(cat):
    rows, _ = _rows(cat, cat.stack("megatron-bridge-2511").tp_overlap_cfg)
    for gemm, phase in (("qkv_proj", "fwd"), ("o_proj", "fwd"), ("o_proj", "bwd-data"), ("mlp_down", "fwd")):
        assert _chunks(rows, gemm, phase) == (8, 256)


def test_configuration_by_accelerator_and_tp(cat):
    cfg = cat.stack("nemo-mlperf-v50").tp_overlap_cfg
    # TP 4: GB200 the Llama 3.1 405B configuration (aggregated all-gathers: 2 chunks of m / 2; ring-exchange
    # reduce-scatters: 4), B200 and H100 4 chunks each
    gb200, _ = _rows(cat, cfg, tp=4, acc="gb200")
    assert _chunks(gb200, "qkv_proj", "fwd") == (2, 1024) and _chunks(gb200, "o_proj", "fwd") == (4, 512)
    for acc in ("b200", "h100-sxm"):
        rows, _ = _rows(cat, cfg, tp=4, acc=acc)
        assert _chunks(rows, "qkv_proj", "fwd") == (4, 512) and _chunks(rows, "mlp_down", "fwd") == (4, 512)
    # Hopper TP 2 (Cisco's h100tp2mbs1.yaml): the output projection pipelined in 2, the rest ring exchange
    h2, _ = _rows(cat, cfg, tp=2)
    assert _chunks(h2, "o_proj", "fwd") == (2, 1024) and _chunks(h2, "mlp_down", "fwd") == (2, 1024)


def test_recomputed_forward_runs_chunked_as_the_forward(cat):
    rows, _ = _rows(cat, {}, recompute="full")
    for gemm in ("qkv_proj", "o_proj", "mlp_up", "mlp_down"):
        assert rows[(gemm, "recompute")][4:8] == rows[(gemm, "fwd")][4:8]


def test_pipeline_all_gather_is_rejected():
    with pytest.raises(ValidationError, match="reduce-scatters only"):
        StackChoices(tp_overlap_cfg={"default": {8: {"qkv_fprop": {"method": "pipeline"}}}})


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([2, 4, 8]),
    methods=st.lists(st.sampled_from(["ring_exchange", "pipeline", "bulk"]), min_size=6, max_size=6),
    splits=st.integers(1, 8),
    aggregate=st.booleans(),
)
def test_chunking_conserves_flops_and_never_reads_less(cat, tp, methods, splits, aggregate):
    layers = {}
    for name, method in zip(TE_DEFAULT_METHODS, methods):
        if method == "pipeline" and TE_DEFAULT_METHODS[name] == "ring_exchange":
            method = "ring_exchange"  # pipeline overlaps reduce-scatters only
        layers[name] = {"method": method, "num_splits": splits, "aggregate": aggregate}
    on, rows_on = _rows(cat, {"default": {2: layers}}, tp=tp, model="llama3.1-8b")
    off, rows_off = _rows(cat, {}, tp=tp, tp_comm=False, model="llama3.1-8b")
    assert len(rows_on) == len(rows_off)
    for key, r in on.items():
        o = off[key]
        assert r[4] * r[5] == pytest.approx(o[4] * o[5])  # FLOPs conserved
        assert r[4] * r[6] >= o[4] * o[6] * (1 - 1e-12)  # each chunk re-reads the weight
        assert r[4] / o[4] in {1, tp, max(tp // 2, 1), splits}


def test_layer_chunks_vectorised():
    tp = np.array([1, 2, 4, 8])
    assert layer_chunks("qkv_fprop", "ring_exchange", tp).tolist() == [1, 2, 4, 8]
    assert layer_chunks("qkv_fprop", "ring_exchange", tp, aggregate=True).tolist() == [1, 1, 2, 4]
    assert layer_chunks("proj_fprop", "pipeline", tp, 4).tolist() == [1, 4, 4, 4]
    assert layer_chunks("fc1_fprop", "bulk", tp).tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize(
    ("model", "system", "gpus", "seq", "dtype", "stack", "plan"),
    [
        # NVIDIA's MLPerf v4.0 GPT-3 175B H100 configuration (conf/tp_overlap/h100tp4mbs2.yaml): TP 4, mbs 2
        (
            "gpt3-175b",
            "hgx-h100-ib-ndr",
            64,
            2048,
            "fp8",
            "nemo-mlperf-v50",
            ParallelPlan(tp=4, pp=8, dp=2, microbatch_size=2, virtual_stages=1, zero_stage=1, recompute="none"),
        ),
        # NeMo's Llama 3.1 405B H100 configuration (userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192)
        (
            "llama3.1-405b",
            "hgx-h100-ib-ndr",
            256,
            8192,
            "fp8",
            "nemo-2407-fp8",
            ParallelPlan(tp=8, pp=8, dp=2, cp=2, microbatch_size=1, virtual_stages=8, zero_stage=1, recompute="none"),
        ),
        # Megatron-LM's defaults (no configuration file) at TP 8, micro-batch 1: GPT-3 175B on 64 H100
        (
            "gpt3-175b",
            "hgx-h100-ib-ndr",
            64,
            2048,
            "bf16",
            "megatron-core",
            ParallelPlan(tp=8, pp=8, dp=1, microbatch_size=1, virtual_stages=1, zero_stage=1, recompute="none"),
        ),
    ],
)
def test_overlap_not_slower_on_the_configuration_it_was_tuned_for(cat, model, system, gpus, seq, dtype, stack, plan):
    frame = plans_frame([plan])

    def step(tp_comm):
        job = make_job(model, system, gpus, seq, gpus, dtype, cat, stack=stack, overrides={"tp_comm": tp_comm})
        return evaluate_plans(job, frame)["step_time_s"].iloc[0]

    assert step(True) < step(False)
