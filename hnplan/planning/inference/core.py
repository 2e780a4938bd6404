"""One serving replica: prefill and decode times, continuous batching in steady state, the
throughput-latency frontier over batch size and the maximum-throughput operating point.

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
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.design import Design
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator, Model, ServingEngine, System
from hnplan.comm import GroupPlacement, SystemLinks, best_time, place_group, system_links
from hnplan.comm.messages import tp_message_bytes
from hnplan.compute import ACT_BYTES, operator_table, totals
from hnplan.compute.layout import check_split
from hnplan.errors import InfeasiblePlan, InputError, check_choice
from hnplan.memory import hbm_capacity_bytes, kv_cache_bytes_per_token, kv_capacity, weight_bytes_per_gpu

SERVE_DTYPES = ("bf16", "fp8", "int8", "fp4")
MAX_REPLICA_GPUS = 256  # candidates larger than this are not enumerated (DeepSeek's decode unit: 144 GPUs)
# TensorRT-LLM's default scheduler token budget per iteration (``max_num_tokens`` 8192, TensorRT-LLM
# docs "Tuning max batch size and max num tokens"); a scheduler parameter, not a calibration.
DEFAULT_MAX_BATCHED_TOKENS = 8192


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
        """Per-rank links of a job of the replica's accelerators (:func:`hnplan.comm.system_links`)."""
        return system_links(self.design, gpus=self.replica.gpus)

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
        raise InputError(
            f"accelerator {acc.id!r} of system {system.id!r} has no {r.dtype} peak "
            f"(dense_tflops lists {', '.join(acc.dense_tflops)}); choose one of those"
        )
    try:
        units.dtype_bytes(r.kv)
    except ValueError as exc:
        raise InputError(f"kv dtype: {exc}") from None
    if r.memory_utilization is not None and not 0 < r.memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1]; got {r.memory_utilization}")
    if r.kv_budget_gib is not None and r.kv_budget_gib <= 0:
        raise InputError(f"--kv-budget-gib must be > 0; got {r.kv_budget_gib}")
    for name in ("tp", "ep", "pp"):
        if getattr(r, name) < 1:
            raise InputError(f"{name} must be >= 1, got {getattr(r, name)}")
    check_split(model, r.tp, r.pp, r.ep, training=False)  # PlanRuleError naming the rule
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
    ``settings`` are further :class:`Replica` fields (``memory_utilization``, ``kv_budget_gib``, ``engine``)."""
    cat = catalog or load_catalog()
    m, sys_ = cat.model(model), cat.system(system)
    fixed = fixed or {}
    pow2 = [2**i for i in range(9)]
    tps = [fixed["tp"]] if fixed.get("tp") else [t for t in pow2 if m.heads % t == 0 and t <= sys_.scaleup_domain_gpus]
    if fixed.get("ep"):
        eps = [fixed["ep"]]
    elif m.moe is None:
        eps = [1]
    else:
        eps = [e for e in pow2 if m.moe.experts % e == 0]
    out = []
    for tp in tps:
        for ep in eps:
            if tp * ep > MAX_REPLICA_GPUS and not (fixed.get("tp") and fixed.get("ep")):
                continue
            pps = [fixed["pp"]] if fixed.get("pp") else [1, 2, 4, 8]
            for pp in pps:
                r = Replica(tp, ep, pp, dtype, kv_dtype, overlap, **settings)
                try:
                    max_batch(resolve(m, sys_, r, cat), 1)
                except InfeasiblePlan:
                    continue
                out.append(r)
                break  # the smallest PP that fits
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
    attention group and micro-batch): ``B = ep x pp x floor(budget / (ctx x KV/token/GPU x pp))``. With
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
    per_group = math.floor(budget / (context_tokens * kv_bytes_per_token_per_gpu(s) * r.pp))
    if per_group < 1:
        raise InfeasiblePlan(
            f"one sequence of {context_tokens:.0f} tokens does not fit the KV cache of "
            f"{s.model.id} on {s.acc.id} with tp={r.tp} ep={r.ep} pp={r.pp}"
        )
    b = per_group * r.groups
    if s.engine is not None:
        b = min(b, s.engine.max_num_seqs * r.ep)
    return b


def memory_per_gpu_bytes(s: Setup, batch: int, context_tokens: float) -> float:
    """Weights, workspace, overheads and the KV cache of ``batch`` sequences of ``context_tokens`` on
    one accelerator [bytes]."""
    per_group = math.ceil(batch / s.replica.groups)
    return fixed_bytes_per_gpu(s) + per_group * s.replica.pp * context_tokens * kv_bytes_per_token_per_gpu(s)


# --- time of one pass ----------------------------------------------------------------------------------
def _comm_time_s(s: Setup, tokens_per_group: float) -> dict:
    """Exposed communication of one pass over all layers for ``tokens_per_group`` tokens [s]."""
    m, r, groups = s.model, s.replica, s.placements
    msg = tp_message_bytes(m, tokens_per_group, 1)
    out = {"tp_allreduce": 0.0, "ep_alltoall": 0.0, "pp_send": 0.0}
    if groups["tp"] is not None:
        out["tp_allreduce"] = 2 * m.layers * best_time("allreduce", msg, groups["tp"])[0]
    if groups["ep"] is not None:
        g = groups["ep"]
        assert m.moe is not None  # an EP group exists only for an MoE model (resolve)
        k = m.moe.active_experts
        moe_layers = m.layers - m.moe.first_dense_layers
        # dispatch sends each token to its top-k experts at the GEMM dtype (>= 1 byte), combine returns bf16
        dispatch = tokens_per_group / r.tp * k * m.hidden * max(units.dtype_bytes(r.dtype), 1.0)
        combine = tokens_per_group / r.tp * k * m.hidden * ACT_BYTES
        out["ep_alltoall"] = moe_layers * (best_time("alltoall", dispatch, g)[0] + best_time("alltoall", combine, g)[0])
    if groups["pp"] is not None:
        out["pp_send"] = (r.pp - 1) * best_time("sendrecv", msg / r.tp, groups["pp"])[0]
    return out


def _kv_dtype_reads(df: pd.DataFrame, s: Setup, batch: int, context_tokens: int) -> pd.DataFrame:
    """Re-time the decode attention rows of an operator table for the replica's KV dtype.

    Issue 3's operator table reads the KV cache in bf16; a KV cache in fp8 (or fp4) moves
    ``b x ctx x KV bytes/token/layer`` at its own width. The memory time of the attention rows scales
    with their new byte count; compute time and the fixed kernel term stay. (To move into
    :func:`hnplan.compute.operator_table` as a ``kv_dtype`` argument.)
    """
    kvb = units.dtype_bytes(s.replica.kv)
    if kvb == units.dtype_bytes("bf16"):
        return df
    per_layer_bf16 = kv_cache_bytes_per_token(s.model, "bf16", s.replica.tp) / s.model.layers
    saved = batch * context_tokens * per_layer_bf16 * (1.0 - kvb / units.dtype_bytes("bf16"))
    df = df.copy()
    att = df["kind"] == "attention"
    fixed = df.loc[att, "time_s"] - np.maximum(df.loc[att, "compute_time_s"], df.loc[att, "memory_time_s"])
    new_bytes = df.loc[att, "bytes"] - saved
    mem = df.loc[att, "memory_time_s"] * new_bytes / df.loc[att, "bytes"]
    df.loc[att, "bytes"] = new_bytes
    df.loc[att, "memory_time_s"] = mem
    df.loc[att, "time_s"] = np.maximum(df.loc[att, "compute_time_s"], mem) + fixed
    return df


def decode_step(s: Setup, batch_per_group: int, context_tokens: float) -> dict:
    """One decode step of ``batch_per_group`` sequences through the whole replica [s].

    Returns
    -------
    dict
        ``compute_s`` (operator roofline over all layers of one accelerator's shard), ``bytes``
        [bytes] read and written per accelerator, the collectives ``tp_allreduce_s``,
        ``ep_alltoall_s``, ``pp_send_s`` and ``time_s`` (their sum, or the larger of compute and
        communication with ``Replica.overlap``).
    """
    r = s.replica
    b = max(1, int(math.ceil(batch_per_group)))
    ctx = max(1, int(round(context_tokens)))
    df = operator_table(s.model, s.acc, "decode", b, ctx, kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype)
    return _pass_times(totals(_kv_dtype_reads(df, s, b, ctx)), _comm_time_s(s, b), r.overlap, _dequant(s))


def _dequant(s: Setup) -> float:
    """The engine's unfused (de)quantisation cost at the replica's dtype [fraction of operator time]."""
    if s.engine is None:
        return 0.0
    return next((v for k, v in s.engine.dequant_overhead.items() if k == s.replica.dtype), 0.0)


def iteration_overhead_s(s: Setup) -> float:
    """Host time per iteration the GPU waits for (the engine's ``iteration_overhead_s``; 0 without one) [s]."""
    return 0.0 if s.engine is None else s.engine.iteration_overhead_s


def _pass_times(tot: dict, comm: dict, overlap: bool, dequant: float = 0.0) -> dict:
    tot = {**tot, "time_s": tot["time_s"] * (1.0 + dequant)}
    out = {
        "compute_s": tot["time_s"],
        "bytes": tot["bytes"],
        "flops": tot["flops"],
        **{f"{k}_s": v for k, v in comm.items()},
    }
    c = sum(comm.values())
    out["time_s"] = max(tot["time_s"], c) if overlap else tot["time_s"] + c
    return out


def prefill_pass(s: Setup, sequences: int, prompt_tokens: float) -> dict:
    """Prefill of ``sequences`` prompts of ``prompt_tokens`` in one attention group [s]; keys as
    :func:`decode_step`."""
    r = s.replica
    n = max(1, int(sequences))
    p = max(1, int(round(prompt_tokens)))
    tot = totals(operator_table(s.model, s.acc, "prefill", n, p, tp=r.tp, ep=r.ep, dtype=r.dtype))
    return _pass_times(tot, _comm_time_s(s, n * p), r.overlap, _dequant(s))


def prefill_per_request_s(
    s: Setup, prompt_tokens: float, max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
) -> float:
    """Prefill time per request when the scheduler fills its token budget [s/request]:
    ``t_prefill(n, I) / n`` with ``n = max(1, floor(budget / I))`` prompts per pass."""
    n = max(1, int(max_batched_tokens // max(prompt_tokens, 1)))
    return prefill_pass(s, n, prompt_tokens)["time_s"] / n


# --- steady state --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OperatingPoint:
    """Continuous batching in steady state at ``batch`` concurrent sequences. Times [s], rates [1/s]."""

    batch: int
    input_tokens: float
    output_tokens: float
    decode_s: float
    prefill_per_request_s: float
    prefill_single_s: float
    iteration_s: float
    tpot_s: float
    ttft_s: float
    e2e_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    requests_per_s: float
    memory_per_gpu_bytes: float
    hbm_bytes: float  # usable by the engine: visible HBM x serving memory utilization
    max_batch: int
    breakdown_s: dict = field(default_factory=dict)
    compute_busy: float = 0.0  # FLOPs of one accelerator per iteration / (dense peak x iteration) [fraction]
    memory_busy: float = 0.0  # bytes of one accelerator per iteration / (HBM bandwidth x iteration) [fraction]

    @property
    def power_utilisation(self) -> float:
        """Accelerator power utilisation for :func:`hnplan.power.accelerator_power_w`: the larger of the
        compute and memory busy fractions, at most 1 [fraction]."""
        return min(1.0, max(self.compute_busy, self.memory_busy))

    def as_dict(self) -> dict:
        return asdict(self)


def steady_state(
    s: Setup,
    batch: int,
    input_tokens: float,
    output_tokens: float,
    *,
    context_tokens: float | None = None,
    max_context_tokens: float | None = None,
    max_batched_tokens: int | None = None,
    disaggregated: bool = False,
    chunked_prefill: int | None = None,
    _cache: dict | None = None,
) -> OperatingPoint:
    """Continuous batching with ``batch`` concurrent sequences in steady state (module docstring).

    Parameters
    ----------
    s : Setup
    batch : int
        Concurrent sequences in the replica [-].
    input_tokens, output_tokens : float
        Mean prompt and output lengths [tokens].
    context_tokens : float, optional
        Mean KV length during decode [tokens]; default ``I + O/2``.
    max_context_tokens : float, optional
        Longest context to hold in memory [tokens]; default ``I + O``.
    max_batched_tokens : int, optional
        Scheduler token budget of one prefill pass [tokens]; default the engine's
        ``max_num_batched_tokens``, else :data:`DEFAULT_MAX_BATCHED_TOKENS`.
    disaggregated : bool
        Decode-only replica (prefill runs in another pool): no prefill in the iteration.
    chunked_prefill : int, optional
        Chunk size [tokens] (Sarathi-Serve): each iteration carries at most this many prompt tokens
        per attention group next to the decodes (more raises :class:`InfeasiblePlan`). The mean
        iteration is unchanged; a prompt's first token comes after ``ceil(I / chunk)`` iterations.
        Default: the engine's ``max_num_batched_tokens`` when the engine chunks prefills (no
        admission check: the engine's budget then throttles admission), else whole prompts.

    Returns
    -------
    OperatingPoint
        ``ttft_s`` without queueing: the prefill of the request plus the decode step of the iteration
        that carries it and the engine's host time, ``t_prefill(1, I) + t_decode(B) + t_host``; with
        chunks, ``t_prefill(1, I) + ceil(I / chunk) (t_decode(B) + t_host)``; disaggregated,
        ``t_prefill(1, I) + t_host``. ``tpot_s`` is the iteration, host time included. See
        :mod:`hnplan.planning.inference.capacity` for queueing at a request rate.

    Raises
    ------
    InfeasiblePlan
        If ``batch`` exceeds :func:`max_batch` (memory) or the weights do not fit.
    """
    if batch < 1 or input_tokens < 1 or output_tokens < 1:
        raise InputError(f"batch, input and output tokens must be >= 1; got {batch}, {input_tokens}, {output_tokens}")
    ctx = input_tokens + output_tokens / 2 if context_tokens is None else context_tokens
    ctx_max = input_tokens + output_tokens if max_context_tokens is None else max_context_tokens
    mb = max_batch(s, ctx_max)
    if batch > mb:
        raise InfeasiblePlan(f"batch {batch} exceeds the {mb} sequences of {ctx_max:.0f} tokens that fit the KV cache")
    cache = {} if _cache is None else _cache
    r, eng = s.replica, s.engine
    if max_batched_tokens is None:
        max_batched_tokens = eng.max_num_batched_tokens if eng is not None else DEFAULT_MAX_BATCHED_TOKENS
    check_chunk = chunked_prefill is not None
    if chunked_prefill is None and eng is not None and eng.chunked_prefill:
        chunked_prefill = eng.max_num_batched_tokens
    host = iteration_overhead_s(s)
    dec = decode_step(s, math.ceil(batch / r.groups), ctx)
    key = ("prefill", input_tokens, max_batched_tokens)
    if key not in cache:
        one = prefill_pass(s, 1, input_tokens)
        cache[key] = (
            prefill_per_request_s(s, input_tokens, max_batched_tokens),
            one["time_s"],
            one["flops"],
            one["bytes"],
        )
    pf_req, pf_single, pf_flops, pf_bytes = cache[key]
    # prefill work spreads over the ``groups`` attention groups that run in parallel
    pf_iter = 0.0 if disaggregated else batch / output_tokens * pf_req / r.groups
    t_it = dec["time_s"] + pf_iter + host
    tps = batch / t_it
    # the first token: the request's prefill plus the decode step of the iteration that carries it
    ttft = pf_single + host + (0.0 if disaggregated else dec["time_s"])
    if chunked_prefill is not None and not disaggregated:
        if chunked_prefill < 1:
            raise InputError(f"chunked_prefill must be >= 1 token; got {chunked_prefill}")
        per_iter = batch / r.groups * input_tokens / output_tokens
        if check_chunk and per_iter > chunked_prefill:
            raise InfeasiblePlan(
                f"batch {batch} admits {per_iter:.0f} prompt tokens per iteration and attention "
                f"group, more than the {chunked_prefill}-token chunk"
            )
        ttft = pf_single + math.ceil(input_tokens / chunked_prefill) * (dec["time_s"] + host)
    comm = dec["tp_allreduce_s"] + dec["ep_alltoall_s"] + dec["pp_send_s"]
    # busy fractions of one accelerator over an iteration: its FLOPs at the dense peak, its bytes at the
    # HBM bandwidth (decode step plus the prefill work the iteration carries)
    admitted = 0.0 if disaggregated else batch / output_tokens / r.groups
    flops = dec["flops"] + admitted * pf_flops
    moved = dec["bytes"] + admitted * pf_bytes
    peak = {str(k): v for k, v in s.acc.dense_tflops.items()}[r.dtype]
    compute_busy = flops / units.tflops_to_flops_per_s(peak) / t_it
    memory_busy = moved / units.TBps_to_Bps(s.acc.hbm_bw_TBps) / t_it
    breakdown = {
        "decode_compute": dec["compute_s"],
        "tp_allreduce": dec["tp_allreduce_s"],
        "ep_alltoall": dec["ep_alltoall_s"],
        "pp_send": dec["pp_send_s"],
        "hidden_by_overlap": dec["time_s"] - dec["compute_s"] - comm,
        "prefill_in_iteration": pf_iter,
        "engine_host": host,
    }
    return OperatingPoint(
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        decode_s=dec["time_s"],
        prefill_per_request_s=pf_req,
        prefill_single_s=pf_single,
        iteration_s=t_it,
        tpot_s=t_it,
        ttft_s=ttft,
        e2e_s=ttft + (output_tokens - 1) * t_it,
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps / r.gpus,
        requests_per_s=tps / output_tokens,
        memory_per_gpu_bytes=memory_per_gpu_bytes(s, batch, ctx_max),
        hbm_bytes=usable_bytes_per_gpu(s),
        max_batch=mb,
        breakdown_s=breakdown,
        compute_busy=compute_busy,
        memory_busy=memory_busy,
    )


def batch_grid(max_b: int, groups: int = 1, points: int = 24) -> np.ndarray:
    """Batches to evaluate: multiples of ``groups`` on a geometric grid from ``groups`` to ``max_b``
    (both included) [-]."""
    lo = groups
    if max_b <= lo:
        return np.array([max(1, max_b)])
    g = np.unique(np.round(np.geomspace(lo, max_b, points) / groups).astype(int) * groups)
    g = g[(g >= 1) & (g <= max_b)]
    return np.unique(np.append(g, max_b))


def frontier(
    model,
    system,
    replica: Replica,
    input_tokens: float,
    output_tokens: float,
    batches=None,
    catalog: Catalog | None = None,
    **kwargs,
) -> pd.DataFrame:
    """The throughput-latency frontier of one replica over batch size.

    Returns
    -------
    pandas.DataFrame
        One row per batch: ``batch, tpot_s, ttft_s, e2e_s, tokens_per_s, tokens_per_s_per_gpu,
        tokens_per_s_per_user`` (= 1 / TPOT), ``memory_per_gpu_gib, hbm_gib, max_batch``, the power at
        that load ``gpu_power_w, node_power_w, joules_per_token``
        (:func:`~hnplan.planning.inference.points.serving_power`) plus ``system, model, tp, ep, pp, dtype``.
        ``df.attrs['units']`` names the units.

    Raises
    ------
    InfeasiblePlan
        If the weights do not fit.
    """
    from hnplan.planning.inference.points import serving_power  # points builds on this module

    s = resolve(model, system, replica, catalog)
    mb = max_batch(s, input_tokens + output_tokens)
    bs = batch_grid(mb, replica.groups) if batches is None else [b for b in batches if b <= mb]
    cache: dict = {}
    rows = []
    for b in bs:
        p = steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
        pw = serving_power(s, p)
        rows.append(
            {
                "system": s.system.id,
                "model": s.model.id,
                "tp": replica.tp,
                "ep": replica.ep,
                "pp": replica.pp,
                "dtype": replica.dtype,
                "batch": p.batch,
                "tpot_s": p.tpot_s,
                "ttft_s": p.ttft_s,
                "e2e_s": p.e2e_s,
                "tokens_per_s": p.tokens_per_s,
                "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
                "tokens_per_s_per_user": 1.0 / p.tpot_s,
                "memory_per_gpu_gib": units.to_GiB(p.memory_per_gpu_bytes),
                "hbm_gib": units.to_GiB(p.hbm_bytes),
                "max_batch": p.max_batch,
                "gpu_power_w": pw["gpu_power_w"],
                "node_power_w": pw["node_power_w"],
                "joules_per_token": pw["joules_per_token"],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["units"] = {
        "tpot_s": "s",
        "ttft_s": "s",
        "e2e_s": "s",
        "tokens_per_s": "output tokens/s",
        "tokens_per_s_per_gpu": "output tokens/s/GPU",
        "tokens_per_s_per_user": "tokens/s",
        "memory_per_gpu_gib": "GiB",
        "hbm_gib": "GiB",
        "gpu_power_w": "W",
        "node_power_w": "W",
        "joules_per_token": "J/output token",
    }
    return df


def max_throughput_point(s: Setup, input_tokens: float, output_tokens: float, **kwargs) -> OperatingPoint:
    """The batch that maximises output tokens/s within memory, as throughput benchmarks at an
    unbounded request rate measure (a grid over batch, then the neighbourhood of the best)."""
    mb = max_batch(s, input_tokens + output_tokens)
    cache: dict = {}
    pts = {
        int(b): steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
        for b in batch_grid(mb, s.replica.groups, 16)
    }
    best = max(pts, key=lambda b: pts[b].tokens_per_s)
    keys = sorted(pts)
    i = keys.index(best)
    lo, hi = keys[max(i - 1, 0)], keys[min(i + 1, len(keys) - 1)]
    for b in batch_grid(hi, s.replica.groups, 64):
        if lo < b < hi and int(b) not in pts:
            pts[int(b)] = steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)
    return pts[max(pts, key=lambda b: pts[b].tokens_per_s)]
