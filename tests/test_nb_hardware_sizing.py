"""The hardware-sizing notebook runs on small parameters and shows the library's numbers and charts."""

import pytest

from hnplan.planning.sizing import size_designs

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(model="llama3.1-8b", systems=["hgx-h100-ib-ndr", "gb200-nvl72"], tokens=1e11, deadline_days=2,
             budget_usd=5e6, seq_len=4096, global_batch_tokens=4096 * 256, mode="async")


def test_hardware_sizing_notebook(tmp_path):
    nb, html = run_notebook("hardware_sizing", SMALL, tmp_path)
    df = size_designs(SMALL["model"], SMALL["systems"], SMALL["tokens"], SMALL["deadline_days"], SMALL["seq_len"],
                      SMALL["global_batch_tokens"] // SMALL["seq_len"], budget_usd=SMALL["budget_usd"])
    assert list(df["status"]) == ["ok", "ok"]
    for capex in df["capex_usd"]:
        assert f"{capex:,.0f}" in html
    assert 'id="key-table"' in html
    assert plotly_divs(html) == 4
    assert "cheapest design to buy" in html
