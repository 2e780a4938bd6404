"""``hnplan infer``: --help, JSON keys of each mode, exit codes and error messages."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()
BASE = [
    "infer",
    "--model",
    "llama3.1-8b",
    "--system",
    "hgx-h100-ib-ndr",
    "--input-tokens",
    "1000",
    "--output-tokens",
    "500",
    "--tp",
    "1",
]
KEYS = {"ttft_s", "tpot_s", "tokens_per_s_per_gpu", "max_batch", "replicas", "gpus", "usd_per_million_tokens"}


def _json(args):
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_infer_help():
    res = runner.invoke(app, ["infer", "--help"])
    assert res.exit_code == 0
    for flag in ("--qps", "--ttft-slo-ms", "--tpot-slo-ms", "--batch", "--dtype", "--disaggregate"):
        assert flag in res.output


def test_max_throughput_mode_keys():
    d = _json(BASE + ["--dtype", "fp8"])
    assert KEYS <= set(d)
    assert d["batch"] <= d["max_batch"] and d["replicas"] == 1 and d["gpus"] == 1 and d["kv_dtype"] == "fp8"


def test_batch_mode_keys():
    d = _json(BASE + ["--batch", "16"])
    assert KEYS <= set(d) and d["batch"] == 16
    assert d["tpot_s"] == pytest.approx(1.0 / d["tokens_per_s_per_user"])


def test_qps_mode_keys():
    d = _json(BASE + ["--qps", "50", "--ttft-slo-ms", "500", "--tpot-slo-ms", "40", "--dtype", "fp8"])
    assert KEYS <= set(d)
    assert d["ttft_s"] <= 0.5 and d["tpot_s"] <= 0.04 and d["gpus"] == d["replicas"]
    assert {"it_power_kw", "facility_power_kw", "usd_per_gpu_hour"} <= set(d)


def test_scoring_mode_keys():
    d = _json(
        [
            "infer",
            "--model",
            "llama3.1-8b",
            "--system",
            "hgx-h100-ib-ndr",
            "--input-tokens",
            "256",
            "--tp",
            "1",
            "--score-latency-ms",
            "50",
        ]
    )
    assert {"requests_per_s_per_node", "requests_per_s_per_gpu", "batch", "latency_s"} <= set(d)
    assert d["latency_s"] <= 0.05


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["--dtype", "fp4"], 2, "no fp4 peak"),
        (
            ["--batch", "4", "--qps", "3", "--ttft-slo-ms", "1", "--tpot-slo-ms", "1"],
            2,
            "at most one of --batch and --qps",
        ),
        (["--qps", "3"], 2, "--qps needs --ttft-slo-ms and --tpot-slo-ms"),
        (["--qps", "0", "--ttft-slo-ms", "100", "--tpot-slo-ms", "50"], 2, "--qps must be > 0; got 0"),
        (["--qps", "1", "--ttft-slo-ms", "100", "--tpot-slo-ms", "0"], 2, "--tpot-slo-ms must be > 0; got 0"),
        (["--batch", "100000"], 3, "exceeds"),
        (["--qps", "100", "--ttft-slo-ms", "1", "--tpot-slo-ms", "1"], 3, "no configuration"),
        # a rate no single fabric serves: exit 3 naming the fabric's limit (was exit 2 from the costing's
        # topology at 1e6 requests/s, and "no configuration ... best TPOT" under the SLO at 1e9)
        (
            ["--qps", "1e7", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "100"],
            3,
            "needs more GPUs than one scale-out fabric joins (65,536;",
        ),
    ],
)
def test_infer_errors(args, code, needle):
    res = runner.invoke(app, BASE + args)
    assert res.exit_code == code, res.output
    assert needle in " ".join(res.output.split())


def test_table_output():
    res = runner.invoke(app, BASE + ["--batch", "8"])
    # rows in words with their unit (hnplan.labels), not the JSON keys
    assert res.exit_code == 0 and "TPOT [ms]" in res.output and "$ per million output tokens" in res.output
    assert "tpot_s" not in res.output
    assert "None" not in res.output and "tokens per s per user" not in res.output


def test_table_says_output_tokens_and_every_unit():
    """Serving's throughput, $ and energy per token count output tokens (a 2,000-token prompt and 500
    generated count 500): the rows say so, and every number row carries its unit, as the JSON's keys do.
    By hand at batch 8: throughput = 8 sequences / TPOT; $ per million = GPUs x $/GPU-hour / (throughput x
    3,600) x 1e6; energy per token = replica power at load / throughput."""
    res = runner.invoke(app, BASE + ["--batch", "8"])
    text = " ".join(res.output.split())
    d = _json(BASE + ["--batch", "8"])
    for label in (
        "output throughput [tokens/s]",
        "output throughput per GPU [tokens/s]",
        "output throughput per user [tokens/s]",
        "$ per million output tokens",
        "energy per output token [J]",
        "compute busy [-]",
        "memory busy [-]",
    ):
        assert label in text, label
    assert d["tokens_per_s"] == pytest.approx(8 / d["tpot_s"], rel=0.02)
    assert d["usd_per_million_tokens"] == pytest.approx(
        d["gpus"] * d["usd_per_gpu_hour"] / (d["tokens_per_s"] * 3600) * 1e6, rel=1e-9
    )
    assert d["joules_per_token"] == pytest.approx(d["replica_power_w"] / d["tokens_per_s"], rel=1e-9)
    scoring = runner.invoke(app, BASE + ["--output-tokens", "1", "--score-latency-ms", "100"])
    assert "request rate per GPU [requests/s]" in " ".join(scoring.output.split())


def test_rate_table_names_the_two_utilisations():
    """The plan's utilisation is the share of batch slots busy, the GPU's the share its power is drawn at;
    a boolean reads yes/no."""
    res = runner.invoke(app, BASE + ["--qps", "20", "--ttft-slo-ms", "800", "--tpot-slo-ms", "40"])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "batch slots busy [-]" in text and "GPU utilisation for power [-]" in text
    assert "request rate [requests/s]" in text and "disaggregated │ no" in text and "False" not in text


def test_disaggregated_keys():
    d = _json(BASE + ["--qps", "20", "--ttft-slo-ms", "800", "--tpot-slo-ms", "40", "--dtype", "fp8", "--disaggregate"])
    assert d["disaggregated"] and {"prefill", "decode_replicas", "kv_transfer_s"} <= set(d)
    assert d["gpus"] == d["prefill"]["replicas"] * d["prefill"]["gpus_per_replica"] + d["decode_replicas"]


def test_table_says_which_power_is_rated_and_which_at_load():
    """The rated IT power of the replica's share of its units and the power drawn at the operating point
    are different quantities: the table names each, and the HBM row is what the engine may use. Without
    the labels a reader saw 'IT power 0.69 kW' above 'facility power 0.4 kW' (facility < IT)."""
    res = runner.invoke(app, BASE)
    text = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    for label in (
        "IT power, rated [kW]",
        "GPU power at load [W]",
        "replica IT power at load [W]",
        "replica facility power at load [W]",
        "HBM the engine may use [GiB]",
    ):
        assert label in text
    d = _json(BASE)
    # at load the replica draws no more than rated; the facility adds the PUE (>= 1) to the IT power
    assert d["replica_power_w"] <= 1000 * d["it_power_kw"]
    assert d["facility_power_w"] >= d["replica_power_w"]
    # one GPU of an 8-GPU server draws its eighth of the server at load, and an air-cooled HGX hall adds
    # PUE 1.3 (data/facility.yaml pue_air)
    assert d["replica_power_w"] == pytest.approx(d["node_power_w"] / 8, rel=1e-9)
    assert d["facility_power_w"] == pytest.approx(1.3 * d["replica_power_w"], rel=1e-9)
    # the engine's share of the 80 GB H100 (79.11 GiB visible; vLLM's default 0.9)
    assert d["hbm_gib"] == pytest.approx(0.9 * 79.11, rel=1e-3)
    rate = runner.invoke(app, BASE + ["--qps", "20", "--ttft-slo-ms", "800", "--tpot-slo-ms", "40"])
    assert "facility power, rated [kW]" in " ".join(rate.output.split())


def test_disaggregated_table_shows_both_pools():
    """With --disaggregate the layout rows are the decode pool's and the prefill pool has its own rows:
    the table's GPU count is prefill replicas x their GPUs + decode replicas x theirs (without the
    prefill rows a reader saw 'GPUs per replica 4, replicas 7, GPUs 10')."""
    args = BASE + ["--qps", "20", "--ttft-slo-ms", "800", "--tpot-slo-ms", "40", "--dtype", "fp8", "--disaggregate"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    cells = {}
    for line in res.output.splitlines():
        parts = [c.strip() for c in line.split("│") if c.strip()]
        if len(parts) == 2:
            cells[parts[0]] = parts[1]
    d = _json(args)
    assert cells["decode GPUs per replica"] == str(d["gpus_per_replica"])
    assert cells["prefill GPUs per replica"] == str(d["prefill"]["gpus_per_replica"])
    assert cells["prefill replicas"] == str(d["prefill"]["replicas"])
    assert cells["replicas (prefill + decode)"] == str(d["prefill"]["replicas"] + d["decode_replicas"])
    assert int(cells["GPUs [count]"]) == (
        d["prefill"]["replicas"] * d["prefill"]["gpus_per_replica"] + d["decode_replicas"] * d["gpus_per_replica"]
    )


def test_min_replicas_tries_the_cap_before_giving_up():
    from hnplan.planning.inference.capacity import _min_replicas

    def ttft(n):  # a wait that falls as 10 / n seconds: the SLO of 1 s is met from 10 replicas
        return 10.0 / n

    assert _min_replicas(1.0, ttft, 3, 1.0) == 10
    # doubling 3 -> 6 -> 12 passes a cap of 11: 10 and 11 are still tried (None before)
    assert _min_replicas(1.0, ttft, 3, 1.0, cap=11) == 10
    assert _min_replicas(1.0, ttft, 3, 1.0, cap=9) is None


def test_rate_table_says_the_whole_units_bought():
    # Llama 3.1 8B at 3 requests/s needs fewer GPUs than one GB200 NVL72 rack: the table counts the GPUs used
    # (what $ per million tokens and the rated power are for) and says the 72-GPU rack that holds them
    args = ["infer", "--model", "llama3.1-8b", "--system", "gb200-nvl72", "--input-tokens", "1000"]
    args += ["--output-tokens", "500", "--qps", "3", "--ttft-slo-ms", "800", "--tpot-slo-ms", "40"]
    gpus = _json(args)["gpus"]
    assert 0 < gpus < 72
    text = " ".join(runner.invoke(app, args, env={"COLUMNS": "200"}).stdout.split())
    assert f"GPUs bought │ {gpus} -> 72 (1 whole unit of 72); $ and rated power: the {gpus} used" in text
    # whole 8-GPU servers: 8 GPUs bought as used, no row
    res = runner.invoke(app, [*args[:4], "hgx-h100-ib-ndr", *args[5:], "--tp", "8"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "GPUs bought" not in res.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        # the layout search swallowed these as "no replica layout of llama3.1-8b fits hgx-h100-ib-ndr" (an
        # --ep on this dense model is bad input, exit 2: tests/test_cli_trial12.py)
        (["--pp", "64"], "pp = 64 exceeds the 32 layers of llama3.1-8b"),
        (
            ["--pp", "64", "--qps", "3", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "100"],
            "pp = 64 exceeds the 32 layers of llama3.1-8b",
        ),
    ],
)
def test_pinned_degree_the_search_cannot_use_says_why(args, needle):
    """TP left to the search and another degree pinned to an impossible value: exit 3 with the reason
    every layout shares, as when TP is pinned too."""
    res = runner.invoke(app, BASE[:-2] + args)  # without --tp 1
    assert res.exit_code == 3, res.output
    assert needle in " ".join(res.output.split())


def test_token_counts_take_the_clis_suffixes():
    # `--input-tokens 2k` was refused ("unable to parse string as an integer") while --global-batch-tokens and
    # the scenario files read 15T-style counts: the token flags share hnplan.units.parse_count (k = 1,000)
    base = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--batch", "8", "--json"]
    a = runner.invoke(app, [*base, "--input-tokens", "2k", "--output-tokens", "0.5k"])
    b = runner.invoke(app, [*base, "--input-tokens", "2000", "--output-tokens", "500"])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    da, db = json.loads(a.output), json.loads(b.output)
    assert (da["input_tokens"], da["output_tokens"]) == (2000, 500) and da["ttft_s"] == db["ttft_s"]
    bad = runner.invoke(app, [*base, "--input-tokens", "2.5"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "--input-tokens" in bad.output and "count must be whole" in " ".join(bad.output.split())


def test_tp_must_divide_each_experts_mlp_in_serving(tmp_path):
    # serving splits every expert's expert_ffn_hidden columns over the TP ranks (vLLM FusedMoE's
    # intermediate_size_per_partition): 770 = 2 x 5 x 7 x 11 at TP 4 was planned with 192.5 columns a rank
    from pathlib import Path

    import yaml

    root = Path(__file__).parents[1]
    model = yaml.safe_load((root / "data" / "models" / "qwen3-30b-a3b.yaml").read_text())
    model = {**model, "id": "my-moe", "moe": {**model["moe"], "expert_ffn_hidden": 770}}
    model.pop("params_b_published", None)
    path = tmp_path / "my-moe.yaml"
    path.write_text(yaml.safe_dump(model))
    base = ["infer", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000"]
    res = runner.invoke(app, [*base, "--tp", "4"])
    assert res.exit_code == 3 and "Traceback" not in res.output
    msg = " ".join(res.output.split())
    assert "infeasible: tp = 4 does not divide the 770 columns of each expert's MLP of my-moe" in msg
    searched = runner.invoke(app, [*base, "--json"])  # the search keeps to TP 1 and 2 (770 = 2 x 385)
    assert searched.exit_code == 0, searched.output
    assert json.loads(searched.output)["tp"] in (1, 2)


def test_the_price_per_token_is_also_said_on_the_gpus_bought():
    """Llama 3.1 70B FP8 at 100 requests/s on GB200 NVL72 uses 23 GPUs of the one 72-GPU rack bought: the price per
    million output tokens counts the 23, and beside it the 72 bought, 72 / 23 times as much (the idle GPUs priced
    in when nothing else uses them), where a rack-sized purchase ranks designs differently."""
    import json

    args = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2000"]
    args += ["--output-tokens", "500", "--qps", "100", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--dtype", "fp8"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert (d["gpus"], d["gpus_bought"]) == (23, 72)
    assert d["usd_per_million_tokens_bought"] == pytest.approx(d["usd_per_million_tokens"] * 72 / 23, rel=1e-12)
    assert "on the 72 GPUs bought" in runner.invoke(app, args).stdout
