"""How far to trust a design comparison: what the validation set and the catalog say about its accelerators.

The sentences :func:`hnplan.planning.compare.trust_notes` adds after its counts of published runs: the
signed error of hnplan against every published run on each accelerator, the measured against the predicted
speed ratio of two accelerators where the same job was published on both, and which of the compute
calibrations behind a prediction are labelled assumptions (values carried from another chip) rather than
measurements on the chip itself.
"""

from __future__ import annotations

import math
from statistics import median

from hnplan import units
from hnplan.catalog.loader import Catalog
from hnplan.catalog.runs import TrainingRun
from hnplan.formatting import counted
from hnplan.planning.calibration_note import UNCALIBRATED_DEFAULTS, and_join, uncalibrated_sentence  # noqa: F401 (re-exported)

# an accelerator's runs lean one way when at least this share of them misses on the same side, by a median
# of at least _LEAN_PCT: below that the errors are scatter around the measurements, not a bias
_LEAN_SHARE = 2 / 3
_LEAN_PCT = 5.0


def speed_errors(runs: list[TrainingRun], catalog: Catalog | None) -> dict[str, float]:
    """hnplan's speed against each published run, as ``predicted throughput / measured - 1`` [-].

    A step-time run's error is read as its inverse (a predicted step 10 % longer is a speed 9.1 % lower),
    so a negative value is always "hnplan slower than measured" (a conservative prediction) and a positive
    one "faster" (optimistic), whatever the run's metric.

    Parameters
    ----------
    runs : list of TrainingRun
        Published runs (``data/validation/training_runs.yaml``).
    catalog : Catalog

    Returns
    -------
    dict
        Run id -> speed error [-], from :func:`hnplan.planning.validation.validation_table` (each run planned
        with its stated configuration and software stack), read back from the on-disk cache of
        :mod:`hnplan.planning.prediction_cache` where it holds the run under the same catalog and code.
    """
    if not runs:
        return {}
    if isinstance(catalog, Catalog):
        from hnplan.planning.prediction_cache import cached_speed_errors

        return cached_speed_errors(runs, catalog, lambda todo: _planned_errors(todo, catalog))
    return _planned_errors(runs, catalog)


def _planned_errors(runs: list[TrainingRun], catalog: Catalog | None) -> dict[str, float]:
    """:func:`speed_errors` of ``runs``, each planned now as :func:`hnplan.planning.validation.validation_table`
    plans it (:func:`~hnplan.planning.validation.predicted`, without pandas: the same numbers)."""
    from hnplan.catalog.loader import load_catalog
    from hnplan.planning.validation import predicted, speed_error

    cat = catalog or load_catalog()
    out = {}
    value: dict[str, float] = {}  # the prediction of each configuration: one published twice is planned once
    for run in runs:
        key = _prediction_key(run)
        if key not in value:
            value[key] = predicted(run, cat)
        out[run.id] = float(speed_error(run.metric, value[key], run.published))
    return out


def _prediction_key(run: TrainingRun) -> str:
    """What :func:`hnplan.planning.validation.predicted` reads of a run (its job, stated plan and metric), as one
    string: two runs with the same key have the same prediction (two submissions of one configuration)."""
    return run.model_dump_json(
        include={
            "model",
            "system",
            "gpus",
            "seq_len",
            "global_batch_seqs",
            "dtype",
            "fixed",
            "stack",
            "overrides",
            "mtp_modules",
            "metric",
        }
    )


def _signed(x: float) -> str:
    pct = round(100.0 * x)
    return f"{pct:+d} %" if pct else "0 %"


def _span(values: list[float]) -> str:
    """The signed range of speed errors as said: ``+8 %`` for one value (or several that read alike), else
    ``-3 % to +1 %``.

    >>> _span([0.08]), _span([0.351, 0.348]), _span([-0.03, 0.012])
    ('+8 %', '+35 %', '-3 % to +1 %')
    """
    lo, hi = _signed(min(values)), _signed(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def _lean(values: list[float]) -> int:
    """+1 when at least two thirds of ``values`` are positive with a median of +5 % or more, -1 for the
    mirror case, 0 otherwise (fewer than two values: 0, one job is no trend)."""
    if len(values) < 2:
        return 0
    med = median(values)
    for sign in (1, -1):
        if sum(sign * v > 0 for v in values) >= _LEAN_SHARE * len(values) and sign * med * 100 >= _LEAN_PCT:
            return sign
    return 0


def error_sentences(runs_on: dict[str, list[TrainingRun]], errors: dict[str, float]) -> list[str]:
    """hnplan's speed errors over the published runs on each accelerator, and which way a design leans.

    Parameters
    ----------
    runs_on : dict
        Accelerator id -> its validation runs (accelerators without runs are skipped).
    errors : dict
        Run id -> speed error [-] (:func:`speed_errors`).

    Returns
    -------
    list of str
        One sentence giving, per accelerator, the median speed error, how many runs hnplan predicts slower
        than measured, the range and how many runs are documented misses (``expect: gap``, reported, not held
        to a tolerance); then, for the accelerators whose runs lean one way (at least two thirds on one side,
        median beyond 5 %), which way their designs likely err. Empty without runs.
    """
    items: list[str] = []
    slow: list[str] = []
    fast: list[str] = []
    for acc, runs in runs_on.items():
        if not runs:
            continue
        errs = [errors[r.id] for r in runs]
        n, gaps = len(errs), sum(r.expect == "gap" for r in runs)
        span = _span(errs)
        items.append(
            f"{acc} median {_signed(median(errs))}, {sum(e < 0 for e in errs)} of {n} slower, {span}, "
            f"{gaps} of {n} `expect: gap`"
        )
        {1: fast, -1: slow}.get(_lean(errs), []).append(acc)
    if not items:
        return []
    out = [
        "hnplan's speed against those runs (its throughput over the measured, minus 1; each run planned on its "
        f"published configuration): {'; '.join(items)} (`expect: gap`: a documented miss, reported but not held "
        "to a tolerance)."
    ]
    if slow:
        out.append(
            f"On {and_join(slow)} hnplan leans slow (at least two thirds of the runs slower than measured, median "
            "beyond 5 %): a design on it is likely faster and cheaper per token than this comparison shows."
        )
    if fast:
        out.append(
            f"On {and_join(fast)} hnplan leans fast (at least two thirds of the runs faster than measured, median "
            "beyond 5 %): a design on it is likely slower and dearer per token than this comparison shows."
        )
    return out


def _job_key(run: TrainingRun) -> tuple:
    # the same job: model, scale, batch, dtype, what was published and the software stack that ran it (each
    # accelerator on its own published plan, which the predictions follow)
    return (run.model, run.gpus, run.seq_len, run.global_batch_seqs, run.dtype, run.metric, run.stack)


def _speed(run: TrainingRun, value: float) -> float:
    return 1.0 / value if run.metric == "step_time_s" else value


def paired_sentences(runs_on: dict[str, list[TrainingRun]], errors: dict[str, float]) -> list[str]:
    """Measured against predicted speed ratios of two accelerators where the same job ran on both.

    A job is the model, GPU count, sequence length, global batch, dtype, published metric and software stack
    (:class:`hnplan.catalog.runs.TrainingRun`); each accelerator runs it on its own published plan and hnplan
    predicts each run on that plan, so the predicted ratio is ``measured ratio x (1 + e_b) / (1 + e_a)`` with
    the speed errors ``e`` of :func:`speed_errors`.

    Parameters
    ----------
    runs_on : dict
        Accelerator id -> its validation runs, in the comparison's order.
    errors : dict
        Run id -> speed error [-].

    Returns
    -------
    list of str
        One sentence (none without such a job) with an item per pair of accelerators: the faster one (by the
        measured geometric-mean ratio) first, the measured and predicted ratios, the number of jobs, and
        whether hnplan understates or overstates its lead when at least two of the jobs do, two thirds on the
        same side by a median beyond 5 %.
    """
    items = []
    accs = list(runs_on)
    for i, a in enumerate(accs):
        for b in accs[i + 1 :]:
            first_a: dict[tuple, TrainingRun] = {}
            for r in runs_on[a]:
                first_a.setdefault(_job_key(r), r)
            pairs, seen = [], set()
            for r in runs_on[b]:
                k = _job_key(r)
                if k in first_a and k not in seen:
                    seen.add(k)
                    ra = first_a[k]
                    measured = _speed(r, r.published) / _speed(ra, ra.published)
                    pairs.append((measured, measured * (1 + errors[r.id]) / (1 + errors[ra.id])))
            if not pairs:
                continue
            fast, slow = b, a
            if math.prod(m for m, _ in pairs) < 1:  # name the faster one first
                fast, slow = a, b
                pairs = [(1 / m, 1 / p) for m, p in pairs]
            items.append(_pair_item(fast, slow, pairs))
    if not items:
        return []
    return [
        "Where the validation set has the same job (model, GPUs, batch, dtype and software stack, each chip on "
        f"its own published plan) on two of these accelerators, measured speed ratio against hnplan's: "
        f"{'; '.join(items)}."
    ]


def _pair_item(fast: str, slow: str, pairs: list[tuple[float, float]]) -> str:
    meas, pred = [m for m, _ in pairs], [p for _, p in pairs]

    def span(xs: list[float]) -> str:
        return units.format_span(min(xs), max(xs), ".2f", "x")

    text = f"{fast} over {slow} {span(meas)} against {span(pred)} ({len(pairs)} job{'s' if len(pairs) > 1 else ''}"
    lean = _lean([p / m - 1 for m, p in pairs])
    if lean < 0:
        text += f"; hnplan likely understates {fast}'s lead"
    elif lean > 0:
        text += f"; hnplan likely overstates {fast}'s lead"
    return text + ")"


def assumption_sentence(accs: list[str], dtypes: dict[str, str], catalog: Catalog) -> str:
    """Which accelerators' GEMM ceiling and sustained clock are labelled assumptions, not measurements.

    Parameters
    ----------
    accs : list of str
        Accelerator ids of the comparison.
    dtypes : dict
        Accelerator id -> the GEMM dtype of its plan (``bf16`` where the comparison gives none).
    catalog : Catalog

    Returns
    -------
    str
        Empty when every accelerator has its GEMM ceiling (``matmul_efficiency`` of the plan's dtype, a MAMF
        fraction) and its ``sustained_compute_fraction`` measured on itself (in ``field_sources``); otherwise
        one sentence naming those carried in ``assumptions`` (its catalog entry gives the value and why).
    """
    gemm, clock = [], []
    for a in accs:
        acc = catalog.accelerator(a)
        assumed = set(acc.assumptions)
        if {"matmul_efficiency", f"matmul_efficiency.{dtypes.get(a, 'bf16')}"} & assumed:
            gemm.append(a)
        if "sustained_compute_fraction" in assumed and acc.sustained_compute_fraction is not None:
            clock.append(a)
    said = []
    if gemm:
        said.append(f"the GEMM ceiling (`matmul_efficiency`, a MAMF fraction) on {and_join(gemm)}")
    if clock:
        said.append(f"the sustained clock (`sustained_compute_fraction`) on {and_join(clock)}")
    if not said:
        return ""
    return (
        f"Not measured on the chip itself but labelled assumptions, carried from a related chip: {'; '.join(said)} "
        "(the `assumptions` of `data/accelerators/<id>.yaml` give the value carried and why); step times on those "
        "chips "
        "move with them."
    )


def frame_dtypes(ok: list[dict]) -> dict[str, str]:
    """Accelerator id -> the dtype of its first planned design in a comparison table's rows (with ``accelerator``;
    none where a row has no ``dtype``)."""
    return {r["accelerator"]: d for r in ok[::-1] if isinstance(d := r.get("dtype"), str)}


def _dispatch(stack, overrides: dict | None = None) -> tuple[bool, str]:
    """A stack's MoE dispatch: whether the expert all-to-all hides behind compute (``ep_comm``) and its
    dispatcher (``ep_dispatcher``), a run's or a plan's ``overrides`` applied; ``None``: the planner's defaults."""
    from hnplan.catalog.schemas.software import StackChoices

    base = StackChoices() if stack is None else stack
    over = overrides or {}
    return bool(over.get("ep_comm", base.ep_comm)), str(over.get("ep_dispatcher", base.ep_dispatcher))


def moe_dispatch_sentence(model, stack=None, catalog: Catalog | None = None, overrides: dict | None = None) -> str:
    """One sentence when a mixture-of-experts model is planned with a MoE dispatch that the validation set
    shows missing a published run by more than its tolerance, where the same job predicted with another
    dispatch lands within it; it names the stacks with that other dispatch and their errors.

    The evidence is read from the validation runs (``data/validation/training_runs.yaml``), not from a list
    of models: two runs are the same job when model, system, GPUs, sequence length, batch, dtype, metric and
    published figure agree, so their difference in error is their stacks' difference; a stack's dispatch is its
    ``ep_comm`` and ``ep_dispatcher`` with the run's ``overrides`` (DeepSeek-V3 on 2,048 H800, arXiv:2412.19437:
    the NCCL all-to-all exposed, as megatron-core plans it, against DualPipe's overlap).

    Parameters
    ----------
    model : id or entry
    stack : id, path or entry, optional
        The stack the plan uses; ``None``: the planner's defaults (:class:`StackChoices`).
    catalog : Catalog, optional
    overrides : dict, optional
        Stack choices the plan sets differently (``{"ep_comm": True}`` for ``hnplan train --ep-overlap``).

    Returns
    -------
    str
        Empty for a dense model, or when no such pair of runs speaks against the plan's dispatch.
    """
    from hnplan.catalog import load_catalog
    from hnplan.planning.prediction_cache import cached_training_runs

    cat = catalog or load_catalog()
    m = cat.model(model)
    if m.moe is None:
        return ""
    entry = None if stack is None else cat.stack(stack)
    mine = _dispatch(entry, overrides)
    runs = [r for r in cached_training_runs() if cat.model(r.model).moe is not None]
    of = {r.id: _dispatch(cat.stack(r.stack), r.overrides) for r in runs}
    jobs: dict[tuple, list[TrainingRun]] = {}
    for r in runs:
        jobs.setdefault((*_job_key(r)[:-1], r.published), []).append(r)
    paired = [rs for rs in jobs.values() if len({of[r.id] for r in rs}) > 1 and any(of[r.id] == mine for r in rs)]
    if not paired:
        return ""
    errors = speed_errors([r for rs in paired for r in rs], cat)
    evidence: list[str] = []
    better: set[tuple[bool, str]] = set()
    for rs in paired:
        missed = [r for r in rs if of[r.id] == mine and abs(errors[r.id]) * 100 > r.tolerance_pct]
        matched = [r for r in rs if of[r.id] != mine and abs(errors[r.id]) * 100 <= r.tolerance_pct]
        if missed and matched:
            a, b = missed[0], matched[0]
            evidence.append(
                f"{a.id} ({a.gpus:,} GPUs of {a.system}) is predicted {_signed(errors[a.id])} with it, "
                f"{_signed(errors[b.id])} with {b.stack}"
            )
            better.update(of[r.id] for r in matched)
    if not evidence:
        return ""
    # runs whose stack itself has that dispatch (not one a run's overrides give it): the stacks a user can name
    alike = [r for r in runs if of[r.id] in better and _dispatch(cat.stack(r.stack)) in better]
    errors.update(speed_errors([r for r in alike if r.id not in errors], cat))
    named: dict[str, list[str]] = {}
    for r in alike:
        named.setdefault(r.stack, []).append(f"{_signed(errors[r.id])} on {r.id}")
    where = "the planner's defaults" if entry is None else entry.id
    hidden = "hidden behind compute" if mine[0] else "exposed"
    return (
        f"{m.id} is a mixture of experts planned on {where}, whose MoE dispatch ({mine[1]}, expert all-to-all "
        f"{hidden}) has a known validation gap: {'; '.join(evidence)} (speed errors; negative = slower than "
        "measured); stacks with the dispatch that matched: "
        + ", ".join(f"--stack {s} ({', '.join(e)})" for s, e in named.items())
        + "."
    )


def _ep_domains(system, ep: int, etp: int) -> int:
    """Scale-up domains an EP group of ``ep`` ranks spaced ``etp`` apart spans on ``system`` (Megatron-Core's
    expert rank order: :func:`hnplan.comm.topology.split_group`)."""
    from hnplan.comm.topology import split_group

    return split_group(int(ep), max(int(etp), 1), system.scaleup_domain_gpus)[1]


def ep_span_sentence(
    rows: list[dict], catalog: Catalog, dispatch: tuple[bool, str] = (False, "alltoall"), stack=None
) -> str:
    """One sentence for the plans whose expert-parallel group spans scale-up domains (8-GPU servers, NVL72 racks),
    so that their dispatch and combine cross the scale-out network, with what the validation set says of such
    plans: the speed errors of the published MoE runs with the same dispatch whose stated EP group spans domains,
    per accelerator, and, where the plans overlap the all-to-all, that the overlap's share across servers is
    measured on Hopper only (docs/training.md, "Expert parallelism across the scale-out network").

    Parameters
    ----------
    rows : list of dict
        Plans with ``system`` (an id or YAML path ``catalog.system`` reads), ``ep`` and ``etp`` (or ``tp``, the
        default ETP): the rows of :func:`hnplan.planning.compare.compare_training_designs`, or one plan of
        ``hnplan train``.
    catalog : Catalog
    dispatch : (bool, str)
        The plans' expert all-to-all: overlapped (``ep_comm``) and its ``ep_dispatcher``; the evidence is the runs
        with the same pair (a stack's choices with a run's overrides).
    stack : SoftwareStack, optional
        The plans' stack, whose overlap share on each plan's accelerator the sentence gives (its
        ``ep_comm_overlap_fraction_by_accelerator`` where it lists the chip, else its ``ep_comm_overlap_fraction``);
        None: the planner's defaults.

    Returns
    -------
    str
        Empty when no plan's EP group leaves its scale-up domain.
    """
    from hnplan.planning.prediction_cache import cached_training_runs

    spans = []
    accs: list[str] = []  # the accelerators of the plans that span domains
    for r in rows:
        ep, etp = int(r.get("ep") or 1), int(r.get("etp") or r.get("tp") or 1)
        if ep > 1:
            system = catalog.system(r["system"])
            d = _ep_domains(system, ep, etp)
            if d > 1:
                kind = "servers" if system.scaleup_domain_gpus == system.node_gpus else "scale-up domains"
                spans.append(f"{r['system']}'s EP {ep} spans {d} {kind}")
                accs.append(system.accelerator)
    if not spans:
        return ""
    across: list[TrainingRun] = []
    other: list[TrainingRun] = []  # the same dispatcher across domains with the other overlap setting
    for run in cached_training_runs():
        fx = run.fixed or {}
        if (fx.get("ep") or 1) > 1 and catalog.model(run.model).moe is not None:
            theirs = _dispatch(catalog.stack(run.stack), run.overrides)
            if theirs[1] != dispatch[1]:
                continue
            if _ep_domains(catalog.system(run.system), fx["ep"], fx.get("etp") or fx.get("tp") or 1) > 1:
                (across if theirs == tuple(dispatch) else other).append(run)
    errors = speed_errors(across + other, catalog)

    def by_chip(runs: list[TrainingRun]) -> str:
        by_acc: dict[str, list[float]] = {}
        for run in runs:
            by_acc.setdefault(catalog.system(run.system).accelerator, []).append(errors[run.id])
        return "; ".join(f"{counted(len(v), 'run')} on {a} ({_span(v)})" for a, v in sorted(by_acc.items()))

    evidence = by_chip(across)
    how = f"the {dispatch[1]} dispatcher, all-to-all {'overlapped' if dispatch[0] else 'exposed'}"
    lead = f"{and_join(spans)}, so {'its' if len(spans) == 1 else 'their'} expert dispatch and combine cross the scale-out network"
    if evidence:
        said = (
            f"{lead}: the published runs with EP across scale-up domains and {how} read {evidence} (speed errors; "
            "positive = faster than measured)"
        )
    else:
        said = f"{lead}, which no published run with {how} in the validation set did"
    if other:  # the same dispatcher with the all-to-all the other way: evidence on other chips, said apart
        said += f"; with it {'exposed' if dispatch[0] else 'overlapped'} instead they read {by_chip(other)}"
    if dispatch[0]:
        from hnplan.catalog.schemas.software import StackChoices

        scalar = (stack or StackChoices()).ep_comm_overlap_fraction
        per_chip = (getattr(stack, "ep_comm_overlap_fraction_by_accelerator", None) or {}) if stack else {}
        shares = [
            f"{per_chip[a]:.2f} on {a} (the stack's value for the chip, fitted to a pair of runs across servers)"
            if a in per_chip
            else f"{scalar:.2f} on {a} (the stack's share; unmeasured for traffic across servers on this chip)"
            for a in dict.fromkeys(accs)
        ]
        said += f"; the 1F1B overlap hides {and_join(shares)} of what the schedule allows"
    return said + ' (docs/training.md, "Expert parallelism across the scale-out network").'
