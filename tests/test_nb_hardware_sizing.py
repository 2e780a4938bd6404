"""The hardware-sizing notebook runs on small parameters and shows the library's numbers and charts."""

import pytest

from hnplan.planning.sizing import size_designs

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

# 288 sequences: divisible by the factor 9 of a 72-GPU rack (a power-of-two batch leaves no valid plan
# of a 32-layer model on whole NVL72 racks: only PP 9 could take the 9, and it leaves a stage empty)
SMALL = dict(
    model="llama3.1-8b",
    systems=["hgx-h100-ib-ndr", "gb200-nvl72"],
    tokens=1e11,
    deadline_days=2,
    budget_usd=5e6,
    seq_len=4096,
    global_batch_tokens=4096 * 288,
    mode="async",
    goodput=True,
    stack="pytorch-eager",  # as hnplan size --stack: the notebook plans every count with it
)


def test_hardware_sizing_notebook(tmp_path):
    nb, html = run_notebook("hardware_sizing", SMALL, tmp_path)
    df = size_designs(
        SMALL["model"],
        SMALL["systems"],
        SMALL["tokens"],
        SMALL["deadline_days"],
        SMALL["seq_len"],
        SMALL["global_batch_tokens"] // SMALL["seq_len"],
        budget_usd=SMALL["budget_usd"],
        stack=SMALL["stack"],
    )
    assert (df["goodput"] < 1).all()
    assert list(df["status"]) == ["ok", "ok"]
    for capex in df["capex_usd"]:
        assert f"{capex:,.0f}" in html
    assert 'id="key-table"' in html
    # what sets each design's racks, from the planner (rack power limit or the rack's GPU slots)
    assert "racks set by" in html
    for bound in df["racks_bound_by"]:
        assert bound in html
    assert "pytorch-eager" in html  # the stack is stated with the run's parameters
    # the verdict first, then the key table, then the charts (the browser test checks the first screen)
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    assert plotly_divs(html) == 4
    assert "cheapest design to buy" in html
    table = html[html.index('id="key-table"') :]
    table = table[: table.index("</table>")]
    assert ">True<" not in table and ">False<" not in table  # within budget says yes / no
    assert table.count(">yes<") == int(df["within_budget"].sum())
