"""EASY backfilling's reservation after a preemption: the blocked job's shadow time is recomputed when a
preemption changes the machine, so a job later in the same scheduler pass cannot backfill onto the stopped
job's GPUs against the old shadow time (Lifka 1995; Mu'alem and Feitelson, IEEE TPDS 2001, Sec. 2: the
reservation follows every change of the machine's state)."""

import pandas as pd

from hnplan.cluster import simulate_cluster

H = 3600.0
COLS = ["arrival_s", "gpus", "gpu_milli", "duration_s", "cls", "checkpoint_s", "tp"]


def _trace() -> pd.DataFrame:
    # two 8-GPU servers, first-fit, no failures, no exempt time
    # A: training, 8 GPUs, t = 0, 10 h          -> server 0, ends 36,000 s
    # V: training, 8 GPUs, t = 1 s, 20 h        -> server 1, expected end 72,001 s
    # R: training, 16 GPUs, t = 2 s, 1 h        -> blocked: the reservation, shadow time 72,001 s (V's end), no extra
    # B: training, 7 GPUs, t = 3 s, 12 h        -> no GPU free; would end before 72,001 s (a backfill candidate)
    # I: inference, 1 GPU, t = 1 h, 1 h         -> no GPU free: preempts V (the latest-started training job),
    #                                              runs on server 1 until 7,200 s; V is requeued
    # After the preemption R's shadow time is A's end, 36,000 s (I ends at 7,200 s), still no extra GPU:
    # B (ending 3,600 + 43,200 = 46,800 s > 36,000 s, 7 GPUs > 0 extra) must wait, and so must V (20 h).
    # Server 1 is drained for R from 7,200 s; R starts at 36,000 s and ends at 39,600 s; then V (queued
    # ahead of B: it arrived first) and B start together at 39,600 s, one per server.
    # Backfilling B at 3,600 s against the old shadow time (72,001 s) would hold server 1 until 46,800 s
    # and start R at 46,800 s: 3 h after its reservation.
    return pd.DataFrame(
        [
            (0.0, 8, 1000, 10 * H, "training", H, 8),
            (1.0, 8, 1000, 20 * H, "training", H, 8),
            (2.0, 16, 1000, H, "training", H, 8),
            (3.0, 7, 1000, 12 * H, "training", H, 1),
            (H, 1, 1000, H, "inference", 0.0, 1),
        ],
        columns=COLS,
    )


def test_a_preemption_moves_the_reservation_and_the_same_pass_honours_it():
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, jobs=_trace(), failures=False, policy="first-fit", preempt_exempt_s=0.0, seed=0
    )
    j = r.jobs.set_index("job_id")
    assert j["preemptions"].tolist() == [0, 1, 0, 0, 0]  # V only
    assert j.loc[4, "start_s"] == H and j.loc[4, "end_s"] == 2 * H  # I on arrival
    assert j.loc[2, "start_s"] == 10 * H  # R at its recomputed shadow time, A's end
    assert j.loc[2, "end_s"] == 11 * H
    assert j.loc[3, "start_s"] == 11 * H  # B after R, not backfilled at 1 h
    assert j.loc[1, "start_s"] == 1.0  # V's first start (start_s is the first one)
    assert j.loc[3, "end_s"] == 23 * H
