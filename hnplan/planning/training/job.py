"""A training job assembled once: ids resolved, the software stack's choices and GEMM efficiency
applied, the job-level inputs checked, and where each choice came from recorded (:func:`make_job`),
for the evaluator (:mod:`hnplan.planning.training.evaluate`) and the search (:mod:`.search`)."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

from pydantic import ValidationError

from hnplan.catalog.checks import check_stack_dtype
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator, SoftwareStack, StackChoices
from hnplan.comm.topology import SystemLinks, check_fabric_gpus, system_links
from hnplan.compute import ATTENTION_IMPLS
from hnplan.compute.fp8_recipes import DTYPE_RECIPE, check_recipe, mxfp8_gemm_accelerator
from hnplan.errors import InputError, check_choice
from hnplan.planning.training import components as c
from hnplan.planning.training.plan import TRAIN_DTYPES


def resolve_choices(
    stack: SoftwareStack | None = None, choices: StackChoices | None = None, overrides: dict | None = None
) -> tuple[StackChoices, dict[str, str]]:
    """The choices of a job and where each came from: ``choices`` if given (all of them), else the
    stack's, else the defaults (:class:`StackChoices`, the ``megatron-core`` stack's); then the
    ``overrides`` that are not ``None``, each recorded as ``override``.

    Raises
    ------
    InputError
        For an unknown choice name or a value its field does not allow.
    """
    slot = None
    if choices is None and _plain(overrides):  # a stack's choices with plain overrides: once per process
        slot = (id(stack), repr(sorted((k, v) for k, v in (overrides or {}).items() if v is not None)))
        hit = _RESOLVED.get(slot)  # one read: a sweep's threads may clear the store between two
        if hit is not None and hit[0] is stack:
            return hit[1], dict(hit[2])
    base, provenance = _resolve_choices(stack, choices, overrides)
    if slot is not None:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[slot] = (stack, base, dict(provenance))
    return base, provenance


#: :func:`resolve_choices` of a stack entry (by identity, the entry kept: its id is not reused while stored) and
#: the overrides (by their ``repr``, plain values only: :func:`_plain`), ``(stack, choices, provenance)``; the
#: choices are frozen, the provenance copied out. Published runs (the trust notes of ``hnplan compare``) resolve
#: a few stacks with a few overrides each, a hundred times.
_RESOLVED: dict = {}
_RESOLVED_MAX = 256


def _plain(value) -> bool:
    """Whether ``value`` is ``None``, a bool, int, float or str, or a dict, list or tuple of such (whose ``repr``
    tells its value and types apart)."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return type(value) in (list, tuple) and all(_plain(v) for v in value)


def _resolve_choices(
    stack: SoftwareStack | None, choices: StackChoices | None, overrides: dict | None
) -> tuple[StackChoices, dict[str, str]]:
    """:func:`resolve_choices`, computed."""
    if choices is not None:
        base, origin = choices, "given (choices)"
    elif stack is not None:
        base, origin = c.stack_choices(stack), f"stack {stack.id}"
    else:
        base, origin = StackChoices(), "default (StackChoices, the megatron-core stack's)"
    provenance = {k: origin for k in StackChoices.model_fields}
    if stack is not None and choices is None:
        provenance.update(
            {k: f"stack {stack.id} (assumed: see its assumptions)" for k in stack.assumptions if k in provenance}
        )
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    unknown = sorted(set(given) - set(StackChoices.model_fields))
    if unknown:
        raise InputError(f"unknown stack choice {unknown[0]!r}; choices: {', '.join(StackChoices.model_fields)}")
    check_choice("attention", given.get("attention", base.attention), ATTENTION_IMPLS)
    if given:
        try:
            base = StackChoices(**{**base.model_dump(), **given})
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            info = StackChoices.model_fields.get(field) if len(err["loc"]) == 1 else None
            allowed = get_args(info.annotation) if info is not None else ()
            if err["type"] == "literal_error" and allowed:  # as the planner's other choices say it (the CLI's flag)
                raise InputError(
                    f"{field} must be one of {', '.join(map(str, allowed))}; got {err.get('input')!r}"
                ) from None
            raise InputError(
                f"stack choice {'.'.join(map(str, err['loc']))}: {err['msg']}; got {err.get('input')!r}"
            ) from None
        provenance.update({k: "override" for k in given})
    return base, provenance


def host_scaled(ch: StackChoices, system, provenance: dict[str, str] | None = None) -> StackChoices:
    """The choices with ``kernel_launch_us`` on the system's host CPU: the stack's figure (per call on the
    x86 servers it was measured on) times the system's ``host_dispatch_factor`` (absent: unchanged, an
    x86 host). Records the scaling in ``provenance``.

    >>> from hnplan.catalog.loader import load_catalog
    >>> host_scaled(StackChoices(), load_catalog().system("gb200-nvl72")).kernel_launch_us   # 13.1 x 2.75
    36.025
    """
    factor = system.host_dispatch_factor
    if factor is None or factor == 1.0:
        return ch
    if provenance is not None:
        origin = provenance.get("kernel_launch_us", "default")
        provenance["kernel_launch_us"] = f"{origin} x {factor:g} (system {system.id} host_dispatch_factor)"
    return ch.model_copy(update={"kernel_launch_us": ch.kernel_launch_us * factor})


def check_comm_ctas(choices: StackChoices, acc: Accelerator) -> None:
    """Check the stack's ``overlap_comm_ctas`` against the accelerator's SM count (``compute_units``).

    Raises
    ------
    InputError
        One line naming the field, when a communicator class holds at least as many CTAs as the accelerator
        has SMs: no SM would be left to the compute beside it (:func:`hnplan.compute.sm_share.sm_share_slowdown`).
    """
    sms = acc.compute_units
    for comm, ctas in sorted(choices.overlap_comm_ctas.items()):
        if sms is not None and ctas >= sms:
            raise InputError(
                f"stack choice overlap_comm_ctas.{comm}: {ctas} CTAs leave none of accelerator {acc.id}'s {sms} SMs "
                "to the compute beside them"
            )


def job_links(links: SystemLinks, choices: StackChoices) -> SystemLinks:
    """The system's links as the job's collectives see them: with ``nccl_nvls`` off
    (``NCCL_NVLS_ENABLE=0``) the scale-up tier has no in-network reduction, so an all-reduce inside an
    NVLink domain runs as NCCL's ring or tree (:mod:`hnplan.comm.algorithms`); otherwise unchanged."""
    if choices.nccl_nvls or links.scaleup.inr_efficiency is None:
        return links
    return replace(links, scaleup=replace(links.scaleup, inr_efficiency=None))


def _kernel_clock(acc, held_dtypes=()) -> str:
    """Where the clock the step's kernels are timed at comes from (:attr:`Job.kernel_acc`); ``held_dtypes``:
    the GEMM dtypes whose efficiency the stack measured in training (its clock included)."""
    held = f"; {'/'.join(sorted(held_dtypes))} GEMMs at the stack's in-training efficiency (its clock included)"
    held = held if held_dtypes else ""
    f = acc.sustained_compute_fraction
    how = "measured" if "sustained_compute_fraction" in acc.field_sources else "assumed"
    if f == 1.0 and "sustained_compute_fraction" in {**acc.field_sources, **acc.assumptions}:
        return f"accelerator {acc.id}: short-run (boost-clock) rates, held through the step at its power limit ({how}){held}"
    if f is None or f == 1.0:
        return f"accelerator {acc.id}: short-run (boost-clock) rates, no sustained measurement{held}"
    return f"accelerator {acc.id}: {f} of the short-run compute rate at its power-limited clock ({how}){held}"


def make_job(
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    *,
    stack=None,
    choices: StackChoices | None = None,
    overrides: dict | None = None,
) -> c.Job:
    """Assemble a training job once: ids resolved, the stack's choices and GEMM efficiency applied,
    the job-level inputs checked, and where each efficiency and choice came from recorded.

    Parameters
    ----------
    model, system : id, path or catalog entry
    gpus, seq_len, global_batch_seqs : int
        Accelerators, sequence length [tokens], sequences per step.
    dtype : {"bf16", "fp8", "fp4"}
        GEMM dtype; ``fp4`` trains with the NVFP4 recipe (the stack's ``fp8_recipe`` becomes ``nvfp4``,
        :mod:`hnplan.compute.fp8_recipes`), bf16 weights (``fp8_params`` off: Transformer Engine has no fp4
        parameters, and the MLPerf v5.1 NVFP4 submissions set ``FP8_PARAM_GATHER=False``; NVFP4 weights only
        with the stack's ``fp4_params``, Megatron-Core ``fp4_param_gather``), TP collectives
        not overlapped (``tp_comm`` off: Transformer Engine's Userbuffers all-gather takes per-tensor FP8 and
        MXFP8 tensors only, ``fill_userbuffers_buffer_for_all_gather`` in
        ``transformer_engine/pytorch/module/base.py`` v2.9-v2.12 raises "Unsupported quantizer for
        Userbuffers" for NVFP4, and Megatron-Bridge 25.11's NVFP4 Llama 3.1 recipes set
        ``tp_comm_overlap = False``, ``scripts/performance/configs/llama/llama31_llm_pretrain.py``) and
        attention in bf16 unless ``fp8_attention`` (:func:`fp8_attention_accelerator`); ``job.provenance`` records
        the three.
    stack : str or SoftwareStack, optional
        Software stack (``data/stacks/``): its choices (:class:`StackChoices`), its in-training GEMM
        efficiency where it has one for the accelerator (:func:`stack_accelerator`) and, in a search,
        the ZeRO stages and recomputation modes it implements. Default: none (the
        :class:`StackChoices` defaults and the accelerator's catalog efficiency).
    choices : StackChoices, optional
        Replaces all the stack's choices.
    overrides : dict, optional
        ``{choice: value}`` applied on top (``None`` values ignored), e.g. from CLI flags.

    Returns
    -------
    Job
        ``job.provenance`` maps ``matmul_efficiency``, ``kernel_clock`` (the clock the kernels are timed at,
        :attr:`Job.kernel_acc`) and every choice to its origin, e.g.
        ``{"matmul_efficiency": "stack megatron-lm-2021 (measured in training: ... Korthikanti et al.
        2022 (arXiv:2205.05198) Table 4)", "tp_comm": "override", ...}``.

    Raises
    ------
    InputError
        For an unknown dtype, a dtype the accelerator has no peak for or the stack has no recipe for
        (``train_dtypes``), an unknown choice or attention
        implementation, non-positive sizes, a sequence longer than the model's ``max_seq``,
        ``overlap_comm_ctas`` at or above the accelerator's SM count, or (fp8 / fp4) more ``fp8_bf16_end_layers``
        at the two ends than the model has layers.
    CatalogError
        For unknown ids.

    Examples
    --------
    >>> job = make_job("megatron-18.4b", "dgx-a100-hdr", 8, 2048, 8, stack="megatron-lm-2021",
    ...                overrides=dict(tp_comm=True))
    >>> job.provenance["tp_comm"], job.provenance["attention"]
    ('override', 'stack megatron-lm-2021')
    >>> job.provenance["matmul_efficiency"].startswith("stack megatron-lm-2021 (measured in training: in-training")
    True
    >>> job.provenance["matmul_efficiency"].endswith("Korthikanti et al. 2022 (arXiv:2205.05198) Table 4)")
    True
    """
    cat = catalog or load_catalog()
    st = cat.stack(stack) if stack is not None else None
    ch, provenance = resolve_choices(st, choices, overrides)
    model, system = cat.model(model), cat.system(system)
    acc = cat.accelerator(system.accelerator)
    if st is not None:
        ch = stack_accelerator_choices(ch, st, acc.id, provenance)
    ch = host_scaled(ch, system, provenance)
    if st is not None and dtype in (st.matmul_efficiency or {}).get(acc.id, {}):
        key = f"matmul_efficiency.{dtype}"
        source = st.field_sources.get(key, st.field_sources.get("matmul_efficiency", "")).split(": ")[0]
        how = "library GEMM benchmark" if dtype in (st.matmul_efficiency_short_run or ()) else "measured in training"
        provenance["matmul_efficiency"] = f"stack {st.id} ({how}{': ' + source if source else ''})"
    elif {"matmul_efficiency", f"matmul_efficiency.{dtype}"} & set(acc.assumptions):
        # no GEMM search on the chip itself: a value carried from a related chip, said as such
        provenance["matmul_efficiency"] = f"accelerator {acc.id} (labelled assumption, carried from a related chip)"
    else:
        provenance["matmul_efficiency"] = f"accelerator {acc.id} (micro-benchmark)"
    provenance["kernel_clock"] = _kernel_clock(acc, c.held_gemm_dtypes(st, acc.id))
    if st is not None and acc.id in (st.attention_efficiency or {}):
        provenance["attention_efficiency"] = f"stack {st.id} (its attention kernel)"
    if st is not None:
        acc = c.stack_accelerator(st, acc)
        ch = stack_ep_overlap(ch, st, acc.id, provenance)
    check_choice("dtype", dtype, TRAIN_DTYPES)
    check_dtype_peak(acc, system.id, dtype)
    check_stack_dtype(st, dtype)
    check_comm_ctas(ch, acc)
    if dtype in DTYPE_RECIPE:  # fp4: the NVFP4 recipe and bf16 weights, whatever fp8 choices the stack names
        ch = ch.model_copy(update={"fp8_recipe": DTYPE_RECIPE[dtype], "fp8_params": False, "tp_comm": False})
        provenance["fp8_recipe"] = f"dtype {dtype} (NVFP4BlockScaling)"
        provenance["fp8_params"] = f"dtype {dtype} (no fp4 parameters in Transformer Engine: bf16 weights)"
        provenance["tp_comm"] = f"dtype {dtype} (no NVFP4 in Transformer Engine's Userbuffers TP overlap: exposed)"
    elif dtype == "fp8" and ch.fp8_recipe in DTYPE_RECIPE.values():
        raise InputError(f"fp8 recipe {ch.fp8_recipe} is the recipe of dtype fp4; train with dtype fp4")
    if dtype != "bf16":
        check_recipe(acc, ch.fp8_recipe)  # MXFP8 only on Blackwell, NVFP4 only with an fp4 peak
    if dtype == "fp8" and ch.fp8_recipe == "mxfp8":
        acc = mxfp8_gemm_accelerator(acc, provenance)  # MXFP8 GEMMs at the chip's block-scaled rate
    if ch.fp8_attention:
        acc = fp8_attention_accelerator(acc, st, dtype, provenance, mla=model.mla is not None)
    for name, v in (("gpus", gpus), ("seq_len", seq_len), ("global batch", global_batch_seqs)):
        if v < 1:
            raise InputError(f"{name} must be >= 1, got {v}")
    # the count and the most one scale-out fabric joins (the command line names --gpus), not the bill of
    # materials' ports, which it would otherwise reach first
    check_fabric_gpus(cat.design(system), gpus, "gpus")
    if seq_len > model.max_seq:
        raise InputError(
            f"seq_len {seq_len:,} exceeds {model.id}'s maximum sequence length {model.max_seq:,} "
            f"(field max_seq of its catalog entry)"
        )
    if dtype != "bf16" and 2 * ch.fp8_bf16_end_layers > model.layers:  # each end's layers counted once
        raise InputError(
            f"fp8_bf16_end_layers {ch.fp8_bf16_end_layers} ({provenance.get('fp8_bf16_end_layers', 'default')}) "
            f"keeps {2 * ch.fp8_bf16_end_layers} layers in bf16, {ch.fp8_bf16_end_layers} at each end; "
            f"{model.id} has {model.layers}: give at most {model.layers // 2}"
        )
    return c.Job(
        model,
        system,
        acc,
        job_links(system_links(cat.design(system), gpus=gpus), ch),
        gpus,
        seq_len,
        global_batch_seqs,
        dtype,
        ch,
        cat,
        st,
        dict(sorted(provenance.items())),
    )


def stack_accelerator_choices(
    ch: StackChoices, st: SoftwareStack, acc_id: str, provenance: dict[str, str]
) -> StackChoices:
    """The choices with those the stack's recipes set on accelerator ``acc_id``
    (``SoftwareStack.choices_by_accelerator``) in place of the stack's own, each only where the value came from
    the stack (a choice given in ``choices`` or as an override is kept); ``provenance`` names the entry.

    >>> from hnplan.catalog.loader import load_catalog
    >>> st = load_catalog().stack("megatron-bridge-2511-mxfp8")
    >>> prov = {k: f"stack {st.id}" for k in ("ep_dispatcher", "cuda_graph_scope")}
    >>> ch = stack_accelerator_choices(c.stack_choices(st), st, "b200", prov)   # its B200 recipes
    >>> ch.ep_dispatcher, ch.cuda_graph_scope, prov["ep_dispatcher"]
    ('alltoall', (), 'stack megatron-bridge-2511-mxfp8 (choices_by_accelerator.b200)')
    >>> stack_accelerator_choices(c.stack_choices(st), st, "gb200", prov).ep_dispatcher   # not listed
    'flex'
    """
    values = (st.choices_by_accelerator or {}).get(acc_id) or {}
    take = {k: v for k, v in values.items() if provenance.get(k, "").startswith(f"stack {st.id}")}
    if not take:
        return ch
    provenance.update({k: f"stack {st.id} (choices_by_accelerator.{acc_id})" for k in take})
    return StackChoices(**{**ch.model_dump(), **take})


def stack_ep_overlap(ch: StackChoices, st: SoftwareStack, acc_id: str, provenance: dict[str, str]) -> StackChoices:
    """The choices with the stack's expert all-to-all overlap fraction for accelerator ``acc_id``
    (``SoftwareStack.ep_comm_overlap_fraction_by_accelerator``, measured per chip family) in place of its scalar
    ``ep_comm_overlap_fraction``, where the stack lists the accelerator and the fraction came from the stack (a
    value given in ``choices`` or as an override is kept); ``provenance["ep_comm_overlap_fraction"]`` says which.

    >>> from hnplan.catalog.loader import load_catalog
    >>> st, prov = load_catalog().stack("megatron-bridge-2511"), {"ep_comm_overlap_fraction": "stack megatron-bridge-2511"}
    >>> stack_ep_overlap(c.stack_choices(st), st, "h100-sxm", prov).ep_comm_overlap_fraction   # Hopper: measured
    0.36
    >>> stack_ep_overlap(c.stack_choices(st), st, "gb200", prov).ep_comm_overlap_fraction      # not listed: scalar
    1.0
    """
    frac = (st.ep_comm_overlap_fraction_by_accelerator or {}).get(acc_id)
    if frac is None or not provenance.get("ep_comm_overlap_fraction", "").startswith(f"stack {st.id}"):
        return ch
    provenance["ep_comm_overlap_fraction"] = f"stack {st.id} (ep_comm_overlap_fraction_by_accelerator.{acc_id})"
    return ch.model_copy(update={"ep_comm_overlap_fraction": frac})


def fp8_attention_accelerator(
    acc: Accelerator, st, dtype: str, provenance: dict[str, str], mla: bool = False
) -> Accelerator:
    """The accelerator with FP8 attention: the kernel times of the (bf16) attention law divided by the stack's
    FP8 / bf16 attention ratio for ``acc`` (``SoftwareStack.attention_fp8_ratio``: two rates of one benchmark run,
    so clock and harness divide out; for a model with multi-head latent attention, ``mla``, the stack's ratio at that
    shape, ``SoftwareStack.attention_fp8_ratio_mla``, where it has one), set as ``Accelerator.attention_fp8_ratio``;
    ``provenance["attention_fp8_ratio"]`` says which applied.

    Raises
    ------
    InputError
        For FP8 attention with dtype bf16 (Transformer Engine runs FP8 attention only inside an fp8 recipe).
    """
    if dtype == "bf16":
        raise InputError("fp8_attention needs an fp8 or fp4 dtype (an FP8 recipe), got dtype bf16")
    field = "attention_fp8_ratio"
    ratio = None
    if st is not None and mla and (st.attention_fp8_ratio_mla or {}).get(acc.id):
        field, ratio = "attention_fp8_ratio_mla", st.attention_fp8_ratio_mla[acc.id]
    elif st is not None:
        ratio = (st.attention_fp8_ratio or {}).get(acc.id)
    if not ratio or not acc.attention_efficiency:
        provenance["attention_fp8_ratio"] = f"no FP8 / bf16 attention ratio for {acc.id}: attention timed in bf16"
        return acc
    shape = " at the MLA shape" if field.endswith("_mla") else ""
    provenance["attention_fp8_ratio"] = (
        f"stack {st.id} ({field}: FP8 / bf16 attention ratio of its kernel{shape} on {acc.id})"
    )
    # the ratio is of whole-kernel rates: it divides the kernel's time, leaving the balance of its tensor-core and
    # exponential pipelines (hnplan.compute.attention.exp_pipeline_factor) as the bf16 ceilings set it
    # a stack whose FP8 backward does not skip the tiles outside a sliding window (attention_fp8_sliding_bwd_causal)
    causal = bool((st.attention_fp8_sliding_bwd_causal or {}).get(acc.id))
    update = {"attention_fp8_ratio": {k: ratio.get(k, 1.0) for k in acc.attention_efficiency}}
    # the head dimension of the benchmark shape the ratio was measured at: 128 for grouped-query attention (the
    # llama3.1 shape), MLA's mean of 192 and 128 (the dsv3 shape)
    d_ref = 160.0 if field.endswith("_mla") else 128.0
    return acc.model_copy(
        update={**update, "attention_fp8_sliding_bwd_causal": causal, "attention_fp8_ratio_head_dim": d_ref}
    )


def check_dtype_peak(acc: Accelerator, system_id: str, dtype: str) -> None:
    """Refuse a training dtype the accelerator has no dense peak for (fp8 on A100, fp4 on Hopper).

    The message starts ``dtype <value>`` so that the command line says it with the flag typed (``--dtype fp4
    is not available: ...``), and names the accelerator, its system and the dtypes it has.

    Raises
    ------
    InputError
        If ``dtype`` is not a key of ``acc.dense_tflops``.
    """
    if dtype not in acc.dense_tflops:
        raise InputError(
            f"dtype {dtype} is not available: accelerator {acc.id!r} of system {system_id!r} has no {dtype} peak "
            f"(dense_tflops lists {', '.join(acc.dense_tflops)}); choose one of those"
        )
