"""Time to train, GPU-hours and energy of a training job on a given number of GPUs.

Time to train is ``tokens / (tokens_per_s x goodput)``: ``tokens_per_s`` of the best plan
(:func:`hnplan.planning.training.search_best`) and, unless turned off, the goodput of the reliability
model (:func:`hnplan.planning.design.estimate_reliability`: failures, restarts and checkpoint stalls).
Energy is the purchase's facility power at the training draw over that wall time
(:func:`hnplan.power.run_energy`): every GPU bought draws, those that do not train at their idle power. Sizing (the smallest count for a deadline) is
:func:`hnplan.planning.sizing.size_for_deadline`.
"""

from __future__ import annotations

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import InputError
from hnplan.planning.design import estimate_reliability
from hnplan.planning.training import make_job, search_best
from hnplan.power import design_power, run_energy


def _prime_factors(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def batch_note(gpus: int, global_batch_seqs: int, parallel: dict) -> str:
    """Why a GPU count may train slower than a smaller one: the part of ``gpus`` whose prime factors the
    global batch lacks cannot go to data parallelism (DP x micro-batch divides the batch), so TP, PP or
    CP take it; "" when the batch shares every prime factor of ``gpus``.

    >>> batch_note(36864, 2048, {"tp": 8, "pp": 18, "dp": 32, "cp": 8, "ep": 1})  # 36,864 = 2^12 x 9
    '36,864 GPUs = 4,096 x 9: the batch of 2,048 sequences has no factor 9, so data parallelism (DP32) cannot take it and TP8 PP18 CP8 do; a count whose odd factors divide the batch avoids that'
    >>> batch_note(32768, 2048, {"tp": 8, "pp": 16, "dp": 64, "cp": 4, "ep": 1})
    ''
    """
    foreign = 1
    for p, k in _prime_factors(gpus).items():
        if global_batch_seqs % p:
            foreign *= p**k
    if foreign == 1:
        return ""
    model_par = " ".join(f"{k.upper()}{parallel[k]}" for k in ("tp", "pp", "cp") if parallel.get(k, 1) > 1)
    return (
        f"{gpus:,} GPUs = {gpus // foreign:,} x {foreign}: the batch of {global_batch_seqs:,} sequences has no "
        f"factor {foreign}, so data parallelism (DP{parallel.get('dp', 1)}) cannot take it and {model_par} do; "
        "a count whose odd factors divide the batch avoids that"
    )


def purchase_energy(design, gpus: int, gpus_bought: int, seconds: float, tokens: float) -> dict:
    """Energy and carbon of a job on ``gpus`` GPUs of a purchase of ``gpus_bought`` (rounded up to whole units)
    over ``seconds`` of wall time: :func:`hnplan.power.run_energy` with the GPUs that do not train at their
    idle power (:func:`hnplan.power.training_draw_w`), the rule ``hnplan size`` and ``hnplan compare`` share.

    Returns
    -------
    dict
        :func:`hnplan.power.run_energy`'s keys.

    Raises
    ------
    InputError
        If ``gpus_bought`` is below ``gpus``.
    """
    if gpus_bought < gpus:
        raise InputError(f"gpus_bought ({gpus_bought:,}) must be at least the job's GPUs ({gpus:,})")
    power = design_power(design, gpus_bought)  # whole units
    return run_energy(power, seconds, design.facility, tokens, training_gpus=gpus)


def time_to_train(
    model,
    system,
    gpus: int,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    fixed: dict | None = None,
    *,
    goodput: bool = True,
    mode: str = "async",
    offload: str = "none",
    stack=None,
    gpus_bought: int | None = None,
) -> dict:
    """Days, GPU-hours and energy to train ``tokens`` tokens on ``gpus`` accelerators with the best plan.

    Parameters
    ----------
    model, system : id or catalog entry
    gpus : int
    tokens : float
        Training tokens.
    seq_len : int
        [tokens]
    global_batch_seqs : int
        Sequences per step.
    fixed : dict, optional
        Plan knobs to pin (:func:`hnplan.planning.training.rank_plans`).
    goodput : bool
        Divide the throughput by the reliability model's goodput (default); ``False``: no failures.
    mode : {"sync", "async"}
        Checkpoint mode of the goodput.
    offload : {"none", "auto"}
        The stack choice ``offload``: ``auto`` lets plans that do not fit in HBM move state to host or
        pooled memory (:mod:`hnplan.planning.training.offload`).
    stack : str or SoftwareStack, optional
        Software stack id, path or entry (``data/stacks/``, or a ``hnplan calibrate`` output), as
        :func:`hnplan.planning.training.make_job` takes it; default none (the planner's defaults).
    gpus_bought : int, optional
        GPUs of the purchase the job runs on (>= ``gpus``; default the whole units that hold ``gpus``): the
        energy counts all of them, the ones that do not train at their idle power
        (:func:`hnplan.power.training_draw_w`), and the goodput counts their idle nodes as hot spares.

    Returns
    -------
    dict
        ``system, gpus, days`` [days, wall clock], ``gpu_hours`` [GPU-h, the job's GPUs], ``energy_mwh``
        [MWh, the purchase's], ``co2_t`` [t], ``tokens_per_s`` (of the plan, without failures), ``mfu``, ``step_time_s`` [s], ``parallel``
        (the plan's knobs), ``goodput`` (the fraction applied; 1.0 when off) and ``goodput_mode``
        (``mode``, or ``off``), ``batch_note`` (:func:`batch_note`: why data parallelism cannot take
        part of the count, or "").

    Raises
    ------
    InfeasiblePlan
        If no plan divides (:class:`hnplan.errors.PlanRuleError`) or fits on that many GPUs.
    InputError
        For a non-finite or non-positive token count, an unknown checkpoint mode, or ``gpus_bought`` below
        ``gpus``.
    """
    if not (tokens > 0 and tokens < float("inf")):
        raise InputError(f"tokens must be a finite number > 0, got {tokens}")
    cat = catalog or load_catalog()
    job = make_job(
        model, system, gpus, seq_len, global_batch_seqs, dtype, cat, stack=stack, overrides={"offload": offload}
    )
    (est,), _, _ = search_best(job, fixed)
    g = (
        estimate_reliability(
            job.system,
            gpus,
            job.model,
            mode,
            cat,
            tokens_per_s=est.tokens_per_s,
            step_s=est.step_time_s,
            gpus_bought=gpus_bought,
        ).goodput
        if goodput
        else 1.0
    )
    seconds = tokens / (est.tokens_per_s * g)
    energy = purchase_energy(cat.design(job.system), gpus, gpus_bought or gpus, seconds, tokens)
    return dict(
        system=job.system.id,
        gpus=gpus,
        days=units.s_to_days(seconds),
        gpu_hours=gpus * units.s_to_hours(seconds),
        energy_mwh=energy["energy_mwh"],
        co2_t=energy["co2_t"],
        tokens_per_s=est.tokens_per_s,
        mfu=est.mfu,
        step_time_s=est.step_time_s,
        parallel=est.parallel_dict(),
        goodput=g,
        goodput_mode=mode if goodput else "off",
        batch_note=batch_note(gpus, global_batch_seqs, est.parallel_dict()),
    )
