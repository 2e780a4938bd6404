"""The validation table: every prediction, calibration and bound row meets its tolerance, row by row,
so that accuracy against published measurements cannot drift while the suite stays green."""

import pytest

from hnplan.validation import ROLES, Row, areas, summary, validation_table

TABLE = validation_table()


@pytest.mark.parametrize("i", range(len(TABLE)), ids=[f"{r.area}: {r.case} ({r.quantity})" for r in TABLE.itertuples()])
def test_row_within_tolerance(i):
    row = TABLE.iloc[i]
    assert row["role"] in ROLES
    assert isinstance(row["source"], str) and len(row["source"]) > 10
    if row["role"] == "reported":
        assert row["note"], "a reported (unasserted) row must explain its gap"
        return
    assert row["within"], (
        f"{row['case']}: predicted {row['predicted']:.4g} vs published {row['published']:.4g} "
        f"{row['unit']} ({row['error']:+.1%}), tolerance {row['tolerance']}"
    )


def test_training_predictions_say_why_their_band_is_that_wide():
    # data/validation/training_runs.yaml: tolerance_reason of every run asserted within its tolerance
    pred = TABLE[(TABLE["area"] == "training") & (TABLE["role"] == "prediction")]
    assert len(pred) and pred["note"].str.match(r"tolerance \d+%: .{80,}").all()


def test_every_area_contributes():
    assert set(areas()) <= set(TABLE["area"])
    assert {"communication", "compute", "memory", "reliability", "inference", "training"} <= set(TABLE["area"])


def test_row_arithmetic():
    r = Row("x", "case", "q", "u", 100.0, 112.0, "prediction", 0.15, "hand-made")
    assert r.error == pytest.approx(0.12) and r.within
    assert not Row("x", "case", "q", "u", 100.0, 80.0, "prediction", 0.15, "hand-made").within
    assert Row("x", "c", "q", "u", 100.0, 150.0, "bound", 1.8, "hand-made").within
    assert not Row("x", "c", "q", "u", 100.0, 90.0, "bound", 1.8, "hand-made").within


def test_summary_counts_rows():
    s = summary(TABLE)
    assert s["rows"].sum() == len(TABLE)
