"""The on-disk caches of predictions: per-run speed errors behind the "how far to trust it" notes (the same text
with and without it, invalidated by a catalog change, and silently ignored when its file is corrupt or its
folder cannot be written), plan points of the claims audit and of compare's designs, and the published runs."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog import Catalog, load_catalog
from hnplan.catalog.runs import TrainingRun, training_runs
from hnplan.planning import prediction_cache, trust
from hnplan.planning.compare import trust_notes

ROOT_DATA = load_catalog().root


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
    # H200 and B300 designs: the 6 + 11 published runs on them planned now, then read back from the cache
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
    # six H200 rows (four, and MLPerf v5.1 HPE 64 / v6.0 Cisco 16) and eleven B300 rows (MLPerf v5.1 Dell 8, Nebius 8,
    # Lenovo 8; v6.0 Dell 16, Cisco 8, Nebius 64; Megatron-Bridge 26.04.01 Qwen3-30B-A3B on 8, 26.06 DeepSeek-V3 on 256
    # and Qwen3-30B-A3B on 8, 26.04.01 gpt-oss-120b BF16 on 64 and 26.06 MXFP8 on 64)
    assert len(stored) == n == 17
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


def test_an_edited_published_run_leaves_the_others_cached(cache_dir, data_copy):
    # the published runs (validation/) are outside the key: each run's digest holds its fields, so a run added
    # or edited there is planned alone while the others read back; a catalog entry edited is still a miss
    plan = Planner()
    runs = [_run("a"), _run("b", 16)]
    prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    published = data_copy / "validation" / "training_runs.yaml"
    published.write_text(published.read_text() + "# a run added here\n")
    cat = Catalog(data_copy)
    assert cat.content_hash() != Catalog(ROOT_DATA).content_hash()
    assert prediction_cache.cached_speed_errors([*runs, _run("c", 32)], cat, plan) == {"a": 0.08, "b": 0.16, "c": 0.32}
    assert plan.asked == [["a", "b"], ["c"]]


def test_the_planners_read_no_published_run(cat, data_copy):
    # why the published runs may stay outside the key: planning runs and a grid point on a data folder without
    # validation/ gives the same numbers, to the last bit
    import shutil

    from hnplan.planning.claims import AuditSetup
    from hnplan.planning.claims_grid import _plan_point_row
    from hnplan.planning.validation import best_row

    shutil.rmtree(data_copy / "validation")
    bare = Catalog(data_copy)
    assert prediction_cache.planning_hash(data_copy) == prediction_cache.planning_hash(ROOT_DATA)
    ids = ["mlperf-v50-nvidia-h100-llama31-405b-512", "mbridge2511-gb200-deepseek-v3-256-fp8"]
    for run in (r for r in training_runs() if r.id in ids):
        assert best_row(run, bare)[run.metric] == best_row(run, cat)[run.metric]
    s = AuditSetup()
    assert json.dumps(_plan_point_row(bare, bare.model("megatron-18.4b"), bare.system(s.supernode), 576, s)) == (
        json.dumps(_plan_point_row(cat, cat.model("megatron-18.4b"), cat.system(s.supernode), 576, s))
    )


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


# -- plan points (the claims audit's grid, compare's designs) and the published runs themselves -----------


def test_a_plan_point_reads_back_bit_for_bit(cache_dir, cat):
    calls = []

    def compute():
        calls.append(1)
        return {"gpus": np.int64(8), "step_time_s": np.float64(0.1) + 0.2, "mfu": float("nan"), "plan": "TP1 PP1"}

    digest = prediction_cache.point_digest(cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr"), 8, 4096)
    first = prediction_cache.cached_point(digest, cat, compute)
    prediction_cache._POINTS.clear()  # as a new process: read from the file
    again = prediction_cache.cached_point(digest, cat, compute)
    assert calls == [1]
    assert first["step_time_s"] == again["step_time_s"] == 0.30000000000000004  # 0.1 + 0.2, the same double
    assert type(again["gpus"]) is int and math.isnan(again["mfu"]) and again["plan"] == "TP1 PP1"


def test_a_plan_point_digest_follows_the_entrys_fields_not_its_id(cat):
    m = cat.model("llama3.1-8b")
    deeper = m.model_copy(update={"layers": m.layers + 1})  # the same id, another model
    assert prediction_cache.point_digest(m, 8) == prediction_cache.point_digest(cat.model("llama3.1-8b"), 8)
    assert prediction_cache.point_digest(m, 8) != prediction_cache.point_digest(deeper, 8)
    assert prediction_cache.point_digest(m, 8) != prediction_cache.point_digest(m, 16)


def test_no_cache_plans_every_point_and_writes_nothing(cache_dir, cat, monkeypatch):
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    calls = []
    for _ in range(2):
        prediction_cache.cached_point("abc", cat, lambda: calls.append(1) or {"x": 1.0})
    assert len(calls) == 2 and not cache_dir.exists()


def test_claims_plan_point_is_the_same_planned_or_read_back(cache_dir, cat, monkeypatch):
    from hnplan.planning import claims_grid
    from hnplan.planning.claims import AuditSetup

    s = AuditSetup()
    point = (cat, "megatron-1.7b", "gb200-nvl72", 72, s)
    key = (str(cat.root), "megatron-1.7b", "gb200-nvl72", 72, s.seq_len, s.seqs_per_gpu, s.dtype)
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    planned = claims_grid.plan_point(*point)
    monkeypatch.delenv("HNPLAN_NO_CACHE")
    claims_grid._CACHE.pop(key)
    cold = claims_grid.plan_point(*point)
    claims_grid._CACHE.pop(key)
    prediction_cache._POINTS.clear()
    warm = claims_grid.plan_point(*point)
    assert planned == cold == warm
    assert planned["plan"].startswith("TP") and 0 < planned["mfu"] < 1


def test_compare_designs_are_the_same_planned_or_read_back(cache_dir, cat, monkeypatch):
    from hnplan.planning.compare import compare_training_designs

    args = ("llama3.1-8b", ["gb200-nvl72", "hgx-h100-ib-ndr", "cloudmatrix-384"], 128, 1e12, 4096, 256, "fp8")
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    planned = compare_training_designs(*args, catalog=cat)
    monkeypatch.delenv("HNPLAN_NO_CACHE")
    cold = compare_training_designs(*args, catalog=cat)
    prediction_cache._POINTS.clear()
    warm = compare_training_designs(*args, catalog=cat)
    pd.testing.assert_frame_equal(planned, cold)
    pd.testing.assert_frame_equal(cold, warm)
    assert json.loads((cache_dir / prediction_cache.POINTS_FILE_NAME).read_text())["rows"]
    assert warm["status"].str.startswith("ok").all()


def test_cached_training_runs_are_the_runs_field_for_field(cache_dir):
    cold = prediction_cache.cached_training_runs()
    assert (cache_dir / prediction_cache.RUNS_FILE_NAME).exists()
    warm = prediction_cache.cached_training_runs()
    runs = training_runs()
    assert cold == warm == runs
    for a, b in zip(warm, runs, strict=True):
        assert a.model_fields_set == b.model_fields_set
        assert a.model_dump_json() == b.model_dump_json()  # the speed-error cache's run digest, key order included
        for f in type(a).model_fields:
            assert type(getattr(a, f)) is type(getattr(b, f)), (a.id, f)


def test_a_cache_of_runs_under_another_key_is_not_read(cache_dir):
    cache_dir.mkdir()
    path = cache_dir / prediction_cache.RUNS_FILE_NAME
    path.write_text(json.dumps({"key": {"format": 0}, "runs": [{"id": "made-up"}]}))
    assert prediction_cache.cached_training_runs() == training_runs()
    assert json.loads(path.read_text())["key"]["format"] == prediction_cache.FORMAT


def test_a_repeat_call_plans_no_run_again(cache_dir, monkeypatch):
    # the first call reads the runs from their file, the second from the cache: the same runs, the same digests
    designs = pd.DataFrame([dict(system="hgx-h200-ib-ndr", accelerator="h200-sxm", status="ok")])
    cold = trust_notes(designs, "llama3.1-70b")

    def refuse(runs, catalog):
        raise AssertionError(f"planned again: {[r.id for r in runs]}")

    monkeypatch.setattr(trust, "_planned_errors", refuse)
    assert trust_notes(designs, "llama3.1-70b") == cold


def test_the_seed_holds_what_a_first_compare_and_a_first_claim_read(cache_dir, monkeypatch):
    # what make's environment step stores: afterwards a first trust note reads every error back and a first
    # claim every best plan, the same text and numbers as planned without a cache
    from hnplan.planning import claims_grid
    from hnplan.planning.claims import audit, claim_ids
    from hnplan.planning.claims_other import CLUSTER_CLAIM_IDS

    designs = pd.DataFrame([dict(system="gb200-nvl72", accelerator="gb200", status="ok")])
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    assert set(prediction_cache.seed().values()) == {0}  # bypassed: nothing planned or written
    planned = trust_notes(designs, "llama3.1-405b")
    claim = audit(only=["storage-1m-iops"])[0]
    assert not cache_dir.exists()
    monkeypatch.delenv("HNPLAN_NO_CACHE")
    n = len(training_runs())
    claims_grid._CACHE.clear()  # the points planned above, kept in this process: the seed plans them again
    seeded = prediction_cache.seed()
    assert seeded["runs"] == seeded["speed_errors"] == n
    assert seeded["claims"] == len(claim_ids()) - len(CLUSTER_CLAIM_IDS) == 24
    assert seeded["plan_points"] == len(json.loads((cache_dir / prediction_cache.POINTS_FILE_NAME).read_text())["rows"])
    assert len(json.loads((cache_dir / prediction_cache.FILE_NAME).read_text())["errors"]) == n
    # as a new process: nothing kept in memory, nothing planned
    prediction_cache._KEYS.clear()
    prediction_cache._POINTS.clear()
    claims_grid._CACHE.clear()
    monkeypatch.setattr(trust, "_planned_errors", lambda runs, cat: pytest.fail(f"planned {len(runs)} runs again"))
    monkeypatch.setattr(claims_grid, "_plan_point_row", lambda *a: pytest.fail(f"planned {a[1].id} again"))
    assert trust_notes(designs, "llama3.1-405b") == planned
    assert "gb200 median" in planned
    again = audit(only=["storage-1m-iops"])[0]
    assert json.dumps(again.as_dict()) == json.dumps(claim.as_dict())
    assert claim.verdict in ("holds", "does not hold", "holds under conditions")


def test_the_seed_is_a_miss_once_the_catalog_or_the_code_changes(cache_dir, data_copy, monkeypatch):
    prediction_cache.seed()
    runs = prediction_cache.cached_training_runs()
    plan = Planner()
    # the same data in another folder has the same content hash: the seed is read
    prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    assert plan.asked == []
    # one byte more in one catalog file: every run is planned again
    acc = data_copy / "accelerators" / "h100-sxm.yaml"
    acc.write_text(acc.read_text() + "# edited\n")
    errors = prediction_cache.cached_speed_errors(runs, Catalog(data_copy), plan)
    assert plan.asked == [[r.id for r in runs]]
    assert errors == {r.id: 0.01 * r.gpus for r in runs}
    # another code fingerprint (an edited hnplan file) on the seeded catalog: planned again too
    monkeypatch.setattr(prediction_cache, "source_fingerprint", lambda: "0123456789abcdef")
    prediction_cache._KEYS.clear()
    prediction_cache.cached_speed_errors(runs[:3], load_catalog(), plan)
    assert plan.asked[-1] == [r.id for r in runs[:3]]


def test_the_code_fingerprint_hashes_every_package_file_but_bytecode_in_path_order(tmp_path):
    # the definition written out: every file under the package but those of __pycache__ folders, sorted as paths
    # (by their parts), each relative path then its bytes, after the Python and numpy versions; a folder's own
    # bytecode and a file beside it change nothing and everything respectively
    import hashlib
    import sys
    from pathlib import Path

    root = Path(prediction_cache.__file__).resolve().parents[1]
    h = hashlib.sha256(f"{sys.version}|numpy {np.__version__}".encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    assert prediction_cache.source_fingerprint.__wrapped__() == h.hexdigest()[:16]
    # a package of three files, one of them in a sub-folder and one in bytecode: the bytecode is not listed,
    # "a-b" sorts after "a/" as the paths' parts do
    (tmp_path / "a" / "__pycache__").mkdir(parents=True)
    for rel in ("a/x.py", "a-b.py", "a/__pycache__/x.cpython-311.pyc"):
        (tmp_path / rel).write_text(rel)
    assert sorted(prediction_cache._source_files(tmp_path)) == [("a", "x.py"), ("a-b.py",)]
