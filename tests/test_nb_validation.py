"""The validation notebook shows the same table the tests assert."""

import pytest

from hnplan.validation import validation_table

from nbparams import SMALL_PARAMS
from nbutil import plotly_divs, run_notebook, table_problems

pytestmark = pytest.mark.notebook


def test_validation_notebook(tmp_path):
    params = SMALL_PARAMS["validation"]
    _, html = run_notebook("validation", params, tmp_path)
    df = validation_table(only=params["areas"])
    assert 'id="key-table"' in html and plotly_divs(html) == 1
    # the verdict first, then the key table, then the charts (the browser test checks the first screen)
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    for row in df.itertuples():
        assert row.case in html
        assert f"{row.error:+.1%}" in html
    assert f"{len(df)} published figures" in html
    # the calibration section fits the example runs of docs/examples (README, "Calibrate to your own cluster")
    assert "Calibrate to your own cluster" in html and "llama3-405b-16k-gpus" in html
    assert "matmul_efficiency.h100-sxm.bf16" in html and "leave-one-out error [%]" in html
    assert table_problems(html) == []  # headers in words with units, no exponents, no nan
