"""Alpha-beta (Hockney) cost of collectives, with the nccl-tests algbw/busbw definitions.

A message of ``n`` bytes over a link costs ``alpha + n / B`` with ``alpha`` the per-step latency [s]
and ``B`` the achievable per-direction bandwidth [bytes/s]. Every function works on scalars and on
numpy arrays (vectorised over sizes, group sizes or bandwidths).

References
----------
.. [1] R. Hockney, "The communication challenge for MPP", Parallel Computing 20(3), 1994.
.. [2] Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations in MPICH",
   IJHPCA 19(1), 2005, Sec. 4 (ring, recursive doubling/halving costs).
.. [3] NVIDIA nccl-tests, doc/PERFORMANCE.md: algbw = S / t; busbw = algbw x 2(n-1)/n (all-reduce),
   x (n-1)/n (reduce-scatter, all-gather, all-to-all), x 1 (broadcast, reduce, send/recv).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan import units
from hnplan.errors import InputError, check_choice

OPS = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "sendrecv")


def _out(x):
    return float(x) if np.ndim(x) == 0 else x


def _check(p):
    if np.any(np.asarray(p) < 1):
        raise InputError(f"group size must be >= 1, got {p}")


def ring_allreduce_time(n_bytes, p, bw_Bps, alpha_s):
    """Ring all-reduce: ``2(p-1) alpha + 2 (p-1)/p n / B`` [s] ([2]_). Zero when p = 1.

    Parameters
    ----------
    n_bytes : float or array
        Buffer size per rank [bytes].
    p : int or array
        Ranks in the group.
    bw_Bps : float or array
        Achievable per-direction bandwidth of each rank's bottleneck link [bytes/s].
    alpha_s : float or array
        Latency of one algorithm step [s].

    >>> ring_allreduce_time(8e9, 8, 1e11, 0.0)
    0.14
    """
    _check(p)
    p = np.asarray(p, dtype=float)
    return _out(2 * (p - 1) * alpha_s + 2 * (p - 1) / p * np.asarray(n_bytes) / bw_Bps)


def ring_reducescatter_time(n_bytes, p, bw_Bps, alpha_s):
    """Ring reduce-scatter of a buffer of ``n`` bytes in total: ``(p-1) alpha + (p-1)/p n / B`` [s]."""
    _check(p)
    p = np.asarray(p, dtype=float)
    return _out((p - 1) * alpha_s + (p - 1) / p * np.asarray(n_bytes) / bw_Bps)


def ring_allgather_time(n_bytes, p, bw_Bps, alpha_s):
    """Ring all-gather producing ``n`` bytes per rank: ``(p-1) alpha + (p-1)/p n / B`` [s]."""
    return ring_reducescatter_time(n_bytes, p, bw_Bps, alpha_s)


def pairwise_alltoall_time(n_bytes, p, bw_Bps, alpha_s):
    """Pairwise-exchange all-to-all of ``n`` bytes per rank (``n/p`` to each peer):
    ``(p-1) alpha + (p-1)/p n / B`` [s] ([2]_)."""
    return ring_reducescatter_time(n_bytes, p, bw_Bps, alpha_s)


def oneshot_alltoall_time(n_bytes, p, q, bw_up_Bps, bw_out_Bps, alpha_s):
    """One-shot all-to-all of ``n`` bytes per rank (``n/p`` to each peer), every peer written at once:
    ``alpha + max((q-1)/p n / B_u, (p-q)/p n / B_o)`` [s], one message latency and the busier of the
    scale-up and scale-out shares at their bandwidths.

    The expert-parallel kernels that issue a put to every peer in one launch (DeepEP's low-latency
    dispatch and combine over IBGDA, deepseek-ai/DeepEP docs/legacy.md; CloudMatrix-Infer's
    dispatch/combine over UB, arXiv:2506.12708 Sec 4.3) pay no sequential step per peer, unlike the
    pairwise exchange (:func:`pairwise_alltoall_time`).

    Parameters
    ----------
    n_bytes : float or array
        Send buffer per rank [bytes].
    p, q : int
        Ranks in the group and ranks of the group in each scale-up domain (``q <= p``).
    bw_up_Bps, bw_out_Bps : float
        Per-direction bandwidth of one rank's scale-up link and of its scale-out share [bytes/s].
    alpha_s : float
        Latency of one message [s].

    Returns
    -------
    float or numpy.ndarray
        Time of the exchange [s]; 0 where ``p = 1``.

    Raises
    ------
    InputError
        When a group size ``p`` is below 1.

    Examples
    --------
    128 ranks, 8 per domain, 7.5 MB per rank, 200 GB/s up, 40 GB/s out, 5 us:
    5 us + max(7/128 x 7.5e6 / 2e11, 120/128 x 7.5e6 / 4e10) = 5 + 175.8 us.

    >>> round(oneshot_alltoall_time(7.5e6, 128, 8, 2e11, 4e10, 5e-6) * 1e6, 2)
    180.78
    """
    _check(p)
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    n = np.asarray(n_bytes, dtype=float)
    t = alpha_s + np.maximum((q - 1) / p * n / bw_up_Bps, (p - q) / p * n / bw_out_Bps)
    return _out(np.where(p > 1, t, 0.0))


def sendrecv_time(n_bytes, bw_Bps, alpha_s):
    """Point-to-point message: ``alpha + n / B`` [s]."""
    return _out(alpha_s + np.asarray(n_bytes) / bw_Bps)


def hierarchical_allreduce_time(n_bytes, p_inner, p_outer, bw_inner_Bps, alpha_inner_s, bw_outer_Bps, alpha_outer_s):
    """All-reduce across scale-up domains: reduce-scatter inside each domain, ring all-reduce of the
    ``n / p_inner`` shard across domains (all shards in parallel, one per rail), all-gather inside [s].

    ``bw_outer_Bps`` is the scale-out bandwidth available to *one* rank (its share of the node's NICs).
    With ``p_outer = 1`` this is a plain ring inside the domain; with ``p_inner = 1`` a plain ring
    across domains.
    """
    n = np.asarray(n_bytes, dtype=float)
    t_in = 2 * ring_reducescatter_time(n, p_inner, bw_inner_Bps, alpha_inner_s)
    t_out = ring_allreduce_time(n / np.asarray(p_inner, dtype=float), p_outer, bw_outer_Bps, alpha_outer_s)
    return _out(t_in + t_out)


def busbw_factor(op: str, p):
    """nccl-tests factor from algbw to busbw for ``op`` on ``p`` ranks ([3]_).

    >>> busbw_factor("allreduce", 8)
    1.75
    """
    p = np.asarray(p, dtype=float)
    if op == "allreduce":
        f = 2 * (p - 1) / p
    elif op in ("reducescatter", "allgather", "alltoall"):
        f = (p - 1) / p
    elif op in ("broadcast", "sendrecv", "reduce"):
        f = np.ones_like(p)
    else:
        check_choice("collective", op, OPS)
    return _out(f)


def algbw_Bps(n_bytes, time_s):
    """nccl-tests algorithm bandwidth ``S / t`` [bytes/s]."""
    return _out(np.asarray(n_bytes) / time_s)


def busbw_Bps(op: str, n_bytes, time_s, p):
    """nccl-tests bus bandwidth ``algbw x factor(op, p)`` [bytes/s]."""
    return _out(algbw_Bps(n_bytes, time_s) * busbw_factor(op, p))


@dataclass(frozen=True)
class CollectiveResult:
    """Times and nccl-tests bandwidths of one collective over a range of sizes (arrays of one shape).

    Attributes
    ----------
    op : str
    ranks : int
    size_bytes, time_s, algbw_Bps, busbw_Bps : numpy.ndarray
        algbw = S / t; busbw = algbw x busbw_factor(op, p) (nccl-tests doc/PERFORMANCE.md). For p = 1, time 0, algbw inf, busbw 0.
    algorithm : numpy.ndarray of str
        The algorithm used at each size (the tuner's choice unless forced).
    per_domain, domains : int
        The group's placement.
    level : str
    """

    op: str
    ranks: int
    size_bytes: np.ndarray
    time_s: np.ndarray
    algbw_Bps: np.ndarray
    busbw_Bps: np.ndarray
    algorithm: np.ndarray
    per_domain: int
    domains: int
    level: str

    def rows(self) -> list[dict]:
        """One dict per size with ``size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm``
        (non-finite bandwidths as None)."""
        out = []
        for s, t, a, b, name in zip(self.size_bytes, self.time_s, self.algbw_Bps, self.busbw_Bps, self.algorithm):
            out.append(
                {
                    "size_bytes": int(s),
                    "time_s": float(t),
                    "algbw_GBps": units.Bps_to_GBps(float(a)) if np.isfinite(a) else None,
                    "busbw_GBps": units.Bps_to_GBps(float(b)) if np.isfinite(b) else None,
                    "algorithm": str(name),
                }
            )
        return out
