"""What a new-user trial of the command line found: each a CLI run asserting the exit code and the figure or the
one-line message."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
CLUSTER = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "8"]


def test_a_job_larger_than_the_cluster_is_left_out_of_the_offered_load(tmp_path):
    # a pod of 0.46 GPU for 1 h arriving at 0 and one of 100 GPUs for 10,000 h at 10 s on 8 GPUs: the second is
    # rejected at submission; the load is the first's 0.46 x 3,600 GPU s over 8 GPUs x the 10 s window = 20.7
    # (it read 4.5 x 10^7 with the rejected job's 10^6 GPU-hours counted)
    path = tmp_path / "pods.csv"
    path.write_text(
        HEADER + "p1,6000,12288,1,460,LS,Running,0,3600,0\np2,6000,12288,100,1000,LS,Running,10,36000010,10\n"
    )
    res = runner.invoke(app, [*CLUSTER, "--trace", str(path), "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    s = json.loads(res.stdout)
    assert s["jobs"]["rejected"] == 1 and s["jobs"]["done"] == 1
    assert s["offered_load"] == pytest.approx(0.46 * 3600 / (8 * 10))
    assert s["rejected_gpu_hours"] == pytest.approx(100 * 10_000)
    assert s["unplaceable_gpu_hours"] == 0.0
    assert s["run_time_weighted_s"] == pytest.approx(3600.0)  # the admitted pod's run time alone
    assert "offer 2070%" in s["steady_state_note"]


def test_a_trace_whose_every_job_is_larger_than_the_cluster_is_refused(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(HEADER + "p2,6000,12288,100,1000,LS,Running,10,36000010,10\n")
    res = runner.invoke(app, [*CLUSTER, "--trace", str(path)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        "error: every job is larger than the cluster's 8 GPUs or than every node it may run on (rejected 1): "
        "nothing ran; give more GPUs (--gpus)"
    )


def _size(*args: str) -> dict:
    res = runner.invoke(app, ["size", "--model", "llama3.1-405b", "--tokens", "15T", *args, "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["results"]


def test_size_on_a_count_without_a_layout_runs_on_the_counts_its_whole_racks_hold():
    # 100 GB200 GPUs buy two 72-GPU racks, 144 GPUs; 100 = 4 x 25 has no layout of the 405B (the batch of 2,048
    # sequences and the 126 layers take no factor 25), so the racks' own counts are weighed: all 144 (TP4 PP9 DP2
    # CP2) and 64 of each rack, 128; the faster is kept (it was "infeasible", exit 3)
    (r,) = _size("--system", "gb200-nvl72", "--gpus", "100")
    assert (r["gpus_bought"], r["units"]) == (144, 2)
    weighed = {o["gpus"]: o for o in r["gpu_options"]}
    assert list(weighed) == [100, 144, 128]  # the count asked for first
    assert "reason" in weighed[100] and "days" in weighed[144] and "days" in weighed[128]
    assert r["gpus"] == min((144, 128), key=lambda g: weighed[g]["days"]) == 144
    assert r["gpus_choice"] == (
        f"144 GPUs train (all the GPUs of the 2 whole 72-GPU units bought), {weighed[144]['days']:,.1f} days: the 100 asked "
        f"for have no plan (no plan of llama3.1-405b on 100 x gb200-nvl72 divides); on 128: "
        f"{weighed[128]['days']:,.1f} days"
    )


def test_size_json_always_says_which_count_and_why():
    rows = _size("--system", "gb200-nvl72", "--system", "hgx-h100-ib-ndr", "--deadline-days", "90")
    for r in rows:
        assert r["gpus_choice"].startswith(f"{r['gpus']:,} GPUs")
        assert f"the fewest the search found that train in 90 days ({r['days']:,.1f}; " in r["gpus_choice"]
    (h100,) = _size("--system", "hgx-h100-ib-ndr", "--gpus", "1024")  # 8-GPU servers: one count, no choice
    assert h100["gpus_choice"] == ""


@pytest.mark.parametrize(
    "argv,flag",
    [
        (
            ["train", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192", "--global-batch-size", "64"],
            "--ep",
        ),
        (
            ["train", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192", "--global-batch-size", "64"],
            "--etp",
        ),
        (["memory", "--mode", "train", "--seq-len", "8192"], "--ep"),
        (["infer", "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000", "--output-tokens", "100"], "--ep"),
        (["roofline", "--accelerator", "h100-sxm", "--phase", "prefill", "--batch", "1", "--seq-len", "1024"], "--ep"),
    ],
)
def test_an_expert_degree_on_a_dense_model_is_bad_input(argv, flag):
    # a dense model has no experts to split: the flag is the user's mistake (exit 2), not an infeasible plan (3)
    res = runner.invoke(app, [*argv, "--model", "llama3.1-8b", flag, "2"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert (
        one_line(res.stderr) == f"error: {flag} 2: llama3.1-8b is a dense model, with no experts to split; drop {flag}"
    )


def test_infer_qps_zero_names_the_zero_before_the_slos():
    argv = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000", "--qps", "0"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == "error: --qps must be > 0; got 0"


def test_a_calibration_rerun_without_the_sweep_lists_the_earlier_network_files_as_stale(tmp_path, monkeypatch):
    examples = ROOT / "docs" / "examples"
    argv = ["calibrate", "--runs", str(examples / "calibration_runs.yaml"), "--stack", "megatron-core"]
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, [*argv, "--collectives", str(examples / "nccl_tests.csv"), "--json"])
    assert first.exit_code == 0, first.stdout + first.stderr
    w1 = json.loads(first.stdout)["written"]
    network = sorted([*w1["systems"], *w1["interconnects"]])
    assert len(network) == 3 and w1["stale"] == []
    again = runner.invoke(app, [*argv, "--json"])
    assert again.exit_code == 0, again.stdout + again.stderr
    w2 = json.loads(again.stdout)["written"]
    assert "systems" not in w2 and w2["stale"] == network  # left beside the new stack, with the old sweep's fabrics
    text = one_line(runner.invoke(app, argv).stdout)
    stale = ", ".join(str(Path(f).relative_to(tmp_path)) for f in network)
    assert (
        f"stale: {stale}, written for this stack file by an earlier calibration with a sweep and not by this one"
        in text
    )


def test_a_price_item_without_a_price_names_the_flag_that_gave_the_file(tmp_path):
    import yaml

    from hnplan.catalog import load_catalog

    raw = yaml.safe_load(load_catalog().path_of("systems", "gb200-nvl72").read_text())
    raw.update(id="my-rack", price_item="gb200-nvl7")
    path = tmp_path / "my-rack.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = runner.invoke(app, ["tco", "--system", str(path), "--gpus", "144"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr).startswith(
        f"error: --system: {path}: system 'my-rack', field 'price_item': no price for 'gb200-nvl7' in "
    )


def test_a_model_file_whose_dimensions_miss_its_published_count_is_refused(tmp_path):
    # Llama 3.1 8B with hidden 40960 for 4096: 32 layers of attention (Q, O 40960 x 40960; K, V 40960 x 8 x 1280)
    # and a SwiGLU MLP of 3 x 40960 x 14336, plus two 128,256 x 40960 embeddings: 201.1B, not the published 8B
    text = (ROOT / "data" / "models" / "llama3.1-8b.yaml").read_text()
    assert "\nhidden: 4096\n" in text
    path = tmp_path / "my-8b.yaml"
    path.write_text(text.replace("\nhidden: 4096\n", "\nhidden: 40960\n"))
    h, ffn, vocab, layers, kv = 40960, 14336, 128256, 32, 8
    attn = 2 * h * h + 2 * h * kv * (h // 32)
    total = layers * (attn + 3 * h * ffn + 2 * h) + 2 * vocab * h + h
    assert f"{total / 1e9:.4g}" == "201.1"
    res = runner.invoke(app, ["memory", "--model", str(path), "--mode", "train", "--seq-len", "8192"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"error: --model: {path}: entry 'llama3.1-8b' (Model) is invalid: the dimensions (layers 32, hidden 40960, "
        "ffn_hidden 14336, vocab 128256) give 201.1B parameters, 25.1x params_b_published (8B); they must agree "
        "within 10%: check the dimensions for a typo (a model of your own: give it its own params_b_published, or none)"
    )


def test_every_catalog_model_agrees_with_its_published_count_within_four_percent():
    from hnplan.catalog import load_catalog
    from hnplan.catalog.params import param_counts

    cat = load_catalog()
    for mid in cat.ids("models"):
        m = cat.model(mid)
        if m.params_b_published is not None:
            assert param_counts(m).total / 1e9 / m.params_b_published == pytest.approx(1, abs=0.04), mid


def test_tco_simulated_utilisation_is_a_steady_state_run():
    # the default mix's GPU-time-weighted run time is 65.9 h; steady state needs 5 of them (a warm-up of one, four
    # measured): 13.7 days, 14 rounded up; a 3,000-job run (14 h of arrivals on 1,024 GPUs) was priced before
    from hnplan.cluster.utilisation import simulated_utilisation, steady_days

    days, jobs = steady_days("default", 64)
    assert days == 14.0 and 5 * 65.9 / 24 == pytest.approx(13.7, abs=0.05)
    one = simulated_utilisation("hgx-h100-ib-ndr", 64, replications=1)
    # the window is long enough, but seed 0 draws large jobs worth 146 % of 64 GPUs (the mix aims at 85 %):
    # the figure is labelled as an overloaded draw, not passed off as steady state
    assert not one["steady_state"] and one["offered_load"] > 1 and "this draw 146%" in one["steady_state_note"]
    assert one["days"] == 14.0 and one["window_s"] == 14 * 86400
    assert one["jobs_drawn"] == pytest.approx(jobs, rel=0.1)  # a Poisson draw of the expected count
    # the price uses the mean of 3 replications: their draws offer 81 % on average, one of them 112 %
    # (so not every run is in steady state, and the figure says so)
    sim = simulated_utilisation("hgx-h100-ib-ndr", 64)
    assert sim["replications"] == 3 and sim["offered_load"] == pytest.approx(0.81, abs=0.005)
    assert not sim["steady_state"] and "this draw 112%" in sim["steady_state_note"]
    res = runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--utilisation", "simulated"])
    assert res.exit_code == 0, res.stdout + res.stderr
    text = one_line(res.stdout)
    assert f"simulated: 14 days of arrivals ({sim['jobs_drawn']:,} jobs, the mix's steady-state length)" in text
    assert "81% offered load (not in steady state)" in text
    ci = sim["utilisation_ci95"]
    assert f"mean of 3 replications (seeds spawned from 0), 95 % CI {ci['low']:.1%} to {ci['high']:.1%}" in text


def test_tco_simulated_on_a_mix_without_steady_state_is_refused(tmp_path):
    text = (ROOT / "data" / "cluster_mixes" / "default.yaml").read_text()
    assert "\n  value: 0.85\n" in text
    path = tmp_path / "busy.yaml"
    path.write_text(text.replace("id: default", "id: busy").replace("\n  value: 0.85\n", "\n  value: 1.2\n"))
    argv = ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--utilisation", "simulated", "--mix", str(path)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        "error: mix busy offers 120% of the capacity: its queue grows while jobs arrive and has no steady-state "
        "utilisation to price; give --utilisation a number, or a mix below 100 %"
    )
