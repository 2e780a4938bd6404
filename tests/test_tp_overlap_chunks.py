"""Transformer Engine's userbuffers TP overlap runs the overlapped GEMMs in chunks
(:mod:`hnplan.compute.tp_overlap`): the rows of a stack with ``tp_comm``, derived by hand for Llama 3.1 8B at
TP 2 on the 2,048-token slice of MLPerf v5.1's 512-GB200 run (TP 2, CP 4, sequence 8,192), whose userbuffers
configuration (``gb200tp2mbs1.yaml``, the nemo-mlperf-v50 stack's GB200 TP 2 entry) runs all six chunkable
GEMMs as a ring exchange: ``tp`` = 2 chunks each."""

import numpy as np
import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.gemm import gemm_device_time_s
from hnplan.compute.operator_rows import _raw_rows, _times

LAYERS = 32
H, QKV_N, FFN = 4096, (32 + 2 * 8) * 128 // 2, 14336 // 2  # TP 2: 16 query and 4 KV heads of 128, half the FFN
TOKENS = 8192 // 4  # CP 4


def _rows(cat, tp_comm, tp=2, cp=4):
    m, acc = cat.model("llama3.1-8b"), cat.accelerator("gb200")
    ch = StackChoices(tp_comm=tp_comm, fp8_recipe="current", tp_overlap_cfg=cat.stack("nemo-mlperf-v50").tp_overlap_cfg)
    rows = _raw_rows(m, "train", 1, 8192, 0, tp, cp, 1, "fp8", "none", "executed", acc=acc, stack=ch)
    return {(r[0], r[3]): r for r in rows}, rows, acc


def test_overlapped_gemms_run_as_tp_chunks(cat):
    on, _, _ = _rows(cat, True)
    off, _, _ = _rows(cat, False)
    # the QKV forward: 2 chunks of 1,024 tokens a layer, each reading the whole fp8 weight
    name, scope, kind, phase, count, flops, nbytes, m, n, k, groups = on[("qkv_proj", "fwd")]
    assert (count, m, n, k) == (2 * LAYERS, TOKENS / 2, QKV_N, H)
    assert flops == pytest.approx(2 * TOKENS * QKV_N * H / 2)
    w = H * QKV_N * 1.0  # fp8 weight [bytes]
    assert nbytes == pytest.approx((TOKENS * H * 1.0 + TOKENS * QKV_N * 2.0) / 2 + w)
    # whole without the overlap
    assert off[("qkv_proj", "fwd")][4:8] == (
        LAYERS,
        2 * TOKENS * QKV_N * H,
        TOKENS * H + TOKENS * QKV_N * 2 + w,
        TOKENS,
    )
    # the row-parallel data gradients (all-gathered output gradient) chunked; the column-parallel ones and
    # every weight gradient (bulk overlap) whole
    assert on[("o_proj", "bwd-data")][4] == 2 * LAYERS and on[("mlp_down", "bwd-data")][4] == 2 * LAYERS
    assert on[("o_proj", "bwd-data")][7] == TOKENS / 2 and on[("mlp_down", "bwd-data")][7] == TOKENS / 2
    for gemm in ("qkv_proj", "mlp_up"):
        assert on[(gemm, "bwd-data")] == off[(gemm, "bwd-data")]
    for gemm in ("qkv_proj", "o_proj", "mlp_up", "mlp_down"):
        assert on[(gemm, "bwd-weight")] == off[(gemm, "bwd-weight")]
        assert on[(gemm, "fwd")][5] * on[(gemm, "fwd")][4] == pytest.approx(off[(gemm, "fwd")][5] * LAYERS)
    # the LM head and the rows other than the overlapped GEMMs unchanged
    assert on[("lm_head", "fwd")] == off[("lm_head", "fwd")]
    assert len(on) == len(off)


def test_chunked_time_is_the_law_per_chunk(cat):
    """The step's GEMM time grows by 32 layers x sum over the chunked GEMMs of 2 t(m / 2) - t(m) (GEMM law)."""
    on, rows_on, acc = _rows(cat, True)
    off, rows_off, _ = _rows(cat, False)
    t_on = (_times(rows_on, acc, "fp8")[2] * np.array([r[4] for r in rows_on])).sum()
    t_off = (_times(rows_off, acc, "fp8")[2] * np.array([r[4] for r in rows_off])).sum()
    shapes = [(QKV_N, H), (H, H // 2), (2 * FFN, H), (H, FFN), (H // 2, H), (FFN, H)]  # 4 fwd, 2 dgrad
    extra = 0.0
    for n, k in shapes:
        whole = gemm_device_time_s(acc, "fp8", TOKENS, n, k, 1.0, TOKENS * k + TOKENS * n * 2 + n * k)[2]
        half = gemm_device_time_s(acc, "fp8", TOKENS / 2, n, k, 1.0, (TOKENS * k + TOKENS * n * 2) / 2 + n * k)[2]
        extra += 2 * half - whole
    assert t_on - t_off == pytest.approx(LAYERS * extra, rel=1e-9)
    assert 0.5e-3 < t_on - t_off < 1.5e-3  # about 0.8 ms of the 89 ms step: kernel overheads and smaller tiles


def test_no_chunks_without_tensor_parallelism(cat):
    on, _, _ = _rows(cat, True, tp=1, cp=1)
    off, _, _ = _rows(cat, False, tp=1, cp=1)
    assert on == off
