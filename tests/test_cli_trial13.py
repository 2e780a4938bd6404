"""What a second new-user trial of the command line found: each a CLI run asserting the exit code and the
figure or the one-line message."""

import json

import yaml
from typer.testing import CliRunner

from hnplan.catalog.loader import load_catalog
from hnplan.cli import app

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def test_size_on_a_count_without_a_plan_names_the_whole_units_it_also_tried():
    # 12 H100 GPUs buy two 8-GPU servers; Llama 3.1 70B's 16 bytes a parameter of weights, gradients and Adam
    # states alone, 70.6e9 x 16 / 12 = 94 GB a GPU, fit in no 80 GB plan on 12, nor on the 16 and 8 GPUs the
    # servers hold: the message said only that 12 had no plan, as if 16 had not been tried
    res = runner.invoke(
        app, ["size", "--model", "llama3.1-70b", "--tokens", "1T", "--system", "hgx-h100-ib-ndr", "--gpus", "12"]
    )
    assert res.exit_code == 3, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith("infeasible: hgx-h100-ib-ndr: no plan of llama3.1-70b on 12 GPUs fits in memory (")
    assert line.endswith("; nor on 16 or 8 GPUs of the 2 whole 8-GPU units bought (16 GPUs)")


def test_size_choice_names_the_count_asked_for_in_one_clause():
    # 1 GB200 GPU buys one 72-GPU rack; the 70B does not fit on 1 GPU, so the rack's 72 (or 64) train: the
    # sentence gave the whole search note in nested brackets and "the 1 asked for have"
    res = runner.invoke(
        app,
        ["size", "--model", "llama3.1-70b", "--tokens", "1T", "--system", "gb200-nvl72", "--gpus", "1", "--json"],
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    (r,) = json.loads(res.stdout)["results"]
    assert (r["gpus_bought"], r["units"]) == (72, 1)
    assert r["gpus_choice"].startswith(
        f"{r['gpus']} GPUs train (all the GPUs of the 1 whole 72-GPU unit bought), {r['days']:,.1f} days: the 1 asked "
        "for has no plan (no plan of llama3.1-70b on 1 GPU fits in memory); on 64: "
    )


def test_size_json_keys_as_the_readme_lists_them():
    # the README's command table listed `skipped` for every size row; a --gpus row has `units` and
    # `gpu_options` instead (the counts weighed, each with its days or the reason it has no plan)
    common = ["size", "--model", "llama3.1-70b", "--tokens", "1T", "--system", "gb200-nvl72", "--json"]
    keys = "system gpus gpus_bought days gpu_hours energy_mwh goodput goodput_mode parallel gpus_choice".split()
    res = runner.invoke(app, [*common, "--gpus", "100"])
    assert res.exit_code == 0, res.stdout + res.stderr
    (r,) = json.loads(res.stdout)["results"]
    assert set(keys) | {"units", "gpu_options"} <= set(r)
    assert all(set(o) in ({"gpus", "days"}, {"gpus", "reason"}) for o in r["gpu_options"])
    res = runner.invoke(app, [*common, "--deadline-days", "30"])
    assert res.exit_code == 0, res.stdout + res.stderr
    (r,) = json.loads(res.stdout)["results"]
    assert set(keys) | {"skipped"} <= set(r)


def _engine_file(tmp_path, **fields):
    """SGLang's catalog entry under a new id with ``fields`` set, each with a provenance line."""
    entry = load_catalog().get("engines", "sglang").model_dump(mode="json", exclude_none=True)
    entry.update(id="my-engine", **fields)
    entry["field_sources"] = {**entry.get("field_sources", {}), **{k: "a measurement (test)" for k in fields}}
    path = tmp_path / "my-engine.yaml"
    path.write_text(yaml.safe_dump(entry, sort_keys=False))
    return path


INFER = [
    *("infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr"),
    *("--batch", "8", "--input-tokens", "1000", "--output-tokens", "200"),
]


def test_an_engine_value_that_would_change_nothing_is_bad_input(tmp_path):
    # an acceptance rate without draft tokens, a one-shot kernel efficiency with the pairwise all-to-all: both
    # were read and silently ignored (the same TPOT as without them)
    for fields, message in (
        (
            {"acceptance_rate": 0.8},
            "acceptance_rate is given but speculative_tokens is 0: give the draft tokens or drop it",
        ),
        (
            {"oneshot_alltoall_efficiency": 0.7},
            "oneshot_alltoall_efficiency is given but ep_decode_alltoall is pairwise: set it to oneshot or drop it",
        ),
    ):
        path = _engine_file(tmp_path, **fields)
        res = runner.invoke(app, [*INFER, "--engine", str(path)])
        assert res.exit_code == 2, res.stdout + res.stderr
        assert one_line(res.stderr) == (
            f"error: --engine: {path}: entry 'my-engine' (ServingEngine) is invalid: {message}"
        )
    path = _engine_file(tmp_path, speculative_tokens=1, acceptance_rate=0.8)
    res = runner.invoke(app, [*INFER, "--engine", str(path), "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr


def test_tco_mix_without_a_simulated_utilisation_is_bad_input():
    # --mix chooses the job mix of --utilisation simulated; with a given utilisation (1.0 by default) it was
    # neither used nor checked: an unknown mix id printed a TCO as if nothing were wrong
    res = runner.invoke(app, ["tco", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--mix", "heavy"])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert one_line(res.stderr) == (
        "error: --mix heavy: a job mix applies only with --utilisation simulated; got --utilisation 1.0"
    )


def test_a_checkpoint_mode_with_no_goodput_is_bad_input():
    # the checkpoint mode only sets the goodput's stalls; with --no-goodput it was accepted and changed nothing
    for cmd in (
        ["compare", "--model", "llama3.1-70b", "--gpus", "1152", "--tokens", "15T", "--no-trust"],
        ["size", "--model", "llama3.1-70b", "--tokens", "1T", "--system", "gb200-nvl72", "--gpus", "72"],
    ):
        res = runner.invoke(app, [*cmd, "--checkpoint", "sync", "--no-goodput"])
        assert res.exit_code == 2, res.stdout + res.stderr
        assert one_line(res.stderr) == (
            "error: --checkpoint sync: the checkpoint mode sets the goodput; --no-goodput leaves it out"
        )
