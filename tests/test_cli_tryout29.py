"""Findings of a serving capacity planner's tryout of ``hnplan infer``."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()


def _infer(*args: str) -> dict:
    res = runner.invoke(app, ["infer", *args, "--json"])
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_a_given_batch_searches_the_layouts():
    """``--batch`` without ``--tp`` took the first layout that held the batch (TP 1 PP 4 for Llama 3.1 405B in FP8 on
    GB200 at batch 64: TPOT 69.8 ms) where the help says TP is searched; TP 4 on the same four GPUs runs 33.7 ms:
    the search keeps the layout with the most output tokens/s per GPU, as without --batch."""
    common = [
        "--model",
        "llama3.1-405b",
        "--system",
        "gb200-nvl72",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "1000",
    ]
    d = _infer(*common, "--dtype", "fp8", "--batch", "64")
    pinned = _infer(*common, "--dtype", "fp8", "--batch", "64", "--tp", "4")
    assert (d["tp"], d["pp"], d["gpus"]) == (4, 1, 4)
    assert d["tpot_s"] == pinned["tpot_s"] and d["tpot_s"] < 0.04


def test_a_tpot_bound_needs_the_output_length():
    """``--output-tokens`` defaults to 1 (the first token alone, a scoring request); with --tpot-slo-ms and no output
    length the plan was refused as "best TPOT reached 71.8 ms" (every iteration a whole prefill): one line asks for
    --output-tokens instead (exit 2), and with it the same plan is feasible."""
    args = ["infer", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000", "--qps", "10",
            "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--dtype", "fp8"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--tpot-slo-ms bounds the time per output token: give --output-tokens" in res.stderr
    d = json.loads(runner.invoke(app, [*args, "--output-tokens", "500", "--json"]).stdout)
    assert d["tpot_s"] <= 0.05 and d["gpus"] <= 8


def test_the_serving_verdict_weighs_the_whole_units_bought():
    """The serving report's verdict named GB200 NVL72 cheapest per token at 1 request/s on the one GPU it uses
    ($1.135/M) where the rack it is bought in holds 72 ($81.7/M on them, against $7.17/M on the H100 server): the
    table and the verdict carry what the whole units hold (``purchase_columns``), and the verdict names both."""
    import pandas as pd

    from hnplan.catalog import load_catalog
    from hnplan.planning.inference.capacity import capacity_verdict, purchase_columns

    cat = load_catalog()
    rows = [
        dict(system="gb200-nvl72", qps=1.0, gpus=1, tp=1, ep=1, batch=20, usd_per_million_tokens=1.135, status="ok",
             **purchase_columns(1, 1.135, cat.design("gb200-nvl72"))),
        dict(system="hgx-h100-ib-ndr", qps=1.0, gpus=2, tp=2, ep=1, batch=17, usd_per_million_tokens=1.793,
             status="ok", **purchase_columns(2, 1.793, cat.design("hgx-h100-ib-ndr"))),
    ]  # fmt: skip
    assert rows[0]["usd_per_million_tokens_bought"] == pytest.approx(1.135 * 72)
    text = capacity_verdict(pd.DataFrame(rows))
    assert "**gb200-nvl72** 1 GPU (TP1 EP1, batch 20, \\$1.135/M tokens; 72 bought, \\$81.720/M on them)" in text
    assert "cheapest per token: **gb200-nvl72** on the GPUs used, **hgx-h100-ib-ndr** on the whole units bought" in text
    h100 = cat.design("hgx-h100-ib-ndr")
    assert purchase_columns(16, 2.0, h100) == {"gpus_bought": 16} and purchase_columns(None, None, h100) == {}


def test_an_expert_degree_beyond_the_experts_names_them():
    """``--ep 512`` on DeepSeek-V3 (256 experts) read "no replica layout of deepseek-v3 fits gb200-nvl72" where
    ``--ep 72`` named the experts: both name them now."""
    args = [
        "infer",
        "--model",
        "deepseek-v3",
        "--system",
        "gb200-nvl72",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "100",
    ]
    for ep in ("512", "72"):
        res = runner.invoke(app, [*args, "--ep", ep])
        assert res.exit_code == 3
        assert f"ep = {ep} needs a number of experts divisible by it; deepseek-v3 has 256 experts" in res.stderr


def test_serving_within_a_domain_buys_no_backend_network():
    """One B200 server serving gpt-oss-120b was priced with a scale-out InfiniBand fabric of its own (a leaf switch
    and optics: $182k beside the $515k server, $3.23 a GPU-hour against $2.62 at 72 GPUs); replicas inside a
    scale-up domain need none (``needs_scaleout``), so the rate is the units' alone, and a replica that spans
    racks (DeepSeek-V3 at EP 256 on GB200 NVL72) keeps the fabric."""
    from hnplan.catalog import load_catalog
    from hnplan.cost import design_cost

    cat = load_catalog()
    design = cat.design("hgx-b200-ib-xdr")
    without, full = (design_cost(design, 8, scaleout=f) for f in (False, True))
    assert without.network_usd == 0 and full.network_usd > 0.3 * full.systems_usd
    args = ["--input-tokens", "2000", "--output-tokens", "500", "--dtype", "fp4"]
    d = _infer("--model", "gpt-oss-120b", "--system", "hgx-b200-ib-xdr", *args)
    assert d["gpus"] <= 8 and d["usd_per_gpu_hour"] == pytest.approx(without.usd_per_gpu_hour)
    wide = _infer("--model", "deepseek-v3", "--system", "gb200-nvl72", "--ep", "256", "--tp", "1", "--batch", "64",
                  "--input-tokens", "2000", "--output-tokens", "500", "--dtype", "fp8")  # fmt: skip
    assert wide["usd_per_gpu_hour"] == pytest.approx(design_cost(cat.design("gb200-nvl72"), 72).usd_per_gpu_hour)


def test_a_ttft_bound_at_a_percentile():
    """SLOs were means only: ``--ttft-quantile p99`` judges the TTFT at its 99th percentile (the queueing wait's
    exponential tail, ``ln(C / (1 - q)) S / (c - a)`` in M/M/c, hand-checked in the queueing doctests); a stricter
    percentile never needs fewer GPUs, and the plan shows the percentile judged and the mean beside it."""
    from hnplan.planning.inference import Traffic, plan_for_rate
    from hnplan.planning.inference.queueing import mgc_wait_quantile_s, mgc_wait_s

    # M/M/1 at rho 0.5: P(W > t) = 0.5 exp(-0.5 t), p99 = ln(50) / 0.5 = 7.82 s; the mean 1 s; p40 0 (waits half)
    assert mgc_wait_quantile_s(0.5, 1, 1.0, 1.0, 0.99) == pytest.approx(2 * 3.912023, rel=1e-6)
    assert mgc_wait_quantile_s(0.5, 1, 1.0, 1.0, None) == mgc_wait_s(0.5, 1, 1.0, 1.0) == pytest.approx(1.0)
    plans = {
        q: plan_for_rate("llama3.1-70b", "hgx-h100-ib-ndr", 40, Traffic(2000, 500), 0.5, 0.05, dtype="fp8",
                         ttft_quantile=q).to_dict()
        for q in ("p50", "p90", "p99")
    }  # fmt: skip
    assert plans["p50"]["gpus"] <= plans["p90"]["gpus"] <= plans["p99"]["gpus"]
    assert all(p["ttft_s"] <= 0.5 and p["ttft_quantile"] == q for q, p in plans.items())
    args = ["--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000", "--output-tokens",
            "500", "--qps", "10", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--dtype", "fp8"]  # fmt: skip
    d = _infer(*args, "--ttft-quantile", "p99")
    assert d["ttft_quantile"] == "p99" and d["ttft_s"] <= 1.0 and "ttft_mean_s" in d
    text = runner.invoke(app, ["infer", *args, "--ttft-quantile", "p99"], env={"COLUMNS": "200"}).stdout
    assert "TTFT, p99 [ms]" in text and "TTFT, mean [ms]" in text
    bad = runner.invoke(app, ["infer", *args, "--ttft-quantile", "p98"])
    assert bad.exit_code == 2 and "--ttft-quantile must be one of mean, p50, p90, p95, p99" in bad.stderr


def test_request_lengths_that_vary():
    """The command line took fixed lengths only, though the planner takes distributions: ``--input-cv`` and
    ``--output-cv`` draw them log-normal about the given means (``Traffic.lognormal``), so memory holds the 99th
    percentile of I + O and the queue sees the output's variance: more variable requests need at least as many
    GPUs here, and the flags refuse a negative value or a mode without --qps."""
    from hnplan.planning.inference.queueing import Traffic

    t = Traffic.lognormal(2000, 500, input_cv=0.5, output_cv=1.0).summary()
    assert t["input_mean"] == pytest.approx(2000, rel=0.03) and t["output_mean"] == pytest.approx(500, rel=0.05)
    assert t["output_cs2"] == pytest.approx(1.0, rel=0.25) and t["context_p99"] > 2 * 2500
    args = ["--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000", "--output-tokens",
            "500", "--qps", "10", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--dtype", "fp8"]  # fmt: skip
    fixed, varied = _infer(*args), _infer(*args, "--input-cv", "2", "--output-cv", "2")
    # docs/inference.md's example: 8 GPUs at fixed lengths, 12 at a coefficient of variation of 2 on both
    assert (fixed["gpus"], varied["gpus"]) == (8, 12) and varied["max_batch"] < fixed["max_batch"]
    bad = runner.invoke(app, ["infer", *args, "--output-cv", "-1"])
    assert bad.exit_code == 2 and "--output-cv must be a finite number >= 0; got -1" in bad.stderr
    alone = runner.invoke(app, ["infer", *args[:8], "--output-cv", "1"])
    assert alone.exit_code == 2 and "--output-cv applies to --qps planning" in alone.stderr


def test_compare_says_the_basis_of_a_runs_cost():
    """A report reader took the run costs for market rates: they are at each design's TCO per GPU-hour over its
    lifetime with every hour used. The verdict says so with each rate, and the rows carry the basis."""
    res = runner.invoke(app, ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12", "--json"])
    d = json.loads(res.stdout)
    rows = d["designs"]
    assert all(r["tco_years"] == 5 and r["tco_utilisation"] == 1.0 for r in rows)
    from hnplan.catalog import load_catalog
    from hnplan.cost import design_cost

    cat = load_catalog()
    for r in rows:  # the rate is the TCO per GPU-hour of the whole units bought, as tco prices them
        want = design_cost(cat.design(r["system"]), r["gpus_bought"]).usd_per_gpu_hour
        assert r["usd_per_gpu_hour"] == pytest.approx(want, rel=1e-9)
    text = runner.invoke(app, ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15e12"],
                         env={"COLUMNS": "300"}).stdout  # fmt: skip
    assert "(its TCO over 5 years with 100% of the hours used: $" in " ".join(text.split())


def test_the_clock_note_names_a_chip_at_the_full_rate():
    """compare's trust note listed the sustained clock of B300 (0.853) and left out GB300's 1.0 (fitted to its
    runs), though the two designs differ by it: both are named."""
    from hnplan.catalog import load_catalog
    from hnplan.planning.compare_trust import trust_notes  # noqa: F401  (the module that writes the sentence)

    cat = load_catalog()
    assert cat.accelerator("gb300").sustained_compute_fraction == 1.0
    text = runner.invoke(
        app,
        [
            "compare",
            "--model",
            "llama3.1-405b",
            "--gpus",
            "4096",
            "--tokens",
            "15T",
            "--systems",
            "gb300-nvl72,dgx-b300",
        ],
        env={"COLUMNS": "300"},
    ).stdout
    assert "1 (the full short-run rate) on gb300; 0.853 on b300" in " ".join(text.split())


def test_the_cluster_verdict_says_what_a_steady_state_needs():
    """The cluster report said "not in steady state" without saying what would be (the CLI says 'simulate --days
    14 or about 30,000 jobs'): the verdict names the days and jobs the steady state needs."""
    import pandas as pd

    from hnplan.cluster.compare import _load_note

    row = pd.Series({"offered_load": 0.81, "steady_state": False, "steady_days": 14.0, "steady_jobs": 30000})
    assert _load_note(row) == ", not in steady state: a steady state needs about 14 days of arrivals or 30,000 jobs"
    over = pd.Series({"offered_load": 1.2, "steady_state": False, "steady_days": 14.0, "steady_jobs": 30000})
    assert _load_note(over) == ", oversubscribed, not in steady state"  # no window makes an overload steady


def test_infer_compares_designs_at_a_rate():
    """No command compared designs for serving (the report did, a loop of infer otherwise): ``infer --systems a,b
    --qps Q`` with SLOs plans each design as the serving report does (``gpus_vs_rate``), one row each with the GPUs
    used and bought and both prices, and the report's verdict; several systems without --qps are refused."""
    args = ["infer", "--model", "llama3.1-70b", "--systems", "gb200-nvl72,hgx-h100-ib-ndr", "--input-tokens", "2000",
            "--output-tokens", "500", "--dtype", "fp8"]  # fmt: skip
    rate = ["--qps", "100", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]
    d = json.loads(runner.invoke(app, [*args, *rate, "--json"]).stdout)
    rows = {r["system"]: r for r in d["designs"]}
    assert set(rows) == {"gb200-nvl72", "hgx-h100-ib-ndr"} and all(r["status"] == "ok" for r in rows.values())
    single = _infer("--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2000",
                    "--output-tokens", "500", "--dtype", "fp8", *rate)  # fmt: skip
    assert rows["hgx-h100-ib-ndr"]["gpus"] == single["gpus"]  # the same plan as infer on that one design
    assert rows["gb200-nvl72"]["gpus_bought"] == 72 and "cheapest per token" in d["verdict"]
    bad = runner.invoke(app, args)
    assert bad.exit_code == 2 and "several systems compare designs at a request rate: give --qps" in bad.stderr
    typo = runner.invoke(app, [*[a.replace("gb200-nvl72", "gb200-nvl7") for a in args], *rate])
    assert typo.exit_code == 2 and "--systems gb200-nvl7: unknown system id 'gb200-nvl7'; nearest: gb200-nvl72" in (
        typo.stderr
    )  # the flag as typed


def test_training_validation_in_one_sign():
    """The training-plan report's chart mixed step-time rows (+ = hnplan slower) with throughput rows (+ = faster):
    ``speed_error_pct`` reads both as a speed. MLPerf v6.0 Llama 3.1 8B on 1,024 GB200 published a 72.1 ms step and
    hnplan gives about 44.0 ms (its gap reason): -39 % in the metric, 72.1 / 44.0 - 1 = +64 % as a speed, the value
    the trust notes read for it (trust.speed_errors)."""
    from hnplan.catalog import load_catalog
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.trust import speed_errors
    from hnplan.planning.validation import validation_table

    rid = "mlperf-v60-nvidia-gb200-llama31-8b-1024"
    row = validation_table(ids=[rid]).iloc[0]
    assert row["metric"] == "step_time_s" and row["error_pct"] == pytest.approx(-39.0, abs=1.0)
    assert row["speed_error_pct"] == pytest.approx(100 * (0.0721 / row["predicted"] - 1), rel=1e-9)
    assert row["speed_error_pct"] == pytest.approx(64.0, abs=2.0)
    run = [r for r in training_runs() if r.id == rid]
    assert 100 * speed_errors(run, load_catalog())[rid] == pytest.approx(row["speed_error_pct"], rel=1e-6)
