"""What a new-user trial of the buying question and the shared-cluster half found: each a CLI run asserting the
exit code and the one-line message."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


@pytest.mark.parametrize(
    ("argv", "flag", "typed", "fraction"),
    [
        (
            ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "5"],
            "--load",
            "85%",
            "0.85",
        ),
        (
            ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "100"],
            "--gpu-memory-utilization",
            "90%",
            "0.9",
        ),
        (
            ["reliability", "--system", "gb200-nvl72", "--gpus", "72", "--model", "llama3.1-8b"],
            "--checkpoint-storage-share",
            "10 %",
            "0.1",
        ),
    ],
)
def test_a_fraction_typed_in_per_cent_is_answered_with_the_fraction(argv, flag, typed, fraction):
    """``cluster simulate --load 85%`` said only "Input should be a valid number" (as did ``infer
    --gpu-memory-utilization 90%`` and ``reliability --checkpoint-storage-share 10%``), where ``tco --utilisation
    80%`` says what 80 % is: the line now says the option takes a fraction and gives it (85 / 100 = 0.85)."""
    res = runner.invoke(app, [*argv, flag, typed])
    assert res.exit_code == 2 and "Traceback" not in res.output
    line = res.stderr.strip()
    assert line.count("\n") == 0 and f"got '{typed}'" in line
    assert f"; {flag} is a fraction: {typed.rstrip('%').strip()} % is {fraction}; see " in line


def test_a_number_with_a_per_cent_sign_elsewhere_gets_no_fraction_hint():
    """Only the options that take a fraction say so: ``--gpus 50%`` is a count, not a share."""
    res = runner.invoke(app, ["tco", "--system", "gb200-nvl72", "--gpus", "50%"])
    assert res.exit_code == 2 and "is a fraction" not in res.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--gpus", "64"],
        ["compare", "--model", "llama3.1-70b", "--gpus", "64", "--tokens", "1T"],
        ["size", "--model", "llama3.1-70b", "--tokens", "1T", "--deadline-days", "30", "--system", "hgx-h100-ib-ndr"],
    ],
)
def test_seq_len_typed_8k_says_it_is_decimal(argv):
    """``--seq-len 8k --global-batch-tokens 16Mi`` was refused as "16777216 is not a multiple of --seq-len 8000" with
    no word on why 8k read 8,000: the line now says what 8k and 8Ki are (16Mi = 2,048 x 8,192 = 16,777,216; 8,192
    divides it, 8,000 does not)."""
    res = runner.invoke(app, [*argv, "--seq-len", "8k", "--global-batch-tokens", "16Mi"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: --global-batch-tokens 16,777,216 is not a multiple of --seq-len 8,000 (8k is 8,000; 8Ki is 8 x 2**10)"
    )
    res = runner.invoke(app, [*argv, "--seq-len", "8Ki", "--global-batch-tokens", "16Mi", "--json"])
    assert "not a multiple" not in res.output


def test_cluster_defer_with_a_zero_sched_interval_is_refused():
    """``cluster simulate --defer --sched-interval 0`` ran with no scheduler pass at submission and none periodic: on
    64 H100 with 20 jobs, utilisation 0.0 and every job's queueing delay about 12.6 million s (146 days, each job
    started by a later repair) against 0-12,600 s without ``--defer``. Refused now, naming both flags."""
    argv = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "20", "--defer"]
    res = runner.invoke(app, [*argv, "--sched-interval", "0"])
    assert res.exit_code == 2 and res.stderr.strip().startswith("error: --sched-interval 0 with --defer: no pass")
    res = runner.invoke(app, [*argv, "--sched-interval", "30", "--json"])
    assert res.exit_code == 0, res.output


def test_infer_json_carries_the_gpus_bought_the_table_shows():
    """``infer --qps 100`` of Llama 3.1 70B on GB200 NVL72 printed "GPUs bought 23 -> 72 (1 whole unit of 72)" in
    its table, while ``--json`` had only ``gpus: 23``, where ``tco``, ``compare`` and ``size`` carry
    ``gpus_bought``: now the JSON does too (23 GPUs are one 72-GPU rack: ceil(23 / 72) x 72 = 72; on 8-GPU
    servers ceil(G / 8) x 8)."""
    argv = ["infer", "--model", "llama3.1-70b", "--input-tokens", "2000", "--output-tokens", "500", "--dtype", "fp8"]
    slo = ["--qps", "100", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50", "--json"]
    res = runner.invoke(app, [*argv, "--system", "gb200-nvl72", *slo])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["gpus_bought"] == -(-d["gpus"] // 72) * 72 and d["gpus_bought"] % 72 == 0  # 23 -> 72 today
    res = runner.invoke(app, [*argv, "--system", "hgx-h100-ib-ndr", *slo])
    d = json.loads(res.stdout)
    assert d["gpus_bought"] == -(-d["gpus"] // 8) * 8 and d["gpus_bought"] >= d["gpus"]


_SIZE = ["size", "--model", "llama3.1-8b", "--tokens", "1e9", "--deadline-days", "30", "--system", "hgx-h100-ib-ndr"]


@pytest.mark.parametrize("typed", ["1.5 billion", "1.5e9USD", "1.5Gi", "300Mi"])
def test_budget_usd_refuses_what_is_not_an_amount_of_dollars(typed):
    """``size --budget-usd 1.5Gi`` was read as 1.5 x 2**30 = $1.61B (the binary suffixes are for token counts),
    and ``--budget-usd '1.5 billion'`` was refused with the token count's message (``cannot read count``, listing
    Ki, Mi, Gi, Ti): an amount's own line now, with the forms it takes."""
    res = runner.invoke(app, [*_SIZE, "--budget-usd", typed])
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: hnplan size: Invalid value for '--budget-usd': cannot read amount {typed!r}: expected US dollars "
        "as a number, optionally after $ and with k, M, B or T ($1.5B, 300M, 1.5e9); see 'hnplan size --help'"
    )


def test_budget_usd_negative_says_the_bound_without_a_unit_hint():
    """``--budget-usd -1.5B`` said "count must be a non-negative finite number" (a budget is not a count); with the
    bound's line it also got "--budget-usd is in USD: give the number alone", wrong for a value that was read."""
    for typed in ("-5", "-1.5B"):
        res = runner.invoke(app, [*_SIZE, "--budget-usd", typed])
        assert res.exit_code == 2 and res.stderr.strip() == (
            f"error: hnplan size: Invalid value for '--budget-usd': must be at least 1; got {typed}; "
            "see 'hnplan size --help'"
        )
    res = runner.invoke(app, [*_SIZE, "--budget-usd", "$1.5B", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["budget_usd"] == 1.5e9
