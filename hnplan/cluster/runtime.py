"""The one place the cluster simulation calls the planners and the reliability model.

Other packages are refactored in parallel; a signature change there touches only this file.

* :func:`training_speed`: the throughput of a training job on the allocation it got, relative to
  the ideal allocation of the same GPU count, from the training planner
  (:func:`hnplan.planning.training.search_plans`). The ideal allocation keeps ``min(gpus, domain)``
  ranks in each scale-up domain; an allocation that got only ``r`` GPUs in some domain is evaluated as
  a system whose scale-up domain is ``r`` GPUs (so TP, EP or CP groups larger than ``r`` cross the
  scale-out network: :func:`hnplan.comm.topology.split_group`); one that spans more than one leaf
  group pays the fabric's oversubscription (a single leaf is non-blocking). Each shape gets its own
  plan search (the framework re-plans for what it got, e.g. a smaller TP). Taking the fewest GPUs in
  any one domain for all of them is pessimistic for uneven splits. Results are cached per
  ``(system, model, gpus, r, spans leaves)``.
* :func:`design_speed_ratio`: how much faster a training job runs on one design than on a reference
  design at the same GPU count, from the same planner (best plan on each design's ideal allocation;
  the next smaller representative model where the job's own fits on neither), so trace durations
  measured on the reference can be carried to the design simulated.
* :func:`failure_rates`: hardware and software interruption rates per GPU [1/s] and the restart
  time, from :mod:`hnplan.reliability` and ``data/reliability.yaml``.
* :func:`serving_jobs`: a serving deployment's replicas, from the inference planner
  (:func:`hnplan.planning.inference.plan_for_rate`), as inference-class jobs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import HnplanError

TRAINING_MODELS = ((8, "llama3.1-8b"), (256, "llama3.1-70b"), (None, "llama3.1-405b"))
"""Representative model of a training job by its GPU count: up to 8 GPUs an 8B model, up to 256 a
70B model, above a 405B model (a labelled choice: public traces give GPU counts, not models). Smallest
model first. Where a design comparison (:func:`design_speed_ratio`) finds no plan of that model on one of
the two designs at the job's GPU count (a 70B model on 16 80 GB H100s: the leanest plan needs 80.0 GiB a
GPU, 73.9 GiB of it weights, gradients and Adam state, over the 79.1 GiB usable), the job is taken as the
next smaller model of this table that fits on both (a 16-GPU job as an 8B one): another labelled choice,
a job of that size on that design cannot be the larger model."""
FALLBACK_MODEL = "llama3.2-1b"
"""The model a training or fine-tuning job is taken as when no model of :data:`TRAINING_MODELS` fits its
GPUs: Llama 3.2 1B, which fits one 80 GB H100 with bf16 weights, fp32 gradients and Adam state (77.7 GiB
at micro-batch 8 of 4,096 tokens, no recomputation), where the 8B model's weights, gradients and Adam
state alone take 8.03e9 x 18 bytes = 134.6 GiB. A labelled choice: a 1-GPU fine-tuning job of a trace is taken as a full fine-tuning of a 1B
model (a LoRA of a larger model would be another), so it is carried between designs at the chips' speed
ratio instead of keeping its duration."""
SEQ_LEN = 4096
"""Sequence length of a representative training job [tokens]: Llama 3's initial pre-training length
(Dubey et al., arXiv:2407.21783 Sec. 3.4.1), the same source as :func:`_batch`."""


def system_key(system, catalog: Catalog) -> str:
    """The string the planner caches here key a system by, which :meth:`Catalog.system` reads back: the id of
    a catalog system, the absolute path of a system given as a user's YAML file (whose id the catalog does
    not hold; before, its lookups by id failed and every planner figure fell back to 1.0)."""
    if isinstance(system, (str, Path)) and catalog.resolve_id("systems", str(system)) is None:
        catalog.system(system)  # an unknown id or a bad file is reported as given
        return str(Path(system).resolve())
    return catalog.system(system).id


def representative_model(gpus: int) -> str:
    """The model :data:`TRAINING_MODELS` assigns to a training job of ``gpus`` GPUs by its size alone.

    :func:`design_speed_ratio` starts from it and, where it fits no plan on one of the two designs,
    takes the next smaller model of :data:`TRAINING_MODELS` that fits on both (:func:`design_speed_model`).
    """
    for limit, model in TRAINING_MODELS:
        if limit is None or gpus <= limit:
            return model
    return TRAINING_MODELS[-1][1]


def representative_models(gpus: int) -> tuple[str, ...]:
    """The models a training job of ``gpus`` GPUs is tried as, in order: :func:`representative_model`,
    then each smaller model of :data:`TRAINING_MODELS`, largest first, then :data:`FALLBACK_MODEL` (at 16
    GPUs ``("llama3.1-70b", "llama3.1-8b", "llama3.2-1b")``)."""
    names = [model for _, model in TRAINING_MODELS]
    return (*reversed(names[: names.index(representative_model(gpus)) + 1]), FALLBACK_MODEL)


def _batch(gpus: int) -> int:
    """Global batch [sequences]: 4M tokens of 4,096 (Llama 3 pre-training, Dubey et al. Sec. 3.4.1),
    at least 2 sequences per GPU."""
    return max(1024, 2 * gpus)


@functools.lru_cache(maxsize=4096)
def _best_tokens_per_s(
    system_id: str, model: str, gpus: int, domain_gpus: int | None, one_leaf: bool, root: str
) -> float:
    """Tokens/s of the fastest plan that fits on ``gpus`` of a system whose scale-up domain is
    ``domain_gpus`` (None: the catalog's) and whose fabric is non-blocking inside one leaf group."""
    from hnplan.planning.training import search_plans

    cat = load_catalog(root)
    system = cat.system(system_id)
    update: dict = {}
    if domain_gpus is not None and domain_gpus != system.scaleup_domain_gpus:
        update["scaleup_domain_gpus"] = domain_gpus
    if one_leaf:
        update["scaleout_oversubscription"] = 1.0
    shaped = system.model_copy(update=update) if update else system
    df = search_plans(model, shaped, gpus, SEQ_LEN, _batch(gpus), catalog=cat)
    df = df[df["fits"]]
    return float(df["tokens_per_s"].iloc[0]) if len(df) else float("nan")


def _speed(system_id: str, model: str, gpus: int, ranks_per_domain: int, multi_leaf: bool, root: str) -> float:
    ideal = _best_tokens_per_s(system_id, model, gpus, None, True, root)
    got = _best_tokens_per_s(system_id, model, gpus, ranks_per_domain, not multi_leaf, root)
    if not (ideal > 0 and got > 0):
        return 1.0
    return min(1.0, got / ideal)


def training_speed(system, gpus: int, ranks_per_domain: int, leaves: int, catalog: Catalog | None = None) -> float:
    """Throughput of a training job on its allocation relative to the ideal one [fraction, <= 1].

    Parameters
    ----------
    system : str or System
    gpus : int
        The job's GPUs.
    ranks_per_domain : int
        The fewest of its GPUs in any one scale-up domain it touches.
    leaves : int
        Leaf groups of the scale-out fabric it spans.

    Returns
    -------
    float
        1.0 for an ideal allocation, for one GPU, or when no catalogued representative model fits (the
        size's model of :data:`TRAINING_MODELS`, else the next smaller that fits on the system's ideal
        allocation, :func:`_speed_model`: the same fallback as :func:`design_speed_model`).
    """
    cat = catalog or load_catalog()
    s = cat.system(system)
    if gpus <= 1:
        return 1.0
    ideal_r = min(gpus, s.scaleup_domain_gpus)
    if ranks_per_domain >= ideal_r and (leaves <= 1 or s.scaleout_oversubscription <= 1.0):
        return 1.0
    sid, root = system_key(system, cat), str(cat.root)
    try:
        model = _speed_model(sid, int(gpus), root)
        if model is None:  # no representative model fits its GPUs here: no planner figure, full speed
            return 1.0
        return _speed(sid, model, int(gpus), int(min(ranks_per_domain, ideal_r)), bool(leaves > 1), root)
    except HnplanError:  # no plan divides this GPU count: no planner figure, the job runs at full speed
        return 1.0


def _speed_model(system_id: str, gpus: int, root: str) -> str | None:
    """The model :func:`training_speed` times a job of ``gpus`` GPUs by on one system: the first of
    :func:`representative_models` whose best plan fits on its ideal allocation (the size's model, else the next
    smaller, as :func:`design_speed_model` picks across two designs: a 16-GPU job on 80 GB H100s as an 8B
    model); None when none fits."""
    for m in representative_models(gpus):
        if _best_tokens_per_s(system_id, m, gpus, None, True, root) > 0:  # NaN where no plan fits
            return m
    return None


@functools.lru_cache(maxsize=4096)
def _design_ratio(system_id: str, reference_id: str, gpus: int, model: str, root: str) -> float:
    """Tokens/s of ``model``'s best plan on ``gpus`` of the system over the same on the reference; NaN
    when no plan of it fits on one of them or no plan divides the GPU count (no planner figure)."""
    if system_id == reference_id:
        return 1.0
    try:
        target = _best_tokens_per_s(system_id, model, gpus, None, True, root)
        ref = _best_tokens_per_s(reference_id, model, gpus, None, True, root)
    except HnplanError:  # no plan divides this GPU count on one of them: no planner figure
        return float("nan")
    return target / ref if target > 0 and ref > 0 else float("nan")


def design_speed_model(system, reference, gpus: int, catalog: Catalog | None = None) -> str | None:
    """The model :func:`design_speed_ratio` compares a training job of ``gpus`` GPUs by.

    The first of :func:`representative_models` (its size's model of :data:`TRAINING_MODELS`, then the
    smaller ones, largest first, then :data:`FALLBACK_MODEL`) whose best plan fits on ``gpus`` of both
    designs: at 16 GPUs of GB200 NVL72 against HGX H100 the 8B model, since no 70B plan fits 16 80 GB H100s;
    at one GPU the 1B model, since the 8B one needs 134.6 GiB for its weights and Adam state alone. None
    when no representative model fits on both (a GPU too small for the 1B model's 77.7 GiB plan at this
    batch); the system itself as reference gives the size's model.

    Raises
    ------
    CatalogError
        For an unknown system.
    """
    cat = catalog or load_catalog()
    sid, rid = system_key(system, cat), system_key(reference, cat)
    for m in representative_models(int(gpus)):
        if _design_ratio(sid, rid, int(gpus), m, str(cat.root)) > 0:  # NaN (no plan on one of them) is not
            return m
    return None


def design_speed_ratio(system, reference, gpus: int, model: str | None = None, catalog: Catalog | None = None) -> float:
    """Speed of a training job on ``gpus`` of ``system`` over its speed on ``gpus`` of ``reference``.

    The ratio of the best training plans' throughputs (:func:`hnplan.planning.training.search_plans`,
    the fastest plan that fits) of ``model`` on each design's ideal allocation: the catalog's scale-up
    domain, a non-blocking fabric (the allocation :func:`training_speed` compares with). Without ``model``
    it is :func:`design_speed_model`: the job's :func:`representative_model`, or, where that fits no plan
    at ``gpus`` on one of the two designs, the next smaller model of :data:`TRAINING_MODELS` that fits on
    both (a labelled choice: a 16-GPU job, which cannot hold a 70B model on 80 GB H100s, is taken as an 8B
    one). A trace's ``duration_s`` measured on ``reference`` becomes ``duration_s / ratio`` on ``system``.
    Cached per ``(system, reference, gpus, model)``.

    Parameters
    ----------
    system, reference : str or System
    gpus : int
        The job's GPUs (>= 1).
    model : str, optional
        Compare this model only (no fallback to a smaller one).
    catalog : Catalog, optional

    Returns
    -------
    float
        Tokens/s on ``system`` over tokens/s on ``reference`` (> 0); exactly 1.0 when the two are the
        same system, and 1.0 (the job keeps its traced duration, as without a reference) when no
        catalogued representative model (or no plan of the ``model`` given) fits on ``gpus`` of both
        designs, or no plan divides the GPU count.

    Raises
    ------
    CatalogError
        For an unknown system or model.
    """
    cat = catalog or load_catalog()
    sid, rid = system_key(system, cat), system_key(reference, cat)
    m = cat.model(model).id if model is not None else design_speed_model(system, reference, gpus, cat)
    if m is None:
        return 1.0
    ratio = _design_ratio(sid, rid, int(gpus), m, str(cat.root))
    return ratio if ratio > 0 else 1.0


def design_speeds(system, reference, jobs, catalog: Catalog | None = None) -> np.ndarray:
    """:func:`design_speed_ratio` of each job of a job table (:mod:`hnplan.cluster.jobs`), shape ``(n,)``:
    the training classes' (``training``, ``fine-tuning``) by their GPU count, 1.0 for the others
    (inference and development keep their traced durations)."""
    cat = catalog or load_catalog()
    gpus = np.asarray(jobs["gpus"])
    out = np.ones(len(gpus))
    trains = np.isin(np.asarray(jobs["cls"]), ("training", "fine-tuning"))
    for g in np.unique(gpus[trains]):
        out[trains & (gpus == g)] = design_speed_ratio(system, reference, int(g), catalog=cat)
    return out


@dataclass(frozen=True)
class FailureRates:
    """Interruption rates of a cluster's GPUs and the cost of one interruption.

    Attributes
    ----------
    hardware_per_gpu_s : float
        Hardware interruptions (accelerator, host, NIC, scale-out link) per installed GPU [1/s].
    software_per_gpu_s : float
        Software and planned interruptions per busy job GPU [1/s].
    restart_s : float
        Detection, rescheduling and initialisation of a restarted job [s].
    repair_s : float
        Time a failed node stays out of service [s] (the restart time with hot swap).
    """

    hardware_per_gpu_s: float
    software_per_gpu_s: float
    restart_s: float
    repair_s: float


def failure_rates(system, gpus: int, catalog: Catalog | None = None, rate_factor: float = 1.0) -> FailureRates:
    """Interruption rates of ``gpus`` accelerators of a system from :mod:`hnplan.reliability`
    (rates of ``data/reliability.yaml``, from the Llama 3 paper's Table 5).

    Raises
    ------
    InputError
        For ``gpus < 1`` or a negative ``rate_factor``.
    """
    from hnplan.reliability import HARDWARE, interruption_rates_per_h

    cat = catalog or load_catalog()
    s = cat.system(system)
    rel = cat.reliability
    rates = interruption_rates_per_h(cat.design(s), gpus, rate_factor)
    hw = sum(v for k, v in rates.items() if rel.rates[k].per in HARDWARE)
    sw = (
        sum(v for k, v in rates.items() if rel.rates[k].per not in HARDWARE)
        + rate_factor * rel.planned_per_gpu_hour.value * gpus
    )
    restart = rel.restart_overhead_s.value
    repair_h = s.repair_hours or rel.repair_hours.value
    return FailureRates(
        hardware_per_gpu_s=hw / gpus / units.HOUR,
        software_per_gpu_s=sw / gpus / units.HOUR,
        restart_s=restart,
        repair_s=restart if s.hot_swap else repair_h * units.HOUR,
    )


def speed_table(system, shapes: np.ndarray, catalog: Catalog | None = None) -> np.ndarray:
    """:func:`training_speed` of many ``(gpus, ranks_per_domain, leaves)`` rows, shape ``(n, 3)`` -> ``(n,)``."""
    return np.array([training_speed(system, int(g), int(r), int(lv), catalog) for g, r, lv in shapes])


def serving_jobs(
    system,
    model: str,
    qps: float,
    *,
    input_tokens: float = 1000,
    output_tokens: float = 200,
    ttft_slo_s: float = 1.0,
    tpot_slo_s: float = 0.05,
    dtype: str = "fp8",
    arrival_s: float = 0.0,
    duration_s: float = units.days_to_s(7),
    catalog: Catalog | None = None,
):
    """A production serving deployment as cluster jobs: its replicas come from the inference planner.

    :func:`hnplan.planning.inference.plan_for_rate` sizes the deployment that meets the SLOs at
    ``qps`` with the fewest GPUs; each of its ``replicas`` becomes one inference-class job of
    ``tp x ep x pp`` GPUs (the replica's tensor-parallel group kept in one scale-up domain; a replica
    is stateless, checkpoint 0), all arriving at ``arrival_s`` and serving for ``duration_s``.

    Parameters
    ----------
    system : str or System
    model : str
    qps : float
        Request rate [requests/s].
    input_tokens, output_tokens : float
        Request lengths [tokens]; default 1,000 in and 200 out (assumption: a chat-sized request, no
        measured trace behind it).
    ttft_slo_s, tpot_slo_s : float
        Mean time-to-first-token and time-per-output-token bounds [s]; default 1 s and 50 ms (assumption:
        interactive-chat targets of the order a reader streams text at, not a published SLO).
    dtype : str
    arrival_s, duration_s : float
        When the deployment starts [s] and how long it serves [s]; default one week (assumption: long
        enough to outlast the training jobs of a simulated mix).

    Returns
    -------
    (DataFrame, CapacityPlan)
        Job rows (:data:`hnplan.cluster.jobs.JOB_COLUMNS` less ``job_id``), one per replica, and the
        planner's plan (``plan.gpus == len(jobs) * replica GPUs``).

    Raises
    ------
    InfeasiblePlan
        If no replica layout meets the SLOs.
    """
    import pandas as pd

    from hnplan.planning.inference import Traffic, plan_for_rate

    cat = catalog or load_catalog()
    plan = plan_for_rate(
        model, system, qps, Traffic(input_tokens, output_tokens), ttft_slo_s, tpot_slo_s, dtype=dtype, catalog=cat
    )
    pools = [(plan.replica, int(plan.replicas))]
    if plan.disaggregated and plan.prefill_replica is not None:  # a prefill pool beside the decode one
        pools.append((plan.prefill_replica, int(plan.prefill_replicas)))
    gpus = np.concatenate([np.full(n, int(r.tp * r.ep * r.pp)) for r, n in pools])
    tp = np.concatenate([np.full(n, int(r.tp)) for r, n in pools])
    jobs = pd.DataFrame(
        {
            "arrival_s": np.full(len(gpus), float(arrival_s)),
            "gpus": gpus,
            "gpu_milli": 1000,
            "duration_s": float(duration_s),
            "cls": "inference",
            "checkpoint_s": 0.0,
            "tp": tp,
        }
    )
    return jobs, plan
