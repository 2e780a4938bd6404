"""A mistyped stack choice in a published run's overrides is refused when the runs file is read (naming the file,
the run and the nearest choice), and `catalog validate` reports it, not a planner error when the run is planned."""

import shutil

import pytest
from typer.testing import CliRunner

from hnplan.catalog.runs import RUNS_FILE, training_runs
from hnplan.cli import app
from hnplan.errors import CatalogError


@pytest.fixture()
def typo_data(data_copy):
    runs = data_copy / RUNS_FILE
    text = runs.read_text()
    assert "    overlap_comm_ctas: {dp: 8}" in text  # the first MLPerf GPT-3 row's DP CTA cap
    runs.write_text(text.replace("    overlap_comm_ctas: {dp: 8}", "    overlap_comm_ctass: {dp: 8}", 1))
    return data_copy


def test_a_mistyped_override_names_the_file_the_run_and_the_nearest_choice(typo_data):
    with pytest.raises(CatalogError) as exc:
        training_runs(typo_data / RUNS_FILE)
    msg = str(exc.value)
    assert msg.startswith(str(typo_data / RUNS_FILE) + ": run mlperf-v40-nvidia-h100-gpt3-10752: ")
    assert msg.endswith("overrides: field overlap_comm_ctass: unknown (did you mean overlap_comm_ctas?)")


def test_catalog_validate_reads_the_validation_runs(typo_data, data_copy):
    res = CliRunner().invoke(app, ["catalog", "validate", str(typo_data)])
    assert res.exit_code == 2
    assert "did you mean overlap_comm_ctas?" in res.stderr
    clean = data_copy.parent / "clean"
    shutil.copytree(data_copy, clean)
    (clean / RUNS_FILE).write_text((clean / RUNS_FILE).read_text().replace("overlap_comm_ctass", "overlap_comm_ctas"))
    ok = CliRunner().invoke(app, ["catalog", "validate", str(clean)])
    assert ok.exit_code == 0, ok.stderr
    assert f", {len(training_runs(clean / RUNS_FILE))} validation runs" in ok.stdout
