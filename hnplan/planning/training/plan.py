"""A parallel plan, the validity rules every plan obeys (vectorised), and the estimate of one plan.

Degrees follow Megatron-LM ([1]_ Sec. 3): ``tp x pp x dp x cp = gpus``, ranks ordered TP innermost,
then CP, then DP, then PP. The expert layers decompose the same ``tp x cp x dp`` ranks of a pipeline
stage their own way ([2]_): ``etp x ep x expert-dp``, ranks ordered ETP innermost, then EP, then
expert-DP, so ``ep x etp`` divides ``tp x cp x dp``. ``etp`` defaults to ``tp`` (Megatron-Core's
default; EP groups are then carved out of the ``dp x cp`` ranks); ``etp = 1`` keeps each expert whole
and lets the EP group fold over the TP ranks (EP 8 at TP 8 fills one NVLink domain).

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, arXiv:2104.04473.
.. [2] Liu et al., "MoE Parallel Folding: Heterogeneous Parallelism Mappings for Efficient Large-Scale
   MoE Model Training with Megatron Core", arXiv:2504.14960; Megatron-Core
   ``parallel_state.initialize_model_parallel`` (``expert_tensor_parallel_size``, the expert
   ``RankGenerator`` of order ``tp-ep-dp-pp``, ``expert_tensor_parallel_size`` defaulting to
   ``tensor_model_parallel_size``).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Model
from hnplan.compute import RECOMPUTE_MODES
from hnplan.compute.layout import expert_split_rule, rule_fields, split_rules, stage_layers
from hnplan.defaults import TRAIN_DTYPES  # noqa: F401 - re-exported: the training dtypes, defined once
from hnplan.errors import InputError, PlanRuleError

if TYPE_CHECKING:
    import pandas as pd

ZERO_STAGES = (0, 1, 2, 3)
PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "microbatch_size", "virtual_stages", "zero_stage", "recompute", "etp")


@dataclass(frozen=True)
class ParallelPlan:
    """A parallel layout and its knobs (degrees are rank counts; ``recompute`` one of
    :data:`hnplan.compute.RECOMPUTE_MODES`; ``etp``, the expert layers' tensor-parallel degree,
    None: ``tp``, as Megatron-Core defaults it)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    microbatch_size: int = 1
    virtual_stages: int = 1
    zero_stage: int = 1
    recompute: str = "none"
    etp: int | None = None

    def __post_init__(self) -> None:
        if self.etp is None:
            object.__setattr__(self, "etp", self.tp)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def as_dict(self) -> dict:
        return asdict(self)


def plans_frame(plans) -> pd.DataFrame:
    """A candidate table (one row per plan, columns :data:`PLAN_FIELDS`) from ParallelPlans."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    return pd.DataFrame([asdict(p) for p in plans], columns=list(PLAN_FIELDS))


def check_knobs(recompute, zero_stage) -> None:
    """Raise InputError for recompute modes or ZeRO stages hnplan does not know (scalars or arrays)."""
    bad = {str(x) for x in np.atleast_1d(recompute)} - set(RECOMPUTE_MODES)
    if bad:
        raise InputError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}; got {sorted(bad)[0]!r}")
    badz = set(np.atleast_1d(zero_stage).tolist()) - set(ZERO_STAGES)
    if badz:
        raise InputError(f"zero stage must be one of 0, 1, 2, 3; got {sorted(badz)[0]!r}")


def _stage_split_text(model: Model, pp: int) -> str:
    """The pipeline split of :func:`hnplan.compute.layout.stage_layers` in words, for a rule's message."""
    split = stage_layers(model, pp)
    rest = "" if split.last == split.per_stage else f" and {split.last} on the last"
    return f"{model.id}'s {model.layers} layers over pp = {pp} stages put {split.per_stage} on a stage{rest}"


def plan_rules(
    df: pd.DataFrame,
    model: Model,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    *,
    balanced_ends: bool = False,
    pipeline_layout: bool = False,
    uneven_stages: bool = True,
) -> dict:
    """The divisibility rules of a training plan, evaluated on every row of a candidate table.

    Parameters
    ----------
    df : DataFrame or dict of arrays
        Columns :data:`PLAN_FIELDS` (``recompute`` and ``zero_stage`` unused), one row per candidate, or arrays
        that broadcast together (each rule then has their broadcast shape, or a shape it broadcasts to).
    model : Model
    gpus : int
    seq_len : int
        [tokens]
    global_batch_seqs : int
        Sequences per optimizer step.
    balanced_ends : bool
        The stack gives the embedding and the output head with the loss each a model chunk's place
        (``pipeline_balanced_ends``, Llama 3 arXiv:2407.21783 Sec. 3.3.2: "the first model chunk on the
        first stage has only the embedding, and the last model chunk on the last stage has only output
        projection and loss calculation"): ``pp v`` chunks then hold ``layers + 2`` places, so
        ``pp v <= layers + 2`` (Llama 3 405B: 16 x 8 = 128 chunks for 126 layers).
    pipeline_layout : bool
        The stack lays out each virtual stage's layers itself (``SoftwareStack.pipeline_layout``): a
        stage's layers need not divide by ``virtual_stages``.
    uneven_stages : bool
        The stack builds a last stage with fewer layers than the others (``pipeline_uneven_stages``:
        Megatron-Core's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``, from
        core 0.9); without it ``pp`` must divide the layers (Megatron-LM's ``ParallelTransformer`` of 2021
        and ``mpu.get_num_layers`` of 2022 assert it; Megatron-Core 0.8's ``get_num_layers_to_build``
        floors ``L / pp``).

    Returns
    -------
    dict
        ``{rule message template: boolean array (True = the row obeys it)}``; the templates are
        formatted with a row's fields (and ``gpus, layers, heads, experts, batch, seq_len, m``) to
        explain a violation. Rules: degrees >= 1; ``tp pp dp cp = gpus``; ``pp v <= layers`` (``+ 2``
        with ``balanced_ends``);
        the model's split (:func:`hnplan.compute.layout.split_rules`: ``tp`` divides the heads and
        the KV heads, no empty pipeline stage, ``ep`` divides the experts); ``ep x etp`` divides
        ``tp cp dp`` (the expert layers' ranks, [2]_; without an ``etp`` column ``etp = tp``, so ``ep``
        divides ``dp cp``); ``etp`` divides an expert's ``expert_ffn_hidden``;
        ``dp x microbatch``
        divides the batch; the interleaved schedule (``v > 1``) needs ``pp > 1`` and micro-batches
        divisible by ``pp`` ([1]_ Sec. 2.2.2) and ``v`` dividing the layers of every stage
        (:func:`hnplan.compute.layout.stage_layers`: ``ceil(layers / pp)`` and the last stage's rest): Megatron-Core's
        ``TransformerConfig.__post_init__`` raises "number of layers on each middle pipeline rank ...
        must be divisible by virtual pipeline parallel degree" (and the same for an uneven first or
        last stage), so every model chunk holds a whole number of layers. Not checked with
        ``pipeline_layout`` (the recipe's layout decides) nor with ``balanced_ends`` (Megatron-Core then
        asks ``pp`` to divide ``layers + 2`` and ``v`` the quotient, ``TransformerConfig.__post_init__``;
        every stack that sets ``pipeline_balanced_ends`` also lays out its stages, so the rule would not
        apply); context parallelism splits each sequence into
        ``2 cp`` chunks (Megatron-Core's load-balanced causal split), so ``2 cp`` divides ``seq_len``.
    """
    tp, pp, dp, cp, ep = (np.asarray(df[c]) for c in ("tp", "pp", "dp", "cp", "ep"))
    etp = np.asarray(df["etp"]) if "etp" in df else tp
    mb, v = np.asarray(df["microbatch_size"]), np.asarray(df["virtual_stages"])
    m = global_batch_seqs // np.maximum(dp * mb, 1)
    places = model.layers + (2 if balanced_ends else 0)  # chunks a pipeline can fill
    split = stage_layers(model, np.maximum(pp, 1))  # ceil(L / pp) a stage, the last the rest
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "degrees must be >= 1 (tp {tp}, pp {pp}, dp {dp}, cp {cp}, ep {ep}, etp {etp}, microbatch "
            "{microbatch_size}, virtual stages {virtual_stages})": (
                functools.reduce(np.minimum, (tp, pp, dp, cp, ep, etp, mb, v)) >= 1
            ),
            "tp x pp x dp x cp = {tp} x {pp} x {dp} x {cp} = {product}, not {gpus_name} {gpus}": tp * pp * dp * cp
            == gpus,
            "pp x virtual_stages = {pp} x {virtual_stages} exceeds the model's {layers} layers"
            + (" and the 2 end chunks (embedding, loss)" if balanced_ends else ""): pp * v <= places,
            **split_rules(model, tp, pp, ep, training=True),
            "pp = {pp} does not divide the {layers} layers of {model}, and the stack builds equal stages only "
            "(pipeline_uneven_stages: false; its Megatron-LM asserts the layers divide by the pipeline size)": (
                uneven_stages | (model.layers % np.maximum(pp, 1) == 0)
            ),
            "expert degrees ep x etp = {ep} x {etp} must divide tp x cp x dp = {tpcpdp}: the expert layers split "
            "those ranks (etp defaults to tp; etp 1 folds EP over the TP ranks)": (tp * cp * dp)
            % np.maximum(ep * etp, 1)
            == 0,
            **expert_split_rule(model, etp),
            "global batch of {batch} sequences is not divisible by dp x microbatch = {dp} x {microbatch_size}": global_batch_seqs
            % np.maximum(dp * mb, 1)
            == 0,
            # two rules, so that pp 1 is told only that it has no stages to interleave (one rule said "and
            # micro-batches (32) divisible by pp (1)" of a count that divides by 1)
            "interleaved schedule (virtual_stages {virtual_stages}) needs pipeline parallelism pp > 1; got pp "
            "{pp} (one stage has nothing to interleave: give --virtual-stages 1 or a --pp above 1)": (v == 1)
            | (pp > 1),
            "interleaved schedule (virtual_stages {virtual_stages}) needs the micro-batches ({m}) divisible by "
            "pp ({pp})": (v == 1) | (pp <= 1) | (m % np.maximum(pp, 1) == 0),
            "virtual_stages = {virtual_stages} (--virtual-stages) does not divide the layers of each pipeline stage: "
            "{stage_split} (Megatron-Core builds the same whole number of layers in every model chunk of a stage)": (
                v <= 1
            )
            | balanced_ends
            | pipeline_layout
            | ((split.per_stage % np.maximum(v, 1) == 0) & (split.last % np.maximum(v, 1) == 0)),
            "context parallelism cp = {cp} needs seq_len ({seq_len}) divisible by 2 x cp": (cp == 1)
            | (seq_len % np.maximum(2 * cp, 1) == 0),
        }


def valid_mask(
    df: pd.DataFrame,
    model: Model,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    *,
    balanced_ends: bool = False,
    pipeline_layout: bool = False,
    uneven_stages: bool = True,
) -> np.ndarray:
    """Rows of a candidate table that obey every rule of :func:`plan_rules` [bool array].

    The columns may be arrays that broadcast together (a candidate generator's degrees ``[tuple, 1]`` against its
    micro-batch and virtual-stage counts ``[1, pair]``: each rule of the degrees alone is then evaluated once per
    degree tuple); the mask has their broadcast shape, element by element that of the expanded rows."""
    rules = plan_rules(
        df,
        model,
        gpus,
        seq_len,
        global_batch_seqs,
        balanced_ends=balanced_ends,
        pipeline_layout=pipeline_layout,
        uneven_stages=uneven_stages,
    )
    if not np.size(df["tp"]):
        return np.zeros(np.shape(df["tp"]), bool)
    return functools.reduce(np.logical_and, rules.values())  # broadcast together (columns of other shapes)


def validate_plan(
    model: Model,
    gpus: int,
    plan: ParallelPlan,
    global_batch_seqs: int,
    seq_len: int = 2,
    *,
    balanced_ends: bool = False,
    gpus_name: str = "--gpus",
    pipeline_layout: bool = False,
    uneven_stages: bool = True,
) -> int:
    """Check that one plan divides; return its number of micro-batches (``balanced_ends``: as
    :func:`plan_rules`; ``gpus_name``: what the message calls ``gpus``, the CLI flag by default, a runs
    file's field ``its gpus`` in a calibration).

    Raises
    ------
    PlanRuleError
        Naming the first rule of :func:`plan_rules` the plan breaks, with its values (an
        :class:`hnplan.errors.InfeasiblePlan`).
    InputError
        For an unknown recompute mode or ZeRO stage.
    """
    check_knobs(plan.recompute, plan.zero_stage)
    row = {k: np.array([v]) for k, v in asdict(plan).items()}  # one row as plain arrays: no pandas for one plan
    rules = plan_rules(
        row,
        model,
        gpus,
        seq_len,
        global_batch_seqs,
        balanced_ends=balanced_ends,
        pipeline_layout=pipeline_layout,
        uneven_stages=uneven_stages,
    )
    for template, ok in rules.items():
        if not ok[0]:
            p = plan
            m = global_batch_seqs // max(p.dp * p.microbatch_size, 1)
            raise PlanRuleError(
                template.format(
                    **{**rule_fields(model, p.tp, p.pp, p.ep), **asdict(p)},
                    product=p.gpus,
                    gpus=gpus,
                    gpus_name=gpus_name,
                    tpcpdp=p.tp * p.cp * p.dp,
                    batch=global_batch_seqs,
                    m=m,
                    seq_len=seq_len,
                    stage_split=_stage_split_text(model, p.pp),
                )
            )
    return global_batch_seqs // (plan.dp * plan.microbatch_size)


@dataclass(frozen=True)
class TrainingEstimate:
    """The estimate of one plan (one row of :func:`hnplan.planning.training.evaluate_plans`).

    Times in seconds, memory in bytes unless the name says GiB.
    """

    model: str
    system: str
    gpus: int
    seq_len: int
    global_batch_seqs: int
    dtype: str
    plan: ParallelPlan
    num_microbatches: int
    step_time_s: float
    tokens_per_s: float
    model_flops_per_token: float
    hardware_flops_per_token: float
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    memory_per_gpu_bytes: float
    memory_breakdown_gib: dict
    hbm_bytes: float
    fits: bool
    breakdown_s: dict = field(default_factory=dict)
    placement: dict = field(default_factory=dict)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_seqs * self.seq_len

    def days_to_train(self, tokens: float) -> float:
        """Days to train on ``tokens`` tokens at this step time (no failures) [days]."""
        return units.s_to_days(tokens / self.tokens_per_s)

    def parallel_dict(self) -> dict:
        """The plan's knobs and its micro-batch count (the ``parallel`` object of the JSON answers)."""
        return {**self.plan.as_dict(), "num_microbatches": self.num_microbatches}

    def to_dict(self) -> dict:
        """The JSON shape of ``hnplan train --json``."""
        return {
            "model": self.model,
            "system": self.system,
            "gpus": self.gpus,
            "seq_len": self.seq_len,
            "global_batch_seqs": self.global_batch_seqs,
            "global_batch_tokens": self.tokens_per_step,
            "dtype": self.dtype,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "model_flops_per_token": self.model_flops_per_token,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "memory_per_gpu_gib": units.to_GiB(self.memory_per_gpu_bytes),
            "memory_breakdown_gib": self.memory_breakdown_gib,
            "hbm_gib": units.to_GiB(self.hbm_bytes),
            "fits": self.fits,
            "parallel": self.parallel_dict(),
            "breakdown_s": dict(self.breakdown_s),
            "placement": {k: dict(v) for k, v in self.placement.items()},
        }
