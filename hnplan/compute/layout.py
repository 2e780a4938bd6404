"""How a model splits over parallel degrees: the pipeline stage split and the rules a split obeys.

One place for what training and inference plans, the memory model and the operator model all
assume about a model cut into tensor-, pipeline- and expert-parallel pieces:

* :func:`stage_layers`: pipeline stages hold ``ceil(L / pp)`` consecutive layers and the last stage
  the rest (Megatron-LM's contiguous split [1]_; Megatron-Core's default when ``pp`` does not divide
  ``L`` puts the remainder on the last stage).
* :func:`split_rules` / :func:`check_split`: TP divides the attention heads and, in training, the KV
  heads (Megatron-Core splits the query groups over TP ranks: ``divide(num_query_groups, tp)`` in
  ``megatron/core/transformer/attention.py`` [2]_; inference engines replicate KV heads instead, so
  the KV rule is training-only); no pipeline stage is left empty; EP divides the experts.
  A broken rule raises :class:`hnplan.errors.PlanRuleError` naming it.

References
----------
.. [1] Narayanan et al., SC21, arXiv:2104.04473, Sec. 2.2 (each stage a contiguous set of layers).
.. [2] NVIDIA Megatron-LM, ``megatron/core/transformer/attention.py`` (``num_query_groups_per_partition``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.errors import PlanRuleError


@dataclass(frozen=True)
class StageSplit:
    """Layers per pipeline stage (scalars for an ``int`` ``pp``, arrays for an array).

    Attributes
    ----------
    per_stage : int or ndarray
        ``ceil(L / pp)``: the layers of every stage but the last (the fullest stage) [layers].
    last : int or ndarray
        ``L - (pp - 1) ceil(L / pp)``: the rest, on the last stage (``L`` when ``pp = 1``; ``<= 0``
        when stages are left empty) [layers].
    empty : int or ndarray
        Stages without a layer: ``pp - ceil(L / per_stage)`` [stages].
    """

    per_stage: Any
    last: Any
    empty: Any


def stage_layers(model: Model, pp) -> StageSplit:
    """The pipeline split of ``model.layers`` over ``pp`` stages (int or array of ints).

    Examples
    --------
    Hand-derived: 126 layers over 16 stages hold 8 each and 6 on the last (15 x 8 + 6 = 126); over 45
    stages ``ceil(126 / 45) = 3`` layers each fill 42 stages and leave 3 empty.

    >>> from types import SimpleNamespace
    >>> s = stage_layers(SimpleNamespace(layers=126), 16)
    >>> (s.per_stage, s.last, s.empty)
    (8, 6, 0)
    >>> s = stage_layers(SimpleNamespace(layers=126), 45)
    >>> (s.per_stage, s.empty)
    (3, 3)
    """
    L = int(model.layers)
    if np.ndim(pp) == 0:  # plain integers (called once per stage shape by the memory model)
        p = max(int(pp), 1)
        per = -(-L // p)
        return StageSplit(per, L - (p - 1) * per, p - (-(-L // per)))
    safe = np.maximum(np.asarray(pp, dtype=np.int64), 1)
    top = int(safe.max()) if safe.size else 1
    # few distinct degrees among many shapes: divide once per degree and look up (thresholds a speed choice,
    # not physics: both paths give the same numbers)
    table = safe.size > 64 and top <= max(4 * safe.size, 4096)
    p = np.arange(1, top + 1) if table else safe
    per_a = -(-L // p)
    out = (per_a, L - (p - 1) * per_a, p - (-(-L // per_a)))
    if not table:
        return StageSplit(*out)
    at = safe - 1
    return StageSplit(*(a[at] for a in out))


def stage_layer_range(model: Model, pp: int, stage: str) -> range:
    """The layer indices of the first, the fullest middle or the last pipeline stage of the split of
    :func:`stage_layers` (``ceil(L / pp)`` layers a stage, the last the rest).

    ``first``: the first ``ceil(L / pp)`` layers; ``last``: the rest, ``L - (pp - 1) ceil(L / pp)``
    layers (with ``pp = 1`` all of them); ``middle``: the ``ceil(L / pp)`` layers just before the last
    stage, the middle stage with the most layers of an MoE model's later kind (empty with ``pp <= 2``,
    which has no middle stage). Megatron-Bridge's DeepSeek-V3 layouts put the same split on the
    last stage: 61 layers over 16 stages leave it one decoder layer beside the MTP module and the loss,
    over 8 stages five (``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``, ``layout_map``).

    >>> from types import SimpleNamespace
    >>> m = SimpleNamespace(layers=61)
    >>> stage_layer_range(m, 16, "first"), stage_layer_range(m, 16, "middle"), stage_layer_range(m, 16, "last")
    (range(0, 4), range(56, 60), range(60, 61))
    """
    split = stage_layers(model, int(pp))
    n, L = split.per_stage, int(model.layers)
    if stage == "first" or int(pp) <= 1:
        return range(0, n) if int(pp) > 1 else range(0, L)
    last = max(split.last, 0)
    if stage == "last":
        return range(L - last, L)
    return range(L - last - n, L - last) if int(pp) > 2 else range(0, 0)


def _experts_text(model: Model) -> str:
    return "no experts" if model.moe is None else f"{model.moe.experts} experts"


def expert_split_rule(model: Model, degree, name: str = "etp") -> dict[str, np.ndarray]:
    """The rule that the tensor-parallel degree of the expert layers (``name``: ``etp`` in training,
    ``tp`` in serving, where each expert is split over the TP ranks) divides the ``expert_ffn_hidden``
    columns of each expert's MLP: Megatron-Core's expert layers (``TEGroupedMLP``/``SequentialMLP``)
    and vLLM's ``FusedMoE`` (``intermediate_size_per_partition``) divide them by that size. Always
    obeyed by a dense model.

    Returns
    -------
    dict
        ``{message template: boolean array}`` as :func:`split_rules` (formatted with :func:`rule_fields`
        and ``{name}``).
    """
    degree = np.asarray(degree, dtype=np.int64)
    ok = (
        np.ones(np.shape(degree), bool)
        if model.moe is None
        else model.moe.expert_ffn_hidden % np.maximum(degree, 1) == 0
    )
    return {
        f"{name} = {{{name}}} does not divide the {{expert_ffn_hidden}} columns of each expert's MLP of {{model}} "
        "(expert_ffn_hidden; Megatron's expert layers and vLLM's fused MoE split them evenly over the expert's "
        "TP ranks)": ok
    }


def split_rules(model: Model, tp, pp, ep, *, training: bool = True) -> dict[str, np.ndarray]:
    """The rules of a model's split, evaluated on arrays (or scalars) of degrees.

    Returns
    -------
    dict
        ``{message template: boolean array (True = obeyed)}``; the templates format with
        :func:`rule_fields`. Rules: ``tp`` divides the heads; in training ``tp`` divides the KV heads;
        ``pp`` leaves no stage empty (training: ``ceil(L / pp)`` layers a stage fill all ``pp``;
        inference, where serving engines spread the remainder: ``pp <= L``); ``ep`` divides the
        experts (``ep = 1`` on a dense model); ``tp`` divides ``ffn_hidden`` where a dense MLP exists
        (Megatron-LM ``ColumnParallelLinear`` and vLLM ``MergedColumnParallelLinear`` divide the output
        columns by the TP size and assert it divides). The expert layers' split is
        :func:`expert_split_rule`'s.
    """
    tp, pp, ep = (np.asarray(x, dtype=np.int64) for x in (tp, pp, ep))
    experts = 0 if model.moe is None else model.moe.experts
    split = stage_layers(model, np.maximum(pp, 1))
    rules = {"tp = {tp} does not divide the {heads} attention heads of {model}": model.heads % np.maximum(tp, 1) == 0}
    if training:
        rules[
            "tp = {tp} does not divide the {kv_heads} KV heads of {model} (Megatron splits the query groups "
            "over TP ranks)"
        ] = model.kv_heads % np.maximum(tp, 1) == 0
    if training:  # Megatron's contiguous ceil(L / pp) split
        rules[
            "pp = {pp} leaves {empty} of its stages empty: {model} has {layers} layers, ceil({layers} / {pp}) = "
            "{per_stage} a stage"
        ] = (pp <= model.layers) & (split.empty == 0)
    else:  # serving engines spread the remainder over the stages (vLLM get_pp_indices): one layer each at least
        rules["pp = {pp} exceeds the {layers} layers of {model}"] = pp <= model.layers
    rules["ep = {ep} needs a number of experts divisible by it; {model} has {experts_text}"] = (ep == 1) | (
        (experts > 0) & (experts % np.maximum(ep, 1) == 0)
    )
    ffn = getattr(model, "ffn_hidden", None)
    if ffn is not None and (model.moe is None or model.moe.first_dense_layers > 0):  # a dense MLP exists
        rules[
            "tp = {tp} does not divide the {ffn_hidden} columns of {model}'s dense MLP (ffn_hidden; Megatron's and "
            "vLLM's column-parallel layers split them evenly over the TP ranks)"
        ] = ffn % np.maximum(tp, 1) == 0
    return rules


def rule_fields(model: Model, tp: int = 1, pp: int = 1, ep: int = 1) -> dict:
    """The values :func:`split_rules`' templates are formatted with, for one split."""
    split = stage_layers(model, max(int(pp), 1))
    return dict(
        tp=tp,
        pp=pp,
        ep=ep,
        heads=model.heads,
        kv_heads=model.kv_heads,
        layers=model.layers,
        model=model.id,
        experts_text=_experts_text(model),
        per_stage=split.per_stage,
        empty=split.empty,
        ffn_hidden=getattr(model, "ffn_hidden", None),
        expert_ffn_hidden=None if getattr(model, "moe", None) is None else model.moe.expert_ffn_hidden,
    )


def check_expert_split(model: Model, degree: int, name: str = "etp") -> None:
    """Check that ``degree`` splits every expert of ``model`` (:func:`expert_split_rule`; ``name``: the
    degree's name in the message, ``tp`` for serving, where every expert is split over the TP ranks).

    Raises
    ------
    PlanRuleError
        Naming the first rule of :func:`expert_split_rule` the degree breaks.
    """
    for template, ok in expert_split_rule(model, degree, name).items():
        if not ok:
            raise PlanRuleError(template.format(**{**rule_fields(model), name: degree}))


def check_split(model: Model, tp: int = 1, pp: int = 1, ep: int = 1, *, training: bool = True) -> None:
    """Raise :class:`hnplan.errors.PlanRuleError` naming the first rule of :func:`split_rules` the
    split breaks.

    >>> from types import SimpleNamespace
    >>> m = SimpleNamespace(id="m", layers=126, heads=128, kv_heads=8, moe=None)
    >>> check_split(m, tp=8, pp=45)
    Traceback (most recent call last):
    ...
    hnplan.errors.PlanRuleError: pp = 45 leaves 3 of its stages empty: m has 126 layers, ceil(126 / 45) = 3 a stage
    """
    for template, ok in split_rules(model, tp, pp, ep, training=training).items():
        if not bool(np.all(ok)):
            raise PlanRuleError(template.format(**rule_fields(model, tp, pp, ep)))
