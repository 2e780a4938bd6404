"""The per-step terms of the interleaved 1F1B schedule: the gradient reduction of each model chunk behind the
cool-down's later backwards, the bubble through the other stages, each stage's own warm-up
(docs/training.md, "DeepSeek-V3's per-step constant, GB300 against GB200")."""

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.planning.training import moe
from hnplan.planning.training.dp_collectives import interleaved_grad_exposed


def _plans(pp, v, m):
    return pd.DataFrame({"pp": [pp], "virtual_stages": [v], "num_microbatches": [m]})


def test_grad_reduction_per_chunk_by_hand():
    # GPT-3 175B as MLPerf v4.0 ran it on 10,752 H100: PP 6, v 8, 6 micro-batches; say 0.5 s of gradient
    # reduce-scatter and 0.3 s of backward a micro-batch on the stage. The chunks' reductions (0.0625 s each)
    # start 6 chunk backwards (6 x 0.0375 = 0.225 s) apart: all but the last chunk's hide, and that one behind
    # its own backward (0.0375 s): (0.5 - 0.3) / 8 = 0.025 s, where one micro-batch's backward alone leaves 0.2 s
    got = interleaved_grad_exposed(_plans(6, 8, 6), 0.5, 0.3)[0]
    assert got == pytest.approx(0.025)
    # a reduction longer than the whole cool-down: 2.0 s against (1 + 7 x 6) / 8 x 0.3 = 1.6125 s of backwards
    assert interleaved_grad_exposed(_plans(6, 8, 6), 2.0, 0.3)[0] == pytest.approx(2.0 - 1.6125)
    # fewer micro-batches than stages: the groups of the cool-down hold m, not p, chunk backwards
    assert interleaved_grad_exposed(_plans(8, 2, 4), 1.0, 0.2)[0] == pytest.approx(1.0 - (1 + 4) / 2 * 0.2)


@settings(max_examples=60, deadline=None)
@given(
    pp=st.integers(1, 16),
    v=st.integers(1, 8),
    m=st.integers(1, 64),
    t=st.floats(0.0, 5.0),
    b=st.floats(0.0, 1.0),
)
def test_grad_reduction_never_exposes_more_than_one_backward_leaves(pp, v, m, t, b):
    # exposed time is the positive part (the caller floors it at one bucket)
    got = max(interleaved_grad_exposed(_plans(pp, v, m), t, b)[0], 0.0)
    one = interleaved_grad_exposed(_plans(pp, 1, m), t, b)[0]
    assert one == pytest.approx(t - b)  # without chunks: behind the last micro-batch's backward
    assert max(t - b, 0.0) / v - 1e-12 <= got <= max(t - b, 0.0) + 1e-12  # the last chunk's share at least
    if v > 1:  # more chunks hide no less
        assert max(interleaved_grad_exposed(_plans(pp, v - 1, m), t, b)[0], 0.0) >= got - 1e-12


def test_each_stage_its_own_warm_up():
    # Megatron-Core: 2 (p - 1 - r) + (v - 1) p + 1 warm-up chunk forwards on rank r with the all-to-all overlap;
    # p 4, v 4, 8 micro-batches (32 chunk passes): 19 on the first stage, 15 on rank 2, 13 on the last
    plans = _plans(4, 4, 8)
    shares = [float(moe.ep_overlap_share(plans, 8, s)[0]) for s in ("first", "middle", "last")]
    assert shares == pytest.approx([1 - 19 / 32, 1 - 15 / 32, 1 - 13 / 32])
    # without virtual stages every stage keeps the first's count
    flat = _plans(4, 1, 8)
    assert {float(moe.ep_overlap_share(flat, 8, s)[0]) for s in ("first", "middle", "last")} == {1 - 3 / 8}
