"""Replicas, GPUs, power and $ per million tokens for a request rate under TTFT / TPOT SLOs.

For each candidate replica (TP / EP / PP degrees that divide the model and fit the scale-up domain)
and each batch ``B`` on a grid up to the memory limit, the steady state of
:func:`hnplan.planning.inference.steady.steady_state` gives TPOT and the time a request holds one of the
``B`` slots, ``S = O x t_iter``. A replica then serves requests like an M/G/B queue: arrivals at
``lambda / n`` per replica wait for a free slot. The wait uses Erlang's C formula for M/M/c scaled by
``(1 + cs^2) / 2`` (the Lee-Longton / Allen-Cunneen approximation for M/G/c, with ``cs^2`` the squared
coefficient of variation of ``S``, 0 for fixed lengths):

    TTFT = W_q + t_iter / 2 + t_prefill(1 request)

The smallest ``n`` with ``lambda / n < B / S`` and TTFT within its SLO is the replica count; among
every (replica, batch) whose TPOT meets its SLO the one with the fewest GPUs wins (then the lowest
TPOT). A tighter SLO only removes candidates, so it never needs fewer GPUs.

Disaggregation (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et al. ISCA 2024): a prefill pool
(M/D/1 per replica, service = prefill time per request) and a decode pool (no prefill in its
iterations) sized separately; TTFT adds the KV transfer from the prefill to the decode GPUs.

References
----------
.. [1] A. K. Erlang (1917); Kleinrock, "Queueing Systems Vol. 1", 1975, Sec. 3.5 (M/M/c, Erlang C).
.. [2] Lee & Longton, "Queueing processes associated with airline passenger check-in", Operational
   Research Quarterly 10, 1959 (W(M/G/c) ~ (1 + cs^2)/2 W(M/M/c)).
.. [3] Pollaczek-Khinchine mean waiting time of M/G/1 (Kleinrock 1975, Sec. 5.6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.comm import sendrecv_time, system_links
from hnplan.comm.topology import max_scaleout_gpus, whole_units
from hnplan.errors import HnplanError, InfeasiblePlan, InputError, check_choice
from hnplan.memory import kv_cache_bytes_per_token, kv_cache_tokens
from hnplan.planning.inference.capacity_text import capacity_verdict  # noqa: F401  (public here too)
from hnplan.planning.inference.core import (
    DEFAULT_MAX_BATCHED_TOKENS,
    Replica,
    Setup,
    candidate_replicas,
    max_batch,
    per_system,
    resolve,
)
from hnplan.planning.inference.points import (
    attributed_power_w,
    kv_in_domain,
    needs_scaleout,
    serving_power,
    usd_per_gpu_hour,
    usd_per_million_tokens,
)
from hnplan.planning.inference.queueing import (  # noqa: F401  (Traffic, erlang_c, mgc_wait_s: public here too)
    TTFT_QUANTILES,
    Traffic,
    erlang_c,
    md1_wait_quantile_s,
    mgc_wait_quantile_s,
    mgc_wait_s,
)
from hnplan.planning.inference.steady import (
    batch_grid,
    prefill_pass,
    steady_state,
    time_decode_steps,
)

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class CapacityPlan:
    """The best configuration of one design for a request rate. Times [s]; power [W]; cost [USD]."""

    system: str
    model: str
    replica: Replica
    batch: int
    replicas: int
    gpus: int
    qps: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tokens_per_s_per_gpu: float
    utilisation: float
    max_batch: int
    it_power_w: float
    facility_power_w: float
    usd_per_gpu_hour: float
    usd_per_million_tokens: float
    disaggregated: bool = False
    prefill_replica: Replica | None = None
    prefill_replicas: int = 0
    ttft_quantile: str = "mean"  # what ttft_s is: the mean, or the percentile the bound was judged at
    ttft_mean_s: float | None = None  # the mean TTFT where ttft_s is a percentile
    kv_transfer_s: float = 0.0
    searched: int = 0
    feasible: int = 0
    detail: dict = field(default_factory=dict)
    energy: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON shape of ``hnplan infer --qps``."""
        r = self.replica
        d = {
            "model": self.model,
            "system": self.system,
            "tp": r.tp,
            "ep": r.ep,
            "pp": r.pp,
            "dtype": r.dtype,
            "kv_dtype": r.kv,
            "gpus_per_replica": r.gpus,
            "batch": self.batch,
            "max_batch": self.max_batch,
            "qps": self.qps,
            "replicas": self.replicas,
            "gpus": self.gpus,
            "ttft_s": self.ttft_s,
            "ttft_quantile": self.ttft_quantile,
            **({"ttft_mean_s": self.ttft_mean_s} if self.ttft_mean_s is not None else {}),
            "tpot_s": self.tpot_s,
            "e2e_latency_s": self.e2e_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "utilisation": self.utilisation,
            "it_power_kw": units.w_to_kw(self.it_power_w),
            "facility_power_kw": units.w_to_kw(self.facility_power_w),
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "disaggregated": self.disaggregated,
            "engine": r.engine,
            "searched": self.searched,
            "feasible": self.feasible,
            **{
                k: self.energy[k]
                for k in ("gpu_utilisation", "gpu_power_w", "node_power_w", "joules_per_token", "joules_per_request")
                if k in self.energy
            },
        }
        if self.disaggregated and self.prefill_replica is not None:
            p = self.prefill_replica
            d.update(
                prefill={
                    "tp": p.tp,
                    "ep": p.ep,
                    "pp": p.pp,
                    "gpus_per_replica": p.gpus,
                    "replicas": self.prefill_replicas,
                },
                kv_transfer_s=self.kv_transfer_s,
                decode_replicas=self.replicas - self.prefill_replicas,
            )
        return d


def _min_replicas(qps: float, ttft_fn, n_min: int, ttft_slo_s: float, cap: int = 1 << 20) -> int | None:
    """Smallest n >= n_min with ttft_fn(n) <= slo (ttft_fn decreasing in n), or None."""
    if ttft_fn(n_min) <= ttft_slo_s:
        return n_min
    lo = hi = n_min  # lo: a count that misses the SLO
    while ttft_fn(hi) > ttft_slo_s:
        if hi >= cap:
            return None
        lo, hi = hi, min(2 * hi, cap)  # the cap itself is tried before giving up
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ttft_fn(mid) <= ttft_slo_s else (mid, hi)
    return hi


def _grid_points(s: Setup, tr: dict, mbt: int, disaggregated: bool, chunked_prefill: int | None = None):
    """Steady states over the batch grid of one replica (skipping what does not fit or run)."""
    try:
        mb = max_batch(s, tr["context_p99"])
    except InfeasiblePlan:
        return []
    cache: dict = {}
    out = []
    grid = batch_grid(mb, s.replica.groups, 12)
    shape = dict(context_tokens=tr["context_mean"], disaggregated=disaggregated)
    time_decode_steps(s, grid, tr["input_mean"], tr["output_mean"], cache, **shape)  # the grid's decode steps at once
    for b in grid:
        try:
            out.append(
                steady_state(
                    s,
                    int(b),
                    tr["input_mean"],
                    tr["output_mean"],
                    context_tokens=tr["context_mean"],
                    max_context_tokens=tr["context_p99"],
                    max_batched_tokens=mbt,
                    disaggregated=disaggregated,
                    chunked_prefill=chunked_prefill,
                    _cache=cache,
                )
            )
        except InfeasiblePlan:
            break  # a larger batch overflows the prefill chunk too
    return out


def kv_transfer_s(s_prefill: Setup, s_decode: Setup, input_tokens: float, same_domain: bool) -> float:
    """Time to move one request's KV cache from the prefill to the decode replica [s]: each prefill GPU
    sends its share over a point-to-point link: scale-up where ``same_domain``
    (:func:`~hnplan.planning.inference.points.kv_in_domain`), else its NIC share."""
    kept = kv_cache_tokens(s_prefill.model, input_tokens)  # sliding-window layers: their window only
    total = kept * kv_cache_bytes_per_token(s_prefill.model, s_prefill.replica.kv, 1)
    links = system_links(s_decode.design)
    tier = links.scaleup if same_domain else links.scaleout
    return sendrecv_time(total / s_prefill.replica.gpus, tier.bw_Bps, tier.alpha_s)


def plan_for_rate(
    model,
    system,
    qps: float,
    traffic: Traffic,
    ttft_slo_s: float,
    tpot_slo_s: float,
    *,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    fixed: dict | None = None,
    disaggregated: bool = False,
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
    chunked_prefill: int | None = None,
    overlap: bool = False,
    catalog: Catalog | None = None,
    settings: dict | None = None,
    ttft_quantile: str = "mean",
) -> CapacityPlan:
    """The configuration of one design that meets the SLOs at ``qps`` with the fewest GPUs.

    Parameters
    ----------
    model, system : id, path or catalog entry
    qps : float
        Request arrival rate (Poisson) [requests/s].
    traffic : Traffic
        Input / output lengths (fixed or sampled).
    ttft_slo_s, tpot_slo_s : float
        Time-to-first-token bound at ``ttft_quantile`` and mean time-per-output-token bound [s].
    dtype, kv_dtype : str
    fixed : dict, optional
        Pin ``tp``, ``ep``, ``pp`` (else searched, :func:`candidate_replicas`).
    disaggregated : bool
        Separate prefill and decode pools.
    chunked_prefill : int, optional
        Prefill chunk per iteration [tokens] (see :func:`~hnplan.planning.inference.steady.steady_state`).
    overlap : bool
        Overlap collectives with compute (:attr:`~hnplan.planning.inference.core.Replica.overlap`).
    settings : dict, optional
        Further :class:`~hnplan.planning.inference.core.Replica` fields (``memory_utilization``,
        ``kv_budget_gib``, ``engine``).
    ttft_quantile : {"mean", "p50", "p90", "p95", "p99"}
        The TTFT judged: the mean (default) or a percentile, its queueing wait at that quantile
        (:func:`~hnplan.planning.inference.queueing.mgc_wait_quantile_s`; disaggregated, the decode and prefill
        pools' quantiles added, which bounds the quantile of their sum from above). TPOT stays the mean: the
        model's iteration time does not vary from step to step.

    Returns
    -------
    CapacityPlan

    Raises
    ------
    InputError
        For a non-positive rate or SLO, or a dtype the accelerator lacks.
    InfeasiblePlan
        If no configuration meets the SLOs (the message names the best TPOT reached and, of the points within
        the TPOT bound, the best TTFT without queueing), or the ones that
        do need more GPUs than one scale-out fabric joins
        (:func:`~hnplan.comm.topology.max_scaleout_gpus`; the message says so).
    """
    if qps <= 0 or ttft_slo_s <= 0 or tpot_slo_s <= 0:
        raise InputError(f"qps and SLOs must be positive; got qps={qps}, ttft={ttft_slo_s}, tpot={tpot_slo_s}")
    check_choice("ttft_quantile", ttft_quantile, tuple(TTFT_QUANTILES))
    q = TTFT_QUANTILES[ttft_quantile]
    cat = catalog or load_catalog()
    m, sys_ = cat.model(model), cat.system(system)
    settings = settings or {}
    resolve(m, sys_, Replica(dtype=dtype, kv_dtype=kv_dtype, **settings), cat)  # checks with a clear message
    tr = traffic.summary()
    cands = candidate_replicas(m, sys_, dtype, kv_dtype, fixed, cat, overlap, **settings)
    if not cands:
        raise InfeasiblePlan(f"no replica layout of {m.id} fits {sys_.id} at {dtype}")
    o_mean = tr["output_mean"]
    best, searched, feasible, best_tpot = None, 0, 0, math.inf
    best_ttft = math.inf  # of the points within the TPOT bound, without queueing: what more replicas tend to
    fabric_gpus = max_scaleout_gpus(cat.design(sys_))  # the most GPUs one scale-out fabric joins (priced as one)
    beyond = 0  # configurations that meet the SLOs per replica but need more GPUs than that
    prefill_opts = []
    if disaggregated:
        for r in cands:
            sp = resolve(m, sys_, r, cat)
            t1 = prefill_pass(sp, 1, tr["input_mean"])["time_s"]
            n_pf = max(1, int(max_batched_tokens // tr["input_mean"]))
            # the replica's attention groups prefill in parallel: one request every per_req / groups seconds
            per_req = prefill_pass(sp, n_pf, tr["input_mean"])["time_s"] / n_pf / r.groups
            prefill_opts.append((sp, t1, per_req))
    for r in cands:
        s = resolve(m, sys_, r, cat)
        # the first token without queueing: the point's own (prefill, decode step, host time), or disaggregated a
        # prefill pool's pass and the KV transfer to this replica
        # each prefill option's KV transfer to this replica (the same for every batch of it)
        xfers = [
            kv_transfer_s(sp, s, tr["input_mean"], kv_in_domain(s.system, sp.replica.gpus, r.gpus))
            for sp, _, _ in prefill_opts
        ]
        first_s = min(t1 + x for (_, t1, _), x in zip(prefill_opts, xfers)) if disaggregated else None
        for p in _grid_points(s, tr, max_batched_tokens, disaggregated, chunked_prefill):
            searched += 1
            best_tpot = min(best_tpot, p.tpot_s)
            if p.tpot_s > tpot_slo_s:
                continue
            best_ttft = min(best_ttft, p.ttft_s if first_s is None else first_s)
            hold = o_mean * p.tpot_s  # seconds a request holds a slot
            n_min = math.floor(qps * hold / p.batch) + 1
            if n_min * r.gpus > fabric_gpus and p.ttft_s <= ttft_slo_s:
                beyond += 1
                continue
            if not disaggregated:

                def ttft(n, p=p, hold=hold):
                    return mgc_wait_quantile_s(qps / n, p.batch, hold, tr["output_cs2"], q) + p.ttft_s

                n = _min_replicas(qps, ttft, n_min, ttft_slo_s, cap=max(n_min, fabric_gpus // r.gpus))
                if n is None:
                    # the queue's wait vanishes with more replicas: a pass within the SLO is held up by the fabric
                    beyond += p.ttft_s <= ttft_slo_s
                    continue
                mean = mgc_wait_s(qps / n, p.batch, hold, tr["output_cs2"]) + p.ttft_s
                cand = (n * r.gpus, p.tpot_s, dict(r=r, p=p, n=n, ttft=ttft(n), ttft_mean=mean))
            else:
                cand = _disaggregated(qps, p, r, prefill_opts, xfers, tr, ttft_slo_s, n_min, hold, q)
                if cand is None:
                    continue
            if cand[0] > fabric_gpus:
                beyond += 1
                continue
            feasible += 1
            if best is None or cand[:2] < best[:2]:
                best = cand
    if best is None and beyond:
        raise InfeasiblePlan(
            f"{m.id} at {qps:g} requests/s on {sys_.id} needs more GPUs than one scale-out fabric joins "
            f"({fabric_gpus:,}; {beyond} configurations meet TTFT <= {units.s_to_ms(ttft_slo_s):,.4g} ms and "
            f"TPOT <= {units.s_to_ms(tpot_slo_s):,.4g} ms per replica); plan several clusters, each for its "
            "share of the rate"
        )
    if searched == 0:  # no layout runs one batch: why (its KV cache holds not one sequence), not "inf ms"
        for r in reversed(cands):  # the largest layouts last in the search: the reason of the one nearest to fit
            try:
                max_batch(resolve(m, sys_, r, cat), tr["context_p99"])
            except InfeasiblePlan as exc:
                raise InfeasiblePlan(f"no configuration of {m.id} on {sys_.id} runs one batch: {exc}") from None
        raise InfeasiblePlan(f"no configuration of {m.id} on {sys_.id} runs one batch of this traffic")
    if best is None:
        # within the TPOT bound, the TTFT bound is what failed: the least TTFT there, which no replica count beats
        ttft_said = (
            f"best TTFT {units.s_to_ms(best_ttft):,.4g} ms without queueing, of those within the TPOT bound; "
            if math.isfinite(best_ttft)
            else ""
        )
        raise InfeasiblePlan(
            f"no configuration of {m.id} on {sys_.id} meets TTFT <= {units.s_to_ms(ttft_slo_s):,.4g} ms and "
            f"TPOT <= {units.s_to_ms(tpot_slo_s):,.4g} ms at {qps:g} requests/s ({ttft_said}best TPOT reached "
            f"{units.s_to_ms(best_tpot):.1f} ms over {searched} candidates)"
        )
    return _finish({**best[2], "quantile": ttft_quantile}, m, sys_, qps, tr, disaggregated, searched, feasible, cat)


def _disaggregated(qps, p, r, prefill_opts, xfers, tr, ttft_slo_s, n_d_min, hold, q=None):
    """Best prefill pool for one decode (replica, batch), ``xfers`` each prefill option's KV transfer to it [s],
    the waits at quantile ``q`` (None: the means); returns (gpus, tpot, detail) or None."""
    best = None
    # the decode pool's queueing wait depends on its replicas alone: once per count, not once per prefill option
    waits = {n_d: mgc_wait_quantile_s(qps / n_d, p.batch, hold, tr["output_cs2"], q) for n_d in (n_d_min, 2 * n_d_min)}
    for (sp, t1, per_req), xfer in zip(prefill_opts, xfers):
        for n_d, wd in waits.items():
            budget = ttft_slo_s - wd - xfer - t1
            if budget <= 0:
                continue

            def ttft_p(n, per_req=per_req, t1=t1):
                # M/D/1 (Pollaczek-Khinchine, [3]_): W = rho S / (2 (1 - rho)) at the mean, the pass itself t1
                return md1_wait_quantile_s(qps / n, per_req, q) + t1

            n_p = _min_replicas(qps, ttft_p, math.floor(qps * per_req) + 1, ttft_slo_s - wd - xfer)
            if n_p is None:
                continue
            gpus = n_p * sp.replica.gpus + n_d * r.gpus
            if best is None or gpus < best[0]:
                best = (
                    gpus,
                    p.tpot_s,
                    dict(
                        r=r,
                        p=p,
                        n=n_d,
                        ttft=ttft_p(n_p) + wd + xfer,
                        ttft_mean=md1_wait_quantile_s(qps / n_p, per_req, None)
                        + t1
                        + mgc_wait_s(qps / n_d, p.batch, hold, tr["output_cs2"])
                        + xfer,
                        prefill=sp.replica,
                        n_p=n_p,
                        xfer=xfer,
                    ),
                )
    return best


def _finish(d, m, sys_, qps, tr, disaggregated, searched, feasible, cat) -> CapacityPlan:
    r, p, n = d["r"], d["p"], d["n"]
    n_p = d.get("n_p", 0)
    gpus = n * r.gpus + n_p * (d["prefill"].gpus if disaggregated else 0)
    tokens_per_s = qps * tr["output_mean"]
    # the backend network only where a replica spans domains or KV caches cross them (needs_scaleout)
    fabric = needs_scaleout(sys_, r.gpus, d["prefill"].gpus if disaggregated else None)
    it_w, fac_w = attributed_power_w(sys_, gpus, cat, scaleout=fabric)
    rate = usd_per_gpu_hour(sys_, gpus, cat, scaleout=fabric)
    util = qps * tr["output_mean"] * p.tpot_s / (n * p.batch)
    # every GPU of the plan at the decode replicas' utilisation x their slot occupancy (prefill pools alike)
    energy = serving_power(resolve(m, sys_, r, cat), p, load=util, gpus=gpus, scaleout=fabric)
    energy["joules_per_token"] = energy["replica_power_w"] / tokens_per_s
    energy["joules_per_request"] = energy["joules_per_token"] * tr["output_mean"]
    return CapacityPlan(
        system=sys_.id,
        model=m.id,
        replica=r,
        batch=p.batch,
        replicas=n + n_p,
        gpus=gpus,
        qps=qps,
        ttft_s=d["ttft"],
        tpot_s=p.tpot_s,
        e2e_s=d.get("ttft_mean", d["ttft"]) + (tr["output_mean"] - 1) * p.tpot_s,  # a mean: the mean TTFT's
        tokens_per_s_per_gpu=tokens_per_s / gpus,
        utilisation=util,
        max_batch=p.max_batch,
        it_power_w=it_w,
        facility_power_w=fac_w,
        usd_per_gpu_hour=rate,
        usd_per_million_tokens=usd_per_million_tokens(gpus, tokens_per_s, rate),
        disaggregated=disaggregated,
        prefill_replica=d.get("prefill"),
        prefill_replicas=n_p,
        ttft_quantile=d.get("quantile", "mean"),
        ttft_mean_s=d.get("ttft_mean") if d.get("quantile", "mean") != "mean" else None,
        kv_transfer_s=d.get("xfer", 0.0),
        searched=searched,
        feasible=feasible,
        energy=energy,
    )


def purchase_columns(gpus, usd_per_million_tokens, design) -> dict:
    """What a deployment of ``gpus`` GPUs buys where whole units (8-GPU servers, 72-GPU racks) must be bought:
    ``gpus_bought`` (the fewest whole units that hold them) and, where that is more than the GPUs used,
    ``usd_per_million_tokens_bought`` (the price per million output tokens times ``gpus_bought / gpus``: the idle
    GPUs paid for when nothing else runs on them). Empty where ``gpus`` is not a count (a row with no plan).
    ``design``: the :class:`~hnplan.catalog.design.Design` whose units are bought
    (:func:`hnplan.comm.topology.whole_units`, as ``tco`` buys them).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> purchase_columns(1, 1.135, cat.design("gb200-nvl72"))  # one GPU of a 72-GPU rack: 72 x $1.135
    {'gpus_bought': 72, 'usd_per_million_tokens_bought': 81.72}
    >>> purchase_columns(16, 2.0, cat.design("hgx-h100-ib-ndr"))
    {'gpus_bought': 16}
    """
    if not isinstance(gpus, int | float) or not gpus >= 1 or gpus != int(gpus):
        return {}
    gpus = int(gpus)
    bought = whole_units(design, gpus)
    out: dict = {"gpus_bought": bought}
    if bought > gpus and isinstance(usd_per_million_tokens, float) and math.isfinite(usd_per_million_tokens):
        out["usd_per_million_tokens_bought"] = usd_per_million_tokens * bought / gpus
    return out


def gpus_vs_rate(
    model,
    systems,
    rates,
    traffic: Traffic,
    ttft_slo_s: float,
    tpot_slo_s: float,
    catalog: Catalog | None = None,
    **kwargs,
) -> pd.DataFrame:
    """GPUs, power and $ per million tokens per design over request rates (one row per pair; a design
    that cannot meet the SLOs keeps its row with the reason in ``status``), with what the whole units hold
    (:func:`purchase_columns`: ``gpus_bought``, ``usd_per_million_tokens_bought`` where they hold more). ``dtype`` given as
    a mapping system id -> value (``dtype={"cloudmatrix-384": "int8", "default": "fp8"}``) applies per
    design (:func:`~hnplan.planning.inference.core.per_system`); ``engine`` (an engine id or such a
    mapping) joins each design's ``settings``."""
    import pandas as pd  # here, not at the top: a command that builds no frame needs no pandas

    cat = catalog or load_catalog()
    rows = []
    for sys_id in systems:
        kw = dict(kwargs)
        if "dtype" in kw:
            kw["dtype"] = per_system(kw["dtype"], sys_id) or "bf16"
        eng = per_system(kw.pop("engine", None), sys_id)
        if eng:
            kw["settings"] = {**(kw.get("settings") or {}), "engine": eng}
        for q in rates:
            try:
                d = plan_for_rate(model, sys_id, float(q), traffic, ttft_slo_s, tpot_slo_s, catalog=cat, **kw).to_dict()
                d.update(purchase_columns(d["gpus"], d["usd_per_million_tokens"], cat.design(sys_id)))
                d["status"] = "ok"
            except HnplanError as exc:
                d = {"system": cat.system(sys_id).id, "qps": float(q), "status": str(exc)}
            rows.append(d)
    df = pd.DataFrame(rows)
    df.attrs["units"] = {
        "qps": "requests/s",
        "gpus": "GPUs",
        "gpus_bought": "GPUs",
        "usd_per_million_tokens": "USD per 1e6 output tokens",
        "usd_per_million_tokens_bought": "USD per 1e6 output tokens",
        "ttft_s": "s",
        "tpot_s": "s",
        "facility_power_kw": "kW",
    }
    return df
