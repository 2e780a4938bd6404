"""The pruned best-plan search: the compute-only bound never exceeds a candidate's step time, and the
pruned search returns the plans, values and counts of the full ranking."""

import numpy as np
import pytest

from hnplan.planning.training import evaluate as ev
from hnplan.planning.training import make_job, prune, rank_plans, search, search_best

JOBS = [  # (model, system, GPUs, sequence, batch [sequences], stack): dense and MoE, NVL72 and 8-GPU servers
    ("megatron-18.4b", "gb200-nvl72", 576, 2048, 576, None),
    ("megatron-1t", "gb200-nvl72", 2304, 2048, 2304, None),
    ("llama3.1-70b", "hgx-h100-ib-ndr", 1024, 8192, 512, "megatron-core"),
    ("deepseek-v3", "hgx-h800-ib", 2048, 4096, 15360, "deepseek-v3-dualpipe"),
]


def _job(cat, model, system, gpus, seq, batch, stack):
    return make_job(model, system, gpus, seq, batch, "bf16", cat, stack=stack)


@pytest.mark.parametrize("spec", JOBS, ids=[j[0] for j in JOBS])
def test_bound_is_below_every_step_time(cat, spec):
    job = _job(cat, *spec)
    assert prune.prunable(job)
    cands = search._search_candidates(job, None)
    _, plans = ev._plan_columns(job, cands)
    bound, mem, fits = prune.step_lower_bound(job, plans)
    full = ev.evaluate_plans(job, cands)
    step = full["step_time_s"].to_numpy()
    assert np.all(bound <= step)
    assert np.array_equal(mem, full["memory_per_gpu_bytes"].to_numpy())
    assert np.array_equal(fits, full["fits"].to_numpy())
    # the bound is worth having: most fitting candidates lie above the fastest plan's step time
    assert np.mean(bound[fits] > step[fits].min()) > 0.5


@pytest.mark.parametrize("spec", JOBS, ids=[j[0] for j in JOBS])
def test_pruned_search_equals_the_full_ranking(cat, spec, monkeypatch):
    job = _job(cat, *spec)
    n = len(search._search_candidates(job, None))
    monkeypatch.setattr(prune, "PRUNE_PROBE", 16)  # a small probe: the second evaluation runs too
    monkeypatch.setattr(prune, "PRUNE_FROM", min(n - 1, prune.PRUNE_FROM))
    ranked = rank_plans(job)
    for top in (1, 24):  # fewer and more plans than the probe evaluates
        ests, searched, feasible = search_best(job, top=top)
        assert (searched, feasible) == (ranked.attrs["searched"], ranked.attrs["feasible"])
        assert [e.step_time_s for e in ests] == ranked["step_time_s"].head(top).tolist()
    for est, (_, row) in zip(ests, ranked.head(24).iterrows(), strict=True):
        assert est == ev.estimate_from_row(job, row)
