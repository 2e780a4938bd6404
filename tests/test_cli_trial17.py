"""What a new user's trial of the cluster simulation and the fabric-sized commands found: a TP group larger
than the design's scale-up domain run as smaller groups, a `;`-separated trace read as missing columns, a
`--gpus` past the fabric refused without naming the flag, the blocked-capacity row's wording without
backfill, two swapped docstrings, and failure rates measured on H100 given to other accelerators unsaid."""

import ast
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cluster.jobs import check_jobs
from hnplan.cluster.simulate import resolve_job_columns
from hnplan.cluster.traces import read_trace
from hnplan.errors import InputError

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

ROOT = Path(__file__).parents[1]
HEADER = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp"
# an 8-GPU job in one TP group, then a 144-GPU job in TP groups of 72 (two NVL72 domains' worth)
ROWS = ["0,8,1000,3600,training,3600,8", "10,144,1000,3600,training,3600,72"]


def _trace(tmp_path: Path, sep: str = ",", name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(line.replace(",", sep) for line in [HEADER, *ROWS]) + "\n")
    return path


# -- 1. a TP group larger than the scale-up domain is refused, naming the row, column and domain -----
def test_a_tp_group_larger_than_the_domain_is_refused_with_its_row_and_the_domain(tmp_path):
    path = _trace(tmp_path)
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "256", "--trace", str(path)]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 2, res.stdout + res.stderr
    # the header is row 1 of a spreadsheet, the TP-72 job row 3; HGX H100's domain is its 8-GPU server
    want = f"{path}: row 3, column tp: a TP group of 72 GPUs does not fit the design's 8-GPU scale-up domain"
    assert json.loads(res.stdout)["error"]["message"].startswith(want)
    assert one_line(res.stderr).startswith(f"error: {want}") and "Traceback" not in res.stderr


def test_the_same_trace_fits_a_72_gpu_domain_unchanged(tmp_path):
    jobs = read_trace(_trace(tmp_path), domain_gpus=72)  # GB200 NVL72: one 72-GPU NVLink domain per rack
    assert jobs["tp"].tolist() == [8, 72] and jobs["gpus"].tolist() == [8, 144]
    with pytest.raises(InputError, match="row 3, column tp: a TP group of 72 GPUs .* 8-GPU scale-up domain"):
        read_trace(_trace(tmp_path), domain_gpus=8)


def test_a_job_larger_than_the_cluster_is_rejected_and_counted_whatever_its_tp_group(tmp_path):
    # 144 GPUs on a 64-GPU cluster: rejected at submission (counted, left out of the offered load), as any job
    # larger than the cluster; its TP group is not judged, since it never runs
    path = _trace(tmp_path)
    jobs = read_trace(path, domain_gpus=8, cluster_gpus=64)
    assert jobs["tp"].tolist() == [8, 72]
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(path), "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["jobs"]["rejected"] == 1


def test_a_helios_job_of_more_gpus_per_node_than_the_domain_names_the_columns_it_came_from(tmp_path):
    # tp of a Slurm log is gpu_num / node_num: 32 GPUs on 2 nodes = 16 per node, over an 8-GPU domain
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,gpu_num,node_num,state,submit_time,duration\n"
        "1,8,1,COMPLETED,2020-06-09 18:41:01,100\n"
        "2,32,2,COMPLETED,2020-06-09 18:42:01,100\n"
    )
    with pytest.raises(InputError, match=r"row 3, columns gpu_num and node_num: a TP group of 16 GPUs .* 8-GPU"):
        read_trace(path, domain_gpus=8)
    assert read_trace(path, domain_gpus=72)["tp"].tolist() == [8, 16]


def test_a_mix_class_whose_tp_gpus_exceeds_the_domain_is_refused(tmp_path):
    mix = tmp_path / "mix.yaml"
    text = (ROOT / "data" / "cluster_mixes" / "default.yaml").read_text()
    assert "tp_gpus: 8" in text
    mix.write_text(text.replace("tp_gpus: 8", "tp_gpus: 16", 1))
    with pytest.raises(InputError, match="field tp_gpus: a TP group of 16 GPUs does not fit the design's 8-GPU"):
        resolve_job_columns(64, mix=str(mix), jobs=20, domain_gpus=8)
    jobs = resolve_job_columns(64, mix=str(mix), jobs=20, domain_gpus=72)
    assert jobs["tp"].max() <= 16


# -- 2. a file separated by ';' or tabs says so ---------------------------------------------------------
@pytest.mark.parametrize(("sep", "said"), [(";", "';'"), ("\t", "tabs")])
def test_a_trace_separated_by_semicolons_or_tabs_says_so(tmp_path, sep, said):
    path = _trace(tmp_path, sep)
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--trace", str(path)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert f"the file is separated by {said}, not commas" in line and "missing column" not in line
    assert line.startswith(f"error: {path}: the header is one column")


def test_a_table_read_with_the_wrong_separator_says_so_rather_than_listing_columns():
    table = pd.DataFrame({"arrival_s;gpus;tp": ["0;8;8"]})
    with pytest.raises(InputError, match="jobs: the header is one column, .* separated by ';'"):
        check_jobs(table)


# -- 3. --gpus past the fabric names the flag and the limit -----------------------------------------------
# 64-port switches, three tiers: 64^3 / 4 = 65,536 ports; HGX H100 has one NIC per GPU -> 65,536 GPUs; GB200
# trays have 4 NICs per 4 GPUs -> 65,536 GPUs, down to whole 72-GPU racks: 910 x 72 = 65,520
@pytest.mark.parametrize(
    "command",
    [
        ["tco"],
        ["topology"],
        ["reliability", "--model", "llama3.1-8b"],
        ["size", "--model", "llama3.1-8b", "--tokens", "1T"],
    ],
)
@pytest.mark.parametrize(
    ("system", "gpus", "most"), [("hgx-h100-ib-ndr", 65537, "65,536"), ("gb200-nvl72", 65530, "65,520")]
)
def test_gpus_past_the_fabric_name_the_flag_and_the_limit(command, system, gpus, most):
    res = runner.invoke(app, [*command, "--system", system, "--gpus", str(gpus), "--json"])
    assert res.exit_code == 2, res.stdout + res.stderr
    want = (
        f"--gpus {gpus} exceeds the {most} GPUs of {system} one scale-out fabric joins "
        f"(a 3-tier fat-tree of 64-port qm9700 switches); give at most {most}"
    )
    assert json.loads(res.stdout)["error"]["message"] == want
    assert one_line(res.stderr) == f"error: {want}"


def test_the_fabric_s_largest_count_is_still_an_answer():
    res = runner.invoke(app, ["topology", "--system", "hgx-h100-ib-ndr", "--gpus", "65536", "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["gpus"] == 65536


# -- 4. the GPU_SPEC and MAX_JOBS docstrings --------------------------------------------------------------
def test_the_job_module_constants_carry_their_own_docstrings():
    tree = ast.parse((ROOT / "hnplan" / "cluster" / "jobs.py").read_text())
    body = tree.body
    doc = {}
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.Assign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
            doc[a.targets[0].id] = b.value.value
    assert "GPU models" in doc["GPU_SPEC"] and "jobs" not in doc["GPU_SPEC"]
    assert doc["MAX_JOBS"].startswith("The most jobs one run draws")


# -- 5. the blocked-capacity row as each mode runs --------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "said", "not_said"),
    [
        ("--backfill", "free while a reserved job waits for the rest of its GPUs", "first blocked job"),
        ("--no-backfill", "free while the first blocked job waits for the rest of its GPUs", "reserved job"),
    ],
)
def test_the_blocked_capacity_row_names_what_waits_in_each_mode(flag, said, not_said):
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "64", "--jobs", "100", flag]
    res = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if "blocked capacity" in line)
    assert said in row and not_said not in row


# -- 6. failure rates measured on H100, carried to other accelerators -------------------------------------
@pytest.mark.parametrize(
    ("system", "carried"), [("gb200-nvl72", "gb200"), ("hgx-b200-ib-xdr", "b200"), ("hgx-h100-ib-ndr", None)]
)
def test_reliability_says_where_the_failure_rates_are_carried_from_h100(system, carried):
    args = ["reliability", "--system", system, "--gpus", "1152", "--model", "llama3.1-8b"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.stderr
    basis = json.loads(res.stdout)["failure_rates"]
    assert basis["measured_on"] == ["h100-sxm"] and basis["carried"] == (carried is not None)
    table = runner.invoke(app, args, env={"COLUMNS": "400"}).stdout
    if carried:
        assert basis["note"] == (
            f"measured on h100-sxm (llama3-h100); carried unchanged to {carried}, an assumption: no published "
            "rates for it"
        )
        assert basis["note"] in table
    else:
        assert basis["note"] is None and "failure rates" not in table


def test_the_carry_over_is_a_labelled_assumption_in_the_data(tmp_path):
    from hnplan.catalog import load_catalog

    rel = load_catalog().reliability
    assert rel.measured_on == ["h100-sxm"] and "B200" in rel.assumptions["rates"]
    # a mistyped accelerator id would label every system as carried: catalog validate refuses it
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    path = data / "reliability.yaml"
    path.write_text(path.read_text().replace("measured_on: [h100-sxm]", "measured_on: [h100-sx]", 1))
    res = runner.invoke(app, ["catalog", "validate", str(data)])
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "field 'measured_on': unknown accelerator id 'h100-sx'" in one_line(res.stderr)
