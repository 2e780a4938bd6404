"""Expert parallelism in the training step: the dispatch / combine all-to-all of the busiest EP rank and
the share of it a stack can hide in the pipeline schedule.

References
----------
.. [5] DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437: Sec. 3.2.1 (DualPipe), 3.2.2
   (node-limited routing; IB and NVLink traffic overlapped), 3.3.2 (FP8 dispatch, bf16 combine).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan.comm.messages import ep_token_bytes
from hnplan.planning.training.collectives import collective_s
from hnplan.planning.training.components import (
    Job,
    _col,
    busiest_rank_load,
    overlapped_comm,
    recompute_is,
    with_etp,
)
from hnplan.vectorise import memo, on_distinct

if TYPE_CHECKING:
    import pandas as pd


def ep_overlap_share(df: pd.DataFrame, num_microbatches, stage: str = "first") -> np.ndarray:
    """Share of a stage's micro-batch passes that have a partner pass to hide an expert all-to-all
    behind [0-1]: Megatron-Core's 1F1B all-to-all overlap runs one micro-batch's forward beside another's
    backward (``--overlap-moe-expert-parallel-comm``), as DualPipe pairs forward and backward chunks
    (arXiv:2412.19437 Sec. 3.2.1, Fig. 4-5); the stage's warm-up forwards and cool-down backwards run
    alone. Warm-up passes follow Megatron-Core's schedules
    (``megatron/core/pipeline_parallel/schedules.py``): ``pp - 1`` without virtual stages (the first
    stage's count, for every stage), ``2 (pp - 1 - r) + (v - 1) pp + 1`` chunk passes with ``v`` on
    pipeline rank ``r``, out of ``m v``: with the all-to-all overlap the interleaved schedule runs one
    more warm-up forward so that every 1F1B step pairs independent passes (``get_pp_rank_microbatches``:
    ``num_warmup_microbatches + 1`` when ``overlap_moe_expert_parallel_comm``). ``stage``: ``first``
    (rank 0), ``middle`` (the fullest middle stage, rank ``pp - 2``, :func:`~hnplan.compute.layout.
    stage_layer_range`) or ``last`` (rank ``pp - 1``).

    >>> import pandas as pd
    >>> float(ep_overlap_share(pd.DataFrame(dict(pp=[16], virtual_stages=[1])), 120)[0])  # 1 - 15/120
    0.875
    >>> float(ep_overlap_share(pd.DataFrame(dict(pp=[8], virtual_stages=[4])), 128)[0])   # 1 - 39/512
    0.923828125
    >>> float(ep_overlap_share(pd.DataFrame(dict(pp=[4], virtual_stages=[4])), 8, "last")[0])   # 1 - 13/32
    0.59375
    """
    pp, v = _col(df, "pp"), _col(df, "virtual_stages")
    rank = {"first": 0 * pp, "middle": np.maximum(pp - 2, 0), "last": pp - 1}[stage]
    warm = np.where(v > 1, 2 * (pp - 1 - rank) + (v - 1) * pp + 1, pp - 1)
    return np.clip(1.0 - warm / (np.asarray(num_microbatches, dtype=float) * v), 0.0, 1.0)


def ep_overlap_fraction(job: Job, df: pd.DataFrame):
    """The stack's share of the schedule-allowed expert all-to-all that its overlap hides, per plan [0-1]:
    ``ep_comm_overlap_fraction`` where the plan's EP group sits inside one scale-up domain,
    ``ep_comm_overlap_fraction_scale_out`` where it spans several (the dispatch and combine cross the
    scale-out network; :meth:`Job.group` places the ``ep`` ranks ``etp`` apart). A float when the two agree
    (or the stack gives no scale-out value), else an array aligned with ``df``.

    No catalog stack gives a scale-out share (the runs point to a share per chip family: Hopper's 0.36 from the
    one with-and-without pair, EP 32 across four H100 servers, ``data/stacks/megatron-core-ep-overlap.yaml``;
    Blackwell near the whole share both inside the GB200 NVL72 domain and across B200 servers, row
    ``mbridge2604-b200-deepseek-v3-256-fp8-ep32``); a user's stack may set one.
    """
    ch = job.choices
    inside, out = ch.ep_comm_overlap_fraction, ch.ep_comm_overlap_fraction_scale_out
    if out is None or out == inside or job.model.moe is None:
        return inside
    (spans,) = on_distinct(
        with_etp(df),
        ["ep", "etp"],
        lambda u: (_col(memo(u, ["ep", "etp"], lambda e, s: {"d": _domains(job, e, s)[1]}), "d") > 1,),
    )
    return np.where(spans, out, inside)


def ep_paired_exposed(t_ep, t_fwd, t_bwd, t_wgrad, share, slowdown: float):
    """Exposed expert all-to-all of a stage's micro-batch under the 1F1B all-to-all overlap [s]: each
    communication phase hides only behind the compute of the partner pass that runs beside it.

    Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-comm``;
    ``megatron/core/models/common/model_chunk_schedule_plan.py`` ``schedule_layer_1f1b``) runs, per
    layer, one micro-batch's forward beside another's backward on a compute and a communication stream:
    the forward's dispatch and combine beside the partner's MLP and attention data-gradient backward,
    the backward's combine and dispatch (the mirrors) beside the partner's attention and MLP forward
    and the weight gradients it delays there (``--delay-wgrad-compute``: ``mlp.dw`` after the backward
    dispatch, ``attn.dw`` beside the next combine). So the forward half of the all-to-all hides
    behind at most ``t_bwd - t_wgrad`` and the backward half behind at most ``t_fwd + t_wgrad``
    (a stage's layers summed: per layer the same where a stage's layers are alike, an upper side of
    what hides where dense and MoE layers mix), each
    :func:`~hnplan.planning.training.components.overlapped_comm` at the fraction ``share`` (the
    passes that have a partner, :func:`ep_overlap_share`, times the stack's
    ``ep_comm_overlap_fraction``) and the stack's GEMM slowdown. DualPipe pairs the chunks alike
    (arXiv:2412.19437 Sec. 3.2.1, Fig. 4). The two halves are equal: the backward moves the forward's
    bytes back (:func:`ep_comm_per_microbatch`).

    Parameters
    ----------
    t_ep : array_like
        All-to-all time of the stage's micro-batch, all passes, before any overlap [s].
    t_fwd, t_bwd, t_wgrad : array_like
        The stage's forward, backward (weight gradient included) and weight-gradient compute of one
        micro-batch [s].
    share : array_like
        Share of each half that can run beside its partner [0-1].
    slowdown : float
        Slowdown of the compute beside the all-to-all (:func:`hnplan.planning.training.components.overlap_slowdown`
        of class ``ep``: the stack's ``overlap_gemm_slowdown`` or the SM share of ``overlap_comm_ctas["ep"]``).

    Returns
    -------
    numpy.ndarray
        Exposed time [s], broadcast shape of the inputs.

    >>> # 2 ms of all-to-all; forward 1 ms, backward 2 ms of which 0.5 ms weight gradient; all paired, no slowdown:
    >>> # the forward half (1 ms) hides behind 1.5 ms, the backward half (1 ms) behind 1.5 ms: nothing exposed
    >>> float(ep_paired_exposed(2e-3, 1e-3, 2e-3, 0.5e-3, 1.0, 0.0))
    0.0
    >>> # 4 ms of all-to-all: 0.5 ms of each half stays out
    >>> round(float(ep_paired_exposed(4e-3, 1e-3, 2e-3, 0.5e-3, 1.0, 0.0)), 9)
    0.001
    """
    half = 0.5 * np.asarray(t_ep, dtype=float)
    dgrad = np.asarray(t_bwd, dtype=float) - t_wgrad
    return overlapped_comm(half, dgrad, share, slowdown) + overlapped_comm(
        half, t_fwd + np.asarray(t_wgrad), share, slowdown
    )


def ep_comm_per_microbatch(job: Job, df: pd.DataFrame, moe_layers) -> np.ndarray:
    """Expert-parallel all-to-all of one micro-batch [s]: per MoE layer a dispatch and a combine forward,
    their mirrors backward (the combine's backward is a dispatch, the dispatch's a combine), and the
    forward pair again with full recomputation.

    A rank holds ``T = b s / (cp tp)`` tokens, each sent to ``k`` experts: a pairwise all-to-all of
    ``T k`` token copies over the EP group (``ep`` ranks spaced ``etp`` apart: the expert layers order
    the ``tp cp dp`` ranks ETP innermost, then EP, Megatron-Core's expert ``RankGenerator``; with the
    default ``etp = tp`` the group is carved from ``dp x cp``, with ``etp = 1`` it folds over the TP ranks
    first, MoE parallel folding, arXiv:2504.14960), each copy
    :func:`hnplan.comm.messages.ep_token_bytes` wide: bf16, or FP8 with its scales for the dispatch
    and its mirror when the stack dispatches in FP8 (``ep_dispatch_fp8``, fp8 training only); the busiest
    rank carries :func:`~hnplan.planning.training.components.busiest_rank_load` times the mean (the stack's
    ``moe_load_imbalance`` times the peak of random routing; :func:`hnplan.comm.messages.ep_alltoall_bytes`).
    The stack's ``ep_dispatcher`` sets the path. ``alltoall`` (Megatron-Core's NCCL dispatcher): a
    pairwise all-to-all of the ``T k`` copies over the whole EP group, wherever the experts sit.
    ``flex`` (DeepEP / HybridEP): a token goes once to each distinct rank its ``k`` experts sit on
    (:func:`expected_domains` over the ``ep`` ranks, with group-limited routing where the model has it:
    catalog ``expert_groups`` / ``groups_per_token``; DeepEP's intranode kernels send one row per token and
    destination rank, and its benchmarks, ``tests/test_intranode.py``, count the NVLink bandwidth on those
    rows, as the catalog's ``alltoall_efficiency`` does). With an EP group spanning ``D`` scale-up domains it crosses the
    scale-out network once per destination domain (the expected distinct domains) and is forwarded to its
    ranks inside the domain; the two phases overlap (DeepSeek-V3 report [5]_ Sec. 3.2.2: node-limited
    routing, IB and NVLink traffic fully overlapped; DeepEP's internode kernels send a token once per
    destination node over RDMA and forward it over NVLink), so the time is the larger of a cross-domain
    all-to-all of ``T x domains`` copies over one rank per domain and an in-domain all-to-all of
    ``T x ranks`` copies. The links run at the fabric's ``alltoall_efficiency`` where the catalog
    has one: what a published expert-parallel library reaches (DeepEP: 153-158 GB/s of the H800's 200 GB/s
    NVLink; 577 of the B200's 900 GB/s), else at its ``bw_efficiency``; the flex dispatcher's cross-domain
    all-to-all at the scale-out fabric's ``flex_alltoall_efficiency`` where it has one (InfiniBand NDR: 0.76
    of the line rate, HybridEP's PyTorch API across H100 servers, deepseek-ai/DeepEP hybrid-ep
    docs/README_Hybrid-EP.md; NCCL's all-to-all keeps the ring's 0.94), timed as NCCL's all-to-all of
    ``a2a / flex`` times the bytes.
    """
    moe = job.model.moe
    if moe is None:
        return np.zeros(len(df))
    ch = job.choices
    flex = ch.ep_dispatcher == "flex"
    fp8 = bool(ch.ep_dispatch_fp8) and job.dtype == "fp8"
    widths = (ep_token_bytes(job.model.hidden, fp8), ep_token_bytes(job.model.hidden, False))
    out = job.links.scaleout  # the flex dispatcher's cross-domain rate, as NCCL's bytes at NCCL's rate
    rdma = 1.0 if out.flex_alltoall_bw_Bps is None else out.a2a_Bps / out.flex_alltoall_bw_Bps

    def per_shape(u):  # once per distinct (ep, tp, etp, cp, micro-batch, recompute)
        ep, tp, cp, mb = _col(u, "ep"), _col(u, "tp"), _col(u, "cp"), _col(u, "microbatch_size")
        stride = _col(u, "etp")  # EP ranks sit etp apart
        tokens = mb * job.seq_len / (cp * tp) * busiest_rank_load(job, u)
        if flex:
            shape = memo(u, ["ep", "etp"], lambda e, s: dict(zip(("q", "d"), _domains(job, e, s))))
            q, d = _col(shape, "q"), _col(shape, "d")
            spans = (ep > 1) & (d > 1)
            reach = expected_domains(moe.experts, moe.active_experts, moe.expert_groups, moe.groups_per_token, d)
            # a token reaches each of its distinct destination ranks once (the ranks are domains of
            # experts / ep experts each)
            copies = expected_domains(moe.experts, moe.active_experts, moe.expert_groups, moe.groups_per_token, ep)
        else:
            copies = np.full(len(u), float(moe.active_experts))
        t = np.zeros(len(u))
        for row_bytes in widths:  # one dispatch and one combine
            one = collective_s(job, "alltoall", tokens * copies * row_bytes, ep, stride)
            if flex:
                cross = collective_s(
                    job, "alltoall", tokens * reach * row_bytes * rdma, np.where(spans, d, 1), stride * q
                )
                inside = collective_s(job, "alltoall", tokens * copies * row_bytes, np.where(spans, q, 1), stride)
                one = np.where(spans, np.maximum(cross, inside), one)
            t = t + one
        return 2 + recompute_is(u, "full"), t

    passes, t = on_distinct(with_etp(df), ["ep", "tp", "etp", "cp", "microbatch_size", "recompute"], per_shape)
    return np.where(_col(df, "ep") > 1, moe_layers * passes * t, 0.0)


def _domains(job: Job, size: int, stride: int) -> tuple[int, int]:
    g = job.group(int(size), int(stride))
    return g.per_domain, g.domains


def comb(n, k: float) -> np.ndarray:
    """The binomial coefficient ``C(n, k)`` generalised to real ``n`` (0 unless ``0 <= k <= n``), for a
    whole number ``k``: ``prod_{i=1..k} (n - k + i) / prod_{i=1..k} i``, numerator and denominator each
    multiplied up in that order (with ``k`` replaced by ``n - k`` for a whole ``n < 2k``), which are the
    operations of :func:`scipy.special.comb` (``exact=False``, whose ``binom`` uses this product for a
    whole ``k`` under 20), so the two agree to the last bit (tests/test_training_moe.py). Other ``k`` go
    to scipy. Here, not scipy's: ``scipy.special`` costs about 0.15 s of CPU to import, more than planning
    a few dozen published runs (``hnplan compare``'s trust notes).

    Parameters
    ----------
    n : float or array
    k : float
        Whole and under 20, else :func:`scipy.special.comb` answers.

    Returns
    -------
    numpy.ndarray
        ``C(n, k)``, shaped as ``n`` (at least 1-D).
    """
    n = np.atleast_1d(np.asarray(n, dtype=float))
    k = float(k)
    if k != np.floor(k) or not 0 <= k < 20 or np.any((np.abs(n) <= 1e-8) & (n != 0)):
        from scipy.special import comb as scipy_comb

        return np.atleast_1d(scipy_comb(n, k))
    whole = (n == np.floor(n)) & (k > np.floor(n) / 2) & (n > 0)
    kx = np.where(whole, np.floor(n) - k, k)  # by symmetry: fewer factors
    num, den = np.ones_like(n), np.ones_like(n)
    for i in range(1, int(k) + 1):
        on = i <= kx  # the rows that still have a factor i
        num = np.where(on, num * ((i + n) - kx), num)
        den = np.where(on, den * i, den)
        big = np.abs(num) > 1e50
        num, den = np.where(big, num / den, num), np.where(big, 1.0, den)
    return np.where((k <= n) & (n >= 0), num / den, 0.0)


def expected_domains(experts: int, k: int, groups: int | None, groups_per_token: int | None, domains) -> np.ndarray:
    """Expected number of distinct scale-up domains a token's ``k`` experts sit on, over an EP group
    spread evenly across ``domains`` domains [-].

    Without group-limited routing (``groups`` None) the ``k`` experts are any ``k`` of ``experts``:
    ``D (1 - C(experts - e, k) / C(experts, k))`` with ``e = experts / D`` experts a domain. With it:

    The router (DeepSeek-V3 report [5]_ Sec. 2.1.2 and 3.2.2; Megatron-Core ``group_limited_topk``)
    ranks the ``groups`` expert groups by the sum of their top ``k / groups_per_token`` scores, keeps
    ``g = groups_per_token`` of them and takes the top ``k`` experts inside those; experts are placed
    contiguously by EP rank, so each domain holds ``e = experts / domains`` of them. Counted with
    ``j = k / g`` experts in each chosen group (the group's selection score is its top-``j`` sum):

    * a group spans ``s = n / e`` domains (``n = experts / groups`` experts a group, ``n >= e``): each
      chosen group reaches ``s (1 - C(n - e, j) / C(n, j))`` of them (hypergeometric, none of its ``j``
      experts on a given domain);
    * ``c = e / n`` groups share a domain (``n < e``): a domain is reached when one of its ``c`` groups
      is among the ``g`` chosen of ``groups``: ``D (1 - C(groups - c, g) / C(groups, g))``;

    capped at ``min(k, D)``. Against a simulation of that router on random scores (the force-balanced
    benchmark routing of Megatron-Core, ``moe_router_force_load_balancing``; 20,000 tokens, DeepSeek-V3's
    256 experts in 8 groups, top-8 from 4 groups) the counts agree within 6 % and are never below the
    simulation: 7.10 vs 6.84 domains of 8 experts, 6.07 vs 5.73 of 16, 4.00 vs 3.97 of 32, 3.14 vs 3.13
    of 64. The maximum (``min(k, D, g ceil(D / groups))``, DeepSeek's "at most 4 nodes") is reached only
    when a group fits in one domain.

    Parameters
    ----------
    experts, k : int
        Routed experts and experts per token.
    groups, groups_per_token : int or None
        Expert groups and groups a token may use (None: no group-limited routing).
    domains : array
        Scale-up domains the EP group spans (``D >= 1``).

    Returns
    -------
    numpy.ndarray
        Expected distinct domains per token, in ``[1, min(k, D)]``.

    Examples
    --------
    >>> float(expected_domains(256, 8, 8, 4, 8)[0])    # DeepSeek-V3 on 8 nodes: one group a node, 4 nodes
    4.0
    >>> round(float(expected_domains(256, 8, 8, 4, 16)[0]), 3)  # 16 nodes of 16 experts: 4 x 2 x (1 - 120/496)
    6.065
    >>> round(float(expected_domains(8, 2, None, None, 4)[0]), 4)  # Mixtral on 4 nodes: 4 x (1 - C(6,2)/C(8,2))
    1.8571
    """
    d = np.atleast_1d(np.asarray(domains, dtype=float))
    e = experts / d  # experts a domain holds
    if groups is None or groups_per_token is None:
        plain = d * (1.0 - comb(experts - e, float(k)) / comb(float(experts), float(k)))
        return np.clip(plain, 1.0, np.minimum(float(k), d))
    n = experts / groups  # experts a group holds
    g = float(groups_per_token)
    j = max(1.0, float(k // groups_per_token))
    spans = g * (n / e) * (1.0 - comb(n - e, j) / comb(n, j))  # groups at least as large as a domain
    c = e / n
    shares = d * (1.0 - comb(groups - c, g) / comb(float(groups), g))  # several groups a domain
    out = np.where(n >= e, spans, shares)
    return np.clip(out, 1.0, np.minimum(float(k), d))
