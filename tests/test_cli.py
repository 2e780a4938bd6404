"""The hnplan command line: every sub-command's --help, JSON keys, exit codes and error messages."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()


def _commands(group, prefix=()):
    import typer.main

    click_group = typer.main.get_command(group)
    out = []

    def walk(cmd, path):
        out.append(path)
        if hasattr(cmd, "list_commands"):  # the lazy root lists sub-commands whose modules are not imported yet
            subs = {name: cmd.get_command(None, name) for name in cmd.list_commands(None)}
        else:
            subs = getattr(cmd, "commands", {})
        for name, sub in subs.items():
            walk(sub, path + (name,))

    walk(click_group, tuple(prefix))
    return out


@pytest.mark.parametrize("path", _commands(app))
def test_every_subcommand_has_help(path):
    res = runner.invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage" in res.output
    assert "<bool>" not in res.output  # a flag takes no value: its help shows no type


def test_help_shows_a_type_for_options_with_values_only():
    out = runner.invoke(app, ["catalog", "show", "--help"], env={"COLUMNS": "200"}).output
    rows = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith("│ --")}
    assert "<str>" in rows["--kind"]  # takes a value
    assert "<" not in rows["--json"] and "<" not in rows["--help"]  # flags


TRAIN = [
    "train",
    "--model",
    "llama3.1-405b",
    "--system",
    "hgx-h100-ib-ndr",
    "--gpus",
    "16384",
    "--tp",
    "8",
    "--pp",
    "16",
    "--dp",
    "128",
    "--seq-len",
    "8192",
    "--global-batch-tokens",
    "16777216",
    "--recompute",
    "full",
    "--json",
]


def test_train_json_keys():
    res = runner.invoke(app, TRAIN)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in (
        "step_time_s",
        "tokens_per_s",
        "model_flops_per_token",
        "mfu",
        "hfu",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "memory_per_gpu_gib",
        "fits",
        "parallel",
        "breakdown_s",
    ):
        assert key in d
    assert set(d["parallel"]) >= {
        "tp",
        "pp",
        "dp",
        "cp",
        "ep",
        "microbatch_size",
        "num_microbatches",
        "virtual_stages",
        "zero_stage",
        "recompute",
    }
    assert {"compute", "tp_comm_exposed", "dp_comm_exposed", "pp_bubble"} <= set(d["breakdown_s"])
    assert d["parallel"]["num_microbatches"] == 16  # 2,048 sequences / DP 128
    assert d["tokens_per_s"] == pytest.approx(16777216 / d["step_time_s"])
    assert d["hfu"] > d["mfu"]  # full recomputation adds a forward pass


def test_train_search_reports_counts():
    res = runner.invoke(
        app,
        [
            "train",
            "--model",
            "llama3.1-8b",
            "--system",
            "hgx-h100-ib-ndr",
            "--gpus",
            "16",
            "--seq-len",
            "4096",
            "--global-batch-size",
            "64",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["searched"] >= d["feasible"] >= 1 and d["fits"]


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["--gpus", "1000"], 3, "= 16384 does not divide --gpus 1000"),
        (["--model", "llama3-405b"], 2, "nearest: llama3.1-405b"),
        (["--system", "gb200"], 2, "gb200-nvl72"),
        (["--recompute", "some"], 2, "none, selective, full"),
        (["--global-batch-size", "2048"], 2, "give one of --global-batch-tokens and --global-batch-size, not both"),
    ],
)
def test_train_errors(args, code, needle):
    argv = list(TRAIN)
    for flag, value in zip(args[::2], args[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value  # replace the flag's value
        else:
            argv += [flag, value]
    res = runner.invoke(app, argv)
    assert res.exit_code == code
    assert needle in " ".join(res.stderr.split())


def test_catalog_list_and_show():
    res = runner.invoke(app, ["catalog", "list", "systems", "--json"])
    ids = [e["id"] for e in json.loads(res.stdout)["systems"]]
    assert "gb200-nvl72" in ids and "cloudmatrix-384" in ids
    res = runner.invoke(app, ["catalog", "show", "h100-sxm"])
    assert res.exit_code == 0 and "989.4" in res.stdout
    out = res.stdout  # the values first, their provenance after them
    assert out.index("\ntdp_w:") < out.index("\nfield_sources:") < out.index("\nassumptions:")
    res = runner.invoke(app, ["catalog", "show", "h100-sxn"])
    assert res.exit_code == 2 and "h100-sxm" in res.stderr


def test_catalog_show_a_bad_file_names_its_fields(tmp_path):
    # a model file with one bad field said "no catalog entry '<path>' in accelerators, ..., engines"
    import yaml

    from hnplan.catalog import load_catalog

    raw = yaml.safe_load(load_catalog().path_of("models", "llama3.1-8b").read_text())
    path = tmp_path / "my-model.yaml"
    path.write_text(yaml.safe_dump({**raw, "layers": -4}))
    res = runner.invoke(app, ["catalog", "show", str(path)])
    msg = " ".join(res.stderr.split())
    assert res.exit_code == 2 and f"{path}: entry 'llama3.1-8b' (Model) is invalid: field 'layers'" in msg
    path.write_text(yaml.safe_dump(raw))
    assert runner.invoke(app, ["catalog", "show", str(path)]).exit_code == 0
    path.write_text("")  # an empty file fits no kind: no kind is named
    res = runner.invoke(app, ["catalog", "show", str(path)])
    assert (
        res.exit_code == 2
        and "expected one mapping of an entry's fields, got nothing (the file is empty)" in res.stderr
    )


@pytest.mark.parametrize(
    "argv,code,needle",
    [
        (
            [
                "train",
                "--model",
                "llama3.1-405b",
                "--system",
                "hgx-h100-ib-ndr",
                "--gpus",
                "16384",
                "--tp",
                "7",
                "--seq-len",
                "8192",
                "--global-batch-size",
                "2048",
            ],
            3,
            "tp 7 does not divide --gpus 16384",
        ),
        (
            [
                "train",
                "--model",
                "llama3.1-8b",
                "--system",
                "hgx-h100-ib-ndr",
                "--gpus",
                "8",
                "--seq-len",
                "200000",
                "--global-batch-size",
                "8",
            ],
            2,
            "exceeds llama3.1-8b's maximum sequence length 131,072",
        ),
        (
            [
                "infer",
                "--model",
                "llama3.1-8b",
                "--system",
                "hgx-h100-ib-ndr",
                "--input-tokens",
                "100",
                "--output-tokens",
                "100",
                "--ttft-slo-ms",
                "10",
            ],
            2,
            "apply to --qps planning",
        ),
        (
            [
                "roofline",
                "--accelerator",
                "h100-sxm",
                "--model",
                "llama3.1-8b",
                "--phase",
                "prefill",
                "--batch",
                "1",
                "--seq-len",
                "200000",
            ],
            2,
            "maximum sequence length 131,072",
        ),
        (
            ["memory", "--model", "llama3.1-8b", "--mode", "inference", "--batch", "1", "--seq-len", "200000"],
            2,
            "maximum sequence length 131,072",
        ),
        (
            [
                "memory",
                "--model",
                "llama3.1-70b",
                "--mode",
                "train",
                "--tp",
                "3",
                "--pp",
                "4",
                "--dp",
                "8",
                "--seq-len",
                "8192",
                "--microbatch-size",
                "1",
                "--zero",
                "1",
                "--recompute",
                "selective",
            ],
            3,
            "tp = 3 does not divide",
        ),
        (
            ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "8", "--sweep", "8B"],
            2,
            "expected MIN:MAX",
        ),
    ],
)
def test_bad_input_is_named(argv, code, needle):
    res = runner.invoke(app, argv)
    assert res.exit_code == code, res.output
    assert needle in " ".join(res.stderr.split())


def test_gemm_table_names_the_time_unit_as_the_others_do():
    res = runner.invoke(app, ["gemm", "--accelerator", "h100-sxm", "--shape", "4096x8192x8192"])
    assert res.exit_code == 0 and "time [us]" in res.stdout and "compute" in res.stdout


def test_catalog_show_an_unknown_id_says_every_kind_was_searched():
    # 'nosuch' is near only a switch id: the message said "unknown switch id 'nosuch'", as if only the
    # switches had been searched (and nvswitch3, a 0.53 match, is no longer offered: tests/test_cli_tryout23.py)
    res = runner.invoke(app, ["catalog", "show", "nosuch"])
    msg = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "no catalog entry 'nosuch' of any kind, and no id close to it; kinds: " in msg
    res = runner.invoke(app, ["catalog", "show", "h100"])
    assert "no catalog entry 'h100' of any kind; closest ids: h100-sxm (accelerators)" in " ".join(res.stderr.split())
    res = runner.invoke(app, ["catalog", "show", "h100", "--kind", "accelerators"])  # one kind: as before
    assert res.exit_code == 2 and "unknown accelerator id 'h100'; nearest: h100-sxm" in " ".join(res.stderr.split())


@pytest.mark.parametrize(
    "argv,usage",
    [
        (["sweep", "--help"], "[OPTIONS] SPEC"),
        (["catalog", "show", "--help"], "[OPTIONS] REF"),
        (["catalog", "list", "--help"], "[OPTIONS] [KIND]"),
        (["catalog", "validate", "--help"], "[OPTIONS] [PATH]"),
        (["catalog", "schema", "--help"], "[OPTIONS] [KIND]"),
    ],
)
def test_usage_lines_name_positional_arguments_readably(argv, usage):
    """A positional argument shows its metavar, as click writes usage (``SPEC``, ``[KIND]``), not typer's
    ``{spec}`` that reads like an unfilled placeholder."""
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "Usage:" in ln)
    assert line.rstrip().endswith(" " + usage) and "{" not in line


def test_gpu_counts_in_messages_have_thousands_separators():
    # 1,000 GPUs of 8-GPU servers: 1,000 = 2^3 x 5^3 leaves dp x micro-batch no divisor of the 2,048-sequence
    # batch; the job runs on 896 of the 125 servers' GPUs (TP x PP7 x DP16 x CP), the counts between said
    argv = ["size", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "1000", "--tokens", "1T"]
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "the 1,000 asked for have no plan (no plan of llama3.1-70b on 1,000 x hgx-h100-ib-ndr divides)" in text
    assert "896 GPUs train (112 of the 125 whole 8-GPU units bought)" in text
    assert "no plan on the 12 counts from 992 to 904" in text


def test_catalog_lists_cluster_mixes_and_prices():
    """The ids `cluster simulate --mix` takes and the dated prices the cost model reads are listed as the catalog
    kinds are (any case, singular or plural, - or _); a price names its item, dollars, what it buys and its date."""
    from hnplan.catalog import load_catalog

    mixes = json.loads(runner.invoke(app, ["catalog", "list", "cluster-mixes", "--json"]).stdout)["cluster_mixes"]
    assert [m["id"] for m in mixes] == ["default"]
    assert json.loads(runner.invoke(app, ["catalog", "list", "Mix", "--json"]).stdout) == {"cluster_mixes": mixes}
    prices = json.loads(runner.invoke(app, ["catalog", "list", "price", "--json"]).stdout)["prices"]
    (rack,) = [p for p in prices if p["item"] == "gb200-nvl72"]
    entry = next(p for p in load_catalog().prices if p.item == "gb200-nvl72")
    assert rack["name"].startswith(f"gb200-nvl72: ${entry.usd:,.0f} per ") and str(entry.as_of) in rack["name"]
    every = json.loads(runner.invoke(app, ["catalog", "list", "--json"]).stdout)
    assert {"scenarios", "cluster_mixes", "prices"} <= set(every)
    bad = runner.invoke(app, ["catalog", "list", "bogus"])
    assert bad.exit_code == 2 and "cluster_mixes, prices" in bad.output
