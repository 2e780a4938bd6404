"""The on-disk cache of per-run speed errors behind the "how far to trust it" notes: the same text with and
without it, invalidated by a catalog change, and silently ignored when its file is corrupt or its folder
cannot be written."""

import json

import pandas as pd
import pytest

from hnplan.catalog import Catalog, load_catalog
from hnplan.catalog.runs import TrainingRun, training_runs
from hnplan.planning import prediction_cache, trust
from hnplan.planning.compare import trust_notes


def _run(rid: str, gpus: int = 8) -> TrainingRun:
    return TrainingRun.model_validate(
        dict(
            id=rid,
            name=rid,
            source="test",
            model="llama3.1-8b",
            system="hgx-h100-ib-ndr",
            gpus=gpus,
            seq_len=8192,
            global_batch_seqs=128,
            dtype="bf16",
            metric="mfu",
            published=0.4,
            tolerance_pct=15,
            tolerance_reason="test",
        )
    )


class Planner:
    """A stand-in for planning the runs: a fixed error per run, and the ids it was asked for."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, runs: list[TrainingRun]) -> dict[str, float]:
        self.asked.append([r.id for r in runs])
        return {r.id: 0.01 * r.gpus for r in runs}


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(d))
    monkeypatch.delenv("HNPLAN_NO_CACHE", raising=False)
    return d


def test_trust_notes_are_the_same_text_with_and_without_the_cache(cache_dir, monkeypatch):
    # H200 and B300 designs: the 4 + 1 published runs on them planned now, then read back from the cache
    designs = pd.DataFrame(
        [dict(system=s, accelerator=a, status="ok") for s, a in [("hgx-h200-ib-ndr", "h200-sxm"), ("dgx-b300", "b300")]]
    )
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    planned = trust_notes(designs, "llama3.1-70b")
    assert not cache_dir.exists()  # bypassed: nothing written
    monkeypatch.delenv("HNPLAN_NO_CACHE")
    cold = trust_notes(designs, "llama3.1-70b")
    stored = json.loads((cache_dir / prediction_cache.FILE_NAME).read_text())["errors"]
    n = sum(load_catalog().system(r.system).accelerator in ("h200-sxm", "b300") for r in training_runs())
    assert len(stored) == n == 5
    warm = trust_notes(designs, "llama3.1-70b")
    assert planned == cold == warm
    assert "h200-sxm median" in warm and "b300 median" in warm


def test_cached_errors_are_the_planned_ones_bit_for_bit(cache_dir, cat):
    runs = [r for r in training_runs() if r.system == "hgx-h200-ib-ndr"][:2]
    first = trust.speed_errors(runs, cat)
    again = trust.speed_errors(runs, cat)
    assert again == first and all(type(e) is float for e in again.values())


def test_a_second_call_plans_only_the_runs_the_cache_lacks(cache_dir, cat):
    plan = Planner()
    a, b = _run("a", 8), _run("b", 16)
    assert prediction_cache.cached_speed_errors([a], cat, plan) == {"a": 0.08}
    assert prediction_cache.cached_speed_errors([a, b], cat, plan) == {"a": 0.08, "b": 0.16}
    assert prediction_cache.cached_speed_errors([b, a], cat, plan) == {"b": 0.16, "a": 0.08}
    assert plan.asked == [["a"], ["b"]]
    # a run whose fields change under the same id is planned again
    assert prediction_cache.cached_speed_errors([_run("a", 32)], cat, plan) == {"a": 0.32}
    assert plan.asked[-1] == ["a"]


def test_a_changed_catalog_file_invalidates_the_cache(cache_dir, data_copy):
    plan = Planner()
    runs = [_run("a")]
    prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    assert len(plan.asked) == 1
    acc = data_copy / "accelerators" / "h100-sxm.yaml"
    acc.write_text(acc.read_text() + "# edited\n")
    prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    assert len(plan.asked) == 2


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"key": {}, "errors": {}}', ""])
def test_a_corrupt_cache_file_is_ignored_and_replaced(cache_dir, cat, content):
    cache_dir.mkdir()
    path = cache_dir / prediction_cache.FILE_NAME
    path.write_text(content)
    plan = Planner()
    assert prediction_cache.cached_speed_errors([_run("a")], cat, plan) == {"a": 0.08}
    assert plan.asked == [["a"]]
    assert list(json.loads(path.read_text())["errors"].values()) == [0.08]


def test_wrong_values_in_a_cache_of_the_right_key_are_ignored(cache_dir, cat):
    plan = Planner()
    prediction_cache.cached_speed_errors([_run("a")], cat, plan)
    path = cache_dir / prediction_cache.FILE_NAME
    raw = json.loads(path.read_text())
    raw["errors"] = {k: "fast" for k in raw["errors"]}
    path.write_text(json.dumps(raw))
    assert prediction_cache.cached_speed_errors([_run("a")], cat, plan) == {"a": 0.08}
    assert len(plan.asked) == 2


def test_an_unwritable_cache_folder_is_ignored(tmp_path, monkeypatch, cat):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(blocker / "cache"))  # a folder under a file cannot be made
    plan = Planner()
    assert prediction_cache.cached_speed_errors([_run("a")], cat, plan) == {"a": 0.08}
    assert prediction_cache.cached_speed_errors([_run("a")], cat, plan) == {"a": 0.08}
    assert len(plan.asked) == 2
    assert list(tmp_path.iterdir()) == [blocker]  # no temporary file left beside it


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("HNPLAN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert prediction_cache.cache_dir() == tmp_path / "hnplan"
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(tmp_path / "x"))
    assert prediction_cache.cache_dir() == tmp_path / "x"
