"""``hnplan memory``: per-GPU memory breakdown of a training plan or a serving replica, and with
``--system`` whether it fits, and what spills to which tier at what cost per step."""

from __future__ import annotations

import typer

from hnplan import units
from hnplan.catalog import load_catalog
from hnplan.cli._app import app, console, handle_errors, kv_table, print_json
from hnplan.errors import InputError
from hnplan.memory import (
    ACCOUNTINGS,
    PARTS,
    decode_step_time_s,
    inference_memory,
    kv_capacity,
    max_batch,
    memory_tiers,
    spill_plan,
    training_compute_time_s,
    training_memory,
)

MODES = ("train", "inference")


def memory_answer(model: str, mode: str, seq_len: int, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1,
                  cp: int = 1, microbatch_size: int = 1, num_microbatches: int | None = None,
                  virtual_stages: int = 1, zero: int = 1, recompute: str = "none",
                  accounting: str = "megatron-bf16", dropout: bool = True, batch: int = 1,
                  dtype: str = "bf16", kv_dtype: str = "bf16", system: str | None = None) -> dict:
    """The JSON answer of ``hnplan memory`` (sizes in GiB, times in s)."""
    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}; got {mode!r}")
    cat = load_catalog()
    m = cat.model(model)
    out = {"model": m.id, "mode": mode, "seq_len": seq_len}
    if mode == "train":
        mem = training_memory(m, seq_len, microbatch_size, tp, pp, dp, cp, ep, zero, recompute, num_microbatches,
                              virtual_stages=virtual_stages, recipe=accounting, dropout=dropout, catalog=cat)
        out.update(parallel=dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch_size=microbatch_size,
                                 num_microbatches=num_microbatches or pp, virtual_stages=virtual_stages,
                                 zero=zero, recompute=recompute), accounting=accounting, dropout=dropout,
                   stage=mem.stage)
    else:
        mem = inference_memory(m, batch, seq_len, dtype, kv_dtype, tp, ep, catalog=cat)
        out.update(batch=batch, dtype=dtype, kv_dtype=kv_dtype, tp=tp, ep=ep,
                   kv_bytes_per_token=mem.kv_bytes_per_token, kv_tokens=mem.tokens)
    out.update(mem.as_gib())
    if system is not None:
        sys_ = cat.system(system)
        acc = cat.accelerator(sys_.accelerator)
        tiers = memory_tiers(sys_, cat)
        if mode == "train":
            t = training_compute_time_s(m, acc, seq_len, microbatch_size, num_microbatches or pp, tp, pp, cp,
                                        recompute, "fp8" if accounting == "fp8" else "bf16")
        else:
            t = decode_step_time_s(mem, acc)
        plan = spill_plan(mem, tiers, mode, accounting, compute_time_s=t)
        out.update(system=sys_.id, accelerator=acc.id, hbm_gib=units.to_GiB(tiers[0].capacity_bytes),
                   fits=plan.fits, status=plan.status, tiers=[x.as_dict() for x in tiers], spill=plan.as_dict())
        if mode == "inference":
            cap = kv_capacity(m, acc, dtype, kv_dtype, tp, ep, catalog=cat)
            out["kv_capacity"] = cap.as_dict() | {"max_batch_at_seq_len": max_batch(cap, seq_len)}
    return out


@app.command()
def memory(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    mode: str = typer.Option("train", "--mode", help="train or inference"),
    seq_len: int = typer.Option(..., "--seq-len", min=1, help="sequence length [tokens] (inference: prompt + output)"),
    tp: int = typer.Option(1, "--tp", min=1, help="tensor-parallel degree"),
    pp: int = typer.Option(1, "--pp", min=1, help="pipeline-parallel degree"),
    dp: int = typer.Option(1, "--dp", min=1, help="data-parallel degree"),
    ep: int = typer.Option(1, "--ep", min=1, help="expert-parallel degree"),
    cp: int = typer.Option(1, "--cp", min=1, help="context-parallel degree"),
    microbatch_size: int = typer.Option(1, "--microbatch-size", min=1, help="sequences per micro-batch"),
    num_microbatches: int = typer.Option(None, "--num-microbatches", min=1, help="micro-batches per step (default pp)"),
    virtual_stages: int = typer.Option(1, "--virtual-stages", min=1, help="interleaved model chunks per stage"),
    zero: int = typer.Option(1, "--zero", min=0, max=3, help="ZeRO stage 0-3 (1 = Megatron distributed optimizer)"),
    recompute: str = typer.Option("none", "--recompute", help="none, selective or full"),
    accounting: str = typer.Option("megatron-bf16", "--accounting",
                                   help="bytes per parameter: " + ", ".join(ACCOUNTINGS)),
    dropout: bool = typer.Option(True, "--dropout/--no-dropout",
                                 help="store dropout masks (Korthikanti's GPT accounting); "
                                      "--no-dropout for Llama-style recipes"),
    batch: int = typer.Option(1, "--batch", min=1, help="inference: concurrent sequences"),
    dtype: str = typer.Option("bf16", "--dtype", help="inference: weight dtype (bf16, fp8, int8, int4)"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="inference: KV-cache dtype"),
    system: str = typer.Option(None, "--system", help="system id: adds fits, memory tiers and the spill plan"),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Memory per GPU in GiB (2**30 bytes): weights, gradients, optimizer states, activations, KV cache
    and runtime overheads; with --system, whether it fits in HBM and what spills where."""
    with handle_errors():
        d = memory_answer(model, mode, seq_len, tp, pp, dp, ep, cp, microbatch_size, num_microbatches,
                          virtual_stages, zero, recompute, accounting, dropout, batch, dtype, kv_dtype, system)
        if json_:
            print_json(d)
            return
        rows = [(f"{p.replace('_', ' ')} [GiB]", f"{d[f'{p}_gib']:.2f}") for p in PARTS]
        rows.append(("total [GiB]", f"{d['total_gib']:.2f}"))
        if mode == "train":
            rows.insert(0, ("fullest stage", d["stage"]))
        else:
            rows.insert(0, ("KV cache per token", units.format_size(d["kv_bytes_per_token"])))
        if system is not None:
            rows.append(("HBM per GPU [GiB]", f"{d['hbm_gib']:.2f}"))
            rows.append(("status", d["status"]))
            for s in d["spill"]["spills"]:
                rows.append((f"  {s['part']} -> {s['tier']}",
                             f"{s['gib']:.2f} GiB, {s['seconds_per_step']:.3f} s/step"))
            if d["spill"]["spills"]:
                rows.append(("  compute to hide behind", f"{d['spill']['compute_time_s']:.3f} s/step"))
                rows.append(("  exposed transfer", f"{d['spill']['exposed_s']:.3f} s/step"))
            if mode == "inference":
                c = d["kv_capacity"]
                rows.append(("KV cache that fits [GiB]", f"{c['kv_cache_gib']:.2f}"))
                rows.append(("tokens that fit", f"{c['max_tokens']:,}"))
                rows.append((f"sequences of {seq_len:,} tokens", f"{c['max_batch_at_seq_len']:,}"))
        title = f"{d['model']} {mode} memory per GPU" + (f" on {d['system']}" if system else "")
        console.print(kv_table(title, rows))
