"""The memory notebook runs on small parameters and shows the library's numbers and charts."""

import pytest

from hnplan.planning.memory import breakdown_table

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    model="llama3.1-8b", mode="inference", systems=["gb200-nvl72", "hgx-h100-ib-ndr"], seq_len=8192, tp=1, batch=64
)


def test_memory_notebook(tmp_path):
    nb, html = run_notebook("memory", SMALL, tmp_path)
    df = breakdown_table("llama3.1-8b", SMALL["systems"], "inference", seq_len=8192, tp=1, batch=64)
    # 64 x 8192 tokens x 128 KiB = 64 GiB of KV cache, over the H100's 79.11 GiB with the weights
    assert list(df["status"]) == ["fits", "spills"]
    for total in df["total_gib"]:
        assert f"{total:,.2f}" in html
    assert 'id="key-table"' in html
    assert plotly_divs(html) == 1 + len(SMALL["systems"])
    assert "What this means" in html and "spills" in html
