"""One serving replica: what it is (:class:`Replica`), its resolved setup and its memory per
accelerator; the times of its passes are in :mod:`hnplan.planning.inference.passes`, continuous batching
in steady state, the throughput-latency frontier and the maximum-throughput operating point in
:mod:`hnplan.planning.inference.steady`, which implements the equations below.

A replica is a model on ``tp x ep x pp`` accelerators (:class:`Replica`). Attention and dense MLPs are
tensor-parallel over ``tp``; with ``ep > 1`` the replica holds ``ep`` attention groups of ``tp``
accelerators (data-parallel attention) and spreads the routed experts over all of them, as large-EP
serving of DeepSeek-V3 does; ``pp`` pipeline stages hold consecutive layers.

Times per pass come from the operator-level roofline (:func:`hnplan.compute.operator_table`, issue 3);
the per-layer collectives from the communication model (:mod:`hnplan.comm`, issue 4): two TP
all-reduces of the activations per layer, an EP dispatch and combine all-to-all per MoE layer, a
point-to-point send per pipeline boundary. Communication adds to compute unless the replica overlaps
two micro-batches (``Replica.overlap``: the larger of the two).

Continuous batching in steady state (Orca, Yu et al. OSDI 2022; Sarathi-Serve, Agrawal et al. OSDI
2024) with ``B`` concurrent sequences of ``I`` prompt and ``O`` output tokens: every iteration decodes
one token for each of the ``B`` sequences and, on average, admits ``B / O`` new requests whose prompts
(``B I / O`` tokens) are prefilled in the same iteration::

    t_iter = t_decode(B, ctx = I + O/2) + (B / O) t_prefill_per_request(I) + t_host
    TPOT = t_iter,   output tokens/s = B / t_iter,
    TTFT = t_wait + t_prefill(1 request) + t_decode(B) + t_host

The first token comes out of the iteration that carries the request's prefill next to the decodes of
the running batch (one decode step); with chunked prefill the prompt spreads over ``ceil(I / chunk)``
iterations, each with its decode step. ``t_host`` is the serving engine's host time per iteration
(scheduler, sampling) that it does not overlap with the GPU (catalog ``data/engines``; 0 without an
engine); the engine also caps the batch (``max_num_seqs``) and sets the memory fraction.

``t_prefill_per_request`` is the time of a prefill batch that fills the scheduler's token budget
(``max_batched_tokens``) divided by its requests. The mean context during decode is ``I + O/2``;
memory is sized for the longest context ``I + O``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator, Model, ServingEngine, System
from hnplan.comm import GroupPlacement, SystemLinks, place_group, system_links
from hnplan.compute.layout import check_expert_split, check_split
from hnplan.errors import InfeasiblePlan, InputError, check_choice
from hnplan.formatting import format_given
from hnplan.memory import (
    hbm_capacity_bytes,
    kv_cache_bytes_per_token,
    kv_cache_tokens,
    kv_capacity,
    weight_bytes_per_gpu,
)

SERVE_DTYPES = ("bf16", "fp8", "int8", "fp4")
MAX_REPLICA_GPUS = 256  # candidates larger than this are not enumerated (DeepSeek's decode unit: 144 GPUs)
# TensorRT-LLM's default scheduler token budget per iteration (``max_num_tokens`` 8192, TensorRT-LLM
# docs "Tuning max batch size and max num tokens"); a scheduler parameter, not a calibration.
DEFAULT_MAX_BATCHED_TOKENS = 8192

#: the message for a KV cache sized both ways: a budget takes the whole visible HBM, so the fraction was ignored
MEMORY_FLAGS_CLASH = (
    "give one of --gpu-memory-utilization and --kv-budget-gib: a KV budget is set directly within the whole "
    "visible HBM, so the fraction would be ignored"
)


def default_kv_dtype(dtype: str) -> str:
    """KV-cache dtype that goes with a serving dtype: bf16 for bf16 and int8, fp8 for fp8 and fp4.

    Labelled assumptions: the FP8 and NVFP4 checkpoints NVIDIA benchmarks with TensorRT-LLM quantise
    the KV cache to FP8 (``kv_cache_quant_algo: FP8`` in their ``hf_quant_config.json``); INT8 W8A8
    (SmoothQuant, Xiao et al. 2023; CloudMatrix-Infer, arXiv:2506.12708 Sec 4.5) quantises the GEMM
    inputs and keeps the KV cache in bf16 unless a KV dtype is given.
    """
    return "fp8" if dtype in ("fp8", "fp4") else "bf16"


def per_system(value, system_id: str):
    """``value[system_id]`` when ``value`` is a mapping (a per-design setting such as each design's serving
    dtype or engine; designs it omits get ``value.get("default")``), else ``value`` itself."""
    if isinstance(value, Mapping):
        return value.get(system_id, value.get("default"))
    return value


@dataclass(frozen=True)
class Replica:
    """A serving replica's layout and dtypes.

    Attributes
    ----------
    tp, ep, pp : int
        Tensor-, expert- and pipeline-parallel degrees; the replica has ``tp x ep x pp`` accelerators.
    dtype : {"bf16", "fp8", "int8", "fp4"}
        Weight / GEMM dtype (int8: W8A8, weights and activations in INT8 at the accelerator's INT8 peak).
    kv_dtype : str or None
        KV-cache dtype; None: :func:`default_kv_dtype`.
    overlap : bool
        Two-micro-batch overlap: the collectives of one half-batch run while the other computes, so a
        pass takes ``max(compute, communication)`` (perfect overlap, an upper bound on its benefit)
        instead of their sum, as DeepSeek's inference system (dual micro-batch overlap, open-infra-index
        day 6), SGLang's two-batch overlap and RTP-LLM do.
    memory_utilization : float or None
        Fraction of the visible HBM the engine may use (vLLM's ``gpu_memory_utilization``); None: the
        catalog's serving default (``memory.yaml``).
    kv_budget_gib : float or None
        KV cache per accelerator set directly [GiB] (vLLM's ``kv_cache_memory_bytes``) instead of the
        utilization rule; capped at what the visible HBM holds after weights, workspace and overheads.
    engine : str or None
        Serving engine id (catalog ``data/engines``): its scheduler cap, token budget, chunked prefill,
        memory fraction and per-iteration host time apply. None: no engine limits (memory alone caps the
        batch, no host time per iteration, whole-prompt prefill, ``memory.yaml``'s memory fraction).
    """

    tp: int = 1
    ep: int = 1
    pp: int = 1
    dtype: str = "bf16"
    kv_dtype: str | None = None
    overlap: bool = False
    memory_utilization: float | None = None
    kv_budget_gib: float | None = None
    engine: str | None = None

    @property
    def gpus(self) -> int:
        return self.tp * self.ep * self.pp

    @property
    def kv(self) -> str:
        return self.kv_dtype or default_kv_dtype(self.dtype)

    @property
    def groups(self) -> int:
        """Attention groups that each hold their own sequences (``ep x pp``: EP groups x micro-batches)."""
        return self.ep * self.pp


@dataclass(frozen=True)
class Setup:
    """A replica assembled once: its model, the resolved design (system, accelerator, fabrics), the
    replica's layout, its links and the placements of its TP, EP and PP groups.

    The links and placements are computed on first use and kept (:func:`functools.cached_property`),
    so the many passes of a batch sweep reuse them.
    """

    model: Model
    system: System
    acc: Accelerator
    replica: Replica
    catalog: Catalog = field(repr=False)
    design: Design = field(repr=False)
    engine: ServingEngine | None = field(default=None, repr=False)

    @cached_property
    def links(self) -> SystemLinks:
        """Per-rank links of a job of the replica's accelerators (:func:`hnplan.comm.system_links`); with an
        engine whose NCCL runs without NVLS (``nccl_nvls`` false) the scale-up tier has no in-network
        reduction, so a TP all-reduce inside an NVLink domain runs on NCCL's rings and trees."""
        links = system_links(self.design, gpus=self.replica.gpus)
        if self.engine is None or self.engine.nccl_nvls or links.scaleup.inr_efficiency is None:
            return links
        return replace(links, scaleup=replace(links.scaleup, inr_efficiency=None))

    @cached_property
    def placements(self) -> dict[str, GroupPlacement | None]:
        """The replica's groups on the network (:func:`hnplan.comm.place_group`, Megatron rank order):
        ``tp`` (stride 1), ``ep`` (stride ``tp``), ``pp`` (a pair of neighbouring stages, stride
        ``tp x ep``); None for a degree of 1 (for ``ep``: also a dense model)."""
        r, lk, d = self.replica, self.links, self.design
        return {
            "tp": place_group(d, r.tp, 1, job_gpus=r.gpus, links=lk) if r.tp > 1 else None,
            "ep": (
                place_group(d, r.ep, r.tp, job_gpus=r.gpus, links=lk)
                if r.ep > 1 and self.model.moe is not None
                else None
            ),
            "pp": place_group(d, 2, r.tp * r.ep, job_gpus=r.gpus, links=lk) if r.pp > 1 else None,
        }


def tp_allreduce_path(s: Setup, message_bytes: float) -> str:
    """Which implementation runs a TP all-reduce of ``message_bytes`` [bytes] in the replica's engine.

    Returns ``"none"`` at TP 1, ``"custom"`` where the engine records a custom all-reduce limit for the
    replica's TP degree (``tp_allreduce_custom_max_bytes``) and the message fits under it (TensorRT-LLM:
    its one-/two-shot kernels, or NCCL where its measured strategy table says so), ``"nccl"`` otherwise
    (a larger message, an engine without the record, or no engine).

    The planner times both paths with NCCL's model (:func:`hnplan.comm.best_time`): TensorRT-LLM's
    strategy table (cpp/tensorrt_llm/common/customAllReduceUtils.h, AllReduceBestStrategyTable) picks a
    custom kernel only where it measured faster than NCCL, so NCCL's time bounds those messages from above.
    """
    tp = s.replica.tp
    if tp == 1:
        return "none"
    limit = s.engine.tp_allreduce_custom_max_bytes.get(tp) if s.engine is not None else None
    return "custom" if limit is not None and message_bytes <= limit else "nccl"


def resolve(model, system, replica: Replica, catalog: Catalog | None = None) -> Setup:
    """Look up model and system and check that the replica divides and runs.

    Raises
    ------
    InputError
        For an unknown dtype, fp4/fp8/int8 on an accelerator without that peak (the message lists the
        dtypes it has), or degrees below 1.
    InfeasiblePlan
        If ``tp`` does not divide the heads, ``ep`` the experts (or ``ep > 1`` on a dense model), or
        ``pp`` exceeds the layers.
    CatalogError
        For unknown ids.
    """
    cat = catalog or load_catalog()
    model, design = cat.model(model), cat.design(system)
    system, acc = design.system, design.accelerator
    r = replica
    check_choice("--dtype", r.dtype, SERVE_DTYPES)
    if r.dtype not in acc.dense_tflops:
        # 4-bit weights with 16-bit activations (gpt-oss's MXFP4 on Hopper through weight-only kernels such as
        # vLLM's Marlin) are not a dtype here: the GEMMs would run at the bf16 peak on 4-bit weights
        weight_only = (
            "; 4-bit weights with 16-bit activations (weight-only kernels, as gpt-oss's MXFP4 runs on Hopper) are not "
            "modelled: --dtype fp8 holds the weights at one byte, an upper bound on their memory and read time"
            if r.dtype in ("fp4", "int4") and "fp8" in acc.dense_tflops
            else ""
        )
        raise InputError(
            f"--dtype {r.dtype} is not available: accelerator {acc.id!r} of system {system.id!r} has no {r.dtype} peak "
            f"(dense_tflops lists {', '.join(acc.dense_tflops)}); choose one of those{weight_only}"
        )
    try:
        units.dtype_bytes(r.kv)
    except ValueError as exc:
        raise InputError(f"--kv-dtype: {exc}") from None
    if r.memory_utilization is not None and not 0 < r.memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1]; got {r.memory_utilization}")
    if r.kv_budget_gib is not None and r.kv_budget_gib <= 0:
        raise InputError(f"--kv-budget-gib must be > 0; got {r.kv_budget_gib}")
    if r.memory_utilization is not None and r.kv_budget_gib is not None:
        raise InputError(MEMORY_FLAGS_CLASH)
    for name in ("tp", "ep", "pp"):
        if getattr(r, name) < 1:
            raise InputError(f"{name} must be >= 1, got {getattr(r, name)}")
    check_split(model, r.tp, r.pp, r.ep, training=False)  # PlanRuleError naming the rule
    check_expert_split(model, r.tp, "tp")  # serving splits every expert over the TP ranks (etp = tp)
    eng = None
    if r.engine is not None:
        eng = cat.get("engines", r.engine)
        if r.dtype not in eng.weight_dtypes:
            raise InputError(
                f"engine {eng.id!r} serves weights in {', '.join(eng.weight_dtypes)}, not {r.dtype} "
                f"(field weight_dtypes)"
            )
        if r.kv not in eng.kv_dtypes:
            raise InputError(
                f"engine {eng.id!r} keeps the KV cache in {', '.join(eng.kv_dtypes)}, not {r.kv} (field kv_dtypes)"
            )
    return Setup(model, system, acc, r, cat, design, eng)


def candidate_replicas(
    model,
    system,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    fixed: dict | None = None,
    catalog: Catalog | None = None,
    overlap: bool = False,
    **settings,
) -> list[Replica]:
    """Replica layouts to search: TP a power of two dividing the heads within one scale-up domain;
    for MoE models EP a power of two dividing the experts with ``tp x ep`` up to
    :data:`MAX_REPLICA_GPUS`; PP 1, or the smallest power of two whose weights fit when TP x EP
    alone do not. ``fixed`` pins ``tp``, ``ep`` or ``pp``; ``overlap`` sets :attr:`Replica.overlap`;
    ``settings`` are further :class:`Replica` fields (``memory_utilization``, ``kv_budget_gib``, ``engine``).
    Empty when nothing fits, except that a pinned degree every layout fails on for the same reason (``ep``
    on a dense model, ``pp`` above the layers) raises :class:`InfeasiblePlan` with that reason."""
    cat = catalog or load_catalog()
    m, sys_ = cat.model(model), cat.system(system)
    fixed = fixed or {}
    pow2 = [2**i for i in range(9)]
    tps = [fixed["tp"]] if fixed.get("tp") else [t for t in pow2 if m.heads % t == 0 and t <= sys_.scaleup_domain_gpus]
    if fixed.get("ep"):
        eps = [fixed["ep"]]
        if m.moe is not None and m.moe.experts % fixed["ep"]:  # the layout rule, named before any layout is tried
            raise InfeasiblePlan(
                f"ep = {fixed['ep']} needs a number of experts divisible by it; {m.id} has {m.moe.experts} experts"
            )
        if not fixed.get("tp") and fixed["ep"] > MAX_REPLICA_GPUS:
            raise InfeasiblePlan(
                f"ep = {fixed['ep']} makes a replica of more than the {MAX_REPLICA_GPUS} GPUs the search enumerates; "
                "give --tp too to plan it"
            )
    elif m.moe is None:
        eps = [1]
    else:
        eps = [e for e in pow2 if m.moe.experts % e == 0]
    out, reasons = [], set()
    for tp in tps:
        for ep in eps:
            if tp * ep > MAX_REPLICA_GPUS and not (fixed.get("tp") and fixed.get("ep")):
                continue
            pps = [fixed["pp"]] if fixed.get("pp") else [1, 2, 4, 8]
            for pp in pps:
                r = Replica(tp, ep, pp, dtype, kv_dtype, overlap, **settings)
                try:
                    max_batch(resolve(m, sys_, r, cat), 1)
                except InfeasiblePlan as exc:
                    reasons.add(str(exc))
                    continue
                out.append(r)
                break  # the smallest PP that fits
    if not out and fixed and len(reasons) == 1:  # every layout fails alike: the pinned degree itself
        raise InfeasiblePlan(reasons.pop())
    if not out and reasons and all("does not fit the KV cache" in x for x in reasons):
        # the weights fit, but no layout keeps one token's KV cache: say so, not "no layout fits"
        budget = settings.get("kv_budget_gib")
        raise InfeasiblePlan(
            f"no replica layout of {m.id} on {sys_.id} holds the KV cache of one token"
            + (f" within --kv-budget-gib {format_given(budget)} per GPU" if budget is not None else "")
        )
    return out


# --- memory -----------------------------------------------------------------------------------------
def weights_bytes_per_gpu(s: Setup) -> float:
    """Weights on one accelerator of the replica [bytes] (issue 5's footprint / ``pp``)."""
    r = s.replica
    return weight_bytes_per_gpu(s.model, r.dtype, r.tp, r.ep) / r.pp


def kv_bytes_per_token_per_gpu(s: Setup) -> float:
    """KV cache of one token on one accelerator [bytes/token]: its ``layers / pp`` at the KV dtype."""
    return kv_cache_bytes_per_token(s.model, s.replica.kv, s.replica.tp) / s.replica.pp


def _capacity(s: Setup, max_batched_tokens: int | None = None):
    r, e = s.replica, s.engine
    util = r.memory_utilization
    if util is None and e is not None:
        util = 1.0 if e.memory_rule == "free" else e.memory_utilization
    mbt = max_batched_tokens or (e.max_num_batched_tokens if e is not None else None)
    return kv_capacity(
        s.model,
        s.acc,
        r.dtype,
        r.kv,
        r.tp,
        r.ep,
        utilization=util,
        max_batched_tokens=mbt,
        overheads=s.design.memory_overheads,
    )


def fixed_bytes_per_gpu(s: Setup, max_batched_tokens: int | None = None) -> float:
    """Weights (``/ pp``), activation workspace and runtime overheads on one accelerator [bytes]
    (issue 5's :func:`hnplan.memory.kv_capacity` parts)."""
    c = _capacity(s, max_batched_tokens)
    return weights_bytes_per_gpu(s) + c.workspace_bytes + c.overhead_bytes


def usable_bytes_per_gpu(s: Setup) -> float:
    """Device memory the serving engine may use [bytes]: visible HBM (:func:`hnplan.memory.hbm_capacity_bytes`)
    x the serving memory utilization (:attr:`Replica.memory_utilization`, default the catalog's
    ``memory.yaml``, vLLM's ``gpu_memory_utilization``); the whole visible HBM with a KV budget."""
    c = _capacity(s)
    return hbm_capacity_bytes(s.acc) if s.replica.kv_budget_gib is not None else c.usable_bytes


def kv_budget_bytes(s: Setup, max_batched_tokens: int | None = None) -> float:
    """Memory for the KV cache on one accelerator [bytes]: usable memory minus weights, workspace and
    runtime overheads, or :attr:`Replica.kv_budget_gib` capped at what the visible HBM holds after them."""
    rest = usable_bytes_per_gpu(s) - fixed_bytes_per_gpu(s, max_batched_tokens)
    e = s.engine
    if (
        s.replica.kv_budget_gib is None
        and s.replica.memory_utilization is None
        and e is not None
        and e.memory_rule == "free"
    ):
        return e.memory_utilization * rest  # TensorRT-LLM: a fraction of the memory left after the model
    if s.replica.kv_budget_gib is None:
        return rest
    return min(units.GiB_to_bytes(s.replica.kv_budget_gib), rest)


def max_batch(s: Setup, context_tokens: float) -> int:
    """Largest number of concurrent sequences of ``context_tokens`` the replica runs [-].

    Each accelerator holds the KV of ``pp x b`` sequences for its ``layers / pp`` (``b`` sequences per
    attention group and micro-batch): ``B = ep x pp x floor(budget / (ctx x KV/token/GPU x pp))``, ``ctx``
    the tokens the sequence's cache keeps (:func:`hnplan.memory.kv_cache_tokens`: a sliding-window layer its
    window). With
    an engine, its scheduler cap ``max_num_seqs`` per scheduler (one per data-parallel attention rank,
    ``ep`` of them) bounds it too.

    Raises
    ------
    InfeasiblePlan
        If the weights alone exceed the accelerator's HBM, or not one sequence fits.
    """
    budget = kv_budget_bytes(s)
    r = s.replica
    if budget <= 0:
        raise InfeasiblePlan(
            f"{s.model.id} at {r.dtype} needs {units.to_GiB(fixed_bytes_per_gpu(s)):.1f} GiB "
            f"of weights, workspace and overheads per GPU with tp={r.tp} ep={r.ep} pp={r.pp}; "
            f"{s.acc.id} offers {units.to_GiB(usable_bytes_per_gpu(s)):.1f} GiB to the engine"
        )
    kept = kv_cache_tokens(s.model, context_tokens)  # sliding-window layers keep their window only
    per_group = math.floor(budget / (kept * kv_bytes_per_token_per_gpu(s) * r.pp))
    if per_group < 1:
        # how much it needs against what there is, and what set the budget where the user did
        need = kept * kv_bytes_per_token_per_gpu(s) * r.pp
        set_by = (
            f" (--kv-budget-gib {format_given(r.kv_budget_gib)})"
            if r.kv_budget_gib is not None and units.GiB_to_bytes(r.kv_budget_gib) <= budget
            else ""
        )
        raise InfeasiblePlan(
            f"one sequence of {context_tokens:,.0f} tokens does not fit the KV cache of "
            f"{s.model.id} on {s.acc.id} with tp={r.tp} ep={r.ep} pp={r.pp}: it needs {units.format_size(need)} "
            f"per GPU, the cache holds {units.format_size(budget)}{set_by}"
        )
    b = per_group * r.groups
    if s.engine is not None:
        b = min(b, s.engine.max_num_seqs * r.ep)
    return b


def memory_per_gpu_bytes(s: Setup, batch: int, context_tokens: float) -> float:
    """Weights, workspace, overheads and the KV cache of ``batch`` sequences of ``context_tokens`` on
    one accelerator [bytes]."""
    per_group = math.ceil(batch / s.replica.groups)
    kept = kv_cache_tokens(s.model, context_tokens)  # sliding-window layers keep their window only
    return fixed_bytes_per_gpu(s) + per_group * s.replica.pp * kept * kv_bytes_per_token_per_gpu(s)
