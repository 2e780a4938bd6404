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
