"""The procurement what-if notebook runs on small parameters and shows the library's numbers and charts."""

import re

import pytest

from hnplan import units
from hnplan.planning import procurement as pr

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    model="llama3.1-8b",
    system="hgx-h100-ib-ndr",
    gpus=64,
    tokens=1e11,
    seq_len=4096,
    global_batch_tokens=4096 * 256,
    mode="async",
    n_samples=20,
    seed=3,
    mix_systems=["hgx-h100-ib-ndr", "gb200-nvl72"],
    deadline_days=2,
    budget_usd=2e7,
    power_cap_mw=0.5,
)


def test_procurement_whatif_notebook(tmp_path):
    nb, html = run_notebook("procurement_whatif", SMALL, tmp_path)
    case = pr.whatif_case(
        SMALL["model"],
        SMALL["system"],
        SMALL["gpus"],
        SMALL["tokens"],
        SMALL["seq_len"],
        SMALL["global_batch_tokens"] // SMALL["seq_len"],
        utilisation="simulated",
    )
    base = pr.evaluate(case)
    assert units.format_usd(base["tco_usd"]) in html  # the key table shows the library's TCO, for people
    assert 'id="key-table"' in html
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    text = re.sub(r"<script.*?</script>", "", html, flags=re.S)  # what the reader sees, not the charts' data
    assert f"{base['tco_usd']:,.3f}" not in text and "e+0" not in text  # no raw floats or exponents
    assert "{'" not in text  # no Python dict in prose
    assert plotly_divs(html) == 5  # two tornados, two histograms, the mix
    assert "binding constraint" in html or "neither the budget nor the power cap binds" in html  # the mix's caps
    assert f"Utilisation {case.utilisation:.0%} (simulated: 14 days of arrivals (" in html  # not a sampled range
