"""How far to trust a design comparison, as sentences: :func:`trust_notes`, printed after ``hnplan compare``'s verdict.

Split from :mod:`hnplan.planning.compare` (which re-exports :func:`trust_notes`); the sentences themselves are
built in :mod:`hnplan.planning.trust`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import HnplanError
from hnplan.formatting import styled
from hnplan.planning import trust
from hnplan.planning.records import as_records

if TYPE_CHECKING:
    import pandas as pd

# published metrics a run's MFU follows from: model TFLOP/s per GPU, or tokens/s per GPU times the model's FLOPs
# per token at the run's sequence length
_MFU_METRICS = {"model_tflops_per_gpu": "model TFLOP/s per GPU", "tokens_per_s_per_gpu": "tokens/s per GPU"}


def _run_mfu(run, model, cat: Catalog) -> float:
    """MFU of a published run [-]: its model FLOP/s per GPU over the dense peak of its dtype (PaLM's definition,
    :func:`hnplan.compute.mfu`)."""
    from hnplan.compute import mfu, peak_flops_per_s, training_flops_per_token

    peak = peak_flops_per_s(cat.accelerator(cat.system(run.system).accelerator), run.dtype)
    if run.metric == "model_tflops_per_gpu":
        return run.published * units.TERA / peak
    return mfu(training_flops_per_token(model, run.seq_len).model, run.published, peak)


def trust_notes(
    df: pd.DataFrame | list[dict],
    model,
    catalog: Catalog | None = None,
    stack=DEFAULT_STACK,
    systems=None,
    style="markdown",
) -> str:
    """How far to trust the comparison: the caveats the catalog and the validation set give for its designs.

    These kinds, each only where it applies to a design of ``df`` (the rows of
    :func:`compare_training_designs` whose status is ok):

    * how many published training runs on the design's accelerator the validation set holds
      (``data/validation/training_runs.yaml``, :func:`hnplan.catalog.runs.training_runs`), and that a design
      with none is not validated;
    * hnplan's speed error over those runs per accelerator, and which way an accelerator's designs likely err
      where its runs lean one way (:func:`hnplan.planning.trust.error_sentences`);
    * where the same job was published on two of the accelerators: the measured speed ratio beside hnplan's,
      and whether hnplan likely understates or overstates the lead (:func:`hnplan.planning.trust.paired_sentences`);
    * where ``df`` has ``gpus``, ``mfu`` and ``dtype``: the published run of the same model, accelerator and
      dtype whose GPU count is nearest (metric ``model_tflops_per_gpu`` or ``tokens_per_s_per_gpu``), its MFU
      (:func:`_run_mfu`) beside the plan's;
    * hnplan's speed error on every published run of the model, on any accelerator, and by how much a plan of
      it is likely off where those runs lean one way (:func:`hnplan.planning.trust_model.model_runs_sentence`);
    * the clock: compute-bound kernels run at the accelerator's ``sustained_compute_fraction`` of the
      short-run rates the GEMM and attention laws were fitted to (the power-limited clock,
      :mod:`hnplan.compute.clocks`);
    * which accelerators' GEMM ceiling and sustained clock are labelled assumptions carried from another chip
      (:func:`hnplan.planning.trust.assumption_sentence`);
    * which accelerators lack ``sustained_compute_fraction`` or ``memory_kernel_efficiency`` and are so
      modelled at the ideal 1.0 (:func:`hnplan.planning.trust.uncalibrated_sentence`);
    * the system price each design is costed at (``data/prices.yaml``: amount, what it buys, date, and
      whether it is assumed), on which the cost ranking rests;
    * for a mixture-of-experts model planned under a stack (``stack``, or the planner's defaults) that leaves
      some of its MoE kernels outside CUDA graphs on a design's accelerator (``cuda_graph_scope``, with the
      stack's ``choices_by_accelerator``) and charges them host work (``moe_host_us_per_kernel`` > 0): that
      host work is one value fitted to published runs, with their remaining errors (docs/training.md, "The
      MoE layer's host work, fitted"; :func:`_moe_host_sentence`);
    * where a design's plan in fp8 or fp4 is slower than its plan in bf16 (``dtype_note`` of
      :func:`compare_training_designs`): why, first after the opening sentence;
    * for a mixture-of-experts model planned with a MoE dispatch that missed a published run beyond its
      tolerance where another dispatch matched the same run: the two errors and the stacks with the other
      dispatch (:func:`hnplan.planning.trust.moe_dispatch_sentence`);
    * where a design's plan spreads its expert-parallel group over scale-up domains: the published runs with EP
      across domains and their errors (:func:`hnplan.planning.trust.ep_span_sentence`).

    Parameters
    ----------
    df : pandas.DataFrame or list of dict
        The table of :func:`compare_training_designs` (columns ``system``, ``accelerator``, ``status``;
        ``gpus``, ``mfu`` and ``dtype`` where present), or any table of designs with ``system`` and ``status``
        (:func:`hnplan.planning.sizing.size_designs`): the accelerator is then the system's; or its rows
        (:func:`hnplan.planning.compare.compare_design_rows`), read alike.
    model : id or entry
        The model it compared.
    catalog : Catalog, optional
    stack : id, path or entry, optional
        The software stack the designs were planned with; default ``megatron-core`` (:data:`hnplan.defaults.DEFAULT_STACK`,
        as :func:`~hnplan.planning.compare.compare_training_designs`); None: no stack entry.
    systems : list of str, optional
        The systems compared as they were given (ids or YAML paths): a design read from a user's file is looked
        up by its path, since the catalog does not hold its id. Default: the rows' ids.
    style : str
        ``markdown`` (file and field names as code spans, for notebooks and the console) or ``plain`` (a JSON
        field: quoted; :func:`hnplan.formatting.styled`).

    Returns
    -------
    str
        Sentences: one paragraph in the ``plain`` style (a JSON field); in ``markdown`` the opening sentence and then
        one Markdown bullet per kind of caveat, each on its own line. Empty when no design has a plan.

    Raises
    ------
    ValueError
        For a style not in :data:`hnplan.formatting.TEXT_STYLES`.
    """
    from hnplan.planning.prediction_cache import cached_training_runs

    cat = catalog or load_catalog()
    rows = as_records(df)
    columns = set(rows[0]) if rows else set()
    ok = [r for r in rows if "status" not in r or (isinstance(r["status"], str) and r["status"].startswith("ok"))]
    ref = {cat.system(s).id: s for s in systems or ()}  # each row's system id -> the id or path it was given as
    if "accelerator" not in columns and "system" in columns and ok:  # e.g. the table of sizing.size_designs
        ok = [{**r, "accelerator": cat.system(ref.get(r["system"], r["system"])).accelerator} for r in ok]
        columns.add("accelerator")
    if not ok or "accelerator" not in columns:
        return ""
    accs = list(dict.fromkeys(r["accelerator"] for r in ok))
    runs_on: dict[str, list] = {a: [] for a in accs}
    published = cached_training_runs()
    for run in published:
        acc = cat.system(run.system).accelerator
        if acc in runs_on:
            runs_on[acc].append(run)
    parts = [
        "Every figure here is a model's prediction, not a measurement; the `validation` report "
        "(`hnplan report --scenario audit`) puts hnplan beside each published run with its error."
    ]
    if "dtype_note" in columns:  # a low-precision plan slower than bf16's: the reason before anything else
        parts.extend(n for r in ok if isinstance(n := r["dtype_note"], str) and n)
    counted = [f"{len(r)} on {a}" for a, r in runs_on.items() if r]
    if counted:
        parts.append(f"Published training runs in the validation set: {', '.join(counted)}.")
    for a, r in runs_on.items():
        if not r:
            names = ", ".join(r["system"] for r in ok if r["accelerator"] == a)
            parts.append(f"No published training run on {a} is in the validation set: {names} is not validated.")
    errors: dict[str, float] = {}
    if counted:
        errors = trust.speed_errors([r for rs in runs_on.values() for r in rs], cat)
        parts.extend(trust.error_sentences(runs_on, errors))
        parts.extend(trust.paired_sentences(runs_on, errors))
    m = cat.model(model)
    planned = ok if {"gpus", "mfu"} <= columns else []
    for row in planned:  # the same model on the same accelerator, measured: its MFU beside ours
        # the same dtype only: an fp8 run's MFU is of the fp8 peak, twice the bf16 one on these chips
        same = [
            r
            for r in runs_on[row["accelerator"]]
            if r.model == m.id and r.metric in _MFU_METRICS and r.dtype == row.get("dtype")
        ]
        if same:
            run = min(same, key=lambda r: abs(math.log(r.gpus / row["gpus"])))
            parts.append(
                f"The nearest published run of {m.id} on {row['accelerator']}, {run.id} ({run.gpus:,} GPUs of "
                f"{run.system}, {run.dtype}), measured {run.published:,.0f} {_MFU_METRICS[run.metric]}, "
                f"{_run_mfu(run, m, cat):.1%} MFU, against {row['mfu']:.1%} for {row['system']}'s plan here (the "
                "plans need not be the same)."
            )
    from hnplan.planning.trust_model import model_runs_sentence

    # the model's own runs, on any chip: a lean the per-accelerator errors above average away
    parts.append(model_runs_sentence(m, cat, errors, published, None if stack is None else cat.stack(stack).id))
    clocks: dict[float, list[str]] = {}
    for a in accs:
        frac = cat.accelerator(a).sustained_compute_fraction
        if frac is not None:  # 1 too: a chip that keeps the full rate is said beside those that do not (GB300)
            clocks.setdefault(frac, []).append(a)
    if clocks and any(frac < 1 for frac in clocks):
        said = "; ".join(
            f"{frac:.3g}{' (the full short-run rate)' if frac >= 1 else ''} on {' and '.join(a)}"
            for frac, a in clocks.items()
        )
        parts.append(
            "Compute-bound kernels run at the share of the short-run rates their laws were fitted to that the "
            "power-limited clock sustains through a training step (the accelerators' "
            f"`sustained_compute_fraction`, each with its source): {said}."
        )
    if said := trust.assumption_sentence(accs, trust.frame_dtypes(ok) if "dtype" in columns else {}, cat):
        parts.append(said)
    if said := trust.uncalibrated_sentence(accs, cat):
        parts.append(said)
    priced = []
    for system in dict.fromkeys(r["system"] for r in ok):  # the cost ranking rests on one system price per design
        try:
            design = cat.design(ref.get(system, system))
            p = design.prices.system
        except HnplanError:
            continue
        if p is not None:
            # what kind of figure each is (a quoted list price, a third-party estimate, an assumption) and per GPU,
            # so that a ranking between unlike figures is read as such
            priced.append(
                f"{system} {units.format_usd(p.usd)} per {p.per} ({units.format_usd(p.usd / design.system.unit_gpus)} "
                f"a GPU), as of {p.as_of}: {p.name}" + (" (assumed)" if p.assumption else "")
            )
    if priced:
        parts.append(
            "The costs and their ranking rest on one dated system price per design (`data/prices.yaml`, each "
            f"with its source and kind): {'; '.join(priced)}. Prices of different kinds (a vendor quote beside "
            "a third-party estimate) rank the designs only as firmly as the least certain of them; the procurement "
            "what-if report varies them (its hardware price factor)."
        )
    if said := _moe_host_sentence(m, stack, accs, cat):
        parts.append(said)
    if said := trust.moe_dispatch_sentence(m, stack, cat):
        parts.append(said)
    if m.moe is not None and {"ep", "system"} <= columns:  # a plan whose experts sit across servers or racks
        spread = [{**r, "system": ref.get(r["system"], r["system"])} for r in ok]
        entry = None if stack is None else cat.stack(stack)
        if said := trust.ep_span_sentence(spread, cat, trust._dispatch(entry), entry):
            parts.append(said)
    if style == "plain":  # a JSON field: one paragraph
        return styled(" ".join(parts), style)
    # the console and the notebooks: the opening sentence, then one bullet per kind of caveat
    return styled("\n".join([parts[0], *(f"- {p}" for p in parts[1:])]), style)


# what each MoE graph scope captures (hnplan.compute.host.graph_scope), in words
_MOE_SCOPE_WORDS = {
    "moe_router": "router",
    "moe_preprocess": "dispatch preprocess and shared experts",
    "moe": "routed experts",
}


def _moe_host_sentence(m, stack, accs: list[str], cat: Catalog) -> str:
    """One sentence for a mixture-of-experts model whose stack launches some MoE kernels from the host: which
    scopes of :data:`hnplan.compute.host.MOE_SCOPES` it leaves out of CUDA graphs on which accelerators, and
    that their host work (``moe_host_us_per_kernel``) is one value fitted to published runs, with the errors
    those runs keep (the README's validation table at the fit over 30 rows, 37.5 us). Empty for a dense model,
    a stack that captures every MoE scope on every accelerator of ``accs``, or one with no MoE host work."""
    from hnplan.catalog.schemas.software import StackChoices
    from hnplan.compute.host import MOE_SCOPES

    if m.moe is None:
        return ""
    entry = None if stack is None else cat.stack(stack)
    base = StackChoices() if entry is None else entry
    if base.moe_host_us_per_kernel <= 0:
        return ""
    where = "the planner's default stack" if entry is None else f"stack {entry.id}"
    missing: dict[tuple[str, ...], list[str]] = {}
    for a in accs:
        over = ((entry.choices_by_accelerator or {}).get(a) or {}) if entry is not None else {}
        scope = {str(s) for s in over.get("cuda_graph_scope", base.cuda_graph_scope)}  # type: ignore[attr-defined]
        if "full_iteration" in scope:
            continue
        left = tuple(s for s in MOE_SCOPES if s not in scope)
        if left:
            missing.setdefault(left, []).append(a)
    if not missing:
        return ""
    said = []
    for left, on in missing.items():
        what = (
            "all its MoE kernels"
            if len(left) == len(MOE_SCOPES)
            else "the " + " and ".join(_MOE_SCOPE_WORDS[s] for s in left) + f" ({', '.join(left)})"
        )
        said.append(what if len(missing) == 1 and len(on) == len(accs) else f"{what} on {' and '.join(on)}")
    # the range: the fitted rows' errors in the README's validation table at the fit over 30 rows (37.5 us)
    return (
        f"{m.id} is a mixture of experts and {where} launches {'; '.join(said)} from the host, outside CUDA graphs"
        + ": published MoE runs that launched MoE kernels from the host were slower than their kernel launches "
        "explain; hnplan adds the host work of their MoE layers as one value "
        f"fitted to those runs (moe_host_us_per_kernel, {base.moe_host_us_per_kernel:g} us a kernel), which leaves "
        "them between 19 % slower and 33 % faster than measured (the most, 17 % and 33 %, NVIDIA/Megatron-LM's "
        "GPU-bound GB200 Qwen3-30B-A3B recipe pair), the bf16 Hopper Qwen3-30B-A3B runs 7-13 % faster "
        '(docs/training.md, "The MoE layer\'s host work, fitted").'
    )
