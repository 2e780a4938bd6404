"""What a new capacity planner's trial of the CLI found: each a CLI run asserting the exit code and the one-line
message."""

import json

from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

_TRAIN = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr"]
_SIM = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace"]
_TRACE_TAIL = "a trace is a CSV (hnplan's job table, Alibaba openb, Helios or Acme) or Philly's JSON job log"


def test_a_whole_number_option_with_a_thousands_separator_is_told_the_number_to_type():
    """``--gpus 16,384`` said only "Input should be a valid integer"; count options (``--tokens``) read
    ``16,777,216``, but a whole-number option is a plain int, so the message now names the flag and the number
    to type. ``16,38`` (no thousands grouping) keeps the plain message."""
    res = runner.invoke(app, [*_TRAIN, "--gpus", "16,384"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: hnplan train: Invalid value for '--gpus': Input should be a valid integer, unable to parse string "
        "as an integer; got '16,384'; --gpus takes no thousands separator: use 16384; see 'hnplan train --help'"
    )
    res = runner.invoke(app, ["tco", "--system", "gb200-nvl72", "--gpus", "9,216"])
    assert res.exit_code == 2 and "; --gpus takes no thousands separator: use 9216; see 'hnplan tco --help'" in (
        res.stderr
    )
    res = runner.invoke(app, [*_TRAIN, "--gpus", "16,38"])
    assert res.exit_code == 2 and "thousands" not in res.stderr and "got '16,38'; see" in res.stderr


def test_catalog_show_an_unknown_id_names_the_closest_ids_of_all_kinds_or_the_kinds():
    """``catalog show nosuch`` answered "nearest switch ids: nvswitch3" (a 0.53 difflib match), read as a
    suggestion; the closest ids are now sought over the whole catalog (cutoff 0.6, the id in lower case) with
    their kinds, and with none that close the line lists the kinds and how to list their ids."""
    res = runner.invoke(app, ["catalog", "show", "nosuch"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "error: no catalog entry 'nosuch' of any kind, and no id close to it; kinds: accelerators, interconnects, "
        "switches, systems, models, stacks, storage, engines, scenarios (list one's ids with 'hnplan catalog list KIND')"
    )
    res = runner.invoke(app, ["catalog", "show", "llama-70b"])
    assert res.exit_code == 2
    assert " ".join(res.stderr.split()) == (
        "error: no catalog entry 'llama-70b' of any kind; closest ids: llama2-70b (models), llama2-7b (models), "
        "llama3.1-70b (models)"
    )
    res = runner.invoke(app, ["catalog", "show", "H100-SXM"])  # an id in another case is that id (Catalog.resolve_id)
    assert res.exit_code == 0 and res.stdout.splitlines()[:2] == ["accelerators: h100-sxm", "id: h100-sxm"]


def test_virtual_stages_at_pp_1_is_told_it_needs_pp_above_1_once():
    """``--pp 1 --virtual-stages 4`` said "needs pp > 1 and micro-batches (32) divisible by pp (1)": 32 divides
    by 1, so the second half read as a second, false reason. The rule is two now; at pp 1 only the first speaks,
    and the micro-batch rule still holds at pp 4 (a 48-sequence batch over dp 16: 3 micro-batches of 1)."""
    res = runner.invoke(app, [*_TRAIN, "--gpus", "64", "--pp", "1", "--virtual-stages", "4"])
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert res.stderr.strip() == (
        "infeasible: interleaved schedule (virtual_stages 4) needs pipeline parallelism pp > 1; got pp 1 (one "
        "stage has nothing to interleave: give --virtual-stages 1 or a --pp above 1)"
    )
    argv = ["--gpus", "64", "--pp", "4", "--virtual-stages", "2", "--dp", "16", "--tp", "1"]
    res = runner.invoke(app, [*_TRAIN, *argv, "--microbatch-size", "1", "--global-batch-size", "48"])
    assert res.exit_code == 3
    assert res.stderr.strip() == (
        "infeasible: interleaved schedule (virtual_stages 2) needs the micro-batches (3) divisible by pp (4)"
    )


def test_a_binary_trace_is_said_to_be_no_trace_not_missing_columns(tmp_path):
    """A binary file whose bytes happened to decode as UTF-8 was read as a CSV and answered "missing column(s)
    arrival_s, gpus, ...": a file with a NUL byte, a Parquet file (hnplan reads no Parquet trace), a compressed
    one or UTF-16 text is now named for what it is (exit 2)."""
    blob = tmp_path / "jobs.dat"
    blob.write_bytes(b"\x00\x01\x02abc\x00\n\x05\x06\n")
    res = runner.invoke(app, [*_SIM, str(blob)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert " ".join(res.stderr.split()) == (
        f"error: {blob}: not a CSV file: binary data, not text (a NUL byte at byte 0); " + _TRACE_TAIL
    )
    for raw, kind in (
        (b"PAR1\x15\x04\x15", "a Parquet file (it starts with PAR1): export it as CSV"),
        (b"\x1f\x8b\x08\x00", "a compressed archive (gzip, zip, bz2, xz or zstd): decompress it first"),
        ("arrival_s,gpus\n".encode("utf-16"), "UTF-16 text: save it as UTF-8 CSV"),
        (b"arrival_s,gpus\n\xbf\xbf,8\n", "binary data, not UTF-8 text (byte 15 is 0xbf)"),
    ):
        blob.write_bytes(raw)
        res = runner.invoke(app, [*_SIM, str(blob)])
        assert res.exit_code == 2 and f"{blob}: not a CSV file: {kind}; a trace is" in " ".join(res.stderr.split())


def test_size_takes_systems_and_compare_takes_system_as_aliases():
    """``size --system`` and ``compare --systems`` both take a list; each now also takes the other's spelling,
    the old one unchanged."""
    for cmd, flag, rows in (("size", "--systems", "results"), ("compare", "--system", "designs")):
        argv = [cmd, "--model", "llama3.1-8b", "--tokens", "1T", "--gpus", "64", flag, "hgx-h100-ib-ndr,gb200-nvl72"]
        res = runner.invoke(app, [*argv, "--json"])
        assert res.exit_code == 0, res.output
        assert [r["system"] for r in json.loads(res.stdout)[rows]] == ["hgx-h100-ib-ndr", "gb200-nvl72"]


def test_a_negative_count_is_told_its_bound_as_zero_is():
    """``size --tokens 0`` said "must be at least 1" but ``--tokens -1T`` "count must be a non-negative finite
    number", as though 0 were allowed; a negative count now gets the bound's line too (``--budget-usd`` did)."""
    size = ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--tokens"]
    for typed in ("-1T", "-5", "-1e3"):
        res = runner.invoke(app, [*size, typed])
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert res.stderr.strip() == (
            f"error: hnplan size: Invalid value for '--tokens': must be at least 1; got {typed}; "
            "see 'hnplan size --help'"
        )
    res = runner.invoke(app, [*size, "-abc"])  # not a number at all: the forms a count takes
    assert res.exit_code == 2 and "cannot read count '-abc'" in res.stderr


def test_catalog_kinds_are_read_in_any_case():
    """``catalog list Systems`` was "unknown catalog kind 'Systems'" while ``system`` (singular) was read; a
    kind is now read in any case, for list, show --kind and schema."""
    res = runner.invoke(app, ["catalog", "list", "Systems", "--json"])
    assert res.exit_code == 0 and list(json.loads(res.stdout)) == ["systems"]
    res = runner.invoke(app, ["catalog", "list", "Scenarios", "--json"])
    assert res.exit_code == 0 and list(json.loads(res.stdout)) == ["scenarios"]
    res = runner.invoke(app, ["catalog", "show", "gb200-nvl72", "--kind", "System", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["systems"]["id"] == "gb200-nvl72"
    res = runner.invoke(app, ["catalog", "list", "nosuch"])
    assert res.exit_code == 2 and "unknown catalog kind 'nosuch'; allowed: accelerators, " in res.stderr
