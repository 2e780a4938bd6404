"""Runtime overheads of a training process beside its tensors: the CUDA context, NCCL's communicator buffers (the
all-to-all's scaled by the accelerator's NVLink channels) and the allocator's fragmentation reserve. Split from
:mod:`hnplan.memory.training`, which re-exports these names.

References
----------
.. [3] ``data/memory.yaml``: CUDA context, NCCL buffers and allocator fragmentation, each with its source.
.. [5] NVIDIA/nccl ``src/graph/paths.cc`` @ v2.26.3-1: ``ncclTopoGetNchannels`` (2 send/recv channels per NVLink
   to an NVLink peer, ``2 x path bandwidth / one link's``) and ``ncclTopoComputeP2pChannels`` (the channels per
   peer: the power of two at or above the fewest any local peer allows, at most the communicator's p2p channels).
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator

# NCCL opens this many send/recv channels per NVLink to an NVLink peer ([5]_ ncclTopoGetNchannels)
NCCL_P2P_CHANNELS_PER_NVLINK = 2


def nccl_alltoall_scale(acc: Accelerator | None, catalog: Catalog | None = None) -> float:
    """The share of the all-to-all buffer reading (``nccl_alltoall_extra_gib``, [3]_) an accelerator's NCCL
    allocates [-].

    The all-to-all connects every peer over ``c`` send/recv channels, each with its own buffers, so the
    buffers scale with ``c``: ``c = min(c_ref, pow2Up(2 x nvlink_links))`` ([5]_) against the reading's
    ``c_ref`` (``nccl_alltoall_channels_per_peer``, 32 on 8 x H100). An H800's 8 links give 16 channels a
    peer: half the reading. 1.0 for an accelerator without ``nvlink_links`` (or none given).

    >>> cat = load_catalog()
    >>> nccl_alltoall_scale(cat.accelerator("h800-sxm")), nccl_alltoall_scale(cat.accelerator("h100-sxm"))
    (0.5, 1.0)
    """
    if acc is None or acc.nvlink_links is None:
        return 1.0
    ref = (catalog or load_catalog()).memory_overheads.nccl_alltoall_channels_per_peer.value
    wanted = NCCL_P2P_CHANNELS_PER_NVLINK * acc.nvlink_links
    per_peer = 1 << (wanted - 1).bit_length()  # pow2Up
    return min(ref, per_peer) / ref


def training_overheads(
    tensor_bytes: float,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    ep: int = 1,
    catalog: Catalog | None = None,
    alltoall_scale: float = 1.0,
) -> dict:
    """Runtime overheads of one training process [bytes], by part ([3]_).

    ``cuda_context``; ``nccl``: one communicator per parallel group of more than one rank (TP, CP,
    DP x CP, PP, and EP with its all-to-all buffers, ``alltoall_scale`` of the reading:
    :func:`nccl_alltoall_scale`); ``fragmentation``: the allocator's unusable reserve, a fraction of
    ``tensor_bytes`` (model states and activations).

    Returns
    -------
    dict
        ``{"cuda_context": bytes, "nccl": bytes, "fragmentation": bytes}``.
    """
    o = (catalog or load_catalog()).memory_overheads
    groups = sum(1 for g in (tp, cp, dp * cp, pp, ep) if g > 1)
    a2a = o.nccl_alltoall_extra_gib.value * alltoall_scale
    nccl = groups * o.nccl_gib_per_communicator.value + (a2a if ep > 1 else 0.0)
    return {
        "cuda_context": units.GiB_to_bytes(o.cuda_context_gib.value),
        "nccl": units.GiB_to_bytes(nccl),
        "fragmentation": o.allocator_fragmentation_fraction.value * tensor_bytes,
    }


def overhead_terms(
    tp, pp, dp, cp, ep, catalog: Catalog | None = None, alltoall_scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`training_overheads` over arrays of plans, summed: ``(fixed [bytes], slope [-])`` with
    ``sum(training_overheads(t, ...).values()) == fixed + slope * t`` (the same arithmetic, element by
    element).

    >>> f, s = overhead_terms([1, 8], [1, 1], [1, 1], [1, 1], [1, 1])
    >>> bool(f[1] > f[0]), bool(np.isclose(s[0], s[1]))  # the TP communicator's buffers; the same reserve
    (True, True)
    >>> o = training_overheads(80e9, tp=8)  # the slope is the fragmentation fraction, the rest is fixed
    >>> bool(s[1] == load_catalog().memory_overheads.allocator_fragmentation_fraction.value)
    True
    >>> bool(f[1] + s[1] * 80e9 == sum(o.values())), bool(f[1] == o["cuda_context"] + o["nccl"])
    (True, True)
    """
    o = (catalog or load_catalog()).memory_overheads
    tp, pp, dp, cp, ep = np.broadcast_arrays(*(np.asarray(x) for x in (tp, pp, dp, cp, ep)))
    groups = sum((g > 1).astype(np.int64) for g in (tp, cp, dp * cp, pp, ep))
    a2a = o.nccl_alltoall_extra_gib.value * alltoall_scale
    nccl = groups * o.nccl_gib_per_communicator.value + np.where(ep > 1, a2a, 0.0)
    cuda, nccl_b = units.GiB_to_bytes(o.cuda_context_gib.value), units.GiB_to_bytes(nccl)
    fixed = cuda + nccl_b  # the CUDA context and NCCL buffers do not grow with the tensors
    # the allocator's fragmentation reserve is the only part proportional to the tensor bytes
    return fixed, np.full(np.shape(fixed), o.allocator_fragmentation_fraction.value)
