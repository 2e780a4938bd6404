"""Message sizes of the collectives a transformer layer issues (one definition for training and serving).

References
----------
.. [1] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC21, Sec. 2.3 and Fig. 5 (tensor-parallel all-reduces of the ``b s h`` activations).
.. [2] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023,
   Sec. 4.2.2 (with sequence parallelism each all-reduce becomes a reduce-scatter plus an all-gather of
   the same volume).
"""

from __future__ import annotations

import numpy as np

from hnplan.catalog.schemas import Model
from hnplan.compute import ACT_BYTES


def tp_message_bytes(model: Model, microbatch, seq_len, cp=1):
    """Bytes of one tensor-parallel collective of a layer: the ``b s / cp x h`` 16-bit activations [bytes]
    ([1]_; the same volume with sequence parallelism, [2]_).

    Parameters
    ----------
    model : Model
    microbatch : int or array
        Sequences in the micro-batch (training) or the tokens of one pass with ``seq_len = 1`` (serving).
    seq_len : int or array
        Tokens per sequence.
    cp : int or array
        Context-parallel degree (each rank holds ``s / cp`` tokens).

    Returns
    -------
    float or numpy.ndarray [bytes], the broadcast shape of the inputs.

    >>> from hnplan.catalog import load_catalog
    >>> tp_message_bytes(load_catalog().model("llama3.1-8b"), 1, 4096) / 2**20   # 4096 x 4096 x 2 B, MiB
    32.0
    """
    return microbatch * seq_len / cp * model.hidden * ACT_BYTES


FP8_SCALE_BLOCK = 128  # elements per fp32 scale of a 1 x 128 FP8 activation tile (arXiv:2412.19437 Sec. 3.3.2)
FP8_SCALE_BYTES = 4.0  # one fp32 scale per tile


def ep_token_bytes(hidden: int, fp8: bool = False) -> float:
    """Bytes of one token copy in an expert-parallel all-to-all [bytes]: ``h`` elements in bf16, or in
    FP8 with one fp32 scale per ``1 x 128`` tile (DeepSeek-V3 [3]_ Sec. 3.3.2: the activations before the
    MoE up-projection are quantised to FP8 and then dispatched; DeepEP [4]_ dispatches ``(data, scales)``).

    >>> ep_token_bytes(7168)              # bf16: 7168 x 2
    14336.0
    >>> ep_token_bytes(7168, fp8=True)    # 7168 x 1 + 56 scales x 4
    7392.0

    References
    ----------
    .. [3] DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437, Sec. 3.3.2 (low-precision
       communication: FP8 dispatch, bf16 combine, forward and backward).
    .. [4] deepseek-ai/DeepEP, README and docs/legacy.md (normal kernels: FP8 dispatching, BF16 combining).
    """
    if not fp8:
        return float(hidden * ACT_BYTES)
    return float(hidden + -(-hidden // FP8_SCALE_BLOCK) * FP8_SCALE_BYTES)


def ep_alltoall_bytes(model: Model, tokens, fp8_dispatch: bool = False, imbalance: float = 1.0):
    """Bytes the busiest rank receives in one dispatch and in one combine of an MoE layer [bytes].

    A rank holding ``T`` tokens sends each to its ``k`` routed experts (``T k`` token copies, the
    nccl-tests size ``S`` of a pairwise all-to-all, [3]_ Sec. 3.2.2); the busiest expert-parallel rank
    receives ``imbalance`` times the mean. Forward dispatch and, in the backward, the activation gradients
    sent back to the experts (the combine's mirror) use the dispatch width; forward combine and the
    dispatch's mirror (gradients returned to the tokens) stay bf16 ([3]_ Sec. 3.3.2).

    Returns
    -------
    (dispatch, combine) : tuple of float or numpy.ndarray [bytes]

    >>> from hnplan.catalog import load_catalog
    >>> d, c = ep_alltoall_bytes(load_catalog().model("deepseek-v3"), 4096, fp8_dispatch=True)
    >>> d / 2**20, c / 2**20    # 4096 tokens x top-8 x 7,392 B and x 14,336 B, MiB
    (231.0, 448.0)
    """
    k = model.moe.active_experts if model.moe is not None else 0
    copies = tokens * k * imbalance
    return copies * ep_token_bytes(model.hidden, fp8_dispatch), copies * ep_token_bytes(model.hidden, False)


def random_routing_peak(tokens_per_rank, k: int, experts: int, ep) -> np.ndarray:
    """Busiest expert-parallel rank's routed token copies over the mean when every token picks ``k`` of
    ``experts`` at random (Megatron-Core's force-balanced benchmark routing, random router logits) [-].

    Each of the ``N = ep x T`` tokens of a micro-batch puts a hypergeometric number of its ``k`` copies on
    a rank of ``e = experts / ep`` experts: mean ``k e / E``, variance ``v = k (e/E)(1 - e/E)(E - k)/(E - 1)``;
    a rank's load has mean ``mu = T k`` and standard deviation ``sigma = sqrt(N v)``, and the largest of
    ``ep`` near-normal loads sits ``z = Phi^-1((ep - 0.375) / (ep + 0.25))`` deviations above the mean
    (Blom's approximation of the expected maximum of normal order statistics: G. Blom, *Statistical
    Estimates and Transformed Beta-Variables*, Wiley 1958, Sec. 6.10). Returns
    ``1 + z sigma / mu``; 1 for ``ep = 1``. Routing that is not random (learned routers, content that
    prefers experts) adds to it: the stack's ``moe_load_imbalance``.

    Parameters
    ----------
    tokens_per_rank : float or array
        Tokens a rank routes per micro-batch, ``T`` [-].
    k, experts : int
        Experts per token and routed experts.
    ep : int or array
        Expert-parallel ranks.

    Returns
    -------
    numpy.ndarray
        ``>= 1``.

    Examples
    --------
    DeepSeek-V3 with 4,096 tokens a rank at EP 64: ``sigma = sqrt(262,144 x 0.1197) = 177`` over
    ``mu = 32,768``, ``z = 2.33``:

    >>> round(float(random_routing_peak(4096, 8, 256, 64)[0]), 4)
    1.0126
    """
    t, ep = np.broadcast_arrays(
        np.atleast_1d(np.asarray(tokens_per_rank, dtype=float)), np.atleast_1d(np.asarray(ep, dtype=float))
    )
    z = _normal_quantile(np.clip(_blom_probability(ep), 0.5, None))
    return np.where(ep > 1, _peak_over_mean(t, k, experts, ep, z), 1.0)


def _normal_quantile(p: np.ndarray) -> np.ndarray:
    """The standard normal quantile ``Phi^-1(p)`` of each ``p`` in ``(0, 1)``, once per distinct value (a search's
    plans share a few EP sizes), with the standard library's :class:`statistics.NormalDist` (Wichura's
    algorithm AS 241, about 1e-16 relative; the same values :func:`random_routing_peak_one` takes). Not
    ``scipy.special.ndtri``, which agrees within a few 1e-15 but costs about 0.15 s of CPU to import."""
    from statistics import NormalDist

    inv_cdf = NormalDist().inv_cdf
    values, at = np.unique(p, return_inverse=True)
    return np.array([inv_cdf(float(x)) for x in values])[at].reshape(p.shape)


def random_routing_peak_one(tokens_per_rank: float, k: int, experts: int, ep: int) -> float:
    """:func:`random_routing_peak` of one scalar, without numpy arrays (the serving CLI's per-step loop) [-].

    >>> round(random_routing_peak_one(4096, 8, 256, 64), 4)
    1.0126
    """
    if ep <= 1:
        return 1.0
    from statistics import NormalDist

    z = NormalDist().inv_cdf(max(_blom_probability(ep), 0.5))
    return float(_peak_over_mean(tokens_per_rank, k, experts, ep, z))


def _blom_probability(ep):
    """Blom's plotting position of the largest of ``ep`` normal draws, ``(ep - 0.375) / (ep + 0.25)`` [-]."""
    return (ep - 0.375) / (ep + 0.25)


def _peak_over_mean(t, k, experts, ep, z):
    """``1 + z sigma / mu`` of :func:`random_routing_peak` for ``T = t`` tokens a rank and quantile ``z``."""
    share = 1.0 / ep  # e / E: the share of the experts a rank holds
    v = k * share * (1.0 - share) * (experts - k) / max(experts - 1, 1)
    sigma = np.sqrt(ep * t * v)
    return 1.0 + z * sigma / (t * k)
