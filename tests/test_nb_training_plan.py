"""The training-plan notebook runs on small parameters and shows the planner's numbers and charts."""

import pytest

from hnplan.planning.training_tables import best_plans

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    model="llama3.1-8b",
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    gpus=144,
    seq_len=4096,
    global_batch_tokens=4096 * 288,
    dtype="bf16",
    scaling_gpus=[72, 144],
    top_k=5,
    validation_runs=["llama3-405b-8192"],
)


def test_training_plan_notebook(tmp_path):
    nb, html = run_notebook("training_plan", SMALL, tmp_path)
    best = best_plans(
        SMALL["model"],
        SMALL["systems"],
        SMALL["gpus"],
        SMALL["seq_len"],
        SMALL["global_batch_tokens"] // SMALL["seq_len"],
    )
    assert list(best["status"]) == ["ok", "ok"]
    for tps in best["tokens_per_s"]:
        assert f"{tps:,.0f}" in html  # the best-plan table shows the library's throughput
    assert 'id="key-table"' in html and 'id="validation"' in html
    assert "llama3-405b-8192" in html and "is fastest" in html
    assert plotly_divs(html) == 3  # breakdown bars, scaling curve, validation errors
    # the verdict first, then the key table with its ZeRO stage and HBM headroom, then the charts
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    assert "ZeRO stage" in html and "HBM headroom [GiB]" in html
    for head in best["hbm_headroom_gib"]:
        assert f"{head:.1f}" in html
    # one GPU of GB200 (Blackwell, 186 GB HBM3e) allocates more than one of H100 (80 GB)
    assert best["hbm_gib"].iloc[0] > best["hbm_gib"].iloc[1]
    assert (best["hbm_headroom_gib"] == best["hbm_gib"] - best["memory_per_gpu_gib"]).all()


def test_training_plan_notebook_says_when_no_plan_fits(tmp_path):
    """Llama 3.1 405B on 8 H100 (no plan fits in 80 GB): the candidates' heading read "The 0 fastest plans on
    hgx-h100-ib-ndr" above an empty table; it now says no plan divides and fits, and shows no table."""
    params = {**SMALL, "model": "llama3.1-405b", "systems": ["hgx-h100-ib-ndr"], "gpus": 8, "scaling_gpus": [8]}
    params["validation_runs"] = ["llama3-405b-8192"]
    nb, html = run_notebook("training_plan", params, tmp_path)
    assert "No plan of llama3.1-405b on 8 GPUs of hgx-h100-ib-ndr divides and fits" in html
    assert "fastest plans on" not in html and "same numbers as (other plans)" not in html
