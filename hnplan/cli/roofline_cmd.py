"""``hnplan roofline``: the operator table of one model pass on one accelerator, and its totals."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from hnplan import units
from hnplan.cli._app import app, console, count, handle_errors, print_json
from hnplan.cli._options import check_dtype_flag, check_expert_flags, dtype_name
from hnplan.defaults import DEFAULT_STACK


@app.command()
def roofline(
    accelerator: str = typer.Option(..., "--accelerator", help="accelerator id or YAML path"),
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    phase: str = typer.Option(..., "--phase", help="train, prefill or decode"),
    batch: int = typer.Option(..., "--batch", min=1, help="sequences (micro-batch, or concurrent requests)"),
    seq_len: int = typer.Option(
        ..., "--seq-len", parser=count(integer=True), metavar="COUNT", help="sequence / prompt length [tokens]"
    ),
    tp: int = typer.Option(1, "--tp", min=1, help="tensor-parallel degree"),
    cp: int = typer.Option(1, "--cp", min=1, help="context-parallel degree"),
    ep: int = typer.Option(1, "--ep", min=1, help="expert-parallel degree"),
    kv_len: int = typer.Option(
        None, "--kv-len", min=0, help="cached tokens per sequence in decode (default: --seq-len)"
    ),
    dtype: str = typer.Option(
        "bf16", "--dtype", callback=dtype_name, help="GEMM dtype (bf16, fp8, ...); the rest stays bf16"
    ),
    recompute: str = typer.Option(None, "--recompute", help="training: none (default), selective or full"),
    attention: str = typer.Option(
        "flash", "--attention", help="flash (fused kernel) or unfused (s x s scores materialised, pre-2022)"
    ),
    sequence_parallel: bool = typer.Option(
        None,
        "--sequence-parallel/--no-sequence-parallel",
        help="training with --tp > 1: norms and residuals on tokens / tp "
        "(Megatron sequence parallelism, the default) or on every token",
    ),
    stack: str = typer.Option(
        None, "--stack", help=f"software stack id: its fp8 recipe and kernel fusions (default: {DEFAULT_STACK}'s)"
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Per-operator FLOPs, bytes, intensity, time and bound of one pass on one GPU.

    Totals cover one pass of the phase over the whole layer stack plus embedding and LM head
    (forward + backward + recomputation for train); operator rows are per occurrence, `count` per pass.
    """
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog.checks import check_refs
    from hnplan.planning.roofline import OperatorOptions, roofline_answer

    with handle_errors():
        check_refs(
            {"--accelerator": ("accelerators", accelerator), "--model": ("models", model), "--stack": ("stacks", stack)}
        )
        check_expert_flags(model, ep=ep)
        check_dtype_flag(accelerator, dtype)
        _check_phase_flags(phase, kv_len=kv_len, recompute=recompute, sequence_parallel=sequence_parallel)
        recompute = "none" if recompute is None else recompute
        sequence_parallel = True if sequence_parallel is None else sequence_parallel
        options = OperatorOptions(
            kv_len=kv_len,
            tp=tp,
            cp=cp,
            ep=ep,
            dtype=dtype,
            recompute=recompute,
            attention=attention,
            sequence_parallel=sequence_parallel,
        )
        ans = roofline_answer(model, accelerator, phase, batch, seq_len, options, stack=stack)
        if json_:
            print_json(ans)
            return
        t = Table(title=f"{ans['model']} {phase} on one {ans['accelerator']} (batch {batch}, tp {tp}, {dtype})")
        for col, just in (
            ("operator", "left"),
            ("phase", "left"),
            ("count", "right"),  # calls per pass; the next columns are one call's, the total line the pass's
            ("GFLOP each", "right"),
            ("MB each", "right"),
            ("FLOP/byte", "right"),
            ("time each [us]", "right"),
            ("bound", "left"),
        ):
            t.add_column(escape(col), justify=just)  # "[us]" is not rich markup
        for r in ans["ops"]:
            t.add_row(
                r["name"],
                r["phase"],
                f"{r['count']:g}",
                f"{r['flops'] / units.GIGA:,.3f}",
                f"{r['bytes'] / units.MB:,.3f}",
                f"{r['intensity']:,.1f}",
                f"{r['time_s'] / units.MICRO:,.1f}",
                r["bound"],
            )
        console.print(t)
        console.print(
            f"total: {ans['flops'] / units.TERA:,.2f} TFLOP, {units.to_GB(ans['bytes']):,.2f} GB, "
            f"{ans['time_s'] / units.MILLI:,.3f} ms, {ans['attained_flops_per_s'] / units.TERA:,.0f} TFLOP/s attained, "
            f"MFU {ans['mfu']:.1%}, HFU {ans['hfu']:.1%}"
        )


def _check_phase_flags(phase: str, **given) -> None:
    """Refuse a flag the phase does not read (given, not None): ``--phase prefill --kv-len 100000`` and
    ``--phase train --kv-len 100000`` printed the same pass as without it, and ``--recompute full`` or
    ``--no-sequence-parallel`` outside training changed nothing. An unknown phase is left to the planner's
    message.

    >>> _check_phase_flags("decode", kv_len=4096, recompute=None, sequence_parallel=None)
    >>> _check_phase_flags("prefill", kv_len=4096, recompute=None, sequence_parallel=None)
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: --kv-len applies to --phase decode only (the tokens a decode step reads from the KV cache); this is --phase prefill: drop it
    """
    from hnplan.errors import InputError

    reads = {
        "kv_len": ("--kv-len", ("decode",), "the tokens a decode step reads from the KV cache"),
        "recompute": ("--recompute", ("train",), "the forward recomputed in the backward pass"),
        "sequence_parallel": (
            "--sequence-parallel/--no-sequence-parallel",
            ("train",),
            "Megatron's sequence parallelism of a training step",
        ),
    }
    if phase not in ("train", "prefill", "decode"):
        return
    for key, value in given.items():
        flag, phases, what = reads[key]
        if value is not None and phase not in phases:
            raise InputError(
                f"{flag} applies to --phase {' or '.join(phases)} only ({what}); this is --phase {phase}: drop it"
            )
