"""``hnplan topology``: the network that joins N accelerators of a system, and its bill of materials."""

from __future__ import annotations

import typer

from hnplan.cli._app import app, console, handle_errors, kv_table, print_json, whole_units_text


@app.command()
def topology(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators to join (wired in whole units, as tco buys)"),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Tiers, switch and link counts, transceivers, cables, bisection and diameter of the network."""
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.planning.design import check_fabric_gpus
    from hnplan.planning.network import network_summary

    with handle_errors():
        check_refs({"--system": ("systems", system)})
        check_fabric_gpus(system, gpus, "--gpus")  # the flag and the limit, not the bill of materials' ports
        design = load_catalog().design(system)
        sys_ = design.system
        d = network_summary(design, gpus)
        if json_:
            print_json({"system": sys_.id, "gpus": gpus, **d})
            return
        out = d["bom"]["scaleout"]
        rows = [
            ("GPUs (wired)", whole_units_text(gpus, d["gpus_built"], d["unit_gpus"])),
            ("scale-up domains", f"{d['domains']:,} x {sys_.scaleup_domain_gpus:,} ({sys_.scaleup_topology})"),
            (
                "scale-out tiers",
                f"{d['tiers']['scaleout']} ({sys_.scaleout_topology}, {out['switch_model']}, "
                f"oversubscription {out['oversubscription']:g}:1)",
            ),
            (
                "switches scale-up / scale-out",
                f"{d['switches']['scaleup']:,} / {d['switches']['scaleout']:,} "
                f"(per tier {d['switches']['scaleout_per_tier']})",
            ),
            ("links scale-up / scale-out", f"{d['links']['scaleup']:,} / {d['links']['scaleout']:,}"),
            ("transceivers", f"{d['transceivers']['total']:,}"),
            ("cables", f"{d['cables']['total']:,}"),
            ("bisection", f"{d['bisection_GBps']:,.0f} GB/s per direction"),
            ("diameter", f"{d['diameter_hops']} links"),
            ("nodes the scale-out tiers hold", f"{d['hosts_supported']:,}"),
        ]
        console.print(kv_table(f"network of {gpus:,} x {sys_.id}", rows))
