"""Write the committed notebooks from their cell lists (run once after editing; outputs stay empty).

Usage: python tools/make_notebooks.py
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NB = Path(__file__).resolve().parents[1] / "notebooks"


def notebook(cells):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out = []
    for kind, src, *tags in cells:
        c = new_markdown_cell(src) if kind == "md" else new_code_cell(src)
        if tags:
            c.metadata["tags"] = list(tags)
        out.append(c)
    nb.cells = out
    return nb


DESIGN_COMPARISON = [
    ("md", "# Design comparison: one training job on each design\n\n"
           "For a model, a token budget and a GPU count, the fastest parallel plan that fits on each design, "
           "and what it takes in days, racks, power, energy and capex."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-405b\"            # model id (data/models) or YAML path\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]  # system ids (data/systems)\n"
             "gpus = 16384                        # accelerators per design\n"
             "tokens = 15e12                      # training tokens\n"
             "seq_len = 8192                      # sequence length [tokens]\n"
             "global_batch_tokens = 16_777_216    # tokens per optimizer step\n"
             "dtype = \"bf16\"                      # GEMM dtype: bf16 or fp8", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning.compare import compare_training_designs, verdict\n"
             "from hnplan.reports import provenance\n\n"
             "df = compare_training_designs(model, systems, gpus, tokens, seq_len,\n"
             "                              global_batch_tokens // seq_len, dtype)\n"
             "display(Markdown(f\"## {model}: {tokens:.3g} tokens on {gpus:,} GPUs per design\"))\n"
             "display(Markdown(verdict(df)))"),
    ("code", "cols = {\"system\": \"design\", \"tp\": \"TP\", \"pp\": \"PP\", \"dp\": \"DP\", \"ep\": \"EP\",\n"
             "        \"recompute\": \"recompute\", \"step_time_s\": \"step time [s]\", \"mfu\": \"MFU\",\n"
             "        \"tokens_per_s\": \"tokens/s\", \"days\": \"days to train\", \"gpus\": \"GPUs\", \"racks\": \"racks\",\n"
             "        \"it_power_mw\": \"IT power [MW]\", \"facility_power_mw\": \"facility power [MW]\",\n"
             "        \"energy_mwh\": \"energy [MWh]\", \"capex_musd\": \"capex [M USD]\", \"status\": \"status\"}\n"
             "table = df[[c for c in cols if c in df]].rename(columns=cols)\n"
             "display(table.style.format({\"step time [s]\": \"{:.2f}\", \"MFU\": \"{:.1%}\", \"tokens/s\": \"{:,.0f}\",\n"
             "                            \"days to train\": \"{:.1f}\", \"IT power [MW]\": \"{:.1f}\",\n"
             "                            \"facility power [MW]\": \"{:.1f}\", \"energy [MWh]\": \"{:,.0f}\",\n"
             "                            \"capex [M USD]\": \"{:,.0f}\"}, na_rep=\"-\").hide(axis=\"index\")\n"
             "        .set_table_attributes('id=\"key-table\"'))"),
    ("code", "ok = df[df[\"status\"] == \"ok\"]\n"
             "plots.show(plots.step_breakdown_bar(ok))\n"
             "plots.show(plots.design_bars(ok, \"days\", \"time to train [days]\"))\n"
             "plots.show(plots.design_bars(ok, \"capex_musd\", \"capex [million USD]\"))\n"
             "plots.show(plots.design_bars(ok, \"facility_power_mw\", \"facility power [MW]\"))"),
    ("code", "display(Markdown(provenance(dict(model=model, systems=systems, gpus=gpus, tokens=tokens,\n"
             "                                      seq_len=seq_len, global_batch_tokens=global_batch_tokens, dtype=dtype))))"),
]

NETWORK = [
    ("md", "# Networks: the scale-up domain against the scale-out fabric\n\n"
           "The network each design builds for the same number of GPUs (bill of materials, bisection, hops), "
           "the collective bandwidth it delivers per message size, and where a group leaving its scale-up "
           "domain loses bandwidth. Bandwidths follow the nccl-tests definitions (algbw = S/t; busbw = algbw "
           "x 2(p-1)/p for all-reduce, x (p-1)/p for all-to-all)."),
    ("code", "# Parameters (papermill overrides these)\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]  # system ids (data/systems)\n"
             "gpus = 1152                      # accelerators in the job (BOM and the sweeps)\n"
             "draw_gpus = 144                  # accelerators in the drawn graphs (small: every link is drawn)\n"
             "sweep = \"8B:8GiB\"                # message sizes, doubling (nccl-tests -b/-e)\n"
             "boundary_size = \"1GiB\"           # message size of the domain-boundary study\n"
             "boundary_max_gpus = 1152         # largest group of the domain-boundary study", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots, units\n"
             "from hnplan.catalog import load_catalog\n"
             "from hnplan.cli.collective_cmd import parse_sweep\n"
             "from hnplan.comm.graphs import system_graph\n"
             "from hnplan.comm.tables import bom_table, boundary_summary, busbw_sweep, domain_boundary, graph_layout\n"
             "from hnplan.reports import provenance\n\n"
             "cat = load_catalog()\n"
             "bom = bom_table(systems, gpus)\n"
             "display(Markdown(f\"## The network for {gpus:,} GPUs\"))\n"
             "cols = {\"system\": \"design\", \"domains\": \"scale-up domains\", \"scaleout_tiers\": \"scale-out tiers\",\n"
             "        \"scaleup_switches\": \"scale-up switch chips\", \"scaleout_switches\": \"scale-out switches\",\n"
             "        \"links\": \"links\", \"transceivers\": \"transceivers\", \"cables\": \"cables\",\n"
             "        \"bisection_GBps\": \"bisection [GB/s]\", \"bisection_per_gpu_GBps\": \"bisection per GPU [GB/s]\",\n"
             "        \"diameter_hops\": \"diameter [links]\"}\n"
             "display(bom[list(cols)].rename(columns=cols).style.format({\"bisection [GB/s]\": \"{:,.0f}\",\n"
             "        \"bisection per GPU [GB/s]\": \"{:,.1f}\"}, thousands=\",\").hide(axis=\"index\")\n"
             "        .set_table_attributes('id=\"bom-table\"'))\n"
             "plots.show(plots.bom_figure(bom, {\"scaleup_switches\": \"scale-up switch chips\",\n"
             "    \"scaleout_switches\": \"scale-out switches\", \"transceivers\": \"transceivers\", \"cables\": \"cables\"},\n"
             "    f\"Network bill of materials for {gpus:,} GPUs\"))"),
    ("code", "for sid in systems:\n"
             "    nodes, edges = graph_layout(system_graph(cat.system(sid), draw_gpus, cat))\n"
             "    plots.show(plots.topology_figure(nodes, edges, f\"{sid}: {draw_gpus} GPUs\"))"),
    ("code", "sizes = parse_sweep(sweep)\n"
             "ar = busbw_sweep(systems, \"allreduce\", gpus, sizes)\n"
             "a2a = busbw_sweep(systems, \"alltoall\", gpus, sizes)\n"
             "plots.show(plots.busbw_figure(ar, f\"All-reduce on {gpus:,} GPUs\"))\n"
             "plots.show(plots.busbw_figure(a2a, f\"All-to-all on {gpus:,} GPUs\"))\n"
             "top = ar.groupby(\"system\", sort=False).tail(1)\n"
             "display(Markdown(\"Largest message: \" + \"; \".join(\n"
             "    f\"**{r.system}** all-reduce busbw {r.busbw_GBps:,.0f} GB/s ({r.algorithm})\" for r in top.itertuples())))"),
    ("code", "groups = [n for n in (8, 16, 32, 64, 72, 144, 288, 576, 1152, 2304, 4608) if n <= boundary_max_gpus]\n"
             "size = units.parse_size(boundary_size)\n"
             "notes = []\n"
             "for op in (\"allreduce\", \"alltoall\"):\n"
             "    bd = domain_boundary(systems, op, size, groups)\n"
             "    plots.show(plots.boundary_figure(bd, f\"{op} busbw of {boundary_size} against the group size\"))\n"
             "    notes.append(f\"**{op}**\\n\\n\" + boundary_summary(bd))\n"
             "display(Markdown(\"### What this means\\n\\n\" + \"\\n\\n\".join(notes) + \"\\n\\n\"\n"
             "    \"All-reduce hardly notices the boundary: after the reduction inside a domain only 1/q of the data \"\n"
             "    \"crosses it per rank. All-to-all sends (p-q)/p of every buffer across it, through each GPU's own NIC.\"))"),
    ("code", "display(Markdown(provenance(dict(systems=systems, gpus=gpus, draw_gpus=draw_gpus, sweep=sweep,\n"
             "                                      boundary_size=boundary_size, boundary_max_gpus=boundary_max_gpus))))"),
]

ROOFLINE = [
    ("md", "# Roofline: one model's training step and decode step on several accelerators\n\n"
           "Every operator of the model (projections, attention, MLP or experts, norms, LM head) as a point "
           "under each accelerator's roofline: achievable FLOP/s against arithmetic intensity. Training "
           "GEMMs sit near the compute ceiling; decode at small batch sits on the memory slope."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-70b\"                              # model id (data/models) or YAML path\n"
             "accelerators = [\"h100-sxm\", \"b200\", \"gb200\", \"mi300x\"]  # accelerator ids (data/accelerators)\n"
             "seq_len = 8192                                       # training sequence length [tokens]\n"
             "train_batch = 1                                      # micro-batch [sequences]\n"
             "recompute = \"none\"                                   # none, selective or full\n"
             "decode_batch = 32                                    # concurrent decode requests\n"
             "kv_len = 4096                                        # cached tokens per request\n"
             "tp = 8                                               # tensor-parallel degree\n"
             "dtype = \"bf16\"                                       # GEMM dtype: bf16 or fp8", "parameters"),
    ("code", "import pandas as pd\n"
             "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.catalog import load_catalog\n"
             "from hnplan.compute import roofline_comparison, roofline_verdict\n"
             "from hnplan.reports import provenance\n\n"
             "cat = load_catalog()\n"
             "m = cat.model(model)\n"
             "accs = [cat.accelerator(a) for a in accelerators]\n"
             "train_ops, train_curves, train_sum = roofline_comparison(m, accs, \"train\", train_batch, seq_len,\n"
             "                                                         tp=tp, dtype=dtype, recompute=recompute)\n"
             "dec_ops, dec_curves, dec_sum = roofline_comparison(m, accs, \"decode\", decode_batch, seq_len,\n"
             "                                                   kv_len=kv_len, tp=tp, dtype=dtype)\n"
             "summary = pd.concat([train_sum, dec_sum], ignore_index=True)\n"
             "display(Markdown(f\"## {model}, TP {tp}, {dtype}: training step (micro-batch {train_batch} x {seq_len}) \"\n"
             "                 f\"and decode (batch {decode_batch}, {kv_len} cached tokens)\"))\n"
             "display(Markdown(roofline_verdict(summary)))"),
    ("code", "cols = {\"accelerator\": \"accelerator\", \"phase\": \"phase\", \"time_s\": \"time per pass [s]\",\n"
             "        \"tokens_per_s\": \"tokens/s per GPU\", \"attained_flops_per_s\": \"attained [FLOP/s]\",\n"
             "        \"compute_bound_share\": \"compute-bound share\", \"mfu\": \"MFU\"}\n"
             "display(summary[list(cols)].rename(columns=cols).style.format(\n"
             "    {\"time per pass [s]\": \"{:.4f}\", \"tokens/s per GPU\": \"{:,.0f}\", \"attained [FLOP/s]\": \"{:.3e}\",\n"
             "     \"compute-bound share\": \"{:.0%}\", \"MFU\": \"{:.1%}\"}).hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("code", "plots.show(plots.roofline(train_ops, train_curves, f\"{model} training step (forward + backward)\"))\n"
             "plots.show(plots.roofline(dec_ops, dec_curves, f\"{model} decode step, batch {decode_batch}\"))"),
    ("code", "display(Markdown(provenance(dict(model=model, accelerators=accelerators, seq_len=seq_len,\n"
             "                                      train_batch=train_batch, recompute=recompute, decode_batch=decode_batch,\n"
             "                                      kv_len=kv_len, tp=tp, dtype=dtype))))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(DESIGN_COMPARISON), NB / "design_comparison.ipynb")
    print("wrote", NB / "design_comparison.ipynb")
    nbformat.write(notebook(NETWORK), NB / "network.ipynb")
    nbformat.write(notebook(ROOFLINE), NB / "roofline.ipynb")
    print("wrote", NB / "roofline.ipynb")
