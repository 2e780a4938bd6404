"""The candidates for the optimistic MLPerf Llama 3.1 8B rows at small tokens per GPU, sized with hnplan's own
numbers (docs/training.md, "Small tokens per GPU: the four candidates read against the recipes and the code"):
the figures the section quotes, each derived by hand here."""

import numpy as np
import pytest

import hnplan.planning.training.collectives as coll
from hnplan.catalog.runs import training_runs
from hnplan.compute._op import _Op
from hnplan.compute.context_parallel import ring_correction_kernels, ring_step_pair
from hnplan.compute.operators import operator_table
from hnplan.compute.tp_overlap import UB_LAYERS, overlap_chunks, ub_config
from hnplan.planning.validation import best_row, run_job

ROW = "mlperf-v60-nvidia-gb200-llama31-8b-1024"
LAYERS = 32


@pytest.fixture(scope="module")
def job_row():
    run = {r.id: r for r in training_runs()}[ROW]
    return run, run_job(run), best_row(run)


@pytest.fixture(scope="module")
def ops(job_row):
    run, job, row = job_row
    return operator_table(
        job.model,
        job.kernel_acc,
        "train",
        1,
        run.seq_len,
        tp=4,
        cp=4,
        dtype=run.dtype,
        recompute="none",
        stack=job.choices,
    )


def _op_us(ops, name: str, phase: str) -> float:
    sel = (ops["name"] == name) & (ops["phase"] == phase)
    return float(ops.loc[sel, "time_s"].iloc[0]) * 1e6


def test_ring_chunks_are_1024_tokens_and_the_waits_224(job_row, ops):
    _, job, row = job_row
    assert (int(row["tp"]), int(row["cp"]), int(row["dp"])) == (4, 4, 64)
    # 8,192 tokens over CP 4 in 2 cp = 8 load-balanced chunks of 1,024: the diagonal step is the rank's
    # 2,048 x 2,048, each off-diagonal one 1,024 x 2,048 or 2,048 x 1,024
    diag_fwd, step_fwd = _op_us(ops, "attention_cp_diagonal", "fwd"), _op_us(ops, "attention_cp_step", "fwd")
    # (the row's stack nemo-mlperf-v60: the GB200's cuDNN 9.17+ attention ceilings; 24.98 / 23.56 us on
    # nemo-mlperf-v50's 2025 kernels)
    assert (diag_fwd, step_fwd) == (pytest.approx(22.72, abs=0.05), pytest.approx(21.44, abs=0.05))
    # an off-diagonal step: 4 x 8 heads (32 / TP 4) x 1,024 x 2,048 x 128 = 8.59 GFLOP in 21.44 us, 401 TFLOP/s
    assert 4 * 8 * 1024 * 2048 * 128 / (step_fwd * 1e-6) / 1e12 == pytest.approx(400.6, abs=0.5)
    # per layer cp + 2 = 6 correction kernels forward and 3 cp + 1 = 13 backward: 19 x 32 = 608 a step
    assert ring_correction_kernels(4) == (6, 13)
    assert int(ops.loc[ops["name"] == "attn_cp_correction", "count"].sum()) == 19 * LAYERS
    # the exchanges a layer, each awaited before the next step: cp - 1 forward, cp backward; 7 x 32 = 224
    assert LAYERS * ((4 - 1) + 4) == 224


def test_ring_pair_shapes():
    op = _Op(
        "attention", "attention", "dense-layer", s_q=2048.0, s_kv=8192.0, causal=True, hq=8, d_qk=128, d_v=128, b=1
    )
    diag, step = ring_step_pair(op, 4)
    assert (diag.s_q, diag.s_kv) == (2048, 2048)
    assert sorted((step.s_q, step.s_kv)) == [1024, 2048]


def test_userbuffers_steps_and_amax_all_reduces(job_row):
    _, job, _ = job_row
    cfg = ub_config(job.choices.tp_overlap_cfg)
    layers = sorted(set(UB_LAYERS.values()))
    # GB200, TP 4: the QKV and FC1 all-gathers aggregated (4 / 2 = 2 steps each), the output-projection and FC2
    # reduce-scatters ring exchange (4 each): 12 forward; the two data-gradient all-gathers aggregated: 4 backward
    tp4 = {name: int(overlap_chunks(cfg, name, 4, "gb200")) for name in layers}
    assert tp4 == {"qkv_fprop": 2, "fc1_fprop": 2, "proj_fprop": 4, "fc2_fprop": 4, "proj_dgrad": 2, "fc2_dgrad": 2}
    assert sum(tp4.values()) == 16
    # TP 2 (the 512-GPU rows): ring exchange, 2 each: 12
    assert sum(int(overlap_chunks(cfg, name, 2, "gb200")) for name in layers) == 12
    # 16 ring steps and 4 bulk overlaps a layer: 640 a step; the 28.2 ms gap over them is 44 us each (26.9 ms and
    # 42 us on nemo-mlperf-v50)
    assert 28.2e3 / (LAYERS * (16 + 4)) == pytest.approx(44.1, abs=0.1)
    # FP8 current scaling: 2 amax all-reduces a pass, forward and backward, over TP 4 on NVLink without NVLS
    amax = float(coll.collective_s(job, "allreduce", np.array([coll.AMAX_BYTES]), [4], 1)[0])
    assert amax * 1e6 == pytest.approx(10.2, abs=0.05)
    assert LAYERS * 4 * amax * 1e3 == pytest.approx(1.31, abs=0.01)


def test_output_projection_chunk_pipeline(job_row, ops):
    _, job, _ = job_row
    # the output projection's reduce-scatter in 4 ring-exchange chunks of 512 rows: each chunk's GEMM 5.75 us, its
    # 512 x 4,096 bf16 partial sum (4 MiB) sent to the next TP rank in 7.94 us; a pipeline of the chunks takes
    # g + 3 max(g, s) + s against 4 g for the GEMMs alone: 14.5 us more
    g = _op_us(ops, "o_proj", "fwd")
    s = float(coll.collective_s(job, "sendrecv", np.array([512 * 4096 * 2.0]), [4], [1])[0]) * 1e6
    assert (g, s) == (pytest.approx(5.75, abs=0.01), pytest.approx(7.94, abs=0.01))
    assert g + 3 * max(g, s) + s - 4 * g == pytest.approx(14.5, abs=0.1)
    # FC2: its 9.77 us chunks outlast the send, so only the last send shows
    g2 = _op_us(ops, "mlp_down", "fwd")
    assert g2 + 3 * max(g2, s) + s - 4 * g2 == pytest.approx(s)
