"""The cluster-operations notebook runs on small parameters and shows the library's numbers and charts."""

import pytest

from hnplan.cluster import resolve_jobs
from hnplan.cluster.compare import cluster_verdict, compare_cluster

from nbutil import plotly_divs, run_notebook

pytestmark = pytest.mark.notebook

SMALL = dict(
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    gpus=144,
    mix="default",
    trace=None,
    n_jobs=300,
    offered_load=None,
    policies=["topology-aware", "best-fit"],
    map_at=0.6,
    weng_scale=0.05,
    seed=1,
)


def test_cluster_operations_notebook(tmp_path):
    nb, html = run_notebook("cluster_operations", SMALL, tmp_path)
    assert 'id="key-table"' in html and "What this means" in html
    jobs = resolve_jobs(SMALL["gpus"], mix="default", jobs=SMALL["n_jobs"], seed=SMALL["seed"])
    table, _, _ = compare_cluster(
        SMALL["systems"], SMALL["gpus"], jobs, SMALL["policies"], seed=SMALL["seed"], snapshot_at=SMALL["map_at"]
    )
    for line in cluster_verdict(table).splitlines():  # the sentences come from the library's numbers
        assert line.split("**: ")[1].replace('"', "&quot;") in html or line.split("**: ")[1] in html
    assert "Weng et al." in html
    # time series, utilisation by day, delays by class and by job size, policy bars, one fragmentation map per design
    assert plotly_divs(html) == 5 + len(SMALL["systems"])
    assert "Allocated GPUs by day" in html and "Queueing delay by job size" in html
