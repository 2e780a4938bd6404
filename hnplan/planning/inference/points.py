"""Operating points of one design: a replica at a batch or at its maximum throughput, its throughput-latency
frontier over batch size (:func:`frontier`), the frontier of the best layout per design, the best point under a TPOT bound, short scoring requests, and the
power and $ attributed to the GPUs used.

Cost: the TCO of the purchasable units (:func:`hnplan.cost.design_cost`: capex, energy, maintenance
over the amortisation period) per GPU-hour; $ per million output tokens = GPUs x $/GPU-hour /
(output tokens/s x 3600) x 1e6. Power: each GPU's share of its units' rated IT power
(:func:`hnplan.power.design_power`) and the facility power through the PUE.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm.topology import whole_units
from hnplan.cost import design_cost
from hnplan.errors import HnplanError, InfeasiblePlan
from hnplan.formatting import format_given
from hnplan.planning.inference.core import (
    Replica,
    Setup,
    candidate_replicas,
    kv_budget_bytes,
    max_batch,
    per_system,
    resolve,
)
from hnplan.planning.inference.steady import (
    batch_grid,
    max_throughput_point,
    prefill_pass,
    reserved_context_tokens,
    steady_state,
    steady_states,
)
from hnplan.power import accelerator_power_w, design_power

if TYPE_CHECKING:
    import pandas as pd


def usd_per_gpu_hour(
    system, gpus: int | None = None, catalog: Catalog | None = None, *, scaleout: bool = True
) -> float:
    """TCO per productive GPU-hour of the purchasable units that hold ``gpus`` accelerators (default one
    unit): lifetime less deployment, at the facility's utilisation [USD/GPU-hour]
    (:attr:`hnplan.cost.DesignCost.usd_per_gpu_hour`); ``scaleout=False`` without the scale-out network
    (:func:`needs_scaleout`)."""
    cat = catalog or load_catalog()
    system = cat.system(system)
    if price_gap(system, cat) is not None:
        return float("nan")  # no price: cost outputs say n/a, with price_gap's reason
    design = cat.design(system)
    return design_cost(design, whole_units(design, gpus or system.unit_gpus), scaleout=scaleout).usd_per_gpu_hour


def kv_in_domain(system, prefill_gpus: int, decode_gpus: int) -> bool:
    """Whether a disaggregated request's KV cache moves over the scale-up link: one prefill and one decode replica
    fit one domain, and the request is prefilled in its decode replica's domain (DistServe's colocated placement,
    Zhong et al., OSDI 2024, arXiv:2401.09670); else it crosses the scale-out network.

    >>> from hnplan.catalog import load_catalog
    >>> s = load_catalog().system("hgx-h100-ib-ndr")
    >>> kv_in_domain(s, 2, 4), kv_in_domain(s, 4, 8)
    (True, False)
    """
    return prefill_gpus + decode_gpus <= system.scaleup_domain_gpus


def needs_scaleout(system, decode_gpus: int, prefill_gpus: int | None = None) -> bool:
    """Whether a serving deployment needs the design's scale-out (backend) network: a replica larger than one
    scale-up domain (expert parallelism over racks or servers), or, disaggregated (``prefill_gpus`` given), KV
    caches moved between domains (:func:`kv_in_domain`). Replicas within a domain serve their requests alone;
    they are bought and powered without it (a front-end network, not modelled for any design, carries the
    requests).

    >>> from hnplan.catalog import load_catalog
    >>> s = load_catalog().system("hgx-h100-ib-ndr")
    >>> needs_scaleout(s, 2), needs_scaleout(s, 16), needs_scaleout(s, 4, prefill_gpus=8)
    (False, True, True)
    """
    if decode_gpus > system.scaleup_domain_gpus:
        return True
    return prefill_gpus is not None and not kv_in_domain(system, prefill_gpus, decode_gpus)


def price_gap(system, catalog: Catalog | None = None) -> str | None:
    """Why ``system`` has no cost, or None when every part it is costed by has a price: the missing
    ``prices.yaml`` items and how a system file gives its own price (``unit_price_usd``, ``price_item``)."""
    cat = catalog or load_catalog()
    missing = cat.design(cat.system(system)).prices.missing
    return "; ".join(missing.values()) if missing else None


def attributed_power_w(
    system, gpus: int, catalog: Catalog | None = None, *, scaleout: bool = True
) -> tuple[float, float]:
    """IT and facility power attributed to ``gpus`` accelerators: their share of the rated power of
    the purchasable units that hold them (:func:`hnplan.power.design_power`; ``scaleout=False`` without the
    scale-out network, :func:`needs_scaleout`) [W]."""
    cat = catalog or load_catalog()
    system = cat.system(system)
    design = cat.design(system)
    n = whole_units(design, gpus)
    pw = design_power(design, n, scaleout=scaleout)
    return pw.it_w * gpus / n, pw.facility_w * gpus / n


def serving_power(s: Setup, p, load: float = 1.0, gpus: int | None = None, scaleout: bool | None = None) -> dict:
    """Power and energy of a replica at an operating point, from the accelerators' utilisation.

    Each accelerator runs at the power utilisation of the modelled pass
    (:attr:`~hnplan.planning.inference.steady.OperatingPoint.power_utilisation`: the larger of its compute
    and memory busy fractions over an iteration) on the idle-TDP line
    (:func:`hnplan.power.accelerator_power_w`). The rest of the node (CPUs, NICs, scale-up switches,
    fans) and the scale-out network draw their rated share (:func:`hnplan.power.design_power`), so the
    node's power falls with load only by the accelerators' part.

    Memory-bound kernels draw less than a compute-bound GEMM at the same busy fraction, so at small
    batches the GPU power is an upper bound (energy errs high, not low).

    ``load`` [fraction] scales the utilisation for replicas busy only part of the time (a request rate
    below saturation: :func:`~hnplan.planning.inference.capacity.plan_for_rate`'s slot utilisation);
    ``gpus`` replaces the replica's accelerators for the replica totals (all replicas of a plan), in which
    case ``joules_per_token`` uses ``p.tokens_per_s x load x gpus / replica GPUs``. ``scaleout``: whether the
    scale-out network is bought and powered (default :func:`needs_scaleout` of the replica).

    Returns
    -------
    dict
        ``gpu_utilisation`` [fraction], ``compute_busy``, ``memory_busy`` [fraction], ``gpu_power_w`` (one
        accelerator) [W], ``node_power_w`` (one node of ``node_gpus`` accelerators, its share of the network
        included) [W], ``replica_power_w`` (IT power of the replica's accelerators' share) [W],
        ``facility_power_w`` (x PUE) [W], ``joules_per_token`` (IT energy per output token) [J] and
        ``joules_per_request`` [J].
    """
    design, r = s.design, s.replica
    u = min(1.0, max(0.0, load)) * p.power_utilisation
    gpu_w = float(accelerator_power_w(s.acc, u, design.facility))
    n = whole_units(design, r.gpus)
    pw = design_power(design, n, scaleout=needs_scaleout(s.system, r.gpus) if scaleout is None else scaleout)
    per_gpu_it = pw.it_w_at(u) / n  # rated non-accelerator share + the accelerator at u
    g = r.gpus if gpus is None else gpus
    replica_w = per_gpu_it * g
    tps = p.tokens_per_s * min(1.0, max(load, 1e-12)) * g / r.gpus
    return {
        "gpu_utilisation": u,
        "compute_busy": p.compute_busy,
        "memory_busy": p.memory_busy,
        "gpu_power_w": gpu_w,
        "node_power_w": per_gpu_it * s.system.node_gpus,
        "replica_power_w": replica_w,
        "facility_power_w": replica_w * pw.pue,
        "joules_per_token": replica_w / tps,
        "joules_per_request": replica_w / tps * p.output_tokens,
    }


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
        (:func:`serving_power`) plus ``system, model, tp, ep, pp, dtype``.
        ``df.attrs['units']`` names the units.

    Raises
    ------
    InfeasiblePlan
        If the weights do not fit.
    """
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    s = resolve(model, system, replica, catalog)
    mb = max_batch(s, input_tokens + output_tokens)
    bs = batch_grid(mb, replica.groups) if batches is None else [b for b in batches if b <= mb]
    rows = []
    pts = steady_states(s, bs, input_tokens, output_tokens, **kwargs)
    for b in bs:
        p = pts[int(b)]
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


def usd_per_million_tokens(gpus: int, tokens_per_s: float, usd_gpu_h: float) -> float:
    """``gpus x $/GPU-hour / (tokens/s x 3600) x 1e6`` [USD per million output tokens]."""
    return gpus * usd_gpu_h / (tokens_per_s * units.HOUR) * units.MEGA


def best_under_tpot(s: Setup, input_tokens: float, output_tokens: float, tpot_bound_s: float, **kwargs):
    """The operating point with the most output tokens/s whose TPOT stays within ``tpot_bound_s``
    (TPOT grows with batch: a grid, then bisection between the last batch within the bound and the
    first beyond it). None if even the smallest batch exceeds the bound.

    ``kwargs`` go to :func:`hnplan.planning.inference.steady.steady_state`.
    """
    ctx_max = kwargs.get("max_context_tokens") or input_tokens + output_tokens
    mb = max_batch(s, ctx_max)
    g = s.replica.groups
    cache: dict = {}

    def at(b):
        return steady_state(s, int(b), input_tokens, output_tokens, _cache=cache, **kwargs)

    lo, hi = None, None
    for b in batch_grid(mb, g, 16):
        p = at(b)
        if p.tpot_s <= tpot_bound_s:
            lo = (int(b), p)
        else:
            hi = int(b)
            break
    if lo is None:
        return None
    if hi is not None:
        a, z = lo[0] // g, hi // g
        while z - a > 1:
            mid = (a + z) // 2
            p = at(mid * g)
            if p.tpot_s <= tpot_bound_s:
                a, lo = mid, (mid * g, p)
            else:
                z = mid
    return lo[1]


def scoring_capacity(
    model,
    system,
    input_tokens: int,
    latency_bound_s: float,
    replica: Replica | None = None,
    catalog: Catalog | None = None,
    dtype: str = "bf16",
    *,
    kv_dtype: str | None = None,
    fixed: dict | None = None,
    overlap: bool = False,
    settings: dict | None = None,
) -> dict:
    """Short requests (scoring / classification: one forward pass over ``input_tokens``, no decode):
    the requests per second one node sustains with every request answered within ``latency_bound_s``.

    A replica runs back-to-back passes of ``k`` requests; at saturation a request waits for the pass in
    flight and then runs in the next, so its latency is at most ``2 t(k)``. The largest ``k`` with
    ``2 t(k) <= bound`` gives ``k / t(k)`` requests/s per replica; a node holds ``node_gpus /
    replica GPUs`` replicas. Without ``replica`` every layout of :func:`candidate_replicas` at ``dtype`` is tried,
    with ``kv_dtype``, the degrees ``fixed`` pins, ``overlap`` and the further :class:`Replica` ``settings``
    (``memory_utilization``, ``kv_budget_gib``, ``engine``), as :func:`operating_point` tries them.

    Returns
    -------
    dict
        ``requests_per_s_per_node``, ``requests_per_s_per_gpu``, ``batch``, ``latency_s`` (the bound
        reached, ``2 t(k)``), ``pass_s``, ``tp``, ``ep``, ``pp``, ``node_gpus``.

    Raises
    ------
    InfeasiblePlan
        If even one request alone exceeds the bound.
    """
    cat = catalog or load_catalog()
    m, sys_ = cat.model(model), cat.system(system)
    reps = (
        [replica]
        if replica is not None
        else candidate_replicas(m, sys_, dtype, kv_dtype, fixed, cat, overlap, **(settings or {}))
    )
    if not reps:
        raise InfeasiblePlan(f"no replica layout of {m.id} fits {sys_.id} at {dtype}")
    best, alone_s = None, math.inf  # alone_s: one request's least latency, 2 t(1), over the layouts
    unfit = None  # why a layout holds no request (its KV cache): the answer when no layout does
    for r in reps:
        s = resolve(m, sys_, r, cat)
        try:
            cap = max_batch(s, input_tokens) // r.groups
        except InfeasiblePlan as exc:  # another layout (a larger TP) may hold it
            unfit = exc
            continue
        k_lo, t_lo = 0, None
        for k in batch_grid(cap, 1, 20):
            t = prefill_pass(s, int(k), input_tokens)["time_s"]
            alone_s = min(alone_s, 2 * t)
            if 2 * t > latency_bound_s:
                break
            k_lo, t_lo = int(k), t
        if t_lo is None:
            continue
        per_gpu = k_lo * r.groups / t_lo / r.gpus
        if best is None or per_gpu > best["requests_per_s_per_gpu"]:
            best = {
                "tp": r.tp,
                "ep": r.ep,
                "pp": r.pp,
                "batch": k_lo * r.groups,
                "pass_s": t_lo,
                "latency_s": 2 * t_lo,
                "requests_per_s_per_gpu": per_gpu,
                "node_gpus": sys_.node_gpus,
                "requests_per_s_per_node": per_gpu * sys_.node_gpus,
            }
    if best is None and unfit is not None and not math.isfinite(alone_s):
        raise unfit
    if best is None:
        raise InfeasiblePlan(
            f"one request of {input_tokens:,} tokens of {m.id} on {sys_.id} takes {units.s_to_ms(alone_s / 2):.3g} ms "
            f"at the least, more than half the {format_given(units.s_to_ms(latency_bound_s))} ms bound (a request "
            "waits for the pass in flight, then runs in its own)"
        )
    return best


def operating_point(
    model,
    system,
    input_tokens: float,
    output_tokens: float,
    *,
    replica: Replica | None = None,
    batch: int | None = None,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    fixed: dict | None = None,
    overlap: bool = False,
    catalog: Catalog | None = None,
    settings: dict | None = None,
    kv_reserve: str = "full",
    **kwargs,
) -> dict:
    """One replica at a given batch, or at its maximum-throughput batch when ``batch`` is None.

    Without ``replica`` the layouts of :func:`candidate_replicas` are tried (``fixed`` pins degrees;
    ``settings`` sets further :class:`Replica` fields such as ``memory_utilization``, ``kv_budget_gib``):
    the one with the most output tokens/s per GPU, at the given batch or at each layout's maximum-throughput batch
    (Llama 3.1 405B in FP8 on GB200 at batch 64: TP 4 on four GPUs, TPOT 34 ms, not the first layout that holds the
    batch, TP 1 PP 4 at 70 ms).
    ``kv_reserve``: the KV cache each sequence in flight holds against memory, ``full`` (``I + O``, the
    default) or ``mean`` (``I + O/2``, a paged cache's average; :func:`.steady.reserved_context_tokens`).

    Returns
    -------
    dict
        The JSON shape of ``hnplan infer`` without ``--qps``: ``kv_reserve`` (as given), ``ttft_s, tpot_s, e2e_latency_s,
        tokens_per_s, tokens_per_s_per_gpu, tokens_per_s_per_user, max_batch, batch, replicas`` (1),
        ``gpus``, ``memory_per_gpu_gib``, ``hbm_gib``, ``usd_per_gpu_hour``,
        ``usd_per_million_tokens``, ``it_power_kw`` (rated), the load-dependent power and energy of
        :func:`serving_power` (``gpu_power_w`` per GPU, ``node_power_w``, ``joules_per_token``,
        ``joules_per_request``, ...), the layout, ``engine`` and ``breakdown_s``.

    Raises
    ------
    InfeasiblePlan
        If no layout fits (or the batch exceeds every layout's memory).
    InputError
        If ``kv_reserve`` is not ``full`` or ``mean``.
    """
    cat = catalog or load_catalog()
    m, sys_ = cat.model(model), cat.system(system)
    settings = settings or {}
    held = reserved_context_tokens(input_tokens, output_tokens, kv_reserve)  # refuses an unknown kv_reserve
    if kv_reserve != "full":  # "full", I + O, is steady_state's own default
        kwargs["max_context_tokens"] = held
    if replica is None:
        resolve(m, sys_, Replica(dtype=dtype, kv_dtype=kv_dtype, **settings), cat)
    reps = (
        [replica]
        if replica is not None
        else candidate_replicas(m, sys_, dtype, kv_dtype, fixed, cat, overlap, **settings)
    )
    best, err = None, None
    for r in reps:
        s = resolve(m, sys_, r, cat)
        try:
            p = (
                max_throughput_point(s, input_tokens, output_tokens, **kwargs)
                if batch is None
                else steady_state(s, batch, input_tokens, output_tokens, **kwargs)
            )
        except InfeasiblePlan as exc:
            err = exc
            continue
        if best is None or p.tokens_per_s_per_gpu > best[1].tokens_per_s_per_gpu:
            best = (r, p)
    if best is None:
        raise err or InfeasiblePlan(f"no replica layout of {m.id} fits {sys_.id}")
    r, p = best
    energy = serving_power(resolve(m, sys_, r, cat), p)
    fabric = needs_scaleout(sys_, r.gpus)  # a replica within a domain needs no backend network
    rate = usd_per_gpu_hour(sys_, None, cat, scaleout=fabric)
    it_w, _ = attributed_power_w(sys_, r.gpus, cat, scaleout=fabric)
    return {
        "model": m.id,
        "system": sys_.id,
        "tp": r.tp,
        "ep": r.ep,
        "pp": r.pp,
        "dtype": r.dtype,
        "kv_dtype": r.kv,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "kv_reserve": kv_reserve,
        "batch": p.batch,
        "max_batch": p.max_batch,
        "ttft_s": p.ttft_s,
        "tpot_s": p.tpot_s,
        "e2e_latency_s": p.e2e_s,
        "tokens_per_s": p.tokens_per_s,
        "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
        "tokens_per_s_per_user": 1.0 / p.tpot_s,
        "replicas": 1,
        "gpus": r.gpus,
        "memory_per_gpu_gib": units.to_GiB(p.memory_per_gpu_bytes),
        "hbm_gib": units.to_GiB(p.hbm_bytes),
        "usd_per_gpu_hour": rate,
        "usd_per_million_tokens": usd_per_million_tokens(r.gpus, p.tokens_per_s, rate),
        "it_power_kw": units.w_to_kw(it_w),
        **energy,
        "engine": r.engine,
        "breakdown_s": dict(p.breakdown_s),
        **({"cost_note": f"n/a: {price_gap(sys_, cat)}"} if rate != rate else {}),
        **kv_budget_note(resolve(m, sys_, r, cat)),
    }


def kv_budget_note(s: Setup) -> dict:
    """``{"kv_budget_note": ...}`` when :attr:`Replica.kv_budget_gib` asks for more KV cache than the visible
    HBM holds after the weights, workspace and runtime overheads (:func:`.core.kv_budget_bytes` caps it there,
    where vLLM's ``kv_cache_memory_bytes`` would fail to allocate); ``{}`` otherwise."""
    asked = s.replica.kv_budget_gib
    if asked is None:
        return {}
    held_bytes = kv_budget_bytes(s)  # the budget asked, capped at what the HBM holds after the rest
    if units.GiB_to_bytes(asked) <= held_bytes:
        return {}
    held = units.to_GiB(held_bytes)
    return {
        "kv_budget_note": f"--kv-budget-gib {asked:,g} is more than the {held:,.1f} GiB per GPU left after weights, "
        "workspace and overheads; the KV cache holds that"
    }


def design_frontiers(
    model,
    systems,
    input_tokens: float,
    output_tokens: float,
    dtype: str = "bf16",
    overlap: bool = False,
    catalog: Catalog | None = None,
    engine: str | None = None,
) -> pd.DataFrame:
    """The throughput-latency frontier of each design's best layout (the one with the most output
    tokens/s per GPU at its maximum-throughput point), one DataFrame (:func:`frontier` columns plus
    ``layout``). A design that cannot hold the model keeps one row with the reason in ``status``.
    ``engine``: a serving engine id (:attr:`Replica.engine`). ``dtype`` and ``engine`` may be mappings
    system id -> value (:func:`~hnplan.planning.inference.core.per_system`): each design served in its
    own deployment precision and engine (CloudMatrix 384 in INT8 with CloudMatrix-Infer, GPUs in FP8)."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    cat = catalog or load_catalog()
    parts = []
    for sys_id in systems:
        try:
            dt, eng = per_system(dtype, sys_id) or "bf16", per_system(engine, sys_id)
            settings: dict = {"engine": eng} if eng else {}
            best = operating_point(
                model, sys_id, input_tokens, output_tokens, dtype=dt, overlap=overlap, catalog=cat, settings=settings
            )
            r = Replica(best["tp"], best["ep"], best["pp"], dt, overlap=overlap, **settings)
            df = frontier(model, sys_id, r, input_tokens, output_tokens, catalog=cat)
            df["layout"] = f"TP{r.tp} EP{r.ep} PP{r.pp}"
            df["status"] = "ok"
        except HnplanError as exc:
            df = pd.DataFrame([{"system": cat.system(sys_id).id, "status": str(exc)}])
        parts.append(df)
    out = pd.concat(parts, ignore_index=True)
    out.attrs["units"] = parts[0].attrs.get("units", {}) if parts else {}
    return out
