"""Chunk counts of the GEMMs that Transformer Engine's userbuffers overlap with TP communication.

A stack that overlaps TP communication (``tp_comm``: Megatron-Core / NeMo ``tp_comm_overlap``, which needs
sequence parallelism) runs each overlapped GEMM of a Transformer layer as chunks, one GEMM kernel each, the
communication of one chunk beside the GEMM of the next ([1]_). The chunk count follows the overlap method
Transformer Engine's ``initialize_ub`` gives the userbuffers layer ([2]_):

* ``ring_exchange`` (``CommOverlapP2PBase``): ``tp`` chunks of ``m / tp`` rows
  (``split_overlap_ag``, ``split_overlap_rs``); with ``aggregate`` the all-gather exchanges pairs of chunks,
  ``tp / 2`` GEMMs of ``2 m / tp`` rows (``split_overlap_ag`` only; the reduce-scatter ignores it);
* ``pipeline`` (``CommOverlapBase::split_overlap_rs``, reduce-scatter only): ``num_splits`` chunks;
* ``bulk`` (``CommOverlapBase::bulk_overlap``): one GEMM beside a whole collective.

Layers a configuration leaves out take ``initialize_ub``'s defaults: ring exchange for the all-gather
overlaps ``qkv_fprop``, ``fc1_fprop``, ``proj_dgrad``, ``fc2_dgrad``; ``pipeline`` with ``num_splits`` 4 for
the reduce-scatter overlaps ``proj_fprop``, ``fc2_fprop``; bulk for the column-parallel data and weight
gradients (``qkv_dgrad``, ``qkv_wgrad``, ``fc1_dgrad``, ``fc1_wgrad``), which therefore stay whole here.
Megatron-LM's ``--tp-comm-overlap`` without ``--tp-comm-overlap-cfg`` passes no configuration: the defaults
throughout. A stack's ``tp_overlap_cfg`` (:class:`hnplan.catalog.schemas.StackChoices`) holds the
configurations it ships by accelerator (or ``default``) and TP degree (NeMo's ``userbuffers_*``
configurations, MLPerf submissions' ``conf/tp_overlap/*.yaml``); the entry of the largest TP key not above
the run's TP applies. An ``atomic_gemm`` layer (fp8 only) runs one GEMM kernel for all its chunks.

References
----------
.. [1] NVIDIA Transformer Engine ``transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp`` at
   015939a (``CommOverlapP2PBase::split_overlap_ag``: ``num_steps = tp_size / 2`` GEMMs of
   ``2 n_chunk`` rows with ``_aggregate``, else ``tp_size`` GEMMs of ``n_chunk``;
   ``CommOverlapBase::split_overlap_rs``: ``m_chunk = m / num_splits``).
.. [2] NVIDIA Transformer Engine ``transformer_engine/pytorch/module/base.py`` at fecb10b, ``initialize_ub``:
   the ``methods`` table (ring_exchange / pipeline / bulk per layer) and ``num_splits = 4 if method ==
   "pipeline" else 0`` when a layer is not configured; ``aggregate`` defaults to 0.
"""

from __future__ import annotations

import numpy as np

# hnplan's GEMM rows (forward operator, row phase) that a TP overlap can chunk -> Transformer Engine's
# userbuffers layer; a recomputed forward runs as the forward does
UB_LAYERS = {
    ("qkv_proj", "fwd"): "qkv_fprop",
    ("qkv_proj", "recompute"): "qkv_fprop",
    ("mlp_up", "fwd"): "fc1_fprop",
    ("mlp_up", "recompute"): "fc1_fprop",
    ("o_proj", "fwd"): "proj_fprop",
    ("o_proj", "recompute"): "proj_fprop",
    ("o_proj", "bwd-data"): "proj_dgrad",
    ("mlp_down", "fwd"): "fc2_fprop",
    ("mlp_down", "recompute"): "fc2_fprop",
    ("mlp_down", "bwd-data"): "fc2_dgrad",
}
CHUNKED_GEMMS = frozenset(name for name, _ in UB_LAYERS)
# the layers whose GEMM input is all-gathered (the rest reduce-scatter the GEMM output) ([2]_
# ``layers_all_gather_overlap``)
ALL_GATHER_LAYERS = frozenset({"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"})
# Transformer Engine's default method of each chunkable layer ([2]_ ``methods``)
TE_DEFAULT_METHODS = {
    "qkv_fprop": "ring_exchange",
    "fc1_fprop": "ring_exchange",
    "proj_dgrad": "ring_exchange",
    "fc2_dgrad": "ring_exchange",
    "proj_fprop": "pipeline",
    "fc2_fprop": "pipeline",
}
TE_DEFAULT_NUM_SPLITS = 4


def layer_chunks(layer: str, method: str, tp, num_splits: int = TE_DEFAULT_NUM_SPLITS, aggregate: bool = False):
    """GEMM kernels one overlapped GEMM of userbuffers ``layer`` runs as (module docstring; [1]_).

    Parameters
    ----------
    layer : str
        Transformer Engine userbuffers layer (a value of :data:`UB_LAYERS`).
    method : {"ring_exchange", "pipeline", "bulk"}
    tp : int or numpy.ndarray of int
        Tensor-parallel degree (an array over shapes: the result is one too).
    num_splits : int
        Chunks of the ``pipeline`` method.
    aggregate : bool
        The ring exchange of an all-gather layer exchanges chunk pairs.

    Returns
    -------
    int or numpy.ndarray
        ``tp`` (ring exchange), ``tp // 2`` (ring exchange of an all-gather with ``aggregate``),
        ``num_splits`` (pipeline) or 1 (bulk); 1 wherever ``tp`` is 1 (no TP communication to overlap).

    >>> layer_chunks("qkv_fprop", "ring_exchange", 8), layer_chunks("qkv_fprop", "ring_exchange", 8, aggregate=True)
    (8, 4)
    >>> layer_chunks("proj_fprop", "ring_exchange", 8, aggregate=True), layer_chunks("fc2_fprop", "pipeline", 8)
    (8, 4)
    """
    if method == "bulk":
        chunks = 1 + 0 * tp
    elif method == "pipeline":
        chunks = num_splits + 0 * tp
    elif aggregate and layer in ALL_GATHER_LAYERS:
        chunks = np.maximum(tp // 2, 1) if isinstance(tp, np.ndarray) else max(tp // 2, 1)
    else:
        chunks = tp
    if isinstance(tp, np.ndarray):
        return np.where(tp > 1, chunks, 1)
    return chunks if tp > 1 else 1


def ub_config(choices_cfg) -> tuple:
    """A stack's ``tp_overlap_cfg`` ({accelerator id or "default": {tp: {layer: TPOverlapLayer}}}) as a hashable
    tuple ``((key, ((min_tp, ((layer, method, num_splits, aggregate, atomic_gemm), ...)), ...)), ...)``."""
    return tuple(
        (
            key,
            tuple(
                (
                    int(t),
                    tuple(
                        sorted(
                            (name, c.method, int(c.num_splits), bool(c.aggregate), bool(c.atomic_gemm))
                            for name, c in layers.items()
                        )
                    ),
                )
                for t, layers in sorted(by_tp.items())
            ),
        )
        for key, by_tp in sorted(choices_cfg.items())
    )


def overlap_chunks(cfg: tuple, layer: str, tp, acc_id: str | None = None):
    """Chunks of ``layer``'s GEMM at ``tp`` (an int or an array over shapes) under a stack's configurations
    ``cfg`` (:func:`ub_config`) on accelerator ``acc_id``: its own table, else the ``default`` one; in it the
    entry with the largest TP key not above ``tp``. A layer that entry leaves out, and any ``tp`` below every
    key, takes Transformer Engine's default ([2]_). An ``atomic_gemm`` layer runs one GEMM kernel whose
    output tiles signal the collective chunk by chunk (``CommOverlapBase::atomic_gemm_overlap_rs``,
    ``CommOverlapP2PBase::atomic_gemm_overlap_ag``): 1.

    >>> cfg = (("default", ((8, (("qkv_fprop", "ring_exchange", 4, True, False),)),)),)
    >>> overlap_chunks(cfg, "qkv_fprop", 4), overlap_chunks(cfg, "qkv_fprop", 8), overlap_chunks(cfg, "fc2_fprop", 8)
    (4, 4, 4)
    >>> overlap_chunks((), "proj_dgrad", np.array([1, 2, 8])).tolist()
    [1, 2, 8]
    """
    tables = dict(cfg)
    table = tables.get(acc_id or "", tables.get("default", ()))
    default = TE_DEFAULT_METHODS[layer]
    out = layer_chunks(layer, default, tp)
    for min_tp, layers in table:
        spec = next((x[1:] for x in layers if x[0] == layer), (default, TE_DEFAULT_NUM_SPLITS, False, False))
        chunks = 1 + 0 * tp if spec[3] else layer_chunks(layer, spec[0], tp, spec[1], spec[2])
        if isinstance(tp, np.ndarray):
            out = np.where(tp >= min_tp, chunks, out)
        elif tp >= min_tp:
            out = chunks
    return out
