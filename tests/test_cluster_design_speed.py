"""Trace durations measured on a reference design, carried to the design simulated
(:func:`hnplan.cluster.runtime.design_speed_ratio`, ``simulate_cluster(reference_system=...)``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from hnplan.cluster import runtime, simulate_cluster

SUPERNODE, SERVERS = "gb200-nvl72", "hgx-h100-ib-ndr"


def test_ratio_is_the_best_train_plans_ratio(cat):
    """72 GPUs of each design, the representative 70B model, 4,096-token sequences, 1,024 per step:
    ``hnplan train --model llama3.1-70b --gpus 72 --seq-len 4096 --global-batch-size 1024`` gives as
    best plan 192,014 tokens/s on GB200 NVL72 (TP 1, PP 9, DP 8, MFU 47.9 %) and 91,025 tokens/s on
    HGX H100 (TP 2 and CP 2 inside the 8-GPU server, PP 9, MFU 57.4 %): the NVL72 job runs 192,014 / 91,025 =
    2.109x as fast, so a trace duration of 1 h measured on H100 servers is 28.4 min on the rack."""
    assert runtime.representative_model(72) == "llama3.1-70b"
    ratio = runtime.design_speed_ratio(SUPERNODE, SERVERS, 72, catalog=cat)
    assert ratio == pytest.approx(192_013.71 / 91_025.30, rel=1e-3)
    assert ratio == pytest.approx(2.109, abs=1e-3)
    assert runtime.design_speed_ratio(SERVERS, SUPERNODE, 72, catalog=cat) == pytest.approx(1 / ratio)
    assert 3600 / ratio / 60 == pytest.approx(28.4, abs=0.05)
    assert runtime.design_speed_ratio(SUPERNODE, SERVERS, 72, "llama3.1-70b", cat) == ratio


def test_unknown_ids_are_refused(cat):
    from hnplan.errors import CatalogError

    with pytest.raises(CatalogError):
        runtime.design_speed_ratio(SUPERNODE, "no-such-system", 72, catalog=cat)
    with pytest.raises(CatalogError):
        runtime.design_speed_ratio(SUPERNODE, SERVERS, 72, "no-such-model", cat)


@settings(max_examples=12, deadline=None)
@given(
    system=st.sampled_from([SUPERNODE, SERVERS, "dgx-b200-ib-ndr"]),
    gpus=st.sampled_from([1, 8, 16, 72, 256, 512]),
)
def test_ratio_of_a_design_to_itself_is_one(system, gpus):
    assert runtime.design_speed_ratio(system, system, gpus) == 1.0


def test_one_gpu_job_falls_back_to_the_1b_model(cat):
    """8B on one H100 (80 GB) fits no plan: its bf16 weights, fp32 gradients and Adam state alone take
    8.03e9 x 18 bytes = 134.6 GiB. The 1-GPU job is taken as the fallback, Llama 3.2 1B (1.24e9 x 18 bytes =
    20.7 GiB of state; its plan, micro-batch 8 of 4,096 tokens without recomputation, 77.7 GiB), which fits
    both: ``hnplan train --model llama3.2-1b --gpus 1 --seq-len 4096 --global-batch-size 1024`` gives
    114,636 tokens/s on GB200 NVL72 and 54,851 on HGX H100, 2.090x."""
    root = str(cat.root)
    assert runtime.representative_models(1) == ("llama3.1-8b", "llama3.2-1b")
    assert np.isnan(runtime._best_tokens_per_s(SERVERS, "llama3.1-8b", 1, None, True, root))
    assert runtime._best_tokens_per_s(SERVERS, "llama3.2-1b", 1, None, True, root) == pytest.approx(54_850.50, rel=1e-4)
    from hnplan.planning.training import search_plans

    plans = search_plans("llama3.2-1b", cat.system(SERVERS), 1, 4096, 1024, catalog=cat)
    best = plans[plans["fits"]].iloc[0]  # the plan the docstring (and runtime.FALLBACK_MODEL's) quotes
    assert (best["microbatch_size"], best["recompute"]) == (8, "none")
    assert best["memory_per_gpu_bytes"] / 2**30 == pytest.approx(77.7, abs=0.05)  # of the 79.1 GiB an H100 leaves
    assert runtime.design_speed_model(SUPERNODE, SERVERS, 1, cat) == "llama3.2-1b"
    ratio = runtime.design_speed_ratio(SUPERNODE, SERVERS, 1, catalog=cat)
    assert ratio == pytest.approx(114_636.42 / 54_850.50, rel=1e-4)
    assert ratio == pytest.approx(2.090, abs=1e-3)
    assert runtime.design_speed_ratio(SERVERS, SUPERNODE, 1, catalog=cat) == pytest.approx(1 / ratio)
    assert runtime.design_speed_ratio(SUPERNODE, SERVERS, 1, "llama3.1-8b", cat) == 1.0  # by name: no fallback


def test_no_plan_on_either_keeps_the_traced_duration(cat, monkeypatch):
    """With no fallback smaller than 8B (the fallback set to the 8B model itself), nothing fits one H100:
    no representative model fits, the duration stays (ratio 1), either way round."""
    monkeypatch.setattr(runtime, "FALLBACK_MODEL", "llama3.1-8b")
    assert runtime.design_speed_model(SUPERNODE, SERVERS, 1, cat) is None
    assert runtime.design_speed_ratio(SUPERNODE, SERVERS, 1, catalog=cat) == 1.0
    assert runtime.design_speed_ratio(SERVERS, SUPERNODE, 1, catalog=cat) == 1.0


def test_a_model_that_fits_neither_falls_back_to_the_next_smaller(cat):
    """16 GPUs: the size rule says 70B. Its leanest plan on 16 H100s (TP 8, PP 2, full recomputation) needs
    80.0 GiB a GPU, 73.9 GiB of it bf16 weights, fp32 gradients and Adam state (70.6e9 x 18 bytes / 16), over
    the 79.1 GiB an H100 leaves, so no 70B plan fits the reference (on GB200 it does, 43,502 tokens/s). The job
    is taken as the next smaller model, 8B, which fits both: ``hnplan train --model llama3.1-8b --gpus 16
    --seq-len 4096 --global-batch-size 1024`` gives 389,975 tokens/s on GB200 NVL72 and 188,973 on HGX H100,
    2.064x, the same ratio as asking for the 8B model directly. Asked for 70B by name, no fallback: 1.0."""
    root = str(cat.root)
    assert runtime.representative_model(16) == "llama3.1-70b"
    assert runtime.representative_models(16) == ("llama3.1-70b", "llama3.1-8b", "llama3.2-1b")
    assert np.isnan(runtime._best_tokens_per_s(SERVERS, "llama3.1-70b", 16, None, True, root))
    assert runtime._best_tokens_per_s(SUPERNODE, "llama3.1-70b", 16, None, True, root) == pytest.approx(
        43_502.06, rel=1e-4
    )
    assert runtime.design_speed_model(SUPERNODE, SERVERS, 16, cat) == "llama3.1-8b"
    ratio = runtime.design_speed_ratio(SUPERNODE, SERVERS, 16, catalog=cat)
    assert ratio == runtime.design_speed_ratio(SUPERNODE, SERVERS, 16, "llama3.1-8b", cat)
    assert ratio == pytest.approx(389_974.87 / 188_973.04, rel=1e-4)
    assert ratio == pytest.approx(2.064, abs=1e-3)
    assert runtime.design_speed_ratio(SERVERS, SUPERNODE, 16, catalog=cat) == pytest.approx(1 / ratio)
    assert runtime.design_speed_ratio(SUPERNODE, SERVERS, 16, "llama3.1-70b", cat) == 1.0
    # cached per model: the 70B pair (no figure) and the 8B pair are two entries of the same cache
    assert np.isnan(runtime._design_ratio(SUPERNODE, SERVERS, 16, "llama3.1-70b", root))
    assert runtime._design_ratio(SUPERNODE, SERVERS, 16, "llama3.1-8b", root) == ratio
    # where the size's model fits both, it is the one compared (72 GPUs: 70B; 512: 405B)
    assert runtime.design_speed_model(SUPERNODE, SERVERS, 72, cat) == "llama3.1-70b"
    assert runtime.representative_models(512) == ("llama3.1-405b", "llama3.1-70b", "llama3.1-8b", "llama3.2-1b")


def test_off_or_self_reference_is_bit_identical(cat):
    """Without a reference a run is today's; with the system as its own reference every ratio is 1.0 and
    the run is the same, bit for bit (same seed)."""
    kw = dict(n_jobs=300, seed=3, catalog=cat)
    off = simulate_cluster(SERVERS, 64, **kw)
    none = simulate_cluster(SERVERS, 64, reference_system=None, **kw)
    itself = simulate_cluster(SERVERS, 64, reference_system=SERVERS, **kw)
    assert off.summary == none.summary
    assert "reference_system" not in off.summary and "design_speed" not in off.jobs
    assert_frame_equal(off.jobs, none.jobs)
    assert (itself.jobs["design_speed"] == 1.0).all()
    assert_frame_equal(off.jobs, itself.jobs.drop(columns="design_speed"))
    assert_frame_equal(off.timeseries, itself.timeseries)
    assert itself.summary["design_speed"] == 1.0
    extra = ("reference_system", "design_speed", "design_speed_kept", "jct_s")
    assert {k: v for k, v in itself.summary.items() if k not in extra} == off.summary


def test_faster_design_finishes_the_trace_sooner(cat):
    """Twenty 72-GPU training jobs of 2 h measured on H100 servers, one every 30 min, on 144 GPUs of
    each design, no failures: on the servers each job takes its 2 h (two run at once, a queue builds);
    on NVL72 racks 2 h / 2.109 = 57 min, so the mean JCT falls and every finished job's run time is
    the traced one over the ratio."""
    n = 20
    trace = pd.DataFrame(
        {
            "arrival_s": np.arange(n) * 1800.0,
            "gpus": 72,
            "gpu_milli": 1000,
            "duration_s": 7200.0,
            "cls": "training",
            "checkpoint_s": 1800.0,
            "tp": 8,
        }
    )
    kw = dict(failures=False, reference_system=SERVERS, catalog=cat)
    runs = {s: simulate_cluster(s, 144, trace, **kw) for s in (SERVERS, SUPERNODE)}
    ratio = runtime.design_speed_ratio(SUPERNODE, SERVERS, 72, catalog=cat)
    rack, servers = runs[SUPERNODE], runs[SERVERS]
    assert rack.summary["design_speed"] == pytest.approx(ratio)
    assert servers.summary["design_speed"] == 1.0
    assert rack.summary["jobs"]["done"] == servers.summary["jobs"]["done"] == n
    run_s = rack.jobs["end_s"] - rack.jobs["start_s"]
    assert run_s.to_numpy() == pytest.approx(7200.0 / ratio)  # whole racks: the ideal allocation
    # servers: arrivals every 0.5 h, 2 h each, room for 2 at once -> the queue grows by 0.5 h per job
    # by hand: job k (arriving at k/2 h) starts at k h if k is even, k - 1/2 h if odd, so it waits k/2 or
    # k/2 - 1/2 h; over k = 0..19 the waits sum to 45 + 45 = 90 h, 4.5 h a job: mean JCT 4.5 + 2 = 6.5 h
    assert servers.summary["jct_s"]["mean"] == pytest.approx(6.5 * 3600, rel=1e-9)
    assert servers.summary["jct_s"]["training_mean"] == servers.summary["jct_s"]["mean"]  # all are training jobs
    assert servers.summary["jct_s"]["mean"] > 2 * rack.summary["jct_s"]["mean"]
    assert rack.summary["jct_s"]["mean"] == pytest.approx(7200.0 / ratio, rel=1e-6)  # 57 min, no queue


def test_reference_with_node_list_is_refused(cat):
    from hnplan.errors import InputError

    with pytest.raises(InputError, match="reference system"):
        simulate_cluster(SERVERS, 64, n_jobs=10, nodes="openb", reference_system=SUPERNODE, catalog=cat)


def test_cli_reference_system(cat):
    """--reference-system: stated in --help with its default; the JSON equals the library's; a bad id or
    one with --nodes exits 2 with one line."""
    import json

    from typer.testing import CliRunner

    from hnplan.cli import app

    runner = CliRunner()
    h = runner.invoke(app, ["cluster", "simulate", "--help"], env={"COLUMNS": "200"})
    assert h.exit_code == 0 and "--reference-system" in h.output and "default: none" in h.output
    base = ["cluster", "simulate", "--system", SUPERNODE, "--gpus", "144", "--jobs", "200", "--seed", "2"]
    r = runner.invoke(app, [*base, "--reference-system", SERVERS, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    lib = simulate_cluster(SUPERNODE, 144, n_jobs=200, seed=2, reference_system=SERVERS, catalog=cat).to_json()
    assert d["reference_system"] == SERVERS and d["design_speed"] == pytest.approx(lib["design_speed"])
    assert d["jct_s"] == pytest.approx(lib["jct_s"]) and d["utilisation"] == pytest.approx(lib["utilisation"])
    table = runner.invoke(app, [*base, "--reference-system", SERVERS], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "design speed" in table.output
    bad = runner.invoke(app, [*base, "--reference-system", "no-such-system"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    both = runner.invoke(app, [*base, "--reference-system", SERVERS, "--nodes", "openb"])
    assert both.exit_code == 2 and "--nodes" in both.output


def test_allocation_speed_falls_back_as_the_design_ratio(cat):
    """A 16-GPU job on HGX H100 spread 4 + 4 + 4 + 4 over four servers: no 70B plan fits 16 H100s (the leanest
    needs 80.0 GiB a GPU of the 79.1 usable), so its allocation is timed as the 8B model's, as the design ratio
    takes it: the 8B model's best plan on that allocation over its best on two full servers, below 1 (it was 1.0,
    the job at full speed, before the fallback). 32 GPUs still time the 70B model."""
    sid, root = runtime.system_key(SERVERS, cat), str(cat.root)
    assert runtime._speed_model(sid, 16, root) == "llama3.1-8b"
    assert runtime._speed_model(sid, 32, root) == "llama3.1-70b"
    eight_b = runtime._speed(sid, "llama3.1-8b", 16, 4, False, root)
    assert runtime.training_speed(SERVERS, 16, 4, 1, cat) == eight_b < 1.0
    assert runtime.training_speed(SERVERS, 16, 8, 1, cat) == 1.0  # two whole servers: the ideal allocation
