"""``hnplan tco``: power, racks, capex, opex, TCO and $ per GPU-hour of one design."""

from __future__ import annotations

from contextlib import contextmanager

import typer

from hnplan.cli._app import app, console, err_console, handle_errors, kv_table, print_json, whole_units_text
from hnplan.errors import HnplanError
from hnplan.units import format_usd as usd


def check_economics(flags: dict[str, tuple[str, float | None]]) -> None:
    """Refuse an economic input outside the range where the cost model means something
    (:data:`hnplan.catalog.schemas.WHATIF_RANGES`: a lifetime of a million years, a PUE of 50), naming the flag.
    ``flags``: flag -> (what-if input, value or None when not given).

    Raises
    ------
    InputError
        ``--years must be <= 15; got 1e+06``.
    """
    from hnplan.catalog.schemas import whatif_range_problem
    from hnplan.errors import InputError

    for flag, (name, value) in flags.items():
        problem = None if value is None else whatif_range_problem(name, float(value))
        if problem is not None:
            raise InputError(flag + problem[len(name) :])


@app.command()
def tco(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators (bought in whole units)"),
    years: float = typer.Option(None, "--years", min=0.01, help="amortisation period [years] (default facility.yaml)"),
    pue: float = typer.Option(None, "--pue", min=1.0, help="PUE [ratio] (default by cooling, facility.yaml)"),
    utilisation: str = typer.Option(
        "1.0",
        "--utilisation",
        help="share of hours the cluster runs jobs [0-1], or 'simulated': the useful utilisation of a cached "
        "steady-state simulation of the design under --mix (14 simulated days for the default mix; the first call takes half a minute (1,024 H100) to a minute (1,152 GB200) of CPU on the reference machine, 2-4 minutes on a slower one; later calls read the cache)",
    ),
    mix: str | None = typer.Option(
        None, "--mix", help="job mix of --utilisation simulated (data/cluster_mixes/); default: default"
    ),
    electricity: float = typer.Option(
        None, "--electricity-usd-per-kwh", min=0.0, help="electricity price [USD/kWh] (default facility.yaml)"
    ),
    staff: float = typer.Option(
        0.0, "--staff-usd-per-year", min=0.0, help="operations staff [USD/year], at most 1e10 (ten billion)"
    ),
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
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.catalog.schemas import MAX_STAFF_USD_PER_YEAR
    from hnplan.errors import InputError
    from hnplan.planning.design import check_fabric_gpus, resolve_utilisation, tco_summary

    with handle_errors():
        check_economics(
            {
                "--years": ("years", years),
                "--pue": ("pue", pue),
                "--electricity-usd-per-kwh": ("electricity_usd_per_kwh", electricity),
            }
        )
        if staff > MAX_STAFF_USD_PER_YEAR:
            raise InputError(
                f"--staff-usd-per-year must be <= {MAX_STAFF_USD_PER_YEAR:.0e} (ten billion USD a year); got {staff:g}"
            )
        check_refs({"--system": ("systems", system)})
        if mix is not None and str(utilisation).strip().lower() != "simulated":  # it would change nothing
            raise InputError(
                f"--mix {mix}: a job mix applies only with --utilisation simulated; got --utilisation {utilisation}"
            )
        cat = load_catalog()
        sid = cat.system(system).id
        check_fabric_gpus(system, gpus, "--gpus", cat)  # before a simulated utilisation's run
        if mix is not None:  # an unknown id or a bad file names the flag, as cluster simulate's --mix does
            from hnplan.catalog.mixes import cluster_mix
            from hnplan.errors import CatalogError

            try:
                cluster_mix(mix, cat)
            except CatalogError as exc:
                raise CatalogError(f"--mix: {exc}", path=exc.path, entry=exc.entry, field=exc.field) from None
        if str(utilisation).strip().lower() == "simulated":
            with _simulation_progress(sid, gpus, mix or "default", cat) as progress:
                u, source = resolve_utilisation(utilisation, sid, gpus, mix or "default", cat, progress=progress)
        else:
            u, source = resolve_utilisation(utilisation, sid, gpus, mix or "default", cat)
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
            (
                "GPUs (bought)",
                whole_units_text(d["gpus"], d["gpus_bought"], d["unit_gpus"])
                + (f", of which {d['spare_gpus']:,} spares" if d["spare_gpus"] else ""),
            ),
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
                f"{usd(d['capex_usd'])} (systems {usd(d['systems_usd'])}, network {usd(d['network_usd'])}, "
                f"facility {usd(d['facility_usd'])})",
            ),
            ("opex per year", f"{usd(d['opex_usd_per_year'])} (energy {usd(d['energy_usd_per_year'])})"),
            (f"TCO over {d['years']:g} years", usd(d["tco_usd"])),
            (
                "cost per GPU-hour",
                f"{usd(d['usd_per_gpu_hour'])} at {_percent(d['utilisation'])} utilisation"
                + (f" ({source})" if source != "given" else ""),
            ),
            ("deployment", f"{d['deploy_days']:.1f} days (idle capital {usd(d['idle_capital_usd'])})"),
        ]
        if d["storage"]:
            rows.append(
                (
                    "storage",
                    f"{d['storage_units']:,} x {d['storage']} ({usd(d['storage_usd'])}, {d['storage_kw']:,.0f} kW)",
                )
            )
        console.print(kv_table(f"TCO of {gpus:,} x {d['system']}", rows))
        if "cost_note" in d:  # no price: the costs above are n/a, and why
            console.print(f"cost {d['cost_note']}", highlight=False, markup=False)


def _percent(share: float) -> str:
    """A share as per cent: whole where that is exact (85%), else three significant digits (85.5%, 0.1%,
    1e-298%), not a given 0.001 or 1e-300 rounded to the 0% beside a cost per GPU-hour it multiplies a thousandfold.

    >>> _percent(0.85), _percent(0.855), _percent(0.001), _percent(1e-300), _percent(1.0)
    ('85%', '85.5%', '0.1%', '1e-298%', '100%')
    """
    pct = share * 100
    exact = pct == 0 or (pct >= 1 and abs(round(pct) - pct) < 1e-9)
    return f"{pct:.0f}%" if exact else f"{pct:.3g}%"


@contextmanager
def _simulation_progress(system: str, gpus: int, mix: str, cat):
    """A progress bar on stderr (a terminal only) for the runs of ``--utilisation simulated`` that are not cached,
    with the time they take about (:func:`hnplan.cli._progress.delayed_progress`: shown once the runs have lasted
    a second, so nothing when every run is read back). Yields the callback, or None off a terminal."""
    from hnplan.cluster.utilisation import REPLICATIONS, simulation_seconds

    if not err_console.is_terminal:
        yield None
        return
    from hnplan.cli._progress import delayed_progress

    try:
        about = f", about {simulation_seconds(system, gpus, mix, cat):.0f} s the first time (then cached)"
    except HnplanError:  # the simulation says why it cannot run
        about = ""
    with delayed_progress(f"simulating the utilisation of mix {mix}: {REPLICATIONS} runs{about}") as update:
        yield update
