"""EASY backfilling's reservation after a preemption: the blocked job's shadow time is recomputed when a
preemption changes the machine, so a job later in the same scheduler pass cannot backfill onto the stopped
job's GPUs against the old shadow time (Lifka 1995; Mu'alem and Feitelson, IEEE TPDS 2001, Sec. 2: the
reservation follows every change of the machine's state)."""

import pandas as pd
import pytest

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


def _bound_preemption_trace() -> pd.DataFrame:
    # two 8-GPU servers, first-fit, no failures, no exempt time
    # B: training, 4 GPUs, t = 0, 20 h           -> server 0, GPUs 0-3, ends 72,000 s
    # C: training, 4 GPUs, t = 1 s, 2 h          -> server 0, GPUs 4-7, ends 7,201 s
    # A: training, 8 GPUs, t = 2 s, 10 h         -> server 1, ends 36,002 s
    # R: training, 8 GPUs on one server, t = 3 s -> blocked: the reservation, shadow time 36,002 s (server 1
    #                                               when A ends; server 0 only at 72,000 s), extra 4 GPUs
    #                                               (C's, free from 7,201 s)
    # I: inference, 1 GPU, t = 1 h, 20 h         -> no GPU free; it would outlast the shadow time (75,600 s) but
    #                                               fits the 4 extra GPUs. The preemption trial frees A first (the
    #                                               latest-started): I would go to server 1 GPU 0 until 75,600 s and
    #                                               R's shadow time would move to 72,000 s (server 0): refused, as
    #                                               a backfilled job's placement would be. The trial then frees C:
    #                                               I goes to server 0 GPU 4, so only C is stopped; R keeps 36,002 s.
    # R runs 36,002-39,602 s on server 1. C (requeued, arrival 1 s: ahead of R) needs 4 GPUs on one server: at
    # 36,002 s it would outlast R's shadow time (now) with 4 GPUs > 3 spare, so it waits; it starts at 39,602 s
    # on server 1 when R ends, its 2 h again (no checkpoint reached: 1 h period, 3,599 s run) after the restart.
    return pd.DataFrame(
        [
            (0.0, 4, 1000, 20 * H, "training", H, 4),
            (1.0, 4, 1000, 2 * H, "training", H, 4),
            (2.0, 8, 1000, 10 * H, "training", H, 8),
            (3.0, 8, 1000, H, "training", H, 8),
            (H, 1, 1000, 20 * H, "inference", 0.0, 1),
        ],
        columns=COLS,
    )


def test_a_bound_inference_job_preempts_only_where_the_reservation_stays():
    r = simulate_cluster(
        "hgx-h100-ib-ndr",
        16,
        jobs=_bound_preemption_trace(),
        failures=False,
        policy="first-fit",
        preempt_exempt_s=0.0,
        seed=0,
    )
    j = r.jobs.set_index("job_id")
    assert j["preemptions"].tolist() == [0, 1, 0, 0, 0]  # C, not A
    assert j.loc[4, "start_s"] == H and j.loc[4, "end_s"] == 21 * H  # I on arrival
    assert j.loc[2, "end_s"] == 36002.0  # A runs undisturbed
    assert j.loc[3, "start_s"] == 36002.0 and j.loc[3, "end_s"] == 36002.0 + H  # R at its shadow time
    assert j.loc[1, "lost_work_s"] == pytest.approx(H - 1.0)
    assert j.loc[1, "end_s"] > 39602.0 + 2 * H  # C after R, the whole 2 h again plus its restart


def _reconsidered_trace() -> pd.DataFrame:
    # two 8-GPU servers, first-fit, no failures, no preemption
    # A: training, 8 GPUs, t = 0, 2 h       -> server 0, ends 7,200 s
    # X: training, 7 GPUs, t = 1 s, 20 h    -> server 1, GPUs 0-6
    # Y: training, 1 GPU, t = 2 s, 7,198 s  -> server 1, GPU 7, ends 7,200 s with A
    # R: training, 8 GPUs on one server, t = 3 s, 1 h -> blocked: the reservation, shadow time 7,200 s, extra 1
    # I: inference, 1 GPU, t = 100 s, 10 h  -> no GPU free; it waits
    # At 7,200 s both servers free a GPU set: the pass takes I first (higher priority); first-fit puts it on
    # server 0 GPU 0, which would move R's reservation to I's end (43,200 s): held back. R starts on server 0.
    # With the reservation gone, I is tried again in the same pass and starts at 7,200 s on server 1 GPU 7
    # (before: at R's end, 10,800 s, the next event).
    return pd.DataFrame(
        [
            (0.0, 8, 1000, 2 * H, "training", H, 8),
            (1.0, 7, 1000, 20 * H, "training", H, 1),
            (2.0, 1, 1000, 7198.0, "training", H, 1),
            (3.0, 8, 1000, H, "training", H, 8),
            (100.0, 1, 1000, 10 * H, "inference", 0.0, 1),
        ],
        columns=COLS,
    )


def test_a_job_the_reservation_held_back_starts_in_the_pass_that_starts_the_reserved_job():
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, jobs=_reconsidered_trace(), failures=False, preemption=False, policy="first-fit", seed=0
    )
    j = r.jobs.set_index("job_id")
    assert j.loc[3, "start_s"] == 2 * H and j.loc[3, "end_s"] == 3 * H  # R when A and Y end
    assert j.loc[4, "start_s"] == 2 * H and j.loc[4, "end_s"] == 12 * H  # I beside it, in the same pass
    assert j["preemptions"].sum() == 0


def _handover_trace() -> pd.DataFrame:
    # two 8-GPU servers, first-fit, no failures, no preemption
    # L: training, 8 GPUs, t = 0, 2 h         -> server 0, ends 7,200 s
    # S: training, 8 GPUs, t = 1 s, 1 h       -> server 1, ends 3,601 s
    # A: training, 16 GPUs, t = 2 s, 1 h      -> blocked: the reservation, shadow time 7,200 s (L's end), no extra
    # B: training, 16 GPUs, t = 3 s, 1 h      -> queued behind A (same class, later)
    # I: inference, 1 GPU, t = 100 s, 10 h    -> ahead of both in priority order; at 3,601 s server 1 is free, but
    #                                            I would outlast A's shadow time with no GPU to spare: held (the drain)
    # At 7,200 s A starts on both servers. I, held back by A's reservation, is tried again and finds no GPU: the
    # first blocked job in priority order, it takes the reservation (shadow time A's end, 10,800 s), not B.
    # At 10,800 s I starts (10 h, to 46,800 s); B, blocked by I's GPU, takes the reservation at I's end and
    # starts at 46,800 s. The order is the priority order's: inference ahead of training.
    # (A pass that did not try I again after A started gave the reservation to B, which started at 10,800 s,
    # back to back with A, and I at B's end, 14,400 s.)
    return pd.DataFrame(
        [
            (0.0, 8, 1000, 2 * H, "training", H, 8),
            (1.0, 8, 1000, H, "training", H, 8),
            (2.0, 16, 1000, H, "training", H, 8),
            (3.0, 16, 1000, H, "training", H, 8),
            (100.0, 1, 1000, 10 * H, "inference", 0.0, 1),
        ],
        columns=COLS,
    )


def test_the_reservation_passes_to_the_first_blocked_job_in_priority_order_when_its_holder_starts():
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, jobs=_handover_trace(), failures=False, preemption=False, policy="first-fit", seed=0
    )
    j = r.jobs.set_index("job_id")
    assert j.loc[2, "start_s"] == 2 * H  # A at its shadow time, L's end
    assert j.loc[4, "start_s"] == 3 * H and j.loc[4, "end_s"] == 13 * H  # I when A ends, ahead of B
    assert j.loc[3, "start_s"] == 13 * H and j.loc[3, "end_s"] == 14 * H  # B waits for I's GPU: 10 h, not 0
    assert j["preemptions"].sum() == 0


def _reserved_preempts_trace() -> pd.DataFrame:
    # two 8-GPU servers, first-fit, no failures, a one-hour preemption exempt time
    # P: training, 8 GPUs, t = 0, 20 h         -> server 0; preemptible from 3,600 s
    # Q: training, 8 GPUs, t = 1 s, 2 h        -> server 1, ends 7,201 s; preemptible from 3,601 s
    # I: inference, 6 GPUs, t = 10 s, 10 h     -> no GPU free and P and Q are exempt: blocked, the reservation
    #                                             (shadow time Q's end, 7,201 s)
    # X: training, 16 GPUs, t = 20 s, 1 h      -> blocked behind I
    # Y: training, 2 GPUs, t = 30 s, 20 h      -> no GPU free
    # At 3,600 s P's exemption ends: the reserved job I preempts P and starts on server 0, GPUs 0-5, until
    # 39,600 s; GPUs 6-7 of server 0 are free. The reservation passes in that pass to the next blocked job, X:
    # shadow time I's end, 39,600 s, no GPU spare, so Y (ending 3,600 + 72,000 s) must wait. X starts at
    # 39,600 s, then P and Y at X's end, 43,200 s.
    # (A pass that went on judging later jobs against I, started but taken as still to be placed, found 6 GPUs
    # for it on server 1 at Q's end, 7,201 s, with 4 to spare: Y started at 3,600 s on server 0's GPUs 6-7, until
    # 75,600 s; the next pass gave the reservation to P, requeued, which restarted on server 1 at 7,201 s, and X
    # started at 76,201 s, 10.2 h past the reservation it gets here.)
    return pd.DataFrame(
        [
            (0.0, 8, 1000, 20 * H, "training", H, 8),
            (1.0, 8, 1000, 2 * H, "training", H, 8),
            (10.0, 6, 1000, 10 * H, "inference", 0.0, 1),
            (20.0, 16, 1000, H, "training", H, 8),
            (30.0, 2, 1000, 20 * H, "training", H, 1),
        ],
        columns=COLS,
    )


def test_a_reserved_job_that_starts_by_preempting_hands_the_reservation_on_in_the_same_pass():
    r = simulate_cluster(
        "hgx-h100-ib-ndr",
        16,
        jobs=_reserved_preempts_trace(),
        failures=False,
        policy="first-fit",
        preempt_exempt_s=H,
        seed=0,
    )
    j = r.jobs.set_index("job_id")
    assert j["preemptions"].tolist() == [1, 0, 0, 0, 0]  # P only
    assert j.loc[2, "start_s"] == H and j.loc[2, "end_s"] == 11 * H  # I when P's exemption ends
    assert j.loc[3, "start_s"] == 11 * H and j.loc[3, "end_s"] == 12 * H  # X at its shadow time, I's end
    assert j.loc[4, "start_s"] == 12 * H  # Y after X, not backfilled at 1 h
    # P restarts after X with its 1-h checkpoint taken at 3,600 s (no work lost): its other 19 h after 43,200 s
    assert j.loc[0, "lost_work_s"] == 0.0 and j.loc[0, "end_s"] > 12 * H + 19 * H
