"""The training planner's tables for the reports: the top-candidates table shows distinct outcomes."""

from hnplan.planning.training import search_plans
from hnplan.planning.training_tables import top_candidates


def test_top_candidates_fold_plans_with_the_same_numbers(cat):
    # Llama 3.1 8B on 144 GB200, 288 sequences of 4,096 tokens: DP72 CP2 with micro-batches of 4 and
    # DP36 CP4 with micro-batches of 8 give every GPU the same work (4 x 4096 / 2 = 8 x 4096 / 4 = 8,192
    # tokens per micro-batch, one micro-batch per step) and, under ZeRO-3 sharded over DP x CP = 144,
    # the same memory: one row, the twin named in ``same_numbers_as``
    top = top_candidates("llama3.1-8b", "gb200-nvl72", 144, 4096, 288, catalog=cat, k=8)
    assert len(top) == 8
    key = list(zip(top["step_time_s"].round(6), top["memory_per_gpu_gib"].round(3)))
    assert len(set(key)) == len(key)  # no two rows a reader cannot tell apart
    row = top[(top["dp"] == 72) & (top["cp"] == 2) & (top["zero_stage"] == 3)].iloc[0]
    assert row["same_numbers_as"] == "DP36 CP4 mb 8"
    df = search_plans("llama3.1-8b", "gb200-nvl72", 144, 4096, 288, catalog=cat)
    twin = df[(df["dp"] == 36) & (df["cp"] == 4) & (df["microbatch_size"] == 8) & (df["zero_stage"] == 3)]
    twin = twin[twin["recompute"] == row["recompute"]].iloc[0]
    assert twin["step_time_s"] == row["step_time_s"]
    assert twin["memory_per_gpu_bytes"] / 2**30 == row["memory_per_gpu_gib"]
    # a plan with no twin says so with an empty cell
    assert (top["same_numbers_as"] == "").any()
