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


def test_training_verdict_names_the_step_part_in_the_field_s_terms():
    """The part of the step that separates a slower design is named as the breakdown names it ("PP
    bubble", "TP communication exposed"), not as its column (it read "pp bubble"). By hand: B's PP bubble
    is 0.30 - 0.10 = +0.20 s longer than A's, its compute only +0.05 s; B's throughput is 3/4 of A's."""
    from hnplan.planning.training_tables import training_verdict

    row = dict(status="ok", mfu=0.4, tp=8, pp=4, dp=8, cp=1, ep=1, microbatch_size=1, num_microbatches=8)
    row.update(virtual_stages=1, zero_stage=1, recompute="none", t_tp_comm_exposed_s=0.0)
    best = pd.DataFrame(
        [
            {**row, "system": "a", "tokens_per_s": 4.0e6, "t_compute_s": 1.00, "t_pp_bubble_s": 0.10},
            {**row, "system": "b", "tokens_per_s": 3.0e6, "t_compute_s": 1.05, "t_pp_bubble_s": 0.30},
        ]
    )
    text = training_verdict(best)
    assert "b reaches 75% of that; its largest extra step time is PP bubble (+0.20 s per step)." in text
