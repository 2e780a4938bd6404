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

if __name__ == "__main__":
    nbformat.write(notebook(DESIGN_COMPARISON), NB / "design_comparison.ipynb")
    print("wrote", NB / "design_comparison.ipynb")
