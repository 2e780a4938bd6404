"""GPU counts a job can run on within the whole units a design buys (servers, racks, supernodes): the layouts
the sizing search and the design comparison weigh at a purchase, and the counts they fall back to when the one
asked for has no plan. Split from :mod:`hnplan.planning.design`, which re-exports them."""

from __future__ import annotations


def job_gpu_options(unit_gpus: int, n_units: int) -> tuple[int, ...]:
    """GPU counts a job can run on in ``n_units`` whole units of ``unit_gpus`` each: all their GPUs and,
    for a unit whose GPU count is not a power of two, the largest power of two of each unit's GPUs (the
    others idle as spares).

    A count of 72-GPU racks always carries the factor 9, which a power-of-two batch or layer count cannot
    divide; NVL72 jobs run on 64 GPUs of each rack (MLPerf Training v5.0 GB200 NVL72 submissions: 256-2,496
    GPUs, 64 per rack). The sizing search (:func:`hnplan.planning.sizing_search.size_for_deadline`) and the design comparison
    (:func:`hnplan.planning.compare.compare_training_designs`) keep the faster of these at a purchase.

    Parameters
    ----------
    unit_gpus : int
        GPUs per purchasable unit (a server, a rack, a supernode).
    n_units : int
        Units bought (>= 1).

    Returns
    -------
    tuple of int
        ``(n_units x unit_gpus,)``, plus ``n_units x 2**floor(log2 unit_gpus)`` when ``unit_gpus`` is not a
        power of two.

    >>> job_gpu_options(72, 128), job_gpu_options(8, 4)
    ((9216, 8192), (32,))
    """
    per_unit = (1 << (unit_gpus.bit_length() - 1),) if unit_gpus & (unit_gpus - 1) else ()
    return (n_units * unit_gpus, *(n_units * p for p in per_unit))


def power_of_two_subset(gpus: int, unit_gpus: int) -> tuple[int, ...]:
    """The largest power of two below ``gpus`` when it holds at least a unit, as a job count to weigh beside
    ``gpus`` (``()`` otherwise): a batch of a power of two of sequences takes no factor 3 or 9 into data
    parallelism, so a count that has one (1,152 = 9 x 128 H100) runs a worse layout (DeepSeek-V3 at TP 2 PP 9:
    199 days) than its power-of-two subset (1,024: 174 days), the rest idle as spares. 72-GPU racks get 64 of each
    from :func:`job_gpu_options`; this gives 8-GPU servers the same chance.

    >>> power_of_two_subset(1152, 8), power_of_two_subset(1024, 8), power_of_two_subset(12, 8)
    ((1024,), (), (8,))
    """
    p = 1 << (gpus.bit_length() - 1)
    return (p,) if unit_gpus <= p < gpus else ()


def fallback_job_counts(unit_gpus: int, n_units: int, tried) -> tuple[list[int], list[int]]:
    """GPU counts to weigh when the count asked for (and ``tried``) has no plan, within the ``n_units`` whole
    units bought: first the layouts :func:`job_gpu_options` gives (all their GPUs, the largest power of two
    of each unit's), then, largest first (to be weighed down to the first with a plan), whole units fewer and
    the counts the GPUs bought hold as multiples of a power of two (3,072 of 43 GB200 NVL72 racks' 3,096 GPUs,
    whose factor 43 neither the batch nor a layout takes; the job's scale-up groups are then packed into the
    racks, :func:`packed_units`).

    >>> layouts, walk = fallback_job_counts(8, 125, [1000])
    >>> layouts, walk[:3], walk[-1]
    ([], [992, 984, 976], 8)
    >>> fallback_job_counts(72, 2, [100])
    ([144, 128], [72, 64])
    >>> fallback_job_counts(72, 43, [3096])[1][:3]
    [3088, 3072, 3024]
    """
    layouts = [g for g in job_gpu_options(unit_gpus, n_units) if g not in tried]
    per = {unit_gpus, *(g // n_units for g in job_gpu_options(unit_gpus, n_units))}
    bought = unit_gpus * n_units
    rich = {(bought >> j) << j for j in range(3, bought.bit_length())} - {0}  # multiples of 8, 16, ... 2**j
    walk = sorted(({k * p for k in range(1, n_units + 1) for p in per} | rich) - {*tried, *layouts}, reverse=True)
    return layouts, walk


def weigh_job_counts(gpus: int, unit_gpus: int, n_units: int, plan, score) -> tuple[dict | None, int, dict[int, str]]:
    """The job count a purchase of ``n_units`` whole units runs a job on, as the design comparison and the sweep
    weigh it: the count asked for (``gpus``) and the fewer of :func:`job_gpu_options` (64 of each 72-GPU rack),
    the one ``score`` rates highest kept (and the largest power of two below ``gpus``, :func:`power_of_two_subset`);
    where the count asked for has no plan, the units' layouts, then whole
    units fewer down to the first count with a plan (:func:`fallback_job_counts`).

    Parameters
    ----------
    plan : callable
        ``plan(g)``: the best plan on ``g`` GPUs as a dict, or ``{"error": reason}`` when there is none.
    score : callable
        ``score(g, est)``: what to maximise over the counts with a plan (tokens a second, or with the goodput).

    Returns
    -------
    tuple
        ``(est, used, refused)``: the kept plan (None when no count has one), its GPU count, and ``{count:
        reason}`` for the counts without a plan, in the order weighed.

    >>> speed = {144: None, 128: 2.0, 100: None}
    >>> def plan(g):
    ...     return {"error": f"no plan on {g}"} if speed.get(g) is None else {"tokens_per_s": speed[g]}
    >>> est, used, refused = weigh_job_counts(100, 72, 2, plan, lambda g, e: e["tokens_per_s"])
    >>> used, list(refused)
    (128, [100, 144])
    """
    counts = [gpus, *(g for g in job_gpu_options(unit_gpus, n_units) if g < gpus)]
    # beside a count that has a plan, its power-of-two subset (a count without one falls back to the layouts below)
    extra = [g for g in power_of_two_subset(gpus, unit_gpus) if g not in counts]
    layouts, walk = fallback_job_counts(unit_gpus, n_units, counts)
    est: dict | None = None
    used, best = gpus, float("-inf")
    asked: dict = {}
    refused: dict[int, str] = {}
    seen: set[int] = set()
    for i, g in enumerate(counts + extra + layouts + walk):
        if i >= len(counts) + len(extra) and (g in layouts and "error" not in asked or g in walk and est is not None):
            break
        if g in seen or (i >= len(counts) and i < len(counts) + len(extra) and "error" in asked):
            continue  # weighed already, or the power-of-two subset of a count without a plan (the fallback's turn)
        seen.add(g)
        e = plan(g)
        asked = e if g == gpus else asked
        if "error" in e:
            refused[g] = e["error"]
            continue
        s = score(g, e)
        if est is None or s > best:
            est, used, best = e, g, s
    return est, used, refused


def packed_past_fabric_text(gpus: int, need: int, unit_gpus: int, most: int) -> str:
    """Why a job of ``gpus`` GPUs has no purchase: its scale-up groups held whole need ``need`` GPUs of whole
    units (:func:`packed_units`), more than the ``most`` one scale-out fabric joins (``size`` and ``compare`` say it
    alike).

    >>> packed_past_fabric_text(63488, 71424, 72, 65520)
    'the plan on 63,488 GPUs keeps its scale-up groups whole only in 71,424 GPUs of whole 72-GPU units, more than the 65,520 one scale-out fabric joins; give fewer --gpus'
    """
    return (
        f"the plan on {gpus:,} GPUs keeps its scale-up groups whole only in {need:,} GPUs of whole {unit_gpus}-GPU "
        f"units, more than the {most:,} one scale-out fabric joins; give fewer --gpus"
    )


def packed_units(gpus: int, unit_gpus: int, parallel: dict) -> int:
    """The fewest whole units that hold a job of ``gpus`` GPUs with its scale-up groups whole [units]: the group that
    shares a scale-up domain, ``G = max(tp x cp, ep x etp)`` of ``parallel``, fits ``floor(unit / G)`` times in a unit
    (two EP-64 groups cannot share a 72-GPU rack), so ``ceil(gpus / (G floor(unit / G)))`` units; a group larger
    than a unit spans units anyway: ``ceil(gpus / unit)``.

    >>> packed_units(8192, 72, {"tp": 4, "cp": 1, "ep": 1}), packed_units(1536, 72, {"tp": 1, "ep": 64, "etp": 1})
    (114, 24)
    """
    tp, cp = int(parallel.get("tp") or 1), int(parallel.get("cp") or 1)
    ep, etp = int(parallel.get("ep") or 1), int(parallel.get("etp") or tp)
    group = max(tp * cp, ep * etp)
    if group > unit_gpus:
        return -(-gpus // unit_gpus)
    return -(-gpus // (group * (unit_gpus // group)))
