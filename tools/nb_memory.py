"""Write notebooks/memory.ipynb from its cell list (outputs stay empty).

Usage: python tools/nb_memory.py
"""

from pathlib import Path

import nbformat
from make_notebooks import notebook

NB = Path(__file__).resolve().parents[1] / "notebooks"

MEMORY = [
    ("md", "# Memory per GPU: does it fit, and what spills where?\n\n"
           "The per-GPU footprint of a training plan or a serving replica (weights, gradients, optimizer "
           "states, activations, KV cache, runtime overheads) on each design, against its HBM; what spills "
           "to host memory or NVMe, and the seconds per step to move it next to the compute it must hide behind."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-70b\"                       # model id (data/models) or YAML path\n"
             "mode = \"train\"                               # train or inference\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]  # system ids (data/systems)\n"
             "seq_len = 8192                               # training sequence / serving context [tokens]\n"
             "tp = 8                                       # tensor parallel\n"
             "pp = 4                                       # pipeline parallel (train)\n"
             "dp = 8                                       # data parallel (train)\n"
             "cp = 1                                       # context parallel (train)\n"
             "ep = 1                                       # expert parallel\n"
             "microbatch_size = 1                          # sequences per micro-batch (train)\n"
             "num_microbatches = 16                        # micro-batches per step (train)\n"
             "zero = 1                                     # ZeRO stage 0-3 (train)\n"
             "recompute = \"selective\"                      # none, selective or full (train)\n"
             "accounting = \"megatron-bf16\"                 # bytes per parameter (hnplan.memory.ACCOUNTINGS)\n"
             "dropout = False                              # store dropout masks (GPT-style training)\n"
             "batch = 32                                   # concurrent sequences (inference)\n"
             "dtype = \"bf16\"                               # weight dtype (inference)\n"
             "kv_dtype = \"bf16\"                            # KV-cache dtype (inference)\n"
             "grid_gpus = 64                               # GPUs of the (TP, PP) fit map (train)", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.memory import breakdown_table, fit_grid, memory_verdict, tiers_frame\n"
             "from hnplan.reports import provenance\n\n"
             "params = dict(model=model, mode=mode, systems=systems, seq_len=seq_len, tp=tp, pp=pp, dp=dp, cp=cp,\n"
             "              ep=ep, microbatch_size=microbatch_size, num_microbatches=num_microbatches, zero=zero,\n"
             "              recompute=recompute, accounting=accounting, dropout=dropout, batch=batch, dtype=dtype,\n"
             "              kv_dtype=kv_dtype, grid_gpus=grid_gpus)\n"
             "plan = {k: v for k, v in params.items() if k not in (\"model\", \"mode\", \"systems\", \"grid_gpus\")}\n"
             "df = breakdown_table(model, systems, mode, **plan)\n"
             "display(Markdown(f\"## {model}, {mode}: memory per GPU\"))\n"
             "display(Markdown(\"### What this means\\n\\n\" + memory_verdict(df)))"),
    ("code", "cols = {\"system\": \"design\", \"params_gib\": \"weights [GiB]\", \"grads_gib\": \"gradients [GiB]\",\n"
             "        \"optimizer_gib\": \"optimizer [GiB]\", \"activations_gib\": \"activations [GiB]\",\n"
             "        \"kv_cache_gib\": \"KV cache [GiB]\", \"overhead_gib\": \"overheads [GiB]\",\n"
             "        \"total_gib\": \"total [GiB]\", \"hbm_gib\": \"HBM [GiB]\", \"status\": \"status\",\n"
             "        \"spill_time_s\": \"spill [s/step]\", \"compute_time_s\": \"compute [s/step]\"}\n"
             "table = df[list(cols)].rename(columns=cols)\n"
             "display(table.style.format({c: \"{:,.2f}\" for c in cols.values() if \"GiB\" in c or \"s/step\" in c})\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))\n"
             "display(tiers_frame(systems).rename(columns={\"capacity_gib\": \"capacity per GPU [GiB]\",\n"
             "                                             \"bw_GBps\": \"bandwidth per GPU [GB/s]\"}).style\n"
             "        .format(precision=1).hide(axis=\"index\"))"),
    ("code", "plots.show(plots.memory_breakdown_bars(df, f\"{model} ({mode}): memory per GPU against HBM\"))\n"
             "axes = (\"tp\", \"pp\") if mode == \"train\" else (\"context\", \"batch\")\n"
             "for s in systems:\n"
             "    grid = fit_grid(model, s, mode, gpus=grid_gpus, **plan)\n"
             "    plots.show(plots.fit_map(grid, *axes, title=f\"Does it fit on {s}? ({mode})\"))"),
    ("code", "display(Markdown(provenance(params)))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(MEMORY), NB / "memory.ipynb")
    print("wrote", NB / "memory.ipynb")
