"""``hnplan claims`` reports progress while the shared-cluster experiments simulate runs no cache holds."""

import hnplan.cluster.claims as cc
from hnplan.planning import claims as pc


def _fake_run(*args):
    return {"args": args}


def test_runs_report_progress_for_the_runs_they_simulate(monkeypatch):
    monkeypatch.setattr(cc, "_run", _fake_run)
    monkeypatch.setattr(cc, "_DONE", {})
    calls = []
    token = cc.RUN_PROGRESS.set(lambda done, total: calls.append((done, total)))
    try:
        rows = cc._runs([("a", 1, "cat", 0), ("b", 2, "cat", 0)], workers=1)
        assert [r["args"][0] for r in rows] == ["a", "b"]
        assert calls == [(0, 2), (1, 2), (2, 2)]  # before the first run, then after each
        calls.clear()
        cc._runs([("a", 1, "cat", 0)], workers=1)  # held by this process: nothing simulated, no progress
        assert calls == []
    finally:
        cc.RUN_PROGRESS.reset(token)


def test_without_a_hook_the_runs_are_silent(monkeypatch):
    monkeypatch.setattr(cc, "_run", _fake_run)
    monkeypatch.setattr(cc, "_DONE", {})
    assert cc.RUN_PROGRESS.get() is None
    assert len(cc._runs([("c", 3, "cat", 0)], workers=1)) == 1


def test_audit_sets_the_hook_only_while_it_runs(monkeypatch):
    seen = []
    monkeypatch.setattr(pc, "_experiments", lambda: [])  # no experiment: only the hook's scope is under test

    def hook(done, total):
        seen.append((done, total))

    assert pc.audit(progress=hook) == []
    assert cc.RUN_PROGRESS.get() is None
