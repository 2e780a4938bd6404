"""Per-step clocks of MLPerf result logs (tools/mlperf_step_log.py, data/reference/mlperf_step_timing.csv) and
what they say about the per-step constant of the MLPerf GPT-3 175B jobs (docs/training.md, "What grows with
scale")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolmod import load_tool

from hnplan.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return load_tool("mlperf_step_log")


def _line(time_ms, key, value=None, **metadata):
    rec = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value}
    return "   0: :::MLLOG " + json.dumps({**rec, "metadata": metadata})


def test_parse_hand_derived():
    # two training steps of 2.0 and 2.5 s logged 2.6 s apart: host gap 2.6 - 2.5 = 0.1 s; a validation record
    # breaks the next pair; a block of 8,192 tokens at 2,048 a step (4 steps) over 10 s: 2.5 s a step
    t = _tool()
    lines = [
        _line(1000, "block_start", epoch_count=8192),
        _line(3000, "tracked_stats", {"train_step_timing in s": 2.0}),
        _line(5600, "tracked_stats", {"train_step_timing in s": 2.5}),
        _line(6000, "tracked_stats", {"validation_step_timing in s": 0.3}),
        _line(9000, "tracked_stats", {"train_step_timing in s": 2.4}),
        _line(11000, "block_stop", epoch_count=8192),
        "plain console line",
    ]
    log = t.parse(lines, 2048)
    assert log.timed == [2.0, 2.5, 2.4]
    assert log.host_gap == pytest.approx([0.1])
    assert log.block == pytest.approx([2.5])
    # NeMo 2's record (v5.x logs) names the step train_step_time; its block_start has no epoch_count
    nemo2 = [_line(0, "block_start"), _line(500, "tracked_stats", {"train_step_time": 14.2, "reduced_train_loss": 7.7})]
    assert t.parse(nemo2, 2048) == t.StepLog([14.2], [], [])


def test_parse_two_records_a_step():
    # MLPerf v6.0 DeepSeek-V3 logs (NeMo 26.04, e.g. NVIDIA/results/theia_ngpu256_ngc26.04_nemo/
    # deepseekv3_671b/result_0.txt, step 42): the logging callback's record (39.1097 s, no loss) and the timing
    # callback's (39.0652 s, with reduced_train_loss) for the same step, then validation. Only the second counts:
    # one step, not two; the validation record breaks the pair, so no host gap.
    t = _tool()
    lines = [
        _line(1778676729055, "tracked_stats", {"train_step_time": 39.0652, "reduced_train_loss": 3.766}, lineno=341),
        _line(1778676729060, "tracked_stats", {"train_step_time": 39.1097}, lineno=299),
        _line(1778676730373, "tracked_stats", {"validation_time": 1.313}, lineno=310),
        _line(1778676769309, "tracked_stats", {"train_step_time": 38.9361}, lineno=299),
        _line(1778676769300, "tracked_stats", {"train_step_time": 38.8911, "reduced_train_loss": 3.743}, lineno=341),
    ]
    log = t.parse(lines, 15360 * 4096)
    assert log.timed == [39.0652, 38.8911]
    assert log.host_gap == []


def _timing():
    return load_catalog().reference("mlperf_step_timing")


def test_oracle_3072_drifts_and_1536_does_not():
    # Every 3,072-GPU log slows from about 2.74 s (device) + 0.07 s (host) to about 3.2 + 0.23 s; the
    # 1,536-GPU logs of the same job and cluster stay within 0.5 % of their first steps.
    ref = _timing()
    big, small = ref[ref.gpus == 3072], ref[ref.gpus == 1536]
    assert len(big) == len(small) == 3
    assert (big.timed_last_s / big.timed_first_s > 1.15).all()
    assert (big.host_gap_median_s > 2.5 * big.host_gap_first_s).all()
    assert (abs(small.timed_last_s / small.timed_first_s - 1) < 0.005).all()


def test_oracle_constant_is_modelled_before_the_drift():
    # Split T = W / N + F on the 1,536-GPU step (5.237 s, the published median) and the 3,072-GPU one before
    # the drift (blocks 2-5: 2.827 s): W / N = 5.237 - 2.827 = 2.410 s, F = 2.827 - 2.410 = 0.417 s. The
    # model's constant (bubble, exposed DP collectives, optimizer) is the same within 0.1 s; with the
    # drifting median of the 3,072-GPU logs (3.326 s) the measured constant would be 1.4 s.
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predict_run

    ref = _timing().groupby("run").median(numeric_only=True)
    t1 = ref.loc["mlperf-v41-oracle-gpt3-1536", "block_step_median_s"]
    t2 = ref.loc["mlperf-v41-oracle-gpt3-3072", "block_step_early_s"]
    f_measured = 2 * t2 - t1
    assert f_measured == pytest.approx(0.417, abs=0.005)
    runs = {r.id: r for r in training_runs()}
    m1, m2 = (float(predict_run(runs[f"mlperf-v41-oracle-h100-gpt3-{n}"]).step_time_s) for n in (1536, 3072))
    assert 2 * m2 - m1 == pytest.approx(f_measured, abs=0.1)
