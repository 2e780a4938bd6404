"""`hnplan compare` without pandas: the design comparison as plain rows (``compare_design_rows``) reads as the
frame (``compare_training_designs``) does, value for value, and the verdict and trust notes built from the rows
are the frame's, character for character; ``frame_records`` gives a DataFrame's records without pandas."""

import json
import math

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hnplan.cli.compare_cmd import _clean, _json_row
from hnplan.planning.compare import (
    UNITS,
    compare_design_rows,
    compare_training_designs,
    fabric_and_chip,
    trust_notes,
    verdict,
)
from hnplan.planning.records import first_max, first_min, frame_records, n_unique

_VALUES = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=False, width=64),
    st.booleans(),
    st.text(max_size=3),
)  # no None: the planners' rows hold NaN where a value is missing
_ROWS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _VALUES, max_size=4), min_size=1, max_size=5)


def _same(x, y) -> bool:
    """Equal values of the same type, NaN equal to NaN."""
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return type(x) is type(y) and x == y


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ROWS)
def test_frame_records_are_the_frames_records(rows):
    # the columns in first-seen order, missing values NaN, a column of numbers with a gap or a float as floats
    want = pd.DataFrame(rows).to_dict("records")
    got = frame_records(rows)
    assert [list(r) for r in got] == [list(r) for r in want]
    for g, w in zip(got, want, strict=True):
        assert all(_same(g[k], w[k]) for k in w), (rows, got, want)


def test_frame_records_by_hand():
    # a design without a plan has no gpus_bought: the column becomes 1152.0 and NaN, as pandas' float64 column
    rows = [{"system": "a", "gpus": 1152, "gpus_bought": 1152, "ok": True}, {"system": "b", "gpus": 1152}]
    got = frame_records(rows)
    assert got[0] == {"system": "a", "gpus": 1152, "gpus_bought": 1152.0, "ok": True}
    assert type(got[0]["gpus"]) is int and type(got[0]["gpus_bought"]) is float
    assert math.isnan(got[1]["gpus_bought"]) and math.isnan(got[1]["ok"])


def test_first_min_max_and_unique_follow_pandas():
    rows = [{"d": 2.0, "g": 8}, {"d": float("nan"), "g": float("nan")}, {"d": 1.0, "g": 8}, {"d": 1.0, "g": 9}]
    df = pd.DataFrame(rows)
    assert first_min(rows, "d") is rows[int(df["d"].idxmin())]  # the first of equal ones, NaN skipped
    assert first_max(rows, "d") is rows[int(df["d"].idxmax())]
    assert n_unique(rows, "g") == df["g"].nunique() == 2 and n_unique(rows, "x") == 0


def _rack(tmp_path):
    """gb200-nvl72 under another id, without a price (its costs are n/a)."""
    from hnplan.catalog import load_catalog

    raw = yaml.safe_load(load_catalog().path_of("systems", "gb200-nvl72").read_text())
    raw.update(id="my-rack")
    path = tmp_path / "my-rack.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


JOBS = {
    # a supernode and a server of its generation, a newer and an older server (fabric and chip), fp8; the
    # supernode buys 144 GPUs (two racks) for 128
    "fabric-and-chip": dict(
        model="llama3.1-8b",
        systems=["gb200-nvl72", "hgx-b200-ib-xdr", "hgx-h100-ib-ndr"],
        gpus=128,
        tokens=1e11,
        dtype="fp8",
    ),
    # a design without a plan (A100s' memory): gpus_bought is a float column, status says why
    "one-without-a-plan": dict(
        model="llama3.1-405b", systems=["gb200-nvl72", "dgx-a100-hdr", "hgx-h200-ib-ndr"], gpus=48, tokens=1e12
    ),
    # a design without a price (NaN costs, cost_note) beside a priced one, goodput off, synchronous checkpoints
    "unpriced": dict(
        model="llama3.1-8b", systems=["RACK", "hgx-b200-ib-xdr"], gpus=128, tokens=1e11, goodput=False, mode="sync"
    ),
    "one-design": dict(model="llama3.1-8b", systems=["RACK"], gpus=72, tokens=1e11),
}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_rows_verdict_and_notes_are_the_frames(name, tmp_path, cat):
    job = dict(JOBS[name])
    job["systems"] = [_rack(tmp_path) if s == "RACK" else s for s in job["systems"]]
    args = (job.pop("model"), job.pop("systems"), job.pop("gpus"), job.pop("tokens"), 4096, 256)
    df = compare_training_designs(*args, catalog=cat, **job)
    rows = compare_design_rows(*args, catalog=cat, **job)
    assert df.attrs["units"] == UNITS
    want = df.to_dict("records")
    assert [list(r) for r in rows] == [list(r) for r in want]
    for g, w in zip(rows, want, strict=True):
        assert all(_same(g[k], w[k]) for k in w), (g, w)
    # what the command prints: the JSON rows, the verdict, the notes
    printed = [json.dumps(_json_row(_clean(r)), sort_keys=False) for r in rows]
    assert printed == [json.dumps(_json_row(_clean(r)), sort_keys=False) for r in want]
    assert verdict(rows) == verdict(df) and fabric_and_chip(rows) == fabric_and_chip(df)
    assert trust_notes(rows, args[0], cat) == trust_notes(df, args[0], cat)
    if name == "fabric-and-chip":
        assert "What the supernode fabric buys" in verdict(rows) and "What the newer chip buys" in verdict(rows)
    if name == "one-without-a-plan":
        assert not rows[1]["status"].startswith("ok") and type(rows[0]["gpus_bought"]) is float
    if name == "unpriced":
        assert "cost n/a for my-rack" in verdict(rows) and math.isnan(rows[0]["capex_musd"])
    if name == "one-design":
        assert "is the one design compared" in verdict(rows)
