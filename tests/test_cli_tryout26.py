"""What a try-out of hnplan as a new infrastructure architect found: a mistyped catalog kind, tiny and unmeetable
latency bounds, a job that never fails, malformed GEMM shapes and nccl-tests sweeps given as folders."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hnplan.cli import app

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


KINDS_LISTED = (
    "accelerators, interconnects, switches, systems, models, stacks, storage, engines, scenarios, cluster_mixes, prices"
)


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


# -- infer --qps: an unmeetable TTFT bound names the best TTFT ------------------------------------------------------

RATE = ["infer", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--input-tokens", "2k"]
RATE += ["--output-tokens", "200", "--qps", "100", "--tpot-slo-ms", "50"]


def best_ttft_ms(message: str) -> float:
    return float(message.split("best TTFT ")[1].split(" ms without queueing")[0].replace(",", ""))


def test_an_unmeetable_ttft_bound_names_the_best_ttft_within_the_tpot_bound():
    """``--qps 100 --ttft-slo-ms 20 --tpot-slo-ms 50`` was refused naming only the best TPOT reached (12.1 ms, well
    within its bound), which left the TTFT that failed unsaid. The message now names the least TTFT of the
    configurations within the TPOT bound, without queueing: more replicas shorten the wait, never the pass, so
    no plan beats it, and a bound just above it is met (by many replicas)."""
    res = runner.invoke(app, [*RATE, "--ttft-slo-ms", "20", "--json"])
    assert res.exit_code == 3
    message = json.loads(res.stdout)["error"]["message"]
    assert "best TPOT reached 12.1 ms" in message
    best = best_ttft_ms(message)
    assert 20 < best < 200  # a 2,000-token prefill of a 70B model on eight H100s: about a tenth of a second
    res = runner.invoke(app, [*RATE, "--ttft-slo-ms", f"{best * 1.02:.6g}", "--json"])
    assert res.exit_code == 0, res.stderr
    assert best / 1e3 <= json.loads(res.stdout)["ttft_s"] <= best * 1.02 / 1e3
    res = runner.invoke(app, [*RATE, "--ttft-slo-ms", "20", "--disaggregate"])  # a prefill pool's pass and transfer
    assert res.exit_code == 3 and 20 < best_ttft_ms(one_line(res.stderr)) < 200


def test_an_unmeetable_tpot_bound_says_no_ttft():
    """When no configuration is within the TPOT bound, the best TPOT alone is named (no TTFT of nothing)."""
    res = runner.invoke(app, [*RATE[:-1], "1", "--ttft-slo-ms", "500"])
    assert res.exit_code == 3
    assert "(best TPOT reached " in res.stderr and "best TTFT" not in res.stderr


# -- reliability --rate-factor 0: never ------------------------------------------------------------------------------

RELIABILITY = ["reliability", "--system", "gb200-nvl72", "--gpus", "1024", "--model", "llama3.1-70b"]


def rows(text: str) -> dict[str, str]:
    """The reliability table's rows, label -> value (a value folded over lines joined)."""
    out: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")] if "│" in line else []
        if len(cells) == 2:
            key = cells[0] or key
            if key:
                out[key] = f"{out.get(key, '')} {cells[1]}".strip()
    return out


def test_no_failures_print_never_not_inf():
    """``--rate-factor 0`` (no failures) printed "inf h" between interruptions and a checkpoint interval of
    "inf s"; the JSON's were already null. Both now read never."""
    res = runner.invoke(app, [*RELIABILITY, "--rate-factor", "0"])
    assert res.exit_code == 0, res.stderr
    table = rows(res.stdout)
    assert table["mean time between interruptions"] == "never (0 per day incl. planned)"
    assert table["checkpoint interval"].startswith("never: no interruptions to lose work to (the storage bound is")
    assert "inf" not in res.stdout and "nan" not in res.stdout
    d = json.loads(runner.invoke(app, [*RELIABILITY, "--rate-factor", "0", "--json"]).stdout)
    assert d["mtbi_s"] is d["mtbi_h"] is d["checkpoint_interval_s"] is None and d["goodput"] == 1.0


def test_a_tiny_rate_factor_prints_an_exponent_not_three_hundred_digits():
    """``--rate-factor 1e-300`` wrote the hours between interruptions and the interval with every one of their
    300 digits; beyond 1e15 they now take an exponent."""
    res = runner.invoke(app, [*RELIABILITY, "--rate-factor", "1e-300"])
    assert res.exit_code == 0, res.stderr
    table = rows(res.stdout)
    assert table["mean time between interruptions"].startswith("4.57e+301 h (")
    assert table["checkpoint interval"].startswith("3.76e+151 s (Daly 2006")
    assert max(len(line) for line in res.stdout.splitlines()) < 200


# -- gemm --shapes-json and calibrate --collectives: malformed input, one line -----------------------------------

GEMM = ["gemm", "--accelerator", "h100-sxm", "--shapes-json"]


def test_malformed_shapes_json_is_one_line_naming_the_flag():
    """Malformed JSON, an element of the wrong shape or type: one line naming --shapes-json, exit 2. An element is
    written as JSON writes it (``[true, 1, 2, 3]`` was ``[True, 1, 2, 3]``, ``NaN`` was ``nan``), and an empty
    value, which a path reads as the current folder, was ``.: Is a directory`` without the flag."""
    cases = {
        '[["bf16", 1, 2': "error: --shapes-json: not valid JSON (Expecting ',' delimiter at character 14)",
        '[["bf16", 1, 2]]': 'error: --shapes-json: item 0 is ["bf16", 1, 2]; expected a 4-item list (dtype, m, n, '
        "k) with positive integer sizes",
        "[[true, 1, 2, 3]]": "error: --shapes-json: item 0 is [true, 1, 2, 3]; expected a 4-item list",
        '[["bf16", NaN, 2, 3]]': 'error: --shapes-json: item 0 is ["bf16", NaN, 2, 3]; expected a 4-item list',
        '{"m": 1}': "error: --shapes-json: expected a list of 4-item lists (dtype, m, n, k)",
        "": 'error: --shapes-json is empty; give JSON text ([["bf16", m, n, k], ...]) or a file path',
    }
    for given, said in cases.items():
        res = runner.invoke(app, [*GEMM, given])
        assert res.exit_code == 2, (given, res.stdout)
        assert one_line(res.stderr).startswith(said) and len(res.stderr.strip().splitlines()) == 1, res.stderr


RUNS = Path(__file__).parents[1] / "docs" / "examples" / "calibration_runs.yaml"
CALIBRATE = ["calibrate", "--runs", str(RUNS), "--stack", "megatron-core"]


def test_a_collectives_folder_missing_or_empty_path_is_one_line(tmp_path):
    """``calibrate --collectives DIR`` said "cannot read as a CSV text file ([Errno 21] Is a directory: 'DIR')" and
    ``--collectives ''`` said ": file not found" with neither flag nor file; now one line as a YAML file's is, before
    any fit, exit 2."""
    out = ["--out", str(tmp_path / "cal") + "/"]
    for given, said in (
        (str(tmp_path), f"error: --collectives: {tmp_path}: is a folder, expected a CSV file"),
        (str(tmp_path / "nope.csv"), f"error: --collectives: {tmp_path / 'nope.csv'}: file not found"),
        ("", "error: --collectives is empty; give the path of an nccl-tests sweep CSV file"),
    ):
        res = runner.invoke(app, [*CALIBRATE, "--collectives", given, *out])
        assert res.exit_code == 2 and one_line(res.stderr) == said, res.stderr
    binary = tmp_path / "sweep.csv"
    binary.write_bytes(b"\xff\xfe op,gpus")
    res = runner.invoke(app, [*CALIBRATE, "--collectives", str(binary), *out])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        f"error: --collectives: {binary}: not a UTF-8 text file (byte 0: invalid start byte); expected CSV"
    )
    assert not (tmp_path / "cal").exists()  # refused before the fit wrote anything


# -- further findings ------------------------------------------------------------------------------------------------


def test_tco_unknown_mix_names_the_flag(tmp_path):
    """``tco --utilisation simulated --mix defualt`` said "unknown cluster mix id 'defualt'; nearest: default" with
    no flag, where ``cluster simulate --mix defualt`` names it; both now do, before any simulation."""
    argv = ["tco", "--system", "gb200-nvl72", "--gpus", "72", "--utilisation", "simulated", "--mix"]
    res = runner.invoke(app, [*argv, "defualt"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == "error: --mix: unknown cluster mix id 'defualt'; nearest: default"
    res = runner.invoke(app, [*argv, str(tmp_path)])
    assert res.exit_code == 2 and one_line(res.stderr) == f"error: --mix: {tmp_path}: is a folder, expected a YAML file"


def test_catalog_show_takes_the_scenarios_catalog_list_lists(tmp_path):
    """``catalog list`` lists scenarios, but ``catalog show default`` said "no catalog entry 'default' of any kind",
    ``--kind scenarios`` was an unknown kind, and a scenario file was read as a software stack with unknown keys
    (description, notebooks). A scenario id (any case) or file is now shown as the scenario; a near id is offered."""
    res = runner.invoke(app, ["catalog", "show", "default"])
    assert res.exit_code == 0 and res.stdout.splitlines()[:2] == ["scenarios: default", "id: default"]
    res = runner.invoke(app, ["catalog", "show", "Procurement", "--kind", "scenario", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["scenarios"]["id"] == "procurement"
    copy = tmp_path / "mine.yaml"
    copy.write_text((Path(__file__).parents[1] / "data" / "scenarios" / "audit.yaml").read_text())
    res = runner.invoke(app, ["catalog", "show", str(copy)])
    assert res.exit_code == 0 and res.stdout.startswith("scenarios: audit")
    res = runner.invoke(app, ["catalog", "show", "procurment"])
    assert res.exit_code == 2
    assert (
        one_line(res.stderr) == "error: no catalog entry 'procurment' of any kind; closest ids: procurement (scenarios)"
    )
    res = runner.invoke(app, ["catalog", "show", "procurment", "--kind", "scenarios"])
    assert res.exit_code == 2 and one_line(res.stderr) == "error: unknown scenario 'procurment'; nearest: procurement"
    res = runner.invoke(app, ["catalog", "show", "h100-sxm", "--kind", "scenarioz"])
    # show takes every kind catalog list lists (cluster mixes and prices since a later tryout)
    assert res.exit_code == 2 and one_line(res.stderr).endswith(f"{KINDS_LISTED} (did you mean scenarios?)")


def test_scoring_takes_the_replica_flags_it_was_given():
    """``infer --score-latency-ms`` searched its layouts without --pp, --kv-dtype, --overlap, --engine,
    --gpu-memory-utilization and --kv-budget-gib (unless --tp was given): ``--kv-budget-gib 0.1`` answered TP 1 at
    batch 2, two sequences of KV cache a 0.1 GiB budget cannot hold, and ``--pp 2`` answered PP 1. A layout whose
    cache holds no request (TP 1 here) is now passed over for one that does."""
    score = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2k"]
    score += ["--score-latency-ms", "1000", "--json"]
    free = json.loads(runner.invoke(app, score).stdout)
    assert (free["tp"], free["pp"], free["batch"]) == (1, 1, 2)
    res = runner.invoke(app, [*score, "--kv-budget-gib", "0.1"])
    assert res.exit_code == 0, res.stderr
    capped = json.loads(res.stdout)
    # 2,000 tokens of Llama 3.1 70B's KV cache (80 layers x 8 KV heads x 128 x 2 x 2 bytes) are 78 MiB on each
    # GPU from TP 8 (8 KV heads): one sequence in 0.1 GiB, none at TP 1 to 4
    assert (capped["tp"], capped["batch"]) == (8, 1)
    assert json.loads(runner.invoke(app, [*score, "--pp", "2"]).stdout)["pp"] == 2


def test_a_kv_budget_too_small_says_so():
    """``--kv-budget-gib 1e-9`` was "no replica layout of llama3.1-70b fits gb200-nvl72" (the weights fit), and with
    --qps "best TPOT reached inf ms over 0 candidates"; a sequence that does not fit the KV cache did not say by how
    much. Each now names the cache: what one sequence needs per GPU, what it holds and the flag that set it."""
    infer = ["infer", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--input-tokens", "2k"]
    rate = ["--qps", "1", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "100", "--output-tokens", "1"]
    for extra in ([], ["--score-latency-ms", "100"], rate):
        res = runner.invoke(app, [*infer, "--kv-budget-gib", "1e-9", *extra])
        assert res.exit_code == 3
        assert one_line(res.stderr) == (
            "infeasible: no replica layout of llama3.1-70b on gb200-nvl72 holds the KV cache of one token within "
            "--kv-budget-gib 1e-9 per GPU"
        )
    # 2,001 tokens x 80 layers x 1 KV head per GPU (8 over TP 8) x 128 x 2 (K, V) x 2 bytes = 78.2 MiB
    need = "it needs 78.16 MiB per GPU, the cache holds 51.2 MiB (--kv-budget-gib 0.05)"
    res = runner.invoke(app, [*infer, "--kv-budget-gib", "0.05", "--tp", "8"])
    assert res.exit_code == 3 and one_line(res.stderr) == (
        f"infeasible: one sequence of 2,001 tokens does not fit the KV cache of llama3.1-70b on gb200 with tp=8 ep=1 "
        f"pp=1: {need}"
    )
    res = runner.invoke(app, [*infer, "--kv-budget-gib", "0.05", *rate])
    assert res.exit_code == 3 and "inf ms" not in res.stderr
    assert one_line(res.stderr).startswith(
        "infeasible: no configuration of llama3.1-70b on gb200-nvl72 runs one batch:"
    )
    assert one_line(res.stderr).endswith(need)


def test_train_and_collective_name_gpus_beyond_one_fabric_as_the_other_commands_do():
    """``train --gpus 70000`` and ``collective --gpus 1000000`` said "70,000 GPUs of hgx-h100-ib-ndr need 70,000
    scale-out ports, more than ..." without the flag; tco, size, topology and reliability name it and the most one
    fabric joins, and so do these now (a 3-tier fat-tree of 64-port switches joins 64^3/4 = 65,536 ports)."""
    res = runner.invoke(app, ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "70000"])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: --gpus 70000 exceeds the 65,536 GPUs of hgx-h100-ib-ndr one scale-out fabric joins (a 3-tier "
        "fat-tree of 64-port qm9700 switches); give at most 65,536"
    )
    argv = ["collective", "--op", "all-reduce", "--system", "hgx-h100-ib-ndr", "--gpus", "70000", "--size", "1G"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2 and one_line(res.stderr).startswith("error: --gpus 70000 exceeds the 65,536 GPUs")


def test_memory_inference_refuses_the_training_plan_knobs_it_does_not_read():
    """``memory --mode inference --pp 8`` printed the same 135.78 GiB per GPU as without it: a serving replica's
    memory holds its weights over tp x ep, and --pp, --dp, --cp, --etp, the micro-batches, --virtual-stages,
    --zero and --recompute were dropped without a word (while --batch with --mode train is refused). Given with
    another value than the default they are now refused the same way; at the default they change nothing."""
    argv = ["memory", "--model", "llama3.1-70b", "--seq-len", "8k", "--mode", "inference"]
    res = runner.invoke(app, [*argv, "--pp", "8"])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: --pp applies to --mode train only; this is --mode inference (drop it, or give --mode train)"
    )
    res = runner.invoke(app, [*argv, "--dp", "8", "--zero", "3", "--recompute", "full"])
    assert res.exit_code == 2 and one_line(res.stderr).startswith(
        "error: --dp, --zero, --recompute apply to --mode train"
    )
    plain = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    same = json.loads(runner.invoke(app, [*argv, "--pp", "1", "--recompute", "none", "--json"]).stdout)
    assert plain["total_gib"] == same["total_gib"] > 0
    res = runner.invoke(app, ["memory", "--model", "llama3.1-70b", "--seq-len", "8k", "--pp", "8", "--zero", "3"])
    assert res.exit_code == 0, res.stderr  # train: read


def test_memory_kv_settings_without_a_system_are_refused():
    """``memory --mode inference --kv-budget-gib 10`` (or --gpu-memory-utilization) without --system printed the
    same table as without the flag: they size the KV cache within a system's HBM. Now refused; with --system read."""
    argv = ["memory", "--model", "llama3.1-70b", "--seq-len", "8k", "--mode", "inference"]
    for flag, value in (("--kv-budget-gib", "10"), ("--gpu-memory-utilization", "0.5")):
        res = runner.invoke(app, [*argv, flag, value])
        assert res.exit_code == 2 and one_line(res.stderr).startswith(f"error: {flag} applies with --system (")
    res = runner.invoke(app, [*argv, "--kv-budget-gib", "10", "--system", "gb200-nvl72", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["kv_capacity"]["max_batch_at_seq_len"] == 4


def test_reliability_refuses_storage_flags_it_would_not_read():
    """``reliability --storage-units 4`` on a system that names no storage, and ``--storage ... --write-GBps-per-node
    5`` (a per-node rate replaces the storage's figures), gave the same answer as without the flag. Refused now."""
    res = runner.invoke(app, [*RELIABILITY[:2], "hgx-h100-ib-ndr", *RELIABILITY[3:], "--storage-units", "4"])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: --storage-units counts units of a --storage, and hgx-h100-ib-ndr names none: give --storage too "
        "(ids: hnplan catalog list storage)"
    )
    res = runner.invoke(app, [*RELIABILITY, "--write-GBps-per-node", "5", "--storage", "ddn-ai400x2"])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: give one of --write-GBps-per-node and --storage: a write rate per node replaces the storage's figures"
    )
    res = runner.invoke(app, [*RELIABILITY, "--storage", "ddn-ai400x2", "--storage-units", "4", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["storage"]["units"] == 4


def test_a_planner_message_whose_value_ends_a_clause_names_the_flag():
    """``reliability --tokens-per-s 1e30`` said "tokens_per_s 1e+30: the data loader reads ..." with the parameter's
    name, as its value ends a clause; it now names the flag as typed."""
    res = runner.invoke(app, [*RELIABILITY, "--tokens-per-s", "1e30"])
    assert res.exit_code == 2
    assert one_line(res.stderr).startswith("error: --tokens-per-s 1e+30: the data loader reads 4e+21 GB/s of text")


def test_tco_writes_a_small_utilisation_as_given_not_as_0_percent():
    """``tco --utilisation 1e-300`` printed "$1.99e+300 at 0% utilisation" (and 0.001, a thousandfold cost, "0%");
    the share is now whole per cent only where that is exact."""
    argv = ["tco", "--system", "gb200-nvl72", "--gpus", "72", "--utilisation"]
    for given, said in (("1e-300", "at 1e-298% utilisation"), ("0.001", "at 0.1% utilisation"), ("0.7", "at 70% ")):
        res = runner.invoke(app, [*argv, given])
        assert res.exit_code == 0 and said in res.stdout, res.stdout


def test_report_only_a_mistyped_notebook_names_the_flag_and_the_nearest(tmp_path):
    """``report --only design_comparisn`` said "no scenario here runs notebook 'design_comparisn'" without the flag
    or the notebook meant; both now, before any folder is made."""
    res = runner.invoke(
        app, ["report", "--scenario", "default", "--only", "design_comparisn", "--out", str(tmp_path / "r")]
    )
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: --only: no scenario here runs notebook 'design_comparisn' (did you mean 'design_comparison'?); "
        "these run: design_comparison, training_plan"
    )
    assert not (tmp_path / "r").exists()


def test_a_chip_or_size_typed_for_an_id_suggests_the_ids_that_carry_it():
    """``--system h100`` listed all 18 system ids ("valid ids: cloudmatrix-384, ..."): no id is within difflib's
    0.5 of it, the ids being long. The ids holding it as one of their parts come first now, and ``--model 405b``
    names llama3.1-405b; ``--system b200`` named gb200-nvl72 and dgx-b300 but not the two B200 servers."""
    base = ["train", "--gpus", "8"]
    res = runner.invoke(app, [*base, "--model", "llama3.1-8b", "--system", "h100"])
    assert res.exit_code == 2 and one_line(res.stderr) == (
        "error: --system: unknown system id 'h100'; nearest: hgx-h100-ib-ndr, hgx-h100-roce-400g, "
        "hgx-h100-ib-ndr-800g-per-node"
    )
    res = runner.invoke(app, [*base, "--model", "llama3.1-8b", "--system", "b200"])
    assert one_line(res.stderr).startswith(
        "error: --system: unknown system id 'b200'; nearest: dgx-b200-ib-ndr, hgx-b200"
    )
    res = runner.invoke(app, [*base, "--model", "405b", "--system", "hgx-h100-ib-ndr"])
    assert one_line(res.stderr) == "error: --model: unknown model id '405b'; nearest: llama3.1-405b"


# -- an overlap flag with nothing to overlap; a deadline of a few microseconds ------------------------------------


def test_an_overlap_flag_without_the_parallelism_it_overlaps_is_refused():
    """``train --tp 1 --tp-overlap`` was accepted and changed nothing; now refused as bad input (exit 2), as is
    ``--ep 1 --ep-overlap``; ``--no-tp-overlap`` at TP 1 and ``--tp-overlap`` on a searched TP pass."""
    base = ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--gpus", "8"]
    res = runner.invoke(app, [*base, "--tp", "1", "--tp-overlap"])
    assert res.exit_code == 2
    assert one_line(res.stderr) == (
        "error: --tp-overlap with --tp 1: a plan without tensor parallelism has no TP collective to overlap; "
        "drop --tp-overlap or give --tp above 1"
    )
    moe = ["train", "--model", "qwen3-30b-a3b", "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--ep", "1"]
    res = runner.invoke(app, [*moe, "--ep-overlap"])
    assert res.exit_code == 2 and "--ep-overlap with --ep 1" in one_line(res.stderr)
    assert runner.invoke(app, [*base, "--tp", "1", "--no-tp-overlap", "--json"]).exit_code == 0


def test_a_tiny_deadline_reads_as_the_time_it_is():
    """``size --deadline-days 1e-9`` printed "within 1e-09 days"; the days are kept and the time they are added."""
    res = runner.invoke(
        app,
        ["size", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", "--deadline-days", "1e-9", "--tokens", "1T"],
    )
    assert "within 1e-09 days (86.4 us) needs at least" in one_line(res.stdout + res.stderr)


def test_a_catalog_kind_typed_as_a_command_points_to_list():
    """``catalog stacks`` answered "No such command 'stacks'" alone; the kind is now pointed to ``catalog list``."""
    res = runner.invoke(app, ["catalog", "stacks"])
    assert res.exit_code == 2
    assert "No such command 'stacks'. Did you mean 'list stacks'?" in one_line(res.stderr)
    res = runner.invoke(app, ["catalog", "system"])  # the singular too
    assert "Did you mean 'list systems'?" in one_line(res.stderr)


def test_compare_plans_hopper_in_bf16_under_an_mxfp8_stack():
    """``compare --stack megatron-bridge-2608-mxfp8 --dtype fp8`` with an H100 design answered "no plan: fp8 recipe
    mxfp8 needs Blackwell tensor cores", though compare plans a design whose GPU lacks the dtype in bf16; the same
    now holds for a recipe the GPU cannot run, said in its status and dtype."""
    from hnplan.planning.compare import compare_design_rows

    rows = compare_design_rows(
        "qwen3-30b-a3b",
        ["gb200-nvl72", "hgx-h100-ib-ndr"],
        gpus=16,
        tokens=1e12,
        seq_len=4096,
        global_batch_seqs=512,
        dtype="fp8",
        stack="megatron-bridge-2608-mxfp8",
    )
    by = {r["system"]: r for r in rows}
    assert by["hgx-h100-ib-ndr"]["status"].startswith("ok (fp8 recipe mxfp8 unavailable on h100-sxm: bf16)")
    assert by["hgx-h100-ib-ndr"]["dtype"] == "bf16" and by["gb200-nvl72"]["dtype"] == "fp8"


def test_an_expert_tensor_degree_that_cannot_divide_the_gpus_is_named():
    """``train --etp 3`` on 256 GPUs answered "ep x etp = 1 x 3 must divide tp x cp x dp = 256", naming an EP of 1
    the search had not fixed (the first candidate's); now the degree given and the GPUs, exit 3."""
    argv = ["train", "--model", "deepseek-v3", "--system", "dgx-b300", "--gpus", "256", "--etp", "3"]
    res = runner.invoke(app, [*argv, "--seq-len", "4096", "--global-batch-tokens", "16Mi"])
    assert res.exit_code == 3
    assert "etp 3 does not divide --gpus 256: the expert layers split the tp x cp x dp ranks" in one_line(res.stderr)


def test_train_says_when_the_gpus_are_part_of_the_units_bought():
    """``train --system gb300-nvl72 --gpus 256`` ran 256 GPUs of four 72-GPU racks without a word (``compare`` said
    "256 of 288 GPUs bought train"); the table now has the line and the JSON ``gpus_bought``."""
    argv = ["train", "--model", "llama3.1-8b", "--system", "gb300-nvl72", "--gpus", "256", "--tp", "1", "--pp", "1"]
    argv += ["--seq-len", "8192", "--global-batch-tokens", "16Mi"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0 and "256 -> 288 (4 whole units of 72); 256 train" in one_line(res.stdout)
    assert json.loads(runner.invoke(app, [*argv, "--json"]).stdout)["gpus_bought"] == 288


def test_the_stack_line_names_only_the_flags_that_change_its_choices():
    """``--no-ep-overlap`` on a stack whose ep_comm is already off labelled the stack "with overrides"; the line now
    names the choices a flag changed (``with ep_comm overridden``) and none when a flag repeats the stack's."""
    argv = ["train", "--model", "qwen3-30b-a3b", "--system", "dgx-b300", "--gpus", "16", "--tp", "1", "--pp", "1"]
    argv += ["--ep", "16", "--stack", "megatron-bridge-2608-mxfp8", "--seq-len", "4096", "--global-batch-tokens", "2Mi"]
    same = one_line(runner.invoke(app, [*argv, "--no-ep-overlap"]).stdout)
    assert "megatron-bridge-2608-mxfp8; GEMM efficiency" in same and "overrid" not in same
    changed = one_line(runner.invoke(app, [*argv, "--ep-overlap"]).stdout)
    assert "megatron-bridge-2608-mxfp8 with ep_comm overridden; GEMM efficiency" in changed


def test_a_runs_file_plan_that_does_not_make_its_gpus_is_bad_input(tmp_path):
    """A runs file whose stated plan multiplies to 256 GPUs for a run of 250 exited 3 (an infeasible plan); it is a
    typo in the file: exit 2, one line naming the file, the run and the product."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(
        "- id: typo\n  model: deepseek-v3\n  system: dgx-b300\n  gpus: 250\n  seq_len: 4096\n  global_batch_seqs: 2048\n"
        "  dtype: fp8\n  fixed: {tp: 1, pp: 4, dp: 64, cp: 1, ep: 32}\n  metric: tokens_per_s_per_gpu\n  published: 2900\n"
    )
    res = runner.invoke(app, ["calibrate", "--runs", str(runs), "--stack", "megatron-bridge-2608-mxfp8"])
    assert res.exit_code == 2
    assert "run typo: fixed: tp x pp x dp x cp = 1 x 4 x 64 x 1 = 256, not its gpus 250" in one_line(res.stderr)
