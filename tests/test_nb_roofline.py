"""The roofline notebook runs on small parameters and shows the library's numbers and two rooflines."""

import pytest

from hnplan.planning.roofline import roofline_comparison

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    model="llama3.1-8b",
    accelerators=["h100-sxm", "gb200"],
    seq_len=1024,
    train_batch=1,
    recompute="none",
    decode_batch=8,
    kv_len=512,
    tp=2,
    dtype="bf16",
)


def test_roofline_notebook(tmp_path):
    nb, html = run_notebook("roofline", SMALL, tmp_path)
    accs = SMALL["accelerators"]
    _, _, train = roofline_comparison(SMALL["model"], accs, "train", 1, 1024, tp=2)
    _, _, dec = roofline_comparison(SMALL["model"], accs, "decode", 8, 1024, kv_len=512, tp=2)
    for tps in list(train["tokens_per_s"]) + list(dec["tokens_per_s"]):
        assert f"{tps:,.0f}" in html
    for u in train["mfu"]:
        assert f"{u:.1%}" in html
    assert 'id="key-table"' in html
    assert "time per pass [ms]" in html and "attained [TFLOP/s]" in html  # units in every header
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    assert plotly_divs(html) == 2
    assert "memory-bound and scales with HBM bandwidth" in html  # decode at batch 8
