"""Recomputation of some layers and activation offloading in the training step (stack choices
``recompute_num_layers`` and ``cpu_offload_layers``, :class:`hnplan.catalog.schemas.StackChoices`).

* Block recomputation (Megatron-Core ``--recompute-method block --recompute-num-layers N``): a plan
  with ``recompute="full"`` re-runs the forward of only :func:`hnplan.memory.recompute.block_recomputed_layers`
  of a stage's layers, and repeats only their forward TP collectives (and expert all-to-alls); the other
  layers cost what they cost without recomputation (:func:`block_mix`, :func:`rerun_scale`).
* Activation offloading (Transformer Engine ``cpu_offload``, Megatron-Core ``--cpu-offloading-num-layers``):
  in plans with ``pp = 1`` and ``recompute="none"`` the activations of ``N`` layers go to host memory
  over the host link during the forward pass and come back during the backward pass, behind that pass's
  compute (:func:`hnplan.memory.recompute.offload_exposed_s`); host memory must hold them
  (:func:`activation_offload`).

The memory side of both is :func:`hnplan.memory.activations.stage_activation_table`.
"""

from __future__ import annotations

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import StackChoices
from hnplan.compute import training_flops_per_token
from hnplan.errors import InputError
from hnplan.memory.activations import layer_activation_table
from hnplan.memory.layer_tensors import EagerSaved, routing_weight_bytes
from hnplan.memory.recompute import offload_exposed_s, recomputed_share
from hnplan.memory.tiers import host_memory_bytes_per_gpu
from hnplan.vectorise import column


def eager_saved(ch: StackChoices) -> EagerSaved | None:
    """What the stack's eager code keeps for the backward beyond the fused accounting
    (:class:`hnplan.memory.layer_tensors.EagerSaved`, from ``norm_kernel``, ``act_kernel``,
    ``autocast_fp32_params``, ``autograd_grad_sums`` and ``loss_kernel``), or None for a fused stack."""
    e = EagerSaved(
        norm=ch.norm_kernel == "eager",
        act=ch.act_kernel == "eager",
        fp32_stream=ch.autocast_fp32_params,
        separate_projections=ch.autograd_grad_sums,
        loss=ch.loss_kernel == "eager",
    )
    return e if (e.norm or e.act or e.fp32_stream or e.loss) else None


def block_mix(ch: StackChoices, df, layers, full, whole, dense, moe, h_dense, h_moe, g_sync, h_sync, syncs):
    """The per-layer step parts of a stage of ``layers`` layers under block recomputation [s].

    For plans with ``recompute="full"`` and the stack choice ``recompute_num_layers``: the share
    :func:`hnplan.memory.recompute.recomputed_share` of each part as recomputed (``dense``, ``moe``: GPU
    ``(fwd, bwd, attn, wgrad)``; ``h_dense``, ``h_moe``: host ``(fwd, bwd)``) and the rest as ``whole``
    (the same four parts without recomputation), and the MoE layers' device-host syncs likewise
    (``g_sync``, ``h_sync``: the GPU and host time between syncs; ``syncs``: syncs a layer). Without
    the choice (``whole`` None) the parts come back unchanged.
    """
    if whole is None:
        return dense, moe, h_dense, h_moe, g_sync, h_sync, syncs
    share = np.where(full, recomputed_share(layers, column(df, "virtual_stages"), ch.recompute_num_layers), 1.0)
    d, m, hd, hm = (
        tuple(share * a + (1.0 - share) * b for a, b in zip(x, y)) for x, y in zip((dense, moe, h_dense, h_moe), whole)
    )
    synced = float(ch.moe_host_syncs_per_layer > 0)
    g = np.where(full, synced * m[0], g_sync)
    h = np.where(full, synced * hm[0], h_sync)
    return d, m, hd, hm, g, h, ch.moe_host_syncs_per_layer * (1.0 + full * share)


def rerun_scale(ch: StackChoices, df, layers, full) -> np.ndarray:
    """Factor on a stage's per-layer TP collectives and expert all-to-alls for block recomputation [-]:
    a layer runs them twice (forward, backward) and once more when recomputed, so ``(2 + share) / 3``
    for plans with ``recompute="full"`` where the stack sets ``recompute_num_layers``, else 1."""
    if ch.recompute_num_layers is None:
        return np.ones(len(full))
    share = recomputed_share(layers, column(df, "virtual_stages"), ch.recompute_num_layers)
    return np.where(full, (2.0 + share) / 3.0, 1.0)


def block_hardware_flops(job, df, hardware, full) -> np.ndarray:
    """Hardware FLOPs per token with block recomputation [FLOP]: for plans with ``recompute="full"``
    where the stack sets ``recompute_num_layers``, those without recomputation plus the recomputed
    forward of ``min(N v pp, L) / L`` of the layers (each stage's ``min(N v, L / pp)``); else ``hardware``."""
    n_rc = job.choices.recompute_num_layers
    if n_rc is None or not np.any(full):
        return hardware
    L = job.model.layers
    base = training_flops_per_token(job.model, job.seq_len, "none", job.choices.recompute_modules).hardware
    share = np.minimum(n_rc * column(df, "virtual_stages") * column(df, "pp"), L) / L
    return np.where(full, base + share * (np.asarray(hardware) - base), hardware)


def activation_offload(job, df, layers, t_fwd_mb, t_bwd_mb, memory_cache: dict | None = None):
    """Exposed copy time of activation offloading per micro-batch [s] and the host memory it needs
    per GPU [bytes], for each plan (zeros where the stack offloads nothing or the plan is not one
    Megatron-Core offloads: ``pp > 1`` or recomputation).

    ``N = min(cpu_offload_layers, layers - 1)`` layers of ``a`` bytes each (one micro-batch of one
    layer at the ``none`` level, :func:`hnplan.memory.activations.layer_activation_table`; an MoE
    model's layers averaged) go out over the system's host link during the forward pass (``t_fwd_mb``)
    and back during the backward pass (``t_bwd_mb``): :func:`hnplan.memory.recompute.offload_exposed_s`.

    Raises
    ------
    InputError
        When the stack offloads and the system has no ``host_link_GBps_per_gpu``.
    """
    ch = job.choices
    n = len(np.asarray(t_fwd_mb))
    if not ch.cpu_offload_layers:
        return np.zeros(n), np.zeros(n)
    sys_ = job.system
    if not sys_.host_link_GBps_per_gpu or not sys_.host_memory_gib_per_node:
        raise InputError(
            f"stack choice cpu_offload_layers needs host_link_GBps_per_gpu and host_memory_gib_per_node "
            f"in data/systems/{sys_.id}.yaml"
        )
    on = (column(df, "pp") == 1) & (np.asarray(column(df, "recompute")) == "none")
    m = job.model
    per = layer_activation_table(
        m,
        df,
        job.seq_len,
        sequence_parallel=ch.sequence_parallel,
        flash_attention=ch.attention == "flash",
        dropout=m.dropout,
        fp8_gemm_inputs=units.dtype_bytes(job.dtype) < 2,
        recompute_modules=ch.recompute_modules,
        cache=memory_cache,
        routing_weight=routing_weight_bytes(ch.moe_router_dtype, ch.ep_dispatcher),
        attention_output_copy=ch.attention_output_copy,
        eager=eager_saved(ch),
    )
    dense_layers = m.layers if m.moe is None else m.moe.first_dense_layers
    a = (dense_layers * column(per, "dense") + (m.layers - dense_layers) * column(per, "moe")) / m.layers
    off = np.minimum(ch.cpu_offload_layers, np.maximum(np.asarray(layers, dtype=float) - 1.0, 0.0))
    bw = units.GBps_to_Bps(sys_.host_link_GBps_per_gpu)
    exposed = offload_exposed_s(a, off, bw, t_fwd_mb, t_bwd_mb)
    return np.where(on, exposed, 0.0), np.where(on, off * a, 0.0)


def host_bytes_per_gpu(job) -> float:
    """Host memory one GPU's share of its node holds [bytes] (:func:`hnplan.memory.tiers.host_memory_bytes_per_gpu`)."""
    return host_memory_bytes_per_gpu(job.system)
