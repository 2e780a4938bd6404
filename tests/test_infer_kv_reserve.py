"""``hnplan infer --kv-reserve``: the KV cache a sequence in flight holds against memory, ``full`` (``I + O``,
the default) or ``mean`` (``I + O/2``, a paged cache's average), as the MLPerf Server rows are predicted."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning.inference import (
    Replica,
    max_batch,
    operating_point,
    predict,
    reserved_context_tokens,
    resolve,
    steady_state,
)
from hnplan.planning.inference.measurements import measurements

runner = CliRunner()
SERVER_B200 = "mlperf-v4.1-llama2-70b-dgx-b200-ib-ndr-fp4-server"


def _row(row_id):
    return next(m for m in measurements() if m.id == row_id)


def _args(m, *extra):
    return [
        "infer",
        *("--model", m.model, "--system", m.system, "--tp", str(m.tp), "--dtype", m.dtype),
        *("--engine", m.engine, "--batch", str(m.batch)),
        *("--input-tokens", f"{m.input_tokens:g}", "--output-tokens", f"{m.output_tokens:g}"),
        *extra,
    ]


def test_reserved_context_hand_values():
    # the MLPerf Llama 2 70B Server shape: 389-token prompts, 274 output tokens per sample on the B200 log
    assert reserved_context_tokens(389, 274) == 389 + 274 == 663
    assert reserved_context_tokens(389, 274, "mean") == 389 + 274 / 2 == 526.0
    with pytest.raises(InputError, match="kv_reserve must be one of full, mean; got 'half'"):
        reserved_context_tokens(389, 274, "half")


def test_mlperf_b200_server_row_reproduced_with_mean_reserve():
    # the row: one TP1 B200 in FP4 holding 1,412 sequences in flight (Little's law on its log); its prediction
    # sizes the KV cache at I + O/2, which `infer --kv-reserve mean` now does: the same tokens/s, to rounding
    m = _row(SERVER_B200)
    assert (m.tp, m.batch, m.input_tokens, m.output_tokens, m.dtype) == (1, 1412, 389, 274, "fp4")
    res = runner.invoke(app, _args(m, "--kv-reserve", "mean", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["kv_reserve"] == "mean" and out["batch"] == 1412 and out["gpus"] == 1
    assert out["tokens_per_s"] == pytest.approx(predict(m), rel=1e-12)
    assert out["tokens_per_s_per_gpu"] == pytest.approx(predict(m), rel=1e-12)
    # the batch the cache holds at 526 tokens a sequence: more than at 663, and at least the 1,412 run
    s = resolve(m.model, m.system, Replica(tp=1, dtype="fp4", engine=m.engine))
    assert out["max_batch"] == max_batch(s, 526.0) >= 1412 > max_batch(s, 663)


def test_default_reserve_unchanged_and_refuses_the_server_batch():
    m = _row(SERVER_B200)
    res = runner.invoke(app, _args(m))  # the worst case, I + O = 663 tokens a sequence: 1,412 do not fit
    assert res.exit_code == 3 and "Traceback" not in res.output
    s = resolve(m.model, m.system, Replica(tp=1, dtype="fp4", engine=m.engine))
    fit = max_batch(s, 663)
    assert f"exceeds the {fit:,} sequences of 663 tokens that fit the KV cache" in " ".join(res.output.split())
    # at a batch that fits, the default and an explicit `full` are the steady state at steady_state's own
    # default, I + O held per sequence
    args = [a if a != "1412" else "1024" for a in _args(m, "--json")]
    default, full = (runner.invoke(app, args + extra) for extra in ([], ["--kv-reserve", "full"]))
    assert default.exit_code == 0 and full.exit_code == 0, default.output + full.output
    d, f = json.loads(default.output), json.loads(full.output)
    assert d == f and d["kv_reserve"] == "full" and d["max_batch"] == fit
    assert d["tokens_per_s"] == pytest.approx(steady_state(s, 1024, 389, 274).tokens_per_s, rel=1e-12)


def test_mean_reserve_lets_the_throughput_point_grow():
    # property: holding less KV per sequence never shrinks the batch that fits, nor the best throughput
    cat = load_catalog()
    kw = dict(replica=Replica(tp=1, dtype="fp8"), catalog=cat)
    full = operating_point("llama3.1-8b", "hgx-h100-ib-ndr", 1000, 2000, **kw)
    mean = operating_point("llama3.1-8b", "hgx-h100-ib-ndr", 1000, 2000, kv_reserve="mean", **kw)
    assert full["kv_reserve"] == "full" and mean["kv_reserve"] == "mean"
    assert mean["max_batch"] > full["max_batch"]
    assert mean["tokens_per_s"] >= full["tokens_per_s"]
    with pytest.raises(InputError, match="kv_reserve"):
        operating_point("llama3.1-8b", "hgx-h100-ib-ndr", 1000, 2000, kv_reserve="p99", **kw)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--kv-reserve", "half"], "--kv-reserve must be one of full, mean; got 'half'"),
        (
            ["--kv-reserve", "mean", "--qps", "5", "--ttft-slo-ms", "2000", "--tpot-slo-ms", "100"],
            "--kv-reserve mean applies without --qps and --score-latency-ms",
        ),
    ],
)
def test_bad_kv_reserve_is_one_line_exit_2(extra, message):
    base = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "1000", "--tp", "1"]
    res = runner.invoke(app, base + extra)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert message in " ".join(res.output.split())
    assert len(res.output.strip().splitlines()) == 1, res.output
