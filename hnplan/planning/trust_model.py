"""How far to trust a plan of one model: what the validation set's published runs of that model say.

:func:`model_runs_sentence` is the sentence ``hnplan train`` prints after its plan and
:func:`hnplan.planning.compare_trust.trust_notes` adds to a comparison: hnplan's speed error on every published
run of the planned model (``data/validation/training_runs.yaml``), on whatever accelerator, and, where those
errors lean one way, by how much a plan of the model is likely off. A model whose published runs all come out
40 % fast (gpt-oss-120b in this catalog) is likely planned 40 % fast too, whichever chip it is planned on: the
per-accelerator errors of :func:`hnplan.planning.trust.error_sentences` average over every model and hide it.
"""

from __future__ import annotations

from statistics import median

from hnplan.catalog.loader import Catalog
from hnplan.catalog.runs import TrainingRun
from hnplan.formatting import counted
from hnplan.planning.trust import _LEAN_PCT, _lean, _signed, _span, speed_errors


def _stacks_text(stacks: list[str]) -> str:
    """The runs' stacks named, up to four (``stack a``, ``stacks a, b``), else counted."""
    if len(stacks) > 4:
        return f"{len(stacks)} software stacks"
    return f"stack{'s' * (len(stacks) > 1)} {', '.join(stacks)}"


def model_runs_sentence(
    model,
    catalog: Catalog,
    errors: dict[str, float] | None = None,
    runs: list[TrainingRun] | None = None,
    stack: str | None = None,
) -> str:
    """One or two sentences on the published runs of ``model`` in the validation set and hnplan's errors on them.

    The runs are those whose ``model`` is the model's id (a model read from a user's YAML file matches none
    unless it keeps a catalog id). Each error is :func:`hnplan.planning.trust.speed_errors`'s: predicted
    throughput over the measured, minus 1, a step-time run read as its inverse, so positive is always "hnplan
    faster than measured". Where the runs lean one way (:func:`hnplan.planning.trust._lean`: at least two thirds
    on one side with a median beyond 5 %), the second sentence says so and sizes the likely correction as the
    median's inverse: a median of +47 % means a plan likely gets ``1 / 1.47`` of the throughput shown (32 % fewer
    tokens a second, its steps and days 1.47 times as long). The runs' software stacks are named (counted past four),
    and where none of them is catalogued under the plan's ``stack`` the sentence says so, lean or not.

    Parameters
    ----------
    model : id, path or Model
        The model planned (anything :meth:`Catalog.model` reads).
    catalog : Catalog
    errors : dict, optional
        Run id -> speed error [-] already at hand (a comparison's runs on its accelerators); the model's other
        runs are planned (or read from the cache) now.
    runs : list of TrainingRun, optional
        The validation set's runs already read (:func:`hnplan.planning.prediction_cache.cached_training_runs`);
        default: read now.
    stack : str, optional
        The id of the stack the plan is made under (None: no stack entry, whose choices are ``megatron-core``'s).

    Returns
    -------
    str
        The sentences; "No published training run of ``<id>`` is in the validation set: ..." when it has none.

    Raises
    ------
    CatalogError
        For a model the catalog cannot read (as :meth:`Catalog.model`).
    """
    from hnplan.planning.prediction_cache import cached_training_runs

    m = model if hasattr(model, "moe") else catalog.model(model)
    runs = [r for r in (cached_training_runs() if runs is None else runs) if r.model == m.id]
    if not runs:
        return (
            f"No published training run of {m.id} is in the validation set: its plans are not checked against a "
            "measurement of this model (the per-accelerator errors of `hnplan compare` average over other models)."
        )
    known = errors or {}
    errors = {**known, **speed_errors([r for r in runs if r.id not in known], catalog)}
    errs = [errors[r.id] for r in runs]
    accs = list(dict.fromkeys(catalog.system(r.system).accelerator for r in runs))
    stacks = list(dict.fromkeys(r.stack for r in runs))
    gaps = sum(r.expect == "gap" for r in runs)
    if len(errs) == 1:
        read = f"hnplan reads it {_span(errs)}"
    elif _signed(min(errs)) == _signed(max(errs)):
        read = f"hnplan reads {'both' if len(errs) == 2 else 'all'} {_span(errs)}"
    else:
        read = f"hnplan reads them {_span(errs)}, median {_signed(median(errs))}"
    said = (
        f"The validation set holds {counted(len(runs), 'published training run')} of {m.id} "
        f"(on {', '.join(accs)}; {_stacks_text(stacks)}): {read} (speed errors, positive = faster than "
        f"measured; {gaps} of {len(runs)} reported without a tolerance, `expect: gap`)."
    )
    lean = _lean(errs)
    if lean:
        med = median(errs)
        ratio = 1.0 + med  # predicted over measured throughput
        fewer = lean > 0
        steps = (
            f"its steps and days about {ratio:.2f} times as long as shown"
            if fewer
            else f"its steps and days about {round(100 * (1.0 - ratio))} % shorter than shown"
        )
        said += (
            f" hnplan leans {'optimistic' if fewer else 'pessimistic'} for this model (at least two thirds of its "
            f"runs {'faster' if fewer else 'slower'} than measured, median beyond {_LEAN_PCT:g} %): a plan of it likely gets about "
            f"{round(100 * abs(1.0 - 1.0 / ratio))} % {'fewer' if fewer else 'more'} tokens a second than shown, "
            f"{steps} (the median error's inverse; the validation report gives each run's gap_reason)."
        )
    plan_stack = stack or TrainingRun.model_fields["stack"].default  # the planner's default stack, as a run's
    if plan_stack not in stacks:
        said += (
            f" None of those runs is catalogued under this plan's stack ({plan_stack}): they were measured under the "
            "stacks named, with their own recipes' settings."
        )
    return said


def rope_note(model, choices, stack_id: str) -> str:
    """One sentence where a training plan's rotary embedding runs as Megatron-Core's eager chain although its stack
    says ``rope_kernel: fused``: the model's YaRN attention factor (``Model.rope_attention_factor``, not 1) is one
    the stack's fused rotary kernel cannot apply (``rope_attention_factor_fused`` false; the timing is
    :func:`hnplan.compute.layer_ops.rope_kernels`). Empty otherwise, so the stack's JSON choices, which keep
    ``rope_kernel: fused``, are not read as the kernel timed.

    Parameters
    ----------
    model : Model
    choices : StackChoices
        The plan's resolved choices.
    stack_id : str
        The stack's id, for the sentence.
    """
    factor = model.rope_attention_factor
    if factor in (None, 1.0) or choices.rope_kernel != "fused" or choices.rope_attention_factor_fused:
        return ""
    return (
        f"{model.id}'s YaRN attention factor ({factor:g}) is one the fused rotary kernel of {stack_id} cannot apply "
        "(Transformer Engine's fused RoPE takes none): its rotary embedding is timed as Megatron-Core's eager "
        "q cos + rotate_half(q) sin, as the published runs of such models ran it (docs/compute.md)."
    )
