"""The design-comparison notebook runs on small parameters and shows the key numbers and charts."""

import pytest

from hnplan.planning.compare import compare_training_designs

from nbparams import SMALL_PARAMS
from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = SMALL_PARAMS["design_comparison"]


def test_design_comparison_notebook(tmp_path):
    nb, html = run_notebook("design_comparison", SMALL, tmp_path)
    df = compare_training_designs(SMALL["model"], SMALL["systems"], SMALL["gpus"], SMALL["tokens"],
                                  SMALL["seq_len"], SMALL["global_batch_tokens"] // SMALL["seq_len"])
    assert list(df["status"]) == ["ok", "ok"]
    # the table shows each design's days to train as the library computes them
    for days in df["days"]:
        assert f"{days:.1f}" in html
    assert 'id="key-table"' in html
    assert plotly_divs(html) == 4
    assert html.count("* plotly.js v") == 1  # plotly.js embedded once: the report opens offline
    assert "require.js" not in html and "cdnjs.cloudflare.com" not in html
    assert "trains fastest" in html
