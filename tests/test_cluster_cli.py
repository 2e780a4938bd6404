"""`hnplan cluster simulate`: --help, JSON keys and values equal to the library's, bad input exits 2."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cluster import simulate_cluster

runner = CliRunner()
KEYS = {"utilisation", "allocation_rate", "fragmentation", "queue_delay_s", "jct_slowdown", "goodput", "preemptions"}


def test_cluster_help():
    r = runner.invoke(app, ["cluster", "simulate", "--help"])
    assert r.exit_code == 0 and "--policy" in r.output and "--trace" in r.output


def test_cluster_queue_depth_default_is_the_library_s():
    """The CLI's --queue-depth default (a literal, so that --help needs no simulation import) is
    ``QUEUE_DEPTH``, Slurm's bf_max_job_test default of 500."""
    import inspect

    from hnplan.cli.cluster_cmd import simulate
    from hnplan.cluster.simulate import QUEUE_DEPTH, QUEUE_DEPTH_MAX

    opt = inspect.signature(simulate).parameters["queue_depth"].default
    assert (opt.default, opt.min, opt.max) == (QUEUE_DEPTH, 1, QUEUE_DEPTH_MAX)


def test_cluster_json_matches_library(cat):
    args = [
        "cluster",
        "simulate",
        "--system",
        "hgx-h100-ib-ndr",
        "--gpus",
        "64",
        "--jobs",
        "200",
        "--seed",
        "4",
        "--policy",
        "best-fit",
        "--json",
    ]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert KEYS <= set(d)
    assert set(d["queue_delay_s"]["inference"]) == {"p50", "p95", "p99"}
    ref = simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=200, seed=4, policy="best-fit", catalog=cat)
    assert d["utilisation"] == pytest.approx(ref.summary["utilisation"])
    assert d["preemptions"] == ref.summary["preemptions"]
    args[args.index("--jobs") + 1] = "0.2k"  # the same count with a suffix
    assert json.loads(runner.invoke(app, args).output)["utilisation"] == d["utilisation"]


def test_cluster_trace_table():
    r = runner.invoke(
        app,
        [
            "cluster",
            "simulate",
            "--system",
            "hgx-h100-ib-ndr",
            "--gpus",
            "64",
            "--trace",
            "data/traces/alibaba-openb-gpu-sample.csv",
            "--jobs",
            "300",
            "--policy",
            "fragmentation-aware",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "utilisation" in r.output and "queueing delay" in r.output


@pytest.mark.parametrize(
    "extra",
    [
        ["--policy", "worst-fit"],
        ["--trace", "missing.csv"],
        ["--mix", "nope"],
        ["--days", "1", "--jobs", "5"],
        ["--system", "h100"],
        ["--load", "0", "--jobs", "5"],
        ["--queue-depth", "0", "--jobs", "5"],
    ],
)
def test_cluster_bad_input_exits_2(extra):
    base = {"--system": "hgx-h100-ib-ndr"}
    args = ["cluster", "simulate", "--gpus", "64"]
    if "--system" not in extra:
        args += ["--system", base["--system"]]
    r = runner.invoke(app, args + extra)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert (
        extra[0] in r.output or extra[1] in r.output
    )  # the flag or value at fault is named ("offered load must be > 0" named none)


def test_progress_reaches_the_end_of_the_window(cat):
    """The callback behind the progress bar advances monotonically and reaches the window's end."""

    seen = []
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, n_jobs=50, seed=1, catalog=cat, progress=lambda now, end: seen.append((now, end))
    )
    assert seen and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    assert seen[-1][0] >= seen[-1][1] == r.summary["window_s"]


def test_progress_bar_appears_only_once_a_run_has_lasted_its_delay(monkeypatch):
    """The bar of ``hnplan cluster simulate`` on a terminal showed at once, so a run of a tenth of a second
    flashed one; it now appears once the run has lasted ``PROGRESS_DELAY_S`` (1 s), updates or not, with the
    share done, and is gone at the end (transient)."""
    import io
    import time

    from rich.console import Console

    from hnplan.cli import _progress

    assert _progress.PROGRESS_DELAY_S == 1.0
    out = io.StringIO()
    monkeypatch.setattr(_progress, "err_console", Console(file=out, force_terminal=True, width=100))
    with _progress.delayed_progress("simulating", delay_s=5.0) as update:
        update(0.5)
    assert out.getvalue() == ""  # over before the delay: nothing printed
    with _progress.delayed_progress("simulating", delay_s=0.0) as update:
        update(0.5)
        time.sleep(0.3)
    assert "simulating" in out.getvalue() and "50%" in out.getvalue()


@pytest.mark.parametrize(
    ("system", "gpus", "most"),
    [
        # 64-port QM9700: a 3-tier fat-tree of 64^3 / 4 = 65,536 ports; an HGX node takes 8 ports for 8 GPUs
        ("hgx-h100-ib-ndr", 65537, "65,536"),
        # a GB200 tray takes 4 ports for 4 GPUs, 65,536 GPUs, down to whole 72-GPU racks: 910 x 72 = 65,520
        ("gb200-nvl72", 65521, "65,520"),
    ],
)
def test_cluster_gpus_beyond_one_fabric_are_refused_naming_the_flag(system, gpus, most):
    """A design's scale-out fabric bounds its GPU count (as compare, reliability, tco, size and topology say):
    one line naming --gpus and the bound, exit 2, before any simulation."""
    r = runner.invoke(app, ["cluster", "simulate", "--system", system, "--gpus", str(gpus), "--jobs", "5", "--json"])
    assert r.exit_code == 2, r.output
    assert json.loads(r.stdout)["error"]["message"] == (
        f"--gpus {gpus} exceeds the {most} GPUs of {system} one scale-out fabric joins (a 3-tier fat-tree of "
        f"64-port qm9700 switches); give at most {most}"
    )
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_cluster_table_title_keeps_its_unit():
    # "[s]" in a rich title is markup unless escaped: the queueing-delay table must say its unit
    r = runner.invoke(app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "50"])
    assert r.exit_code == 0, r.output
    assert "queueing delay [s]" in r.output


def test_cluster_title_says_the_count_rounded_to_whole_domains():
    # the cluster is built of whole scale-up domains: 100 GPUs of 8-GPU servers are 13 servers, 104 GPUs
    # (ceil(100 / 8) = 13), and the title says so where tco says "100 -> 104"; a whole count is said as given
    base = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--jobs", "50"]
    r = runner.invoke(app, [*base, "--gpus", "100"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "104 x hgx-h100-ib-ndr (100 asked, rounded up to whole 8-GPU scale-up domains)" in r.output
    r = runner.invoke(app, [*base, "--gpus", "64"], env={"COLUMNS": "250"})
    assert r.exit_code == 0 and "64 x hgx-h100-ib-ndr, topology-aware" in r.output and "asked" not in r.output


def test_cluster_table_shows_the_demand_in_the_window(cat):
    """Utilisation is measured over the window after the warm-up, against the jobs' GPU-time inside it,
    which is below the offered load for a heavy-tailed mix (docs/cluster.md): the table prints that
    demand beside the offered load so 40 % utilisation at 85 % load is not read as 45 % wasted."""
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "200", "--seed", "4"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    ref = simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=200, seed=4, catalog=cat).summary
    text = " ".join(r.output.split())
    assert f"demand in the window │ {ref['offered_load_window']:.1%}" in text


@pytest.mark.parametrize("flag,value", [("--days", "1e9"), ("--days", "1e5"), ("--jobs", "1e8"), ("--jobs", "1000001")])
def test_runs_beyond_the_job_limit_are_refused_before_drawing(flag, value, cat):
    """``--days 1e9`` once drew ~2e12 arrival times (a MemoryError) and ``--jobs 1e8`` ran for hours: a run
    is limited to MAX_JOBS jobs, refused in one line naming the flag and the limit's reason."""
    from hnplan.catalog.mixes import cluster_mix
    from hnplan.cluster.jobs import MAX_JOBS
    from hnplan.cluster.synthetic import mean_gpu_seconds

    r = runner.invoke(app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "1024", flag, value])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    assert f"{flag} must be at most" in r.output and "0.3 ms a job" in r.output
    if flag == "--days":
        # Little's law: arrivals a day = load x GPUs / E[GPU-seconds a job] x 86,400 s (default mix, load 0.85)
        m = cluster_mix("default", cat)
        per_day = 0.85 * 1024 / mean_gpu_seconds(m, 1024) * 86_400
        assert 1_800 < per_day < 2_000  # ~1,900 jobs a day; MAX_JOBS / per_day ~ 520 days
        assert f"at most {MAX_JOBS / per_day:.3g} " in r.output


@pytest.mark.parametrize(
    "extra,said",
    [
        (["--mix", "./nope.yaml"], "error: --mix: nope.yaml: file not found"),
        (["--mix", "defualt"], "error: --mix: unknown cluster mix id 'defualt'; nearest: default"),
        (["--serve", "llama3.1-7b:3"], "error: --serve llama3.1-7b:3: unknown model id 'llama3.1-7b'; nearest: "),
    ],
)
def test_missing_mix_and_unknown_serving_model_name_the_flag(extra, said):
    # a new user's missing mix file said "nope.yaml: file not found" and an unknown --serve model
    # "unknown model id 'llama3.1-7b'", naming no flag; both are refused before any simulation runs
    r = runner.invoke(app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", *extra])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert " ".join(r.output.split()).startswith(said)
    if "--serve" in extra:
        assert "llama3.1-8b" in r.output  # the nearest ids include the one meant


@pytest.mark.parametrize(
    "extra,flags",
    [
        (["--no-backfill", "--bf-interval", "30"], ("--bf-interval", "--no-backfill")),
        (["--no-backfill", "--bf-interval", "0"], ("--bf-interval", "--no-backfill")),  # typed, even at the default
        (["--no-backfill", "--strict-priority"], ("--strict-priority", "--no-backfill")),
        (["--no-preemption", "--preempt-exempt", "10"], ("--preempt-exempt", "--no-preemption")),
        (["--sched-interval", "30"], ("--sched-interval", "--defer")),
        (["--replications", "1", "--workers", "2"], ("--workers", "--replications")),
        (["--workers", "2"], ("--workers", "--replications")),  # one replication by default
        (["--trace", "jobs.csv", "--mix", "default"], ("--mix", "--trace")),
        (["--trace", "jobs.csv", "--no-failures", "--seed", "3"], ("--seed", "--trace", "--no-failures")),
        (["--trace", "jobs.csv", "--no-failures", "--replications", "5"], ("--replications", "--no-failures")),
    ],
)
def test_a_flag_that_means_nothing_beside_another_is_refused(extra, flags):
    # a new user's `--no-backfill --bf-interval 30`, `--no-preemption --preempt-exempt 10` and `--replications 1
    # --workers 2` ran and ignored the second flag without a word (no backfill pass to time, nothing preempted,
    # one run in one process); likewise --sched-interval without --defer (the main pass runs at every event),
    # --strict-priority without backfilling (no reservation to take over), --mix with --trace (the trace's
    # jobs are replayed) and --seed or --replications R with a trace and no failures (nothing is drawn: R runs
    # alike, a zero-width interval; test_trace_without_failures_draws_nothing). Each is refused in one line naming both flags, before any file is read or job drawn.
    r = runner.invoke(app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", *extra])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    assert r.output.startswith("error: ") and all(f in r.output for f in flags)


def test_the_flags_beside_their_partner_are_taken():
    # --sched-interval with --defer and --preempt-exempt with preemption on reach the simulator as given
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "20", "--json"]
    r = runner.invoke(app, [*args, "--defer", "--sched-interval", "30", "--preempt-exempt", "10", "--strict-priority"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scheduler"] == {
        "bf_interval_s": 0.0,
        "sched_interval_s": 30.0,
        "defer": True,
        "preempt_exempt_s": 10.0,
        "strict_priority": True,
    }


def test_trace_without_failures_draws_nothing(cat):
    # why --seed and --replications are refused with --trace --no-failures: two seeds give the same run, figure
    # for figure (the trace's jobs are read, not drawn; the seed draws only failures and software restarts)
    from pathlib import Path

    trace = Path(__file__).resolve().parents[1] / "data/traces/alibaba-openb-gpu-sample.csv"
    a, b = (
        simulate_cluster("hgx-h100-ib-ndr", 64, trace=trace, n_jobs=300, failures=False, seed=s, catalog=cat)
        for s in (0, 5)
    )
    assert a.to_json() == b.to_json() and a.jobs.equals(b.jobs)


def test_a_system_from_the_user_s_file_is_simulated_as_its_catalog_twin(tmp_path, cat):
    """A design given as a YAML path (a copy of gb200-nvl72 under its own id): its failure rates and the
    planner's speed of a fragmented allocation are looked up by the path, not by the id the catalog does not
    hold (before: 'unknown system id', exit 2, and a speed of 1.0 for any allocation). The twin's figures are
    the catalog entry's: a 64-GPU job on 8 GPUs of a domain runs at the same fraction (< 1) of its ideal."""
    from hnplan.cluster import runtime

    text = (cat.root / "systems" / "gb200-nvl72.yaml").read_text()
    path = tmp_path / "my-nvl72.yaml"
    path.write_text(text.replace("id: gb200-nvl72", "id: my-nvl72", 1))
    speed = runtime.training_speed(str(path), 64, 8, 1, cat)
    assert speed == runtime.training_speed("gb200-nvl72", 64, 8, 1, cat) < 1
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
        "0,8,1000,86400,training,3600,8\n60,1,500,3600,inference,0,1\n120,16,1000,7200,fine-tuning,1800,8\n"
    )
    outs = []
    for system in (str(path), "gb200-nvl72"):
        args = ["cluster", "simulate", "--system", system, "--gpus", "144", "--trace", str(trace), "--json"]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.stdout))
    assert outs[0]["system"] == "my-nvl72"
    assert {k: outs[0][k] for k in KEYS} == {k: outs[1][k] for k in KEYS}


def test_the_table_s_mean_concurrency_keeps_its_fraction(tmp_path):
    """One 8-GPU job over the 30 days measured after the warm-up (20 % of the window, days 6-30) that runs
    days 0-14: busy 8 / 24 of the measured time, a mean of 0.333 jobs at once (sampled: 0.334; the table printed
    "mean 0")."""
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,1209600,training,3600,8\n")
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(trace)]
    args += ["--days", "30", "--no-failures"]
    d = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert d["concurrent_jobs"]["mean"] == pytest.approx(8 / 24, rel=1e-2)
    text = " ".join(runner.invoke(app, args).stdout.split())
    assert f"concurrent jobs │ mean {d['concurrent_jobs']['mean']:.3g}, max 1 │" in text


def test_a_serving_model_from_a_file_is_named_by_its_id(tmp_path, cat):
    """``--serve ./model.yaml:5`` named the deployment by the file's path in the table and the JSON; train and
    size name a model from a file by its id: so does the summary now, with the same replicas as the catalog's."""
    path = tmp_path / "my-8b.yaml"
    path.write_text((cat.root / "models" / "llama3.1-8b.yaml").read_text().replace("id: llama3.1-8b", "id: my-8b", 1))
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,86400,training,3600,8\n")
    base = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(trace)]
    outs = []
    for model in (str(path), "llama3.1-8b"):
        r = runner.invoke(app, [*base, "--serve", f"{model}:5", "--json"])
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.stdout)["serving"])
    assert outs[0] == [{**outs[1][0], "model": "my-8b"}]
    r = runner.invoke(app, [*base, "--serve", f"{path}:5"])
    assert r.exit_code == 0 and "my-8b at 5 requests/s" in r.output and str(path) not in r.output


@pytest.mark.parametrize("gpus,trace", [(8, False), (8, True), (16, False)])
def test_days_beyond_fifteen_years_are_refused_naming_the_flag(gpus, trace, tmp_path):
    """A trace's run times and arrivals are held to 15 years (MAX_JOB_YEARS); ``--days`` with a mix was bounded
    only by the job limit, which a small cluster (8 GPUs: about 60 jobs a day) never met before 16,000 days, and
    with a trace not at all (a window of 27,000 years ran, its utilisation averaged over an empty cluster).
    15 years = 15 x 365.25 = 5,478.75 days."""
    extra = []
    if trace:
        path = tmp_path / "jobs.csv"
        path.write_text("arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,8,1000,3600,training,3600,8\n")
        extra = ["--trace", str(path)]
    base = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", str(gpus), *extra]
    r = runner.invoke(app, [*base, "--days", "5479"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert r.output.startswith("error: --days must be at most 5,479 (15 years,") and "got 5479.0" in r.output
