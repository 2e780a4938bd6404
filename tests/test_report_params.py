"""``hnplan report --params``: the user's own files by relative path, numbers as YAML writes them, ranges checked
before any notebook runs, and a params run in its own folder under its own title (issue 17)."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.errors import ScenarioError
from hnplan.reports import check_parameters, params_run_name, resolve_paths

runner = CliRunner()

SMALL = dict(
    model="llama3.1-8b", mode="inference", systems=["gb200-nvl72", "hgx-h100-ib-ndr"], seq_len=8192, tp=1, batch=64
)


def test_relative_paths_resolve_against_the_callers_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = resolve_paths(
        {"model": "./dense1t.yaml", "systems": ["gb200-nvl72", "sys/rack.yaml"], "gpus": 8, "dtype": "bf16/x"}
    )
    assert got["model"] == str(tmp_path / "dense1t.yaml")
    assert got["systems"] == ["gb200-nvl72", str(tmp_path / "sys" / "rack.yaml")]
    assert got["gpus"] == 8 and got["dtype"] == "bf16/x"  # not a catalog reference: left alone


def test_numbers_as_yaml_writes_them():
    got = check_parameters(
        "design_comparison", {"tokens": "1e12", "gpus": 144.0, "global_batch_tokens": "2_048"}, "p.yaml"
    )
    assert got == {"tokens": 1e12, "gpus": 144, "global_batch_tokens": 2048}
    assert isinstance(got["gpus"], int)


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("gpus", -5, "'gpus': must be a positive number; got -5"),
        ("gpus", 0, "'gpus': must be a positive number; got 0"),
        ("tokens", float("inf"), "'tokens': must be a finite number; got inf"),
        ("gpus", True, "'gpus': expected int"),
        # an empty design list ran both notebooks into a KeyError (exit 1) instead of exit 2 before any ran
        ("systems", [], "'systems': an empty list; give at least one value like its default"),
        # a count the command line refuses (hnplan size --tokens): the report read 1.8e28 days to train
        ("tokens", 1e40, "'tokens': must be at most 1e+18 (3,000 times all public human text); got 1e+40"),
    ],
)
def test_ranges_checked(key, value, needle):
    with pytest.raises(ScenarioError, match=re.escape("p.yaml: notebook 'design_comparison', parameter " + needle)):
        check_parameters("design_comparison", {key: value}, "p.yaml")


def test_typo_in_a_parameter_names_the_nearest():
    # each unknown parameter is named once, with its nearest (it read "has no parameter(s) ['gpu']: 'gpu' (did ...")
    with pytest.raises(ScenarioError, match=r"has no parameter 'gpu' \(did you mean 'gpus'\?\); its parameters"):
        check_parameters("design_comparison", {"gpu": 144}, "p.yaml")
    with pytest.raises(ScenarioError, match=r"has no parameters 'gpu' \(did you mean 'gpus'\?\), 'zzz'; its"):
        check_parameters("design_comparison", {"gpu": 144, "zzz": 1}, "p.yaml")


def test_list_elements_checked():
    with pytest.raises(ScenarioError, match="'scaling_gpus': must be a positive number; got 0"):
        check_parameters("training_plan", {"scaling_gpus": [1152, 0]}, "p.yaml")


def test_the_sizing_notebooks_stack_is_checked_like_the_other_ids():
    """``stack`` (hardware_sizing, as ``hnplan size --stack``) names a catalog stack: a typo names the nearest
    ids; None leaves the planner's defaults."""
    from hnplan.report_context import check_ids

    check_ids("hardware_sizing", {"stack": None, "model": "llama3.1-8b"}, "p.yaml")
    check_ids("hardware_sizing", {"stack": "pytorch-eager"}, "p.yaml")
    with pytest.raises(ScenarioError, match=r"p.yaml: notebook 'hardware_sizing', parameter 'stack': .*megatron-core"):
        check_ids("hardware_sizing", {"stack": "megatron-cor"}, "p.yaml")
    assert check_parameters("hardware_sizing", {"stack": "pytorch-eager"}, "p.yaml") == {"stack": "pytorch-eager"}


def test_params_run_name():
    sc = load_catalog().scenario("default")
    run_id, title = params_run_name(sc, {"model": "/home/me/dense1t.yaml", "gpus": 4096, "tokens": 1e12}, "dense1t")
    assert run_id == "default+dense1t"
    assert title == "default with dense1t: model=dense1t.yaml, gpus=4096, tokens=1T"


@pytest.mark.notebook
def test_params_run_with_a_relative_model_file(tmp_path, monkeypatch):
    """`model: ./mine.yaml` from the caller's folder reaches the notebook, which runs in notebooks/; the run
    writes to OUT/<scenario>+<params>/ and index.html shows its own title; the scenario's report is untouched."""
    monkeypatch.chdir(tmp_path)
    cat = load_catalog()
    model = yaml.safe_load(cat.path_of("models", "llama3.1-8b").read_text())
    model["id"] = "my-8b"
    Path("mine.yaml").write_text(yaml.safe_dump(model))
    Path("sc.yaml").write_text(
        yaml.safe_dump(
            {"id": "mem", "name": "Memory, small", "notebooks": [{"notebook": "memory", "parameters": SMALL}]}
        )
    )
    out = tmp_path / "out"
    (out / "mem").mkdir(parents=True)
    (out / "mem" / "memory.html").write_text("the scenario's own report")
    Path("mine-params.yaml").write_text("model: ./mine.yaml\nseq_len: 4.096e3\n")
    res = runner.invoke(app, ["report", "--scenario", "./sc.yaml", "--params", "mine-params.yaml", "--out", "out"])
    assert res.exit_code == 0, res.output
    html = (out / "mem+mine-params" / "memory.html").read_text()
    assert 'id="key-table"' in html
    assert (out / "mem" / "memory.html").read_text() == "the scenario's own report"
    rows = json.loads((out / "index.json").read_text())
    row = next(r for r in rows if r["scenario"] == "mem+mine-params")
    assert row["title"] == "mem with mine-params: model=mine.yaml, seq_len=4096"
    assert "mem with mine-params: model=mine.yaml" in (out / "index.html").read_text()
    assert os.getcwd() == str(tmp_path)


def test_a_design_listed_twice_is_refused():
    """Two rows of one design made the verdict read "the slowest, gb200-nvl72, takes 1.00x as long"."""
    from hnplan.reports import check_ids

    with pytest.raises(
        ScenarioError, match="p.yaml: notebook 'design_comparison', parameter 'systems': lists gb200-nvl72 twice"
    ):
        check_ids("design_comparison", {"systems": ["gb200-nvl72", "hgx-h100-ib-ndr", "gb200-nvl72"]}, "p.yaml")


def test_a_copy_that_kept_a_catalog_id_beside_it_is_refused(tmp_path):
    """A system file copied from the catalog without a new id, listed beside the original: both rows read
    hgx-h100-ib-ndr in the table and the verdict, though their numbers differ."""
    from hnplan.reports import check_ids

    copy = tmp_path / "copy.yaml"
    copy.write_text((load_catalog().root / "systems" / "hgx-h100-ib-ndr.yaml").read_text())
    with pytest.raises(
        ScenarioError,
        match=f"p.yaml: notebook 'design_comparison', parameter 'systems': {copy} and hgx-h100-ib-ndr are both "
        "'hgx-h100-ib-ndr'; give each its own id",
    ):
        check_ids("design_comparison", {"systems": [str(copy), "gb200-nvl72", "hgx-h100-ib-ndr"]}, "p.yaml")


def test_the_token_bound_is_the_command_line_s():
    """``hnplan size`` writes the bound out (its --help imports no catalog schema); the two agree."""
    from hnplan.catalog.schemas.workload import MAX_TRAINING_TOKENS
    from hnplan.cli.size_cmd import MAX_TRAINING_TOKENS as CLI_MAX

    assert CLI_MAX == MAX_TRAINING_TOKENS == 1e18


@pytest.mark.parametrize("value,expected", [(0.85, 0.85), ("0.85", 0.85), (1, 1), ("simulated", "simulated")])
def test_a_parameter_with_a_type_comment_takes_each_of_its_types(value, expected):
    # procurement_whatif's utilisation is "simulated", a number or None (papermill's type comment says so):
    # a number was refused as "expected str like its default"
    assert check_parameters("procurement_whatif", {"utilisation": value}, "p.yaml") == {"utilisation": expected}


@pytest.mark.parametrize(
    "value,needle",
    [
        (1.5, "parameter 'utilisation': utilisation must be <= 1; got 1.5"),  # the what-if input's own range
        (0, "utilisation must be > 0; got 0"),
        ([0.5], "expected one of str, float, None, got list [0.5]"),
        (True, "expected one of str, float, None, got bool True"),
        # a misspelt word ran the notebook into the planner's error (exit 1); the planner's own check, before any
        (
            "simualted",
            "parameter 'utilisation': utilisation must be a number in (0, 1] or 'simulated'; got 'simualted'",
        ),
        ("85%", "utilisation must be a number in (0, 1] or 'simulated' (85 % is 0.85); got '85%'"),
    ],
)
def test_a_parameter_with_a_type_comment_refuses_the_rest(value, needle):
    with pytest.raises(ScenarioError, match=re.escape(needle)):
        check_parameters("procurement_whatif", {"utilisation": value}, "p.yaml")


def test_a_sweep_spec_and_its_dataset_resolve_against_the_callers_folder(tmp_path, monkeypatch):
    # the design_space notebook runs in notebooks/: `dataset: mine` read and wrote notebooks/mine, and
    # `spec: ./mine.yaml` was not found there (the notebook failed, exit 1, after the others ran)
    monkeypatch.chdir(tmp_path)
    got = resolve_paths({"spec": "./mine.yaml", "dataset": "mine", "deadline_days": 10.0})
    assert got == {"spec": str(tmp_path / "mine.yaml"), "dataset": str(tmp_path / "mine"), "deadline_days": 10.0}
    assert resolve_paths({"spec": "example", "dataset": ""}) == {"spec": "example", "dataset": ""}  # id, default


def test_a_mistyped_sweep_spec_is_refused_before_any_notebook_runs():
    from hnplan.reports import check_ids

    with pytest.raises(ScenarioError, match=r"p.yaml: notebook 'design_space', parameter 'spec': unknown sweep spec "):
        check_ids("design_space", {"spec": "exampel"}, "p.yaml")
    check_ids("design_space", {"spec": "example"}, "p.yaml")


def test_a_probability_above_one_is_refused_before_the_notebook_runs():
    # design_space's probability: 1.5 passed the check (positive like its default) and failed in the notebook
    with pytest.raises(ScenarioError, match=r"parameter 'probability': must be at most 1 \(a probability\); got 1.5"):
        check_parameters("design_space", {"probability": 1.5}, "p.yaml")
    assert check_parameters("design_space", {"probability": 1}, "p.yaml") == {"probability": 1.0}


def test_a_misspelt_utilisation_word_is_refused_before_any_notebook_runs(tmp_path, monkeypatch):
    """`utilisation: simualted` in --params ran the procurement notebook into the planner's error (exit 1); the
    parameter check refuses it in one line, exit 2, and no report folder is written."""
    monkeypatch.chdir(tmp_path)
    Path("p.yaml").write_text("utilisation: simualted\n")
    res = runner.invoke(app, ["report", "--scenario", "procurement", "--params", "p.yaml", "--out", "out"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert "parameter 'utilisation': utilisation must be a number in (0, 1] or 'simulated'; got 'simualted'" in (
        res.stderr
    )
    assert not list((tmp_path / "out").rglob("*.html"))


@pytest.mark.parametrize(
    ("notebook", "params", "needle"),
    [
        # each ran its notebook into an error (exit 1), dtype and engine into a KeyError on a missing column
        ("inference_capacity", {"dtype": "fp7"}, "'dtype': dtype must be one of bf16, fp8, int8, fp4; got 'fp7'"),
        ("inference_capacity", {"engine": "nope"}, "'engine': unknown engine id 'nope'"),
        ("hardware_sizing", {"mode": "weird"}, "'mode': mode must be one of sync, async; got 'weird'"),
        ("cluster_operations", {"policies": ["best-fit", "nope"]}, "'policies': policies must be one of first-fit"),
        ("cluster_operations", {"mix": "nosuchmix"}, "'mix': unknown cluster mix id 'nosuchmix'; valid ids: default"),
        # a mistyped system key was ignored unsaid: the design served at the default dtype / engine
        ("inference_capacity", {"system_dtypes": {"cloudmatrix-38": "int8"}}, "unknown system id 'cloudmatrix-38'"),
        ("inference_capacity", {"system_dtypes": {"cloudmatrix-384": "int4"}}, "cloudmatrix-384's dtype must be one"),
        ("inference_capacity", {"system_engines": {"cloudmatrix-384": "cm-infer"}}, "unknown engine id 'cm-infer'"),
    ],
)
def test_fixed_choices_engines_mixes_and_system_maps_are_checked_before_any_notebook_runs(notebook, params, needle):
    from hnplan.reports import check_ids

    with pytest.raises(ScenarioError, match=re.escape(f"p.yaml: notebook {notebook!r}, parameter ") + ".*"):
        check_ids(notebook, params, "p.yaml")
    with pytest.raises(ScenarioError) as err:
        check_ids(notebook, params, "p.yaml")
    assert needle in str(err.value)


def test_the_values_the_scenarios_use_still_pass():
    from hnplan.reports import check_ids

    check_ids(
        "inference_capacity",
        {
            "dtype": "fp8",
            "engine": None,
            "system_dtypes": {"cloudmatrix-384": "int8"},
            "system_engines": {"cloudmatrix-384": "cloudmatrix-infer"},
        },
        "p.yaml",
    )
    check_ids("cluster_operations", {"mix": "default", "policies": ["topology-aware", "best-fit"]}, "p.yaml")
    check_ids("memory", {"mode": "train", "dtype": "bf16"}, "p.yaml")
    check_ids("design_comparison", {"dtype": "fp8"}, "p.yaml")


def test_the_fragmentation_maps_moment_is_a_fraction_of_the_window():
    # map_at: 2 (a moment past the window's end) passed the check and the notebook ran its simulations with it
    with pytest.raises(ScenarioError, match=r"parameter 'map_at': must be at most 1 \(a fraction of the arrival"):
        check_parameters("cluster_operations", {"map_at": 2}, "p.yaml")
    assert check_parameters("cluster_operations", {"map_at": 1}, "p.yaml") == {"map_at": 1.0}


def test_a_cluster_of_part_of_a_scale_up_domain_is_refused_before_the_simulations():
    # gpus: 100 drew jobs capped at 100 GPUs, which tp = 8 does not divide: the notebook failed, exit 1;
    # hnplan cluster simulate takes whole domains. GB200 NVL72 (72) and HGX H100 (8): multiples of lcm = 72
    from hnplan.reports import check_fabric

    p = {"gpus": 100, "systems": ["gb200-nvl72", "hgx-h100-ib-ndr"]}
    with pytest.raises(ScenarioError) as err:
        check_fabric("cluster_operations", p, "p.yaml")
    assert str(err.value) == (
        "p.yaml: notebook 'cluster_operations', parameter 'gpus': 100 GPUs are not whole scale-up domains "
        "(gb200-nvl72's 72-GPU domains, hgx-h100-ib-ndr's 8-GPU domains); give a multiple of 72, such as 72 or 144"
    )
    check_fabric("cluster_operations", {"gpus": 144}, "p.yaml")  # the defaults' designs, two racks
    check_fabric("cluster_operations", {"gpus": 104, "systems": ["hgx-h100-ib-ndr"]}, "p.yaml")  # 13 servers


def test_sequences_past_the_models_context_are_refused_before_any_notebook_runs():
    # a 2,000,000-token prompt on Llama 3.1 70B (max_seq 131,072) was served at a 937 s TTFT; hnplan infer refuses it
    from hnplan.reports import check_context

    with pytest.raises(ScenarioError) as err:
        check_context("inference_capacity", {"model": "llama3.1-70b", "input_tokens": 2_000_000}, "p.yaml")
    assert str(err.value) == (
        "p.yaml: notebook 'inference_capacity', parameter 'input_tokens' + 'output_tokens': 2,000,500 tokens "
        "exceed llama3.1-70b's maximum sequence length 131,072 (field max_seq)"  # 500 output tokens: the default
    )
    with pytest.raises(ScenarioError, match=r"parameter 'seq_len': 262,144 tokens exceed llama3.1-8b's maximum"):
        check_context("memory", {"model": "llama3.1-8b", "seq_len": 262_144}, "p.yaml")
    check_context("inference_capacity", {"model": "llama3.1-70b", "input_tokens": 130_000, "output_tokens": 1_072}, "p")


def test_a_sizing_deadline_takes_fractions_of_a_day():
    # deadline_days: 7.5 was refused ("expected int like its default 14"), where hnplan size --deadline-days is a float
    assert check_parameters("hardware_sizing", {"deadline_days": 7.5}, "p.yaml") == {"deadline_days": 7.5}
    assert check_parameters("hardware_sizing", {"deadline_days": 60}, "p.yaml") == {"deadline_days": 60}


@pytest.mark.parametrize(
    ("notebook", "key", "value"),
    [
        ("inference_capacity", "tpot_slo_ms", 12.5),
        ("inference_capacity", "ttft_slo_ms", 250.5),
        ("procurement_whatif", "deadline_days", 45.5),
    ],
)
def test_slos_and_deadlines_take_fractions(notebook, key, value):
    # each was refused as "expected int like its default" (50 ms, 1000 ms, 30 days), where the command line takes floats
    assert check_parameters(notebook, {key: value}, "p.yaml") == {key: value}


def test_a_cluster_runs_jobs_are_bounded_as_the_simulation_bounds_them():
    # n_jobs: 1e8 passed the check and failed in the notebook (exit 1) on the simulation's own bound
    from hnplan.cluster.jobs import MAX_JOBS

    with pytest.raises(ScenarioError, match=r"parameter 'n_jobs': must be at most 1e\+06 \(the jobs a cluster run"):
        check_parameters("cluster_operations", {"n_jobs": 100_000_000}, "p.yaml")
    assert check_parameters("cluster_operations", {"n_jobs": MAX_JOBS}, "p.yaml") == {"n_jobs": MAX_JOBS}


def test_monte_carlo_samples_are_bounded_before_any_notebook_runs(tmp_path, monkeypatch):
    """`n_samples: 100000000` ran procurement_whatif's Monte Carlo for about ten hours (0.35 ms per sample, one
    cost evaluation each); the parameter check refuses it in one line, exit 2, and no report folder is written."""
    with pytest.raises(ScenarioError, match=r"parameter 'n_samples': must be at most 100000"):
        check_parameters("procurement_whatif", {"n_samples": 100_000_000}, "p.yaml")
    monkeypatch.chdir(tmp_path)
    Path("ns.yaml").write_text("n_samples: 100000000\n")
    args = ["report", "--scenario", "procurement", "--only", "procurement_whatif", "--params", "ns.yaml"]
    res = runner.invoke(app, [*args, "--out", "out"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert "parameter 'n_samples': must be at most 100000 (the Monte Carlo samples" in res.stderr
    assert not list((tmp_path / "out").rglob("*.html"))
    assert check_parameters("procurement_whatif", {"n_samples": 100_000}, "p.yaml") == {"n_samples": 100_000}


def test_a_cluster_report_that_would_simulate_too_many_jobs_is_refused_before_it_runs():
    # cluster_operations with offered_load 3 ran for minutes with nothing shown: with `days` the draw grows with
    # load x days (30 days at load 3 on 1,152 GPUs: ~228,000 jobs, on 2 designs x 2 policies ~911,000 simulated)
    from hnplan.report_context import MAX_REPORT_CLUSTER_JOBS
    from hnplan.reports import check_cluster_jobs

    assert MAX_REPORT_CLUSTER_JOBS == 400_000
    with pytest.raises(ScenarioError) as err:
        check_cluster_jobs("cluster_operations", {"days": 30, "offered_load": 3}, "p.yaml")
    msg = str(err.value)
    assert msg.startswith("p.yaml: notebook 'cluster_operations', parameter 'days': ")
    simulated = int(msg.split(": ")[2].split(" jobs")[0].replace(",", ""))
    assert 850_000 < simulated < 980_000  # 4 runs of ~228,000 (a Poisson draw of 227,795 at seed 0)
    # the largest days: 400,000 / 4 runs / ~7,600 jobs a day ~ 13 days
    days_max = float(msg.rsplit("days at most ", 1)[1].split(" ")[0])
    assert 12 < days_max < 14.5
    # n_jobs: 10,000 x 4 runs passes; 200,000 x 4 does not (load does not change the count)
    check_cluster_jobs("cluster_operations", {"offered_load": 3}, "p.yaml")
    check_cluster_jobs("cluster_operations", {"days": 30}, "p.yaml")  # ~64,600 jobs at the mix's load: 258,000
    with pytest.raises(ScenarioError, match=r"parameter 'n_jobs': 800,000 jobs to simulate \(200,000 on each of 4"):
        check_cluster_jobs("cluster_operations", {"n_jobs": 200_000}, "p.yaml")
    # one design and one policy: 30 days at load 3 are one run of ~228,000
    check_cluster_jobs(
        "cluster_operations",
        {"days": 30, "offered_load": 3, "systems": ["hgx-h100-ib-ndr"], "policies": ["best-fit"]},
        "p.yaml",
    )


def test_every_none_default_parameter_declares_its_types():
    """A parameter whose default is None says what else it takes (papermill's ``# type:`` comment): without one
    the checks cannot type it, and ``days: thirty`` in cluster_operations failed inside the notebook with a
    TypeError (exit 1) instead of one line naming the parameter (exit 2)."""
    from hnplan.report_params import NOTEBOOK_DIR, notebook_parameters

    untyped = [
        f"{nb.stem}.{k}"
        for nb in sorted(NOTEBOOK_DIR.glob("*.ipynb"))
        for k, v in notebook_parameters(nb.stem).items()
        if v["default"] == "None" and "types" not in v
    ]
    assert untyped == []


def test_days_typed_wrong_is_one_line_naming_it():
    from hnplan.errors import ScenarioError
    from hnplan.report_params import check_parameters

    with pytest.raises(ScenarioError, match=r"parameter 'days': expected one of float, None, got str 'thirty'"):
        check_parameters("cluster_operations", {"days": "thirty"}, "p.yaml")


def test_report_job_limit_is_the_cluster_simulations():
    """report_params keeps the cluster run's job limit as a literal (importing hnplan.cluster.jobs pulls numpy into
    a re-run with nothing to do); it must stay the simulation's own MAX_JOBS."""
    from hnplan.cluster.jobs import MAX_JOBS
    from hnplan.report_params import _MAXIMA

    assert _MAXIMA["n_jobs"][0] == MAX_JOBS
