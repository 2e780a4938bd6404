"""``hnplan train``: estimate one training plan, or search the knobs left out."""

from __future__ import annotations

import typer

from hnplan.cli._app import (
    app,
    console,
    count,
    current_context,
    decimal_hint,
    err_console,
    exit_infeasible,
    handle_errors,
    kv_table,
    print_json,
    whole_units_text,
)
from hnplan.cli._options import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_SEQ_LEN,
    check_expert_flags,
    check_overlap_flags,
    check_seq_len,
    dtype_name,
    option_given,
    plan_option,
)
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InputError, PlanRuleError, check_choice
from hnplan.labels import column_header


@app.command()
def train(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    system: str = typer.Option(..., "--system", help="system id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators in the job"),
    seq_len: int = typer.Option(
        DEFAULT_SEQ_LEN,
        "--seq-len",
        parser=count(integer=True),
        metavar="COUNT",
        help="sequence length [tokens]; the default is Llama 3 405B's, as in size",
    ),
    tp: int = plan_option("tp"),
    pp: int = plan_option("pp"),
    dp: int = plan_option("dp"),
    cp: int = plan_option("cp"),
    ep: int = plan_option("ep"),
    etp: int = plan_option("etp"),
    global_batch_tokens: int = typer.Option(
        None,
        "--global-batch-tokens",
        parser=count(integer=True),
        metavar="COUNT",
        help="tokens per step (4Mi = 4,194,304); default 16Mi = 16,777,216 (Llama 3 405B's, as size) "
        "unless --global-batch-size is given",
    ),
    global_batch_size: int = typer.Option(
        None, "--global-batch-size", min=1, help="sequences per step (in place of --global-batch-tokens)"
    ),
    microbatch_size: int = plan_option("microbatch_size"),
    virtual_stages: int = plan_option("virtual_stages"),
    recompute: str = plan_option("recompute"),
    zero: int = plan_option("zero"),
    dtype: str = typer.Option(
        "bf16",
        "--dtype",
        callback=dtype_name,
        help="bf16, fp8 (GEMMs at the fp8 peak) or fp4 (NVFP4 recipe, Blackwell)",
    ),
    top: int = typer.Option(1, "--top", min=1, help="print the K best plans when searching"),
    tp_overlap: bool = typer.Option(
        None,
        "--tp-overlap/--no-tp-overlap",
        help="TP collectives overlap the GEMMs (TE userbuffers); default: the stack's",
    ),
    ep_overlap: bool = typer.Option(
        None,
        "--ep-overlap/--no-ep-overlap",
        help="expert all-to-all hidden behind compute (DualPipe); default: the stack's",
    ),
    dp_overlap: bool = typer.Option(
        None,
        "--dp-overlap/--no-dp-overlap",
        help="gradient reduce / parameter gather overlapped with the backward / forward "
        "(not in Megatron-LM 2021); default: the stack's",
    ),
    sequence_parallel: bool = typer.Option(
        None,
        "--sequence-parallel/--no-sequence-parallel",
        help="Megatron sequence parallelism (from 2022); default: the stack's",
    ),
    nvls: bool = typer.Option(
        None,
        "--nvls/--no-nvls",
        help="NCCL reduces in the NVLink switches where the system enables it (--no-nvls: NCCL_NVLS_ENABLE=0); "
        "default: the stack's",
    ),
    cp_algorithm: str = typer.Option(
        None,
        "--cp-algorithm",
        help="p2p_ring (Transformer Engine's K/V ring beside the attention kernels) or allgather (Llama 3: "
        "K/V all-gathered, exposed, before one attention kernel); default: the stack's",
    ),
    attention: str = typer.Option(
        None,
        "--attention",
        help="flash (fused kernel) or unfused (s x s scores materialised, pre-2022); default: the stack's",
    ),
    stack: str = typer.Option(
        DEFAULT_STACK,
        "--stack",
        help="software stack id or YAML path (data/stacks/): overlaps, attention, sequence "
        "parallelism, in-training GEMM efficiency, ZeRO stages and recompute modes "
        "searched; the flags above override it",
    ),
    offload: str = typer.Option(
        None, "--offload", help="none or auto: a plan that does not fit in HBM uses host or pooled memory"
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Step time, tokens/s, MFU/HFU and memory of a training plan.

    With every degree and knob given it evaluates that plan (CP and EP default to 1, virtual stages to 1
    at PP 1); otherwise it fixes what is given and searches the rest, reporting the best plan that fits
    plus `searched` and `feasible` (candidate counts); --top K lists the K best.
    """
    # the planner (numpy, pandas) is imported when the command runs: `train --help` does not pay for it
    from hnplan.catalog.checks import check_refs
    from hnplan.planning.training import ParallelPlan, estimate_plan, make_job, search_best, unimplemented_pins

    with handle_errors():
        check_refs({"--model": ("models", model), "--system": ("systems", system), "--stack": ("stacks", stack)})
        check_expert_flags(model, tp=tp, ep=ep, etp=etp)
        check_overlap_flags(tp, ep, tp_overlap, ep_overlap)
        if offload is not None:
            check_choice("--offload", offload, ("none", "auto"))
        if global_batch_tokens is not None and global_batch_size is not None:
            raise InputError("give one of --global-batch-tokens and --global-batch-size, not both: each sets the batch")
        check_seq_len(model, seq_len)  # before the batch's checks: a sequence the model cannot take
        defaulted = [f"--seq-len {seq_len:,}"] if not option_given(current_context(), "seq_len") else []
        if global_batch_size is None:
            if global_batch_tokens is None:
                global_batch_tokens = DEFAULT_BATCH_TOKENS
                defaulted.append(f"--global-batch-tokens {global_batch_tokens:,}")
            if global_batch_tokens % seq_len:
                said = "the default " if defaulted and defaulted[-1].startswith("--global") else ""
                raise InputError(
                    f"{said}--global-batch-tokens {global_batch_tokens:,} is not a multiple of --seq-len {seq_len:,}"
                    + (decimal_hint(global_batch_tokens) or decimal_hint(seq_len))
                )
            global_batch_size = global_batch_tokens // seq_len
        knobs = dict(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            etp=etp,
            microbatch_size=microbatch_size,
            virtual_stages=virtual_stages,
            recompute=recompute,
            zero_stage=zero,
        )
        given = {k: v for k, v in knobs.items() if v is not None}
        fixed_product = 1
        for k in ("tp", "pp", "dp", "cp"):
            fixed_product *= given.get(k, 1)
        if gpus % fixed_product:
            names = " x ".join(f"{k} {given[k]}" for k in ("tp", "pp", "dp", "cp") if k in given)
            prod = f" = {fixed_product}" if "x" in names else ""
            raise PlanRuleError(f"{names}{prod} does not divide --gpus {gpus}")
        expert = given.get("ep", 1) * given.get(
            "etp", 1
        )  # the expert layers split tp x cp x dp into etp x ep x expert-dp
        # an etp alone (the search's ep not fixed; a given ep meets the plan rules, the model's expert count first)
        if "etp" in given and "ep" not in given and gpus % expert:
            names = " x ".join(f"{k} {given[k]}" for k in ("ep", "etp") if k in given)
            prod = f" = {expert}" if "x" in names else ""
            raise PlanRuleError(
                f"{names}{prod} does not divide --gpus {gpus}: the expert layers split the tp x cp x dp ranks "
                "into etp x ep x expert-dp"
            )
        overrides = dict(
            tp_comm=tp_overlap,
            ep_comm=ep_overlap,
            dp_grad_reduce=dp_overlap,
            dp_param_gather=dp_overlap,
            sequence_parallel=sequence_parallel,
            attention=attention,
            offload=offload,
            nccl_nvls=nvls,
            cp_algorithm=cp_algorithm,
        )
        job = make_job(model, system, gpus, seq_len, global_batch_size, dtype, stack=stack, overrides=overrides)
        assert job.stack is not None  # --stack always names one
        stack_info = {
            "id": job.stack.id,
            "overlap": job.choices.model_dump(),
            "provenance": job.provenance,
            "matmul_efficiency_from": job.provenance["matmul_efficiency"],
        }
        # everything given (CP and EP default to 1, ETP to TP, virtual stages to 1 at PP 1, the only count one stage
        # takes): evaluate that plan; otherwise search the rest
        if pp == 1 and virtual_stages is None:
            given["virtual_stages"] = knobs["virtual_stages"] = 1
        all_given = all(v is not None for k, v in knobs.items() if k not in ("cp", "ep", "etp"))
        if all_given:
            ests = [estimate_plan(job, ParallelPlan(**{**dict(cp=1, ep=1), **given}))]
            searched = feasible = None
        else:
            try:
                ests, searched, feasible = search_best(job, fixed=given, top=top)
            except PlanRuleError as exc:  # a count of 72-GPU racks: say the layout size and compare would take
                hint = (
                    _part_units_hint(job.gpus, job.system.unit_gpus, job.global_batch_seqs)
                    if "has the factor" in str(exc)
                    else ""
                )
                raise PlanRuleError(f"{exc}{hint}") from None
        note = ""
        if ests[0].plan.ep > 1:  # an expert all-to-all runs: say when its dispatch misses published runs
            from hnplan.planning.trust import moe_dispatch_sentence

            dispatch = {"ep_comm": job.choices.ep_comm, "ep_dispatcher": job.choices.ep_dispatcher}
            note = moe_dispatch_sentence(job.model, job.stack, overrides=dispatch)
            from hnplan.planning.trust import ep_span_sentence

            p = ests[0].plan
            mine = (job.choices.ep_comm, job.choices.ep_dispatcher)
            span = ep_span_sentence(
                [{"system": system, "ep": p.ep, "etp": p.etp, "tp": p.tp}], job.catalog, mine, job.stack
            )
            note = " ".join(x for x in (note, span) if x)
        from hnplan.planning.calibration_note import uncalibrated_sentence

        # a chip without its sustained clock or memory-kernel efficiencies is planned at the ideal 1.0: say so
        calibration = uncalibrated_sentence(
            [job.system.accelerator], job.catalog, style="plain" if json_ else "markdown"
        )
        from hnplan.planning.trust_model import model_runs_sentence

        # what the published runs of this model say of hnplan's plans of it, on any chip
        evidence = model_runs_sentence(job.model, job.catalog, stack=job.stack.id)
        from hnplan.planning.trust_model import rope_note

        rope = rope_note(job.model, job.choices, job.stack.id)  # the kernel timed where the stack's choice reads fused
        grads = ""
        if job.choices.grads_in_backward:  # where a plain-PyTorch step's gradients went, as memory says
            from hnplan.planning.memory import training_gradients_note

            grads = training_gradients_note(job, ests[0].plan)
        pins = unimplemented_pins(job.stack, given)  # knobs pinned that the stack does not implement, said
        if defaulted:  # once the plan is made, on stderr, so that --json's stdout stays one object
            err_console.print(
                f"defaults: {', '.join(defaulted)} (Llama 3 405B's, as size; compare's come from the default scenario; give the flags to change them)",
                highlight=False,
                markup=False,
            )
        from hnplan.planning.training import whole_units  # the whole purchasable units that hold the GPUs

        bought = whole_units(job.catalog.design(system), gpus)
        from hnplan.planning.job_sizes import packed_units

        # the plan's scale-up groups (TP x CP, EP x ETP) whole in a unit: two EP-64 groups cannot share a 72-GPU
        # rack, so the purchase is the units that hold them, as size and compare buy it
        unit = job.system.unit_gpus
        packed = packed_units(gpus, unit, ests[0].to_dict()["parallel"]) * unit
        groups_whole = packed > bought
        bought = max(bought, packed)
        if json_:
            out = {**ests[0].to_dict(), "stack": stack_info, "gpus_bought": bought}
            if note:
                out["moe_dispatch_note"] = note
            if calibration:
                out["calibration_note"] = calibration
            from hnplan.formatting import styled

            out["model_evidence_note"] = styled(evidence, "plain")
            if rope:
                out["rope_note"] = rope
            if grads:
                out["gradients_note"] = grads
            if pins:
                out["stack_note"] = pins
            if searched is not None:
                out.update(searched=searched, feasible=feasible)
                if top > 1:
                    out["top"] = [{**e.to_dict(), "stack": stack_info} for e in ests]
            print_json(out)
            if all_given and not out["fits"]:
                exit_infeasible(_not_fit_text(out, offload))
            return
        # the flags that change a choice of the stack on this accelerator (one equal to it changes nothing)
        given_choices = [k for k, v in overrides.items() if v is not None]
        plain = make_job(model, system, gpus, seq_len, global_batch_size, dtype, stack=stack) if given_choices else job
        changed = [k for k in given_choices if getattr(plain.choices, k) != getattr(job.choices, k)]
        for i, est in enumerate(ests):
            d = est.to_dict()
            p = d["parallel"]
            rows = [
                (
                    "stack",
                    f"{job.stack.id}"
                    + (f" with {', '.join(changed)} overridden" if changed else "")
                    + f"; GEMM efficiency from {job.provenance['matmul_efficiency']}",
                ),
                (
                    "plan",
                    f"TP {p['tp']} PP {p['pp']} DP {p['dp']} CP {p['cp']} EP {p['ep']}"
                    + (f" ETP {p['etp']}" if p["ep"] > 1 and p["etp"] != p["tp"] else "")
                    + f", {p['num_microbatches']} "
                    f"micro-batch{'es' * (p['num_microbatches'] != 1)} of {p['microbatch_size']} "
                    f"sequence{'s' * (p['microbatch_size'] != 1)}, virtual stages {p['virtual_stages']}, "
                    f"ZeRO {p['zero_stage']}, "
                    f"recompute {p['recompute']}",
                ),
                ("step time", f"{d['step_time_s']:.3f} s"),
                ("throughput", f"{d['tokens_per_s']:,.0f} tokens/s"),
                (f"MFU / HFU ({dtype} peak)", f"{d['mfu']:.1%} / {d['hfu']:.1%}"),  # of the dtype's dense peak
                ("model TFLOP/s per GPU", f"{d['model_tflops_per_gpu']:,.1f}"),
                (
                    "memory per GPU",
                    _memory_text(d),
                ),
            ]
            if bought != gpus:  # the job runs on part of the whole units a purchase holds: say how many
                rows.append(
                    (
                        "GPUs bought",
                        f"{whole_units_text(gpus, bought, job.system.unit_gpus)}; {gpus:,} train"
                        + (
                            "; the units that hold its scale-up groups whole, as size and compare buy it"
                            if groups_whole
                            else ""
                        ),
                    )
                )
            rows.append(
                (
                    "placement",
                    ", ".join(
                        f"{g.upper()} {v['level']} {v['bw_GBps']:.0f} GB/s"
                        for g, v in d["placement"].items()
                        if v["ranks"] > 1
                    )
                    or "one GPU",
                )
            )
            rows += [(f"  {column_header(k)}", f"{v:.4f} s") for k, v in d["breakdown_s"].items() if v]
            title = f"{d['model']} on {gpus:,} x {d['system']}" + (f" (#{i + 1})" if len(ests) > 1 else "")
            console.print(kv_table(title, rows))
        if searched is not None:
            console.print(f"searched {searched:,} candidates, {feasible:,} feasible")
        if note:
            console.print(note, highlight=False, markup=False)
        if calibration:
            console.print(calibration, highlight=False, markup=False)
        console.print(evidence, highlight=False, markup=False)
        if rope:
            console.print(rope, highlight=False, markup=False)
        if grads:
            console.print(f"gradients: {grads}", highlight=False, markup=False)
        if pins:
            console.print(pins, highlight=False, markup=False)
        if all_given and not ests[0].fits:  # the plan given was reported: now say it cannot run, exit 3
            exit_infeasible(_not_fit_text(ests[0].to_dict(), offload))


def _not_fit_text(d: dict, offload: str | None) -> str:
    """The one line after a fully given plan that does not fit: what it needs per GPU against the HBM,
    and how to get a plan that does (a search, or offload)."""
    hint = "; leave a degree or knob out to search for a plan that fits"
    if offload != "auto":
        hint += ", or --offload auto"
    return f"the plan given does not fit in memory (per GPU: {_memory_text(d).replace(' (does NOT fit)', '')}){hint}"


def _memory_text(d: dict) -> str:
    """The memory line: what HBM holds against its capacity; with offload, the whole footprint and where the
    rest went (the footprint alone would read as not fitting)."""
    off = {k.split("_")[1]: v for k, v in d["memory_breakdown_gib"].items() if k.startswith("offload_") and v > 0}
    fit = "fits" if d["fits"] else "does NOT fit"
    if not off:
        return f"{d['memory_per_gpu_gib']:.1f} GiB of {d['hbm_gib']:.1f} GiB ({fit})"
    moved = sum(off.values())
    where = ", ".join(f"{v:.1f} GiB in {k} memory" for k, v in off.items())
    return (
        f"{d['memory_per_gpu_gib'] - moved:.1f} GiB in HBM of {d['hbm_gib']:.1f} GiB ({fit}); "
        f"footprint {d['memory_per_gpu_gib']:.1f} GiB, {where}"
    )


def _part_units_hint(gpus: int, unit_gpus: int, batch: int) -> str:
    """Where every count of whole units carries an odd factor no layout takes (a 72-GPU rack's 9): the count on the
    largest power of two of each unit's GPUs, as ``size`` and ``compare`` run such a job, when the batch of ``batch``
    sequences divides that count's odd part (114 racks: 64 x 114 = 7,296 keeps the factor 57); empty otherwise.

    >>> _part_units_hint(72, 72, 512)
    "; or --gpus 64 (64 of each unit's 72, as size and compare run it)"
    >>> _part_units_hint(64, 8, 512) + _part_units_hint(100, 72, 512) + _part_units_hint(8208, 72, 2048)
    ''
    """
    pow2 = 1 << (unit_gpus.bit_length() - 1)
    count = gpus // unit_gpus * pow2
    if pow2 == unit_gpus or gpus % unit_gpus or batch % (count // (count & -count)):
        return ""
    return f"; or --gpus {count:,} ({pow2} of each unit's {unit_gpus}, as size and compare run it)"
