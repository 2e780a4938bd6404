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


def test_the_part_times_key_holds_every_stack_choice_the_kernel_models_read():
    # part_times keys its tables on KERNEL_CHOICES alone: every StackChoices field named anywhere in hnplan/compute
    # (the package part_time_table and its kernel and host models live in) must be one of them
    import re
    from pathlib import Path

    from hnplan.catalog.schemas import StackChoices
    from hnplan.compute.parts import KERNEL_CHOICES

    src = "\n".join(
        p.read_text() for p in sorted(Path(stage_compute.__file__).parents[2].joinpath("compute").rglob("*.py"))
    )
    named = {f for f in StackChoices.model_fields if re.search(rf"\b{f}\b", src)}
    assert named <= set(KERNEL_CHOICES), sorted(named - set(KERNEL_CHOICES))
    assert set(KERNEL_CHOICES) <= set(StackChoices.model_fields)


def test_stacks_differing_in_communication_alone_share_the_part_times(counted):
    stage_compute.clear_content_memo()
    _, base = _search()
    counted.update(parts=0, tuner=0)
    # the gradient buckets and the bytes of a reduced gradient element: communication, not kernels
    _, other = _search(overrides={"dp_bucket_params": 10_000_000, "grad_reduce_bytes": 2.0})
    assert counted["parts"] == 0
    assert not other["step_time_s"].equals(base["step_time_s"])  # the communication differs: other step times
    stage_compute.clear_content_memo()
    _, fresh = _search(overrides={"dp_bucket_params": 10_000_000, "grad_reduce_bytes": 2.0})
    pd.testing.assert_frame_equal(other, fresh, check_exact=True)  # as if computed afresh, bit for bit


def test_resolved_choices_are_remembered_per_stack_and_overrides():
    from hnplan.catalog import load_catalog
    from hnplan.planning.training import job as job_module

    st = load_catalog().stack("megatron-lm-2021")
    job_module._RESOLVED.clear()
    ch, prov = job_module.resolve_choices(st, overrides={"tp_comm": True, "kernel_launch_us": None})
    prov["tp_comm"] = "changed by the caller"  # the caller's copy: the memo keeps its own
    again, prov_again = job_module.resolve_choices(st, overrides={"tp_comm": True})
    assert again is ch and prov_again["tp_comm"] == "override"
    fresh, prov_fresh = job_module._resolve_choices(st, None, {"tp_comm": True})
    assert fresh == ch and prov_fresh == prov_again
    # another value: computed, not read back; a value whose repr may not tell it apart is never remembered
    assert job_module.resolve_choices(st, overrides={"tp_comm": False})[0].tp_comm is False
    assert not job_module._plain({"x": object()}) and job_module._plain({"a": [1, 2.0, "b", None, (True,)]})
