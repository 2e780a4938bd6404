"""`hnplan reliability`: --help smoke test, JSON keys and values equal to the library's."""

import json
import math

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning.design import estimate_reliability

runner = CliRunner()
KEYS = {
    "mtbi_h",
    "failure_unit_gpus",
    "checkpoint_bytes",
    "checkpoint_write_s",
    "checkpoint_interval_s",
    "restart_s",
    "goodput",
}


def test_reliability_help():
    r = runner.invoke(app, ["reliability", "--help"])
    assert r.exit_code == 0 and "--model" in r.output and "--mode" in r.output


def test_reliability_json_keys_and_values(cat):
    r = runner.invoke(
        app,
        [
            "reliability",
            "--system",
            "gb200-nvl72",
            "--gpus",
            "4608",
            "--model",
            "llama3.1-70b",
            "--mode",
            "sync",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert KEYS <= set(d)
    ref = estimate_reliability("gb200-nvl72", 4608, "llama3.1-70b", "sync", cat)
    assert d["goodput"] == pytest.approx(ref.goodput)
    assert d["failure_unit_gpus"] == 72
    assert 0 < d["goodput"] < 1


def test_reliability_bad_mode_exits_2():
    r = runner.invoke(
        app, ["reliability", "--system", "gb200-nvl72", "--gpus", "72", "--model", "llama3.1-8b", "--mode", "lazy"]
    )
    assert r.exit_code == 2


def test_reliability_on_named_storage(cat):
    args = ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "1024", "--model", "llama3.1-70b"]
    r = runner.invoke(
        app, [*args, "--storage", "ddn-ai400x2", "--storage-units", "4", "--tokens-per-s", "1e6", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    ref = estimate_reliability(
        "hgx-h100-ib-ndr", 1024, "llama3.1-70b", catalog=cat, storage="ddn-ai400x2", storage_units=4, tokens_per_s=1e6
    )
    assert d["storage"]["units"] == 4 and d["checkpoint_write_s"] == pytest.approx(ref.checkpoint_write_s)
    # 4 AI400X2 write 260 GB/s; the loader's 4 MB/s takes 4e6 / 360e9 of the storage's time
    assert d["checkpoint_write_s"] == pytest.approx(ref.checkpoint_bytes / (260e9 * (1 - 4e6 / 360e9)))
    r = runner.invoke(app, [*args, "--storage", "no-such-store"])
    assert r.exit_code == 2


def test_reliability_says_when_the_storage_sets_the_interval():
    args = ["reliability", "--system", "hgx-h100-roce-400g", "--gpus", "16384", "--model", "llama3.1-405b"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "set by the storage" in " ".join(r.stdout.split())
    # sync: the 405B checkpoint (5.68 TB) writes in 4.27 s; checkpoints may take 10 % of the storage's time
    # (checkpoint_storage_share), so the interval is at least 4.27 / 0.1 = 43 s
    r = runner.invoke(app, [*args, "--mode", "sync"])
    assert r.exit_code == 0 and "Daly 2006; the storage bound is 43 s" in " ".join(r.stdout.split())


def test_small_job_interruption_rate_is_not_printed_as_zero(cat):
    """A 10-GPU job fails about once in 190 days (MTBI 4,578 h; once in 173 days with planned maintenance): the table
    shows that rate with two significant digits, not as '0.0 per day' beside a finite MTBI."""
    r = runner.invoke(app, ["reliability", "--system", "gb200-nvl72", "--gpus", "10", "--model", "llama3.1-8b"])
    assert r.exit_code == 0, r.output
    ref = estimate_reliability("gb200-nvl72", 10, "llama3.1-8b", "async", cat).to_dict()
    assert 0 < ref["interruptions_per_day"] < 0.05
    # the rate counts failures (24 h / MTBI: 24 / 4,578 h) and planned maintenance (24 x 2.2e-5 an hour)
    assert ref["interruptions_per_day"] == pytest.approx(24 / ref["mtbi_h"] + 24 * ref["planned_per_h"], rel=1e-9)
    text = " ".join(r.output.split())
    assert f"({ref['interruptions_per_day']:.2g} per day incl. planned)" in text
    assert f"{ref['mtbi_h']:,.2f} h" in text


def test_reliability_says_what_the_async_stall_is_and_why_the_interval_is_short():
    """Llama 3.1 405B on 16,384 GB200: the async save stalls 1.5 ms, each GPU's 0.347 GB to host memory at
    NVLink-C2C's 225 GB/s; Young/Daly with that stall alone gives 6 s, the storage bound 43 s."""
    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "16384", "--model", "llama3.1-405b"]
    r = runner.invoke(app, args)
    out = " ".join(r.stdout.split())
    assert r.exit_code == 0, r.output
    assert "stall 1.5 ms (async: each GPU's 0.347 GB shard to host memory at 225 GB/s)" in out
    assert (
        "43 s, set by the storage (4.3 s write at most 10% of the time; Young/Daly with the 1.5 ms stall alone: 6 s)"
        in out
    )


def test_a_short_interval_is_explained_by_the_goodput_of_half_hour_checkpoints(cat):
    """5.7 TB every 43 s looks implausible: the table says the async pause (1.5 ms) and what half-hour checkpoints
    would cost. Daly eq. 13 by hand: goodput(tau) = tau / (M e^(R/M) (e^((tau + delta)/M) - 1)), times the planned
    restarts' share and the GPUs-in-repair dilution the estimate applies to its own interval."""
    import math

    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "16416", "--model", "llama3.1-405b"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    est = estimate_reliability("gb200-nvl72", 16416, "llama3.1-405b", "async", cat)
    m, delta, restart = est.mtbi_s, est.checkpoint_stall_s, est.restart_s
    dilution = (1 - est.planned_per_h * restart / 3600) * est.gpus / (est.gpus + est.gpus_in_repair)

    def daly(tau):
        return tau / (m * math.exp(restart / m) * math.expm1((tau + delta) / m)) * dilution

    assert est.goodput == pytest.approx(daly(est.checkpoint_interval_s), rel=1e-12)  # the same formula
    assert est.goodput_at(1800.0) == pytest.approx(daly(1800.0), rel=1e-12)
    # a 2.78 h MTBI: half-hour checkpoints lose ~15 min per interruption, ~9 % of the time: 82.7 %, not 90.4 %
    assert 0.82 < est.goodput_at(1800.0) < 0.835 < 0.90 < est.goodput
    out = " ".join(r.stdout.split())
    assert "why so often" in out and "a checkpoint pauses training 1.5 ms (the write runs in the background)" in out
    assert f"goodput {est.goodput_at(1800.0):.1%}, not {est.goodput:.1%}" in out
    # an interval already past half an hour needs no explanation
    r = runner.invoke(app, ["reliability", "--system", "gb200-nvl72", "--gpus", "72", "--model", "llama3.1-405b"])
    assert r.exit_code == 0 and ("why so often" in r.stdout) == (
        estimate_reliability("gb200-nvl72", 72, "llama3.1-405b", "async", cat).checkpoint_interval_s < 1800
    )


def test_restart_time_is_written_with_thousands_separators(cat):
    # 100 GPUs of GB300 NVL72 restart a 405B job in over 1,000 s (1,299 s on the catalog of 2026-12-01); the row
    # writes it as the interval row beside it does (6,993 s), not 1299 s
    args = ["reliability", "--system", "gb300-nvl72", "--gpus", "100", "--model", "llama3.1-405b"]
    r = runner.invoke(app, args, env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    restart = json.loads(runner.invoke(app, [*args, "--json"]).output)["restart_s"]
    assert restart >= 1000
    assert f"{restart:,.0f} s" in r.output and "," in f"{restart:,.0f}"


def test_gpus_bought_counts_the_idle_trays_as_hot_spares(cat):
    """Llama 3.1 70B on 128 of the 144 GPUs of two GB200 NVL72 racks (64 of each 72 train, as `compare` lays it
    out): each rack keeps (72 - 64) / 4 = 2 idle compute trays. A rack's failures are half the job's, each
    takes a tray for the 24 h repair: a = sum(lambda_k) x 24 h / 2 trays of a rack in repair on average, and a
    failure drains the 72-GPU rack only when both spares are out, P(N >= 2) = 1 - e^-a (1 + a). Without
    --gpus-bought the command buys the two racks too; with no GPU idle every failure drains its rack."""
    from hnplan.reliability import drained_per_failure, gpus_in_repair, interruption_rates_per_h

    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "128", "--model", "llama3.1-70b", "--json"]
    r = runner.invoke(app, [*args, "--gpus-bought", "144"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert (d["gpus_bought"], d["spare_nodes"], d["spare_gpus"]) == (144, 2, 0)  # no spare rack needed (tco)
    design = cat.design("gb200-nvl72")
    rates = interruption_rates_per_h(design, 128)
    drained = drained_per_failure(design)
    assert {(g, h) for g, h in drained.values()} == {(72, 24)}
    a = sum(rates[k] for k in drained) * 24 / 2
    # racks Little's law holds in repair when every failure drains its rack, thinned by the share that finds no
    # spare tray; a rack in repair does not fail again (a finite source of the job's 2 racks): m / (1 + m / 2)
    m = sum(rates[k] for k in drained) * 24 * (1 - math.exp(-a) * (1 + a))
    assert d["gpus_in_repair"] == pytest.approx(72 * m / (1 + m / 2), rel=1e-9)
    assert d["goodput"] == pytest.approx(d["job_goodput"] * 128 / (128 + d["gpus_in_repair"]), rel=1e-9)
    # default: the whole units that hold --gpus, as tco, size and compare buy them (two racks here)
    default = json.loads(runner.invoke(app, args).output)
    assert (default["gpus_bought"], default["spare_nodes"], default["goodput"]) == (144, 2, d["goodput"])
    from hnplan.planning.design import estimate_reliability

    bare = estimate_reliability("gb200-nvl72", 128, "llama3.1-70b", gpus_bought=128).to_dict()  # none idle
    assert (bare["gpus_bought"], bare["spare_nodes"]) == (128, 0)
    m0 = sum(rates[k] for k in drained) * 24  # every failure drains its rack: no spare tray
    assert bare["gpus_in_repair"] == pytest.approx(72 * m0 / (1 + m0 / 2), rel=1e-9) == gpus_in_repair(design, 128)
    assert bare["goodput"] < d["goodput"] <= d["job_goodput"] == bare["job_goodput"]
    text = " ".join(runner.invoke(app, args[:-1] + ["--gpus-bought", "144"]).output.split())
    assert "16 of 144 GPUs bought idle: 2 whole nodes per pool stand in for failed ones" in text
    r = runner.invoke(app, [*args, "--gpus-bought", "100"])
    assert r.exit_code == 2 and "--gpus-bought (100) must be at least --gpus (128)" in r.output


@pytest.mark.parametrize(
    "bought,said",
    [
        # 64-port QM9700 switches: a 3-tier fat-tree of 64^3 / 4 = 65,536 ports; a GB200 compute tray of 4 GPUs
        # takes 4 ports, so 16,384 trays = 65,536 GPUs, 910 whole 72-GPU racks = 65,520; the next rack, 65,592,
        # cannot be wired in to stand in for failed nodes (any count was taken: 99,999,936 gave a goodput)
        ("65592", "--gpus-bought 65592 exceeds the most GPUs of gb200-nvl72 one scale-out fabric joins, 65,520"),
        ("99999936", "--gpus-bought 99999936 exceeds the most GPUs of gb200-nvl72 one scale-out fabric joins"),
        ("100000000", "--gpus-bought 100000000 exceeds the most GPUs"),  # the bound before the whole units
        (
            "65519",
            "--gpus-bought 65519 is not a whole number of gb200-nvl72 units (72 GPUs each); give 65,448 or 65,520",
        ),
    ],
)
def test_gpus_bought_is_bounded_by_the_scale_out_fabric(bought, said):
    args = ["reliability", "--system", "gb200-nvl72", "--gpus", "128", "--model", "llama3.1-70b"]
    r = runner.invoke(app, [*args, "--gpus-bought", bought, "--json"])
    assert r.exit_code == 2, r.output
    assert said in json.loads(r.stdout)["error"]["message"] and "Traceback" not in r.output
    assert said in " ".join(r.stderr.split()) and len(r.stderr.strip().splitlines()) == 1
    ok = runner.invoke(app, [*args, "--gpus-bought", "65520", "--json"])  # the largest fabric's worth: an answer
    assert ok.exit_code == 0 and json.loads(ok.stdout)["gpus_bought"] == 65520


def test_a_purchase_beyond_the_fabric_names_the_flag_that_gave_it(cat):
    # compare buys whole racks for --gpus 65,530: 911 racks, 65,592 GPUs, one rack over the fabric. The planner,
    # where no flag gave the count, says the topology's ports; compare names its flag and the bound, as
    # reliability, tco, size and topology do: 64^3 / 4 = 65,536 ports, 4 per 4-GPU tray, 16,384 trays = 65,536
    # GPUs, down to whole 72-GPU racks: 910 x 72 = 65,520
    want = "65,592 GPUs of gb200-nvl72 need 65,592 scale-out ports, more than a 3-tier fat-tree of 64-port qm9700"
    with pytest.raises(InputError, match=want):
        estimate_reliability("gb200-nvl72", 65530, "llama3.1-70b", catalog=cat, gpus_bought=65592)
    args = ["compare", "--model", "llama3.1-70b", "--tokens", "1T", "--systems", "gb200-nvl72", "--json"]
    r = runner.invoke(app, [*args, "--gpus", "65530"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["message"] == (
        "--gpus 65530 exceeds the 65,520 GPUs of gb200-nvl72 one scale-out fabric joins (a 3-tier fat-tree of "
        "64-port qm9700 switches); give at most 65,520"
    )
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output
