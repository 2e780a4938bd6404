"""Messages a new user read: a deadline of one day in the singular, a trace cell ``nan`` quoted as written,
``defer`` with a scheduler period of 0 refused by the library as by the command line."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.errors import InputError

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

HEADER = "job_id,arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n0,0,8,1000,3600,training,0,1\n"


def test_size_says_one_day_not_one_days():
    # 1e17 tokens of a 405B model in 1 day need ~2.9e9 GPUs at 100 % MFU (6 x 405e9 x 1e17 FLOP over
    # 86,400 s x 989e12 FLOP/s): past the 65,536 the fabric joins, so the one line names the deadline
    args = ["size", "--model", "llama3.1-405b", "--tokens", "1e17", "--system", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*args, "--deadline-days", "1", "--json"])
    assert res.exit_code == 3, res.output
    msg = json.loads(res.stdout)["error"]["message"]
    assert "tokens within 1 day needs at least" in msg and "1 days" not in msg
    two = json.loads(runner.invoke(app, [*args, "--deadline-days", "2", "--json"]).stdout)["error"]["message"]
    assert "tokens within 2 days needs at least" in two


@pytest.mark.parametrize(
    ("cell", "says"),
    [("nan", "has 'nan'"), ("NA", "has 'NA'"), ("", "is empty")],
)
def test_a_trace_cell_without_a_number_names_file_row_and_column(tmp_path, cell, says):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + f"1,10,8,1000,{cell},training,0,1\n")
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(trace)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    # the header is row 1, the first job row 2: the nan is on row 3
    assert res.stderr.strip() == f"error: {trace}: row 3, column duration_s: must be a number; {says}"


def test_simulate_cluster_refuses_defer_with_no_scheduler_period():
    from hnplan.cluster import simulate_cluster

    with pytest.raises(InputError, match=r"^sched_interval_s 0 with defer: no pass at submission and none periodic"):
        simulate_cluster("hgx-h100-ib-ndr", 64, n_jobs=5, defer=True, sched_interval_s=0)
    # the command line gives the same rule in its flags' names
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "5", "--defer"]
    res = runner.invoke(app, [*argv, "--sched-interval", "0"])
    assert res.exit_code == 2
    assert res.stderr.strip().startswith("error: --sched-interval 0 with --defer: no pass at submission")
    assert res.stderr.strip().endswith("or drop --defer")


def test_compare_json_verdict_and_trust_are_plain_text_the_console_keeps_its_bold():
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "1024", "--tokens", "1e12"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for field in ("verdict", "trust"):
        assert "**" not in out[field] and "`" not in out[field], out[field]
    # the verdict names the fastest design unmarked; the trust notes quote a command as text
    assert out["verdict"].startswith("gb200-nvl72 trains fastest")
    assert "the 'validation' report ('hnplan report --scenario audit')" in out["trust"]
    # one builder: the Markdown a notebook displays differs only by its markup
    from hnplan.formatting import styled
    from hnplan.planning.compare import verdict

    rows = [
        dict(system="rack", kind="supernode", peak_tflops=2500.0, days=20.0, mfu=0.5, capex_musd=300.0, status="ok"),
        dict(
            system="srv", kind="server-cluster", peak_tflops=2000.0, days=44.0, mfu=0.4, capex_musd=250.0, status="ok"
        ),
    ]
    md = verdict(rows)
    assert md.startswith("**rack** trains fastest (20.0 days at 50% MFU); **srv** costs least to buy")
    assert verdict(rows, "plain") == styled(md, "plain") and verdict(rows, "plain").startswith("rack trains fastest")
    with pytest.raises(ValueError, match="style must be one of markdown, plain; got 'html'"):
        verdict(rows, "html")


def test_train_defaults_the_sequence_and_batch_as_size_and_compare_do():
    from hnplan.cli import _options

    # Llama 3 405B's pre-training sequence and final batch: 2,048 sequences of 8,192 tokens = 16Mi tokens
    assert (_options.DEFAULT_SEQ_LEN, _options.DEFAULT_BATCH_TOKENS) == (8192, 2048 * 8192)
    # the default scenario's design comparison (compare's defaults) agrees with them
    from hnplan.catalog.loader import load_catalog

    params = [nb.parameters for nb in load_catalog().scenario("default").notebooks if "seq_len" in nb.parameters]
    assert params and all((p["seq_len"], p["global_batch_tokens"]) == (8192, 16_777_216) for p in params)
    argv = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--json"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["seq_len"], out["global_batch_tokens"], out["global_batch_seqs"]) == (8192, 16_777_216, 2048)
    assert res.stderr.strip() == (
        "defaults: --seq-len 8,192, --global-batch-tokens 16,777,216 (Llama 3 405B's, as size; compare's come from the "
        "default scenario; give the flags to change them)"
    )
    # a batch in sequences takes the default sequence: 512 x 8,192 tokens
    res = runner.invoke(app, [*argv, "--global-batch-size", "512"])
    assert json.loads(res.stdout)["global_batch_tokens"] == 512 * 8192
    assert res.stderr.strip().startswith("defaults: --seq-len 8,192 (")
    # a sequence the default batch does not divide says the batch was the default
    res = runner.invoke(app, [*argv, "--seq-len", "3000"])
    assert res.exit_code == 2
    assert "the default --global-batch-tokens 16,777,216 is not a multiple of --seq-len 3,000" in res.stderr
    both = runner.invoke(app, [*argv, "--global-batch-size", "512", "--global-batch-tokens", "4Mi"])
    assert both.exit_code == 2 and "give one of --global-batch-tokens and --global-batch-size, not both" in both.stderr
    help_text = " ".join(runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert (
        "the default is Llama 3 405B's, as in size [default: 8192]" in help_text
        and "default 16Mi = 16,777,216" in help_text
    )


def test_size_says_the_defaults_it_took_on_stderr():
    """size takes train's default sequence and batch (Llama 3 405B's) and says so on stderr, as train does; a typed
    flag is not listed, and --json's stdout stays one object."""
    args = ["size", "--model", "llama3.1-8b", "--tokens", "1e11", "--gpus", "64", "--systems", "hgx-h100-ib-ndr"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["seq_len"] == 8192
    assert res.stderr.strip() == (
        "defaults: --seq-len 8,192, --global-batch-tokens 16,777,216 (Llama 3 405B's, as train; give the flags to "
        "change them)"
    )
    typed = runner.invoke(app, [*args, "--seq-len", "4096", "--global-batch-tokens", "4Mi", "--json"])
    assert typed.exit_code == 0 and typed.stderr == ""


def test_train_on_a_whole_rack_count_no_layout_divides_names_the_64_of_each_rack_count():
    """Qwen3-30B-A3B at 512 sequences on one GB200 NVL72 rack: 72 = 8 x 9 and no layout takes the 9, so train
    refuses (exit 3) and names the count size and compare run it on, 64 of the rack's 72, which train then plans."""
    args = ["train", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--seq-len", "4096"]
    args += ["--global-batch-tokens", "2Mi", "--json"]
    res = runner.invoke(app, [*args, "--gpus", "72"])
    assert res.exit_code == 3
    assert res.stderr.strip().endswith("; or --gpus 64 (64 of each unit's 72, as size and compare run it)")
    assert runner.invoke(app, [*args, "--gpus", "64"]).exit_code == 0
