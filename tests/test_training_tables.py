"""The training planner's tables for the reports: the top-candidates table shows distinct outcomes."""

import pandas as pd

import hnplan.planning.training_tables as tables
from hnplan.planning.training import search_plans
from hnplan.planning.training_tables import top_candidates


def test_top_candidates_fold_plans_with_the_same_numbers(cat, monkeypatch):
    # Llama 3.1 8B on 144 GB200, 288 sequences of 4,096 tokens. Context parallelism runs as a ring of cp
    # kernels, so DP72 CP2 (micro-batches of 4) and DP36 CP4 (of 8) no longer time the same; the search
    # is given a twin of its fastest plan that differs only in those knobs, as a plan whose differences
    # the model does not price would be: one row, the twin named in ``same_numbers_as``
    real = search_plans("llama3.1-8b", "gb200-nvl72", 144, 4096, 288, catalog=cat)
    same = ["zero_stage", "recompute"]
    cp2 = real[(real["dp"] == 72) & (real["cp"] == 2) & (real["microbatch_size"] == 4)].iloc[0]
    cp4 = real[(real["dp"] == 36) & (real["cp"] == 4) & (real["microbatch_size"] == 8)]
    cp4 = cp4[(cp4[same] == cp2[same]).all(axis=1)].iloc[0]
    assert cp4["step_time_s"] > cp2["step_time_s"]  # twice the ring steps, each smaller
    best = real[real["fits"]].iloc[0]
    twin = best.copy()
    twin[["dp", "cp", "microbatch_size"]] = [best["dp"] // 2, best["cp"] * 2, best["microbatch_size"] * 2]
    at = real.index.get_loc(best.name) + 1
    with_twin = pd.concat([real.iloc[:at], twin.to_frame().T.astype(real.dtypes), real.iloc[at:]], ignore_index=True)
    monkeypatch.setattr(tables, "search_plans", lambda *a, **k: with_twin)
    top = top_candidates("llama3.1-8b", "gb200-nvl72", 144, 4096, 288, catalog=cat, k=8)
    assert len(top) == 8
    key = list(zip(top["step_time_s"].round(6), top["memory_per_gpu_gib"].round(3)))
    assert len(set(key)) == len(key)  # no two rows a reader cannot tell apart
    dp, cp, mb = int(twin["dp"]), int(twin["cp"]), int(twin["microbatch_size"])
    assert top.iloc[0]["same_numbers_as"] == f"DP{dp} CP{cp} mb {mb}"
    assert top.iloc[0]["step_time_s"] == best["step_time_s"]
    # a plan with no twin says so with an empty cell
    assert (top["same_numbers_as"] == "").any()
