"""Write notebooks/design_space.ipynb from its cell list (outputs stay empty).

Usage: python tools/nb_design_space.py
"""

from pathlib import Path

import nbformat
from make_notebooks import notebook

NB = Path(__file__).resolve().parents[1] / "notebooks"

DESIGN_SPACE = [
    ("md", "# Design space: time-to-train, TCO and power across designs and uncertain inputs\n\n"
           "Reads the Parquet dataset of a design-space sweep (`hnplan sweep SPEC --out DIR`; every point through "
           "the training planner and the procurement model) and shows the Pareto front of time-to-train, TCO and "
           "facility power, what drives them (first-order Sobol indices of the sampled inputs), and the cheapest "
           "design that meets a deadline with a stated probability."),
    ("code", "# Parameters (papermill overrides these)\n"
             "spec = \"example\"          # sweep spec: id in data/sweeps or YAML path\n"
             "dataset = \"\"              # dataset folder; empty: sweeps/<spec id> at the project root\n"
             "run_missing = True        # evaluate the spec's points missing from the dataset first (resumable)\n"
             "workers = 2               # Dask workers (threads) for those points\n"
             "deadline_days = 40.0      # training deadline [days]\n"
             "probability = 0.9         # required chance of meeting it [0-1]", "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan.catalog.sweeps import load_sweep_spec\n"
             "from hnplan.planning import design_space as ds\n"
             "from hnplan.planning.sweep import default_dataset, read_sweep, run_sweep\n"
             "from hnplan.plots import show\n"
             "from hnplan.plots.sweep import deadline_figure, pareto_figure, sobol_bars\n"
             "from hnplan.reports import provenance\n\n"
             "sp = load_sweep_spec(spec)\n"
             "out = dataset or default_dataset(sp.id)\n"
             "if run_missing:\n"
             "    run = run_sweep(sp, out, workers=workers, processes=False, progress=False)\n"
             "    display(Markdown(f\"{run.evaluated} points evaluated now, {run.skipped} already in the dataset.\"))\n"
             "df = ds.with_design(read_sweep(out))\n"
             "df = df[df[\"spec_id\"] == sp.id]\n"
             "summary = ds.design_summary(df)\n"
             "front = ds.design_pareto(summary)\n"
             "sobol = ds.sobol_indices(df)\n"
             "table = ds.deadline_table(df, deadline_days)\n"
             "display(Markdown(f\"## {sp.name}\\n\\n{len(df):,} points ({sp.sampling}, {sp.samples} draws per design, \"\n"
             "                 f\"seed {sp.seed}) over {len(summary)} designs; {int(df['error'].notna().sum())} failed.\"))"),
    ("code", "cols = {\"design\": \"design\", \"mfu\": \"MFU\", \"days_mean\": \"time to train, mean [days]\",\n"
             "        \"days_p90\": \"time to train, p90 [days]\", \"tco_mean_usd\": \"TCO, mean [USD]\",\n"
             "        \"facility_power_w\": \"facility power [W]\", \"points\": \"points\", \"failed\": \"failed\"}\n"
             "key = summary[list(cols)].rename(columns=cols)\n"
             "key.insert(1, \"Pareto front\", summary[\"design\"].isin(front[\"design\"]).map({True: \"yes\", False: \"\"}))\n"
             "display(key.style.format({\"MFU\": \"{:.1%}\", \"time to train, mean [days]\": \"{:.1f}\",\n"
             "                          \"time to train, p90 [days]\": \"{:.1f}\", \"TCO, mean [USD]\": \"{:,.0f}\",\n"
             "                          \"facility power [W]\": \"{:,.0f}\"}, na_rep=\"-\").hide(axis=\"index\")\n"
             "        .set_table_attributes('id=\"key-table\"'))"),
    ("md", "## Pareto front\n\nEach dot is one draw of the uncertain inputs; stars are design means on the front "
           "(no other design is faster, cheaper and lower-power at once), crosses the designs beaten on all three."),
    ("code", "show(pareto_figure(df, summary, front))"),
    ("md", "## What drives time-to-train and TCO\n\nFirst-order Sobol indices of the sampled inputs within each "
           "design, estimated from the sweep's own draws (given-data estimator, Plischke, Borgonovo & Smith 2013); "
           "`noise_sd` is the spread of the estimate for an input that does not matter."),
    ("code", "if sobol.empty:\n"
             "    display(Markdown(\"No sampled inputs (a grid sweep): no sensitivity to show.\"))\n"
             "else:\n"
             "    show(sobol_bars(sobol, \"days_to_train\", \"time-to-train\"))\n"
             "    show(sobol_bars(sobol, \"tco_usd\", \"TCO\"))\n"
             "    display(sobol.pivot_table(index=\"input\", columns=\"output\", values=\"S1\", aggfunc=\"mean\")\n"
             "            .style.format(\"{:.2f}\"))"),
    ("md", "## The cheapest design that meets the deadline"),
    ("code", "show(deadline_figure(table, deadline_days, probability))\n"
             "display(table.style.format({\"p_meet\": \"{:.0%}\", \"cost_mean_usd\": \"{:,.0f}\", \"days_mean\": \"{:.1f}\"})\n"
             "        .hide(axis=\"index\"))"),
    ("code", "display(Markdown(\"## What this means\\n\" + ds.summary_text(summary, front, sobol, table, deadline_days,\n"
             "                                                             probability)))"),
    ("code", "display(Markdown(provenance(dict(spec=spec, dataset=str(out), deadline_days=deadline_days,\n"
             "                                  probability=probability))))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(DESIGN_SPACE), NB / "design_space.ipynb")
