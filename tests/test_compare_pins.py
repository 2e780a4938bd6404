"""``hnplan compare`` with the plan pinned (``--tp --pp --dp --cp --ep --etp --microbatch-size --virtual-stages
--recompute --zero``, as ``hnplan train`` takes them): each design searched with the pins fixed and the rest
searched, its step time that of ``hnplan train`` with the same pins, a design without a plan that holds them kept
with the reason, bad pins refused before any design is planned, and the pins part of the prediction cache's key."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.errors import InputError
from hnplan.planning import compare, prediction_cache

runner = CliRunner()
# Qwen3-30B-A3B (128 experts) on 64 GPUs of two designs at 4,096 tokens x 1,024 sequences per step
JOB = ["--model", "qwen3-30b-a3b", "--gpus", "64", "--seq-len", "4096", "--global-batch-tokens", "4194304"]
SYSTEMS = ["hgx-h100-ib-ndr", "gb200-nvl72"]
PINS = ["--ep", "8", "--tp", "1"]


@pytest.fixture(scope="module")
def pinned() -> dict:
    res = runner.invoke(app, ["compare", *JOB, "--tokens", "1e11", "--systems", ",".join(SYSTEMS), *PINS, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_plans_hold_the_pins_and_the_json_and_verdict_say_them(pinned):
    assert pinned["fixed"] == {"tp": 1, "ep": 8}
    assert [d["system"] for d in pinned["designs"]] == SYSTEMS
    for d in pinned["designs"]:
        assert d["status"].startswith("ok") and (d["ep"], d["tp"]) == (8, 1)
    assert pinned["verdict"].startswith("Plans pinned to TP 1, EP 8 on every design, the other knobs searched.")
    assert pinned["verdict"].count("pinned") == 1


@pytest.mark.parametrize("system", SYSTEMS)
def test_each_design_s_plan_is_train_s_with_the_same_pins(pinned, system):
    """The same job through `hnplan train` with the same pins: the same plan and step time, to the last bit (the
    GB200 design trains on 64 of its 72 GPUs, the count compare reports)."""
    d = next(d for d in pinned["designs"] if d["system"] == system)
    res = runner.invoke(app, ["train", *JOB, "--system", system, *PINS, "--json"])
    assert res.exit_code == 0, res.output
    t = json.loads(res.stdout)
    p = t["parallel"]
    assert d["gpus"] == 64
    assert d["step_time_s"] == t["step_time_s"] and d["mfu"] == t["mfu"]
    assert [d[k] for k in ("tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "recompute")] == [
        p[k] for k in ("tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "recompute")
    ]


def test_without_pins_the_json_says_so():
    argv = ["compare", *JOB, "--tokens", "1e11", "--systems", "hgx-h100-ib-ndr", "--no-trust", "--json"]
    out = json.loads(runner.invoke(app, argv).stdout)
    assert out["fixed"] == {} and "pinned" not in out["verdict"]


def test_a_pin_no_plan_of_one_design_holds_leaves_the_other_planned():
    """Llama 3.1 8B with its plan pinned whole but for DP (TP 1, PP 1, micro-batches of 2, no recomputation, ZeRO
    0): 145.5 GiB per GPU, over the H100's 80 GB and within the B200's HBM. The H100 design keeps its row with why,
    in one phrase; the B200 design is planned with the pins."""
    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "64", "--tokens", "1e11", "--seq-len", "8192"]
    argv += ["--global-batch-tokens", "4Mi", "--systems", "hgx-h100-ib-ndr,hgx-b200-ib-xdr", "--no-trust"]
    argv += ["--tp", "1", "--pp", "1", "--recompute", "none", "--zero", "0", "--microbatch-size", "2"]
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    h100, b200 = out["designs"]
    assert h100["status"].startswith("no plan: no plan of llama3.1-8b on 64 GPUs fits in memory")
    assert "\n" not in h100["status"] and "Traceback" not in res.output
    assert b200["status"] == "ok" and (b200["tp"], b200["pp"], b200["microbatch_size"]) == (1, 1, 2)
    assert b200["recompute"] == "none" and b200["dp"] * b200["cp"] == 64
    assert out["fixed"] == {"tp": 1, "pp": 1, "microbatch_size": 2, "recompute": "none", "zero_stage": 0}
    assert "Plans pinned to TP 1, PP 1, micro-batch size 2, recompute none, ZeRO 0" in out["verdict"]
    table = runner.invoke(app, argv, env={"COLUMNS": "400"})
    assert table.exit_code == 0 and "Plans pinned to TP 1, PP 1" in table.stdout


def test_a_pin_no_count_holds_is_each_design_s_status_and_exit_3():
    """DP 5 divides none of the counts weighed (144 GPUs, 128 of two NVL72 racks): no design runs, exit 3, one line
    naming each design and the rule, as train says it."""
    argv = ["compare", "--model", "llama3.1-70b", "--gpus", "144", "--tokens", "1e11", "--seq-len", "4096"]
    argv += ["--global-batch-tokens", "4Mi", "--systems", "hgx-h100-ib-ndr,gb200-nvl72", "--no-trust", "--dp", "5"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 3
    assert res.stderr.strip().splitlines() == [
        "infeasible: hgx-h100-ib-ndr: dp 5 does not divide --gpus 144; gb200-nvl72: dp 5 does not divide --gpus 144"
    ]


def test_a_pin_on_the_rack_s_other_count_holds_there():
    """DP 16 x TP 8 = 128 does not divide 144 GPUs but divides 64 of each of two 72-GPU racks: the count asked for
    has no plan and the pinned plan is made on 128 GPUs, said in the status."""
    argv = ["compare", "--model", "llama3.1-70b", "--gpus", "144", "--tokens", "1e11", "--seq-len", "4096"]
    argv += ["--global-batch-tokens", "4Mi", "--systems", "gb200-nvl72", "--no-trust", "--dp", "16", "--tp", "8"]
    out = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    (d,) = out["designs"]
    assert (d["gpus"], d["gpus_bought"], d["dp"], d["tp"]) == (128, 144, 16, 8)
    assert d["status"] == "ok; 128 of 144 GPUs bought train (the 144 asked for have no plan)"


@pytest.mark.parametrize(
    "pins, message",
    [
        (["--recompute", "bogus"], "error: --recompute must be one of none, selective, full; got 'bogus'"),
        (["--ep", "8"], "error: --ep 8: llama3.1-8b is a dense model, with no experts to split; drop --ep"),
        (["--tp", "0"], "error: hnplan {cmd}: Invalid value for '--tp': Input should be greater than or equal to 1; "),
        (["--zero", "4"], "error: hnplan {cmd}: Invalid value for '--zero': Input should be less than or equal to 3;"),
    ],
)
def test_a_bad_pin_is_refused_in_one_line_exit_2_as_train_refuses_it(pins, message):
    common = ["--model", "llama3.1-8b", "--gpus", "64", *pins]
    for cmd, argv in (
        ("compare", ["compare", *common, "--tokens", "1e11", "--systems", "hgx-h100-ib-ndr"]),
        ("train", ["train", *common, "--system", "hgx-h100-ib-ndr"]),
    ):
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, (cmd, res.output)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message.format(cmd=cmd)), (cmd, lines)


def test_the_planner_checks_the_pins_before_any_design():
    assert compare.check_pins({"ep": 8.0, "tp": 1, "cp": None, "recompute": "full"}) == {
        "tp": 1,
        "ep": 8,
        "recompute": "full",
    }
    args = ("llama3.1-8b", ["hgx-h100-ib-ndr"], 8, 1e10, 4096, 64)
    for bad, said in (
        ({"pipeline": 2}, "unknown plan fields ['pipeline']"),
        ({"tp": 0}, "tp must be a whole number of at least 1; got 0"),
        ({"dp": 2.5}, "dp must be a whole number of at least 1; got 2.5"),
        ({"recompute": "some"}, "recompute must be one of none, selective, full; got 'some'"),
        ({"zero_stage": 4}, "zero stage must be one of 0, 1, 2, 3; got 4"),
    ):
        with pytest.raises(InputError, match=said.replace("[", r"\[").replace("]", r"\]")):
            compare.compare_design_rows(*args, fixed=bad)


def test_the_pins_are_part_of_the_cache_key(tmp_path, monkeypatch):
    """An unpinned comparison fills the cache first; a pinned one of the same job then plans its own best plan (a
    miss, another entry) rather than reading the unpinned one back, and reads its own back the second time."""
    monkeypatch.setenv("HNPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("HNPLAN_NO_CACHE", raising=False)
    prediction_cache._POINTS.clear()
    cat = load_catalog()
    args = ("llama3.1-8b", ["hgx-h100-ib-ndr"], 16, 1e10, 4096, 64)
    planned: list[str] = []
    real = prediction_cache.cached_point

    def spy(digest, catalog, plan):
        def counted():
            planned.append(digest)
            return plan()

        return real(digest, catalog, counted)

    monkeypatch.setattr(prediction_cache, "cached_point", spy)
    (free,) = compare.compare_design_rows(*args, catalog=cat)
    assert free["tp"] == 1 and len(planned) == 1  # the unpinned best plan: TP 1 (DP 16)
    (pinned,) = compare.compare_design_rows(*args, catalog=cat, fixed={"tp": 2})
    assert len(planned) == 2 and planned[0] != planned[1]  # a miss: planned anew under its own digest
    assert pinned["tp"] == 2 and pinned["step_time_s"] > free["step_time_s"]
    prediction_cache._POINTS.clear()  # from the file this time
    assert compare.compare_design_rows(*args, catalog=cat, fixed={"tp": 2}) == [pinned]
    assert compare.compare_design_rows(*args, catalog=cat) == [free]
    assert len(planned) == 2  # both read back
    rows = json.loads((tmp_path / prediction_cache.POINTS_FILE_NAME).read_text())["rows"]
    assert set(planned) <= set(rows) and len(rows) == 2
    # the key is the pins' values, not their order or a None left in
    cat_entries = (cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr"), cat.stack("megatron-core"))  # the default
    digest = lambda pins: prediction_cache.point_digest(  # noqa: E731
        "compare", *cat_entries, 16, 4096, 64, "bf16", "none", compare.pins_key(compare.check_pins(pins))
    )
    assert digest({"tp": 2, "ep": 1}) == digest({"ep": 1, "tp": 2.0, "pp": None}) != digest({"tp": 2})
    # pinning the knob the search chose is still a key of its own (its plan equal to the unpinned one's)
    assert digest({}) == digest(None) == planned[0] != digest({"tp": 1})
    assert digest({"tp": 2}) == planned[1]


def test_a_scenario_s_bad_pin_is_refused_before_the_notebook_runs():
    from hnplan.errors import ScenarioError
    from hnplan.report_context import check_ids

    check_ids("design_comparison", {"fixed": {"ep": 8, "tp": 1}}, "s.yaml")
    with pytest.raises(ScenarioError) as err:
        check_ids("design_comparison", {"fixed": {"recompute": "most"}}, "s.yaml")
    assert str(err.value) == (
        "s.yaml: notebook 'design_comparison', parameter 'fixed': recompute must be one of none, selective, full; "
        "got 'most'"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpus": 0}, "gpus must be a whole number >= 1; got 0"),
        ({"gpus": "64"}, "gpus must be a whole number >= 1; got '64'"),
        ({"gpus": 64.5}, "gpus must be a whole number >= 1; got 64.5"),
        ({"tokens": float("nan")}, "tokens must be a finite number > 0; got nan"),
        ({"tokens": -1e12}, "tokens must be a finite number > 0; got -1000000000000.0"),
        ({"dtype": "fp9"}, "dtype must be one of bf16, fp8, fp4; got 'fp9'"),
    ],
)
def test_the_python_api_refuses_what_the_command_line_refuses(change, message):
    """compare_training_designs is the design comparison notebook's and a user's own notebook's entry: bad numbers
    raise one InputError naming the argument before anything is planned, as hnplan compare's options refuse them,
    where they raised ZeroDivisionError or TypeError, or planned fp9 as bf16 and nan tokens as 'nan days'."""
    from hnplan.errors import CatalogError, InputError
    from hnplan.planning.compare import compare_training_designs

    args = dict(model="llama3.1-8b", systems=["hgx-h100-ib-ndr"], gpus=64, tokens=1e11, seq_len=8192)
    with pytest.raises(InputError) as err:
        compare_training_designs(**{**args, "global_batch_seqs": 128, **change})
    assert str(err.value) == message
    with pytest.raises(CatalogError, match="unknown model id 'llama3-405b'"):  # as an unknown system raises
        compare_training_designs(**{**args, "model": "llama3-405b", "global_batch_seqs": 128})
    one = compare_training_designs(**{**args, "systems": "hgx-h100-ib-ndr", "global_batch_seqs": 128})
    assert list(one["system"]) == ["hgx-h100-ib-ndr"]  # one id, not its characters
