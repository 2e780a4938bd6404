"""tools/clock_mix.py: the compute-bound share of a validation row's step, next to its error
(docs/compute.md, "Does the sustained clock follow the step's mix?")."""

import pytest
from toolmod import load_tool

from hnplan.catalog import load_catalog
from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import validation_table

SMALL, LARGE = "mbridge2511-b200-llama3-8b-8", "mlperf-v51-uf-b200-llama31-405b-256"


def _tool():
    return load_tool("clock_mix")


@pytest.fixture(scope="module")
def rows():
    cat = load_catalog()
    runs = {r.id: r for r in training_runs()}
    tool = _tool()
    return {i: tool.row(runs[i], cat) for i in (SMALL, LARGE)}, cat


def test_row_agrees_with_the_validation_table(rows):
    got, cat = rows
    table = validation_table(catalog=cat, ids=[SMALL, LARGE]).set_index("id")
    for i, r in got.items():
        # the error the README table prints for the row, to its one decimal
        assert r["err_%"] == pytest.approx(round(float(table.loc[i, "error_pct"]), 1), abs=0.051)
        # the B200's measured fraction (flashinfer-ai/flashinfer pull request 2899: 1,237 / 1,450)
        assert r["f"] == pytest.approx(1237 / 1450, abs=5e-4)
        # the step's compute-bound share is the kernel-time share times the compute share of the step
        assert r["cb_of_step"] == pytest.approx(r["cb_of_compute"] * r["compute_of_step"], abs=1.5e-3)
        assert 0 < r["cb_of_step"] <= r["cb_of_compute"] <= 1


def test_small_model_step_is_less_compute_bound(rows):
    got, _ = rows
    small, large = got[SMALL], got[LARGE]
    # 8 GPUs of data parallelism: nearly the whole step is kernels (the gradient reduction overlaps)
    assert small["compute_of_step"] > 0.99
    # the 8B step spends more of its kernel time in memory-bound operators (norms, casts, activations, the
    # loss over 128,256 classes) than the 405B one, whose d = 16,384 GEMMs dominate
    assert small["cb_of_compute"] < large["cb_of_compute"] - 0.1
    # ... while the 405B's exposed communication and bubble bring the whole-step shares together
    assert small["cb_of_step"] == pytest.approx(large["cb_of_step"], abs=0.03)
