"""`hnplan claims` without pandas: a claim whose experiment builds plain rows (a list of dicts) reads as the claim
built from the DataFrame of those rows, verdict, condition, numbers and JSON alike, character for character, and
the storage claim's first call (the twelve best plans searched) imports no pandas."""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan.planning.claims import Claim, audit, decide, describe_region, verdict_points
from hnplan.planning.claims_grid import _claim

IOPS = ("storage-1m-iops", ("000",), "text")
PARAMS = (1.7e9, 18.4e9, 145.6e9, 1.0e12)
GPUS = (576, 2304, 9216)


def _grid(values) -> list[dict]:
    """A params x gpus grid with the metric ``m`` (NaN where a point has no plan) and a storage count."""
    rows = []
    for (p, g), v in zip([(p, g) for p in PARAMS for g in GPUS], values):
        rows.append({"model": f"m{p:g}", "params": p, "gpus": g, "m": v, "units": math.nan if math.isnan(v) else 2})
    return rows


def _both(rows, op, thr):
    """The claim from the rows and from their DataFrame, each as its JSON text."""
    pair = [
        _claim(*IOPS, "exp", r, ["params", "gpus"], "m", op, thr, {"extra": 1.0}) for r in (rows, pd.DataFrame(rows))
    ]
    return [json.dumps(c.as_dict()) for c in pair], pair


_METRIC = st.one_of(st.floats(0.0, 10.0, allow_nan=False), st.just(math.nan), st.sampled_from([1.0, 5.0]))


@given(st.lists(_METRIC, min_size=12, max_size=12), st.sampled_from([">=", "<="]), st.sampled_from([1.0, 5.0]))
def test_a_claim_on_rows_is_the_claim_on_their_frame(values, op, thr):
    (from_rows, from_frame), (c, _) = _both(_grid(values), op, thr)
    assert from_rows == from_frame
    assert isinstance(c.points, pd.DataFrame) and len(c.points) == 12  # the rows read as a frame when asked


def test_every_kind_of_condition_from_rows_by_hand():
    # an orthant: the claim holds for the largest models on the most GPUs
    values = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0]
    (a, b), (c, _) = _both(_grid(values), ">=", 5.0)
    assert a == b and c.condition.endswith(
        "holds for models of at least 1T parameters and at least 9,216 GPUs (within the grid)"
    )
    # no orthant: the GPU counts where it holds, per model
    values = [9.0, 1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    (a, b), (c, _) = _both(_grid(values), ">=", 5.0)
    assert a == b and c.condition.endswith("holds only at 1.7B: 576, 9,216 GPUs")
    # none holds: the closest point, the first of equal ones (576 GPUs, not 2,304), NaN skipped
    values = [math.nan, 3.0, 3.0] + [1.0] * 9
    (a, b), (c, _) = _both(_grid(values), ">=", 5.0)
    assert a == b and "closest at 1.7B parameters, 2,304 GPUs" in c.condition
    assert c.numbers["points"] == 11 and c.numbers["m_min"] == 1.0 and c.numbers["m_max"] == 3.0
    # every point holds; and none evaluated
    (a, b), (c, _) = _both(_grid([6.0] * 12), ">=", 5.0)
    assert a == b and c.verdict == "holds"
    (a, b), (c, _) = _both(_grid([math.nan] * 12), ">=", 5.0)
    assert a == b and c.verdict == "not testable"


def test_decide_and_the_region_read_rows_and_frames_alike():
    rows = verdict_points(_grid([9.0, 1.0, 9.0] + [1.0] * 9), "m", ">=", 5.0)
    frame = verdict_points(pd.DataFrame(_grid([9.0, 1.0, 9.0] + [1.0] * 9)), "m", ">=", 5.0)
    assert [r["holds"] for r in rows] == frame["holds"].tolist()
    assert describe_region(rows, ["params", "gpus"]) == describe_region(frame, ["params", "gpus"])
    assert decide(rows, ["params", "gpus"], "m", ">=", 5.0) == decide(frame, ["params", "gpus"], "m", ">=", 5.0)


def test_the_storage_claim_is_built_from_rows_and_reads_as_its_frame(cat):
    (c,) = audit(only=["storage-1m-iops"], catalog=cat)
    assert isinstance(c.__dict__["_points"], list)  # plain rows, no frame built
    as_frame = Claim(c.id, c.seed_file, c.claim, c.experiment, c.verdict, c.condition, c.numbers, c.points)
    assert json.dumps(c.as_dict()) == json.dumps(as_frame.as_dict())
    # the image rows (with a verdict each) first, then the text rows (none), 12 of each
    assert c.points["data"].tolist() == ["images"] * 12 + ["text shards"] * 12
    assert c.points["holds"].iloc[12:].isna().all() and c.points["holds"].iloc[:12].notna().all()
    assert c.numbers["points"] == 12 and c.numbers["units_for_1m_iops"] == 1


PROBE = """
import contextlib, io, sys
from hnplan.cli import main
sys.argv = ["hnplan", "claims", "--only", "storage-1m-iops", "--json"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
print(",".join(sorted(m for m in sys.modules if m.startswith(("hnplan", "pandas", "pyarrow", "scipy")))))
"""


@pytest.mark.parametrize("cached", [False, True], ids=["planned", "cached"])
def test_the_storage_claim_imports_no_pandas(cached):
    """Its twelve best-plan searches run on plain columns and the claim is built from plain rows: no pandas
    (about a quarter of a second of start-up), whether the points are planned or read back from the cache."""
    env = dict(os.environ) | ({} if cached else {"HNPLAN_NO_CACHE": "1"})
    if cached:  # fill the cache first, so the probe reads the points back whatever ran before (or alone, with -k)
        subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env)
    mods = set(out.stdout.strip().splitlines()[-1].split(","))
    assert "hnplan.planning.claims_other" in mods
    assert not {"pandas", "pyarrow", "scipy"} & mods, sorted({"pandas", "pyarrow", "scipy"} & mods)
