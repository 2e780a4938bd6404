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
    for i, (kind, src, *tags) in enumerate(cells):
        c = new_markdown_cell(src) if kind == "md" else new_code_cell(src)
        c.id = f"cell-{i:02d}"  # stable ids: regenerating a notebook changes nothing but what was edited
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
             "display(Markdown(\"### What this means\\n\\n\" + verdict(df)))"),
    ("code", "cols = {\"system\": \"design\", \"tp\": \"TP\", \"pp\": \"PP\", \"dp\": \"DP\", \"cp\": \"CP\", \"ep\": \"EP\",\n"
             "        \"dtype\": \"dtype\", \"recompute\": \"recompute\", \"step_time_s\": \"step time [s]\", \"mfu\": \"MFU\",\n"
             "        \"tokens_per_s\": \"tokens/s\", \"days\": \"days to train\", \"gpus\": \"GPUs\", \"racks\": \"racks\",\n"
             "        \"it_power_mw\": \"IT power [MW]\", \"facility_power_mw\": \"facility power [MW]\",\n"
             "        \"energy_mwh\": \"energy [MWh]\", \"capex_musd\": \"capex [M USD]\", \"status\": \"status\"}\n"
             "table = df[[c for c in cols if c in df]].rename(columns=cols)\n"
             "display(table.style.format({\"TP\": \"{:.0f}\", \"PP\": \"{:.0f}\", \"DP\": \"{:.0f}\", \"CP\": \"{:.0f}\", \"EP\": \"{:.0f}\",\n"
             "                            \"racks\": \"{:,.0f}\",\n"
             "                            \"GPUs\": \"{:,.0f}\", \"step time [s]\": \"{:.2f}\", \"MFU\": \"{:.1%}\", \"tokens/s\": \"{:,.0f}\",\n"
             "                            \"days to train\": \"{:.1f}\", \"IT power [MW]\": \"{:.1f}\",\n"
             "                            \"facility power [MW]\": \"{:.1f}\", \"energy [MWh]\": \"{:,.0f}\",\n"
             "                            \"capex [M USD]\": \"{:,.0f}\"}, na_rep=\"-\").hide(axis=\"index\")\n"
             "        .set_table_attributes('id=\"key-table\"'))"),
    ("code", "ok = df[df[\"status\"].str.startswith(\"ok\")]\n"
             "if ok.empty:\n"
             "    display(Markdown(\"No design has a plan that divides and fits for this job: see the status column.\"))\n"
             "else:\n"
             "    plots.show(plots.step_breakdown_bar(ok))\n"
             "    plots.show(plots.design_bars(ok, \"days\", \"time to train [days]\"))\n"
             "    plots.show(plots.design_bars(ok, \"capex_musd\", \"capex [million USD]\"))\n"
             "    plots.show(plots.design_bars(ok, \"facility_power_mw\", \"facility power [MW]\"))"),
    ("code", "display(Markdown(provenance(dict(model=model, systems=systems, gpus=gpus, tokens=tokens,\n"
             "                                      seq_len=seq_len, global_batch_tokens=global_batch_tokens, dtype=dtype))))"),
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
             "display(Markdown(\"### What this means\\n\\n\" + roofline_verdict(summary)))"),
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


# ---------------------------------------------------------------- issue 8: procurement and sizing
PROCUREMENT_WHATIF = [
    ("md", "# Procurement what-ifs: what moves TCO and time-to-train\n\n"
           "For one design and training job: the sensitivity of TCO and time-to-train to each uncertain input "
           "(ranges from `data/uncertainty.yaml`), Monte Carlo bands, and the best mix of designs under a budget "
           "and a power cap."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-70b\"                 # model id (data/models)\n"
             "system = \"hgx-h100-ib-ndr\"             # design of the what-if (data/systems)\n"
             "gpus = 1024                             # accelerators\n"
             "tokens = 1.5e12                         # training tokens\n"
             "seq_len = 8192                          # sequence length [tokens]\n"
             "global_batch_tokens = 8_388_608         # tokens per optimizer step\n"
             "mode = \"async\"                         # checkpoint mode: sync or async\n"
             "n_samples = 200                         # Monte Carlo samples\n"
             "seed = 0                                # Monte Carlo seed\n"
             "mix_systems = [\"hgx-h100-ib-ndr\", \"gb200-nvl72\"]  # designs the mix may buy\n"
             "deadline_days = 30                      # deadline of the mix workload [days]\n"
             "budget_usd = 300e6                      # capex budget [USD]\n"
             "power_cap_mw = 10.0                     # facility power cap [MW]", "parameters"),
    ("code", "import pandas as pd\n"
             "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning import procurement as pr\n"
             "from hnplan.reports import provenance\n\n"
             "case = pr.whatif_case(model, system, gpus, tokens, seq_len, global_batch_tokens // seq_len, mode=mode)\n"
             "base = pr.evaluate(case)\n"
             "display(Markdown(f\"## {model} on {gpus:,} x {system}: {tokens:.3g} tokens\"))\n"
             "display(pd.DataFrame([base]).style.format({\"tco_usd\": \"{:,.0f}\", \"usd_per_gpu_hour\": \"{:.2f}\",\n"
             "    \"run_usd\": \"{:,.0f}\", \"days_to_train\": \"{:.1f}\", \"goodput\": \"{:.1%}\"}).hide(axis=\"index\")\n"
             "    .set_table_attributes('id=\"key-table\"'))"),
    ("code", "tco_t = pr.tornado(case, \"tco_usd\")\n"
             "days_t = pr.tornado(case, \"days_to_train\")\n"
             "display(tco_t[[\"name\", \"low\", \"base\", \"high\", \"unit\", \"metric_low\", \"metric_high\", \"swing\"]]"
             ".style.format(precision=3).hide(axis=\"index\"))\n"
             "plots.show(plots.tornado_chart(tco_t, \"TCO [USD]\"))\n"
             "plots.show(plots.tornado_chart(days_t, \"time to train [days]\"))"),
    ("code", "mc = pr.monte_carlo(case, n_samples, seed)\n"
             "bands = pr.mc_bands(mc, (\"tco_usd\", \"days_to_train\", \"usd_per_gpu_hour\"))\n"
             "display(bands.style.format(precision=4).hide(axis=\"index\"))\n"
             "plots.show(plots.mc_histogram(mc, \"tco_usd\", \"TCO [USD]\", bands))\n"
             "plots.show(plots.mc_histogram(mc, \"days_to_train\", \"time to train [days]\", bands))"),
    ("code", "workloads = [dict(model=model, tokens=tokens, deadline_days=deadline_days, seq_len=seq_len,\n"
             "                  global_batch_seqs=global_batch_tokens // seq_len, ref_gpus=gpus)]\n"
             "mix = pr.best_mix(workloads, mix_systems, budget_usd, power_cap_mw * 1e6, mode=mode)\n"
             "display(mix.units)\n"
             "from hnplan.catalog import load_catalog\n"
             "plots.show(plots.mix_bars(mix.units, {s: load_catalog().system(s).unit_gpus for s in mix.units.columns}))"),
    ("code", "display(Markdown(\"## What this means\\n\" + pr.whatif_summary(tco_t, bands, mix)))"),
    ("code", "display(Markdown(provenance(dict(model=model, system=system, gpus=gpus, tokens=tokens, seq_len=seq_len,\n"
             "    global_batch_tokens=global_batch_tokens, mode=mode, n_samples=n_samples, seed=seed, mix_systems=mix_systems,\n"
             "    deadline_days=deadline_days, budget_usd=budget_usd, power_cap_mw=power_cap_mw))))"),
]

HARDWARE_SIZING = [
    ("md", "# Hardware sizing: what to buy to train a model by a deadline\n\n"
           "For each design, the smallest purchase (whole units) whose fastest plan trains the model within the "
           "deadline after failures and checkpoints (goodput), and its racks, power, capex and opex."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-70b\"                 # model id (data/models)\n"
             "systems = [\"hgx-h100-ib-ndr\", \"gb200-nvl72\", \"hgx-b200-ib-xdr\"]  # designs (data/systems)\n"
             "tokens = 1.5e12                         # training tokens\n"
             "deadline_days = 14                      # deadline [days]\n"
             "budget_usd = 100e6                      # capex budget [USD]\n"
             "seq_len = 8192                          # sequence length [tokens]\n"
             "global_batch_tokens = 8_388_608         # tokens per optimizer step\n"
             "mode = \"async\"                         # checkpoint mode: sync or async", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning.sizing import size_designs, sizing_verdict\n"
             "from hnplan.reports import provenance\n\n"
             "df = size_designs(model, systems, tokens, deadline_days, seq_len, global_batch_tokens // seq_len,\n"
             "                  budget_usd=budget_usd, mode=mode)\n"
             "display(Markdown(f\"## {model}: {tokens:.3g} tokens in {deadline_days} days, budget ${budget_usd / 1e6:,.0f}M\"))\n"
             "cols = {\"system\": \"design\", \"gpus\": \"GPUs\", \"racks\": \"racks\", \"facility_power_mw\": \"facility power [MW]\",\n"
             "        \"capex_usd\": \"capex [USD]\", \"opex_usd_per_year\": \"opex [USD/year]\", \"run_usd\": \"run cost [USD]\",\n"
             "        \"energy_mwh\": \"energy [MWh]\", \"co2_t\": \"CO2 [t]\", \"days\": \"days to train\", \"mfu\": \"MFU\", \"goodput\": \"goodput\", \"within_budget\": \"within budget\",\n"
             "        \"status\": \"status\"}\n"
             "display(df[[c for c in cols if c in df]].rename(columns=cols).style.format({\"GPUs\": \"{:,.0f}\",\n"
             "    \"racks\": \"{:,.0f}\", \"facility power [MW]\": \"{:.2f}\", \"capex [USD]\": \"{:,.0f}\",\n"
             "    \"opex [USD/year]\": \"{:,.0f}\", \"run cost [USD]\": \"{:,.0f}\", \"energy [MWh]\": \"{:,.1f}\",\n"
             "    \"CO2 [t]\": \"{:,.1f}\", \"days to train\": \"{:.1f}\",\n"
             "    \"MFU\": \"{:.1%}\", \"goodput\": \"{:.1%}\"}, na_rep=\"-\").hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("code", "ok = df[df[\"status\"] == \"ok\"]\n"
             "plots.show(plots.design_bars(ok, \"gpus\", \"accelerators [GPUs]\"))\n"
             "plots.show(plots.design_bars(ok, \"capex_usd\", \"capex [USD]\"))\n"
             "plots.show(plots.design_bars(ok, \"facility_power_mw\", \"facility power [MW]\"))\n"
             "plots.show(plots.design_bars(ok, \"days\", \"time to train [days]\"))"),
    ("code", "display(Markdown(\"## What this means\\n\" + sizing_verdict(df)))"),
    ("code", "display(Markdown(provenance(dict(model=model, systems=systems, tokens=tokens, deadline_days=deadline_days,\n"
             "    budget_usd=budget_usd, seq_len=seq_len, global_batch_tokens=global_batch_tokens, mode=mode))))"),
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
             "        .set_table_attributes('id=\"key-table\"'))\n"
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

# ---------------------------------------------------------------- report suite: validation
VALIDATION = [
    ("md", "# Validation: hnplan against published measurements\n\n"
           "Every published figure in `data/reference/` that hnplan can predict, with the prediction, the "
           "error, the tolerance the test suite asserts and the role of the row (a *calibration* row is where "
           "a catalog efficiency was read from, so it checks units and algebra only; a *bound* row checks the "
           "measurement sits under a roofline; a *reported* row is a known gap, explained)."),
    ("code", "# Parameters (papermill overrides these)\n"
             "areas = []  # areas to show (communication, compute, memory, reliability, ...); empty: all", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.reports import provenance\n"
             "from hnplan.validation import summary, validation_table, verdict\n\n"
             "df = validation_table(only=areas or None)\n"
             "display(Markdown(\"## What this means\\n\\n\" + verdict(df)))"),
    ("code", "display(summary(df).rename(columns={\"median_abs_error\": \"median |error|\", \"max_abs_error\": \"max |error|\"})\n"
             "        .style.format({\"median |error|\": \"{:.1%}\", \"max |error|\": \"{:.1%}\"}).hide(axis=\"index\"))"),
    ("code", "plots.show(plots.parity_plot(df))"),
    ("code", "cols = [\"area\", \"case\", \"quantity\", \"unit\", \"published\", \"predicted\", \"error\", \"role\", \"tolerance\",\n"
             "        \"within\", \"source\", \"note\"]\n"
             "display(df[cols].style.format({\"published\": \"{:,.4g}\", \"predicted\": \"{:,.4g}\", \"error\": \"{:+.1%}\",\n"
             "                               \"tolerance\": \"{:.2f}\"}, na_rep=\"-\")\n"
             "        .map(lambda v: \"color: #cf222e\" if v is False else \"\", subset=[\"within\"])\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("code", "display(Markdown(provenance(dict(areas=areas))))"),
]

INFERENCE_CAPACITY = [
    ("md", "# Inference capacity: latency, throughput, GPUs and $ per million tokens per design\n\n"
           "For a model and a request shape: the throughput-latency frontier of each design's best serving "
           "layout, the GPUs each design needs to serve a request rate within TTFT and TPOT SLOs, their power "
           "and cost per million output tokens, and how the planner compares with published serving "
           "measurements."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-70b\"                         # model id (data/models) or YAML path\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]  # system ids (data/systems)\n"
             "input_tokens = 2000                            # prompt length [tokens]\n"
             "output_tokens = 500                            # generated tokens per request\n"
             "dtype = \"fp8\"                                  # weights/GEMMs: bf16, fp8 or fp4\n"
             "rates = [1, 10, 100, 1000]                     # request rates [requests/s]\n"
             "ttft_slo_ms = 1000                             # mean time-to-first-token bound [ms]\n"
             "tpot_slo_ms = 50                               # mean time-per-output-token bound [ms]\n"
             "validation_models = [\"llama3.1-8b\", \"llama3.1-70b\", \"llama3.1-405b\", \"deepseek-v3\"]  # rows to validate",
     "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning.inference import (Traffic, capacity_verdict, design_frontiers, gpus_vs_rate,\n"
             "                                       measurements, validation_summary, validation_table)\n"
             "from hnplan.reports import provenance\n\n"
             "fr = design_frontiers(model, systems, input_tokens, output_tokens, dtype)\n"
             "display(Markdown(f\"## {model}, {input_tokens} input / {output_tokens} output tokens, {dtype}\"))\n"
             "plots.show(plots.frontier_figure(fr, f\"{model}: throughput against per-user speed\"))\n"
             "ok = fr[fr[\"status\"] == \"ok\"]\n"
             "peak = ok.loc[ok.groupby(\"system\", sort=False)[\"tokens_per_s_per_gpu\"].idxmax()]\n"
             "cols = {\"system\": \"design\", \"layout\": \"layout\", \"batch\": \"batch\", \"max_batch\": \"max batch\",\n"
             "        \"tokens_per_s_per_gpu\": \"tokens/s per GPU\", \"tpot_s\": \"TPOT [s]\", \"ttft_s\": \"TTFT [s]\",\n"
             "        \"memory_per_gpu_gib\": \"memory per GPU [GiB]\"}\n"
             "display(peak[list(cols)].rename(columns=cols).style.format(\n"
             "    {\"tokens/s per GPU\": \"{:,.0f}\", \"TPOT [s]\": \"{:.4f}\", \"TTFT [s]\": \"{:.3f}\",\n"
             "     \"memory per GPU [GiB]\": \"{:.1f}\"}).hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("code", "rt = gpus_vs_rate(model, systems, rates, Traffic(input_tokens, output_tokens), ttft_slo_ms / 1e3,\n"
             "                  tpot_slo_ms / 1e3, dtype=dtype)\n"
             "display(Markdown(f\"## Serving a request rate within TTFT <= {ttft_slo_ms} ms and TPOT <= {tpot_slo_ms} ms\"))\n"
             "cols = {\"system\": \"design\", \"qps\": \"requests/s\", \"tp\": \"TP\", \"ep\": \"EP\", \"pp\": \"PP\",\n"
             "        \"batch\": \"batch\", \"replicas\": \"replicas\", \"gpus\": \"GPUs\", \"ttft_s\": \"TTFT [s]\",\n"
             "        \"tpot_s\": \"TPOT [s]\", \"facility_power_kw\": \"facility power [kW]\",\n"
             "        \"usd_per_million_tokens\": \"$ per M tokens\", \"status\": \"status\"}\n"
             "display(rt[[c for c in cols if c in rt]].rename(columns=cols).style.format(\n"
             "    {\"requests/s\": \"{:g}\", \"TTFT [s]\": \"{:.3f}\", \"TPOT [s]\": \"{:.4f}\",\n"
             "     \"facility power [kW]\": \"{:,.1f}\", \"$ per M tokens\": \"{:.3f}\"}, na_rep=\"-\").hide(axis=\"index\"))\n"
             "plots.show(plots.gpus_vs_rate_figure(rt))\n"
             "plots.show(plots.cost_per_token_figure(rt))\n"
             "display(Markdown(\"### What this means\\n\\n\" + capacity_verdict(rt, fr)))"),
    ("code", "val = validation_table([m for m in measurements() if m.model in validation_models])\n"
             "display(Markdown(\"## Validation against published serving measurements\\n\\n\" + validation_summary(val)))\n"
             "cols = {\"id\": \"measurement\", \"published\": \"published\", \"modelled\": \"modelled\", \"unit\": \"unit\",\n"
             "        \"error_pct\": \"error [%]\", \"within_tolerance\": \"within band\", \"note\": \"note\"}\n"
             "display(val[list(cols)].rename(columns=cols).style.format(\n"
             "    {\"published\": \"{:,.4g}\", \"modelled\": \"{:,.4g}\", \"error [%]\": \"{:+.1f}\"}).hide(axis=\"index\"))\n"
             "plots.show(plots.serving_validation_figure(val))"),
    ("code", "display(Markdown(provenance(dict(model=model, systems=systems, input_tokens=input_tokens,\n"
             "                                      output_tokens=output_tokens, dtype=dtype, rates=rates,\n"
             "                                      ttft_slo_ms=ttft_slo_ms, tpot_slo_ms=tpot_slo_ms,\n"
             "                                      validation_models=validation_models))))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(DESIGN_COMPARISON), NB / "design_comparison.ipynb")
    print("wrote", NB / "design_comparison.ipynb")
    nbformat.write(notebook(ROOFLINE), NB / "roofline.ipynb")
    print("wrote", NB / "roofline.ipynb")
    for name, cells in (("procurement_whatif", PROCUREMENT_WHATIF), ("hardware_sizing", HARDWARE_SIZING)):
        nbformat.write(notebook(cells), NB / f"{name}.ipynb")
        print("wrote", NB / f"{name}.ipynb")
    nbformat.write(notebook(NETWORK), NB / "network.ipynb")
    nbformat.write(notebook(VALIDATION), NB / "validation.ipynb")
    nbformat.write(notebook(INFERENCE_CAPACITY), NB / "inference_capacity.ipynb")
