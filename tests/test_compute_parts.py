"""The training part times build each operator row once for many micro-batch shapes (the sizes as arrays
over the shapes): every number equals the row built for one shape at a time, bit for bit, and a search's
shapes timed together equal each shape timed alone."""

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute import attention_op, ring_step_times_s
from hnplan.compute.fp8_recipes import needs_transpose
from hnplan.compute.operator_rows import _raw_rows
from hnplan.compute.parts import training_part_times

# (model, system, dtype, choices, shapes (micro-batch, tp, cp, ep), sequence)
CASES = {
    # fp8 delayed scaling on a TN-only chip: a sequence-sharded input gets its own transpose kernel (tp > 1)
    "8b-h100-fp8": (
        "llama3.1-8b",
        "hgx-h100-ib-ndr",
        "fp8",
        {},
        [(1, 1, 1, 1), (2, 2, 1, 1), (1, 8, 2, 1), (4, 4, 4, 1)],
    ),
    # TP communication overlapped (userbuffers): the overlapped GEMMs as tp chunks, tp = 1 and tp > 1 in one set
    "8b-gb200-fp8-tp-overlap": (
        "llama3.1-8b",
        "gb200-nvl72",
        "fp8",
        {"tp_comm": True, "fp8_recipe": "current"},
        [(1, 1, 1, 1), (1, 2, 4, 1), (2, 4, 1, 1), (1, 2, 1, 1)],
    ),
    "dsv3-h800-mla": (
        "deepseek-v3",
        "hgx-h800-ib",
        "bf16",
        {},
        [(1, 1, 1, 8), (2, 2, 1, 64), (1, 8, 2, 32), (1, 4, 4, 8)],
    ),
    "1.7b-unfused": (
        "megatron-1.7b",
        "dgx-a100-hdr",
        "bf16",
        {"attention": "unfused"},
        [(1, 1, 1, 1), (8, 2, 1, 1), (4, 4, 1, 1)],
    ),
    "qwen3-blockwise": (
        "qwen3-30b-a3b",
        "hgx-h100-ib-ndr",
        "fp8",
        {"fp8_recipe": "blockwise", "recompute_modules": ("moe_act", "core_attn")},
        [(1, 1, 1, 8), (2, 2, 1, 16), (1, 4, 2, 4)],
    ),
}


def _setup(cat, name):
    model, system, dtype, over, shapes = CASES[name]
    ch = StackChoices(**over)
    return cat.model(model), cat.accelerator(cat.system(system).accelerator), dtype, ch, shapes


@pytest.mark.parametrize("name", list(CASES))
def test_rows_over_shapes_equal_rows_of_each_shape(cat, name):
    m, acc, dtype, ch, shapes = _setup(cat, name)
    kw = dict(attention=ch.attention, sequence_parallel=True, acc=acc, stack=ch)
    # one row set per cp; tp = 1 apart only where a sequence-sharded fp8 input has its own transpose kernel
    split = dtype == "fp8" and needs_transpose(acc, ch.fp8_recipe)
    for cp, sharded in sorted({(s[2], split and s[1] > 1) for s in shapes}):
        group = [s for s in shapes if s[2] == cp and (split and s[1] > 1) == sharded]
        mb, tp = (np.array([s[i] for s in group], dtype=np.int64) for i in (0, 1))
        wide = _raw_rows(m, "train", mb, 4096, 0, tp, cp, 1, dtype, "full", "executed", **kw)
        for j, (b, t, _, _) in enumerate(group):
            one = _raw_rows(m, "train", b, 4096, 0, t, cp, 1, dtype, "full", "executed", **kw)
            assert [r[:4] for r in wide] == [r[:4] for r in one]
            got = np.array([np.broadcast_to(v, len(group))[j] for r in wide for v in r[4:]])
            assert np.array_equal(got, np.array([v for r in one for v in r[4:]], dtype=float))


@pytest.mark.parametrize("name", list(CASES))
def test_shapes_together_equal_each_shape_alone(cat, name):
    m, acc, dtype, ch, shapes = _setup(cat, name)
    frame = pd.DataFrame(shapes, columns=["microbatch_size", "tp", "cp", "ep"])
    together = training_part_times(m, acc, frame, 4096, dtype, ch.attention, True, ch)
    alone = pd.concat(
        [training_part_times(m, acc, frame.iloc[[i]], 4096, dtype, ch.attention, True, ch) for i in range(len(frame))]
    )
    assert list(together.columns) == list(alone.columns)
    assert np.array_equal(together.to_numpy(), alone.to_numpy())
    assert (together["dense_fwd"] > 0).all() or (together["moe_fwd"] > 0).all()


def test_ring_kernels_over_shapes_equal_each_shape(cat):
    m, acc = cat.model("llama3.1-70b"), cat.accelerator("h100-sxm")
    mb, tp = np.array([1, 2, 1, 4]), np.array([1, 2, 8, 8])
    for cp in (2, 4):
        fwd, bwd = ring_step_times_s(acc, attention_op(m, mb, 8192, tp, cp))
        assert fwd.shape == bwd.shape == (cp, 4)
        for j in range(4):
            f1, b1 = ring_step_times_s(acc, attention_op(m, int(mb[j]), 8192, int(tp[j]), cp))
            assert np.array_equal(fwd[:, j], f1) and np.array_equal(bwd[:, j], b1)


@pytest.mark.parametrize("name", list(CASES))
def test_row_segments_interleave_into_the_rows(cat, name):
    # the other operators' rows built once over shapes of every cp (core=False) and the attention cores' rows of
    # the cp = 1 and the ring shapes (core=True) interleave, segment by segment, into each set's whole rows: the
    # same labels in the same order and every number bit for bit (the order each shape's part sums add them in)
    m, acc, dtype, ch, shapes = _setup(cat, name)
    kw = dict(attention=ch.attention, sequence_parallel=True, acc=acc, stack=ch, occurrence=True)
    split = dtype == "fp8" and needs_transpose(acc, ch.fp8_recipe)
    for sharded in (False, True):
        group = [s for s in shapes if (split and s[1] > 1) == sharded]
        if not group:
            continue
        mb, tp, cp = (np.array([s[i] for s in group], dtype=np.int64) for i in (0, 1, 2))
        other = _raw_rows(m, "train", mb, 4096, 0, tp, cp, 1, dtype, "full", "executed", **kw, core=False)
        assert all(not seg for seg in other[1::2])  # the cores' segments left empty
        for ring in (False, True):
            at = np.flatnonzero((cp > 1) == ring)
            if not len(at):
                continue
            c = cp[at] if ring else 1
            cores = _raw_rows(m, "train", mb[at], 4096, 0, tp[at], c, 1, dtype, "full", "executed", **kw, core=True)
            whole = _raw_rows(m, "train", mb[at], 4096, 0, tp[at], c, 1, dtype, "full", "executed", **kw)
            assert len(cores) == len(other) and all(not seg for seg in cores[0::2]) and any(cores[1::2])
            merged = [(r, i % 2 == 0) for i in range(len(other)) for r in (other[i] if i % 2 == 0 else cores[i])]
            assert [r[:4] for r, _ in merged] == [r[:4] for r in whole]
            for (r, over_all), w in zip(merged, whole):
                got = [np.broadcast_to(v, len(group))[at] if over_all else np.broadcast_to(v, len(at)) for v in r[4:]]
                assert np.array_equal(
                    np.array(got, dtype=float), np.array([np.broadcast_to(v, len(at)) for v in w[4:]])
                )
