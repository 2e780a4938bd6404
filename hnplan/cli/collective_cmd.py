"""``hnplan collective``: time, algbw and busbw of one collective on a system, like nccl-tests."""

from __future__ import annotations

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from hnplan import units
from hnplan.cli._app import app, console, handle_errors, print_json
from hnplan.errors import InputError, check_choice
from hnplan.formatting import counted
from hnplan.planning.network import ALGORITHMS, MAX_SWEEP_BYTES, OPS, collective_on, parse_sweep


@app.command()
def collective(
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    op: str = typer.Option(..., "--op", help=f"collective: {', '.join(OPS)} (or nccl-tests' all_reduce ...)"),
    gpus: int = typer.Option(
        ...,
        "--gpus",
        min=1,
        help="ranks in the group, in equal parts on the fewest scale-up domains that take them (12 on 8-GPU "
        "servers: 6 + 6; 100 on 72-GPU racks: 50 + 50)",
    ),
    size: str = typer.Option(None, "--size", help="message size, e.g. 1GiB (nccl-tests' S)"),
    sweep: str = typer.Option(None, "--sweep", help="MIN:MAX sizes, doubling, e.g. 8B:8GiB"),
    algorithm: str = typer.Option(
        None,
        "--algorithm",
        help="force an algorithm (default: the fastest per size): "
        + "; ".join(f"{o}: {', '.join(a)}" for o, a in ALGORITHMS.items()),
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Time, algbw and busbw (nccl-tests definitions) of a collective on GPUS accelerators, in equal parts on the
    fewest scale-up domains that take them (the group's ranks per domain must be equal: the largest divisor of GPUS
    that a domain holds; hnplan.comm.topology.split_group)."""
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs

    with handle_errors():
        check_refs({"--system": ("systems", system)})
        if (spelt := op.lower().replace("_", "").replace("-", "")) in OPS:
            op = spelt  # nccl-tests' names (all_reduce_perf: all_reduce), as a sweep's CSV takes them
        check_choice("--op", op, OPS)
        if (size is None) == (sweep is None):
            raise InputError("give exactly one of --size and --sweep")
        if size is not None:
            if size.strip().startswith("-"):
                raise InputError(f"--size {size!r}: a message size is positive (bytes, e.g. 1GiB)")
            try:
                sizes = np.array([float(units.parse_size(size))])
            except ValueError as exc:
                raise InputError(f"--size: {exc}") from None
            if not sizes[0] > 0:  # a zero-count collective moves nothing: there is no time to model
                raise InputError(f"--size {size!r}: a message size is above 0 bytes (e.g. 8B, 1GiB)")
            if sizes[0] > MAX_SWEEP_BYTES:  # the bound --sweep's MAX keeps to
                raise InputError(
                    f"--size {size!r}: {sizes[0]:.3g} bytes exceeds 1 TiB (a collective's buffers live in one GPU's "
                    "memory, 288 GB at most in the catalog); give 1TiB or less"
                )
        else:
            sizes = parse_sweep(sweep)
        design, res = collective_on(system, op, gpus, sizes, algorithm, load_catalog())
        sys_ = design.system
        rows = res.rows()
        if json_:
            print_json(
                {
                    "system": sys_.id,
                    "op": op,
                    "gpus": gpus,
                    "per_domain": res.per_domain,
                    "domains": res.domains,
                    "level": res.level,
                    "results": rows,
                }
            )
            return
        t = Table(
            title=f"{op} on {gpus:,} x {sys_.id} ({res.per_domain:,} per domain x {counted(res.domains, 'domain')}, {res.level})"
        )
        for col in ("size [B]", "time [us]", "algbw [GB/s]", "busbw [GB/s]", "algorithm"):
            t.add_column(escape(col), justify="right")  # "[us]" is not rich markup
        for r in rows:
            fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            t.add_row(
                f"{r['size_bytes']}",
                f"{units.s_to_us(r['time_s']):.2f}",
                fmt(r["algbw_GBps"]),
                fmt(r["busbw_GBps"]),
                r["algorithm"],
            )
        console.print(t)
