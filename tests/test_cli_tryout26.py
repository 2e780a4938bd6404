"""What a try-out of hnplan as a new infrastructure architect found: a mistyped catalog kind, tiny and unmeetable
latency bounds, a job that never fails, malformed GEMM shapes and nccl-tests sweeps given as folders."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


KINDS_LISTED = "accelerators, interconnects, switches, systems, models, stacks, storage, engines, scenarios"


# -- catalog list of an unknown kind ------------------------------------------------------------------------------


def test_catalog_list_of_an_unknown_kind_names_every_listable_kind_and_the_nearest():
    """``catalog list scenarioz`` answered with the eight catalog kinds but not ``scenarios``, the kind meant and
    one the command lists; now every kind it lists, and the closest when one is close."""
    res = runner.invoke(app, ["catalog", "list", "scenarioz"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        f"error: unknown catalog kind 'scenarioz'; allowed: {KINDS_LISTED} (did you mean scenarios?)"
    )
    res = runner.invoke(app, ["catalog", "list", "nosuch", "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"]["message"] == f"unknown catalog kind 'nosuch'; allowed: {KINDS_LISTED}"
    res = runner.invoke(app, ["catalog", "schema", "sytems"])  # the schemas are of the eight catalog kinds
    assert res.exit_code == 2 and one_line(res.stderr).endswith("storage, engines (did you mean systems?)")


# -- infer --score-latency-ms: the bound as typed ------------------------------------------------------------------

INFER = ["infer", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2k"]


def test_an_unmeetable_scoring_bound_is_written_as_typed_with_the_least_latency():
    """``--score-latency-ms 1e-9`` was refused as "takes longer than half the 0.0 ms bound": a bound of zero, which
    the flag refuses. The bound is now written as typed, beside what one request takes at the least (the
    message of the planner, which a larger bound then meets)."""
    res = runner.invoke(app, [*INFER, "--score-latency-ms", "1e-9", "--json"])
    assert res.exit_code == 3
    message = json.loads(res.stdout)["error"]["message"]
    assert "more than half the 1e-9 ms bound" in message and "0.0 ms" not in message
    least_ms = float(message.split(" takes ")[1].split(" ms at the least")[0])
    assert 1 < least_ms < 100  # one 2,000-token pass of an 8B model on H100s: milliseconds
    for typed in ("0.25", "3"):
        res = runner.invoke(app, [*INFER, "--score-latency-ms", typed])
        assert res.exit_code == 3 and f"more than half the {typed} ms bound" in one_line(res.stderr)
    res = runner.invoke(app, [*INFER, "--score-latency-ms", f"{2.5 * least_ms:.6g}", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["latency_s"] <= 2.5 * least_ms / 1e3
