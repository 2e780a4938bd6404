"""The candidate generator of the training-plan search: every combination of TP, PP, DP, CP, EP,
virtual stages, micro-batch size, ZeRO stage and recomputation that divides, built at once with numpy.

Pruning choices (documented, not calibrations):

* TP up to the scale-up domain (the model's rules, :func:`hnplan.compute.layout.split_rules`, then
  keep the degrees that divide its heads and KV heads and leave no pipeline stage empty): a TP group across the scale-out
  network puts four collectives per layer on the slow tier, which no published large run does
  (Narayanan et al. SC21 [1]_ Sec. 3.3, "tensor model parallelism within a server").
* CP in powers of two up to :data:`MAX_CP`; micro-batch sizes :data:`MICROBATCH_SIZES`; virtual
  stages :data:`VIRTUAL_STAGES` (NeMo's published H100 configurations use 1-20 [2]_).
* ZeRO stages 2 and 3 only without pipeline parallelism: DeepSpeed's pipeline engine rejects them
  and Megatron-LM's distributed optimizer is ZeRO-1 ([3]_).
* Expert-parallel degrees: the divisors of the experts that divide the GPUs (the rules keep those
  with ``ep x etp`` dividing ``tp x cp x dp``); expert tensor parallelism ``etp = tp`` (Megatron-Core's
  default) and, for an MoE model with ``tp > 1``, ``etp = 1`` (MoE parallel folding, Liu et al. 2025,
  arXiv:2504.14960: the EP group folds over the TP ranks, as the Megatron-Bridge and Megatron-MoE
  recipes of DeepSeek-V3 and Qwen3 run it).

References
----------
.. [1] Narayanan et al., SC21, arXiv:2104.04473.
.. [2] NVIDIA NeMo, docs/source/performance/performance_summary.md (24.07 H100 table).
.. [3] DeepSpeed, ``deepspeed/runtime/pipe/engine.py`` ("ZeRO-2 and ZeRO-3 are incompatible with
   pipeline parallelism").
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from hnplan.catalog.schemas import Model, System
from hnplan.compute import RECOMPUTE_MODES
from hnplan.compute.layout import split_rules
from hnplan.errors import PlanRuleError
from hnplan.formatting import counted
from hnplan.planning.training.plan import (
    PLAN_FIELDS,
    ZERO_STAGES,
    ParallelPlan,
    check_knobs,
    valid_mask,
    validate_plan,
)
from hnplan.vectorise import GATHER_TABLE_BYTES, frame_of

if TYPE_CHECKING:
    import pandas as pd

    from hnplan.planning.training.components import Job

MAX_CP = 32
MICROBATCH_SIZES = (1, 2, 4, 8)
VIRTUAL_STAGES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20)


def divisors(n: int) -> np.ndarray:
    """Positive divisors of ``n`` in increasing order.

    >>> divisors(12).tolist()
    [1, 2, 3, 4, 6, 12]
    """
    n = int(n)
    if n < 1:
        return np.zeros(0, dtype=np.int64)
    small = [i for i in range(1, math.isqrt(n) + 1) if n % i == 0]  # each pair once, up to sqrt(n)
    return np.array(small + [n // i for i in reversed(small) if i * i != n], dtype=np.int64)


def _obeys(rules: dict) -> np.ndarray:
    return np.logical_and.reduce(np.broadcast_arrays(*rules.values()))


def _axis(fixed: dict, name: str, default) -> np.ndarray:
    """The values of one knob: the pinned ones, else ``default`` (a sequence, or a function giving it: the
    defaults that take work are found only for the knobs left free, as a stated run's plan leaves few)."""
    if fixed.get(name) is not None:
        return np.atleast_1d(np.asarray(fixed[name]))
    return np.asarray(default() if callable(default) else default)


def candidate_frame(
    model: Model,
    system: System,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    fixed: dict | None = None,
    *,
    zero_with_pipeline: bool = False,
    balanced_ends: bool = False,
    pipeline_layout: bool = False,
    uneven_stages: bool = True,
) -> pd.DataFrame:
    """All valid plans for a job, as a table.

    Parameters
    ----------
    model : Model
    system : System
    gpus : int
        Accelerators in the job.
    seq_len : int
        [tokens]
    global_batch_seqs : int
        Sequences per optimizer step.
    fixed : dict, optional
        Pins any of :data:`hnplan.planning.training.plan.PLAN_FIELDS` (``None`` values are ignored);
        pinned values bypass the pruning choices (but not the rules).
    zero_with_pipeline : bool, optional
        Whether ZeRO stages 2 and 3 may pair with ``pp > 1`` (the stack's
        :attr:`~hnplan.catalog.schemas.SoftwareStack.zero_with_pipeline`); default false: Megatron-LM
        and DeepSpeed shard gradients and parameters only without pipeline parallelism, so an unpinned
        search pairs ZeRO-2/3 with ``pp = 1`` only.
    balanced_ends : bool, optional
        The stack's ``pipeline_balanced_ends``: the embedding and the loss each take a model chunk's
        place, so up to ``layers + 2`` chunks (:func:`hnplan.planning.training.plan.plan_rules`).
    pipeline_layout : bool, optional
        The stack's ``pipeline_layout``: its recipes lay out each virtual stage's layers, so a stage's
        layers need not divide by the virtual stages (otherwise they must: :func:`plan_rules`).
    uneven_stages : bool, optional
        The stack's ``pipeline_uneven_stages``: a last stage may hold fewer layers (default); False: ``pp``
        divides the layers (:func:`hnplan.planning.training.plan_rules`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`PLAN_FIELDS` (``recompute`` as strings) plus ``num_microbatches``; one row per
        candidate that obeys :func:`hnplan.planning.training.plan.plan_rules`. May be empty.

    Raises
    ------
    InputError
        For an unknown pinned recompute mode or ZeRO stage.

    Examples
    --------
    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> df = candidate_frame(cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr"), 8, 4096, 64,
    ...                      fixed=dict(microbatch_size=1, recompute="none", zero_stage=1, virtual_stages=1))
    >>> sorted(set(zip(df.tp, df.pp, df.dp, df.cp)))[:4]
    [(1, 1, 1, 8), (1, 1, 2, 4), (1, 1, 4, 2), (1, 1, 8, 1)]
    """
    cols, modes = candidate_columns(
        model,
        system,
        gpus,
        seq_len,
        global_batch_seqs,
        fixed,
        zero_with_pipeline=zero_with_pipeline,
        balanced_ends=balanced_ends,
        pipeline_layout=pipeline_layout,
        uneven_stages=uneven_stages,
    )
    return candidate_table(cols, modes)


def candidate_table(cols: dict, modes: list) -> pd.DataFrame:
    """The table of :func:`candidate_frame` from the arrays of :func:`candidate_columns` (``recompute`` as
    codes into ``modes``)."""
    out = {k: cols[k] for k in (*PLAN_FIELDS, "num_microbatches")}
    out["recompute"] = _strings(modes, cols["recompute"])
    return frame_of(out, len(cols["tp"]))


def candidate_columns(
    model: Model,
    system: System,
    gpus: int,
    seq_len: int,
    global_batch_seqs: int,
    fixed: dict | None = None,
    *,
    zero_with_pipeline: bool = False,
    balanced_ends: bool = False,
    pipeline_layout: bool = False,
    uneven_stages: bool = True,
) -> tuple[dict, list]:
    """:func:`candidate_frame` as plain arrays, without pandas (parameters and errors as there).

    Returns
    -------
    (dict of str to ndarray, list of str)
        The columns :data:`PLAN_FIELDS` and ``num_microbatches`` (int64, one row per candidate, in
        :func:`candidate_frame`'s order) with ``recompute`` as codes into the recompute modes searched,
        and those modes.
    """
    fixed = {k: v for k, v in (fixed or {}).items() if v is not None}
    if "recompute" in fixed or "zero_stage" in fixed:
        check_knobs(fixed.get("recompute", "none"), fixed.get("zero_stage", 1))
    d = divisors(gpus)
    # the model's split rules prune each axis before the product (valid_mask checks the rows again)
    tp_d, pp_d = d[d <= system.scaleup_domain_gpus], d[d <= model.layers]
    tp = _axis(fixed, "tp", lambda: tp_d[_obeys(split_rules(model, tp_d, 1, 1))])
    cp = _axis(fixed, "cp", lambda: [c for c in d if c <= MAX_CP and c & (c - 1) == 0])
    pp = _axis(fixed, "pp", lambda: pp_d[_obeys(split_rules(model, 1, pp_d, 1))])
    if model.moe is None:
        ep = _axis(fixed, "ep", [1])
    else:
        ep = _axis(fixed, "ep", lambda: [e for e in divisors(model.moe.experts) if gpus % e == 0])
    # expert tensor parallelism: 0 stands for ``etp = tp`` (Megatron-Core's default), then 1 (folded)
    etp = _axis(fixed, "etp", [0] if model.moe is None else [0, 1])
    mb = _axis(fixed, "microbatch_size", MICROBATCH_SIZES)
    v = _axis(fixed, "virtual_stages", VIRTUAL_STAGES)
    z = _axis(fixed, "zero_stage", ZERO_STAGES)
    rc_names = list(_axis(fixed, "recompute", RECOMPUTE_MODES))
    rc = np.arange(len(rc_names))
    # the product in row-major order (TP slowest): first the degrees whose product divides the GPUs,
    # then each of those with every (micro-batch, virtual stages, ZeRO, recompute)
    outer = [g.ravel().astype(np.int64) for g in np.meshgrid(tp, cp, pp, ep, etp, indexing="ij")]
    # the folded choice (etp 1) is the default one (etp = tp) where tp is 1: keep it once
    divides = (gpus % (outer[0] * outer[1] * outer[2]) == 0) & ((outer[4] != 1) | (outer[0] > 1) | ("etp" in fixed))
    outer = [a[divides] for a in outer]
    outer[4] = np.where(outer[4] == 0, outer[0], outer[4])
    # the rules that hold for every micro-batch and virtual-stage count hold for 1 and 1: prune by them first
    ones = np.ones(len(outer[0]), dtype=np.int64)
    deg = dict(zip(("tp", "cp", "pp", "ep", "etp"), outer), dp=gpus // (outer[0] * outer[1] * outer[2]))
    divides = valid_mask(
        {**deg, "microbatch_size": ones, "virtual_stages": ones}, model, gpus, seq_len, global_batch_seqs
    )
    outer = [a[divides] for a in outer]
    # then each of those with every (micro-batch, virtual stages): the rules need nothing else, evaluated on the
    # degrees [degree tuple, 1] against the pairs [1, pair] broadcast (a rule of the degrees alone once per tuple)
    n_mv = len(mb) * len(v)
    mv = [g.ravel().astype(np.int64) for g in np.meshgrid(mb, v, indexing="ij")]
    grid = {k: a[:, None] for k, a in zip(("tp", "cp", "pp", "ep", "etp"), outer)}
    grid.update(dp=gpus // (grid["tp"] * grid["cp"] * grid["pp"]), microbatch_size=mv[0][None, :])
    grid["virtual_stages"] = mv[1][None, :]
    ok = valid_mask(
        grid,
        model,
        gpus,
        seq_len,
        global_batch_seqs,
        balanced_ends=balanced_ends,
        pipeline_layout=pipeline_layout,
        uneven_stages=uneven_stages,
    )
    if "dp" in fixed:
        ok = ok & np.isin(grid["dp"], np.atleast_1d(fixed["dp"]))
    # the rows that obey them, in row-major order (degree tuple, then micro-batch, then virtual stages)
    row, at = np.divmod(np.flatnonzero(np.broadcast_to(ok, (len(outer[0]), n_mv))), n_mv)
    tp_, cp_, pp_, ep_, etp_ = (a[row] for a in outer)
    cols = dict(
        tp=tp_,
        pp=pp_,
        dp=gpus // (tp_ * cp_ * pp_),
        cp=cp_,
        ep=ep_,
        microbatch_size=mv[0][at],
        virtual_stages=mv[1][at],
        etp=etp_,
    )
    # and each valid one with every (ZeRO, recompute), row-major (ZeRO-2/3 only without a pipeline)
    z_in, rc_in = (g.ravel().astype(np.int64) for g in np.meshgrid(z, rc, indexing="ij"))
    pairs = np.ones((len(cols["tp"]), len(z_in)), dtype=bool)
    if "zero_stage" not in fixed and not zero_with_pipeline:
        pairs[cols["pp"] > 1] = z_in <= 1
    # each row repeated by its pairs (a copy, cheaper than a gather by np.nonzero's row indices), the pairs in order
    per_row = np.count_nonzero(pairs, axis=1)
    cols["num_microbatches"] = global_batch_seqs // (cols["dp"] * cols["microbatch_size"])  # before the repeat
    # the columns as the rows of one table repeated at once, then one transposed copy, where the table stays in
    # cache (as vectorise.gather)
    if int(per_row.sum()) * len(cols) * 8 <= GATHER_TABLE_BYTES:
        table = np.stack([np.asarray(a, dtype=np.int64) for a in cols.values()], axis=1)
        cols = dict(zip(cols, np.ascontiguousarray(table.repeat(per_row, axis=0).T)))
    else:
        cols = {k: a.repeat(per_row) for k, a in cols.items()}
    keep = pairs.ravel()  # the pairs tiled over the rows: a contiguous boolean selection (a broadcast one is slower)
    cols["zero_stage"] = np.tile(z_in, len(pairs))[keep]
    cols["recompute"] = np.tile(rc_in, len(pairs))[keep]
    cols["num_microbatches"] = cols.pop("num_microbatches")  # last, as the columns have always come
    return cols, rc_names


def _strings(names: list, codes: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A string column of ``names[codes]`` (pandas' default string dtype), built from its dictionary."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas
    import pyarrow as pa

    dictionary = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.large_string()))
    out = pd.array(dictionary.cast(pa.large_string()), dtype=pd.StringDtype(na_value=np.nan))
    at = [RECOMPUTE_MODES.index(str(m)) if str(m) in RECOMPUTE_MODES else -1 for m in names]
    if min(at, default=0) >= 0:  # the codes into RECOMPUTE_MODES, for the evaluator (recompute_codes)
        known = np.array(codes, dtype=np.int64) if at == list(range(len(at))) else np.asarray(at, np.int64)[codes]
        known.flags.writeable = False
        _LAST_STRINGS[:] = [weakref.ref(out.__arrow_array__()), known]
    return out


#: the Arrow array of the recompute column :func:`_strings` built last (a weak reference) and its codes
_LAST_STRINGS: list = [None, None]


def recompute_codes(arrow) -> np.ndarray | None:
    """The codes into :data:`~hnplan.compute.RECOMPUTE_MODES` of an Arrow recompute column (read-only, int64) when it
    is the very array :func:`candidate_table` built last (an Arrow array is immutable: the same object holds the
    same strings; a column changed since holds another), else None: the evaluator then matches the strings
    (``pyarrow.compute.index_in``, about 90 instructions a row)."""
    ref, codes = _LAST_STRINGS
    return codes if ref is not None and ref() is arrow else None


def explain_empty(job: Job, fixed: dict) -> NoReturn:
    """Say why no candidate divides: the rule the pinned degrees of ``fixed`` break, or, when they break none (or
    none are pinned), what a plan must divide and what to change (:func:`divisibility_hint`).

    Raises
    ------
    PlanRuleError
        Always (the message as above).
    """
    mb = fixed.get("microbatch_size")
    if mb is not None and job.global_batch_seqs % mb:  # dp x micro-batch must divide the batch
        raise PlanRuleError(
            f"microbatch_size {mb} does not divide the batch of {counted(job.global_batch_seqs, 'sequence')}"
        )
    degrees = {k: fixed[k] for k in ("tp", "pp", "dp", "cp", "ep", "etp") if k in fixed}
    outer = {k: v for k, v in degrees.items() if k in ("tp", "pp", "dp", "cp") and np.ndim(v) == 0}
    if outer and job.gpus % math.prod(outer.values()):  # the pinned degrees alone cannot make the count (train's words)
        names = " x ".join(f"{k} {v}" for k, v in outer.items())
        prod = f" = {math.prod(outer.values())}" if len(outer) > 1 else ""
        raise PlanRuleError(f"{names}{prod} does not divide {job.gpus_name} {job.gpus}")
    if degrees:
        base: dict[str, Any] = dict(
            tp=1, pp=1, cp=1, ep=1, microbatch_size=1, virtual_stages=1, zero_stage=1, recompute="none"
        )
        base.update(fixed)
        if "dp" not in fixed:
            base["dp"] = max(job.gpus // (base["tp"] * base["pp"] * base["cp"]), 1)
        validate_plan(
            job.model,
            job.gpus,
            ParallelPlan(**base),
            job.global_batch_seqs,
            job.seq_len,
            balanced_ends=job.choices.pipeline_balanced_ends,
            gpus_name=job.gpus_name,
            pipeline_layout=job.choices.pipeline_layout,
            uneven_stages=job.choices.pipeline_uneven_stages,
        )
    raise PlanRuleError(
        f"no plan of {job.model.id} on {job.gpus:,} x {job.system.id} divides"
        f"{' with ' + ', '.join(f'{k} {v}' for k, v in fixed.items()) if fixed else ''}: tp x pp x dp x cp must "
        f"make {job.gpus:,} with tp dividing "
        f"the {job.model.heads} heads and the {job.model.kv_heads} KV heads (up to the "
        f"{job.system.scaleup_domain_gpus}-GPU domain), pp leaving no stage of the {job.model.layers} layers "
        f"empty and dp x micro-batch dividing the batch of {counted(job.global_batch_seqs, 'sequence')}; "
        f"{divisibility_hint(job.gpus, job.global_batch_seqs, job.system.unit_gpus, job.system.id)}"
    )


def odd_part(n: int) -> int:
    """``n`` without its factors of two, the part of a GPU count that data parallelism over a power-of-two batch
    cannot take (13 for 3,328 = 13 x 256).

    >>> odd_part(3328), odd_part(72), odd_part(1024)
    (13, 9, 1)
    """
    return n // (n & -n)


def divisibility_hint(gpus: int, batch: int, unit_gpus: int, system_id: str) -> str:
    """What to change when no layout divides: more factors of two in the count, or, where the count's odd
    factor cannot leave it (every count of a 72-GPU rack has the factor 9), a batch data parallelism can
    split by it.

    >>> divisibility_hint(144, 2048, 72, "gb200-nvl72")
    'every count of gb200-nvl72 has the factor 9 (units of 72 GPUs): try a batch with that factor, such as 2,160 sequences, 15 per GPU'
    >>> divisibility_hint(40, 2048, 8, "hgx-h100-ib-ndr")
    'try a GPU count with more factors of two, or a batch with the factor 5, such as 2,080 sequences, 52 per GPU'
    >>> divisibility_hint(1200, 1024, 8, "hgx-h100-ib-ndr")
    'try a GPU count with more factors of two, or a batch with the factor 75, such as 1,200 sequences, one per GPU'
    """
    odd = odd_part(gpus)
    if odd == 1 or batch % odd == 0:
        return "try a GPU count with more factors of two"
    per_gpu = -(-batch // gpus)  # the smallest batch at least as large that every GPU count's DP can split
    batch_hint = f"such as {per_gpu * gpus:,} sequences, {'one' if per_gpu == 1 else f'{per_gpu:,}'} per GPU"
    unit_odd = odd_part(unit_gpus)
    if unit_odd > 1 and odd % unit_odd == 0:
        return (
            f"every count of {system_id} has the factor {unit_odd} (units of {unit_gpus} GPUs): try a batch with "
            f"that factor, {batch_hint}"
        )
    return f"try a GPU count with more factors of two, or a batch with the factor {odd}, {batch_hint}"
