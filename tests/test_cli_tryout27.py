"""What a try-out of the plain-PyTorch stack (``pytorch-eager``) on one H200 found: a one-GPU search listing the
same plan under three ZeRO stages, a pinned knob the stack does not implement taken without a word, the
gradients note of ``memory`` missing from ``train``, ``compare --gpus 1 --dp 2`` buying a server to hold the
pin, GEMM shapes refused in the counts the other flags take, and "1 GPUs"."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning.training import make_job, search_best, unimplemented_pins

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

ONE_H200 = ["--system", "hgx-h200-ib-ndr", "--gpus", "1", "--stack", "pytorch-eager", "--seq-len", "4096"]


def test_one_gpu_search_keeps_one_zero_stage():
    """ZeRO shards over dp x cp ranks; at one rank stages 0, 2 and 3 (pytorch-eager's) are one plan with other
    buffers, and the search listed each micro-batch three times (24 candidates). Now only the lowest stage: 1, 2, 4
    and 8 sequences a micro-batch, 8 candidates with recompute none and full."""
    job = make_job("llama3.2-1b", "hgx-h200-ib-ndr", 1, 4096, 16, stack="pytorch-eager")
    ests, searched, feasible = search_best(job, top=8)
    # micro-batch 8 of 4,096 tokens without recompute does not fit: it ran out of memory on one H200
    # (data/reference/h200_hf_llama_step.csv, "Tried to allocate 15.66 GiB")
    assert searched == 8 and feasible == 7
    assert {e.plan.zero_stage for e in ests} == {0}
    plans = [(e.plan.microbatch_size, e.plan.recompute) for e in ests]
    assert len(set(plans)) == len(plans)
    # a pinned stage is still planned as asked, and at dp > 1 every stage the stack has is searched
    (pinned,), _, _ = search_best(job, fixed={"zero_stage": 3})
    assert pinned.plan.zero_stage == 3
    job8 = make_job("llama3.2-1b", "hgx-h200-ib-ndr", 8, 4096, 64, stack="pytorch-eager")
    ests8, _, _ = search_best(job8, top=200)
    assert {e.plan.zero_stage for e in ests8 if e.plan.dp > 1} == {0, 2, 3}


def test_pinned_knob_the_stack_lacks_is_said():
    """``--recompute selective`` on pytorch-eager (it implements none and full) was planned without a word."""
    res = runner.invoke(app, ["train", "--model", "llama3.2-1b", *ONE_H200, "--recompute", "selective", "--zero", "1"])
    assert res.exit_code == 0, res.output
    assert (
        "pytorch-eager does not implement ZeRO 1 (it implements 0, 2, 3) or recompute selective (it implements "
        "none, full): planned as asked, as if it did"
    ) in one_line(res.stdout)
    assert unimplemented_pins(make_job("llama3.2-1b", "hgx-h200-ib-ndr", 1, 4096, 4).stack, {"recompute": "full"}) == ""


def test_train_says_where_the_gradients_went_as_memory_does():
    """``memory`` explains that a plain-PyTorch step's gradients are allocated in its backward; ``train`` (text and
    --json) said nothing of it. Llama 3.2 1B: 1.236 G parameters x 4 bytes (fp32 gradients of fp32 parameters) =
    4.60 GiB."""
    args = ["train", "--model", "llama3.2-1b", *ONE_H200, "--global-batch-tokens", "16384", "--json"]
    d = json.loads(runner.invoke(app, args).stdout)
    assert d["gradients_note"].startswith("the step's 4.60 GiB of gradients are allocated during its backward")
    p = d["parallel"]
    mem = runner.invoke(
        app,
        ["memory", "--model", "llama3.2-1b", "--stack", "pytorch-eager", "--seq-len", "4096", "--json"]
        + ["--microbatch-size", str(p["microbatch_size"]), "--num-microbatches", str(p["num_microbatches"])]
        + ["--zero", "0", "--recompute", p["recompute"]],
    )
    assert json.loads(mem.stdout)["gradients_note"] == d["gradients_note"]
    # a tuned stack keeps its gradient buffer: no note
    tuned = ["train", "--model", "llama3.2-1b", *ONE_H200[:-4], "--seq-len", "4096", "--json"]
    assert "gradients_note" not in json.loads(runner.invoke(app, tuned).stdout)


def test_compare_refuses_pins_past_the_gpus_asked():
    """``compare --gpus 1 --dp 2`` bought an 8-GPU server on every design to hold the pin (said only in the status
    column); now one line, exit 3, as ``train`` refuses it."""
    base = ["compare", "--model", "llama3.2-1b", "--systems", "hgx-h200-ib-ndr", "--tokens", "1e9"]
    base += ["--seq-len", "4096", "--global-batch-tokens", "65536"]
    res = runner.invoke(app, [*base, "--gpus", "4", "--dp", "2", "--tp", "4"])
    assert res.exit_code == 3
    assert one_line(res.stderr) == (
        "infeasible: tp 4 x dp 2 = 8 needs 8 GPUs, more than --gpus 4: give --gpus 8 or more, or pin fewer ranks"
    )
    ok = runner.invoke(app, [*base, "--gpus", "1", "--no-trust"], env={"COLUMNS": "250"})
    assert ok.exit_code == 0, ok.output
    assert "llama3.2-1b on 1 GPU per design" in ok.stdout and "1 GPUs" not in ok.stdout


def test_gemm_shape_takes_counts():
    res = runner.invoke(app, ["gemm", "--accelerator", "h200-sxm", "--shape", "4Kix4Kix4Ki", "--json"])
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)


def test_memory_names_autocast_weight_copies():
    """The breakdown's "weights" of a plain-PyTorch plan are torch.autocast's bf16 copies of the fp32 parameters
    (Llama 3.2 1B: 1,235,814,400 x 2 bytes = 2.30 GiB; with full recomputation only the tied LM head's,
    128,256 x 2,048 x 2 bytes = 0.49 GiB), the fp32 parameters being the optimizer's master weights: said."""
    base = ["memory", "--model", "llama3.2-1b", "--stack", "pytorch-eager", "--seq-len", "4096", "--json"]
    d = json.loads(runner.invoke(app, base).stdout)
    assert d["params_gib"] * 2**30 == 1_235_814_400 * 2
    assert d["weights_note"].startswith("the 2.30 GiB of weights are torch.autocast's bf16 copies of the fp32 param")
    assert "counted with the optimizer states (as the fp32 master weights" in d["weights_note"]
    full = json.loads(runner.invoke(app, [*base, "--recompute", "full"]).stdout)
    assert full["params_gib"] * 2**30 == 128_256 * 2048 * 2
    assert "the 0.49 GiB of weights" in full["weights_note"] and "only the LM head's" in full["weights_note"]
    tuned = json.loads(runner.invoke(app, [*base[:4], "megatron-core", *base[5:]]).stdout)
    assert "weights_note" not in tuned


# -- a shared-cluster platform lead's tryout -----------------------------------------------------------------------


def test_cluster_default_is_one_day_as_days_1():
    """The default run (no --days, no --jobs) drew a day of arrivals but ran on until the queue drained (end
    698,715 s; training p95 wait 104,006 s against 27,186 s with --days 1): it is now --days 1."""
    base = ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--json"]
    default = json.loads(runner.invoke(app, base).stdout)
    one = json.loads(runner.invoke(app, [*base, "--days", "1"]).stdout)
    assert default["end_s"] == one["end_s"] == 86_400.0
    assert default["utilisation"] == one["utilisation"] and default["queue_delay_s"] == one["queue_delay_s"]


def _mix(tmp_path, gpus="1", duration="3600", weight="1", load="0.5"):
    path = tmp_path / "mix.yaml"
    path.write_text(
        f"""id: one
name: one class
source: a hand-made mix
offered_load: {{value: {load}, unit: fraction of GPUs, source: a test value}}
classes:
  - cls: training
    share: {{value: 1.0, unit: fraction of jobs, source: a test value}}
    gpus: {{kind: discrete, values: [{gpus}], weights: [{weight}], unit: GPU, source: a test value}}
    duration_s: {{kind: discrete, values: [{duration}], weights: [1], unit: s, source: a test value}}
    checkpoint_s: {{value: 0, unit: s, source: a test value}}
"""
    )
    return str(path)


def test_a_mix_of_jobs_of_no_gpus_or_no_time_is_refused_naming_the_field(tmp_path):
    """0 GPUs or a 0 s duration crashed (ZeroDivisionError, exit 1); -5 s ran (exit 0, utilisation 51 %)."""
    cases = [
        ({"gpus": "0"}, "field 'classes.0.gpus': values must be > 0 (GPUs, milli-GPUs or seconds of a job); got 0"),
        ({"duration": "0"}, "field 'classes.0.duration_s': values must be > 0"),
        (
            {"duration": "-5"},
            "field 'classes.0.duration_s': values must be > 0 (GPUs, milli-GPUs or seconds of a job); got -5",
        ),
        (
            {"gpus": "1.5"},
            "field 'classes.0.gpus': values are whole GPUs per job (a share of one is gpu_milli's); got 1.5",
        ),
        ({"weight": "0"}, "field 'classes.0.gpus': a discrete distribution's weights must not all be 0"),
        ({"load": "0"}, "field 'offered_load': value must be > 0 (a fraction of the cluster's GPUs); got 0"),
    ]
    for kw, message in cases:
        path = _mix(tmp_path, **kw)
        res = runner.invoke(app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--mix", path])
        assert res.exit_code == 2, (kw, res.output)
        assert message in one_line(res.stderr) and "Traceback" not in res.output, kw


def test_replicated_waits_stay_within_the_run():
    """With three replications a p95 wait read "47,101 (0 to 76,374,956)" s on a 14-day run: the interval on the
    log scale had no upper bound. A wait is at most the run's span: the interval is now on the logit scale of
    [0, span], and the hardware failures' mean is printed as the other means (it read 0.3333333333333333)."""
    from hnplan.cluster.replicate import replicate_cluster

    r = replicate_cluster("gb200-nvl72", 144, replications=3, days=3, seed=0)
    span = max(run.summary["end_s"] for run in r.runs)
    assert span == 3 * 86_400.0
    for key, c in r.ci95.items():
        if key.startswith("queue_delay_s.") and c.get("bounded_high") is not None:
            assert c["bounds"] == [0.0, span] and c["bounded_high"] <= span, key
    res = runner.invoke(
        app, ["cluster", "simulate", "--system", "gb200-nvl72", "--gpus", "144", "--days", "3", "--replications", "3"]
    )
    text = one_line(res.stdout)
    assert "hardware failure" in text and "333333" not in text


def test_reliability_never_holds_more_gpus_in_repair_than_the_job_has():
    """At 100 times the Llama 3 failure rates 65,520 GB200 GPUs read "223,560 spare GPUs" and "2.14e+05 GPUs in
    repair": Little's law counts failures of units already in repair. A unit in repair does not fail again (a
    finite source): at most the job's GPUs, and the sentence no longer calls one interruption every 25 s rare."""
    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "65520", "--model", "llama3.1-405b"]
    d = json.loads(runner.invoke(app, [*args, "--rate-factor", "100", "--json"]).stdout)
    assert d["gpus_in_repair"] < 65_520 and d["spare_gpus"] <= 65_520
    text = one_line(runner.invoke(app, [*args, "--rate-factor", "100"], env={"COLUMNS": "300"}).stdout)
    assert "too rare" not in text and "as nothing gets done either way" in text
    small = ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "1", "--model", "llama3.1-8b"]
    one = one_line(runner.invoke(app, small, env={"COLUMNS": "300"}).stdout)
    assert "1 GPU;" in one and "1 GPUs" not in one


def test_size_on_a_purchase_tries_the_power_of_two_counts_it_holds():
    """43 GB200 racks (3,096 GPUs, the factor 43 no layout takes) trained on 2,560 GPUs in 35.1 days, while 3,072
    of them train in 29.4 (the deadline search's pick): the fallback now weighs the counts the purchase holds as
    multiples of a power of two, and says "3,072 of the 3,096 GPUs", not "71 of each 72-GPU unit"."""
    from hnplan.planning.job_sizes import fallback_job_counts

    assert fallback_job_counts(72, 43, [3096])[1][:3] == [3088, 3072, 3024]
    res = runner.invoke(
        app,
        ["size", "--model", "llama3.1-70b", "--tokens", "15T", "--gpus", "3096", "--systems", "gb200-nvl72", "--json"],
    )
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["results"]
    assert row["gpus"] == 3072 and "3,072 of the 3,096 GPUs of the 43 whole 72-GPU units" in row["gpus_choice"]


def test_catalog_show_takes_cluster_mixes_and_prices():
    """``catalog list cluster_mixes`` and ``prices`` work, but ``show`` knew neither: ``--kind cluster_mixes`` was an
    unknown kind, and a mix's file was read as a software stack (a 3,000-character line of its keys)."""
    res = runner.invoke(app, ["catalog", "show", "default"])  # a scenario and a cluster mix of that id: both
    kinds = [line.split(":")[0] for line in res.stdout.splitlines() if line.endswith("s: default")]
    assert res.exit_code == 0 and kinds == ["scenarios", "cluster_mixes"]
    res = runner.invoke(app, ["catalog", "show", "default", "--kind", "mix", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["cluster_mixes"]["offered_load"]["value"] == 0.85
    res = runner.invoke(app, ["catalog", "show", "data/cluster_mixes/default.yaml"])
    assert res.exit_code == 0 and res.stdout.startswith("cluster_mixes: default")
    res = runner.invoke(app, ["catalog", "show", "price-dac-cable-assumed", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["prices"]["usd"] == 250
    res = runner.invoke(app, ["catalog", "show", "price-dac-cabel", "--kind", "prices"])
    assert res.exit_code == 2 and "unknown price id 'price-dac-cabel'; nearest: price-dac-cable-assumed" in res.stderr


MDC = """id: mdc
name: one-GPU jobs of an hour
source: a hand-made mix (M/D/c)
offered_load: {value: 0.5, unit: fraction of GPUs, source: a test value}
classes:
  - cls: training
    share: {value: 1.0, unit: fraction of jobs, source: a test value}
    gpus: {kind: discrete, values: [1], weights: [1], unit: GPU, source: a test value}
    duration_s: {kind: discrete, values: [3600], weights: [1], unit: s, source: a test value}
    checkpoint_s: {value: 0, unit: s, source: a test value}
"""


def test_cluster_size_finds_the_smallest_cluster_for_a_wait(tmp_path):
    """ "How many GPUs for a target wait" had no answer (cluster simulate takes a load relative to the cluster).
    One-GPU jobs of an hour at a demand of 6 GPUs (M/D/c): on one 8-GPU server (75 % load) Erlang C gives
    P(wait) = 0.357 and, for exponential service, a p95 wait of ln(0.357 / 0.05) x 3,600 / (8 - 6) = 3,538 s;
    deterministic service about halves it (Cosmetatos 1976). On two servers (38 %) the p95 wait is 0."""
    from hnplan.cluster.sizing import size_for_wait

    path = tmp_path / "mdc.yaml"
    path.write_text(MDC)
    r = size_for_wait("hgx-h100-ib-ndr", 6, 1800, days=5, mix=str(path), failures=False)
    (eight, sixteen) = sorted(r["tried"], key=lambda t: t["gpus"])
    assert (eight["gpus"], sixteen["gpus"], r["gpus"]) == (8, 16, 16)
    assert 1000 < eight["wait_s"] < 3538 and not eight["meets"]
    assert sixteen["wait_s"] == 0 and sixteen["utilisation"] == pytest.approx(6 / 16, rel=0.05)
    assert eight["utilisation"] == pytest.approx(6 / 8, rel=0.05)  # the demand is the same on every size
    args = ["cluster", "size", "--system", "hgx-h100-ib-ndr", "--demand-gpus", "6", "--mix", str(path), "--days", "5"]
    d = json.loads(runner.invoke(app, [*args, "--target-wait-h", "0.5", "--json"]).stdout)
    assert d["gpus"] == 16  # failures on: the same answer
    res = runner.invoke(app, [*args, "--target-wait-h", "0.5"], env={"COLUMNS": "200"})
    assert "16 GPUs of hgx-h100-ib-ndr keep the training jobs' p95 queueing delay at 0.00 h" in one_line(res.stdout)
    bad = runner.invoke(app, [*args, "--target-wait-h", "0.5", "--class", "trainig"])
    assert bad.exit_code == 2 and "--class must be one of" in bad.stderr
    far = runner.invoke(
        app, ["cluster", "size", "--system", "gb200-nvl72", "--demand-gpus", "1e5", "--target-wait-h", "1"]
    )
    assert far.exit_code == 3 and "more than the 65,520 GPUs of gb200-nvl72 one scale-out fabric joins" in far.stderr


def test_demand_gpus_keeps_the_job_stream_across_sizes():
    """``simulate_cluster(demand_gpus=N)``: the offered load is N over the GPUs, so two sizes that hold the mix's
    largest job see the same jobs."""
    from hnplan.cluster import simulate_cluster

    a = simulate_cluster("gb200-nvl72", 1152, days=1, demand_gpus=900)
    b = simulate_cluster("gb200-nvl72", 2304, days=1, demand_gpus=900)
    assert len(a.jobs) == len(b.jobs) and (a.jobs["duration_s"].to_numpy() == b.jobs["duration_s"].to_numpy()).all()
    with pytest.raises(InputError, match="give offered_load or demand_gpus, not both"):
        simulate_cluster("gb200-nvl72", 144, days=1, demand_gpus=100, offered_load=0.5)


# -- a procurement analyst's tryout --------------------------------------------------------------------------------


def test_an_unmet_deadline_names_the_fastest_count_tried():
    """DeepSeek-V3 on 15T tokens in 10 days on GB200 NVL72 ended "at 49,152 GPUs it takes 13.0 days" (the largest
    count with a plan, and another at each deadline) where 16,384 GPUs take 10.4: the batch of 2,048 sequences has
    no factor 3, so more GPUs train it slower. The powers of two of units below the fabric's limit are tried too."""
    args = ["size", "--model", "deepseek-v3", "--tokens", "15T", "--system", "gb200-nvl72", "--deadline-days"]
    for days in ("5", "10"):
        res = runner.invoke(app, [*args, days])
        assert res.exit_code == 3
        assert one_line(res.stderr).endswith("the fastest of the counts tried, 16,384 GPUs, takes 10.4 days")


def test_train_buys_the_units_that_hold_its_groups_whole():
    """``train --gpus 1024`` of DeepSeek-V3 on GB200 NVL72 said 15 racks (1,080 GPUs) where its plan's EP 32 x TP 2
    groups of 64 need 16 (one a rack), as size and compare buy it (1,152)."""
    res = runner.invoke(app, ["train", "--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "1024", "--json"])
    d = json.loads(res.stdout)
    p = d["parallel"]
    assert max(p["tp"] * p["cp"], p["ep"] * p["etp"]) == 64 and d["gpus_bought"] == 1152


def test_a_purchase_past_the_fabric_to_hold_the_groups_is_one_line():
    """65,520 GB200 GPUs (the fabric's limit, as the tool itself says to give) of DeepSeek-V3: its plan's groups of
    64 need 71,424 GPUs of whole racks; the error read "71,424 GPUs ... need 71,424 scale-out ports", exit 2."""
    res = runner.invoke(
        app, ["size", "--model", "deepseek-v3", "--tokens", "15T", "--gpus", "65520", "--system", "gb200-nvl72"]
    )
    assert res.exit_code == 3
    assert one_line(res.stderr) == (
        "infeasible: gb200-nvl72: the plan on 63,488 GPUs keeps its scale-up groups whole only in "
        "71,424 GPUs of whole 72-GPU units, more than the 65,520 one scale-out fabric joins; give fewer --gpus"
    )


def test_tco_lifetime_error_names_the_flag_and_grammar():
    res = runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--years", "0.01"])
    assert res.exit_code == 2 and "--years: 0.01 years = 3.7 days) is not longer than the deployment" in res.stderr
    res = runner.invoke(
        app, ["size", "--model", "llama3.2-1b", "--tokens", "1B", "--gpus", "1", "--system", "hgx-h100-ib-ndr"]
    )
    assert "the job runs on 1 GPU of 8 bought" in one_line(res.stdout)
    res = runner.invoke(
        app, ["size", "--model", "llama3.2-1b", "--tokens", "1B", "--deadline-days", "90", "--system", "gb200-nvl72"]
    )
    assert "64 GPUs (64 of the 72-GPU unit bought): the fewest the search found that train in 90 days (0.0017;" in (
        one_line(res.stdout)
    )


def test_servers_weigh_their_power_of_two_subset_as_racks_do():
    """DeepSeek-V3 on 1,152 H100 (9 x 128; a batch of 2,048 sequences, no factor 9) planned TP 2 PP 9 at 199.2
    days where 1,024 of the servers take 173.0; GB200 racks already weighed 64 of each 72, so compare put the H100
    at 3.04x the GB200's days where 2.64x is the best of each. A count with a plan now also weighs the largest power
    of two below it (:func:`hnplan.planning.job_sizes.power_of_two_subset`)."""
    res = runner.invoke(
        app,
        [
            "size",
            "--model",
            "deepseek-v3",
            "--tokens",
            "15T",
            "--gpus",
            "1152",
            "--system",
            "hgx-h100-ib-ndr",
            "--json",
        ],
    )
    (r,) = json.loads(res.stdout)["results"]
    assert r["gpus"] == 1024 and r["gpus_choice"].endswith("173.0 days; on 1,152: 199.2 days")


def test_reliability_says_when_the_model_cannot_train_on_the_gpus():
    """``reliability --gpus 1 --model deepseek-v3`` printed a 9,394 GB checkpoint shard per GPU and a 99 % goodput
    for a model no plan runs on one GPU; a note says so (the estimate reads only the model's size)."""
    args = ["reliability", "--system", "hgx-h100-ib-ndr", "--model", "deepseek-v3", "--json", "--gpus"]
    one = json.loads(runner.invoke(app, [*args, "1"]).stdout)
    assert one["fits_note"].startswith("the model's checkpoint alone (9,394 GB: its weights and optimizer states)")
    assert "fits_note" not in json.loads(runner.invoke(app, [*args, "1024"]).stdout)


def test_cluster_size_starts_at_the_mix_largest_job(tmp_path):
    """At a demand below the mix's largest job (the default mix's training jobs reach 1,024 GPUs), sizes below it
    would cut those jobs to the cluster and see another job stream: the search starts at the fewest domains that
    hold the largest job (128 HGX servers), and a largest job past the fabric is one infeasible line naming it."""
    from hnplan.cluster.sizing import size_for_wait

    r = size_for_wait("hgx-h100-ib-ndr", 200, 30 * 86400, days=1, failures=False)
    assert r["largest_job_gpus"] == 1024
    assert min(t["gpus"] for t in r["tried"]) == 1024 and r["gpus"] == 1024
    args = ["cluster", "size", "--system", "hgx-h100-ib-ndr", "--demand-gpus", "200", "--target-wait-h", "720"]
    res = runner.invoke(app, [*args, "--days", "1"], env={"COLUMNS": "200"})
    assert (
        "sizes start at 1,024 GPUs, the fewest whole domains that hold the mix's largest job (1,024 GPUs)"
        in one_line(res.stdout)
    )
    path = tmp_path / "huge.yaml"
    path.write_text(MDC.replace("values: [1], weights: [1], unit: GPU", "values: [131072], weights: [1], unit: GPU"))
    far = runner.invoke(
        app,
        ["cluster", "size", "--system", "gb200-nvl72", "--demand-gpus", "100", "--target-wait-h", "1",
         "--mix", str(path)],
    )  # fmt: skip
    assert far.exit_code == 3
    assert "the mix's largest job (131,072 GPUs) is more than the 65,520 GPUs of gb200-nvl72" in far.stderr


def test_reliability_names_the_purchase_a_packed_plan_needs():
    """``reliability`` buys the 15 whole NVL72 racks that hold 1,024 GPUs (1,080, 56 idle: no whole spare tray);
    a plan packed as size / compare / train pack it, groups of 64 GPUs once a rack, needs 16 (1,152: 2 spare trays a
    rack), a goodput 96 % against 99 %: the note says so and which --gpus-bought to give; none on 8-GPU servers."""
    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "1024", "--model", "llama3.1-405b", "--json"]
    d = json.loads(runner.invoke(app, args).stdout)
    assert d["gpus_bought"] == 1080 and "needs 16 units (1,152 GPUs)" in d["purchase_note"]
    assert "give --gpus-bought 1152" in d["purchase_note"]
    packed = json.loads(runner.invoke(app, [*args, "--gpus-bought", "1152"]).stdout)
    # docs/cost.md's figures: 96.4 % on 15 racks (56 idle GPUs, no whole spare tray), 99.3 % on 16 (two a rack)
    assert "purchase_note" not in packed and packed["goodput"] > d["goodput"] + 0.02
    assert (d["goodput"], packed["goodput"]) == (pytest.approx(0.964, abs=5e-4), pytest.approx(0.993, abs=5e-4))
    h100 = ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "1024", "--model", "llama3.1-405b", "--json"]
    assert "purchase_note" not in json.loads(runner.invoke(app, h100).stdout)
