"""`hnplan cluster simulate` as a platform lead first tries it: a small trace of one's own (its figures derived by
hand), an inference reserve's rejected jobs, a TP group of 0 GPUs, the openb node list at fewer GPUs, goodput at
most 1, and the training jobs a reference design cannot speed up."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cluster import runtime, simulate_cluster

runner = CliRunner()
HEADER = "job_id,arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
SIX = (
    "0,0,8,1000,3600,training,1800,8\n"
    "1,60,16,1000,7200,training,1800,8\n"
    "2,120,1,500,600,development,0,1\n"
    "3,180,4,1000,1200,fine-tuning,600,4\n"
    "4,240,1,1000,300,inference,0,1\n"
    "5,300,32,1000,3600,training,1800,8\n"
)
SERVERS = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]


def one_line(text: str) -> str:
    return " ".join(text.split())


def _trace(tmp_path, rows: str, name: str = "jobs.csv"):
    path = tmp_path / name
    path.write_text(HEADER + rows)
    return path


def test_own_trace_figures_by_hand(tmp_path):
    """Six jobs on 64 H100s, no failures, nothing queues (61 GPUs at most at once). Arrival window 300 s, warm-up
    a fifth of it (60 s): measured from 60 s to 300 s, 240 s x 64 GPUs = 15,360 GPU s. Busy in it: job 0 8 x 240 =
    1,920, job 1 16 x 240 = 3,840, job 2 0.5 x 180 = 90, job 3 4 x 120 = 480, job 4 1 x 60 = 60, job 5 starts at
    300 s: 0; 6,390 GPU s, so utilisation 6,390 / 15,360 = 0.416015625. Each job's GPU-time is its size x run
    time (job 2: 0.5 x 600 = 300 GPU s), its JCT its run time and its queueing delay 0."""
    r = simulate_cluster("hgx-h100-ib-ndr", 64, trace=_trace(tmp_path, SIX), failures=False)
    s, j = r.summary, r.jobs
    assert (s["window_s"], s["warmup_s"]) == (300.0, 60.0)
    assert s["utilisation"] == s["allocation_rate"] == pytest.approx(6390 / 15360, rel=1e-12)
    assert s["capacity_gpu_s"]["busy"] == pytest.approx(6390.0)
    assert s["capacity_gpu_s"]["idle_empty_queue"] == pytest.approx(15360.0 - 6390.0)
    assert s["jobs"] == {"done": 6, "running": 0, "queued": 0, "rejected": 0, "unplaceable": 0}
    share = j["gpus"] * j["gpu_milli"] / 1000
    assert j["allocated_gpu_s"].tolist() == pytest.approx((share * j["duration_s"]).tolist())
    assert j["allocated_gpu_s"].tolist() == pytest.approx([28800, 115200, 300, 4800, 300, 115200])
    assert (j["end_s"] - j["arrival_s"]).tolist() == pytest.approx(j["duration_s"].tolist())
    assert (j["queue_delay_s"] == 0).all() and s["goodput"] == 1.0


def test_rejected_beside_an_inference_reserve_names_the_gpus_the_class_may_use(tmp_path):
    """A 64-GPU training job on 64 GPUs, 8 of them an inference reserve: it may use 64 - 8 = 56 GPUs, so it is
    rejected; the line said it was larger than the cluster's 64 GPUs, which it is not."""
    path = _trace(tmp_path, "0,0,64,1000,3600,training,1800,8\n")
    res = runner.invoke(app, [*SERVERS, "--trace", str(path), "--no-failures", "--inference-reserve-gpus", "8"])
    assert res.exit_code == 2, res.output
    assert one_line(res.stderr) == (
        "error: every job is larger than the GPUs its class may use (the cluster's 64; for classes other than "
        "inference the 56 outside the 8-GPU inference reserve) or than every node it may run on (rejected 1): "
        "nothing ran; give more GPUs (--gpus) or a smaller --inference-reserve-gpus"
    )
    assert "Traceback" not in res.output
    # beside a job that runs, the table's jobs row says the same; 64 GPUs x 1 h = 64 GPU-hours left out
    path = _trace(tmp_path, "0,0,64,1000,3600,training,1800,8\n1,10,8,1000,3600,training,1800,8\n")
    res = runner.invoke(app, [*SERVERS, "--trace", str(path), "--no-failures", "--inference-reserve-gpus", "8"])
    assert res.exit_code == 0, res.output
    text = one_line(res.stdout.replace("│", " "))
    assert (
        "rejected 1 (larger than the GPUs its class may use (the cluster's 64; for classes other than inference "
        "the 56 outside the 8-GPU inference reserve); 64 GPU-hours left out of the offered load)"
    ) in text


def test_without_a_reserve_the_rejected_line_is_unchanged(tmp_path):
    path = _trace(tmp_path, "0,0,128,1000,3600,training,1800,8\n1,10,8,1000,3600,training,1800,8\n")
    res = runner.invoke(app, [*SERVERS, "--trace", str(path), "--no-failures"])
    assert res.exit_code == 0, res.output
    text = one_line(res.stdout.replace("│", " "))
    assert "rejected 1 (larger than the cluster's 64 GPUs; 128 GPU-hours left out of the offered load)" in text


@pytest.mark.parametrize("tp", ["0", "-8"])
def test_a_tp_group_of_no_gpus_is_refused_as_such(tmp_path, tp):
    """tp = 0 was told it "must divide the job's 8 GPUs"; no group has 0 (or -8) GPUs."""
    path = _trace(tmp_path, f"0,0,8,1000,3600,training,1800,{tp}\n")
    res = runner.invoke(app, [*SERVERS, "--trace", str(path)])
    assert res.exit_code == 2, res.output
    assert one_line(res.stderr) == (
        f"error: {path}: row 2, column tp: must be >= 1 (the GPUs of a tensor-parallel group; 1: none); has {tp}"
    )


def test_openb_nodes_at_fewer_gpus_say_the_count_asked():
    """--nodes openb --gpus 72 scales each of the trace's 15 node groups by 72 / 6,212 and keeps each to at least
    one node: 19 x 1-GPU V100M16 nodes -> 1, ..., 549 x 8-GPU G2 nodes -> round(6.36) = 6; 109 GPUs in all,
    which the title printed without the 72 asked."""
    from hnplan.cluster.validation import OPENB_NODES

    by_hand = sum(g * max(1, round(n * 72 / 6212)) for g, _, _, _, n in OPENB_NODES)
    assert by_hand == 109
    res = runner.invoke(app, [*SERVERS[:4], "--gpus", "72", "--nodes", "openb", "--jobs", "20"])
    assert res.exit_code == 0, res.output
    assert "109 x openb (72 asked: each of the node list's groups scaled to it, rounded, at least one node)" in (
        one_line(res.stdout)
    )
    res = runner.invoke(app, [*SERVERS[:4], "--gpus", "72", "--nodes", "openb", "--jobs", "20", "--json"])
    assert json.loads(res.stdout)["gpus"] == 109


def test_goodput_is_at_most_one():
    """144 H100s, 400 jobs of the default mix, seed 1, topology-aware: no work lost, and the useful over the
    allocated GPU-time rounded to 1 + 2.2e-16 (useful = size x run time per job, summed apart from the
    allocation). A fraction of the allocated GPU-time is at most 1."""
    r = simulate_cluster("hgx-h100-ib-ndr", 144, n_jobs=400, policy="topology-aware", seed=1)
    j = r.jobs
    assert j["lost_work_s"].sum() == 0.0
    assert np.allclose(j["allocated_gpu_s"], j["useful_gpu_s"])
    assert r.summary["goodput"] == 1.0


def test_training_jobs_no_plan_speeds_up_are_said(tmp_path, monkeypatch):
    """Durations measured on H100 servers, run on GB200 NVL72: an 8-GPU training job runs Llama 3.1 8B at
    195,150 / 94,553 = 2.064x, a 32-GPU one Llama 3.1 70B at 88,130 / 38,163 = 2.309x; the 16-GPU one's 70B fits
    on no plan of 16 H100s, so it is taken as the next smaller model, 8B: 389,975 / 188,973 = 2.064x. A 1-GPU
    fine-tuning job (added to the six) fits no 8B plan on one 80 GB H100 (8.03e9 x 18 bytes of weights and
    optimizer state, 134.6 GiB), so it is taken as the fallback, Llama 3.2 1B: 114,636 / 54,851 = 2.090x, and no
    job keeps its duration. With no fallback below 8B (monkeypatched) the 1-GPU job keeps its 2,400 s (ratio
    1.0), said: its share of the training classes' reference GPU-time is 1 x 2,400 of 8 x 3,600 + 16 x 7,200 +
    4 x 1,200 + 32 x 3,600 + 2,400 = 266,400, 0.9 %."""
    rows = SIX + "6,360,1,1000,2400,fine-tuning,600,1\n"
    kw = dict(trace=_trace(tmp_path, rows), failures=False, reference_system="hgx-h100-ib-ndr")
    r = simulate_cluster("gb200-nvl72", 72, **kw)
    speed = dict(zip(r.jobs["gpus"], r.jobs["design_speed"]))
    assert speed[8] == pytest.approx(2.064, abs=0.001) and speed[32] == pytest.approx(2.309, abs=0.001)
    assert speed[16] == pytest.approx(389_974.87 / 188_973.04, rel=1e-6)
    assert speed[1] == pytest.approx(114_636.42 / 54_850.50, rel=1e-4)
    assert r.summary["design_speed_kept"] == {"jobs": 0, "gpu_time_share": 0.0, "gpus": []}

    monkeypatch.setattr(runtime, "FALLBACK_MODEL", "llama3.1-8b")
    r = simulate_cluster("gb200-nvl72", 72, **kw)
    assert dict(zip(r.jobs["gpus"], r.jobs["design_speed"]))[1] == 1.0
    assert r.summary["design_speed_kept"] == {
        "jobs": 1,
        "gpu_time_share": pytest.approx(2400 / 266400),
        "gpus": [1],
    }
    argv = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "72", "--no-failures"]
    res = runner.invoke(app, [*argv, "--trace", str(tmp_path / "jobs.csv"), "--reference-system", "hgx-h100-ib-ndr"])
    assert res.exit_code == 0, res.output
    assert (
        "1 training-class jobs (1 GPUs; 0.9% of their GPU-time) keep their durations, 1.00x: no catalogued "
        "representative model fits on both designs at that size"
    ) in one_line(res.stdout.replace("│", " "))


def test_a_design_as_its_own_reference_keeps_no_job_apart(tmp_path):
    """Every ratio is exactly 1.0 on the design itself: none of them is a fallback."""
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 64, trace=_trace(tmp_path, SIX), failures=False, reference_system="hgx-h100-ib-ndr"
    )
    assert r.summary["design_speed_kept"] == {"jobs": 0, "gpu_time_share": 0.0, "gpus": []}
