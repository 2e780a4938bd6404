"""Days to train on a fixed purchase of one design (``hnplan size --gpus``): the job layouts the deadline search
weighs at each count, and the count kept in words (split out of :mod:`hnplan.planning.sizing`, which re-exports
:func:`time_on_purchase`)."""

from __future__ import annotations

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import max_scaleout_gpus, whole_units
from hnplan.errors import InfeasiblePlan
from hnplan.planning.design import fallback_job_counts
from hnplan.planning.job_sizes import packed_past_fabric_text, packed_units, power_of_two_subset
from hnplan.planning.sizing_search import job_gpu_options
from hnplan.planning.time_to_train import time_to_train

__all__ = ["time_on_purchase"]


def time_on_purchase(
    model,
    system,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    *,
    goodput: bool = True,
    mode: str = "async",
    offload: str = "none",
    stack=None,
) -> dict:
    """Days to train on a purchase of ``gpus`` GPUs of one design, with the job layouts the deadline
    search weighs (:func:`~hnplan.planning.sizing_search.size_for_deadline`): the whole units that hold ``gpus`` are bought, and where the
    unit's GPU count is not a power of two the job is also planned on the largest power of two of each
    unit's GPUs when that is fewer than ``gpus`` (8,192 of 9,216 GB200 NVL72 GPUs: 64 of each 72-GPU rack,
    :func:`hnplan.planning.sizing_search.job_gpu_options`, as ``hnplan compare`` does); the option with the
    fewest days is kept. Where the count asked for has no plan (100 GB200 GPUs: the factor 25 that neither
    the batch nor the layers take), the counts the units bought hold are weighed instead, up to all of them:
    those layouts (144, and 128 = 64 of each rack), then, if neither has a plan, whole units fewer, largest
    first, down to the first count with a plan (1,000 H100 GPUs for Llama 3.1 70B: 896, TP8 PP7 DP16).

    Parameters
    ----------
    gpus : int
        GPUs asked for (>= 1); the purchase is ``ceil(gpus / unit_gpus)`` whole units.
    model, system, tokens, seq_len, global_batch_seqs, dtype, catalog, goodput, mode, offload, stack
        As :func:`hnplan.planning.time_to_train.time_to_train`.

    Returns
    -------
    dict
        :func:`time_to_train`'s keys for the chosen job (``gpus`` its GPU count) plus ``units``,
        ``gpus_bought`` (units x unit GPUs), ``gpu_options`` (``[{"gpus", "days"}]``, or ``"reason"``
        for an option without a plan, the count asked for first) and ``gpus_choice`` (the choice in words,
        "" where only one count was weighed).

    Raises
    ------
    InfeasiblePlan
        When no option has a plan: the reason of the count asked for, and the other counts tried.
    """
    cat = catalog or load_catalog()
    sys_ = cat.system(system)
    unit = sys_.unit_gpus
    bought = whole_units(cat.design(sys_), gpus)  # the whole units that hold the GPUs asked for
    n_units = bought // unit
    options: list[int] = [gpus, *(g for g in job_gpu_options(unit, n_units) if g < gpus)]
    answers: list[dict | InfeasiblePlan] = []

    def train(g: int, bought: int) -> dict:  # the job on g GPUs of the purchase, its idle GPUs spares
        return time_to_train(
            model, sys_, g, tokens, seq_len, global_batch_seqs, dtype, cat,
            goodput=goodput, mode=mode, offload=offload, stack=stack, gpus_bought=bought,
        )  # fmt: skip

    def weigh(counts) -> None:
        for g in counts:
            try:
                answers.append(train(g, bought))
            except InfeasiblePlan as exc:
                answers.append(exc)

    weigh(options)
    if isinstance(answers[0], dict):  # beside a count that has a plan, its power-of-two subset (1,024 of 1,152 H100)
        extra = [g for g in power_of_two_subset(gpus, unit) if g not in options]
        options += extra
        weigh(extra)
    if not isinstance(answers[0], dict):
        # no plan on the count asked for: the counts the units bought hold, up to all of them. First the
        # layouts the deadline search weighs (all their GPUs, the largest power of two of each unit's); if
        # none has a plan, whole units fewer, largest first, down to the first count with a plan
        more, walk = fallback_job_counts(unit, n_units, options)
        options += more
        weigh(more)
        for g in walk:
            if any(isinstance(a, dict) for a in answers):
                break
            options.append(g)
            weigh([g])
    done = [a for a in answers if isinstance(a, dict)]
    if not done:
        first = answers[0]
        assert isinstance(first, InfeasiblePlan)
        if len(options) == 1:
            raise first
        counts = [f"{g:,}" for g in options[1:]]
        tried = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} or {counts[-1]}"
        raise InfeasiblePlan(
            f"{first}; nor on {tried} GPUs of the {n_units:,} whole {unit}-GPU unit{'s' * (n_units > 1)} "
            f"bought ({bought:,} GPUs)"
        ) from first
    best = min(done, key=lambda a: a["days"])  # ties: the count asked for (listed first)
    need = packed_units(best["gpus"], unit, best.get("parallel") or {}) * unit
    whole = ""
    if need > bought and need > (most := max_scaleout_gpus(cat.design(sys_))):  # beyond what a fabric joins
        raise InfeasiblePlan(packed_past_fabric_text(best["gpus"], need, unit, most))
    if need > bought:  # its scale-up groups cannot tile the units that hold the count: the units that hold them whole
        whole = f"; bought as {need // unit:,} whole units, which hold its scale-up groups whole ({bought // unit:,} do not)"
        bought, n_units = need, need // unit
        best = train(best["gpus"], bought)
    out = dict(best)
    weighed = [
        {"gpus": g, "days": a["days"]} if isinstance(a, dict) else {"gpus": g, "reason": str(a)}
        for g, a in zip(options, answers, strict=True)
    ]
    out.update(
        units=n_units,
        gpus_bought=bought,
        gpu_options=weighed,
        gpus_choice=(_choice(weighed, best, gpus, unit) + whole).removeprefix("; "),
    )
    return out


def _choice(weighed: list[dict], best: dict, gpus: int, unit: int) -> str:
    """The count :func:`time_on_purchase` kept and why, in one sentence; "" where one count was weighed.

    >>> w = [{"gpus": 100, "reason": "no plan divides: ..."}, {"gpus": 144, "reason": "x"}, {"gpus": 128, "days": 90.0}]
    >>> _choice(w, {"gpus": 128, "days": 90.0}, 100, 72)
    '128 GPUs train (64 of each 72-GPU unit), 90.0 days: the 100 asked for have no plan (no plan divides); no plan on 144'
    """
    if len(weighed) == 1:
        return ""
    g, days = best["gpus"], best["days"]
    n_units = -(-gpus // unit)
    units_bought = f"{n_units:,} whole {unit}-GPU unit{'s' * (n_units > 1)} bought"
    if g == gpus:
        where = f"all {gpus:,} asked for"
    elif g % unit == 0:
        where = f"all the GPUs of the {units_bought}" if g == n_units * unit else f"{g // unit:,} of the {units_bought}"
    elif g % n_units == 0:  # the largest power of two of each unit's GPUs
        where = f"{g // n_units} of each {unit}-GPU unit"
    else:  # a count the units hold unevenly (its scale-up groups packed into them)
        where = f"{g:,} of the {n_units * unit:,} GPUs of the {units_bought}"
    text = f"{g:,} GPUs train ({where}), {days:,.1f} days"
    asked = weighed[0]
    if "reason" in asked:
        why = asked["reason"].split(": ", 1)[0].split(" (", 1)[0]  # the reason's first clause
        text += f": the {gpus:,} asked for {'has' if gpus == 1 else 'have'} no plan ({why})"
    others = [w for w in weighed[1:] if w["gpus"] != g]
    parts = [text, *(f"on {w['gpus']:,}: {w['days']:,.1f} days" for w in others if "days" in w)]
    if "days" in asked and g != gpus:
        parts.insert(1, f"on {gpus:,}: {asked['days']:,.1f} days")
    none = [w["gpus"] for w in others if "days" not in w]
    if none:
        parts.append(
            f"no plan on {none[0]:,}"
            if len(none) == 1
            else f"no plan on {none[0]:,} or {none[1]:,}"
            if len(none) == 2
            else f"no plan on the {len(none)} counts from {none[0]:,} to {none[-1]:,}"
        )
    return "; ".join(parts)
