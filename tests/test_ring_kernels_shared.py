"""The context-parallel ring's step kernels read from the operator-level part table
(hnplan.compute.parts.part_time_table(..., ring_kernels=...)) are the numbers ring_pair_times_s gives for the
layer's attention operator, bit for bit, so a search times them once; and a first search that takes them from
there gives the plans a search that times them on their own gives."""

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog import Catalog
from hnplan.compute.attention import ring_pair_times_s
from hnplan.compute.layer_ops import attention_op
from hnplan.compute.parts import part_time_table
from hnplan.planning.training import candidate_frame, evaluate_plans, make_job, stage_compute

# (model, system, dtype, stack): GQA and MLA attention, Hopper and Blackwell kernels, bf16 and fp8 GEMMs
JOBS = [
    ("llama3.1-8b", "hgx-h100-ib-ndr", "bf16", None),
    ("llama3.1-405b", "hgx-h100-ib-ndr", "fp8", None),
    ("llama3.1-70b", "gb200-nvl72", "bf16", None),
    ("deepseek-v3", "hgx-h800-ib", "fp8", "deepseek-v3-dualpipe"),
    ("mixtral-8x7b", "dgx-b200-ib-ndr", "bf16", None),
]
SHAPES = [(1, 1, 2, 1), (1, 8, 2, 1), (2, 4, 4, 1), (1, 8, 16, 1), (4, 2, 8, 1), (1, 1, 1, 1), (2, 8, 1, 1)]


@pytest.mark.parametrize(("model", "system", "dtype", "stack"), JOBS)
def test_the_part_table_gives_the_ring_kernels_of_ring_pair_times(model, system, dtype, stack):
    job = make_job(model, system, 1024, 8192, 1024, dtype, catalog=Catalog(), stack=stack)
    ch = job.choices
    shapes = [s for s in SHAPES if job.model.heads % s[1] == 0 and job.model.kv_heads % s[1] == 0]
    if job.model.moe is not None:  # an expert-parallel degree that divides the experts
        shapes = [(b, t, c, 8) for b, t, c, _ in shapes]
    ring: dict = {}
    names, table = part_time_table(
        job.model, job.kernel_acc, shapes, job.seq_len, dtype, ch.attention, ch.sequence_parallel, ch, ring_kernels=ring
    )
    plain_names, plain = part_time_table(
        job.model, job.kernel_acc, shapes, job.seq_len, dtype, ch.attention, ch.sequence_parallel, ch
    )
    assert names == plain_names and np.array_equal(table, plain)  # the part times themselves unchanged
    rings = sorted({s[:3] for s in shapes if s[2] > 1})
    assert sorted(ring) == rings  # every shape with a ring, none without
    b, t, n = (np.array([k[i] for k in rings], dtype=np.int64) for i in range(3))
    direct = ring_pair_times_s(job.kernel_acc, attention_op(job.model, b, job.seq_len, t, n))
    for i, key in enumerate(rings):
        assert ring[key] == tuple(float(x[i]) for x in direct)  # bit for bit


def test_no_ring_kernels_without_a_ring():
    job = make_job("llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, catalog=Catalog())
    ring: dict = {}
    part_time_table(job.model, job.kernel_acc, [(1, 1, 1, 1), (2, 8, 1, 1)], job.seq_len, ring_kernels=ring)
    assert ring == {}
    part_time_table(
        job.model, job.kernel_acc, [(1, 1, 4, 1)], job.seq_len, attention="unfused", ring_kernels=ring
    )  # the unfused attention's GEMMs: no fused ring kernels to read
    assert ring == {}


def test_a_first_search_reads_the_kernels_and_gives_the_same_plans(monkeypatch):
    case = ("llama3.1-8b", "hgx-h100-ib-ndr", 256, 8192, 512)  # CP searched, its exchange overlapped

    def search():
        stage_compute.clear_content_memo()
        job = make_job(*case, catalog=Catalog())
        plans = evaluate_plans(job, candidate_frame(job.model, job.system, *case[2:]))
        return job, plans, dict(stage_compute.ring_kernel_memo(job))

    job, shared, kernels = search()
    assert job.choices.cp_comm and len(kernels) > 0
    calls = []
    monkeypatch.setattr(  # the part table keeps the kernels to itself: the exchange times them on its own
        stage_compute,
        "part_time_table",
        lambda *a, ring_kernels=None, _f=stage_compute.part_time_table, **k: calls.append(1) or _f(*a, **k),
    )
    _, own, timed = search()
    assert calls and timed == kernels  # the same keys and numbers, bit for bit
    pd.testing.assert_frame_equal(shared, own, check_exact=True)
    stage_compute.clear_content_memo()
