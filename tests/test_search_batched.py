"""The search's batched passes give the numbers of their one-by-one forms bit for bit: several collectives of one op
(or of ops with the same time) timed in one call (collective_time.collectives_s), the tuner's float and array paths
for a group's sizes (collective_time.TUNER_FLOAT_SIZES, ALLREDUCE_FLOAT_SIZES), the all-reduces, all-gathers and
reduce-scatters of many placements in one array pass (collective_time.STACKED_ALLREDUCES, STACKED_OPS), and the plan
rules evaluated on the degrees against the (micro-batch, virtual stages) pairs broadcast (candidates.candidate_columns,
plan.valid_mask)."""

import numpy as np
import pytest

from hnplan.catalog import Catalog
from hnplan.planning.training import candidate_frame, collective_time, evaluate_plans, make_job, stage_compute
from hnplan.planning.training.candidates import MICROBATCH_SIZES, VIRTUAL_STAGES
from hnplan.planning.training.plan import valid_mask

# Llama 3.1 405B on 2,048 H100 (DP, TP, PP and CP searched) and DeepSeek-V3 on 256 H800 (expert groups too)
CASES = [("llama3.1-405b", "hgx-h100-ib-ndr", 2048, 8192, 256), ("deepseek-v3", "hgx-h800-ib", 256, 4096, 1920)]


def _job(case):
    model, system, gpus, seq, batch = case
    return make_job(model, system, gpus, seq, batch, catalog=Catalog())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_collectives_in_one_call_are_those_timed_one_by_one(case):
    # DP-like requests: gradient buckets over dp x cp ranks (stride tp), a reduce-scatter and an all-gather of each
    # (one op's times: SAME_TIME), an all-reduce; groups of one rank (not timed) among them
    tp = np.array([1, 2, 4, 8, 8, 4, 2, 8])
    dp = np.array([32, 16, 8, 4, 2, 1, 64, 8])
    n = np.array([3.0e8, 1.2e8, 6.4e7, 2.5e7, 2.5e7, 1.0e3, 7.7e8, 4.0e6])
    requests = [
        ("reducescatter", n, dp, tp),
        ("allgather", n / 2, dp, tp),
        ("allreduce", n, np.where(dp > 4, dp, 1), tp),
        ("allgather", 2.0e6, dp, tp),  # a scalar message broadcast to the rows
    ]
    stage_compute.clear_content_memo()
    together = collective_time.collectives_s(_job(case), requests)
    stage_compute.clear_content_memo()
    job = _job(case)
    apart = [collective_time.collective_s(job, *r) for r in requests]
    for a, b in zip(together, apart):
        assert a.shape == b.shape == (8,)
        np.testing.assert_array_equal(a, b)
    assert (together[2][dp <= 4] == 0).all() and (together[0][dp > 1] > 0).all() and (together[0][dp == 1] == 0).all()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_the_tuner_gives_a_group_the_same_times_on_floats_and_as_arrays(case, monkeypatch):
    model, system, gpus, seq, batch = case

    def search():
        stage_compute.clear_content_memo()
        job = _job(case)
        return evaluate_plans(job, candidate_frame(job.model, job.system, gpus, seq, batch))

    monkeypatch.setattr(collective_time, "STACKED_ALLREDUCES", 10**9)  # no all-reduces of placements stacked
    for limit in ("TUNER_FLOAT_SIZES", "ALLREDUCE_FLOAT_SIZES"):  # every group's new sizes on floats
        monkeypatch.setattr(collective_time, limit, 1_000)
    floats = search()
    for limit in ("TUNER_FLOAT_SIZES", "ALLREDUCE_FLOAT_SIZES"):  # every group's sizes together, as arrays
        monkeypatch.setattr(collective_time, limit, 0)
    arrays = search()
    for limit in ("STACKED_ALLREDUCES", "STACK_LEAST"):  # every all-reduce and all-gather in stacks of placements
        monkeypatch.setattr(collective_time, limit, 1)
    stacked = search()
    stage_compute.clear_content_memo()
    assert len(floats) > 100
    for col in floats.columns:
        np.testing.assert_array_equal(floats[col].to_numpy(), arrays[col].to_numpy(), err_msg=col)
        np.testing.assert_array_equal(floats[col].to_numpy(), stacked[col].to_numpy(), err_msg=col)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_the_rules_on_broadcast_columns_are_those_of_the_expanded_rows(case):
    job = _job(case)
    m, gpus, seq, batch = job.model, job.gpus, job.seq_len, job.global_batch_seqs
    deg = candidate_frame(m, job.system, gpus, seq, batch)[["tp", "cp", "pp", "ep", "etp"]].drop_duplicates()
    mb, v = (g.ravel() for g in np.meshgrid(MICROBATCH_SIZES, VIRTUAL_STAGES, indexing="ij"))
    grid = {k: deg[k].to_numpy()[:, None] for k in deg}
    grid.update(
        dp=gpus // (grid["tp"] * grid["cp"] * grid["pp"]), microbatch_size=mb[None, :], virtual_stages=v[None, :]
    )
    rows = {k: np.broadcast_to(a, (len(deg), len(mb))).ravel() for k, a in grid.items()}
    for balanced in (False, True):
        broadcast = valid_mask(grid, m, gpus, seq, batch, balanced_ends=balanced)
        expanded = valid_mask(rows, m, gpus, seq, batch, balanced_ends=balanced)
        assert broadcast.shape == (len(deg), len(mb)) and expanded.shape == (len(deg) * len(mb),)
        np.testing.assert_array_equal(broadcast.ravel(), expanded)
        assert expanded.any() and not expanded.all()  # the micro-batch and virtual-stage rules bind
