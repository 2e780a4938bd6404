"""The network notebook runs on small parameters and shows the library's numbers and its charts."""

import pytest

from hnplan.planning.network import bom_table, boundary_summary, domain_boundary

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    gpus=144,
    draw_gpus=16,
    sweep="1MiB:64MiB",
    boundary_size="64MiB",
    boundary_max_gpus=144,
)


def test_network_notebook(tmp_path):
    nb, html = run_notebook("network", SMALL, tmp_path)
    bom = bom_table(SMALL["systems"], SMALL["gpus"])
    assert 'id="key-table"' in html
    # the verdict first, then the key table, then the charts (the browser test checks the first screen)
    assert html.index("What this means") < html.index('id="key-table"') < html.index("plotly-graph-div")
    for v in bom["scaleout_switches"]:
        assert f">{v:,}<" in html
    for op in ("allreduce", "alltoall"):
        bd = domain_boundary(SMALL["systems"], op, 64 * 2**20, [8, 16, 32, 64, 72, 144])
        text = boundary_summary(bd)
        assert "hgx-h100-ib-ndr" in text
        for line in text.splitlines():  # the "what this means" sentences, numbers from the library
            assert line.split("**: ")[1] in html
    # BOM bars + one drawing per design + all-reduce and all-to-all sweeps + two boundary studies
    assert plotly_divs(html) == 1 + len(SMALL["systems"]) + 2 + 2
