"""What a first-time user trips over at the command line: messages that say what is wrong in words, help
texts whose ranges are the ones enforced, and defaults that are named."""

import json
import re

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

from clitext import one_line

runner = CliRunner()


@pytest.mark.parametrize(
    "content,said",
    [
        ("", "got nothing (the file is empty)"),
        ("- 1\n- 2\n", "got a list of 2 items"),
        ("op,gpus\nallreduce,8\n", "got the text 'op,gpus allreduce,8'"),
    ],
)
def test_a_model_file_that_is_no_mapping_says_what_it_holds(tmp_path, content, said):
    # it said "got NoneType" / "got str", Python's type names
    path = tmp_path / "m.yaml"
    path.write_text(content)
    argv = ["train", "--model", str(path), "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-tokens", "1Mi"])
    assert res.exit_code == 2
    assert f"--model: {path}: expected one mapping of Model fields, {said}" in one_line(res.stderr)
    assert "Traceback" not in res.stdout + res.stderr


def test_why_so_often_does_not_set_a_goodput_against_itself():
    # 100 GPUs of GB200 NVL72 (two racks): one interruption every ~470 h, so half-hour checkpoints lose as good
    # as nothing and both goodputs print as 96.8 %; the row said "goodput 96.8%, not 96.8%"
    argv = ["reliability", "--system", "gb200-nvl72", "--gpus", "100", "--model", "llama3.1-70b"]
    out = one_line(runner.invoke(app, argv, env={"COLUMNS": "250"}).stdout)
    assert "why so often" in out
    assert re.search(r"goodput \d+\.\d%, the same to 0\.1 % \(the interruptions are too rare for it to matter\)", out)
    assert not re.search(r"goodput (\d+\.\d%), not \1", out)


INFER = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "128"]
MEMORY = ["memory", "--model", "llama3.1-8b", "--mode", "inference", "--system", "hgx-h100-ib-ndr"]
RELIABILITY = ["reliability", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--model", "llama3.1-8b"]
CLUSTER = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "20"]


@pytest.mark.parametrize(
    "argv,flag,value,needle",
    [
        (CLUSTER, "--load", "0", "--load must be > 0; got 0"),
        (CLUSTER, "--load", "-0.5", "--load must be > 0; got -0.5"),
        (INFER, "--score-latency-ms", "0", "--score-latency-ms must be > 0; got 0"),
        (INFER, "--kv-budget-gib", "-1", "--kv-budget-gib must be > 0; got -1"),
        (INFER, "--gpu-memory-utilization", "1.5", "--gpu-memory-utilization must be in (0, 1]; got 1.5"),
        (MEMORY, "--gpu-memory-utilization", "0", "--gpu-memory-utilization must be in (0, 1]; got 0"),
        (MEMORY, "--kv-budget-gib", "0", "--kv-budget-gib must be > 0; got 0"),
        (RELIABILITY, "--checkpoint-storage-share", "1.5", "--checkpoint-storage-share must be in (0, 1]; got 1.5"),
        (RELIABILITY, "--checkpoint-storage-share", "0", "--checkpoint-storage-share must be in (0, 1]; got 0"),
    ],
)
def test_an_open_range_is_the_one_help_states_and_the_one_refused(argv, flag, value, needle):
    # these flags showed typer's closed range ([x>=0.0], [0.0<=x<=1.0]) while 0 was refused: help now states
    # the open range and no range box; 0, a negative or a value above 1 is one line naming the flag (the
    # scoring latency of 0 ms was an infeasible plan, exit 3; memory's said "utilization must be ...")
    extra = ["--seq-len", "1024", "--batch", "1"] if argv is MEMORY else []
    res = runner.invoke(app, [*argv, *extra, flag, value])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert needle in one_line(res.stderr)
    assert "Traceback" not in res.stdout + res.stderr and "Try '" not in res.stderr
    command = argv[:2] if argv is CLUSTER else argv[:1]
    helptext = one_line(runner.invoke(app, [*command, "--help"], env={"COLUMNS": "250"}).stdout)
    row = helptext[helptext.index(flag + " ") :][:200]
    assert "x>=" not in row and "<=x" not in row
    assert "(> 0" in row or "in (0, 1]" in row or "> 0 and at most 10" in row


def test_load_typed_as_a_percentage_is_refused_with_the_fraction_it_means():
    # --load 85 (meaning 85 %) simulated 85 times the cluster's capacity, an offered load of 8,500 %
    res = runner.invoke(app, [*CLUSTER, "--load", "85"])
    assert res.exit_code == 2
    assert "--load is a fraction of the GPUs (0.85 = 85 %), at most 10; got 85 (8500% of the cluster)" in one_line(
        res.stderr
    )
    assert runner.invoke(app, [*CLUSTER, "--load", "1.5"]).exit_code == 0  # oversubscribed is a valid question


def test_infer_names_the_engine_it_assumed_also_when_none_was_given():
    # without --engine the planner assumes an ideal engine (no batch cap but memory, no host time per step):
    # the table showed "engine  -" and `--qps` neither a row nor a JSON key, so the same job served with
    # `--engine vllm` (as the serving report does) needed more GPUs with nothing saying why
    qps = ["--output-tokens", "128", "--qps", "10", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]
    for extra, engine in (([], None), (["--engine", "vllm"], "vllm")):
        res = runner.invoke(app, [*INFER, *qps, *extra, "--json"])
        assert res.exit_code == 0 and json.loads(res.stdout)["engine"] == engine
    for argv in ([*INFER, *qps], INFER):
        out = one_line(runner.invoke(app, argv, env={"COLUMNS": "250"}).stdout)
        assert "engine │ none (memory alone caps the batch, no host time per step, whole-prompt prefill)" in out
    helptext = one_line(runner.invoke(app, ["infer", "--help"], env={"COLUMNS": "250"}).stdout.replace("│", ""))
    assert "default none: memory alone caps the batch, no host time per step, whole-prompt prefill" in helptext


def test_one_gpu_is_written_singular_and_large_counts_with_separators():
    # "no plan of llama3.1-70b on 1 GPUs fits in memory"
    argv = ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "1", "--seq-len", "8192"]
    res = runner.invoke(app, [*argv, "--global-batch-tokens", "1Mi"])
    assert res.exit_code == 3
    assert "no plan of llama3.1-70b on 1 GPU fits in memory" in one_line(res.stderr)


def test_serving_summaries_count_one_row_and_one_gpu_singular():
    # the serving report read "DeepSeek production (1 rows)" and "gb200-nvl72 1 GPUs (TP1 EP1, ...)"
    import pandas as pd

    from hnplan.planning.inference.capacity import capacity_verdict
    from hnplan.planning.inference.validation import validation_summary

    rows = pd.DataFrame(
        {"family": ["one", "two", "two"], "error_pct": [-48.2, 1.0, -3.0], "within_tolerance": [True, True, False]}
    )
    text = validation_summary(rows)
    assert (
        "- **one** (1 row): mean |error| 48.2%, from -48.2% to -48.2%; 1 of 1 within the stated band (1 of them a "
        "known gap over 20 %, its band widened to hold it: the note says why)." in text
    )  # -48 % "within the band" is a documented gap, not a fit: said so
    assert "- **two** (2 rows): mean |error| 2.0%, from -3.0% to +1.0%; 1 of 2 within the stated band." in text
    rates = pd.DataFrame(
        [
            dict(system="a", qps=1.0, gpus=1, tp=1, ep=1, batch=20, usd_per_million_tokens=1.135, status="ok"),
            dict(system="b", qps=1.0, gpus=2, tp=2, ep=1, batch=17, usd_per_million_tokens=1.793, status="ok"),
        ]
    )
    text = capacity_verdict(rates)
    assert "**a** 1 GPU (TP1 EP1, batch 20" in text and "**b** 2 GPUs (TP2 EP1, batch 17" in text


def test_slos_no_configuration_meets_are_written_as_given():
    # a TTFT bound of 0.001 ms read "meets TTFT <= 0 ms" (rounded to whole ms), TPOT 50 as "50.0 ms"
    argv = [*INFER, "--output-tokens", "16", "--qps", "10", "--ttft-slo-ms", "0.001", "--tpot-slo-ms", "50"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 3
    assert "meets TTFT <= 0.001 ms and TPOT <= 50 ms at 10 requests/s" in one_line(res.stderr)


def test_a_fully_given_plan_at_pp_1_is_evaluated_without_virtual_stages():
    # every degree and knob given but --virtual-stages (help: "default 1"), PP 1: it searched the one candidate
    # and failed, "infeasible: no plan ... fits in memory (1 candidates searched ...)", exit 3, where the
    # README promises the plan evaluated with fits: false (then exit 3: an infeasible plan). Llama 3.1 8B on 8
    # H100, DP 8, no recompute: 99.9 GiB per GPU (catalog of 2026-12-01) against 79.1 GiB visible
    argv = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--seq-len", "8192"]
    given = ["--tp", "1", "--pp", "1", "--dp", "8", "--microbatch-size", "1", "--recompute", "none", "--zero", "1"]
    res = runner.invoke(app, [*argv, "--global-batch-size", "64", *given, "--json"])
    assert res.exit_code == 3, res.stderr
    d = json.loads(res.stdout)
    assert d["fits"] is False and d["memory_per_gpu_gib"] > 79.1 and d["parallel"]["virtual_stages"] == 1
    assert "searched" not in d or d["searched"] is None
    # at PP > 1 the interleaving is still searched when not given
    res = runner.invoke(app, [*argv, "--global-batch-size", "64", *given[:2], "--pp", "2", "--dp", "4", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["searched"] > 1


def test_cluster_simulate_says_what_each_serving_deployment_holds(cat):
    # --serve added planner-sized inference jobs without a word in the table or the JSON: an operator could
    # not see how many of the cluster's GPUs the deployment held
    from hnplan.cluster.runtime import serving_jobs

    argv = [*CLUSTER, "--serve", "llama3.1-70b:30", "--serve", "llama3.1-8b:5"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.stderr
    got = json.loads(res.stdout)["serving"]
    for v, (model, qps) in zip(got, [("llama3.1-70b", 30.0), ("llama3.1-8b", 5.0)], strict=True):
        jobs, plan = serving_jobs("hgx-h100-ib-ndr", model, qps, catalog=cat)  # the planner's own sizing
        assert v == {"model": model, "qps": qps, "replicas": len(jobs), "gpus": plan.gpus}
    out = one_line(runner.invoke(app, argv, env={"COLUMNS": "250"}).stdout)
    first, second = got
    assert (
        f"serving (held throughout) │ llama3.1-70b at 30 requests/s: {first['replicas']} replicas, "
        f"{first['gpus']} GPUs; llama3.1-8b at 5 requests/s: 1 replica, 1 GPU" in out
    )
    assert "serving" not in json.loads(runner.invoke(app, [*CLUSTER, "--json"]).stdout)


def test_serving_messages_name_the_flag_and_separate_thousands():
    # "kv dtype: unknown dtype 'int3'" named no flag; "exceeds the 2137 sequences of 2001 tokens"
    res = runner.invoke(app, [*INFER, "--kv-dtype", "int3"])
    assert res.exit_code == 2 and "--kv-dtype: unknown dtype 'int3'; allowed:" in one_line(res.stderr)
    res = runner.invoke(app, [*INFER, "--output-tokens", "1872", "--batch", "100000"])
    assert res.exit_code == 3
    assert re.search(
        r"--batch 100000 exceeds the \d{1,3},\d{3} sequences of 2,000 tokens that fit", one_line(res.stderr)
    )
