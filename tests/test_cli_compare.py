"""``hnplan compare``: the design comparison on the command line (table, JSON keys, errors, agreement with
``hnplan train``)."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app

runner = CliRunner()
# Llama 3.1 8B on 72 GPUs (one NVL72 rack, nine 8-GPU servers) at 8,192 tokens x 144 sequences per step: a
# data-parallel degree of 9 divides the batch, so every design has plans; 1e11 tokens = 84,771 steps
BASE = ["compare", "--model", "llama3.1-8b", "--gpus", "72", "--tokens", "1e11", "--seq-len", "8192"]
BASE += ["--global-batch-tokens", "1179648", "--systems", "gb200-nvl72,hgx-h100-ib-ndr"]


@pytest.fixture(scope="module")
def answer() -> dict:
    res = runner.invoke(app, [*BASE, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_json_keys_units_and_the_arithmetic_between_them(answer):
    assert [d["system"] for d in answer["designs"]] == ["gb200-nvl72", "hgx-h100-ib-ndr"]
    assert answer["global_batch_tokens"] == 1179648 and answer["tokens"] == 1e11 and answer["stack"] == "megatron-core"
    assert answer["units"]["days"] == "days" and answer["units"]["capex_musd"] == "million USD"
    for d in answer["designs"]:
        assert d["status"] == "ok"
        assert {"tp", "pp", "dp", "cp", "ep", "step_time_s", "mfu", "days", "racks", "it_power_mw"} <= set(d)
        assert {"facility_power_mw", "energy_mwh", "capex_musd", "usd_per_million_tokens", "breakdown_s"} <= set(d)
        assert d["tp"] * d["pp"] * d["dp"] * d["cp"] == 72
        # days = tokens / (tokens per step / step time x goodput) / 86,400 s
        assert 0.9 < d["goodput"] < 1 and d["goodput_mode"] == "async"
        assert d["days"] == pytest.approx(1e11 / (1179648 / d["step_time_s"] * d["goodput"]) / 86400, rel=1e-9)
        assert d["facility_power_mw"] > d["it_power_mw"] > 0
        # the run's cost over its tokens, per million
        assert d["usd_per_million_tokens"] == pytest.approx(d["run_musd"] * 1e6 / 1e11 * 1e6, rel=1e-9)
        assert "compute" in d["breakdown_s"] and not any(k.startswith("t_") for k in d)
    racks = {d["system"]: d["racks"] for d in answer["designs"]}
    assert racks["gb200-nvl72"] == 1  # 72 GPUs: one NVL72 rack
    fastest = min(answer["designs"], key=lambda d: d["days"])["system"]
    assert f"{fastest} trains fastest" in answer["verdict"] and "**" not in answer["verdict"]  # plain text
    assert answer["trust"].startswith("Every figure here is a model's prediction")


@pytest.mark.parametrize("system", ["gb200-nvl72", "hgx-h100-ib-ndr"])
def test_each_design_is_the_best_plan_of_train(answer, system):
    """The same job through `hnplan train` finds the same plan and step time as the comparison for each design
    (both on the default stack, megatron-core)."""
    res = runner.invoke(
        app,
        ["train", "--model", "llama3.1-8b", "--system", system, "--gpus", "72", "--seq-len", "8192"]
        + ["--global-batch-tokens", "1179648", "--json"],
    )
    assert res.exit_code == 0, res.output
    t = json.loads(res.stdout)
    d = next(d for d in answer["designs"] if d["system"] == system)
    p = t["parallel"]
    assert (d["tp"], d["pp"], d["dp"], d["cp"], d["ep"]) == (p["tp"], p["pp"], p["dp"], p["cp"], p["ep"])
    # the expert layers' tensor parallelism too (a dense model's is its TP)
    assert d["etp"] == p["etp"] == p["tp"] and isinstance(d["etp"], int)
    assert (d["microbatch_size"], d["recompute"]) == (p["microbatch_size"], p["recompute"])
    assert d["step_time_s"] == pytest.approx(t["step_time_s"], rel=1e-9)
    assert d["mfu"] == pytest.approx(t["mfu"], rel=1e-9)


def test_fp4_on_gb200_is_train_s_step_with_the_default_stack_s_nvfp4_rate():
    """compare and train share the default stack: at fp4 on GB200 its measured NVFP4 GEMM rate (megatron-core
    ``matmul_efficiency: gb200: {fp4: 0.66}``, not the accelerator's 0.449) reaches both. Before the two read
    different defaults and compare's step was 1.18x train's on Llama 3.1 70B / 1,152 GPUs."""
    job = ["--model", "llama3.1-8b", "--gpus", "72", "--seq-len", "8192", "--global-batch-tokens", "1179648"]
    job += ["--dtype", "fp4", "--json"]
    cmp = runner.invoke(app, ["compare", *job, "--tokens", "1e11", "--systems", "gb200-nvl72", "--no-trust"])
    tr = runner.invoke(app, ["train", *job, "--system", "gb200-nvl72"])
    assert cmp.exit_code == tr.exit_code == 0, cmp.output + tr.output
    (d,) = json.loads(cmp.stdout)["designs"]
    assert d["step_time_s"] == pytest.approx(json.loads(tr.stdout)["step_time_s"], rel=1e-9)
    from hnplan.planning.compare import compare_design_rows

    (bare,) = compare_design_rows("llama3.1-8b", ["gb200-nvl72"], 72, 1e11, 8192, 144, "fp4", stack=None)
    assert bare["step_time_s"] > 1.05 * d["step_time_s"]  # no stack entry: the GEMMs at the accelerator's 0.449


def test_table_prints_every_design_the_verdict_and_the_trust_notes():
    res = runner.invoke(app, BASE)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    for needle in ("gb200-nvl72", "hgx-h100-ib-ndr", "step [s]", "$ per 1M tokens", "IT / facility [MW]"):
        assert needle in text
    assert "trains fastest" in text and "How far to trust it:" in text and "**" not in text


def test_default_systems_and_shape_are_the_default_scenario_s():
    """Without --systems, --seq-len and --global-batch-tokens: data/scenarios/default.yaml's design comparison."""
    nb = next(n for n in load_catalog().scenario("default").notebooks if n.notebook == "design_comparison")
    from hnplan.cli.compare_cmd import _scenario_defaults

    p = _scenario_defaults(load_catalog())
    assert list(p["systems"]) == list(nb.parameters["systems"])
    assert (p["seq_len"], p["global_batch_tokens"]) == (8192, 16777216)


@pytest.mark.parametrize(
    "argv,code,message",
    [
        (["--systems", "gb200"], 2, "unknown system id 'gb200'"),
        (["--dtype", "fp16"], 2, "--dtype must be one of bf16, fp8, fp4"),
        (["--offload", "some"], 2, "--offload must be one of none, auto"),
        (["--checkpoint", "never"], 2, "--checkpoint must be one of sync, async"),
        (["--global-batch-tokens", "1000000"], 2, "is not a multiple of --seq-len 8,192"),
        (["--tokens", "1e5"], 2, "is less than one step"),
        (["--tokens", "inf"], 2, "--tokens"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, code, message):
    res = runner.invoke(app, [*BASE, *argv])
    assert res.exit_code == code, res.output
    assert message in " ".join(res.stderr.split()) and "Traceback" not in res.output


def test_no_design_can_run_the_job_exit_3_with_each_reason():
    """Llama 3.1 405B does not fit on 8 H100 or 8 B200 GPUs in any plan: exit 3, one line naming each design."""
    argv = ["compare", "--model", "llama3.1-405b", "--gpus", "8", "--tokens", "1e11", "--seq-len", "8192"]
    argv += ["--global-batch-tokens", "65536", "--systems", "hgx-h100-ib-ndr,hgx-b200-ib-xdr", "--json"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 3, res.output
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "infeasible" and "hgx-h100-ib-ndr:" in err["message"] and "hgx-b200-ib-xdr:" in err["message"]


def test_cli_token_bound_is_the_schema_s():
    from hnplan.catalog.schemas.workload import MAX_TRAINING_TOKENS
    from hnplan.cli.compare_cmd import MAX_TRAINING_TOKENS as CLI_MAX

    assert CLI_MAX == MAX_TRAINING_TOKENS


def test_cli_dtypes_are_the_planner_s():
    from hnplan.cli.compare_cmd import TRAIN_DTYPES as CLI_DTYPES
    from hnplan.planning.training import TRAIN_DTYPES

    assert CLI_DTYPES == TRAIN_DTYPES


def test_a_design_without_a_plan_keeps_its_row_with_the_reason():
    """Llama 3.1 70B on 8 GPUs: 8 x 80 GB H100 hold no plan (the smallest needs about 158 GiB per GPU), 8 x 186
    GB GB200 do; the comparison answers (exit 0) with the H100 row's reason and no plan columns."""
    argv = ["compare", "--model", "llama3.1-70b", "--gpus", "8", "--tokens", "1e10", "--seq-len", "8192"]
    argv += ["--global-batch-tokens", "65536", "--systems", "gb200-nvl72,hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.output
    ok, failed = json.loads(res.stdout)["designs"]
    assert isinstance(ok["tp"], int) and ok["racks"] == 1
    # 8 GPUs of an NVL72 rack: the whole rack is bought (and charged), the row says so
    assert ok["status"] == "ok; 8 of 72 GPUs bought train (the rest idle)" and ok["gpus_bought"] == 72
    assert failed["status"].startswith("no plan: no plan of llama3.1-70b on 8 GPUs fits in memory")
    assert not {"tp", "days", "capex_musd", "breakdown_s"} & set(failed)
    table = runner.invoke(app, argv)
    assert table.exit_code == 0 and "TP4.0" not in table.stdout and "no plan" in table.stdout


def test_no_trust_leaves_the_notes_out():
    res = runner.invoke(app, [*BASE, "--no-trust", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["trust"] is None and "trains fastest" in d["verdict"]
    table = runner.invoke(app, [*BASE, "--no-trust"])
    assert table.exit_code == 0 and "How far to trust it" not in table.stdout


def test_goodput_is_the_reliability_model_s_as_in_size(answer):
    """Days, energy and cost follow the goodput `hnplan size` applies (the reliability model on the GPUs that
    train, at the plan's throughput and step time); --no-goodput leaves failures out, and only days, energy and
    cost move."""
    from hnplan.planning.design import estimate_reliability

    off = json.loads(runner.invoke(app, [*BASE, "--json", "--no-goodput", "--no-trust"]).stdout)
    assert answer["goodput"] is True and off["goodput"] is False and off["checkpoint"] == "async"
    for on, no in zip(answer["designs"], off["designs"]):
        g = estimate_reliability(
            on["system"], on["gpus"], "llama3.1-8b", "async", tokens_per_s=on["tokens_per_s"], step_s=on["step_time_s"]
        ).goodput
        assert on["goodput"] == pytest.approx(g, rel=1e-12)
        assert (no["goodput"], no["goodput_mode"]) == (1.0, "off")
        assert no["days"] == pytest.approx(1e11 / (1179648 / no["step_time_s"]) / 86400, rel=1e-9)
        assert (on["step_time_s"], on["tp"], on["dp"]) == (no["step_time_s"], no["tp"], no["dp"])
        for k in ("days", "energy_mwh", "run_musd"):
            assert on[k] == pytest.approx(no[k] / g, rel=1e-9), k
        assert on["capex_musd"] == no["capex_musd"]
    sync = json.loads(runner.invoke(app, [*BASE, "--json", "--checkpoint", "sync", "--no-trust"]).stdout)
    assert all(s["goodput"] <= a["goodput"] for s, a in zip(sync["designs"], answer["designs"]))
    table = runner.invoke(app, [*BASE, "--no-trust", "--no-goodput"])
    assert table.exit_code == 0 and "goodput" in table.stdout and " off " in table.stdout


def test_trust_notes_describe_the_stack_given():
    """--stack reaches the trust notes: Qwen3-30B-A3B on 8 GPUs of a GB200 NVL72 under megatron-bridge-2511-mxfp8
    (its recipes capture the router and dispatch preprocess in CUDA graphs) is not said to run on the default
    stack; without --stack it is planned on megatron-core, as hnplan train (which captures no MoE scope)."""
    job = ["compare", "--model", "qwen3-30b-a3b", "--gpus", "8", "--tokens", "1e11", "--seq-len", "4096"]
    job += ["--global-batch-tokens", "1048576", "--systems", "gb200-nvl72", "--json"]
    given = runner.invoke(app, [*job, "--stack", "megatron-bridge-2511-mxfp8"])
    assert given.exit_code == 0, given.output
    notes = json.loads(given.stdout)["trust"]
    assert "stack megatron-bridge-2511-mxfp8 launches the routed experts (moe) from the host" in notes
    assert "default stack" not in notes and "planner's defaults" not in notes
    plain = runner.invoke(app, job)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["stack"] == "megatron-core"
    assert "stack megatron-core launches all its MoE kernels from the host" in json.loads(plain.stdout)["trust"]


def test_no_trust_still_names_a_design_planned_at_the_ideal_default():
    # --no-trust dropped the only sentence saying that the A100 design (no sustained_compute_fraction
    # in data/accelerators/a100-sxm-80gb.yaml) is planned at 1.0 and ranks optimistic
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "64", "--tokens", "1e11", "--seq-len", "4096"]
    argv += ["--global-batch-tokens", "1048576", "--systems", "dgx-a100-hdr,hgx-h100-ib-ndr", "--no-goodput"]
    off = json.loads(runner.invoke(app, [*argv, "--no-trust", "--json"]).stdout)
    on = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    note = off["calibration_note"]
    assert off["trust"] is None and note == on["calibration_note"] and note in on["trust"]
    assert "'sustained_compute_fraction' on a100-sxm-80gb (" in note  # plain text: the field name quoted
    assert "h100-sxm" not in note  # calibrated: both fields in data/accelerators/h100-sxm.yaml
    table = runner.invoke(app, [*argv, "--no-trust"])
    assert table.exit_code == 0 and "How far to trust it" not in table.stdout
    assert "Not calibrated, modelled at the ideal default 1.0" in table.stdout
    # a comparison on calibrated chips only carries no note
    calibrated = [a.replace("dgx-a100-hdr,", "") for a in argv]
    assert "calibration_note" not in json.loads(runner.invoke(app, [*calibrated, "--no-trust", "--json"]).stdout)


def _own_system(tmp_path, sid: str, price_usd: int):
    """A copy of hgx-h100-ib-ndr under its own id and with its own quote per 8-GPU server."""
    text = (load_catalog().root / "systems" / "hgx-h100-ib-ndr.yaml").read_text()
    path = tmp_path / f"{sid}.yaml"
    path.write_text(text.replace("id: hgx-h100-ib-ndr", f"id: {sid}", 1) + f"unit_price_usd: {price_usd}\n")
    return path


def test_a_system_from_the_user_s_file_is_compared_and_priced(tmp_path):
    """A design given as a YAML path has an id the catalog does not hold: the trust notes and the calibration
    sentence look it up by its path (before, 'unknown system id' after the table was planned). The copy
    differs from hgx-h100-ib-ndr only by its quote, $300k per server against $270k (data/prices.yaml): on
    72 GPUs, 9 servers, its capex is 9 x $30k = $0.27M more, the rest equal."""
    path = _own_system(tmp_path, "my-h100-quote", 300_000)
    args = ["compare", "--model", "llama3.1-8b", "--gpus", "72", "--tokens", "1e11", "--seq-len", "8192"]
    args += ["--global-batch-tokens", "1179648", "--systems", f"hgx-h100-ib-ndr,{path}", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    ours, catalog = out["designs"][1], out["designs"][0]
    assert (catalog["system"], ours["system"]) == ("hgx-h100-ib-ndr", "my-h100-quote")
    assert ours["capex_musd"] - catalog["capex_musd"] == pytest.approx(9 * 30_000 / 1e6, rel=1e-9)
    assert ours["step_time_s"] == catalog["step_time_s"]
    assert "my-h100-quote $300k per unit" in out["trust"]


def test_two_designs_of_one_id_are_refused(tmp_path):
    """The table, verdict and JSON name designs by id: a copy that kept a catalog id cannot be told apart."""
    text = (load_catalog().root / "systems" / "hgx-h100-ib-ndr.yaml").read_text()
    (tmp_path / "copy.yaml").write_text(text)
    res = runner.invoke(app, [*BASE[:-2], "--systems", f"hgx-h100-ib-ndr,{tmp_path / 'copy.yaml'}"])
    assert res.exit_code == 2
    assert "are both system 'hgx-h100-ib-ndr'; give each its own id" in res.stderr


def test_a_system_given_twice_is_compared_once_and_said():
    """--systems with one id twice (or in two cases) compares it once, as one design, and says so on stderr, where
    the verdict called it 'the one design compared' without a word about the second."""
    res = runner.invoke(
        app,
        ["compare", "--model", "llama3.1-8b", "--gpus", "72", "--tokens", "1e11", "--seq-len", "8192"]
        + [
            "--global-batch-tokens",
            "1179648",
            "--systems",
            "hgx-h100-ib-ndr,HGX-H100-IB-NDR,hgx-h100-ib-ndr",
            "--no-trust",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert [d["system"] for d in json.loads(res.stdout)["designs"]] == ["hgx-h100-ib-ndr"]
    assert "--systems: hgx-h100-ib-ndr given more than once; compared once" in res.stderr
