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


