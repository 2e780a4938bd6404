"""Time to train, GPU-hours and energy of a training job, and sizing: the smallest GPU count per design
that meets a deadline, or the days a fixed GPU count takes.

Time to train is ``tokens / tokens_per_s`` of the best plan (:func:`hnplan.planning.training.best_plan`),
without failures or restarts (see the reliability model for goodput). Energy is the design's facility
power (:func:`hnplan.power.design_power`: IT power x PUE) at the catalog's average training draw
(``facility.training_power_fraction``) over that time.

Sizing walks GPU counts in whole purchasable units (``unit_gpus``: a server, a rack, a supernode):
from a lower bound (the count at which even 100 % MFU would miss the deadline, rounded up to a power
of two of units so that the parallel degrees can divide it) it doubles until a plan meets the deadline
or the fabric cannot connect more, then scans the bracket between the last miss and the first hit in
:data:`REFINE_STEPS` steps. Counts with awkward factors (a prime number of racks) have no plan that
divides a power-of-two batch, so the answer is the smallest count *found* on that grid, and its
``slack_days`` says by how much it beats the deadline.
"""

from __future__ import annotations

import math

import pandas as pd

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import scaleout_bom
from hnplan.compute import peak_flops_per_s, training_flops_per_token
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.planning.training import best_plan
from hnplan.power import design_power, energy_j

MAX_UNITS_DOUBLINGS = 24  # stop doubling after 2^24 units (far beyond any built cluster)
REFINE_STEPS = 8  # the bracket between the last miss and the first hit is scanned in 8 steps


def training_energy_j(system, gpus: int, seconds: float, catalog: Catalog | None = None) -> float:
    """Facility energy of ``gpus`` accelerators of a system training for ``seconds`` [J]: rated
    facility power x ``facility.training_power_fraction`` x time."""
    cat = catalog or load_catalog()
    pw = design_power(cat.design(system), gpus)
    return energy_j(pw.facility_w * cat.facility.training_power_fraction.value, seconds)


def time_to_train(model, system, gpus: int, tokens: float, seq_len: int, global_batch_seqs: int,
                  dtype: str = "bf16", catalog: Catalog | None = None, fixed: dict | None = None) -> dict:
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

    Returns
    -------
    dict
        ``system, gpus, days`` [days], ``gpu_hours`` [GPU-h], ``energy_mwh`` [MWh], ``tokens_per_s``,
        ``mfu``, ``step_time_s`` [s], ``parallel`` (the plan's knobs).

    Raises
    ------
    InfeasiblePlan
        If no plan divides and fits on that many GPUs.
    InputError
        For a non-positive token count.
    """
    if tokens <= 0:
        raise InputError(f"tokens must be > 0, got {tokens}")
    cat = catalog or load_catalog()
    sys_ = cat.system(system)
    (est,), _, _ = best_plan(model, sys_, gpus, seq_len, global_batch_seqs, dtype, fixed=fixed, catalog=cat)
    seconds = tokens / est.tokens_per_s
    return dict(system=sys_.id, gpus=gpus, days=units.s_to_days(seconds), gpu_hours=gpus * units.s_to_hours(seconds),
                energy_mwh=units.j_to_mwh(training_energy_j(sys_, gpus, seconds, cat)),
                tokens_per_s=est.tokens_per_s, mfu=est.mfu, step_time_s=est.step_time_s,
                parallel=est.parallel_dict())


def _buildable(system, gpus: int, cat) -> bool:
    """Whether the system's scale-out fabric can connect ``gpus`` accelerators (a 3-tier fat-tree at most)."""
    try:
        scaleout_bom(cat.design(system), gpus)
    except InputError:
        return False
    return True


def _try(model, system, n, tokens, seq_len, batch, dtype, cat):
    try:
        return time_to_train(model, system, n, tokens, seq_len, batch, dtype, cat)
    except InfeasiblePlan:
        return None


def size_for_deadline(model, system, tokens: float, deadline_days: float, seq_len: int, global_batch_seqs: int,
                      dtype: str = "bf16", catalog: Catalog | None = None) -> dict:
    """The smallest GPU count (whole units) of a design whose best plan trains ``tokens`` within a deadline.

    Returns
    -------
    dict
        :func:`time_to_train`'s keys plus ``deadline_days`` and ``slack_days`` (deadline - days).

    Raises
    ------
    InfeasiblePlan
        If no count up to ``2^24`` units meets the deadline.
    InputError
        For a non-positive deadline.

    Notes
    -----
    Lower bound: ``tokens x model FLOPs per token / (deadline x dense peak)`` GPUs (100 % MFU).
    """
    if deadline_days <= 0:
        raise InputError(f"deadline must be > 0 days, got {deadline_days}")
    cat = catalog or load_catalog()
    sys_, mdl = cat.system(system), cat.model(model)
    ideal = tokens * training_flops_per_token(mdl, seq_len).model / (
        units.days_to_s(deadline_days) * peak_flops_per_s(cat.accelerator(sys_.accelerator), dtype))
    unit = sys_.unit_gpus
    lo = max(1, math.ceil(ideal / unit))  # in units; below lo nothing can meet the deadline
    n = 1 << (lo - 1).bit_length()  # a power-of-two number of units: degrees divide it
    miss, hit = n // 2, None
    for _ in range(MAX_UNITS_DOUBLINGS):
        if not _buildable(sys_, n * unit, cat):
            break
        r = _try(mdl, sys_, n * unit, tokens, seq_len, global_batch_seqs, dtype, cat)
        if r is not None and r["days"] <= deadline_days:
            hit = (n, r)
            break
        miss, n = n, n * 2
    if hit is None:
        raise InfeasiblePlan(f"no count of {sys_.id} up to {miss * unit} GPUs (the largest it can network) trains "
                             f"{mdl.id} on {tokens:.3g} tokens within {deadline_days} days")
    step = max(1, (hit[0] - miss) // REFINE_STEPS)
    for k in range(max(miss + step, lo), hit[0], step):  # refine upwards between the bracket's ends
        r = _try(mdl, sys_, k * unit, tokens, seq_len, global_batch_seqs, dtype, cat)
        if r is not None and r["days"] <= deadline_days:
            hit = (k, r)
            break
    out = dict(hit[1])
    out.update(deadline_days=deadline_days, slack_days=deadline_days - out["days"])
    return out


def size_table(model, systems, tokens: float, seq_len: int, global_batch_seqs: int, *,
               deadline_days: float | None = None, gpus: int | None = None, dtype: str = "bf16",
               catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per system: the smallest GPU count meeting ``deadline_days``, or the days ``gpus`` take.

    Exactly one of ``deadline_days`` and ``gpus`` is given. A system without an answer keeps its row
    with the reason in ``status`` (``ok`` otherwise).

    Returns
    -------
    pandas.DataFrame
        Columns of :func:`time_to_train` (plus ``deadline_days, slack_days`` when sizing) and ``status``.

    Raises
    ------
    InputError
        Unless exactly one of ``deadline_days`` and ``gpus`` is given.
    """
    if (deadline_days is None) == (gpus is None):
        raise InputError("give exactly one of a deadline (days) and a GPU count")
    cat = catalog or load_catalog()
    rows = []
    for s in systems:
        sid = cat.system(s).id
        try:
            if gpus is not None:
                row = time_to_train(model, s, gpus, tokens, seq_len, global_batch_seqs, dtype, cat)
            else:
                row = size_for_deadline(model, s, tokens, deadline_days, seq_len, global_batch_seqs, dtype, cat)
            row["status"] = "ok"
        except InfeasiblePlan as exc:
            row = dict(system=sid, status=f"no plan: {exc}")
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["units"] = {"days": "days", "gpu_hours": "GPU-hours", "energy_mwh": "MWh", "slack_days": "days",
                         "tokens_per_s": "tokens/s", "mfu": "fraction"}
    return df
