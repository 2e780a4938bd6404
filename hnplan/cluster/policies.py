"""Placement policies: pure functions over the cluster's free-capacity array (numpy over nodes and GPUs).

State: ``free`` is an int array of shape ``(nodes, node_gpus)``, the free share of every GPU
[milli-GPU, 1000 = whole GPU free]; ``up`` a bool array ``(nodes,)`` (False while a node is in repair).
A request is ``gpus`` whole GPUs, or one GPU share of ``milli`` < 1000. Every placement is a gang: all
of a job's GPUs at once or nothing. A request of at most one node's GPUs takes one node (a pod);
a larger one spans nodes.

Policies (:data:`POLICIES`):

* ``first-fit``: the lowest-numbered node (GPU) that fits.
* ``best-fit``: the tightest fit: least free capacity left on the GPU (fractional) or node (whole);
  multi-node jobs fill the most-used nodes first.
* ``topology-aware``: best-fit inside the fullest scale-up domain that fits; a multi-node job takes
  whole tensor-parallel groups (``tp`` GPUs) inside one domain each, in the fewest domains, under the
  fewest leaves (best-fit leaf first, then leaves with the most free capacity).
* ``fragmentation-aware``: Fragmentation Gradient Descent (Weng et al. [1]_ Sec. 4): the placement
  whose node's expected fragmentation ``F_n = sum_m p_m F_n(m)`` grows least, over the workload's task
  types ``m`` with popularity ``p_m``. ``F_n(m)`` is the free capacity of node ``n`` that a task of
  type ``m`` cannot use: for a share ``d < 1`` of one GPU, the GPUs with less than ``d`` free; for ``k``
  whole GPUs, all free capacity if fewer than ``k`` GPUs are whole, else the partly used GPUs' free
  capacity; for a task type that asks for no GPU (CPU only), all of the node's free GPU capacity (the
  paper's simulator counts it so, ``XLSatisfied``/``XRLackCPU`` in ``GetNodePodFrag``). Placements are
  ranked as the paper's scheduler ranks them (``FGDScore``, hkust-adsl/kubernetes-scheduler-simulator
  ``pkg/simulator/plugin/fgd_score.go``): by the integer score ``trunc(100 sigmoid(-dF / 1000))`` of the
  growth ``dF`` [milli-GPU] (:func:`fgd_score`), ties to the lowest-numbered node, then GPU. The score's
  resolution (one point per about 40 milli-GPU of growth near zero) makes near-equal growths tie, and the
  tie-break then packs them onto the first nodes: on the paper's own experiment this packing is worth 0.6 %
  of the cluster's GPUs against ranking by the exact growth. Multi-node jobs fall back to best-fit (FGD is
  defined for single-node tasks).

GPU types (optional): ``node_type`` (nodes,) gives each node's GPU model as an index and a request's
``spec`` a bitmask of the models it accepts (bit ``t`` set: model ``t`` accepted; 0: any model). Every
policy skips nodes of other models; FGD counts all free GPU capacity of a node as a fragment for the
task types that cannot use its model, as the paper's simulator does (``NoAccess`` in ``GetNodePodFrag``,
hkust-adsl/kubernetes-scheduler-simulator ``pkg/utils/frag.go``).

References
----------
.. [1] Q. Weng, L. Yang, Y. Yu, W. Wang, X. Tang, G. Yang, L. Zhang, "Beware of Fragmentation:
   Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan import units
from hnplan.cluster.topology import MILLI, ClusterTopology

MIB_PER_GIB = units.GiB / units.MiB  # the trace's memory is in MiB; types group it by whole GiB

POLICIES = ("first-fit", "best-fit", "topology-aware", "fragmentation-aware")


@dataclass(frozen=True)
class Workload:
    """Task types a fragmentation measure is taken against: ``gpus`` (M,), ``milli`` (M,) [milli-GPU],
    popularity ``p`` (M,) summing to 1, optionally ``cpu`` (M,) [milli-CPU] and ``mem`` (M,) [MiB]
    (a node short of either cannot take the type at all) and ``spec`` (M,) the GPU models each type
    accepts (bitmask over the node types, 0 = any; a node of another model cannot take it)."""

    gpus: np.ndarray
    milli: np.ndarray
    p: np.ndarray
    cpu: np.ndarray | None = None
    mem: np.ndarray | None = None
    spec: np.ndarray | None = None

    @classmethod
    def from_jobs(cls, gpus, milli, node_gpus: int, cpu=None, mem=None, max_types: int = 48, spec=None) -> Workload:
        """The distribution of single-node task types in a job table (multi-node jobs left out); with
        ``cpu``/``mem``, those are part of the type (CPU rounded to whole cores, memory to GiB), and
        with ``spec`` (per job, bitmask of accepted GPU models, 0 = any) the accepted models are (as
        the paper's simulator keys its typical pods by GPU type); the ``max_types`` most popular
        types are kept."""
        g, m = np.asarray(gpus), np.asarray(milli)
        keep = g <= node_gpus
        if not keep.any():
            return cls(np.array([node_gpus]), np.array([MILLI]), np.array([1.0]))
        cols = [g[keep], m[keep]]
        if cpu is not None:
            cols += [np.round(np.asarray(cpu)[keep], -3), np.round(np.asarray(mem)[keep] / MIB_PER_GIB) * MIB_PER_GIB]
        if spec is not None:
            cols.append(np.asarray(spec)[keep])
        pairs, counts = np.unique(np.stack(cols), axis=1, return_counts=True)
        top = np.argsort(-counts, kind="stable")[:max_types]
        pairs, counts = pairs[:, top], counts[top]
        extra = (pairs[2], pairs[3]) if cpu is not None else (None, None)
        types = pairs[-1].astype(np.int64) if spec is not None else None
        return cls(pairs[0].astype(np.int64), pairs[1].astype(np.int64), counts / counts.sum(), *extra, types)

    @classmethod
    def typical(cls, gpus, milli, cpu, spec=None, coverage: float = 0.95) -> Workload:
        """The typical task types of a pod list as the paper's simulator takes them (``GetTypicalPods``,
        hkust-adsl/kubernetes-scheduler-simulator ``pkg/utils/frag.go``, its default
        ``podPopularityThreshold`` 95): every pod counts, CPU-only ones (``gpus = 0``) included; a type is
        the exact ``(gpus, milli, cpu, spec)``; the most popular types are kept until they cover
        ``coverage`` of the pods, their popularity renormalised over those kept. Memory is not part of a
        type (their measure checks CPU only).

        >>> wl = Workload.typical([1, 1, 1, 0], [500, 500, 1000, 0], [4000, 4000, 8000, 2000], coverage=0.5)
        >>> wl.gpus.tolist(), wl.milli.tolist(), wl.cpu.tolist(), wl.p.tolist()
        ([1], [500], [4000.0], [1.0])
        """
        g, m, c = np.asarray(gpus, np.int64), np.asarray(milli, np.int64), np.asarray(cpu, np.int64)
        cols = [g, np.where(g > 0, m, 0), c] + ([np.asarray(spec, np.int64)] if spec is not None else [])
        keys, counts = np.unique(np.stack(cols), axis=1, return_counts=True)
        top = np.argsort(-counts, kind="stable")
        keys, counts = keys[:, top], counts[top]
        n = int(np.searchsorted(np.cumsum(counts), coverage * counts.sum() - 1e-9)) + 1
        keys, counts = keys[:, :n], counts[:n]
        types = keys[3] if spec is not None else None
        return cls(keys[0], keys[1], counts / counts.sum(), keys[2].astype(float), None, types)


def fgd_score(growth) -> np.ndarray:
    """The paper's FGD score of placements that grow their node's fragmentation by ``growth`` [milli-GPU]:
    ``trunc(100 / (1 + exp(growth / 1000)))``, an integer in [0, 100], higher is better (``FGDScore``,
    hkust-adsl/kubernetes-scheduler-simulator ``pkg/simulator/plugin/fgd_score.go``: ``int64(sigmoid((before
    - after) / 1000) * MaxNodeScore)``).

    >>> fgd_score(np.array([0.0, 30.0, 45.0, 1000.0, -500.0])).tolist()
    [50.0, 49.0, 48.0, 26.0, 62.0]
    """
    return np.trunc(100.0 / (1.0 + np.exp(np.asarray(growth, dtype=float) / MILLI)))


def type_ok(spec, node_type) -> np.ndarray:
    """Whether nodes of GPU model ``node_type`` (index) satisfy requests ``spec`` (bitmask of accepted
    models, 0 = any), broadcast over both.

    >>> type_ok(np.array([0, 0b01, 0b10]), 1).tolist()   # any; model 0 only; model 1 only
    [True, False, True]
    """
    spec = np.asarray(spec, dtype=np.int64)
    return (spec == 0) | (((spec >> np.asarray(node_type, dtype=np.int64)) & 1) == 1)


def whole_free(free: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Whole free GPUs per node (0 on nodes in repair), shape ``(nodes,)``."""
    return (free == MILLI).sum(axis=1) * up


def _type_frag(rows: np.ndarray, wl: Workload, res_ok: np.ndarray | None = None) -> np.ndarray:
    """Expected fragmentation ``sum_m p_m F(m)`` of node states ``rows`` (K, G) [milli-GPU];
    ``res_ok`` (K, M) says whether the node's CPU and memory could take type ``m`` (else all its
    free GPU capacity is a fragment for ``m``)."""
    w = (rows == MILLI).sum(1)
    total = rows.sum(1)
    partial = total - MILLI * w
    cpu_only = wl.gpus == 0
    share = (wl.milli < MILLI) & ~cpu_only
    whole = ~share & ~cpu_only
    f = np.empty((len(rows), len(wl.p)))
    if share.any():
        x = rows[:, :, None]
        f[:, share] = (x * (x < wl.milli[share])).sum(1)
    if whole.any():
        f[:, whole] = np.where(w[:, None] >= wl.gpus[whole], partial[:, None], total[:, None])
    f[:, cpu_only] = total[:, None]  # a CPU-only type uses no GPU: all free GPU capacity is a fragment for it
    if res_ok is not None:
        f = np.where(res_ok, f, total[:, None])
    return f @ wl.p


def _res_ok(wl: Workload, cpu_free, mem_free, node_type, nodes, cpu: float = 0.0, mem: float = 0.0):
    """(K, M) whether nodes could still take each type's CPU and memory after ``cpu``/``mem`` are taken
    and accept its GPU model; None when neither is modelled."""
    ok = None
    if wl.cpu is not None and cpu_free is not None:
        ok = (cpu_free[nodes] - cpu)[:, None] >= wl.cpu
        if wl.mem is not None and mem_free is not None:
            ok &= (mem_free[nodes] - mem)[:, None] >= wl.mem
    if wl.spec is not None and node_type is not None:
        t = type_ok(wl.spec[None, :], node_type[nodes][:, None])
        ok = t if ok is None else ok & t
    return ok


def node_fragmentation(
    free: np.ndarray, up: np.ndarray, wl: Workload, cpu_free=None, mem_free=None, node_type=None
) -> np.ndarray:
    """Expected fragmentation ``F_n`` of every node [milli-GPU] (Weng et al. Sec. 3), shape ``(nodes,)``.

    >>> free = np.array([[1000, 500], [1000, 1000]])
    >>> wl = Workload(np.array([1, 2]), np.array([600, 1000]), np.array([0.5, 0.5]))
    >>> node_fragmentation(free, np.array([True, True]), wl).tolist()   # 0.5 x 500 + 0.5 x 1500; 0
    [1000.0, 0.0]
    """
    nodes = np.arange(len(free))
    return _type_frag(free * up[:, None], wl, _res_ok(wl, cpu_free, mem_free, node_type, nodes))


def stranded(free: np.ndarray, up: np.ndarray, q_gpus: np.ndarray, q_milli: np.ndarray, node_gpus: int) -> float:
    """Free capacity no queued job can use [GPU], counting only queued jobs the free capacity could
    hold if it were perfectly packed (a job waiting for capacity is not blocked by fragmentation).

    A GPU share is usable when some such fractional job fits in it, a whole GPU when some such job
    of ``k <= node_gpus`` GPUs finds ``k`` whole on its node, or a multi-node job finds enough whole
    GPUs in the cluster. 0 when no such job is queued.

    >>> stranded(np.array([[300, 1000], [1000, 1000]]), np.array([True, True]), np.array([2]),
    ...          np.array([1000]), 2)
    1.3
    """
    if len(q_gpus) == 0:
        return 0.0
    f = free * up[:, None]
    total = f.sum()
    could = q_gpus * q_milli <= total
    q_gpus, q_milli = q_gpus[could], q_milli[could]
    if len(q_gpus) == 0:
        return 0.0
    usable = np.zeros(f.shape, bool)
    share = q_milli < MILLI
    if share.any():
        usable |= f >= q_milli[share].min()
    full = f == MILLI
    w = full.sum(1)
    single = (~share) & (q_gpus <= node_gpus)
    if single.any():
        usable |= full & (w >= q_gpus[single].min())[:, None]
    multi = q_gpus > node_gpus
    if multi.any() and w.sum() >= q_gpus[multi].min():
        usable |= full
    return float((total - (f * usable).sum()) / MILLI)


# -- fractional requests -----------------------------------------------------------------------------
def _place_share(
    policy: str,
    free,
    up,
    topo: ClusterTopology,
    milli: int,
    wl: Workload | None,
    res=(None, None, None),
    req=(0.0, 0.0),
):
    fits = (free >= milli) & up[:, None]
    flat = np.flatnonzero(fits)
    if not len(flat):
        return None
    if policy == "first-fit":
        k = flat[0]
    elif policy == "fragmentation-aware" and wl is not None:
        n, g = np.divmod(flat, free.shape[1])
        x = free[n, g]
        # GPUs of one node with the same free share are interchangeable: keep the first of each
        _, first = np.unique(np.stack([n, x]), axis=1, return_index=True)
        n, g, x, flat = n[first], g[first], x[first], flat[first]
        after = free[n].copy()
        after[np.arange(len(n)), g] -= milli
        delta = _type_frag(after, wl, _res_ok(wl, *res, n, *req)) - _type_frag(free[n], wl, _res_ok(wl, *res, n))
        k = flat[np.lexsort((flat, -fgd_score(delta)))[0]]  # best score, then the lowest node and GPU
    else:  # best-fit and topology-aware: least share left on the GPU
        k = flat[np.argmin(free.ravel()[flat])]
    n, g = divmod(int(k), free.shape[1])
    return np.array([n]), np.array([g])


# -- whole-GPU requests --------------------------------------------------------------------------
def _slots(free, nodes: np.ndarray, take: np.ndarray):
    """The first ``take[i]`` whole free GPUs of each node ``nodes[i]``."""
    out_n, out_g = [], []
    for n, t in zip(nodes.tolist(), take.tolist()):
        if t > 0:
            g = np.flatnonzero(free[n] == MILLI)[:t]
            out_n.append(np.full(t, n))
            out_g.append(g)
    return np.concatenate(out_n), np.concatenate(out_g)


def _take(order: np.ndarray, w: np.ndarray, k: int):
    """Nodes in ``order`` and GPUs taken from each until ``k`` are gathered."""
    cs = np.cumsum(w[order])
    n = int(np.searchsorted(cs, k)) + 1
    nodes = order[:n]
    take = w[nodes].copy()
    take[-1] -= int(cs[n - 1]) - k
    return nodes, take


def _place_single_node(
    policy, free, w, topo: ClusterTopology, k: int, wl: Workload | None, res=(None, None, None), req=(0.0, 0.0)
):
    cand = np.flatnonzero(w >= k)
    if not len(cand):
        return None
    if policy == "first-fit":
        n = cand[0]
    elif policy == "topology-aware":
        dfree = np.bincount(topo.domain, weights=w, minlength=topo.domains)
        n = cand[np.lexsort((w[cand], dfree[topo.domain[cand]]))[0]]
    elif policy == "fragmentation-aware" and wl is not None:
        sub = free[cand]
        full = sub == MILLI
        after = np.where(full & (np.cumsum(full, axis=1) <= k), 0, sub)
        delta = _type_frag(after, wl, _res_ok(wl, *res, cand, *req)) - _type_frag(sub, wl, _res_ok(wl, *res, cand))
        n = cand[np.argmax(fgd_score(delta))]  # best score, then the lowest node
    else:
        n = cand[np.argmin(w[cand])]
    return _slots(free, np.array([n]), np.array([k]))


def _place_multi_node(policy, free, w, topo: ClusterTopology, k: int, tp: int):
    if policy == "first-fit":
        nodes, take = _take(np.flatnonzero(w > 0), w, k)
        return _slots(free, nodes, take)
    if policy != "topology-aware":  # best-fit (and FGD's fallback): fill the most-used nodes first
        has = np.flatnonzero(w > 0)
        nodes, take = _take(has[np.argsort(w[has], kind="stable")], w, k)
        return _slots(free, nodes, take)
    tp = max(1, min(tp, topo.domain_gpus))
    dfree = np.bincount(topo.domain, weights=w, minlength=topo.domains).astype(np.int64)
    dcap = (dfree // tp) * tp  # GPUs usable in whole TP groups per domain
    if dcap.sum() < k:
        return None
    if k <= topo.domain_gpus and (dcap >= k).any():
        doms = np.flatnonzero(dcap >= k)
        chosen, dtake = doms[[np.argmin(dcap[doms])]], np.array([k])
    else:
        dleaf = topo.leaf[:: topo.domain_gpus // topo.node_gpus]  # leaf of each domain's first node
        lcap = np.bincount(dleaf, weights=dcap, minlength=topo.leaves)
        fit = np.flatnonzero(lcap >= k)
        leaves = fit[[np.argmin(lcap[fit])]] if len(fit) else np.argsort(-lcap, kind="stable")
        # (one leaf that fits, else every leaf)
        doms = np.flatnonzero(((dleaf == leaves[0]) if len(fit) else True) & (dcap > 0))
        # domains of the chosen leaves, leaf by leaf (most capacity first), fullest-free domains first
        rank = np.empty(topo.leaves, np.int64)
        rank[leaves] = np.arange(len(leaves))
        doms = doms[np.lexsort((-dcap[doms], rank[dleaf[doms]]))]
        chosen, dtake = _take(doms, dcap, k)
    out_n, out_g = [], []
    for d, t in zip(chosen.tolist(), dtake.tolist()):
        nd = topo.domain_nodes[d]
        nd = nd[w[nd] > 0]
        nodes, take = _take(nd[np.argsort(-w[nd], kind="stable")], w, t)
        a, b = _slots(free, nodes, take)
        out_n.append(a)
        out_g.append(b)
    return np.concatenate(out_n), np.concatenate(out_g)


def place(
    policy: str,
    free: np.ndarray,
    up: np.ndarray,
    topo: ClusterTopology,
    gpus: int,
    milli: int = MILLI,
    tp: int = 1,
    workload: Workload | None = None,
    cpu_free=None,
    mem_free=None,
    cpu: float = 0.0,
    mem: float = 0.0,
    node_type=None,
    spec: int = 0,
):
    """Where a job goes under a policy, or None if it does not fit now.

    Parameters
    ----------
    policy : str
        One of :data:`POLICIES`.
    free : ndarray of int, shape (nodes, node_gpus)
        Free share of every GPU [milli-GPU].
    up : ndarray of bool, shape (nodes,)
    topo : ClusterTopology
    gpus : int
        Whole GPUs (1 for a fractional request).
    milli : int
        Share of each GPU [milli-GPU]; < 1000 only with ``gpus = 1``.
    tp : int
        GPUs that must share a scale-up domain (topology-aware multi-node placement).
    workload : Workload, optional
        Task types for the fragmentation-aware policy.
    cpu_free, mem_free : ndarray, shape (nodes,), optional
        Free CPU [milli-CPU] and memory [MiB] per node; with ``cpu``/``mem`` (the task's), nodes short
        of either are skipped and FGD counts them in its fragmentation measure.
    node_type : ndarray of int, shape (nodes,), optional
        GPU model of every node (index into the caller's model list).
    spec : int
        GPU models the job accepts (bit ``t`` set: model ``t``; 0: any). With ``node_type``, nodes
        of other models are skipped; FGD's measure counts task types of the workload that cannot use
        a node's model as unable to use any of its free GPUs.

    Returns
    -------
    tuple of ndarray or None
        ``(nodes, gpu_index)``, each of length ``gpus``: the GPUs the job gets, each at ``milli``.

    Examples
    --------
    >>> from hnplan.cluster.topology import build_topology
    >>> topo = build_topology("hgx-h100-ib-ndr", 16)
    >>> free = np.full((2, 8), 1000); free[0, :6] = 0; up = np.ones(2, bool)
    >>> place("first-fit", free, up, topo, 2)[0].tolist(), place("best-fit", free, up, topo, 2)[0].tolist()
    ([0, 0], [0, 0])
    >>> place("best-fit", free, up, topo, 4)[0].tolist()
    [1, 1, 1, 1]
    """
    res, req = (cpu_free, mem_free, node_type), (cpu, mem)
    if cpu_free is not None:
        up = up & (cpu_free >= cpu) & (mem_free >= mem)
    if node_type is not None and spec:
        up = up & type_ok(spec, node_type)
    if milli < MILLI:
        return _place_share(policy, free, up, topo, milli, workload, res, req)
    w = whole_free(free, up)
    if w.sum() < gpus:
        return None
    if gpus <= topo.node_gpus:
        return _place_single_node(policy, free, w, topo, gpus, workload, res, req)
    return _place_multi_node(policy, free, w, topo, gpus, tp)


def allocation_shape(nodes: np.ndarray, topo: ClusterTopology) -> tuple[int, int, int]:
    """``(GPUs, least GPUs in one scale-up domain, leaves spanned)`` of an allocation.

    >>> from hnplan.cluster.topology import build_topology
    >>> allocation_shape(np.array([0, 0, 1, 1]), build_topology("hgx-h100-ib-ndr", 16))
    (4, 2, 1)
    """
    doms, counts = np.unique(topo.domain[nodes], return_counts=True)
    return len(nodes), int(counts.min()), len(np.unique(topo.leaf[nodes]))
