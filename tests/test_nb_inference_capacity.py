"""The inference-capacity notebook runs on small parameters and shows the library's numbers and charts."""

import pytest

from hnplan.planning.inference import Traffic, design_frontiers, gpus_vs_rate

from nbutil import plotly_divs, run_notebook, table_problems

pytestmark = pytest.mark.notebook

SMALL = dict(
    model="llama3.1-8b",
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    input_tokens=1000,
    output_tokens=200,
    dtype="fp8",
    rates=[5, 50],
    ttft_slo_ms=1000,
    tpot_slo_ms=50,
    validation_models=["deepseek-v3"],
    engine="vllm",
)


def test_inference_capacity_notebook(tmp_path):
    nb, html = run_notebook("inference_capacity", SMALL, tmp_path)
    fr = design_frontiers(SMALL["model"], SMALL["systems"], 1000, 200, "fp8", engine="vllm")
    best = fr.loc[fr.groupby("system")["tokens_per_s_per_gpu"].idxmax()]
    for r in best.itertuples():
        assert f"{r.tokens_per_s_per_gpu:,.0f}" in html  # each design's peak tokens/s per GPU, as the library has it
        assert f"{r.joules_per_token:.3f}" in html  # and its energy per output token at that load
    rt = gpus_vs_rate(
        SMALL["model"], SMALL["systems"], SMALL["rates"], Traffic(1000, 200), 1.0, 0.05, dtype="fp8", engine="vllm"
    )
    assert (rt["status"] == "ok").all()
    for r in rt.itertuples():
        assert f"${r.usd_per_million_tokens:.3f}/M tokens" in html
    assert 'id="key-table"' in html
    assert plotly_divs(html) == 4
    assert "What this means" in html and "cheapest per token" in html
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    assert "DeepSeek production" in html and "mean |error|" in html
    assert table_problems(html) == []  # no 2.831e+04, no snake_case header, no Python dict in the footer
    assert "<code>system_dtypes</code> = none" in html
    # the engine modelled is said beside the table, with the flag that gives the CLI the same figures
    assert "Serving engine modelled (its batch cap and host time per step): " in html
    assert "the same <code>--engine</code> (its default: none)" in html
