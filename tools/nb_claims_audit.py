"""Write notebooks/claims_audit.ipynb from its cell list (outputs stay empty).

Usage: python tools/nb_claims_audit.py
"""

from pathlib import Path

import nbformat
from make_notebooks import notebook

NB = Path(__file__).resolve().parents[1] / "notebooks"

CLAIMS_AUDIT = [
    ("md", "# Claims audit: the supernode seed documents, tested\n\n"
           "Every numeric claim of the seed documents (`shared/seeds/`), each as a stated experiment: the "
           "parameters and the grid it runs over (model size, GPU count, NIC rate, design), a same-chip "
           "baseline where the claim is about the architecture (the server design carrying the supernode's own "
           "accelerator and NIC, so that a newer chip is never credited to the fabric), and a verdict computed "
           "from the planners' numbers: **holds** (at every grid point), **does not hold** (at none; the "
           "condition names the closest point), **holds under conditions** (the condition names the region), "
           "or **not testable** (the condition names the missing quantity)."),
    ("code", "# Parameters (papermill overrides these)\n"
             "supernode = \"gb200-nvl72\"                 # the supernode design (data/systems)\n"
             "traditional = \"hgx-b200-ib-xdr\"           # the server design, given the supernode's chip and NIC\n"
             "older = \"hgx-h100-ib-ndr\"                 # an older-chip design, shown beside (never the verdict)\n"
             "seed_supernode = \"seed-40card\"            # the seeds' own 40-card node\n"
             "models = [\"megatron-18.4b\", \"megatron-145.6b\", \"megatron-1t\"]  # model grid (data/models)\n"
             "gpus = [576, 2304, 9216]                    # GPU-count grid (multiples of 72 and 8)\n"
             "hundred_b_models = [\"megatron-76.1b\", \"megatron-145.6b\"]  # the 100B-class claims\n"
             "hundred_b_gpus = [576, 1152, 2304]          # 'hundreds of GPUs'\n"
             "ten_k_gpus = 10080                          # the seeds' '10,000 cards' (140 racks, 1,260 servers)\n"
             "vision_gpus = [4608, 9216]                  # GPU counts for the 10T stand-in\n"
             "trillion_gpus = [1296, 2592, 4104]          # supernode GPU counts for the 1T / 7-day claim\n"
             "nic_gbps = [100, 200, 400]                  # NIC rates per GPU [Gb/s]\n"
             "nic_models = [\"megatron-18.4b\", \"megatron-145.6b\", \"megatron-1t\"]  # NIC-claim models\n"
             "nic_gpus = [576, 2304]                      # NIC-claim GPU counts\n"
             "scoring_models = [\"megatron-1.7b\", \"megatron-7.5b\", \"megatron-39.1b\"]  # scoring-claim models\n"
             "iops_models = [\"megatron-1.7b\", \"megatron-18.4b\", \"megatron-145.6b\", \"megatron-1t\"]  # IOPS claim\n"
             "storage = \"ddn-ai400x2\"                   # storage units for the IOPS claim (data/storage)",
     "parameters"),
    ("code", "from IPython.display import Markdown, display\n"
             "from hnplan import plots\n"
             "from hnplan.planning.claims import AuditSetup, audit, audit_summary, claims_table\n"
             "from hnplan.reports import provenance\n\n"
             "params = dict(supernode=supernode, traditional=traditional, older=older, seed_supernode=seed_supernode,\n"
             "              models=tuple(models), gpus=tuple(gpus), hundred_b_models=tuple(hundred_b_models),\n"
             "              hundred_b_gpus=tuple(hundred_b_gpus), ten_k_gpus=ten_k_gpus, vision_gpus=tuple(vision_gpus),\n"
             "              trillion_gpus=tuple(trillion_gpus), nic_gbps=tuple(nic_gbps), nic_models=tuple(nic_models),\n"
             "              nic_gpus=tuple(nic_gpus), scoring_models=tuple(scoring_models), iops_models=tuple(iops_models),\n"
             "              storage=storage)\n"
             "claims = audit(AuditSetup(**params))\n"
             "display(Markdown(\"## What this means\\n\\n\" + audit_summary(claims)))"),
    ("code", "colour = {\"holds\": \"#1a7f37\", \"does not hold\": \"#cf222e\", \"holds under conditions\": \"#9a6700\",\n"
             "          \"not testable\": \"#6e7781\"}\n"
             "display(claims_table(claims).style.map(lambda v: f\"color: {colour.get(v, '')}; font-weight: bold\"\n"
             "                                       if v in colour else \"\", subset=[\"verdict\"])\n"
             "        .hide(axis=\"index\").set_table_attributes('id=\"key-table\"'))"),
    ("md", "## Claim by claim\n\n"
           "Each claim: its seed file, the experiment, the verdict and its condition, the chart of its metric over "
           "the grid (filled markers where the claim holds, open where it does not, the claim's threshold "
           "dashed) and the numbers behind it."),
    ("code", "for c in claims:\n"
             "    display(Markdown(f\"### `{c.id}` ({c.seed_file}): {c.verdict}\\n\\n> {c.claim}\\n\\n\"\n"
             "                     f\"**Experiment.** {c.experiment}\\n\\n**Condition.** {c.condition}\"))\n"
             "    fig = plots.claim_figure(c)\n"
             "    if fig is not None:\n"
             "        plots.show(fig)\n"
             "    if len(c.points):\n"
             "        display(c.points.style.format(precision=3, thousands=\",\").hide(axis=\"index\"))\n"
             "    elif c.numbers:\n"
             "        display(Markdown(\"; \".join(f\"{k} = {v:,.4g}\" for k, v in c.numbers.items())))"),
    ("code", "display(Markdown(provenance(params)))"),
]

if __name__ == "__main__":
    nbformat.write(notebook(CLAIMS_AUDIT), NB / "claims_audit.ipynb")
    print("wrote", NB / "claims_audit.ipynb")
