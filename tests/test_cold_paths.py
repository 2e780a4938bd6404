"""The work a first ``compare`` and a first ``claims`` do without their caches, trimmed without changing a number:
the trust notes' runs evaluated without memory where it cannot change the pick, the pruned search's rows taking
their memory from the bound pass, and the command line's garbage-collector threshold."""

import subprocess
import sys

import pytest

from hnplan.catalog.runs import training_runs
from hnplan.errors import PlanRuleError
from hnplan.planning import validation
from hnplan.planning.training import candidate_arrays, components, make_job, prune, search_best
from tests.clitext import gemm_cli_probe


def test_predicted_is_best_rows_metric_on_every_published_run(cat):
    """Every published run (single fixed plans, searched ones, offloading stacks): the trust notes' number is
    the validation table's, bit for bit."""
    runs = training_runs()
    lone = 0
    for run in runs:
        full = validation.best_row(run, cat)
        assert validation.predicted(run, cat) == float(full[run.metric]), run.id
        lone += len(candidate_arrays(validation.run_job(run, cat), run.fixed)[0]["tp"]) == 1
    assert lone > len(runs) / 2  # most runs state their whole plan: those skip the memory model


def test_a_stated_plan_is_the_searchs_one_candidate(cat):
    """Every published run whose stated plan leaves one candidate, bar those that leave a knob of several values
    free: its columns without the search's grid, the same columns, order, dtypes and numbers."""
    stated = lone = 0
    for run in training_runs():
        job = validation.run_job(run, cat)
        cols, modes = candidate_arrays(job, run.fixed)
        got = validation.stated_candidate(job, run.fixed)
        if len(cols["tp"]) == 1 and {"zero_stage", "recompute"} <= set(run.fixed):
            lone += 1
            assert got is not None, run.id
        if got is None:
            continue
        stated += 1
        assert list(got[0]) == list(cols), run.id
        for k, a in got[0].items():
            assert a.dtype == cols[k].dtype and a.tolist() == cols[k].tolist(), (run.id, k)
        assert [str(m) for m in got[1]] == [str(m) for m in modes], run.id
    assert stated == lone > 100


def test_stated_candidate_leaves_the_rest_to_the_search(cat):
    job = make_job("llama3.1-70b", "hgx-h100-ib-ndr", 1024, 8192, 512, "bf16", cat, stack="megatron-core")
    plan = dict(tp=8, pp=4, cp=1, zero_stage=1, recompute="none", microbatch_size=1)
    # pp 4: the stack lays out its stages itself, so each of the 11 virtual-stage counts runs (4 x 20 = 80 layers)
    assert len(candidate_arrays(job, plan)[0]["tp"]) == 11
    assert validation.stated_candidate(job, plan) is None
    # pp 1: nothing to interleave, one virtual stage only: the one candidate, dp = 1024 / 8 and 512 / 128 micro-batches
    cols, modes = validation.stated_candidate(job, {**plan, "pp": 1})
    assert {k: a.tolist() for k, a in cols.items()} == {
        **{k: a.tolist() for k, a in candidate_arrays(job, {**plan, "pp": 1})[0].items()},
        "dp": [128],
        "virtual_stages": [1],
        "num_microbatches": [4],
    }
    assert validation.stated_candidate(job, {**plan, "pp": 1, "virtual_stages": 2}) is None  # breaks a rule
    with pytest.raises(PlanRuleError, match="needs pipeline parallelism"):
        candidate_arrays(job, {**plan, "pp": 1, "virtual_stages": 2})  # which the search explains
    assert validation.stated_candidate(job, {**plan, "virtual_stages": 5, "dp": 16}) is None  # 8 x 4 x 16 != 1024
    assert validation.stated_candidate(job, {**plan, "virtual_stages": 5, "tp": [8]}) is None  # a list: searched
    moe = make_job("deepseek-v3", "hgx-h100-ib-ndr", 1024, 4096, 1024, "bf16", cat, stack="megatron-core")
    # tp 2 with etp free: etp = tp and the folded etp = 1, two candidates
    assert validation.stated_candidate(moe, dict(tp=2, pp=16, cp=1, ep=64, zero_stage=1, recompute="full")) is None


def test_predicted_skips_the_memory_model_for_a_lone_candidate_and_prunes_a_search(cat, monkeypatch):
    calls, pruned = [], []
    real, real_rows = components.memory_per_gpu, prune.pruned_rows
    monkeypatch.setattr(components, "memory_per_gpu", lambda job, df: calls.append(len(df)) or real(job, df))
    monkeypatch.setattr(validation, "pruned_rows", lambda *a: pruned.append(len(a[1]["tp"])) or real_rows(*a))
    runs = {r.id: r for r in training_runs()}
    fixed = runs["dgxc2409-h100-llama31-70b-2048-bf16"]  # its source states the whole plan: one candidate
    searched = runs["dgxc2409-h100-llama31-70b-64-bf16-searched"]  # the plan searched: thousands
    validation.predicted(fixed, cat)
    assert calls == []
    assert pruned == []
    validation.predicted(searched, cat)
    assert len(calls) == 1 and calls[0] > prune.PRUNE_FROM  # the bound pass; the evaluated rows read it
    assert pruned == calls


def test_a_pruned_search_computes_memory_once(cat, monkeypatch):
    """The bound pass computes every candidate's memory; the evaluated rows read theirs from it (the plans and
    the estimates, memory breakdown included, are the full ranking's: tests/test_training_prune.py)."""
    job = make_job("llama3.1-70b", "hgx-h100-ib-ndr", 1024, 8192, 512, "bf16", cat, stack="megatron-core")
    calls = []
    real = components.memory_per_gpu
    monkeypatch.setattr(components, "memory_per_gpu", lambda job, df: calls.append(len(df)) or real(job, df))
    monkeypatch.setattr(prune, "PRUNE_PROBE", 16)  # a small probe: the second evaluation runs too
    (est,), searched, _ = search_best(job)
    assert calls == [searched] and searched > prune.PRUNE_FROM
    assert est.memory_breakdown_gib["total_gib"] > 0


GC_PROBE = gemm_cli_probe(
    "GC_YOUNG_THRESHOLD, *before, *gc.get_threshold()",
    before="from hnplan.cli import GC_YOUNG_THRESHOLD\nbefore = gc.get_threshold()",
)


@pytest.mark.filterwarnings("error")
def test_the_command_line_collects_young_garbage_less_often():
    out = subprocess.run([sys.executable, "-c", GC_PROBE], capture_output=True, text=True, check=True)
    young, *rest = (int(x) for x in out.stdout.split())
    before, after = tuple(rest[:3]), tuple(rest[3:])
    assert young == 100_000 and before[0] == 700  # CPython's default before main
    assert after == (young, *before[1:])  # the older generations' thresholds kept
