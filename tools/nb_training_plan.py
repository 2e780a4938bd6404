"""Write notebooks/training_plan.ipynb from its cell list (outputs stay empty).

Usage: python tools/nb_training_plan.py
"""

import nbformat
from make_notebooks import NB, notebook

TRAINING_PLAN = [
    ("md", "# Training plan: the best parallel plan per design\n\n"
           "For one model and job, the fastest plan that fits on each design (TP, PP, DP, CP, EP, virtual "
           "stages, micro-batch, ZeRO, recomputation searched over every valid combination), where its step "
           "time goes, how throughput scales with the GPU count, the top candidates, and the planner against "
           "published runs."),
    ("code", "# Parameters (papermill overrides these)\n"
             "model = \"llama3.1-405b\"                       # model id (data/models) or YAML path\n"
             "systems = [\"gb200-nvl72\", \"hgx-h100-ib-ndr\"]   # system ids (data/systems)\n"
             "gpus = 16128                                  # accelerators per design (multiple of 72 and 8)\n"
             "seq_len = 8192                                # sequence length [tokens]\n"
             "global_batch_tokens = 16_777_216              # tokens per optimizer step\n"
             "dtype = \"bf16\"                                # GEMM dtype: bf16 or fp8\n"
             "scaling_gpus = [1152, 2304, 4608, 9216, 16128]  # GPU counts of the scaling curve\n"
             "top_k = 20                                    # candidates listed for the first design\n"
             "validation_runs = None                        # run ids of data/validation (None: all)", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning.training_tables import best_plans, plan_label, scaling_curve, top_candidates, training_verdict\n"
             "from hnplan.planning.validation import validation_table\n"
             "from hnplan.reports import provenance\n\n"
             "batch = global_batch_tokens // seq_len\n"
             "best = best_plans(model, systems, gpus, seq_len, batch, dtype)\n"
             "display(Markdown(f\"## {model} on {gpus:,} GPUs per design, {global_batch_tokens:,} tokens per step\"))\n"
             "ok = best[best[\"status\"] == \"ok\"].copy()\n"
             "ok[\"plan\"] = [plan_label(r) for _, r in ok.iterrows()]\n"
             "cols = {\"system\": \"design\", \"plan\": \"plan\", \"step_time_s\": \"step time [s]\", \"tokens_per_s\": \"tokens/s\",\n"
             "        \"mfu\": \"MFU\", \"model_tflops_per_gpu\": \"model TFLOP/s per GPU\", \"memory_per_gpu_gib\": \"memory [GiB]\",\n"
             "        \"searched\": \"candidates\", \"feasible\": \"fit\"}\n"
             "display(ok[list(cols)].rename(columns=cols).style.format({\"step time [s]\": \"{:.2f}\", \"tokens/s\": \"{:,.0f}\",\n"
             "        \"MFU\": \"{:.1%}\", \"model TFLOP/s per GPU\": \"{:.0f}\", \"memory [GiB]\": \"{:.1f}\"})\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))\n"
             "plots.show(plots.step_breakdown_bar(ok, \"Step-time breakdown of the best plan\"))"),
    ("code", "curve = scaling_curve(model, systems, scaling_gpus, seq_len, batch, dtype)\n"
             "plots.show(plots.scaling_figure(curve, f\"{model}: best-plan throughput against GPU count\"))"),
    ("code", "top = top_candidates(model, systems[0], gpus, seq_len, batch, dtype, k=top_k)\n"
             "display(Markdown(f\"### The {len(top)} fastest plans on {systems[0]}\"))\n"
             "display(top.style.format({\"step_time_s\": \"{:.3f}\", \"tokens_per_s\": \"{:,.0f}\", \"mfu\": \"{:.1%}\",\n"
             "                          \"memory_per_gpu_gib\": \"{:.1f}\"}).hide(axis=\"index\"))"),
    ("code", "val = validation_table(ids=validation_runs)\n"
             "display(Markdown(\"### The planner against published runs\"))\n"
             "display(val[[\"id\", \"metric\", \"published\", \"predicted\", \"error_pct\", \"expect\", \"plan\", \"source\"]]\n"
             "        .style.format({\"published\": \"{:,.1f}\", \"predicted\": \"{:,.1f}\", \"error_pct\": \"{:+.1f}\"})\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"validation\"'))\n"
             "plots.show(plots.training_validation_figure(val))\n"
             "gaps = val[val[\"expect\"] == \"gap\"].drop_duplicates(\"gap_reason\")\n"
             "display(Markdown(\"\\n\\n\".join(f\"**{r.id} and similar** ({r.error_pct:+.0f}%): {r.gap_reason}\"\n"
             "                                for r in gaps.itertuples())))"),
    ("code", "within = val[\"within\"].sum()\n"
             "display(Markdown(\"### What this means\\n\\n\" + training_verdict(best) + \"\\n\\n\"\n"
             "    f\"Against published runs, {within} of {len(val)} are within their tolerance; the others are \"\n"
             "    \"documented gaps of the compute and communication models listed above, not tuned away.\"))"),
    ("code", "display(Markdown(provenance(dict(model=model, systems=systems, gpus=gpus, seq_len=seq_len,\n"
             "    global_batch_tokens=global_batch_tokens, dtype=dtype, scaling_gpus=scaling_gpus, top_k=top_k,\n"
             "    validation_runs=validation_runs))))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(TRAINING_PLAN), NB / "training_plan.ipynb")
    print("wrote", NB / "training_plan.ipynb")
