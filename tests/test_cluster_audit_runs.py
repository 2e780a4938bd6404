"""The claims audit's cluster runs: the same numbers whether run one after another, side by side in worker
processes or read back from the on-disk cache; each run's GPUs found by domain as by a scan of the nodes."""

import numpy as np
import pytest

from hnplan.cluster import claims as cc
from hnplan.cluster.topology import CLUSTER_GPUS, build_topology
from hnplan.planning import prediction_cache

# a small grid: 144 GPUs (18 servers, two racks), two loads, 300 jobs, two streams per point
SMALL = dict(gpus=144, loads=(0.5, 0.9), jobs=300, replications=2)
DESIGNS = ("hgx-b200-ib-xdr", "gb200-nvl72")


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(d))
    monkeypatch.delenv("HNPLAN_NO_CACHE", raising=False)
    return d


def _fresh():
    """As a new process: no runs in memory, the cache file read again."""
    cc._DONE.clear()
    prediction_cache._POINTS.clear()


def _grid(claim, **kw):
    """The grid as the planner asks for it: with its on-disk cache passed in."""
    from hnplan.catalog import load_catalog

    _fresh()
    cache = prediction_cache.run_cache(load_catalog())
    pts, *rest = cc.audit_points(claim, *DESIGNS, **SMALL, cache=cache, **kw)
    return pts, rest


@pytest.mark.parametrize("claim", ["utilisation-40-to-70", "fragmentation-below-30"])
def test_the_grid_does_not_depend_on_the_workers(claim, monkeypatch):
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    one, rest1 = _grid(claim, workers=1)
    two, rest2 = _grid(claim, workers=2)
    assert one.equals(two) and rest1 == rest2
    assert len(one) == 2 * len(SMALL["loads"]) and (one["replications"] == 2).all()


def test_a_second_audit_reads_its_runs_back_without_simulating(cache_dir, monkeypatch):
    real = cc._run
    first, rest = _grid("utilisation-below-50", workers=1)
    assert (cache_dir / prediction_cache.CLUSTER_FILE_NAME).exists()

    def no_run(*args):
        raise AssertionError("simulated again")

    monkeypatch.setattr(cc, "_run", no_run)
    again, rest2 = _grid("utilisation-below-50", workers=1)
    assert again.equals(first) and rest2 == rest
    # another claim on the same streams simulates only its own designs: the shared one is read back
    calls = []
    monkeypatch.setattr(cc, "_run", lambda *a: calls.append(a) or real(*a))
    _grid("utilisation-40-to-70", workers=1)
    assert {a[0] for a in calls} == {"gb200-nvl72"} and len(calls) == 2 * 2  # loads x streams


def test_without_a_cache_passed_in_the_simulation_keeps_runs_in_memory_only(cache_dir, monkeypatch):
    # the simulation keeps no cache of its own (it imports no planner): only the planner's cache writes a file
    _fresh()
    first = cc.audit_points("concurrent-512-jobs-92", *DESIGNS, **SMALL, workers=1)[0]
    assert not cache_dir.exists()
    monkeypatch.setattr(cc, "_run", lambda *a: (_ for _ in ()).throw(AssertionError("simulated again")))
    again = cc.audit_points("concurrent-512-jobs-92", *DESIGNS, **SMALL, workers=1)[0]  # this process's runs
    assert again.equals(first)


def test_no_cache_writes_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("HNPLAN_NO_CACHE", "1")
    _grid("concurrent-512-jobs-92", workers=1)
    assert not cache_dir.exists()


def test_cached_points_computes_each_missing_digest_once(cache_dir, cat):
    asked = []

    def compute(idx):
        asked.append(idx)
        return [{"i": float(i)} for i in idx]

    _fresh()
    assert prediction_cache.cached_points(["a", "b", "a"], cat, compute) == [{"i": 0.0}, {"i": 1.0}, {"i": 0.0}]
    _fresh()
    assert prediction_cache.cached_points(["b", "c"], cat, compute) == [{"i": 1.0}, {"i": 1.0}]
    assert asked == [[0, 1], [1]]  # "a" once, then only "c" (position 1 of the second call)


@pytest.mark.parametrize("system", DESIGNS)
def test_domain_nodes_are_the_nodes_of_each_domain(system):
    topo = build_topology(system, CLUSTER_GPUS)
    assert len(topo.domain_nodes) == topo.domains
    for d, nodes in enumerate(topo.domain_nodes):
        assert nodes.tolist() == np.flatnonzero(topo.domain == d).tolist()
    # 8-GPU servers: a domain is a server; NVL72: 18 four-GPU trays
    assert {len(n) for n in topo.domain_nodes} == {topo.domain_gpus // topo.node_gpus}
