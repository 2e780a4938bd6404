"""The per-shape tables every job of a process shares (stage_compute.content_memo): a new catalog of the same
data finds the part times, ring kernels, activation bytes and collective tuner times an earlier search computed
and gives the same plans bit for bit; other numbers (another accelerator clock) miss."""

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog import Catalog
from hnplan.planning.training import candidate_frame, collective_time, evaluate_plans, make_job, stage_compute

CASE = ("llama3.1-8b", "hgx-h100-ib-ndr", 256, 8192, 512)  # TP, PP, DP and CP searched: every table used


def _search(catalog=None, **kw):
    model, system, gpus, seq, batch = CASE
    job = make_job(model, system, gpus, seq, batch, catalog=catalog or Catalog(), **kw)
    return job, evaluate_plans(job, candidate_frame(job.model, job.system, gpus, seq, batch))


@pytest.fixture()
def counted(monkeypatch):
    """Calls of the operator-level part times and of the tuner's float path."""
    calls = {"parts": 0, "tuner": 0}
    parts, best = stage_compute.part_time_table, collective_time.best_time

    def part_time_table(*a, **k):
        calls["parts"] += 1
        return parts(*a, **k)

    def best_time(*a, **k):
        calls["tuner"] += 1
        return best(*a, **k)

    monkeypatch.setattr(stage_compute, "part_time_table", part_time_table)
    monkeypatch.setattr(collective_time, "best_time", best_time)
    return calls


def test_a_new_catalog_reuses_the_tables_and_gives_the_same_plans(counted):
    stage_compute.clear_content_memo()
    _, first = _search()
    assert counted["parts"] == 1 and counted["tuner"] > 0  # a first search computes them
    counted.update(parts=0, tuner=0)
    _, again = _search()  # a fresh catalog of the same files
    assert counted == {"parts": 0, "tuner": 0}
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    stage_compute.clear_content_memo()
    _, cleared = _search()
    assert counted["parts"] == 1 and counted["tuner"] > 0
    pd.testing.assert_frame_equal(first, cleared, check_exact=True)


def test_other_numbers_miss(counted):
    _search()
    counted.update(parts=0, tuner=0)
    _, slower = _search(overrides={"kernel_launch_us": 40.0})  # another stack choice: other part times
    assert counted["parts"] == 1
    _, base = _search()
    t_slow, t_base = slower["step_time_s"].to_numpy(), base["step_time_s"].to_numpy()
    assert np.all(t_slow >= t_base) and np.any(t_slow > t_base)  # the launches cost more where they are exposed


def test_the_store_keeps_the_keys_used_last(monkeypatch):
    monkeypatch.setattr(stage_compute, "CONTENT_MEMO_KEYS", 2)
    stage_compute.clear_content_memo()
    a = stage_compute.content_memo(("a",))
    a["x"] = 1.0
    stage_compute.content_memo(("b",))
    assert stage_compute.content_memo(("a",)) is a  # used again: now the newest
    stage_compute.content_memo(("c",))  # drops ("b",), the oldest
    assert stage_compute.content_memo(("a",)) == {"x": 1.0}
    assert list(stage_compute._CONTENT_MEMO) == [("c",), ("a",)]
    stage_compute.clear_content_memo()
