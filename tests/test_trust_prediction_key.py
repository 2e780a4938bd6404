"""The trust notes plan a configuration published twice once (hnplan.planning.trust._prediction_key): the key must
hold every run field the prediction reads, and only those, so two runs share a prediction exactly when it is the
same number."""

from __future__ import annotations

import json

import pytest

from hnplan.catalog.runs import TrainingRun, training_runs
from hnplan.planning.trust import _planned_errors, _prediction_key
from hnplan.planning.validation import predicted

#: what hnplan.planning.validation.predicted reads of a run: run_job (model, system, GPUs, sequence length,
#: sequences per step, dtype, stack, overrides; run_model: mtp_modules), candidate_arrays (fixed), the metric
#: picked and the GPUs it divides tokens/s by
READ = {"model", "system", "gpus", "seq_len", "global_batch_seqs", "dtype", "fixed", "stack", "overrides",
        "mtp_modules", "metric"}  # fmt: skip
#: what it does not: the published value and the bookkeeping around it
NOT_READ = {"id", "name", "source", "published", "tolerance_pct", "tolerance_reason", "expect", "gap_bound_pct",
            "gap_reason", "hnplan_fits", "note"}  # fmt: skip


def test_every_run_field_is_in_the_key_or_not_read_by_the_prediction():
    # a field added to TrainingRun fails here until it is put in one of the two sets (and in the key if read)
    assert set(TrainingRun.model_fields) == READ | NOT_READ
    assert set(json.loads(_prediction_key(training_runs()[0]))) == READ


@pytest.mark.parametrize(
    "change",
    [{"gpus": 256}, {"seq_len": 4096}, {"global_batch_seqs": 512}, {"dtype": "bf16"}, {"fixed": {"tp": 4}},
     {"stack": "megatron-core"}, {"overrides": {"tp_comm": False}}, {"mtp_modules": 0},
     {"metric": "tokens_per_s_per_gpu"}, {"model": "llama3.1-70b"}, {"system": "hgx-h200-ib-ndr"}],
)  # fmt: skip
def test_a_change_the_prediction_reads_changes_the_key(change):
    run = next(r for r in training_runs() if r.id == "mlperf-v50-nvidia-gb200-llama31-405b-512")
    assert _prediction_key(run.model_copy(update=change)) != _prediction_key(run)


def test_the_pairs_published_twice_share_a_prediction_and_keep_their_own_errors():
    runs = {r.id: r for r in training_runs()}
    a, b = runs["mbridge2602-b200-deepseek-v3-256-fp8"], runs["mbridge2604-b200-deepseek-v3-256-fp8"]
    assert _prediction_key(a) == _prediction_key(b)
    assert _prediction_key(a.model_copy(update={"published": 1.0, "note": "x", "id": "other"})) == _prediction_key(a)
    errs = _planned_errors([a, b], None)
    for r in (a, b):  # each run's error from the one prediction and its own published value, as planned alone
        value = predicted(r)
        ratio = value / r.published
        assert errs[r.id] == pytest.approx((1.0 / ratio if r.metric == "step_time_s" else ratio) - 1.0, rel=1e-12)
