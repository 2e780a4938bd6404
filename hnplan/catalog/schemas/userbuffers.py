"""One layer's entry in a stack's Transformer Engine userbuffers configuration (``tp_overlap_cfg``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hnplan.catalog.schemas.base import PosInt, _Strict

# Transformer Engine's userbuffers layers whose GEMMs an overlap can chunk: the all-gather overlaps, then the
# reduce-scatter ones (NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py, initialize_ub);
# the bulk-only column-parallel data and weight gradients run whole whatever the configuration
UbLayer = Literal["qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad", "proj_fprop", "fc2_fprop"]


class TPOverlapLayer(_Strict):
    """How Transformer Engine overlaps one layer's GEMM with its TP collective (a NeMo
    ``RingExchangeOverlapCfg`` / ``PipelineOverlapCfg`` / ``BulkOverlapCfg``, an MLPerf ``tp_overlap`` yaml
    entry); the chunk counts they imply: :mod:`hnplan.compute.tp_overlap`."""

    method: Literal["ring_exchange", "pipeline", "bulk"] = Field(description="userbuffers overlap method")
    num_splits: PosInt = Field(default=4, description="chunks of the pipeline method (Transformer Engine default 4)")
    aggregate: bool = Field(default=False, description="ring exchange of an all-gather moves chunk pairs")
    atomic_gemm: bool = Field(default=False, description="one GEMM kernel signals each chunk's collective (fp8)")


def frozen(value):
    """``value`` with its dicts as sorted item tuples and lists as tuples, for hashing."""
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    return value


def check_tp_overlap_cfg(cfg: dict) -> None:
    """Raise ValueError for a ``pipeline`` all-gather layer (Transformer Engine ``initialize_ub``: the
    pipeline method overlaps reduce-scatters only)."""
    for key, by_tp in cfg.items():
        for tp, layers in by_tp.items():
            for name, c in layers.items():
                if c.method == "pipeline" and name in ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"):
                    raise ValueError(
                        f"tp_overlap_cfg.{key}.{tp}.{name}: the pipeline method overlaps reduce-scatters only "
                        "(proj_fprop, fc2_fprop); all-gathers use ring_exchange or bulk"
                    )


__all__ = ["TPOverlapLayer", "UbLayer", "check_tp_overlap_cfg", "frozen"]
