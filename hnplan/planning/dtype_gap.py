"""Why a job planned in fp8 (or fp4) can come out slower than the same job in bf16, in words.

At one plan, fp8 GEMMs only speed a step up, less the recipe's quantisation passes
(:mod:`hnplan.compute.fp8_recipes`). The search, though, may not be able to keep bf16's plan: a stack
that trains fp8 with bf16 weights also keeps Transformer Engine's cached fp8 cast and transpose of every
weight (+2 bytes a parameter, :func:`hnplan.memory.states.stack_accounting`), and where bf16's plan then
no longer fits in HBM the fp8 search settles on another layout, which can cost more (a wider expert
all-to-all over the scale-out fabric, a deeper pipeline bubble) than fp8 saves. DeepSeek-V3 on 2,048
H100 under the default stack is such a case: bf16's TP2 PP16 DP32 CP2 EP4 needs 72.0 GiB in bf16 and
85.1 GiB in fp8 (the last stage: MoE layers, the multi-token-prediction module and the LM head), so fp8
trains at EP16 across nodes with 2.65 s of all-to-all exposed against 0.50 s.

:func:`dtype_gap_note` tells a user which of the two happened: it plans the job in bf16 and, where that
is faster, evaluates bf16's plan in the low-precision dtype.
"""

from __future__ import annotations

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import HnplanError
from hnplan.labels import name_and_unit
from hnplan.planning.training import ParallelPlan, TrainingEstimate, best_plan, estimate_plan, make_job
from hnplan.planning.training.components import memory_recipe

# a step-time part is named as a reason when it grew by at least this much [s] (below it the parts are noise
# of the search's choices, not the reason)
_PART_GROWTH_S = 0.05


def _label(p: ParallelPlan) -> str:
    """``TP2 PP16 DP32 CP2 EP4 mb1 none`` (``EP4 ETP1`` where the experts' TP is not TP), as the compare table
    writes a plan."""
    etp = f" ETP{p.etp}" if p.ep > 1 and p.etp != p.tp else ""
    return f"TP{p.tp} PP{p.pp} DP{p.dp} CP{p.cp} EP{p.ep}{etp} mb{p.microbatch_size} {p.recompute}"


def _grown(slow: TrainingEstimate, fast: TrainingEstimate, n: int = 2) -> str:
    """The ``n`` step-time parts by which ``slow`` exceeds ``fast`` most, as ``EP communication exposed 2.65 s
    against 0.50 s``; empty where none grew by :data:`_PART_GROWTH_S`."""
    grown = sorted(
        ((slow.breakdown_s[k] - fast.breakdown_s.get(k, 0.0), k) for k in slow.breakdown_s),
        reverse=True,
    )
    said = [
        f"{name_and_unit(k)[0]} {slow.breakdown_s[k]:.2f} s against {fast.breakdown_s.get(k, 0.0):.2f} s"
        for d, k in grown[:n]
        if d >= _PART_GROWTH_S
    ]
    return " and ".join(said)


def dtype_gap_note(
    model,
    system,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str,
    est: TrainingEstimate,
    catalog: Catalog | None = None,
    stack=None,
    overrides: dict | None = None,
    fixed: dict | None = None,
) -> str:
    """A sentence saying why ``est`` (the best plan of the job in ``dtype``) is slower than the job's best
    plan in bf16, or ``""`` where it is not (or ``dtype`` is bf16, or bf16 has no plan).

    Two cases, told apart by evaluating bf16's plan in ``dtype`` (the same stack and overrides):

    * bf16's plan does not fit in ``dtype``: the memory it needs against the HBM, the weight bytes a
      parameter the stack keeps in each dtype (:func:`hnplan.planning.training.components.memory_recipe`),
      the step it would take, and the step-time parts the plan that fits pays for; in fp8, whether fp8
      parameters (``fp8_params``: Megatron-Core's ``--fp8-param-gather``, fp8 weights and transposes and
      no bf16 copy) would fit it;
    * it fits but is slower (the recipe's casts, amax and transposes, in bytes or in host launches, e.g. one
      cast per local expert, :mod:`hnplan.compute.host`, outweigh faster GEMMs): the two steps and the parts
      that grew.

    Parameters
    ----------
    model, system : id or entry
    gpus, seq_len, global_batch_seqs : int
        The job (as :func:`hnplan.planning.training.best_plan`).
    dtype : str
        The low-precision training dtype ``est`` was planned in.
    est : TrainingEstimate
        The best plan in ``dtype``.
    catalog : Catalog, optional
    stack, overrides, fixed
        As :func:`hnplan.planning.training.best_plan`: bf16's plan is searched with the same knobs pinned.

    Returns
    -------
    str
        Markdown, one or two sentences; ``""`` where there is nothing to explain.
    """
    if dtype == "bf16":
        return ""
    cat = catalog or load_catalog()
    ov = dict(overrides or {})
    try:
        (ref,), _, _ = best_plan(
            model, system, gpus, seq_len, global_batch_seqs, "bf16", fixed, catalog=cat, stack=stack, overrides=ov
        )
    except HnplanError:  # no bf16 plan: nothing to hold the low-precision one against
        return ""
    if ref.step_time_s >= est.step_time_s:
        return ""
    job = make_job(model, system, gpus, seq_len, global_batch_seqs, dtype, cat, stack=stack, overrides=ov)
    try:
        same = estimate_plan(job, ref.plan)
    except HnplanError:  # bf16's plan breaks a rule of the dtype: the search's answer stands unexplained
        return ""
    sid = job.system.id
    head = (
        f"On {sid}, {dtype} comes out slower than bf16 ({est.step_time_s:.2f} against {ref.step_time_s:.2f} s a step): "
    )
    if same.fits:
        grown = _grown(same, ref)
        return (
            head
            + f"at bf16's plan ({_label(ref.plan)}) {dtype} takes {same.step_time_s:.2f} s, "
            + (f"{grown}: " if grown else "")
            + f"the {dtype} recipe's quantisation kernels (their bytes, and their launches where the host cannot "
            "keep up) outweigh its faster GEMMs at this shape."
        )
    w_low, w_bf16 = memory_recipe(dtype, job.choices).weight_bytes, memory_recipe("bf16", job.choices).weight_bytes
    text = (
        head
        + f"bf16's plan ({_label(ref.plan)}, {units.to_GiB(ref.memory_per_gpu_bytes):.1f} GiB per GPU in bf16) needs "
        f"{units.to_GiB(same.memory_per_gpu_bytes):.1f} GiB in {dtype}, more than the "
        f"{units.to_GiB(same.hbm_bytes):.1f} GiB of HBM"
        + (
            f" (the stack keeps {w_low:g} bytes of weights a parameter in {dtype} against {w_bf16:g} in bf16: "
            "Transformer Engine's cached low-precision copies beside the bf16 weights)"
            if w_low > w_bf16
            else ""
        )
        + f"; where it fit it would take {same.step_time_s:.2f} s"
    )
    if same.step_time_s >= ref.step_time_s:  # slower than bf16 even at its plan: the recipe's passes as well
        grown_same = _grown(same, ref)
        text += f", slower than bf16 there too ({grown_same})" if grown_same else ", slower than bf16 there too"
    text += f". The {dtype} plan that fits ({_label(est.plan)})"
    grown = _grown(est, ref)
    text += f" pays {grown}." if grown else " is slower."
    if dtype == "fp8" and not job.choices.fp8_params:
        try:
            alt = estimate_plan(
                make_job(
                    model,
                    system,
                    gpus,
                    seq_len,
                    global_batch_seqs,
                    dtype,
                    cat,
                    stack=stack,
                    overrides={**ov, "fp8_params": True},
                ),
                ref.plan,
            )
        except HnplanError:
            return text
        if alt.fits:
            text += (
                " With fp8 parameters (a stack with `fp8_params: true`, Megatron-Core's `--fp8-param-gather`: fp8 "
                f"weights and their transposes, no bf16 copy) that plan fits ({units.to_GiB(alt.memory_per_gpu_bytes):.1f}"
                f" GiB) and takes {alt.step_time_s:.2f} s."
            )
    return text
