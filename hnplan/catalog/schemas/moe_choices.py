"""The mixture-of-experts and expert-parallel choices of a training stack (:class:`MoEChoices`), which
:class:`~hnplan.catalog.schemas.software.StackChoices` inherits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hnplan.catalog.schemas.base import NonNegative, PosInt, _Strict


class MoEChoices(_Strict):
    """How a training stack runs mixture-of-experts layers: the expert all-to-all (its dispatcher, its overlap,
    its wire dtype), the routing imbalance it waits for, and the host work and launches of its MoE layers.
    Part of :class:`~hnplan.catalog.schemas.software.StackChoices` (a stack's and a job's choices); defaults:
    hnplan's default stack (``data/stacks/megatron-core.yaml``).

    Attributes
    ----------
    ep_comm : bool
        Expert all-to-all hidden behind compute (DeepSeek-V3 DualPipe, arXiv:2412.19437 Sec. 3.2.1); default False.
    ep_comm_overlap_fraction : float
        With ``ep_comm``, the share of the expert all-to-all time hidden behind compute [0-1], of what the
        schedule's pairing allows (:func:`hnplan.planning.training.moe.ep_overlap_share`). Default 1.
    ep_comm_overlap_fraction_scale_out : float or None
        The same share for an expert-parallel group that spans scale-up domains, whose dispatch and combine
        cross the scale-out network (RDMA) [0-1]; None (default): ``ep_comm_overlap_fraction`` wherever the
        group sits. No catalog stack sets it: the runs support a share per chip family rather than per path
        (Hopper 0.36 from the one with-and-without pair, EP 32 across four H100 servers; the GB200 NVL72 runs
        inside the NVLink domain and the one Blackwell run across servers, EP 32 over four B200, both near the
        whole share; docs/training.md, "Expert parallelism across the scale-out network"). For a user's stack
        whose own runs say otherwise.
    ep_dispatch_fp8 : bool
        With fp8 training, the expert-parallel dispatch (forward) and its mirror in the backward (the
        activation gradients sent back to the experts before the down-projection) travel in FP8 with one
        fp32 scale per 128 elements; the combine and its mirror stay bf16 (DeepSeek-V3,
        arXiv:2412.19437 Sec. 3.3.2; DeepEP's FP8 dispatch). False: every all-to-all in bf16
        (Megatron-Core's all-to-all token dispatcher moves the bf16 hidden states and quantises after it).
    expert_bias_kernel : {"per_expert", "packed", "fused"}
        How a model with expert biases (``MoE.expert_bias``) adds the routed experts' FC2 bias, scaled by each
        token's routing probability, in training (:func:`hnplan.compute.eager_ops.expert_bias_op`): ``per_expert``
        (default) Megatron-Core's ``TEGroupedMLP._apply_bias`` from its gpt-oss support (NVIDIA/Megatron-LM
        a329dd6da5, 2025-09-22): per local expert ``t + b * p`` in fp32, then a concatenation and a cast back,
        eager; ``packed`` its CUDA-graph-safe form (883533e049, 2026-08-14): one fp32 ``repeat_interleave`` of the
        biases over the tokens, multiply, add and cast; ``fused`` Transformer Engine's op-fuser ``GroupedLinear``
        with ``scale_bias`` (Transformer Engine 2.15+, Megatron-Core ``use_transformer_engine_op_fuser``): no pass
        of its own.
    ep_dispatcher : {"alltoall", "flex"}
        How tokens reach their experts (Megatron-Core ``--moe-token-dispatcher-type``). ``alltoall``
        (default): NCCL all-to-all of every token copy (``k`` per token, none merged), after a global
        permute that writes the ``k`` copies and before a local permute by expert, mirrored on the
        combine side (``megatron/core/transformer/moe/token_dispatcher.py``,
        ``MoEAlltoAllTokenDispatcher``). ``flex``: DeepEP / HybridEP kernels that fuse the global permute
        into the communication and send a token across the scale-out network once per destination
        domain, forwarding it to its experts over NVLink (deepseek-ai/DeepEP internode kernels;
        NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization Sec. 2.1.1); only the local
        permute remains. Bytes: :mod:`hnplan.compute.layer_ops`; traffic:
        :func:`hnplan.planning.training.moe.ep_comm_per_microbatch`.
    moe_load_imbalance : float
        Tokens routed to the busiest expert-parallel rank over the mean beyond the peak of random
        routing, >= 1: the step waits for that rank, so its routed-expert GEMMs and its all-to-all traffic
        scale by it times the random peak (:func:`hnplan.comm.messages.random_routing_peak`, about 1 %
        with thousands of tokens a rank). 1 for force-balanced benchmark routing (random logits).
    moe_host_us_per_kernel : float
        Host time beyond ``kernel_launch_us`` per kernel of an MoE layer's own scopes (router, preprocess, shared and
        routed experts, permutes: :data:`hnplan.compute.host.MOE_SCOPES`) launched outside a CUDA graph [us]: the
        host work of Megatron-Core's router and dispatcher and Transformer Engine's ``GroupedLinear`` between them.
        Default 37.5, the megatron-core stack's, fitted by least squares to the Megatron-Core family's published eager
        MoE runs (data/stacks/megatron-core.yaml ``field_sources``); not scaled by ``host_dispatch_factor``.
    moe_host_syncs_per_layer : int
        Device-host syncs per MoE layer forward: the dropless token dispatchers copy the tokens per expert to
        the host (Megatron-Core ``token_dispatcher.py``); 0 when sync-free (expert capacity with padding).
        Default 1.
    expert_gemm_launch : {"per_expert", "grouped"}
        ``per_expert`` (default): the routed experts' GEMMs and their quantisation launch one kernel per local
        expert (Transformer Engine ``GroupedLinear``: ``general_grouped_gemm`` runs one cuBLAS GEMM per
        expert over a few streams); ``grouped``: one kernel each (a grouped GEMM such as DeepGEMM's).
    moe_router_dtype : {"model", "fp32"}
        The router's logits dtype (Megatron-Core ``--moe-router-dtype``): ``model`` (default, Megatron-Core's
        ``moe_router_dtype`` None) keeps the model's bf16, ``fp32`` casts them. The routing weight each routed copy
        keeps for the backward pass takes it (``moe_utils.py`` ``topk_softmax_with_capacity``: ``probs.type_as(logits)``),
        except behind the flex dispatcher, which makes them fp32 (``token_dispatcher.py``: "DeepEP only supports float32
        probs"): :func:`hnplan.memory.layer_tensors.routing_weight_bytes`.
    expert_gemm_streams : int
        Under ``per_expert``, the CUDA streams the expert GEMMs are spread over: expert ``i`` on stream
        ``i % streams``, so at most that many run at once and the SMs fill in rounds of that many GEMMs
        (:func:`hnplan.compute.gemm.multi_stream_gemm_time_s`). Default 4: Transformer Engine 2.x's
        ``num_compute_streams`` (``transformer_engine/common/util/multi_stream.cpp``) used by
        ``nvte_multi_stream_cublas_gemm`` (``common/gemm/cublaslt_gemm.cu``; the path unless
        ``NVTE_USE_CUTLASS_GROUPED_GEMM=1`` on Hopper, a CUTLASS grouped kernel: ``grouped``).
    """

    ep_comm: bool = Field(default=False, description="expert all-to-all hidden behind compute")
    ep_comm_overlap_fraction: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of expert all-to-all time hidden behind compute when ep_comm"
    )
    ep_comm_overlap_fraction_scale_out: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="share of expert all-to-all time hidden behind compute when ep_comm and the EP group spans "
        "scale-up domains (RDMA); none: ep_comm_overlap_fraction",
    )
    ep_dispatch_fp8: bool = Field(
        default=False,
        description="fp8 training dispatches tokens to their experts in FP8 (1 byte an element plus one fp32 "
        "scale per 128) and combines in bf16",
    )
    expert_bias_kernel: Literal["per_expert", "packed", "fused"] = Field(
        default="per_expert",
        description="how a model with expert biases (MoE.expert_bias) adds the FC2 bias scaled by the routing "
        "probability in training: Megatron-Core's eager loop over the local experts in fp32 (per_expert), its "
        "packed fp32 form (packed), or inside Transformer Engine's fused GroupedLinear (fused)",
    )
    ep_dispatcher: Literal["alltoall", "flex"] = Field(
        default="alltoall",
        description="alltoall: NCCL all-to-all of every token copy with global and local permutes; flex: "
        "DeepEP / HybridEP, one copy per destination domain over the scale-out network, global permute fused",
    )
    moe_load_imbalance: float = Field(
        default=1.0,
        ge=1.0,
        description="tokens routed to the busiest expert-parallel rank over the mean, beyond the peak of random "
        "routing (1 = random or force-balanced routing)",
    )
    moe_host_us_per_kernel: NonNegative = Field(
        default=37.5,
        description="host time beyond the launch per kernel of an MoE layer's router, preprocess, shared and routed "
        "experts outside a CUDA graph [us] (fitted: data/stacks/megatron-core.yaml; not scaled by host_dispatch_factor)",
    )
    moe_host_syncs_per_layer: int = Field(
        default=1, ge=0, description="device-host syncs per MoE layer forward (tokens per expert to the host)"
    )
    expert_gemm_launch: Literal["per_expert", "grouped"] = Field(
        default="per_expert",
        description="per_expert: one GEMM and quantisation kernel per local expert (TE GroupedLinear); grouped: one",
    )
    moe_router_dtype: Literal["model", "fp32"] = Field(
        default="model",
        description="router logits' dtype (--moe-router-dtype): model (bf16, Megatron-Core's default) or fp32; the "
        "routing weights the experts keep take it (fp32 behind the flex dispatcher)",
    )
    expert_gemm_streams: PosInt = Field(
        default=4,
        description="per_expert: CUDA streams the expert GEMMs run on, expert i on stream i % streams "
        "(Transformer Engine num_compute_streams = 4)",
    )
