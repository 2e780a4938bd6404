"""What a third new-user trial of the command line found: each a CLI run asserting the exit code and the
figure or the one-line message."""

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog.checks import kind_of_keys
from hnplan.cli import app
from hnplan.formatting import format_usd

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

MODEL = {  # a user's own dense model, written beside their notes rather than under data/models/
    "id": "my-50b",
    "name": "My 50B dense",
    "source": "hand-written",
    "layers": 64,
    "hidden": 7168,
    "ffn_hidden": 24576,
    "heads": 56,
    "kv_heads": 8,
    "vocab": 128256,
    "max_seq": 8192,
    "activation": "swiglu",
    "position_embedding": "rope",
    "tied_embeddings": False,
}


def test_catalog_validate_tells_a_loose_files_kind_by_its_keys(tmp_path):
    # a model file in a folder of no catalog kind was refused until --kind models was given, though
    # `train --model my-50b.yaml` reads it as a model: its keys say what it is
    path = tmp_path / "my-50b.yaml"
    path.write_text(yaml.safe_dump(MODEL))
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert one_line(res.stdout) == f"{path}: valid (a Model entry, told by its keys)"
    # a mistyped key still reads as a model, so the message names the typo and the field it meant
    path.write_text(yaml.safe_dump({**{k: v for k, v in MODEL.items() if k != "layers"}, "layerz": 64}))
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 2
    assert "field 'layerz': unknown key (did you mean 'layers'?)" in one_line(res.stderr)
    # keys of no kind (a sweep spec): the message asks for --kind, as before
    path.write_text(yaml.safe_dump({"id": "s", "name": "s", "sampling": "grid", "axes": {"gpus": [8]}}))
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 2
    assert "nor do its keys say); pass the kind (--kind)" in one_line(res.stderr)


def test_kind_of_keys_needs_two_own_fields_and_a_clear_winner():
    assert kind_of_keys(MODEL) == "models"
    assert kind_of_keys({"id": "x", "name": "x", "source": "s"}) is None  # keys every kind has
    assert kind_of_keys({"id": "x", "layers": 2}) is None  # one own field is not enough
    assert kind_of_keys([MODEL]) is None


def test_calibrate_refuses_a_figure_in_another_unit(tmp_path):
    # a step time typed in ms (2,804 for 2.8 s) fitted the GEMM efficiency to its bound 0.2 and wrote a
    # stack file "calibrated" to a run 1,000x off; hnplan's 2.80 s at the stack's values is the yardstick
    run = dict(
        id="r8", model="llama3.1-8b", system="hgx-h100-ib-ndr", gpus=8, seq_len=4096, global_batch_seqs=64,
        dtype="bf16", fixed=dict(tp=1, pp=1), metric="step_time_s", published=2804,
    )  # fmt: skip
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([run]))
    out = tmp_path / "cal" / "mine.yaml"
    res = runner.invoke(app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(out)])
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    # hnplan's figures move with the physics: the message is held to its form, the ratio to about 1,000
    said = re.search(
        rf"{re.escape(str(runs))}: run r8: field published: step_time_s 2,804 is ([\d,]+)x hnplan's ", line
    )
    assert said and 800 <= int(said[1].replace(",", "")) <= 1250, line
    assert line.endswith("beyond the 5x a calibration can move it; step_time_s is seconds per step (not ms)")
    assert not out.parent.exists()
    res = runner.invoke(
        app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(out), "--json"]
    )
    err = json.loads(res.stdout)["error"]
    assert (err["exit_code"], err["path"], err["entry"], err["field"]) == (2, str(runs), "r8", "published")
    # tokens/s of the whole 8-GPU job given as one GPU's: 8x
    runs.write_text(yaml.safe_dump([{**run, "metric": "tokens_per_s_per_gpu", "published": 64 * 4096 / 2.804}]))
    res = runner.invoke(app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(out)])
    assert res.exit_code == 2
    assert re.search(r"tokens_per_s_per_gpu 93,489 is [6-9]\.?\d?x hnplan's [\d,]+ for", one_line(res.stderr))
    assert "tokens/s of one GPU (not of a node or the job)" in one_line(res.stderr)


def test_a_refused_choice_names_the_flag_typed():
    # `train --cp-algorithm ring` said "stack choice cp_algorithm: Input should be 'p2p_ring' or 'allgather'",
    # and `infer --dtype fp4` on an H100 named neither the flag nor that it was the dtype asked for
    train = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*train, "--global-batch-tokens", "1Mi", "--cp-algorithm", "ring"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == "error: --cp-algorithm must be one of p2p_ring, allgather; got 'ring'"
    infer = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000"]
    res = runner.invoke(app, [*infer, "--output-tokens", "100", "--dtype", "fp4"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        "error: --dtype fp4 is not available: accelerator 'h100-sxm' of system 'hgx-h100-ib-ndr' has no fp4 peak "
        "(dense_tflops lists fp32, tf32, bf16, fp16, fp8); choose one of those; 4-bit weights with 16-bit "
        "activations (weight-only kernels, as gpt-oss's MXFP4 runs on Hopper) are not modelled: --dtype fp8 holds "
        "the weights at one byte, an upper bound on their memory and read time"
    )


def test_a_folder_given_as_a_trace_is_called_a_folder(tmp_path):
    # `--trace some/folder` said "trace file some/folder not found", though the folder is there
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(tmp_path)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.stdout + res.stderr
    assert (
        one_line(res.stderr)
        == f"error: --trace: trace file {tmp_path} is a folder, not a file: give the trace's CSV or JSON log"
    )
    res = runner.invoke(app, [*argv[:-1], str(tmp_path / "nope.csv")])
    assert (
        res.exit_code == 2 and one_line(res.stderr) == f"error: --trace: trace file {tmp_path / 'nope.csv'} not found"
    )


def test_catalog_kinds_are_taken_singular_or_plural():
    # `catalog list system` answered "unknown catalog kind 'system'" though the kind's table is titled systems
    for argv in (
        ["list", "system"],
        ["list", "switch"],
        ["schema", "model"],
        ["show", "gb200", "--kind", "accelerator"],
    ):
        res = runner.invoke(app, ["catalog", *argv])
        assert res.exit_code == 0, res.stdout + res.stderr
    res = runner.invoke(app, ["catalog", "list", "sytem"])
    assert res.exit_code == 2 and "unknown catalog kind 'sytem'; allowed: accelerators" in one_line(res.stderr)


def test_train_and_size_say_which_peak_mfu_is_of():
    # MFU is of the dense peak in the run's dtype (fp8: 2x bf16's on Hopper and Blackwell); `train --dtype fp8`
    # printed "MFU / HFU 42.2%" with no peak named, where `compare` heads its column "MFU (bf16 peak)"
    train = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*train, "--global-batch-tokens", "1Mi", "--dtype", "fp8"], env={"COLUMNS": "160"})
    assert res.exit_code == 0 and "MFU / HFU (fp8 peak)" in res.stdout, res.stdout + res.stderr
    size = ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--tokens", "1e9"]
    res = runner.invoke(app, size, env={"COLUMNS": "160"})
    assert res.exit_code == 0 and "MFU (bf16 peak)" in res.stdout, res.stdout + res.stderr


def test_a_sweep_spec_hints_at_yaml_numbers_only_for_a_suffixed_count(tmp_path):
    # 'eight' for seq_len was told to "write 15T tokens as 15.0e+12"; '4Mi' is now told its own number
    spec = {
        "id": "s", "name": "s", "sampling": "grid",
        "fixed": {"model": "llama3.1-8b", "tokens": 1.0e12, "seq_len": 8192, "global_batch_tokens": "4Mi"},
        "axes": {"system": ["hgx-h100-ib-ndr"], "gpus": [8]},
    }  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.endswith(
        "fixed.global_batch_tokens: expected a number, got '4Mi' (YAML has no unit suffixes: write 4Mi as 4194304)"
    )
    spec["fixed"].update(global_batch_tokens=4194304, seq_len="eight")
    path.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert res.exit_code == 2 and one_line(res.stderr).endswith("fixed.seq_len: expected a number, got 'eight'")


def test_a_percentage_or_seconds_typed_for_a_fraction_or_milliseconds_is_named():
    # `tco --utilisation 85` said only "must be in (0, 1]"; `infer --tpot-slo-ms 0.05` (50 ms typed in
    # seconds) said only that nothing meets it
    tco = ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--utilisation"]
    res = runner.invoke(app, [*tco, "85"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == "error: --utilisation must be in (0, 1] (a percentage? 85 % is 0.85); got '85'"
    res = runner.invoke(app, [*tco, "85%"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        "error: --utilisation must be a number in (0, 1] or 'simulated' (85 % is 0.85); got '85%'"
    )
    infer = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000"]
    res = runner.invoke(app, [*infer, "--output-tokens", "100", "--qps", "10", "--ttft-slo-ms", "1000"] + [
        "--tpot-slo-ms", "0.05"])  # fmt: skip
    assert res.exit_code == 3, res.stdout + res.stderr
    assert one_line(res.stderr).endswith("; --tpot-slo-ms 0.05 is milliseconds (seconds typed? 0.05 s is 50)")


def test_calibrate_out_a_folder_writes_the_default_name_in_it(tmp_path):
    # `--out cal` with cal/ an existing folder failed after the fit with "--out .../cal: Is a directory"
    run = dict(
        id="r8", model="llama3.1-8b", system="hgx-h100-ib-ndr", gpus=8, seq_len=4096, global_batch_seqs=64,
        dtype="bf16", fixed=dict(tp=1, pp=1), metric="step_time_s", published=3.0,
    )  # fmt: skip
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([run]))
    (tmp_path / "cal").mkdir()
    for out in (tmp_path / "cal", f"{tmp_path / 'new'}/"):
        res = runner.invoke(app, ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--out", str(out)])
        assert res.exit_code == 0, res.stdout + res.stderr
        written = tmp_path / str(out).rstrip("/") / "megatron-core-calibrated.yaml"
        assert written.is_file() and yaml.safe_load(written.read_text())["id"] == "megatron-core-calibrated"


def test_memory_mode_takes_the_sub_commands_name():
    # `memory --mode infer` (the command is `infer`) was refused: "must be one of train, inference"
    argv = ["memory", "--model", "llama3.1-8b", "--tp", "1", "--seq-len", "4096", "--batch", "4", "--json"]
    a = runner.invoke(app, [*argv, "--mode", "infer"])
    b = runner.invoke(app, [*argv, "--mode", "inference"])
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout
    res = runner.invoke(app, [*argv[:-1], "--mode", "inferr"])
    assert res.exit_code == 2 and "--mode must be one of train, inference; got 'inferr'" in one_line(res.stderr)


def test_a_mix_whose_shares_do_not_sum_to_one_says_what_they_sum_to(tmp_path):
    # a training share typed as 5 (per cent) for 0.05 said only "class shares must sum to 1"
    mix = yaml.safe_load((Path(__file__).parents[1] / "data" / "cluster_mixes" / "default.yaml").read_text())
    shares = [c["share"]["value"] for c in mix["classes"]]
    mix["classes"][1]["share"]["value"] = 5
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(mix))
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--mix", str(path), "--jobs", "10"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.stdout + res.stderr
    total = sum(shares) - shares[1] + 5
    assert (
        f"class shares (fractions of jobs) must sum to 1; they sum to {total:g} (inference {shares[0]:g}, training 5,"
        in (one_line(res.stderr))
    )


def test_a_system_file_with_an_unknown_reference_is_named(tmp_path):
    # a copied system file whose accelerator is mistyped said "--system: system 'hgx-h200-ib-ndr', field
    # 'accelerator': unknown ..." without the file, which still carries the id it was copied from
    raw = yaml.safe_load((Path(__file__).parents[1] / "data" / "systems" / "hgx-h200-ib-ndr.yaml").read_text())
    path = tmp_path / "my-h200.yaml"
    path.write_text(yaml.safe_dump({**raw, "accelerator": "h200"}))
    for argv in (["tco", "--system", str(path), "--gpus", "64"], ["topology", "--system", str(path), "--gpus", "64"]):
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, res.stdout + res.stderr
        assert one_line(res.stderr).startswith(
            f"error: --system: {path}: system 'hgx-h200-ib-ndr', field 'accelerator': unknown accelerator id 'h200'"
        )


def test_size_weighs_each_purchase_against_a_budget_and_a_power_cap():
    # an architect sizing to a deadline "within a budget and a power cap" had no way to say either to `size`
    # (only compare's capex column and the procurement notebook); the purchase's capex and facility power are
    # tco's for the GPUs bought
    size = ["size", "--model", "llama3.1-8b", "--tokens", "1T", "--system", "hgx-h100-ib-ndr", "--gpus", "64"]
    tco = json.loads(runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--json"]).stdout)
    res = runner.invoke(app, [*size, "--budget-usd", "1M", "--power-cap-mw", "0.01", "--json"])
    assert res.exit_code == 3, res.stdout + res.stderr  # the only design breaks both: reported, then infeasible
    d = json.loads(res.stdout)
    (r,) = d["results"]
    assert (d["budget_usd"], d["power_cap_mw"]) == (1e6, 0.01)
    assert r["capex_usd"] == pytest.approx(tco["capex_usd"]) and r["capex_usd"] > 1e6
    assert r["facility_power_mw"] == pytest.approx(tco["facility_power_kw"] / 1000) and r["facility_power_mw"] > 0.01
    assert r["within_budget"] is False and r["within_power_cap"] is False
    res = runner.invoke(app, [*size, "--budget-usd", "1e9", "--power-cap-mw", "10"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.stdout + res.stderr
    assert (
        f"hgx-h100-ib-ndr: within the $1B budget ({format_usd(tco['capex_usd'])} capex); within the 10 MW power cap"
        in (one_line(res.stdout))
    )
    res = runner.invoke(app, [*size, "--power-cap-mw", "-1"])
    assert res.exit_code == 2 and "--power-cap-mw must be > 0; got -1" in one_line(res.stderr)


def test_a_scenario_listing_a_notebook_twice_is_refused_before_anything_runs(tmp_path):
    # two design_comparison entries (a 405B and an 8B job) both wrote mine/design_comparison.html: the
    # second replaced the first and the index listed two reports with one link
    entry = {"notebook": "design_comparison", "parameters": {"model": "llama3.1-8b", "gpus": 64}}
    scenario = {"id": "mine", "name": "mine", "notebooks": [entry, {**entry, "parameters": {"gpus": 128}}]}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(scenario))
    res = runner.invoke(app, ["report", "--scenario", str(path), "--out", str(tmp_path / "reports")])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        f"error: {path}: notebook 'design_comparison' is listed more than once (entries 1, 2); each run writes "
        "mine/design_comparison.html, so one would replace the other: put the other parameters in a second "
        "scenario file"
    )
    assert not (tmp_path / "reports").exists()
    # catalog validate tells a scenario file outside data/scenarios/ by its notebooks and checks it as report does
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 2 and "is listed more than once" in one_line(res.stderr)
    path.write_text(yaml.safe_dump({**scenario, "notebooks": [entry]}))
    res = runner.invoke(app, ["catalog", "validate", str(path)])
    assert res.exit_code == 0 and one_line(res.stdout) == f"{path}: valid (a Scenario entry, told by its keys)"


def test_catalog_validate_of_a_folder_checks_its_scenarios_as_report_does(tmp_path):
    # a copy of data/ whose default scenario names a mistyped notebook passed `catalog validate` ("8 scenarios")
    # and failed only at `report`
    import shutil

    data = tmp_path / "data"
    shutil.copytree(Path(__file__).parents[1] / "data", data)
    path = data / "scenarios" / "default.yaml"
    path.write_text(path.read_text().replace("notebook: design_comparison", "notebook: design_comparisn", 1))
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr).startswith(f"invalid: {path}: unknown notebook 'design_comparisn'; available: ")


def test_hnplan_data_naming_no_folder_is_said(tmp_path, monkeypatch):
    # HNPLAN_DATA=typo read an empty catalog: "unknown model id 'llama3.1-8b'; valid ids: " with none listed,
    # and `catalog list systems` printed an empty table with exit 0
    monkeypatch.setenv("HNPLAN_DATA", str(tmp_path / "nope"))
    want = f"error: HNPLAN_DATA={tmp_path / 'nope'}: no such folder (point it at a copy of hnplan's data/)"
    for argv in (
        ["catalog", "list", "systems"],
        ["catalog", "validate"],
        ["tco", "--system", "gb200-nvl72", "--gpus", "72"],
    ):
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, res.stdout + res.stderr
        assert one_line(res.stderr) == want


def test_an_id_not_in_kebab_case_is_told_the_form(tmp_path):
    # "field 'id': String should match pattern '^[a-z0-9]+(?:[.-][a-z0-9]+)*$'" for the id 'My Model'
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**MODEL, "id": "My Model"}))
    res = runner.invoke(app, ["catalog", "validate", str(path), "--kind", "models"])
    assert res.exit_code == 2
    assert one_line(res.stderr).endswith(
        "field 'id': an id is lower-kebab-case (a-z, 0-9, '-' or '.' between them, e.g. 'my-gpu'); got 'My Model'"
    )


def test_a_date_in_another_form_is_told_the_iso_form(tmp_path):
    # a price dated "14 May 2020" said only "invalid character in year"
    import shutil

    data = tmp_path / "data"
    shutil.copytree(Path(__file__).parents[1] / "data", data)
    prices = data / "prices.yaml"
    text = prices.read_text()
    first = re.search(r"as_of: (\S+)", text)
    prices.write_text(text.replace(first[0], "as_of: 14 May 2020", 1))
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2
    assert "field 'as_of': Input should be a valid date or datetime, invalid character in year (write YYYY-MM-DD, " in (
        one_line(res.stderr)
    )
    assert one_line(res.stderr).endswith("e.g. 2025-06-01); got '14 May 2020'")


def test_compare_on_a_count_without_a_plan_runs_on_what_the_units_hold_as_size_does():
    # 1,000 GPUs of 8-GPU servers: compare said "no plan" where `size --gpus` trains on 896 of them; on 100
    # H100 (13 servers) both now train Llama 3.1 8B on 96 GPUs of the 104 bought, in the same days
    job = ["--model", "llama3.1-8b", "--gpus", "100", "--tokens", "1T"]
    cmp_ = runner.invoke(app, ["compare", *job, "--systems", "hgx-h100-ib-ndr", "--no-trust", "--json"])
    size = runner.invoke(app, ["size", *job, "--system", "hgx-h100-ib-ndr", "--json"])
    assert cmp_.exit_code == size.exit_code == 0, cmp_.stdout + cmp_.stderr + size.stderr
    (c,), (s,) = json.loads(cmp_.stdout)["designs"], json.loads(size.stdout)["results"]
    assert (c["gpus"], c["gpus_bought"]) == (s["gpus"], s["gpus_bought"]) == (96, 104)
    assert c["days"] == pytest.approx(s["days"], rel=1e-9)
    assert c["status"] == "ok; 96 of 104 GPUs bought train (the 100 asked for have no plan)"


def test_gemm_and_roofline_name_the_dtype_flag_a_chip_has_no_peak_for():
    # `gemm --dtype fp4` on an H100 said "accelerator 'h100-sxm' has no fp4 peak", not which flag asked for it
    want = (
        "error: --dtype fp4 is not available: accelerator 'h100-sxm' has no fp4 peak "
        "(dense_tflops lists fp32, tf32, bf16, fp16, fp8); choose one of those"
    )
    gemm = ["gemm", "--accelerator", "h100-sxm", "--shape", "4096x4096x4096", "--dtype", "fp4"]
    roofline = ["roofline", "--accelerator", "h100-sxm", "--model", "llama3.1-8b", "--phase", "decode"]
    roofline += ["--batch", "8", "--seq-len", "1", "--kv-len", "1024", "--dtype", "fp4"]
    for argv in (gemm, roofline):
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, res.stdout + res.stderr
        assert one_line(res.stderr) == want


def test_size_exits_3_in_one_line_when_no_design_keeps_to_the_budget_or_the_cap():
    # 64 H100 are 8 servers: tco's capex for them (about $3.3M) is over a $3M budget, and a 72-GPU GB200 rack
    # ($3.1M a rack in data/prices.yaml, plus its network) too; the table was printed with "over budget" notes
    # and the command exited 0, as if the plan could be bought. Now: the report, then one line, exit 3.
    size = ["size", "--model", "llama3.1-8b", "--tokens", "1T", "--gpus", "64", "--system", "hgx-h100-ib-ndr"]
    capex = {
        s: json.loads(runner.invoke(app, ["tco", "--system", s, "--gpus", "64", "--json"]).stdout)["capex_usd"]
        for s in ("hgx-h100-ib-ndr", "gb200-nvl72")
    }
    assert 3e6 < min(capex.values())
    res = runner.invoke(app, [*size, "--system", "gb200-nvl72", "--budget-usd", "3M"], env={"COLUMNS": "200"})
    assert res.exit_code == 3, res.stdout + res.stderr
    assert "hgx-h100-ib-ndr: over budget" in one_line(res.stdout) and "Traceback" not in res.stdout + res.stderr
    said, line = res.stderr.strip().splitlines()  # the defaults taken (as train says them), then the one error line
    assert said.startswith("defaults: --seq-len 8,192, --global-batch-tokens 16,777,216")
    assert line == (
        f"infeasible: no design keeps to the $3M budget: hgx-h100-ib-ndr: 64 GPUs bought cost "
        f"{format_usd(capex['hgx-h100-ib-ndr'])}; gb200-nvl72: 72 GPUs bought cost {format_usd(capex['gb200-nvl72'])}"
    )
    # --json: the object carries the same refusal (exit 3), as the other refusals' objects do
    res = runner.invoke(app, [*size, "--system", "gb200-nvl72", "--budget-usd", "3M", "--json"])
    assert res.exit_code == 3 and json.loads(res.stdout)["infeasible"] == line.removeprefix("infeasible: ")
    # one design within both: an answer, exit 0
    budget = f"{(capex['hgx-h100-ib-ndr'] + capex['gb200-nvl72']) / 2:.0f}"
    res = runner.invoke(app, [*size, "--system", "gb200-nvl72", "--budget-usd", budget, "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    within = {r["system"]: r["within_budget"] for r in json.loads(res.stdout)["results"]}
    assert within == {s: capex[s] <= float(budget) for s in capex} and any(within.values())
    # a cap of 0 is bad input, refused before the search: exit 2
    res = runner.invoke(app, [*size, "--power-cap-mw", "0", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["message"] == "--power-cap-mw must be > 0; got 0"


def test_power_cap_in_watts_is_refused():
    """40 MW typed in watts (40,000,000) is 40 TW as MW: refused with the unit named, exit 2, before any search."""
    res = runner.invoke(
        app,
        [
            "size",
            "--model",
            "llama3.1-8b",
            "--system",
            "hgx-h100-ib-ndr",
            "--gpus",
            "64",
            "--tokens",
            "1e12",
            "--power-cap-mw",
            "40000000",
        ],
    )
    assert res.exit_code == 2
    assert "--power-cap-mw 40,000,000 is above 100,000 MW (100 GW): the cap is in MW" in one_line(res.stderr)


def test_catalog_list_scenarios():
    """`catalog list scenarios` lists the ids `report --scenario` takes (data/scenarios/), with their names."""
    res = runner.invoke(app, ["catalog", "list", "scenarios", "--json"])
    assert res.exit_code == 0
    ids = [s["id"] for s in json.loads(res.stdout)["scenarios"]]
    assert "default" in ids and "procurement" in ids
    assert ids == sorted(p.stem for p in (Path(__file__).parents[1] / "data" / "scenarios").glob("*.yaml"))
