"""Accelerators without ``sustained_compute_fraction`` or ``memory_kernel_efficiency`` are planned at the ideal
1.0 (compute at the short-run clock, memory-bound kernels at the streaming copy's bandwidth): the trust notes of
``compare``, ``train`` and ``infer`` say so, naming the fields, and say nothing for a calibrated chip."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.planning.compare import trust_notes
from hnplan.planning.trust import uncalibrated_sentence

runner = CliRunner()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_sentence_names_the_missing_fields_per_chip(cat):
    # ascend-910c and mi300x carry neither field; h800-sxm carries both (0.959, measured kernel classes)
    assert cat.accelerator("ascend-910c").sustained_compute_fraction is None
    assert cat.accelerator("h800-sxm").sustained_compute_fraction == pytest.approx(0.959, abs=5e-4)
    text = uncalibrated_sentence(["h800-sxm", "ascend-910c", "mi300x"], cat)
    assert text.startswith(
        "Not calibrated, modelled at the ideal default 1.0: `sustained_compute_fraction` and "
        "`memory_kernel_efficiency` on ascend-910c and mi300x ("
    )
    assert "h800-sxm" not in text and "likely optimistic" in text
    assert uncalibrated_sentence(["h800-sxm", "gb200"], cat) == ""
    # the serving model has no sustained clock: only the memory-kernel field is named
    serving = uncalibrated_sentence(["ascend-910c"], cat, ("memory_kernel_efficiency",))
    assert "`memory_kernel_efficiency` on ascend-910c" in serving and "sustained_compute_fraction" not in serving


def test_compare_notes_flag_the_uncalibrated_design(cat):
    df = pd.DataFrame(
        [
            dict(system="hgx-h800-ib", accelerator="h800-sxm", status="ok"),
            dict(system="cloudmatrix-384", accelerator="ascend-910c", status="ok"),
        ]
    )
    text = trust_notes(df, "deepseek-v3", cat)
    assert "`sustained_compute_fraction` and `memory_kernel_efficiency` on ascend-910c (" in text
    calibrated = trust_notes(df.iloc[:1], "deepseek-v3", cat)
    assert "Not calibrated" not in calibrated


TRAIN = ["train", "--model", "llama3.1-8b", "--gpus", "8", "--seq-len", "8192", "--global-batch-tokens", "1048576"]
INFER = ["infer", "--model", "llama3.1-8b", "--tp", "1", "--input-tokens", "1024"]


@pytest.mark.parametrize(
    "args, fields",
    [
        (TRAIN, "'sustained_compute_fraction' and 'memory_kernel_efficiency' on ascend-910c"),  # JSON: plain text
        (INFER, "'memory_kernel_efficiency' on ascend-910c"),
    ],
    ids=["train", "infer"],
)
def test_train_and_infer_say_it_on_cloudmatrix_not_on_h100(args, fields):
    res = runner.invoke(app, [*args, "--system", "cloudmatrix-384", "--json"])
    assert res.exit_code == 0, res.output
    note = json.loads(res.stdout)["calibration_note"]
    assert fields in note and "`" not in note
    table = runner.invoke(app, [*args, "--system", "cloudmatrix-384"])
    assert table.exit_code == 0 and "Not calibrated, modelled at the ideal default 1.0" in table.stdout
    h100 = runner.invoke(app, [*args, "--system", "hgx-h100-ib-ndr", "--json"])
    assert h100.exit_code == 0 and "calibration_note" not in json.loads(h100.stdout)
