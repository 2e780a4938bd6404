"""Host (CPU-side) time of a training step: kernel launches, device-host syncs and CUDA graphs.

A PyTorch training stack launches every kernel from one host thread per GPU. The GPU runs ahead of nothing: it
runs a kernel only once the host has launched it, so a stretch of the step between two points where the host
waits for the device (a device-host sync) takes ``max(GPU time, host time)`` of its kernels, and each sync
costs the copy's round trip and the launch of the first kernel after it, during which the GPU idles
(NVIDIA/Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization``: "the CPU kernel launch speed cannot
keep up with the kernel execution speed on GPU ... host boundedness").

Host time per kernel: the stack's ``kernel_launch_us`` for every kernel launched outside a CUDA graph, 0 for a
kernel inside a captured scope (``cuda_graph_scope``; Megatron-Core ``--cuda-graph-impl transformer_engine
--cuda-graph-scope``, forward and backward graphs per layer and micro-batch; the replay of a graph, about one
launch, is not counted). Kernels per operator row of :mod:`hnplan.compute.operators`: one, except

* the routed-expert GEMMs and their quantisation under ``expert_gemm_launch: per_expert``: one per local expert
  (Transformer Engine ``GroupedLinear`` runs ``general_grouped_gemm``, one cuBLAS GEMM per expert on a few
  streams, and quantises each expert's split on its own), except the input and output-gradient splits under
  per-tensor delayed scaling where the GEMMs need transposed copies (Hopper) and the cast-transpose is fused:
  ``split_quantize`` then runs Transformer Engine's fused multi-tensor cast-transpose, one kernel per
  :data:`MULTI_CAST_TRANSPOSE_TENSORS` splits (``transformer_engine/pytorch/csrc/extensions/cast.cpp``,
  ``multi_tensor_quantize_impl``: the fused path for ``Float8Quantizer`` outputs with row- and column-wise
  data, every other quantiser one kernel per split; ``transformer_engine/common/transpose/
  multi_cast_transpose.cu``: ``kMaxTensorsPerKernel = 64`` tensors in one launch's arguments);
* eager norm and rotary chains (``norm_kernel`` / ``rope_kernel: eager``): :data:`EAGER_CHAIN_KERNELS`;
* autograd's gradient sums at the input of separate query, key and value projections (``qkv_grad_sum``): two;
* the experts' FC2 bias of a model with expert biases (``expert_bias_eager``, :func:`hnplan.compute.eager_ops.expert_bias_op`):
  Megatron-Core's loop over the local experts, a multiply and an add each, then a concatenation and a cast
  (``2 x local experts + 2``; the packed form five; the backward assumed the same, where autograd runs about five
  an expert: an undercount);
* the router and the dispatcher's preprocess of an MoE layer, whose element-wise chain hnplan times as one row
  or not at all: :data:`ROUTER_PREPROCESS_KERNELS` per pass (forward; the backward assumed the same).

Device-host syncs: Megatron-Core's dropless token dispatchers copy the tokens per expert to the host (an output
size the host must know to allocate and to launch the grouped GEMMs) ``moe_host_syncs_per_layer`` times per MoE
layer forward (again when full recomputation re-runs it; the backward reuses the sizes). Only the forward
passes of the MoE layers are cut into sync-delimited stretches, one per layer and sync; the rest of a
micro-batch (dense layers, backward, embedding and head) is one stretch in which the host may run ahead.

MoE layers' host work: the kernels of an MoE layer's own scopes (:data:`MOE_SCOPES`: router, dispatcher
preprocess, shared experts, routed experts and permutes) launched outside a CUDA graph cost
``kernel_launch_us + moe_host_us_per_kernel`` each: the host-only work of Megatron-Core's router and token
dispatcher and of Transformer Engine's ``GroupedLinear`` between them (tensor allocations, splits, Python; NVIDIA/
TransformerEngine issue 1499: ``torch.split`` and ``2 x num_gemms`` ``torch.empty`` per forward), spread over the
kernels hnplan lists. The Megatron-Core stacks carry a value fitted by least squares to their published eager
MoE runs (``tools/fit_moe_host.py``; data/stacks/megatron-core.yaml ``field_sources``); a captured scope takes
none of it, and the attention half and dense layers keep the launch alone.

Host CPU: ``kernel_launch_us`` is per call on the x86 servers it was measured on; the planner scales it by the
system's ``host_dispatch_factor`` (:func:`hnplan.planning.training.job.host_scaled`; 2.75 on GB200's Grace:
NVIDIA/TransformerEngine issue 2053 times a torch.nn.Linear forward at 37.08 us of CPU there, 13.48 us on a DGX
H100), so the functions here take the scaled choices. ``moe_host_us_per_kernel`` is not scaled: the Grace
rows of the fit do not support it (they land further from their published runs with it scaled; docs/training.md).

Assumptions (labelled, not measured): a sync costs :data:`SYNC_LATENCY_S` plus one launch; the sync-delimited stretches of a layer are alike, so
``s`` stretches of a layer take ``max(g, h) + s x sync``.
"""

from __future__ import annotations

import math

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import StackChoices
from hnplan.compute.eager_ops import CLAMP_CHAIN_KERNELS, EXPERT_BIAS_PACKED_KERNELS, QKV_GRAD_SUMS

# A device-to-host copy of a few bytes and the event the host waits on: about 10 us over PCIe or NVLink-C2C
# (CUDA's small-transfer latency; assumed, not measured on the catalog's hosts).
SYNC_LATENCY_S = 10e-6
#: kernels of an eager chain (Hugging Face transformers ``modeling_llama.py``): LlamaRMSNorm is
#: to(float32), pow, mean, add eps, rsqrt, mul, to(dtype), mul by the weight (8); apply_rotary_pos_emb on q and
#: k is, each, q * cos, neg, cat (rotate_half), * sin, add (5, 10 for both); foundation-model-stack's rotary
#: float, mul, sum, type_as (4, 8 for both; fms/modules/positions.py), the complex one float, mul, type_as (3, 6);
#: the eager SwiGLU silu and mul (2); the GQA expansion one copy each of K and V (2)
EAGER_CHAIN_KERNELS = {"norm": 8.0, "rope": 10.0, "rope_matrix": 8.0, "rope_complex": 6.0, "swiglu": 2.0, "kv": 2.0}
#: kernels of an MoE layer's router and dispatcher preprocess per pass, by dispatcher
#: (NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization Sec. 2.1.4 and 2.2: 31 in the router after
#: ``--moe-router-fusion`` with the all-to-all dispatcher, whose preprocess adds more (not counted); 17 for router
#: and preprocess with DeepEP's fused preprocess, the flex dispatcher); hnplan's own router row is one of them
ROUTER_PREPROCESS_KERNELS = {"alltoall": 31.0, "flex": 17.0}
GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "full_iteration")
#: the graph scopes of an MoE layer's own work (router and dispatcher preprocess, shared experts, routed experts
#: with their quantisation, permutes and residual), whose kernels carry ``moe_host_us_per_kernel`` beside the launch
MOE_SCOPES = ("moe_router", "moe_preprocess", "moe")
_ROUTED = ("expert_up", "expert_down", "expert_act", "expert_bias", "moe_permute")  # name prefixes
#: tensors one launch of Transformer Engine's fused multi-tensor fp8 cast-transpose takes
#: (``transformer_engine/common/transpose/multi_cast_transpose.cu``: ``kMaxTensorsPerKernel = 64``, its
#: arguments kept under the 4 KB kernel-parameter limit)
MULTI_CAST_TRANSPOSE_TENSORS = 64


def graph_scope(name: str, part_scope: str) -> str | None:
    """The Megatron-Core CUDA-graph scope an operator row belongs to, or None (embedding, head: never captured).

    ``attn``: the layer's attention half (input norm, projections, rotary, attention core, residual);
    ``mlp``: a dense layer's MLP half; in an MoE layer ``moe_router`` the pre-MLP norm and the router,
    ``moe_preprocess`` the shared experts (the deepseek-v3-gb200-optimization guide, Sec. 2.3: ``attn moe_router
    moe_preprocess`` capture "attention, router, EP preprocess, and shared experts"), ``moe`` the routed experts,
    their permutation and the residual (dynamic shapes: capturable only without syncs).

    >>> graph_scope("qkv_proj_x_mxfp8", "moe-layer"), graph_scope("expert_up", "moe-layer")
    ('attn', 'moe')
    """
    if not part_scope.endswith("layer"):
        return None
    if name.startswith("mlp_") and part_scope == "dense-layer":
        return "mlp"
    if part_scope == "moe-layer":
        if name.startswith(("router", "mlp_norm")):
            return "moe_router"
        if name.startswith("shared_expert"):
            return "moe_preprocess"
        if name.startswith((*_ROUTED, "mlp_residual")):
            return "moe"
    return "attn"


def kernels_per_row(
    name: str, part_scope: str, kind: str, groups: float, ch: StackChoices, multi_cast_transpose: bool = False
) -> float:
    """Kernels one operator row launches per occurrence (module docstring) [-]. ``multi_cast_transpose``: the
    routed experts' fp8 input and output-gradient splits are quantised by the fused multi-tensor cast-transpose
    (per-tensor delayed scaling with transposed copies and the cast-transpose fused; the caller knows the chip).

    >>> kernels_per_row("expert_up", "moe-layer", "gemm", 16.0, StackChoices())
    16.0
    >>> kernels_per_row("attn_norm", "dense-layer", "elementwise", 1.0, StackChoices(norm_kernel="eager"))
    8.0

    128 local experts (Qwen3-235B-A22B at EP 1): their input splits in 128 cast kernels, or in
    ``ceil(128 / 64) = 2`` fused launches:

    >>> [kernels_per_row("expert_up_x_fp8", "moe-layer", "elementwise", 128.0, StackChoices(), f) for f in (0, 1)]
    [128.0, 2.0]
    """
    if ch.expert_gemm_launch == "per_expert" and name.startswith(("expert_up", "expert_down")):
        if multi_cast_transpose and kind != "gemm" and name.endswith(("_x_fp8", "_dy_fp8")):
            return float(math.ceil(max(groups, 1.0) / MULTI_CAST_TRANSPOSE_TENSORS))
        return float(max(groups, 1.0))
    if kind != "elementwise":
        return 1.0
    if name.endswith(("_norm", "_norm_eager")) and ch.norm_kernel == "eager":
        return EAGER_CHAIN_KERNELS["norm"]
    if name in ("rope", "rope_eager") and ch.rope_kernel != "fused":
        return EAGER_CHAIN_KERNELS[{"eager": "rope", "eager_matrix": "rope_matrix"}.get(ch.rope_kernel, "rope_complex")]
    if (
        name == "rope_eager"
    ):  # a fused stack's model with a YaRN attention factor (hnplan.compute.layer_ops.rope_kernels)
        return EAGER_CHAIN_KERNELS["rope"]
    if name.endswith("_act_eager"):
        return EAGER_CHAIN_KERNELS["swiglu"]
    if name.endswith("_act_clamp_eager"):  # hnplan.compute.eager_ops.act_clamp_op: its passes' kernels, averaged
        chain = "eager" if ch.act_kernel == "eager" else "quick_geglu"
        return sum(CLAMP_CHAIN_KERNELS[chain]) / 2.0
    if name == "kv_expand":
        return EAGER_CHAIN_KERNELS["kv"]
    if name == "expert_bias_eager":  # hnplan.compute.eager_ops.expert_bias_op: a multiply and an add per expert
        if ch.expert_bias_kernel == "packed":
            return float(EXPERT_BIAS_PACKED_KERNELS)
        return 2.0 * max(groups, 1.0) + 2.0
    if name == "qkv_grad_sum":  # two sums at the input of separate q, k, v projections (hnplan.compute.eager_ops)
        return float(QKV_GRAD_SUMS)
    return 1.0


def captured(scope: str | None, ch: StackChoices) -> bool:
    """Whether a row of that graph scope runs inside a CUDA graph under the stack's ``cuda_graph_scope``
    (``full_iteration``: every row, embedding and head included)."""
    scopes = ch.cuda_graph_scope
    return "full_iteration" in scopes or (scope is not None and scope in scopes)


def row_host_s(
    rows: list,
    ch: StackChoices,
    local_experts: float = 1.0,
    memo: dict | None = None,
    multi_cast_transpose: bool = False,
) -> np.ndarray:
    """Host time of each raw operator row (name, scope, kind, phase, ..., groups) per occurrence [s].

    ``local_experts``: routed experts on the rank, for the expert quantisation rows (which carry no groups).
    Evaluated once per distinct (name, scope, kind, groups, local_experts), a few dozen per model; ``memo``: a
    dict to share those between calls with the same ``ch`` and ``multi_cast_transpose``
    (:func:`kernels_per_row`).
    """
    memo = {} if memo is None else memo
    launch_s = units.us_to_s(ch.kernel_launch_us)

    moe_kernel_s = moe_kernel_host_s(ch)

    def one(name, scope, kind, groups) -> float:
        g = graph_scope(name, scope)
        if captured(g, ch):
            return 0.0
        per = groups if kind == "gemm" else local_experts
        cost = moe_kernel_s if g in MOE_SCOPES else launch_s
        return kernels_per_row(name, scope, kind, per, ch, multi_cast_transpose) * cost

    out = []
    for r in rows:
        key = (r[0], r[1], r[2], r[10], local_experts)
        t = memo.get(key)
        if t is None:
            t = memo[key] = one(r[0], r[1], r[2], r[10])
        out.append(t)
    return np.array(out, dtype=float)


def moe_kernel_host_s(ch: StackChoices) -> float:
    """Host time of one kernel of an MoE layer's own scopes (:data:`MOE_SCOPES`) launched outside a CUDA
    graph [s]: the launch (``kernel_launch_us``) and the MoE layer's host work beyond it spread over its
    kernels (``moe_host_us_per_kernel``).

    >>> round(moe_kernel_host_s(StackChoices(kernel_launch_us=13.1, moe_host_us_per_kernel=40.0)) * 1e6, 6)
    53.1
    """
    return units.us_to_s(ch.kernel_launch_us + ch.moe_host_us_per_kernel)


def router_host_s(ch: StackChoices) -> float:
    """Host time of the router and dispatcher preprocess kernels of one MoE layer per pass that the operator
    rows do not list (:data:`ROUTER_PREPROCESS_KERNELS` less hnplan's router row, each at
    :func:`moe_kernel_host_s`) [s]; 0 when captured."""
    if captured("moe_router", ch) and captured("moe_preprocess", ch):
        return 0.0
    return (ROUTER_PREPROCESS_KERNELS[ch.ep_dispatcher] - 1.0) * moe_kernel_host_s(ch)


def sync_s(ch: StackChoices) -> float:
    """GPU idle time of one device-host sync [s]: the copy's round trip and the launch of the next kernel."""
    return SYNC_LATENCY_S + units.us_to_s(ch.kernel_launch_us)


def stage_times(
    g_fwd, g_bwd, h_fwd, h_bwd, g_sync, h_sync, n_sync, t_sync, p2p_sync=False, tail_bwd=0.0, rc=(0.0, 0.0)
):
    """Forward and backward time of one micro-batch on a stage with the host in the loop [s].

    Parameters
    ----------
    g_fwd, g_bwd : array
        GPU time of the stage's forward (with recomputation) and backward [s].
    h_fwd, h_bwd : array
        Host time launching them [s].
    g_sync, h_sync : array
        The part of ``g_fwd`` / ``h_fwd`` in sync-delimited stretches (the MoE layers' forwards) [s].
    n_sync : array
        Device-host syncs in the micro-batch [-].
    t_sync : float
        GPU idle per sync [s].
    p2p_sync : bool or array
        Each pass ends in a device sync (the non-interleaved pipeline schedule's batched P2P exchange,
        Megatron-Core ``p2p_communication.py``, ``torch.cuda.synchronize()``): forward and backward are then
        stretches of their own, each one ``t_sync`` longer, and the backward lasts at least its host time plus
        ``tail_bwd``.
    tail_bwd : array
        GPU time of the backward's last kernels, launched after the rest of its host work (the attention core
        backward of the stage's first layer, a few launches after the layer's expert and MLP backward) [s].
    rc : tuple of arrays
        GPU and host time of the recomputation in ``g_fwd`` / ``h_fwd`` outside the synced stretches [s]: it runs
        inside the backward (each layer's before its backward), so with ``p2p_sync`` it joins the backward's
        stretch (and stays counted in the forward's time returned).

    Returns
    -------
    tuple of arrays
        ``(fwd, bwd)``: ``max(g_sync, h_sync) + n_sync t_sync`` for the synced stretches, ``max(g, h)`` for the
        rest (one stretch), the idle of the rest shared between forward and backward by their host time; with
        ``p2p_sync`` the rest of the forward ``max(g, h) + t_sync`` and the backward
        ``max(g_bwd, h_bwd + tail_bwd) + t_sync``: the lower bound of ``max_i(H_<=i + G_>=i)`` over a stretch
        that ends in a sync (one host thread, one stream).

    >>> [float(x) for x in stage_times(1.0, 2.0, 0.5, 1.0, 0.0, 0.0, 0, 0.0)]   # GPU-bound: unchanged
    [1.0, 2.0]
    >>> [float(x) for x in stage_times(1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 10, 0.01)]  # host-bound synced forward
    [2.1, 2.0]
    >>> [round(float(x), 6) for x in stage_times(1.0, 2.0, 0.5, 2.5, 0.0, 0.0, 0, 0.01, True, 0.2)]  # P2P syncs
    [1.01, 2.71]
    """
    sync_t = np.maximum(g_sync, h_sync) + n_sync * t_sync
    free_g, free_hf = g_fwd + g_bwd - g_sync, h_fwd - h_sync
    free_h = free_hf + h_bwd
    idle = np.maximum(free_h - free_g, 0.0)
    share_f = np.divide(free_hf, free_h, out=np.zeros_like(np.asarray(free_h, dtype=float)), where=free_h > 0)
    fwd = g_fwd - g_sync + sync_t + idle * share_f
    bwd = g_bwd + idle * (1.0 - share_f)
    if not np.any(p2p_sync):
        return fwd, bwd
    g_rc, h_rc = rc
    fwd_p = sync_t + np.maximum(g_fwd - g_sync - g_rc, free_hf - h_rc) + t_sync + g_rc
    bwd_p = np.maximum(g_bwd + g_rc, h_bwd + h_rc + tail_bwd) + t_sync - g_rc
    return np.where(p2p_sync, fwd_p, fwd), np.where(p2p_sync, bwd_p, bwd)
