"""``hnplan tco``: power, racks, capex, opex, TCO and $ per GPU-hour of one design."""

from __future__ import annotations

import typer

from hnplan.catalog import load_catalog
from hnplan.cli._app import app, console, handle_errors, kv_table, print_json
from hnplan.planning.design import resolve_utilisation, tco_summary


@app.command()
def tco(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators (bought in whole units)"),
    years: float = typer.Option(None, "--years", min=0.01, help="amortisation period [years] (default facility.yaml)"),
    pue: float = typer.Option(None, "--pue", min=1.0, help="PUE [ratio] (default by cooling, facility.yaml)"),
    utilisation: str = typer.Option(
        "1.0",
        "--utilisation",
        help="share of hours the cluster runs jobs [0-1], or 'simulated': the useful utilisation of a short "
        "cached simulation of the design under --mix",
    ),
    mix: str = typer.Option("default", "--mix", help="job mix of --utilisation simulated (data/cluster_mixes/)"),
    electricity: float = typer.Option(None, "--electricity-usd-per-kwh", min=0.0, help="electricity price [USD/kWh]"),
    staff: float = typer.Option(0.0, "--staff-usd-per-year", min=0.0, help="operations staff [USD/year]"),
    availability: float = typer.Option(
        None,
        "--availability",
        min=0.5,
        max=0.999999,
        help="also buy the spare GPUs that keep GPUS whole with this probability (e.g. 0.99)",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Total cost of ownership of GPUS accelerators of SYSTEM with their scale-out network."""
    with handle_errors():
        cat = load_catalog()
        u, source = resolve_utilisation(utilisation, cat.system(system).id, gpus, mix, cat)
        d = tco_summary(
            cat.design(system),
            gpus,
            cat,
            years=years,
            pue=pue,
            utilisation=u,
            electricity_usd_per_kwh=electricity,
            staff_usd_per_year=staff,
            availability=availability,
        )
        d["utilisation_source"] = source
        if json_:
            print_json(d)
            return
        rows = [
            ("GPUs (bought)", f"{d['gpus']:,} ({d['gpus_bought']:,}, of which {d['spare_gpus']:,} spares)"),
            (
                "IT / facility power",
                f"{d['it_power_kw']:,.0f} kW / {d['facility_power_kw']:,.0f} kW (PUE {d['pue']:.2f})",
            ),
            (
                "racks",
                f"{d['racks']:,} at {d['kw_per_rack']:.1f} kW per rack (limit {d['rack_limit_kw']:g} kW"
                + (", EXCEEDED by one node)" if d["over_rack_limit"] else ")"),
            ),
            (
                "capex",
                f"${d['capex_usd'] / 1e6:,.1f}M (systems {d['systems_usd'] / 1e6:,.1f}, network "
                f"{d['network_usd'] / 1e6:,.1f}, facility {d['facility_usd'] / 1e6:,.1f})",
            ),
            ("opex per year", f"${d['opex_usd_per_year'] / 1e6:,.2f}M (energy {d['energy_usd_per_year'] / 1e6:,.2f})"),
            (f"TCO over {d['years']:g} years", f"${d['tco_usd'] / 1e6:,.1f}M"),
            (
                "cost per GPU-hour",
                f"${d['usd_per_gpu_hour']:.2f} at {d['utilisation']:.0%} utilisation"
                + (f" ({source})" if source != "given" else ""),
            ),
            ("deployment", f"{d['deploy_days']:.1f} days (idle capital ${d['idle_capital_usd'] / 1e6:,.2f}M)"),
        ]
        if d["storage"]:
            rows.append(
                (
                    "storage",
                    f"{d['storage_units']:,} x {d['storage']} (${d['storage_usd'] / 1e6:,.2f}M, {d['storage_kw']:,.0f} kW)",
                )
            )
        console.print(kv_table(f"TCO of {gpus:,} x {d['system']}", rows))
