"""`hnplan collective` and `hnplan topology`: --help smoke tests, JSON keys and values."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()


@pytest.mark.parametrize("cmd", ["collective", "topology"])
def test_help(cmd):
    r = runner.invoke(app, [cmd, "--help"])
    assert r.exit_code == 0 and "--system" in r.output and "--json" in r.output


def test_collective_json_sweep():
    r = runner.invoke(
        app,
        [
            "collective",
            "--system",
            "hgx-h100-ib-ndr",
            "--op",
            "allreduce",
            "--gpus",
            "8",
            "--sweep",
            "8B:8GiB",
            "--algorithm",
            "ring",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    rows = d["results"]
    assert len(rows) == 31  # 8 B .. 8 GiB doubling, as nccl-tests -b 8 -e 8G -f 2
    assert set(rows[0]) == {"size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algorithm"}
    assert rows[-1]["size_bytes"] == 8 * 2**30 and rows[-1]["algorithm"] == "ring"
    assert rows[-1]["busbw_GBps"] == pytest.approx(369, abs=1.5)
    assert rows[-1]["busbw_GBps"] == pytest.approx(rows[-1]["algbw_GBps"] * 2 * 7 / 8)


def test_collective_one_size_table():
    r = runner.invoke(
        app, ["collective", "--system", "gb200-nvl72", "--op", "alltoall", "--gpus", "72", "--size", "1GiB"]
    )
    assert r.exit_code == 0 and "pairwise" in r.output and "1073741824" in r.output


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--op", "allreduce", "--gpus", "8"], "exactly one of --size and --sweep"),
        (["--op", "gather", "--gpus", "8", "--size", "1GiB"], "--op must be one of allreduce, reducescatter"),
        (["--op", "allreduce", "--gpus", "12", "--size", "1GiB", "--algorithm", "rhd"], "does not apply"),
        (["--op", "allreduce", "--gpus", "8", "--sweep", "8GiB:8B"], "MIN <= MAX"),
        (["--op", "allreduce", "--gpus", "8", "--sweep", "1e400:1e401"], "not a finite number of bytes"),
        # a lower-case b is a bit: 1Gb was read as 1 GB, 8x the bytes meant
        (["--op", "allreduce", "--gpus", "8", "--size", "8Gb"], "write 8GB for bytes, or 1GB for 8 Gbits"),
        (["--op", "allreduce", "--gpus", "8", "--sweep", "8b:1GiB"], "a lower-case b is a bit"),
    ],
)
def test_collective_errors(args, msg):
    r = runner.invoke(app, ["collective", "--system", "hgx-h100-ib-ndr", *args])
    assert r.exit_code == 2 and msg in r.output


def test_topology_json():
    r = runner.invoke(app, ["topology", "--system", "hgx-h100-ib-ndr", "--gpus", "16384", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {"tiers", "switches", "links", "transceivers", "cables", "bisection_GBps", "diameter_hops"} <= set(d)
    assert d["tiers"]["scaleout"] == 3 and d["switches"]["scaleout"] == 1280
    assert d["bisection_GBps"] == pytest.approx(16384 / 2 * 50)  # 8,192 NICs of 50 GB/s across the cut
    assert d["diameter_hops"] == 6
    assert d["hosts_supported"] == 64**3 // 4 // 8  # servers of 8 NICs a 64-port 3-tier tree holds


@pytest.mark.parametrize(
    "args,header",
    [
        (
            ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "16", "--size", "1MiB"],
            "time [us]",
        ),
        (
            ["roofline", "--accelerator", "h100-sxm", "--model", "llama3.1-8b", "--phase", "decode"]
            + ["--seq-len", "1024", "--batch", "8"],
            "time each [us]",
        ),
        (
            ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--tokens", "1e11"]
            + ["--deadline-days", "10"],
            "slack [days]",
        ),
    ],
)
def test_units_in_table_headers_survive_rich_markup(args, header):
    # rich reads a lowercase "[us]" or "[days]" as a style tag and drops it unless escaped
    r = runner.invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    assert header in r.stdout


def test_collective_sweep_beyond_a_gpus_memory_is_refused():
    # 8B:1e30 was accepted: 97 doublings up to 6.3e29 B, a message no GPU's memory holds (the catalog's largest: 288 GB)
    r = runner.invoke(
        app, ["collective", "--system", "hgx-h100-ib-ndr", "--op", "allreduce", "--gpus", "8", "--sweep", "8B:1e30"]
    )
    assert r.exit_code == 2 and "Traceback" not in r.output
    msg = " ".join(r.output.split())
    assert "--sweep '8B:1e30': MAX 1e+30 bytes exceeds 1 TiB" in msg and "write MAX as 1TiB or less" in msg
    ok = runner.invoke(
        app,
        [
            "collective",
            "--system",
            "hgx-h100-ib-ndr",
            "--op",
            "allreduce",
            "--gpus",
            "8",
            "--sweep",
            "8B:1TiB",
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    sizes = [row["size_bytes"] for row in json.loads(ok.output)["results"]]
    assert len(sizes) == 38 and sizes[-1] == 2**40  # 8 B = 2**3 to 2**40: 38 doublings' points
