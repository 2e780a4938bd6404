"""The deadline search of hnplan size reads each count's plan back from the on-disk prediction cache on a second
search of the same job: the same answer, no count planned again, and a count without a plan keeps its reason's
class (PlanRuleError: a layout rule, the next count; InfeasiblePlan: does not fit, double)."""

import pytest

from hnplan.errors import InfeasiblePlan, PlanRuleError
from hnplan.planning import sizing_search
from hnplan.planning.prediction_cache import cached_point, point_digest

JOB = ("llama3.1-70b", "hgx-h100-ib-ndr", 15e12, 60.0, 8192, 2048)


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(d))
    monkeypatch.delenv("HNPLAN_NO_CACHE", raising=False)
    return d


def test_a_second_search_plans_no_count_again(cache_dir, cat, monkeypatch):
    calls = []
    real = sizing_search.time_to_train

    def counted(*a, **k):
        calls.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(sizing_search, "time_to_train", counted)
    first = sizing_search.size_for_deadline(*JOB, catalog=cat)
    n = len(calls)
    assert n > 3 and (cache_dir / "plan_points.json").exists()
    again = sizing_search.size_for_deadline(*JOB, catalog=cat)
    assert len(calls) == n  # every count read back
    assert again == first
    # another deadline is another search, the counts it shares read back
    sizing_search.size_for_deadline(*JOB[:3], 30.0, *JOB[4:], catalog=cat)
    assert len(calls) < 2 * n


def test_a_count_without_a_plan_keeps_its_reason_class(cache_dir, cat):
    for exc in (PlanRuleError("no layout divides 3 GPUs"), InfeasiblePlan("does not fit")):

        def plan(e=exc) -> dict:
            return {"error": str(e), "error_kind": type(e).__name__}

        back = sizing_search.count_answer(cached_point(point_digest("size-test", type(exc).__name__), cat, plan))
        assert type(back) is type(exc) and str(back) == str(exc)


def test_the_choice_counts_the_tries_no_layout_divides(cat):
    # Llama 3.1 70B in 60 days on H100 servers: the search tries counts whose odd factors no layout of the 2,048-
    # sequence batch divides (1,440, 2,160, ...); they cost no search, and the sentence counts them apart
    out = sizing_search.size_for_deadline(*JOB, catalog=cat)
    n_skipped = sum(1 for s in out["skipped"] if "divides" in s["reason"])
    assert n_skipped > 0
    assert out["gpus_choice"].endswith(f"{out['evaluated']} counts searched, {n_skipped} more without a valid layout)")
