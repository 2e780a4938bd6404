"""``hnplan memory``: per-GPU memory breakdown of a training plan or a serving replica, and with
``--system`` whether it fits, and what spills to which tier at what cost per step."""

from __future__ import annotations

import typer

from hnplan import units
from hnplan.cli._app import (
    app,
    console,
    count,
    current_context,
    exit_infeasible,
    handle_errors,
    kv_table,
    print_json,
)
from hnplan.cli._options import check_expert_flags, dtype_name, option_given
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InputError
from hnplan.formatting import format_amount
from hnplan.planning.memory import ACCOUNTINGS, PARTS, memory_summary

# the parts of memory_summary (``params_gib``, ...) in the words of the command's help
_PART_WORDS = {
    "params": "weights",
    "grads": "gradients",
    "optimizer": "optimizer states",
    "kv_cache": "KV cache",
    "overhead": "runtime overheads",
}


@app.command()
def memory(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    mode: str = typer.Option("train", "--mode", help="train or inference (infer, training: the same)"),
    seq_len: int = typer.Option(
        ...,
        "--seq-len",
        parser=count(integer=True),
        metavar="COUNT",
        help="sequence length [tokens] (inference: prompt + output)",
    ),
    tp: int = typer.Option(1, "--tp", min=1, help="tensor-parallel degree"),
    pp: int = typer.Option(1, "--pp", min=1, help="pipeline-parallel degree"),
    dp: int = typer.Option(1, "--dp", min=1, help="data-parallel degree"),
    ep: int = typer.Option(1, "--ep", min=1, help="expert-parallel degree"),
    etp: int = typer.Option(
        None, "--etp", min=1, help="expert tensor-parallel degree (default tp; 1 folds EP over the TP ranks)"
    ),
    cp: int = typer.Option(1, "--cp", min=1, help="context-parallel degree"),
    microbatch_size: int = typer.Option(1, "--microbatch-size", min=1, help="sequences per micro-batch"),
    num_microbatches: int = typer.Option(None, "--num-microbatches", min=1, help="micro-batches per step (default pp)"),
    virtual_stages: int = typer.Option(1, "--virtual-stages", min=1, help="interleaved model chunks per stage"),
    zero: int = typer.Option(
        None,
        "--zero",
        min=0,
        max=3,
        help="ZeRO stage 0-3 (default 1, Megatron's distributed optimizer, or the stack's lowest where it has no 1: "
        "pytorch-eager 0)",
    ),
    recompute: str = typer.Option("none", "--recompute", help="none, selective or full"),
    accounting: str = typer.Option(
        None,
        "--accounting",
        help="train: bytes per parameter, one of " + ", ".join(ACCOUNTINGS) + " (default: as the stack keeps them)",
    ),
    dropout: bool = typer.Option(
        None,
        "--dropout/--no-dropout",
        help="train: store dropout masks (default: the model's dropout field; GPT-style on, Llama-style off)",
    ),
    stack: str = typer.Option(
        None,
        "--stack",
        help="train: software stack id or YAML path (as hnplan train; default "
        + DEFAULT_STACK
        + "): attention kernel, "
        "sequence parallelism, recomputed modules, pipeline schedule, bytes per parameter",
    ),
    batch: int = typer.Option(None, "--batch", min=1, help="inference: concurrent sequences (default 1)"),
    dtype: str = typer.Option(
        "bf16",
        "--dtype",
        callback=dtype_name,
        help="train: bf16, fp8 or fp4; inference: weight dtype (bf16, fp8, int8, int4)",
    ),
    kv_dtype: str = typer.Option(
        None,
        "--kv-dtype",
        callback=dtype_name,
        help="inference: KV-cache dtype (default as hnplan infer: bf16 for bf16, else fp8)",
    ),
    system: str = typer.Option(None, "--system", help="system id: adds fits, memory tiers and the spill plan"),
    gpu_memory_utilization: float = typer.Option(
        None,
        "--gpu-memory-utilization",
        help="inference with --system: fraction of the visible HBM the engine may use, in (0, 1] (vLLM's; "
        "default memory.yaml)",
    ),
    kv_budget_gib: float = typer.Option(
        None, "--kv-budget-gib", help="inference with --system: KV cache per GPU set directly [GiB] (> 0)"
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Memory per GPU in GiB (2**30 bytes): weights, gradients, optimizer states, activations, KV cache
    and runtime overheads; with --system, whether it fits in HBM and what spills where (train: as
    hnplan train --offload auto moves it for the same plan and stack)."""
    from hnplan.catalog.checks import check_refs

    with handle_errors():
        check_refs({"--model": ("models", model), "--system": ("systems", system), "--stack": ("stacks", stack)})
        check_expert_flags(model, tp=tp, ep=ep, etp=etp)
        mode = {"infer": "inference", "training": "train"}.get(mode, mode)  # the sub-commands' names, or words
        # the training plan's degrees and knobs that an inference replica's memory does not read (it holds the
        # weights over tp x ep): given with a value other than the default, they would be ignored
        ctx = current_context()
        plan_knobs = {
            "--pp": ("pp", pp, 1),
            "--dp": ("dp", dp, 1),
            "--cp": ("cp", cp, 1),
            "--etp": ("etp", etp, None),
            "--microbatch-size": ("microbatch_size", microbatch_size, 1),
            "--num-microbatches": ("num_microbatches", num_microbatches, None),
            "--virtual-stages": ("virtual_stages", virtual_stages, 1),
            "--zero": ("zero", zero, None),
            "--recompute": ("recompute", recompute, "none"),
        }
        train_only = {
            flag: value if option_given(ctx, name) and value != default else None
            for flag, (name, value, default) in plan_knobs.items()
        }
        _check_mode_flags(
            mode,
            train={"--accounting": accounting, "--dropout/--no-dropout": dropout, "--stack": stack, **train_only},
            inference={
                "--batch": batch,
                "--kv-dtype": kv_dtype,
                "--gpu-memory-utilization": gpu_memory_utilization,
                "--kv-budget-gib": kv_budget_gib,
            },
        )
        if system is not None and dtype in units.DTYPE_BYTES and not dtype.startswith("int"):
            # a floating dtype is the tensor cores' (train, infer, gemm and roofline refuse it where the accelerator
            # has no peak in it: fp4 on an H100); int8 / int4 weights are counted as stored (weight-only)
            from hnplan.catalog import load_catalog
            from hnplan.planning.training.job import check_dtype_peak

            design = load_catalog().design(system)
            check_dtype_peak(design.accelerator, design.system.id, dtype)
        batch = 1 if batch is None else batch
        stack = DEFAULT_STACK if stack is None else stack
        if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
            raise InputError(f"--gpu-memory-utilization must be in (0, 1]; got {gpu_memory_utilization:g}")
        if kv_budget_gib is not None and not kv_budget_gib > 0:
            raise InputError(f"--kv-budget-gib must be > 0; got {kv_budget_gib:g}")
        if gpu_memory_utilization is not None and kv_budget_gib is not None:
            from hnplan.planning.inference.core import MEMORY_FLAGS_CLASH

            raise InputError(MEMORY_FLAGS_CLASH)
        if system is None and (gpu_memory_utilization is not None or kv_budget_gib is not None):
            # they share out a system's HBM: without one there is nothing to share and the table is the same
            flag = "--gpu-memory-utilization" if gpu_memory_utilization is not None else "--kv-budget-gib"
            raise InputError(
                f"{flag} applies with --system (it sets the share of that system's HBM the KV cache gets, for the "
                "tokens that fit): give --system, or drop it"
            )
        d = memory_summary(
            model,
            mode,
            seq_len,
            tp,
            pp,
            dp,
            ep,
            cp,
            microbatch_size,
            num_microbatches,
            virtual_stages,
            zero,
            recompute,
            accounting,
            dropout,
            batch,
            dtype,
            kv_dtype,
            system,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_budget_gib=kv_budget_gib,
            stack=stack,
            etp=etp,
        )
        hint = _ep_hint(model, mode, ep)
        if json_:
            print_json(d)
            _exit_if_not_fit(d, hint)
            return
        rows = [(f"{_PART_WORDS.get(p, p.replace('_', ' '))} [GiB]", f"{d[f'{p}_gib']:.2f}") for p in PARTS]
        rows.append(("total [GiB]", f"{d['total_gib']:.2f}"))
        if mode == "train":
            rows.insert(0, ("fullest stage", d["stage"]))
        else:
            rows.insert(0, ("KV cache per token", units.format_size(d["kv_bytes_per_token"])))
        if system is not None:
            rows.append(("HBM per GPU [GiB]", f"{d['hbm_gib']:.2f}"))
            status = d["status"]
            if mode == "inference" and d["status"] == "fits" and not d.get("within_kv_budget", True):
                status = "fits in HBM, not in the engine's KV cache (below)"  # what infer refuses: not a plain "fits"
            rows.append(("status", status))
            for s in d["spill"]["spills"]:
                rows.append(
                    (f"  {s['part']} -> {s['tier']}", f"{s['gib']:.2f} GiB, {s['seconds_per_step']:.3f} s/step")
                )
            if d["spill"]["spills"]:
                what = "step compute" if mode == "train" else "decode step"
                rows.append((f"  {what} to hide behind", f"{d['spill']['compute_time_s']:.3f} s/step"))
                rows.append(("  exposed transfer", f"{d['spill']['exposed_s']:.3f} s/step"))
            if mode == "inference":
                c = d["kv_capacity"]
                kv = c["kv_cache_gib"]  # negative: the weights and overheads alone exceed what the engine may use
                rows.append(
                    (
                        "KV cache that fits [GiB]",
                        f"{kv:.2f}" if kv >= 0 else f"none (weights and overheads {-kv:.2f} GiB over)",
                    )
                )
                rows.append(("tokens that fit", f"{c['max_tokens']:,}"))
                rows.append((f"sequences of {seq_len:,} tokens", f"{c['max_batch_at_seq_len']:,}"))
                fit = "yes" if d["within_kv_budget"] else f"no ({c['max_batch_at_seq_len']:,} of {d['batch']:,} fit)"
                rows.append(("batch in the engine's KV cache", fit))
        title = f"{d['model']} {mode} memory per GPU" + (f" on {d['system']}" if system else "")
        console.print(kv_table(title, rows))
        if d.get("weights_note"):
            console.print(f"weights: {d['weights_note']}", highlight=False)
        if d.get("gradients_note"):
            console.print(f"gradients: {d['gradients_note']}", highlight=False)
        if mode == "train" and system is not None and d["status"] == "spills":
            # the spill is what offload moves: without it the plan does not run (train's default refuses it)
            console.print(
                "spills: the plan does not fit in HBM; it runs only with the parts above moved to the slower tiers "
                "(hnplan train --offload auto, as ZeRO-Offload does); without offload hnplan train finds it does not "
                "fit (exit 3)",
                highlight=False,
            )
        if mode == "inference" and system is not None and not d["within_kv_budget"]:
            # the status judges the whole HBM; the engine keeps its KV cache within gpu_memory_utilization of it
            # infer sizes a replica (its tp x ep GPUs); with EP this table holds the batch on one GPU's cache
            refused = "hnplan infer refuses it" if (ep or 1) == 1 else "at EP 1 hnplan infer would refuse it"
            knob = "--kv-budget-gib" if kv_budget_gib is not None else "--gpu-memory-utilization"
            console.print(
                f"--batch {d['batch']:,} does not fit the serving engine's KV cache, so {refused}: give a smaller "
                f"--batch, a larger {knob} or a larger --tp",
                highlight=False,
            )
        _exit_if_not_fit(d, hint)


def _check_mode_flags(mode: str, train: dict, inference: dict) -> None:
    """Refuse a flag of the other mode (given, not None): ``--mode train --batch 4`` printed the training plan's
    memory as if the 4 had been read.

    >>> _check_mode_flags("train", {"--stack": None}, {"--batch": None})
    >>> _check_mode_flags("train", {}, {"--batch": 4})
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: --batch applies to --mode inference only; this is --mode train (drop it, or give --mode inference)
    """
    other = {"train": inference, "inference": train}.get(mode, {})
    given = [flag for flag, value in other.items() if value is not None]
    if given:
        rest = "inference" if mode == "train" else "train"
        raise InputError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --mode {rest} only; this is --mode "
            f"{mode} (drop {'it' if len(given) == 1 else 'them'}, or give --mode {rest})"
        )


def _ep_hint(model: str, mode: str, ep: int) -> str:
    """The advice a mixture of experts that does not fit at ``--ep 1`` (the default) gets: every GPU then holds every
    expert (its weights, gradients and optimizer state); an expert-parallel degree spreads them."""
    if mode != "train" or ep != 1:
        return ""
    from hnplan.catalog import load_catalog

    moe = load_catalog().model(model).moe
    if moe is None:
        return ""
    return (
        f" (at --ep 1, the default, every GPU holds all {moe.experts} routed experts: give --ep to spread them, a "
        "divisor of the experts and of tp x cp x dp, the ranks the expert layers split)"
    )


def _exit_if_not_fit(d: dict, hint: str = "") -> None:
    """Exit 3 (after the report) when the plan does not fit even with what spills to the slower tiers; a plan
    that fits or spills can run. ``hint``: what to change, appended (:func:`_ep_hint`)."""
    if d.get("status") == "does-not-fit":
        left = d["spill"].get("unplaced_gib")
        where = f"; {format_amount(left, 2)} GiB of it finds no room on the slower tiers either" if left else ""
        exit_infeasible(
            f"{d['model']} needs {format_amount(d['total_gib'], 2)} GiB per GPU; {d['system']} has "
            f"{format_amount(d['hbm_gib'], 2)} GiB of HBM{where}{hint}"
        )
