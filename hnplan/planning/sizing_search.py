"""Sizing, the search: the smallest purchase of a design that trains a model by a deadline
(:func:`size_for_deadline`; :mod:`hnplan.planning.sizing` builds the tables of ``hnplan size`` and of
the ``hardware_sizing`` notebook on it, with what each purchase costs).

Time-to-train at a count is :func:`hnplan.planning.time_to_train.time_to_train`: ``tokens /
(tokens_per_s x goodput)`` with the best plan's throughput and, on by default, the reliability model's
goodput (``goodput=False`` leaves failures out; the result says which in ``goodput`` and
``goodput_mode``).

The search walks whole purchasable units (``unit_gpus``: a server, a rack, a supernode) whose count
has only the prime factors 2, 3 and 5 (counts a parallel layout can divide):

1. start at the lower bound: the count at which even 100 % MFU (and no failures) would just meet
   the deadline, rounded up to such a count;
2. at a count with no valid plan (no layout obeys the plan rules, :class:`hnplan.errors.PlanRuleError`,
   e.g. no data-parallel degree divides the batch and no pipeline split takes the rest without an
   empty stage) take the next count, and give up when a whole doubling of counts (``n`` to ``2n``
   units) has none (a unit whose prime factors no layout of this model and batch can take, such as
   the 9 of a 72-GPU rack for a 32-layer model and a power-of-two batch); at a count where no plan
   fits in memory, double; both are listed in ``skipped`` with the reason;
3. at a count that misses the deadline, extrapolate the count that would meet it (time ~ 1 / GPUs)
   and take the next such count above it; past the most the scale-out fabric joins
   (:func:`hnplan.comm.topology.max_scaleout_gpus`, a 3-tier fat-tree: 65,536 GPUs of 64-port NDR,
   the same limit ``hnplan topology`` enforces) the largest count it joins is the last one tried,
   and a lower bound already above that limit is infeasible at once;
4. after the first count that meets the deadline, try the largest power of two of units below it
   (and, while that meets the deadline, its half, down to the start): time is not monotone in the count,
   a count with an odd factor (3, 5, 9) the batch cannot divide runs slower than a smaller power of two, so
   the extrapolation from such a miss can jump past a power of two that meets the deadline;
5. scan the counts between the largest count tried that misses and the smallest that meets it
   (at most :data:`REFINE_STEPS` of them, in increasing order) and keep the first that meets it.

The answer is the smallest count found on that grid; ``slack_days`` says by how much it beats the
deadline.

A unit whose GPU count is not a power of two (a 72-GPU NVL72 rack, a 384-NPU CloudMatrix) is also tried
with the job on the largest power of two of each unit's GPUs (64 of 72), the others idle as spares: a
count of 72-GPU racks always carries the factor 9, which a power-of-two batch or layer count cannot
divide, and NVL72 jobs run that way (MLPerf Training v5.0 GB200 NVL72 submissions: 256-2,496 GPUs, 64 per
rack). At each unit count the faster of the two is kept; ``gpus`` is the job's count, ``gpus_bought``
what the units hold (power, energy and costs count the units bought, the idle GPUs at their idle power:
:func:`hnplan.planning.time_to_train.purchase_energy`, :func:`hnplan.planning.sizing.size_design`).
"""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import max_scaleout_gpus
from hnplan.compute import peak_flops_per_s, training_flops_per_token
from hnplan.errors import InfeasiblePlan, InputError, PlanRuleError
from hnplan.formatting import counted, deadline_days_text, format_amount
from hnplan.planning.design import job_gpu_options
from hnplan.planning.job_sizes import packed_units
from hnplan.planning.prediction_cache import cached_point, point_digest
from hnplan.planning.time_to_train import purchase_energy, time_to_train
from hnplan.planning.training.candidates import odd_part
from hnplan.planning.training.job import check_dtype_peak

MAX_EVALS = 40  # planner searches per design before giving up
REFINE_STEPS = 8  # counts scanned between the last miss and the first hit


def _next_smooth(n: int) -> int:
    """The smallest integer >= n whose only prime factors are 2, 3 and 5.

    >>> [_next_smooth(k) for k in (1, 7, 11, 13, 49)]
    [1, 8, 12, 15, 50]
    """
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def _refine_counts(low: int, high: int) -> list[int]:
    """The unit counts strictly between ``low`` and ``high`` the refinement tries: the 2-3-5-smooth ones and those
    whose odd part is at most 15 (7, 11 or 13 times a power of two).

    The walk extrapolates over smooth counts; between a miss and a hit a count such as 3,328 GPUs (13 x 256) or
    3,584 (7 x 512) can hold a layout where every smooth count near it has none: its power-of-two part takes DP
    (which must divide a power-of-two batch), its odd part pipeline stages (DeepSeek-V3 on HGX H100 in 90 days:
    3,072 GPUs take 90.0 days, 3,200-4,000 have no layout, 3,328 train in 79.4, and 4,096 was the answer). The
    bound 15 is the refinement's breadth, a choice and not a layout rule (odd parts up to four bits: 9 stages hold
    a 61-layer model as 13 do, 49 would be a deep pipeline); counts past it are tried only where 2-3-5-smooth.

    >>> _refine_counts(384, 512)
    [400, 405, 416, 432, 448, 450, 480, 486, 500]
    """
    return [k for k in range(low + 1, high) if odd_part(k) <= 15 or _next_smooth(k) == k]


def _people(x: float) -> str:
    """A count in words people read (15T, 1.2M); beyond the 10^15 the prefixes reach, an exponent."""
    return units.format_count(x) if x < 1e15 else f"{x:.3g}"


def _prev_smooth(n: int) -> int:
    """The largest integer in [1, n] whose only prime factors are 2, 3 and 5 (1 for n < 1).

    >>> [_prev_smooth(k) for k in (1, 7, 11, 13, 49)]
    [1, 6, 10, 12, 48]
    """
    n = max(1, n)
    while _next_smooth(n) != n:
        n -= 1
    return n


def _no_layout_text(runs: dict) -> str:
    """``, 6 more without a valid layout`` for the counts tried that no layout divides (they cost no search, so the
    searched count leaves them out, where the skipped list names them); empty without any."""
    n = len({g for (g, _), r in runs.items() if isinstance(r, PlanRuleError)})  # job counts, as the skipped list
    return f", {n:,} more without a valid layout" if n else ""


def count_answer(row: dict) -> dict | InfeasiblePlan:
    """A count's cached row as the search reads it: :func:`time_to_train`'s answer, or the exception that said why
    the count has no plan, rebuilt with its class (``error_kind``: :class:`PlanRuleError`, a layout rule, takes the
    next count; :class:`InfeasiblePlan`, a plan that does not fit, doubles) and message.

    >>> type(count_answer({"error": "no layout", "error_kind": "PlanRuleError"})).__name__
    'PlanRuleError'
    >>> count_answer({"days": 3.0})
    {'days': 3.0}
    """
    if "error" not in row:
        return row
    kind = PlanRuleError if row.get("error_kind") == "PlanRuleError" else InfeasiblePlan
    return kind(row["error"])


def size_for_deadline(
    model,
    system,
    tokens: float,
    deadline_days: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    *,
    goodput: bool = True,
    mode: str = "async",
    max_evals: int = MAX_EVALS,
    offload: str = "none",
    stack=None,
) -> dict:
    """The smallest whole-unit GPU count of one design whose best plan trains ``tokens`` within the deadline: a
    walk over 2-3-5-smooth unit counts, then a refinement between the last miss and the first hit that also tries
    counts of 7, 11 or 13 times a power of two (:func:`_refine_counts`).

    Parameters
    ----------
    model, system : id or entry
    tokens : float
        Training tokens.
    deadline_days : float
        [days]
    seq_len, global_batch_seqs : int
        [tokens], [sequences per step].
    goodput : bool
        Divide the throughput by the reliability model's goodput (default True).
    mode : {"sync", "async"}
        Checkpoint mode of the goodput.
    max_evals : int
        Planner searches before giving up.
    offload : {"none", "auto"}
        The stack choice ``offload`` (:mod:`hnplan.planning.training.offload`); ``auto`` lets plans that
        do not fit in HBM use host or pooled memory. :func:`size_table` and :func:`size_design(s)` pass it on.
    stack : str or SoftwareStack, optional
        The software stack every count is planned with (:func:`time_to_train`'s ``stack``).

    Returns
    -------
    dict
        :func:`hnplan.planning.time_to_train.time_to_train`'s keys (``goodput`` and ``goodput_mode``
        among them; ``gpus`` the job's) plus ``units``, ``gpus_bought`` (units x unit GPUs), ``deadline_days``, ``slack_days`` (deadline - days) [days],
        ``evaluated`` (counts whose plans were searched), ``gpus_choice`` (the count kept and why, in words) and
        ``skipped``: ``[{"gpus", "reason"}]`` for the counts that had no valid plan (a plan rule) or no plan that fits.

    Raises
    ------
    InputError
        For a non-finite or non-positive deadline or token count.
    InfeasiblePlan
        If no count the fabric can connect (or within ``max_evals`` searches) meets the deadline; the
        message names the fabric's limit and, where one was searched, the days at the largest count.

    Notes
    -----
    Lower bound: ``tokens x model FLOPs per token / (deadline x dense peak)`` GPUs (100 % MFU).
    """
    for name, v in (("deadline_days", deadline_days), ("tokens", tokens)):
        if not (v > 0 and math.isfinite(v)):
            raise InputError(f"{name} must be a finite number > 0, got {v}")
    cat = catalog or load_catalog()
    sys_, mdl = cat.system(system), cat.model(model)
    check_dtype_peak(cat.accelerator(sys_.accelerator), sys_.id, dtype)
    ideal = (
        tokens
        * training_flops_per_token(mdl, seq_len).model
        / (units.days_to_s(deadline_days) * peak_flops_per_s(cat.accelerator(sys_.accelerator), dtype))
    )
    u = sys_.unit_gpus
    fabric = cat.design(sys_)
    cap = max_scaleout_gpus(fabric) // u  # the most units the scale-out fabric joins
    switch = f"a 3-tier fat-tree of {fabric.scaleout_switch.ports}-port {fabric.scaleout_switch.id} switches"
    job = f"{mdl.id} on {_people(tokens)} tokens within {deadline_days_text(deadline_days)}"
    if ideal > cap * u:
        raise InfeasiblePlan(
            f"{job} needs at least {_people(ideal)} GPUs of {sys_.id} even at 100 % MFU; the most its "
            f"scale-out fabric joins is {cap * u:,} ({switch})"
        )
    tried: dict[int, dict | InfeasiblePlan] = {}  # units -> the faster job's answer, or why there is none
    runs: dict[tuple[int, int], dict | InfeasiblePlan] = {}  # (job, bought) GPUs -> time_to_train's answer, or why not

    stack_entry = None if stack is None else cat.stack(stack)

    def run(g: int, bought: int) -> dict | InfeasiblePlan:
        if (g, bought) not in runs:

            def plan() -> dict:
                try:
                    return time_to_train(
                        mdl,
                        sys_,
                        g,
                        tokens,
                        seq_len,
                        global_batch_seqs,
                        dtype,
                        cat,
                        goodput=goodput,
                        mode=mode,
                        offload=offload,
                        stack=stack,
                        gpus_bought=bought,  # the idle GPUs of the units are hot spares in the goodput
                    )
                except InfeasiblePlan as exc:  # why this count has no plan, kept as its class and message
                    return {"error": str(exc), "error_kind": type(exc).__name__}

            # on disk under the entries' fields, the count and the job (prediction_cache.cached_point): a second
            # search of the same job reads its counts back instead of planning them
            digest = point_digest(
                "size", mdl, sys_, stack_entry, g, bought, tokens, seq_len, global_batch_seqs, dtype, goodput, mode,
                offload,
            )  # fmt: skip
            runs[g, bought] = count_answer(cached_point(digest, cat, plan))
        return runs[g, bought]

    def days_at(n: int) -> float:
        """Days at ``n`` units (inf where no plan divides or fits): the job on all their GPUs or on the
        largest power of two of each unit's, whichever is faster."""
        if n not in tried:
            answers = [run(g, n * u) for g in job_gpu_options(u, n)]  # 72 and 64 GPUs of a 72-GPU rack
            done = [a for a in answers if isinstance(a, dict)]
            if done:
                tried[n] = min(done, key=lambda a: a["days"])
            else:  # why none: a plan that does not fit before a count no layout divides
                tried[n] = next((a for a in answers if not isinstance(a, PlanRuleError)), answers[0])
        r = tried[n]
        return r["days"] if isinstance(r, dict) else math.inf

    def searched() -> int:  # job counts whose plans were searched (a count without a valid plan costs no search)
        return sum(1 for r in runs.values() if not isinstance(r, PlanRuleError))

    n, miss, hit, invalid = _next_smooth(max(1, math.ceil(ideal / u))), 0, 0, []
    start = n
    while not hit:
        if n > cap:
            # the fastest count with a plan: the counts tried and the powers of two of units below the fabric's
            # limit (more GPUs need not train faster: a batch with no factor 3 or 9 takes a count that has one only
            # on a worse layout, so the largest count is not the fastest), else why the last tried has none
            k = 1
            while k <= cap and searched() < max_evals:
                if k >= start and k not in tried:
                    days_at(k)
                k *= 2
            planned = [k for k, v in tried.items() if isinstance(v, dict)]
            last = min(planned, key=lambda k: tried[k]["days"]) if planned else max(tried, default=0)  # type: ignore[index]
            r = tried.get(last)
            at_cap = (
                f"; the fastest of the counts tried, {r['gpus']:,} GPUs, takes {r['days']:,.1f} days"
                if isinstance(r, dict)
                else ""
            )
            at_cap = f"; at {last * u:,} GPUs: {r}" if isinstance(r, InfeasiblePlan) else at_cap
            raise InfeasiblePlan(
                f"no count of {sys_.id} up to the most its scale-out fabric joins ({cap * u:,} GPUs, "
                f"{switch}) trains {job}{at_cap}"
            )
        if searched() >= max_evals:
            raise InfeasiblePlan(
                f"no count of {sys_.id} up to {n * u:,} GPUs ({searched()} searched, the search's limit) trains {job}"
            )
        days = days_at(n)
        r = tried[n]
        if days <= deadline_days:
            hit = n
        elif isinstance(r, PlanRuleError):  # no layout divides this count: the next one
            invalid.append(n)
            if n >= 2 * invalid[0]:  # a whole doubling of counts without a valid plan: the unit's factors
                raise InfeasiblePlan(
                    f"none of {len(invalid)} successive counts of {sys_.id} from {invalid[0] * u} "
                    f"to {invalid[-1] * u} GPUs has a valid plan for {mdl.id}; at {n * u}: {r}"
                )
            n = _next_smooth(n + 1)
        else:
            invalid = []
            if isinstance(r, InfeasiblePlan):  # nothing fits in memory: twice the GPUs
                want = 2 * n
            else:
                miss = n
                want = max(n + 1, math.ceil(n * days / deadline_days))
            last, n = n, _next_smooth(want) if want <= cap else cap + 1
            if n > cap and _prev_smooth(cap) > last:  # the largest count the fabric joins is the last to try
                n = _prev_smooth(cap)
    # a miss at a count with an odd factor (3, 5, 9: layouts the batch divides badly) says little about the
    # smaller power-of-two counts, and the extrapolation from it can jump past one that meets the deadline
    # (DeepSeek-V3 on HGX H100 in 60 days: 3,072 GPUs miss, 6,144 meet, 4,096 was never tried): try the
    # largest power of two of units below the hit, halving while it meets the deadline
    pow2 = 1 << ((hit - 1).bit_length() - 1) if hit > 1 else 0
    while pow2 >= start and pow2 not in tried and searched() < max_evals and days_at(pow2) <= deadline_days:
        hit, pow2 = pow2, pow2 // 2
    # the largest count below the hit that ran (or did not fit) and missed; one no layout divides bounds nothing
    missed = (k for k in tried if k < hit and not isinstance(tried[k], PlanRuleError) and days_at(k) > deadline_days)
    miss = max(missed, default=0)
    # counts known to have no layout cost nothing and bound nothing: the refinement's steps go to the others
    between = [k for k in _refine_counts(miss, hit) if not isinstance(tried.get(k), PlanRuleError)]
    if len(between) > REFINE_STEPS:
        between = sorted({between[int(i)] for i in np.linspace(0, len(between) - 1, REFINE_STEPS)})
    for k in between:
        if searched() >= max_evals:
            break
        if days_at(k) <= deadline_days:
            hit = k
            break
    best = tried[hit]
    assert isinstance(best, dict)
    # the job kept on part of each unit (64 of each 72-GPU rack) may fit on fewer whole units, packed: the same
    # count as ``hnplan size --gpus`` places it, in the fewest units that hold its scale-up groups whole
    # (:func:`packed_units`) and still keep to the deadline; fewer units leave fewer idle GPUs as hot spares, so the
    # days fall with the units and the fewest that keep the deadline are found by bisection
    lo, top = packed_units(best["gpus"], u, best.get("parallel") or {}), hit
    while lo < top and searched() < max_evals:
        mid = (lo + top) // 2
        packed = run(best["gpus"], mid * u)
        if isinstance(packed, dict) and packed["days"] <= deadline_days:
            best, hit, top = packed, mid, mid
        else:
            lo = mid + 1
    out = dict(best)
    # the energy of the purchase (hit whole units), the idle GPUs among them at their idle power
    energy = purchase_energy(fabric, out["gpus"], hit * u, units.days_to_s(out["days"]), tokens)
    out.update(
        energy_mwh=energy["energy_mwh"],
        co2_t=energy["co2_t"],
        units=hit,
        gpus_bought=hit * u,
        deadline_days=deadline_days,
        slack_days=deadline_days - out["days"],
        evaluated=searched(),
        gpus_choice=(
            f"{out['gpus']:,} GPUs"
            + (
                ""
                if out["gpus"] == hit * u
                else f" ({out['gpus'] // hit:,} of the {u}-GPU unit bought)"
                if out["gpus"] % hit == 0 and hit == 1
                else f" ({out['gpus'] // hit:,} of each of the {counted(hit, f'{u}-GPU unit')} bought)"
                if out["gpus"] % hit == 0
                else f" (of the {hit * u:,} in the {counted(hit, f'{u}-GPU unit')} bought)"
            )
            + f": the fewest the search found that train in {counted(deadline_days, 'day', spec='g')} ({format_amount(out['days'], 1)}; "
            f"{counted(searched(), 'count')} searched{_no_layout_text(runs)})"
        ),
        skipped=_skipped(runs),
    )
    return out


def _skipped(runs: dict) -> list[dict]:
    """``[{"gpus", "reason"}]`` for the job counts without a valid plan, in order, each once: a count reached
    from two purchases (2,880 GPUs: all of 40 72-GPU racks, or 64 of each of 45) has one reason."""
    why: dict[int, str] = {}
    for (g, _), r in sorted(runs.items()):
        if isinstance(r, InfeasiblePlan):
            why.setdefault(g, str(r))
    return [{"gpus": g, "reason": r} for g, r in why.items()]
