"""A pass's rows selected by name (operator_columns(only=...)) carry the numbers they have in the whole pass,
so the serving planner can re-time the busiest expert-parallel rank's routed experts without the rest."""

import numpy as np
import pytest

from hnplan.compute import operator_columns
from hnplan.compute.operators import replace_rows
from hnplan.compute.part_sums import ROUTED_OPS

TIMED = ("flops", "bytes", "compute_time_s", "memory_time_s", "time_s")


@pytest.mark.parametrize(
    "model, acc, tokens, ep",
    [("deepseek-v3", "h100-sxm", 256, 8), ("qwen3-235b-a22b", "h200-sxm", 1_000, 8), ("mixtral-8x7b", "b200", 37, 4)],
)
def test_the_routed_rows_alone_equal_the_whole_pass_rows(cat, model, acc, tokens, ep):
    m, a = cat.model(model), cat.accelerator(acc)
    whole = operator_columns(m, a, "decode", tokens, 2_048, kv_len=2_048, ep=ep)
    sub = operator_columns(m, a, "decode", tokens, 2_048, kv_len=2_048, ep=ep, only=ROUTED_OPS)
    routed = np.array([str(n).startswith(ROUTED_OPS) for n in whole["name"]])
    assert routed.sum() == len(sub["name"]) > 0
    assert list(whole["name"][routed]) == list(sub["name"])
    for k in TIMED:
        assert np.array_equal(whole[k][routed], sub[k])


def test_replace_rows_swaps_in_the_busier_pass_and_nothing_else(cat):
    m, a = cat.model("deepseek-v3"), cat.accelerator("h100-sxm")
    mean = operator_columns(m, a, "decode", 256, 2_048, kv_len=2_048, ep=8)
    busy = operator_columns(m, a, "decode", 300, 2_048, kv_len=2_048, ep=8)
    only = operator_columns(m, a, "decode", 300, 2_048, kv_len=2_048, ep=8, only=ROUTED_OPS)
    routed = np.array([str(n).startswith(ROUTED_OPS) for n in mean["name"]])
    out = replace_rows(mean, only, ROUTED_OPS)
    for k in TIMED:  # what numpy.where over the two whole passes gives
        assert np.array_equal(out[k], np.where(routed, busy[k], mean[k]))
    with pytest.raises(ValueError, match="replacement rows"):
        replace_rows(mean, mean, ROUTED_OPS)
