"""The serving charts when no design serves any of the rates within the SLOs: an empty chart that says so,
not a ``KeyError`` (``rates: [1e9]`` or a prompt past the model's context failed the inference_capacity report)."""

from hnplan import plots
from hnplan.planning.inference import Traffic, gpus_vs_rate


def test_no_rate_served_draws_empty_charts_that_say_why():
    # 1e9 requests/s of 2,000 + 500 tokens: beyond one fabric of HGX H100 at any layout
    rt = gpus_vs_rate("llama3.1-8b", ["hgx-h100-ib-ndr"], [1e9], Traffic(2000, 500), 1.0, 0.05, dtype="fp8")
    assert (rt["status"] != "ok").all()
    for fig in (plots.gpus_vs_rate_figure(rt), plots.cost_per_token_figure(rt)):
        assert not fig.data
        assert "no design serves any of these rates" in fig.layout.annotations[0].text
        assert "[" in fig.layout.xaxis.title.text  # the axis keeps its unit
