"""GPUs set aside for inference in the cluster simulation (hnplan.cluster.reserve)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hnplan.cluster.simulate import simulate_cluster
from hnplan.errors import InputError

H = 3600.0


def _training_behind_inference(train_gpus: int, inference_gpus: int = 4, pairs: bool = False) -> pd.DataFrame:
    """One 48-h training job (30-min checkpoints, TP 4) at t = 0 and nine 1-h production inference jobs
    arriving at 1, 3, ..., 17 h (two at each time with ``pairs``)."""
    rows = [dict(arrival_s=0.0, gpus=train_gpus, duration_s=48 * H, cls="training", checkpoint_s=1800.0, tp=4)]
    for k in range(9):
        for _ in range(2 if pairs else 1):
            rows.append(
                dict(
                    arrival_s=(2 * k + 1) * H,
                    gpus=inference_gpus,
                    duration_s=H,
                    cls="inference",
                    checkpoint_s=0.0,
                    tp=1,
                )
            )
    df = pd.DataFrame(rows)
    df.insert(0, "job_id", range(len(df)))
    df.insert(3, "gpu_milli", 1000)
    return df


def _sim(jobs, reserve, **kw):
    return simulate_cluster(
        "gb200-nvl72", 144, jobs, failures=False, seed=0, warmup=0.0, inference_reserve_gpus=reserve, **kw
    )


def test_the_reserve_ends_the_drain_of_the_whole_cluster_job():
    """144 GB200 (two NVL72 racks, 36 trays of 4). Without a reserve the 144-GPU job is preempted by each
    of the nine inference jobs (each finds no GPU; the job is past its hour's exemption at every arrival
    after it restarts). With 8 GPUs (two trays) set aside, the job of the shared pool's 136 GPUs runs its
    48 h from t = 0 unpreempted, and every inference job starts on arrival on the reserve. By hand over
    the 17-h window (the last arrival; no warm-up): the reserve holds 4 GPUs for 8 whole hours (the 9th
    job starts at the window's end), 32 GPU-h of 8 x 17 = 136: 23.5 %; the cluster's allocation is
    (136 x 17 + 32) / (144 x 17) = 2,344 / 2,448 = 95.8 %."""
    before = _sim(_training_behind_inference(144), 0)
    assert before.jobs.loc[0, "preemptions"] == 9
    # by hand, no reserve: each 2 h the job runs 1 h on 144 GPUs, is preempted, and waits out the inference
    # job's hour on 4 GPUs (it needs all 144 back): 9 training hours and 8 inference hours in the 17-h window,
    # (9 x 144 + 8 x 4) / (144 x 17) = 1,328 / 2,448 = 54.2 %
    assert before.summary["allocation_rate"] == pytest.approx(1328 / 2448)
    r = _sim(_training_behind_inference(136), 8)
    j, s = r.jobs, r.summary
    assert j.loc[0, "preemptions"] == 0 and j.loc[0, "lost_work_s"] == 0.0
    assert j.loc[0, "start_s"] == 0.0 and j.loc[0, "end_s"] == pytest.approx(48 * H / j.loc[0, "speed"])
    inf = j[j["cls"] == "inference"]
    assert (inf["start_s"] == inf["arrival_s"]).all()
    assert inf["reserve_gpu_s"].tolist() == pytest.approx([4 * H] * 9)  # every one ran on the reserve
    assert j.loc[0, "reserve_gpu_s"] == 0.0
    assert s["preemptions"] == 0 and s["blocked"] == 0.0
    assert s["reserve"]["gpus"] == 8 and s["reserve"]["nodes"] == 2
    assert s["reserve"]["utilisation"] == pytest.approx(32 / 136)
    assert s["allocation_rate"] == pytest.approx(2344 / 2448)


def test_inference_preempts_training_only_when_the_reserve_is_full():
    """One tray (4 GPUs) reserved, the training job on the other 140: at each of the nine times two 4-GPU
    inference jobs arrive; the first takes the reserve, the second finds no GPU and preempts training
    (past its exemption at 1 h). After the first preemption the training job waits for the second
    inference job's hour, restarts at 2 h and is exempt until 3 h, when the next pair arrives: so it is
    preempted at every pair, nine times, and never by the job the reserve took."""
    r = _sim(_training_behind_inference(140, pairs=True), 4)
    j = r.jobs
    assert j.loc[0, "preemptions"] == 9
    inf = j[j["cls"] == "inference"]
    on_reserve = inf["reserve_gpu_s"] > 0
    assert on_reserve.sum() == 9  # one of each pair
    assert (inf.loc[on_reserve, "start_s"] == inf.loc[on_reserve, "arrival_s"]).all()


def test_a_request_is_rounded_up_to_whole_nodes_and_a_job_larger_than_the_shared_pool_is_rejected():
    """6 GPUs on 4-GPU trays: 2 trays, 8 GPUs, and the note says so. A 140-GPU training job cannot fit
    the 136 shared GPUs: it is rejected at submission (as a job larger than the cluster), and the
    inference jobs still run."""
    r = _sim(_training_behind_inference(140), 6)
    s = r.summary
    assert s["reserve"]["gpus"] == 8 and "asked 6: rounded up to whole 4-GPU nodes" in s["reserve"]["note"]
    assert r.jobs.loc[0, "status"] == "rejected" and s["jobs"]["rejected"] == 1
    assert s["jobs"]["done"] == 9
    # 3 GPUs: one tray, said in the singular (it read "4 GPUs on 1 nodes")
    note = _sim(_training_behind_inference(140), 3).summary["reserve"]["note"]
    assert note == "4 GPUs on 1 node for inference only (asked 3: rounded up to whole 4-GPU nodes)"


def test_no_reserve_is_todays_run_bit_for_bit():
    kw = dict(n_jobs=300, seed=3, days=None)
    a = simulate_cluster("hgx-h100-ib-ndr", 64, **kw)
    b = simulate_cluster("hgx-h100-ib-ndr", 64, inference_reserve_gpus=0, **kw)
    assert a.summary == b.summary and "reserve" not in b.summary
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)


@pytest.mark.parametrize("seed", [0, 1])
def test_conservation_with_a_reserve(seed):
    """On a mixed stream with 16 GPUs (two servers) reserved on 64 H100: every job counted once;
    allocated + free + down = capacity at every sample; the reserve never holds a training-class job;
    its utilisation is a share; the same seed gives the same run."""
    kw = dict(n_jobs=300, seed=seed, inference_reserve_gpus=16)
    r = simulate_cluster("hgx-h100-ib-ndr", 64, **kw)
    s, j, ts = r.summary, r.jobs, r.timeseries
    assert sum(s["jobs"].values()) == len(j) == 300
    assert np.allclose(ts["allocation"] + ts["free"] + ts["down"], 1.0)
    assert (j.loc[j["cls"] != "inference", "reserve_gpu_s"] == 0.0).all()
    assert (j.loc[j["cls"] == "inference", "reserve_gpu_s"] > 0).any()
    assert 0.0 <= s["reserve"]["utilisation"] <= 1.0
    assert s["reserve"]["gpus"] == 16
    again = simulate_cluster("hgx-h100-ib-ndr", 64, **kw)
    assert again.summary == s
    pd.testing.assert_frame_equal(again.jobs, j)


def test_a_bad_reserve_is_refused():
    with pytest.raises(InputError, match="inference_reserve_gpus"):
        simulate_cluster("hgx-h100-ib-ndr", 16, n_jobs=5, inference_reserve_gpus=-1)
    with pytest.raises(InputError, match="shared pool"):
        simulate_cluster("hgx-h100-ib-ndr", 16, n_jobs=5, inference_reserve_gpus=16)


def test_the_cli_flag_reports_the_reserve(tmp_path):
    """``--inference-reserve-gpus`` reaches the simulation: the hand-checked case above from a CSV trace,
    its JSON summary with the reserve's figures; a reserve of the whole cluster exits 2 with one line."""
    import json

    from typer.testing import CliRunner

    from hnplan.cli import app

    path = tmp_path / "jobs.csv"
    _training_behind_inference(136).to_csv(path, index=False)
    args = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--trace", str(path), "--no-failures"]
    r = CliRunner().invoke(app, [*args, "--inference-reserve-gpus", "6", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["preemptions"] == 0 and d["reserve"]["gpus"] == 8 and "asked 6" in d["reserve"]["note"]
    bad = CliRunner().invoke(app, [*args, "--inference-reserve-gpus", "144"])
    assert bad.exit_code == 2 and "shared pool" in bad.output
