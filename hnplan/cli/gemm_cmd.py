"""``hnplan gemm``: GEMM shapes on an accelerator under the GEMM law (time, TFLOP/s, bound)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from hnplan import units
from hnplan.cli._app import app, console, escape, handle_errors, print_json
from hnplan.cli._options import dtype_name
from hnplan.errors import InputError


@app.command()
def gemm(
    accelerator: str = typer.Option(..., "--accelerator", help="accelerator id or YAML path"),
    dtype: str = typer.Option(
        None, "--dtype", callback=dtype_name, help="input dtype of the --shape GEMMs (bf16, fp8, ...; default bf16)"
    ),
    shape: list[str] = typer.Option(
        None, "--shape", help="MxNxK (tokens x output x input features; 4Ki = 4,096); repeatable"
    ),
    shapes_json: str = typer.Option(
        None, "--shapes-json", help='JSON list [["bf16", m, n, k], ...], or the path of a file holding one'
    ),
    launch: str = typer.Option(
        "eager",
        "--launch",
        help="eager: back-to-back calls from an eager framework (host floor applies); "
        "device: the kernel alone, as the planners time it",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Time, attained TFLOP/s and bound of GEMMs C (m x n) = A (m x k) B (k x n) under the fitted GEMM law."""
    from hnplan.catalog.checks import check_refs

    with handle_errors():
        check_refs({"--accelerator": ("accelerators", accelerator)})
        from hnplan.cli._options import check_dtype_flag
        from hnplan.planning.kernels import gemm_kernels, parse_shape, parse_shapes_json

        if (
            dtype is not None and not shape and shapes_json is not None
        ):  # the file or text gives each of its GEMMs its own dtype
            raise InputError(
                f"--dtype {dtype} applies to --shape GEMMs; each --shapes-json GEMM names its own dtype "
                '([["fp8", m, n, k], ...]): drop --dtype or give the shapes with --shape'
            )
        dtype = "bf16" if dtype is None else dtype
        if shape:
            check_dtype_flag(accelerator, dtype)
        shapes = [(dtype, *parse_shape(s)) for s in (shape or [])]
        if shapes_json is not None and not shapes_json.strip():  # not the current folder, as a path "" would be
            raise InputError('--shapes-json is empty; give JSON text ([["bf16", m, n, k], ...]) or a file path')
        if shapes_json is not None:
            if shapes_json.lstrip().startswith(("[", "{")):  # JSON text
                shapes += parse_shapes_json(shapes_json)
            else:  # a file (a missing one is one line naming it)
                try:
                    shapes += parse_shapes_json(Path(shapes_json).read_text(encoding="utf-8"))
                except UnicodeDecodeError:
                    raise InputError(f"--shapes-json {shapes_json}: not a UTF-8 text file; expected JSON") from None
                except InputError as exc:
                    raise InputError(str(exc).replace("--shapes-json:", f"--shapes-json {shapes_json}:", 1)) from None
        ans = gemm_kernels(accelerator, shapes, launch=launch)
        if json_:
            print_json(ans)
            return
        t = Table(title=f"GEMMs on one {ans['accelerator']} ({launch} launch)")
        for col in ("dtype", "M x N x K", "time [us]", "TFLOP/s", "bound"):
            t.add_column(escape(col), justify="left" if col in ("dtype", "bound") else "right")  # "[us]" is a unit
        for r in ans["results"]:
            t.add_row(
                r["dtype"],
                f"{r['m']}x{r['n']}x{r['k']}",
                f"{units.s_to_us(r['time_s']):,.2f}",
                f"{r['tflops']:,.1f}",
                r["bound"],
            )
        console.print(t)
