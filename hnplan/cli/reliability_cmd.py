"""``hnplan reliability``: interruptions, failure unit, checkpoints, restart and goodput of a job."""

from __future__ import annotations

import math

import typer

from hnplan import units
from hnplan.cli._app import app, console, count, handle_errors, kv_table, print_json
from hnplan.formatting import counted, format_amount


@app.command()
def reliability(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators in the job"),
    gpus_bought: int = typer.Option(
        None,
        "--gpus-bought",
        min=1,
        help="GPUs of the units bought (default: the whole units that hold --gpus, as tco, size and compare buy "
        "them): the idle whole nodes stand in for failed ones (64 of each NVL72 rack's 72 train: 2 spare trays a rack)",
    ),
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    mode: str = typer.Option("async", "--mode", help="checkpoint mode: sync or async"),
    rate_factor: float = typer.Option(1.0, "--rate-factor", min=0.0, help="multiplies every failure rate"),
    write_gbps: float = typer.Option(
        None, "--write-GBps-per-node", min=0.001, help="storage write bandwidth [GB/s per node]"
    ),
    storage: str = typer.Option(
        None, "--storage", help="storage id or YAML path for the checkpoints (default the system's storage)"
    ),
    storage_units: int = typer.Option(None, "--storage-units", min=1, help="units of that storage"),
    tokens_per_s: float = typer.Option(
        None,
        "--tokens-per-s",
        parser=count(minimum=0),
        metavar="COUNT",
        help="job throughput [tokens/s] (2.5M, 2.5e6): its data loader shares the storage",
    ),
    checkpoint_storage_share: float = typer.Option(
        None,
        "--checkpoint-storage-share",
        help="largest fraction of the time, in (0, 1], the storage may spend writing checkpoints: the interval is at "
        "least the write time over it (default reliability.yaml's 0.1, a labelled assumption)",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Mean time between interruptions, checkpoint size/time/interval, restart time and goodput."""
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.cli.tco_cmd import check_economics
    from hnplan.errors import InputError
    from hnplan.planning.design import (
        SPARE_QUANTILE,
        check_fabric_gpus,
        check_gpus_bought,
        checkpoint_fits_note,
        estimate_reliability,
        failure_rates_basis,
        packed_purchase_note,
        whole_unit_gpus,
    )

    with handle_errors():
        if gpus_bought is not None and gpus_bought < gpus:
            raise InputError(f"--gpus-bought ({gpus_bought:,}) must be at least --gpus ({gpus:,})")
        check_economics(
            {
                "--rate-factor": ("rate_factor", rate_factor),
                "--write-GBps-per-node": ("write_GBps_per_node", write_gbps),
            }
        )
        check_refs({"--system": ("systems", system), "--model": ("models", model), "--storage": ("storage", storage)})
        # flags the estimate would not read: a per-node write rate replaces any storage; units need a storage
        if write_gbps is not None and (storage is not None or storage_units is not None):
            given = "--storage" if storage is not None else "--storage-units"
            raise InputError(
                f"give one of --write-GBps-per-node and {given}: a write rate per node replaces the storage's figures"
            )
        sys_entry = load_catalog().system(system)
        if storage_units is not None and storage is None and sys_entry.storage is None:
            raise InputError(
                f"--storage-units counts units of a --storage, and {sys_entry.id} names none: give --storage too "
                "(ids: hnplan catalog list storage)"
            )
        check_fabric_gpus(system, gpus, "--gpus")
        if gpus_bought is not None:  # whole units (an equal count too), at most one scale-out fabric's worth
            check_gpus_bought(system, gpus, gpus_bought)
        est = estimate_reliability(
            system,
            gpus,
            model,
            mode,
            load_catalog(),
            rate_factor,
            write_gbps,
            storage=storage,
            storage_units=storage_units,
            tokens_per_s=tokens_per_s,
            checkpoint_storage_share=checkpoint_storage_share,
            gpus_bought=whole_unit_gpus(system, gpus) if gpus_bought is None else gpus_bought,
        )
        d = est.to_dict()
        d["failure_rates"] = failure_rates_basis(system)  # measured on which accelerator; carried where not
        note = checkpoint_fits_note(system, gpus, d["checkpoint_bytes"])  # the estimate reads only the model's size
        if note:
            d["fits_note"] = note
        if gpus_bought is None and (packed := packed_purchase_note(system, gpus, d["gpus_bought"])):
            d["purchase_note"] = packed  # the default purchase is plan-agnostic: what a packed plan buys
        if json_:
            print_json(d)
            return
        rows = [
            ("mean time between interruptions", _mtbi_text(d)),
            *([("failure rates", d["failure_rates"]["note"])] if d["failure_rates"]["carried"] else []),
            (
                "failure unit",
                f"{counted(d['failure_unit_gpus'], 'GPU')}; {counted(d['spare_gpus'], 'spare GPU')} for "
                f"{SPARE_QUANTILE:.0%} availability",
            ),
            *_idle_spares(d),
            ("checkpoint", _checkpoint_text(d, gpus)),
            ("checkpoint interval", _interval_text(d)),
            *_why_so_often(d, est.goodput_at(WHAT_IF_INTERVAL_S)),
            ("restart", f"{d['restart_s']:,.0f} s"),
            (
                "goodput",
                f"{d['goodput']:.1%} (job {d['job_goodput']:.1%}; {_in_repair(d['gpus_in_repair'])} GPUs in repair on "
                "average)",
            ),
        ]
        if d["storage"]:
            sto = d["storage"]
            rows.append(
                (
                    "storage",
                    f"{sto['units']} x {sto['storage']}; data loader {units.Bps_to_GBps(sto['loader_read_Bps']):.3g} GB/s, "
                    f"{sto['loader_iops']:,.0f} IOPS; checkpoints get {sto['write_share']:.0%} of its time",
                )
            )
        console.print(kv_table(f"{d['model']} on {gpus:,} x {d['system']}", rows))
        for key in ("fits_note", "purchase_note"):
            if d.get(key):
                console.print(f"note: {d[key]}", highlight=False)


def _idle_spares(d: dict) -> list[tuple[str, str]]:
    """One row, when GPUs beyond the job's were bought: the idle whole nodes that stand in for failed ones."""
    if d["gpus_bought"] == d["gpus"]:
        return []
    return [
        (
            "idle spares",
            f"{d['gpus_bought'] - d['gpus']:,} of {d['gpus_bought']:,} GPUs bought idle: "
            f"{counted(d['spare_nodes'], 'whole node')} per pool stand{'s' if d['spare_nodes'] == 1 else ''} in for "
            "failed ones",
        )
    ]


#: a checkpoint interval a reader would expect (half an hour): the goodput had the job used it is shown beside
#: an interval shorter than this, which explains why the short one was chosen
WHAT_IF_INTERVAL_S = 1800.0


def _why_so_often(d: dict, goodput_what_if: float) -> list[tuple[str, str]]:
    """One row, when the interval is under :data:`WHAT_IF_INTERVAL_S`: the training pause each checkpoint
    costs, the work an interruption loses (half an interval on average, Young 1974), and the goodput the
    job would have with half-hour checkpoints instead."""
    interval = d["checkpoint_interval_s"]
    if not interval < WHAT_IF_INTERVAL_S:
        return []
    half = WHAT_IF_INTERVAL_S / 2
    then, now = f"{goodput_what_if:.1%}", f"{d['goodput']:.1%}"
    # interruptions so rare that the interval barely matters: the same goodput to the digit shown; or so frequent
    # that no interval leaves work done (each interruption's restart outlasts the time between them)
    if then != now:
        versus = f"not {now}"
    elif d["goodput"] < 0.001:
        versus = (
            f"as nothing gets done either way (an interruption every {d['mtbi_h'] * units.HOUR:,.0f} s against a "
            f"restart of {d['restart_s']:,.0f} s)"
        )
    else:
        versus = "the same to 0.1 % (the interruptions are too rare for it to matter)"
    return [
        (
            "why so often",
            f"a checkpoint pauses training {_seconds(d['checkpoint_stall_s'])}"
            f"{' (the write runs in the background)' if d['mode'] == 'async' else ''}; an interruption every "
            f"{_hours(d['mtbi_h'])} h loses half an interval of work ({interval / 2:,.0f} s); checkpoints every "
            f"{WHAT_IF_INTERVAL_S / units.MINUTE:.0f} min (losing {half / units.MINUTE:.0f} min): goodput {then}, "
            f"{versus}",
        )
    ]


def _amount(x: float, spec: str) -> str:
    """``x`` in ``spec`` (``,.0f``) up to 1e15, three significant digits and an exponent beyond: a failure rate
    scaled by 1e-300 gave a mean time between interruptions of 300 digits."""
    return f"{x:{spec}}" if abs(x) < 1e15 else f"{x:.3g}"


def _mtbi_text(d: dict) -> str:
    """The mean time between interruptions and their rate per day; ``never`` when no failure rate is left
    (``--rate-factor 0``: the JSON's ``mtbi_h`` is null), not ``inf h``."""
    per_day = f"{d['interruptions_per_day']:.2g} per day incl. planned"
    if not math.isfinite(d["mtbi_h"]):
        return f"never ({per_day})"
    return f"{_amount(d['mtbi_h'], ',.2f')} h ({per_day})"


def _hours(x: float) -> str:
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def _in_repair(x: float) -> str:
    """GPUs in repair: three significant digits, whole GPUs with thousands separators from 100 on (``2,080``, not
    ``2.08e+03``)."""
    return format_amount(x, 0) if x >= 100 else f"{x:.3g}"


def _seconds(x: float) -> str:
    return f"{units.s_to_ms(x):.2g} ms" if x < 0.1 else f"{x:,.2f} s" if x < 10 else f"{x:,.1f} s"


def _checkpoint_text(d: dict, gpus: int) -> str:
    """Size, background write and the stall, with what the stall is: the whole write (sync), or the copy
    of each GPU's shard to host memory, the first tier (async)."""
    text = (
        f"{units.to_GB(d['checkpoint_bytes']):,.0f} GB, write {_seconds(d['checkpoint_write_s'])}, "
        f"stall {_seconds(d['checkpoint_stall_s'])} ({d['mode']}"
    )
    if d["checkpoint_host_link_GBps"] and d["checkpoint_stall_s"] < d["checkpoint_write_s"]:
        shard = units.to_GB(d["checkpoint_bytes"] / gpus)
        text += f": each GPU's {shard:.3g} GB shard to host memory at {d['checkpoint_host_link_GBps']:g} GB/s"
    return text + ")"


def _interval_text(d: dict) -> str:
    """The checkpoint interval and the bound that set it: Daly's optimum, the storage's write time over
    the share of its time checkpoints may take, or the training step."""
    interval, daly, share = d["checkpoint_interval_s"], d["checkpoint_daly_interval_s"], d["checkpoint_storage_share"]
    floor = d["checkpoint_write_s"] / share
    stall = f"Young/Daly with the {_seconds(d['checkpoint_stall_s'])} stall alone: {_amount(daly, ',.0f')} s"
    steps = f" = {_amount(interval / d['step_s'], ',.0f')} steps of {d['step_s']:.3g} s" if d.get("step_s") else ""
    bound = d["checkpoint_interval_bound"]
    if not math.isfinite(interval):  # no interruptions: no work to lose, so no checkpoint is needed for them
        return f"never: no interruptions to lose work to (the storage bound is {_amount(floor, ',.0f')} s)"
    if bound == "step":
        return f"{interval:,.0f} s, one training step (a checkpoint is taken between steps; {stall})"
    if bound == "storage":
        return (
            f"{interval:,.0f} s{steps}, set by the storage ({d['checkpoint_write_s']:.1f} s write at most {share:.0%} "
            f"of the time; {stall})"
        )
    return f"{_amount(interval, ',.0f')} s{steps} (Daly 2006; the storage bound is {_amount(floor, ',.0f')} s)"
