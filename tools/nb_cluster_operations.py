"""Write notebooks/cluster_operations.ipynb from its cell list (outputs stay empty).

Usage: python tools/nb_cluster_operations.py
"""

from pathlib import Path

import nbformat
from make_notebooks import notebook

NB = Path(__file__).resolve().parents[1] / "notebooks"

CLUSTER_OPERATIONS = [
    ("md", "# Shared-cluster operations: utilisation, fragmentation and queueing\n\n"
           "One job stream on several designs and placement policies, simulated event by event (SimPy): how busy "
           "each cluster is, how long each class of job waits, how many GPUs sit stranded, and what failures and "
           "preemptions cost. Then the placement policies on the public Alibaba GPU-sharing trace, beside the "
           "numbers Weng et al. (USENIX ATC 2023) report."),
    ("code", "# Parameters (papermill overrides these)\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]   # system ids (data/systems)\n"
             "gpus = 1152                                    # accelerators per design\n"
             "mix = \"default\"                                # job mix id (data/cluster_mixes)\n"
             "trace = None                                   # or a job CSV / Alibaba openb_pod_list_*.csv\n"
             "n_jobs = 20000                                 # jobs drawn from the mix\n"
             "offered_load = None                            # offered load [fraction of GPUs]; None: the mix's\n"
             "policies = [\"topology-aware\", \"best-fit\"]     # placement policies compared\n"
             "map_at = 0.6                                   # moment of the fragmentation map [fraction of the window]\n"
             "weng_scale = 1.0                               # node counts of the trace's cluster x this\n"
             "seed = 0                                       # random seed", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.plots import cluster as cplots\n"
             "import pandas as pd\n"
             "from hnplan.cluster import resolve_jobs\n"
             "from hnplan.cluster.compare import cluster_verdict, compare_cluster, delays_frame, weng_table\n"
             "from hnplan.cluster.validation import fill_experiment\n"
             "from hnplan.reports import provenance\n\n"
             "params = dict(systems=systems, gpus=gpus, mix=mix, trace=trace, n_jobs=n_jobs, offered_load=offered_load,\n"
             "              policies=policies, map_at=map_at, weng_scale=weng_scale, seed=seed)\n"
             "jobs = resolve_jobs(gpus, trace=trace, mix=mix, jobs=n_jobs, seed=seed, offered_load=offered_load)\n"
             "table, ts, results = compare_cluster(systems, gpus, jobs, policies, seed=seed, snapshot_at=map_at)\n"
             "display(Markdown(f\"## {len(jobs):,} jobs on {gpus:,} GPUs per design\"))\n"
             "display(Markdown(\"### What this means\\n\\n\" + cluster_verdict(table)))"),
    ("code", "cols = {\"system\": \"design\", \"policy\": \"policy\", \"utilisation\": \"utilisation\",\n"
             "        \"allocation_rate\": \"allocated\", \"offered_load\": \"offered\", \"fragmentation\": \"stranded\",\n"
             "        \"goodput\": \"goodput\", \"jct_slowdown_mean\": \"JCT slowdown\", \"preemptions\": \"preemptions\",\n"
             "        \"inference_p95_delay_s\": \"inference p95 wait [s]\", \"training_p95_delay_s\": \"training p95 wait [s]\",\n"
             "        \"development_p95_delay_s\": \"development p95 wait [s]\", \"concurrent_jobs\": \"running jobs (mean)\"}\n"
             "pct = {c: \"{:.1%}\" for c in (\"utilisation\", \"allocated\", \"offered\", \"stranded\", \"goodput\")}\n"
             "display(table[list(cols)].rename(columns=cols).style\n"
             "        .format({**pct, \"JCT slowdown\": \"{:.2f}\", \"inference p95 wait [s]\": \"{:,.0f}\",\n"
             "                 \"training p95 wait [s]\": \"{:,.0f}\", \"development p95 wait [s]\": \"{:,.0f}\",\n"
             "                 \"running jobs (mean)\": \"{:,.0f}\"}, na_rep=\"-\")\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("code", "plots.show(cplots.timeseries_figure(ts))\n"
             "plots.show(cplots.delay_figure(delays_frame(results)))\n"
             "plots.show(cplots.policy_bars(table))"),
    ("code", "for (s, p), r in results.items():\n"
             "    if p == policies[0] and r.snapshot is not None:\n"
             "        plots.show(cplots.fragmentation_map(r.snapshot, f\"{s} / {p}: GPU allocation by rack\"))"),
    ("md", "## Validation: fragmentation-aware placement on the Alibaba GPU-sharing trace\n\n"
           "Tasks drawn from the committed sample of `openb_pod_list_default.csv` fill the trace's own 6,212-GPU "
           "heterogeneous cluster (no departures) until the requested GPUs equal its capacity; the table gives the "
           "GPUs left unallocated under each policy beside the headline of Weng et al. CPU and memory requests are "
           "checked against each node's, as in their simulator; GPU-type constraints are not."),
    ("code", "fill = fill_experiment(pd.read_csv(\"../data/traces/alibaba-openb-gpu-sample.csv\"),\n"
             "                       (\"first-fit\", \"best-fit\", \"fragmentation-aware\"), seed=seed, scale=weng_scale)\n"
             "wt = weng_table(fill)\n"
             "display(wt.style.hide(axis=\"index\"))\n"
             "display(Markdown(f\"Source: {wt.attrs['source']}.\"))"),
    ("code", "display(Markdown(provenance(params)))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(CLUSTER_OPERATIONS), NB / "cluster_operations.ipynb")
    print("wrote", NB / "cluster_operations.ipynb")
