"""The choices of a training software stack (:class:`StackChoices`: overlaps, kernels, recipes, memory
and schedule choices), which :class:`~hnplan.catalog.schemas.software.SoftwareStack` and a job carry; the
mixture-of-experts and ZeRO choices it inherits are in :mod:`hnplan.catalog.schemas.moe_choices` and
:mod:`hnplan.catalog.schemas.zero_choices`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hnplan.catalog.schemas.base import PosInt
from hnplan.catalog.schemas.userbuffers import TPOverlapLayer, UbLayer, check_tp_overlap_cfg, frozen
from hnplan.catalog.schemas.zero_choices import ZeroChoices

# the communicator classes whose overlapped collectives slow the compute beside them (StackChoices.overlap_comm_ctas)
OverlapComm = Literal["dp", "tp", "ep"]


class StackChoices(ZeroChoices):
    """A training software stack's choices: which communication overlaps compute, the attention
    kernel, sequence parallelism and the gradient width on the wire. Declared once here:
    :class:`SoftwareStack` inherits these fields and the training planner's job carries one of these
    (``hnplan.planning.training.StackChoices``), so a new choice appears in both. Defaults: hnplan's
    default stack (``data/stacks/megatron-core.yaml``). The mixture-of-experts and expert-parallel choices
    (the all-to-all's dispatcher and overlap, the MoE host work) are inherited from
    :class:`~hnplan.catalog.schemas.moe_choices.MoEChoices`, the ZeRO ones (HSDP, the gathered and unsharded
    buffers, where ZeRO 3 waits) from :class:`~hnplan.catalog.schemas.zero_choices.ZeroChoices`.

    Attributes
    ----------
    tp_comm : bool
        TP collectives overlap the layer's GEMMs (Transformer Engine ``--tp-comm-overlap``, opt-in), which
        then run the overlapped GEMMs in chunks (:mod:`hnplan.compute.tp_overlap`, ``tp_overlap_cfg``);
        default False: exposed, as in Megatron-LM 2021 (Narayanan et al., SC21, arXiv:2104.04473).
    tp_overlap_cfg : dict
        With ``tp_comm``, the Transformer Engine userbuffers configurations the stack ships, by accelerator id
        (or ``default``) and TP degree: ``{acc: {tp: {layer: TPOverlapLayer}}}``; the entry of the largest TP
        key not above the run's TP applies, and
        layers it leaves out (and TPs below every key) take ``initialize_ub``'s defaults (ring exchange for
        the all-gathers, pipeline in 4 splits for the reduce-scatters). Default empty: the defaults, as
        Megatron-LM's ``--tp-comm-overlap`` without ``--tp-comm-overlap-cfg`` runs.
    cp_comm : bool
        Ring-attention K/V exchange overlaps attention (Liu et al., arXiv:2310.01889; Megatron-Core's
        implementation); default True. Applies to ``cp_algorithm="p2p_ring"``.
    cp_algorithm : {"p2p_ring", "allgather"}
        How context parallelism exchanges K/V: ``p2p_ring`` (default; Transformer Engine's load-balanced
        P2P ring, ``cp`` attention kernels per pass with the K/V exchange beside them,
        :mod:`hnplan.compute.context_parallel`) or ``allgather`` (Llama 3, arXiv:2407.21783 Sec. 3.3.2:
        K and V all-gathered over the CP group before one attention kernel over the rank's two load-balanced
        query chunks, the all-gather exposed on the critical path; dK/dV reduce-scattered in the backward).
    dp_grad_reduce, dp_param_gather : bool
        Bucketed overlap of the gradient reduce-scatter with the backward and of the parameter
        all-gather with the forward (Megatron-Core ``distributed_data_parallel_config.py``); default
        True. Megatron-LM 2021 did neither.
    grad_reduce_bytes : float
        Bytes per gradient element on the wire: 4 (fp32, Megatron-LM's
        ``--accumulate-allreduce-grads-in-fp32`` for bf16) by default; 2 for bf16 reduction.
    attention : {"flash", "unfused"}
        ``flash`` (default, fused kernel, no ``s x s`` scores in HBM or in the activations, Dao et al.
        arXiv:2205.14135) or ``unfused`` (scores materialised, as Megatron-LM ran before FlashAttention).
    attention_output_copy : bool
        The attention runs through Transformer Engine's FlashAttention backend (the flash-attn package;
        ``NVTE_FLASH_ATTN=1``, ``--attention-backend flash``) on Megatron-Core's ``sbhd`` layout: the kernel's
        ``bshd`` output, which flash-attn keeps for its backward, is handed to the output projection as an
        ``sbhd`` copy (NVIDIA/TransformerEngine v2.4 ``transformer_engine/pytorch/attention/dot_product_attention/
        backends.py`` ``FlashAttention.forward``: ``output.view(b, s, -1).transpose(0, 1)`` then
        ``output.contiguous()``), which the projection keeps too: at micro-batch ``b > 1`` the attention output is
        held twice (at ``b = 1`` the transpose is a view). Default False (cuDNN's fused attention reads ``sbhd``).
    sequence_parallel : bool
        Megatron sequence parallelism (Korthikanti et al., arXiv:2205.05198, Sec. 4.2.2): with
        ``tp > 1`` the norms, dropouts and residual adds run on ``tokens / tp`` and their activations are
        split over ``tp``; default True. The TP collectives move the same volume either way.
    tp_comm_overlap_fraction : float
        With ``tp_comm``, the share of the TP collective time that runs concurrently with the layer's
        GEMMs [0-1]; the rest (the first or last chunk of a pipelined split) stays exposed. Default 0.75.
    overlap_gemm_slowdown : float
        Fractional slowdown of the compute that runs alongside an overlapped collective (the SMs the
        communication kernels take and the HBM bandwidth they share): a hidden second of communication
        costs this many seconds of compute. Default 0.14 (16 of 132 SMs, see the stack files). Applies to
        the communicator classes ``overlap_comm_ctas`` leaves out.
    overlap_comm_ctas : dict
        SMs (CTAs) the communication kernels of an overlapped class hold while they run, by class: ``dp``
        (the distributed optimizer's reduce-scatters and all-gathers, or the gradient all-reduce: NCCL's
        channel count of the data-parallel communicator, one CTA each), ``tp`` (Transformer Engine
        userbuffers' ``num_sm``), ``ep`` (the expert all-to-all's SM budget). A listed class slows the compute
        beside it by ``compute_units / (compute_units - ctas) - 1`` of the job's accelerator
        (:func:`hnplan.compute.sm_share.sm_share_slowdown`) in place of ``overlap_gemm_slowdown``. Default
        empty: every class at ``overlap_gemm_slowdown``.
    fp8_params : bool
        fp8 training keeps the weights only as fp8 tensors (Megatron-Core ``--fp8-param-gather``, NeMo
        ``FP8_PARAMS``): 1 byte a weight plus its cached fp8 transpose, no bf16 copy; the fp32 master
        weights live in the (distributed) optimizer. Default False.
    fp4_params : bool
        fp4 (NVFP4) training keeps the GEMM weights only as NVFP4 tensors (row- and column-wise, 1.125
        bytes a weight, no bf16 copy: :func:`hnplan.memory.states.stack_accounting`) and the distributed
        optimizer all-gathers them packed, half a byte a weight (Megatron-Core ``fp4_param_gather``, Transformer
        Engine >= 2.14 NVFP4 primary weights; :func:`hnplan.compute.lowp_bytes.param_gather_bytes_per_weight`).
        Default False.
    fp8_weight_cache : bool
        With bf16 weights and fp8 GEMMs, Transformer Engine keeps each weight's fp8 cast and its
        transpose from the first micro-batch of a step to the last (``is_first_microbatch`` caching in
        ``transformer_engine/pytorch/module/linear.py``; Megatron-Core passes it unless
        ``disable_parameter_transpose_cache``): 2 bytes a parameter, kept whole under ZeRO-3. False: transient.
    keep_fp8_transpose_cache : bool
        Megatron-FSDP's option (ZeRO-3 with fp8 parameters): keep each gathered fp8 parameter's transpose, whole,
        across micro-batches (1 byte a parameter) instead of dropping it after the unit's forward
        (:func:`hnplan.memory.states.stack_accounting`). Default False, Megatron-Core's default.
    zero3_fp8_params : bool, optional
        Whether fp8 training under ZeRO-3 runs on quantised parameters that Megatron-FSDP shards (its
        ``fp8_param_gather``: MXFP8 both layouts, per-tensor fp8 the row-wise data) rather than bf16 weights with
        Transformer Engine's cached casts kept whole. Default None: as ``fp8_params``.
    pipeline_balanced_ends : bool
        The input embedding and the loss each take one layer's place in the pipeline split, so the
        first and the last stage hold one layer fewer (Llama 3, arXiv:2407.21783 Sec. 3.3.2;
        Megatron-Core ``--account-for-embedding-in-pipeline-split`` and
        ``--account-for-loss-in-pipeline-split``). Default False (Megatron-Core's default).
    pipeline_layout : bool
        The stack's recipes place the layers of each virtual pipeline stage themselves (Megatron-Core
        ``--pipeline-model-parallel-layout``, Megatron-Bridge's ``layout_map``, or first/last-stage layer
        counts), so a stage's layers need not split evenly over its virtual stages. Default True
        (hnplan's default stack: Megatron-Core accepts such a layout). False: every virtual stage holds
        the same whole number of layers, as Megatron-Core's automatic split (its ``TransformerConfig``
        refuses a stage whose layers the virtual-stage count does not divide) and Megatron-LM before it
        build them (:func:`hnplan.planning.training.plan_rules`).
    pipeline_uneven_stages : bool
        The stack builds a last pipeline stage with fewer layers than the others (hnplan's split:
        ``ceil(L / pp)`` a stage, the last the rest; Megatron-Core's ``--decoder-first-pipeline-num-layers`` /
        ``--decoder-last-pipeline-num-layers``, NVIDIA/Megatron-LM merge request 1881 of 2024-09, in core 0.9).
        Default True. False: ``pp`` must divide the layers, as Megatron-LM's ``ParallelTransformer`` (2021) and
        ``mpu.get_num_layers`` (2022) assert and Megatron-Core 0.8's ``get_num_layers_to_build`` assumes (it
        builds ``L // pp`` layers a stage); a plan that does not is infeasible (exit 3).
    fp8_recipe : {"delayed", "current", "mxfp8", "blockwise", "nvfp4"}
        How fp8 GEMM inputs are scaled (Transformer Engine recipes ``DelayedScaling``,
        ``Float8CurrentScaling``, ``MXFP8BlockScaling``): ``delayed`` (default; Megatron-LM
        ``--fp8-recipe delayed``) takes the scale from an amax history and computes the amax inside the
        cast; ``current`` reads each tensor once more for its amax before casting; ``mxfp8`` (Blackwell)
        writes row-wise and column-wise quantised copies with one E8M0 scale byte per 32 elements;
        ``blockwise`` the same copies with an fp32 scale per 1 x 128 tile (DeepSeek-V3, ``Float8BlockScaling``);
        ``nvfp4`` (``NVFP4BlockScaling``, Blackwell; NVIDIA arXiv:2509.25149) is the recipe of the training
        dtype ``fp4``, which implies it: FP4 E2M1 in blocks of 16 with E4M3 block scales and an fp32
        tensor scale (an amax pass, then a row-wise and a column-wise copy).
        Bytes: :mod:`hnplan.compute.fp8_recipes`.
    nvfp4_rht : bool
        In fp4 training, random Hadamard transforms on the weight-gradient GEMM inputs (activations and
        output gradients), written by a column-wise cast of their own (Transformer Engine
        ``NVFP4BlockScaling(disable_rht=False)``, its default; ``NVTE_NVFP4_DISABLE_RHT=1`` turns them
        off). Default True.
    fp8_attention : bool
        The attention core runs in FP8 (Transformer Engine ``fp8_dot_product_attention``, NeMo ``FP8_DPA``)
        with an fp8 or fp4 GEMM dtype: its ceilings are the bf16 ones times the stack's measured FP8 / bf16
        ratio for the accelerator (``SoftwareStack.attention_fp8_ratio``); without one it is timed in bf16.
        Default False.
    fp8_norm_cast_fusion : bool
        The norm before a GEMM writes its fp8 input directly (Transformer Engine ``LayerNormLinear`` /
        ``LayerNormMLP``; delayed and MXFP8 recipes only, a current-scaling cast needs the finished
        tensor's amax). Default True.
    fp8_cast_transpose_fusion : bool
        Where per-tensor fp8 GEMMs need transposed copies (Hopper), one kernel writes the cast and its
        transpose (Transformer Engine ``cast_transpose``). Default True.
    fp8_act_cast_fusion, norm_cudnn, fp8_current_amax_fusion, fp8_output_proj : bool
        The SwiGLU runs in Transformer Engine with the next GEMM's quantizer (op fuser, NeMo ``USE_TE_OPS``) and
        returns the amax of NVFP4 inputs it writes; norms are cuDNN's (``NVTE_NORM_FWD_USE_CUDNN=1``: they write MXFP8
        inputs, TE's own return NVFP4 amaxes); TE 2.8+ returns current-scaling amaxes too; the LM head (shared by the
        MTP modules) is an MXFP8 TE GEMM (Megatron-Core ``TransformerConfig.fp8_output_proj``). Default False (all).
    fused_grouped_mlp : bool
        Under MXFP8, the routed experts run Transformer Engine's fused grouped MLP (``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``,
        ``transformer_engine/pytorch/ops/fused/grouped_mlp.py`` on cuDNN frontend's sm100 ``grouped_gemm_glu`` and
        ``grouped_gemm_dglu`` kernels): the FC1 grouped GEMM applies the SwiGLU in its epilogue and writes the FC2
        input already quantised (row- and column-wise MXFP8) beside its pre-activation, and the FC2 data-gradient
        GEMM applies the SwiGLU backward and writes the FC1 output gradient quantised, so the experts' activation
        forward and backward and those two quantisations are no kernels of their own (their epilogue writes ride on
        compute-bound GEMMs, not counted). Megatron-Bridge's full-iteration MXFP8 recipes set it (since PR 3983 of
        2026-06-06). Default False (other recipes, and bf16 / per-tensor fp8 / NVFP4 steps keep the separate kernels).
    amax_passes : int
        Streaming passes over a bf16 tensor of the amax its per-tensor scale needs (``current`` and ``nvfp4``; the
        ``<name>_amax`` rows of :mod:`hnplan.compute.fp8_recipes`, each pass the tensor's bf16 bytes at the
        accelerator's per-pass ``amax`` class): 1 where one kernel reads the tensor and reduces (Transformer
        Engine ``nvte_compute_amax``, ``transformer_engine/common/recipe/current_scaling.cu``; Inductor's
        compiled ``max(abs(x))``), 3 where eager PyTorch runs ``torch.max(torch.abs(x))`` (``abs`` reads and
        writes the tensor, the reduction reads it again; torchao ``float8_utils.tensor_to_amax``). Default 1
        (Transformer Engine, hnplan's default stack).
    norm_kernel, rope_kernel : {"fused", "eager"}, {"fused", "eager", "eager_matrix", "eager_complex"}
        ``fused`` (default): one kernel per norm / rotary embedding (Transformer Engine, Apex);
        ``eager``: the chain of PyTorch operators Hugging Face models run (RMSNorm with an fp32
        upcast, rotary as ``q cos + rotate_half(q) sin``); ``eager_matrix``: foundation-model-stack's rotary
        (fp32 upcast, broadcast multiply by a 2 x 2 rotation, sum, cast back); ``eager_complex``: Meta's
        Llama and torchtitan's (fp32 complex multiply); bytes in :mod:`hnplan.compute.fp8_recipes`.
    rope_attention_factor_fused : bool
        Whether the fused rotary kernel applies a YaRN attention factor other than 1
        (``Model.rope_attention_factor``). False (default, every Megatron-family stack): Transformer Engine's fused
        RoPE takes no such factor and Megatron-Core falls back to its eager ``q cos + rotate_half(q) sin`` with the
        factor folded into cos and sin (NVIDIA/Megatron-LM megatron/core/models/common/embeddings/rope_utils.py
        ``apply_rotary_pos_emb``: "mscale ... is not supported by TE's fused RoPE. Using unfused implementation"),
        so a training step of such a model (gpt-oss) counts the eager chain whatever ``rope_kernel`` says.
    act_kernel : {"fused", "eager"}
        ``fused`` (default): a gated activation (SwiGLU) in one kernel; ``eager``: ``silu`` then the multiply,
        two PyTorch kernels each way (Hugging Face ``LlamaMLP``, foundation-model-stack ``GatedLinearUnit``).
    autocast_fp32_params, loss_kernel, grads_in_backward : bool, {"fused", "eager"}, bool
        ``torch.autocast`` over fp32 parameters (an fp32 residual stream, a bf16 input cast kept per linear) and the
        eager loss (``logits.float()``, ``F.cross_entropy``): activation memory, :class:`hnplan.memory.layer_tensors.EagerSaved`;
        gradients allocated in each backward (``zero_grad(set_to_none=True)``, no DDP buckets): the peak at ``dp`` 1.
    gqa_kv_copy : bool
        K and V are copied to every query head before attention (an SDPA without ``enable_gqa``, PyTorch before
        2.5: foundation-model-stack's and torchtitan's expand and reshape). Default False.
    autograd_grad_sums : bool
        The backward runs PyTorch autograd's gradient sums at the tensors the model code feeds to several ops, each
        an element-wise add kernel (read both bf16 gradients, write one): the normed input of separate query, key
        and value projections (two sums) and of separate gate and up projections (one), and each residual fork
        (one; the residual add's backward passes the gradient through, no kernel), in place of the default backward
        of the residual add (twice its forward) (:func:`hnplan.compute.eager_ops.grad_sum_op`). Default False.
    fp8_bf16_end_layers : int
        In fp8 or fp4 training, this many Transformer layers at each end of the model run in bf16 (Megatron-Core
        ``--first-last-layers-bf16`` with ``--num-layers-at-start-in-bf16`` / ``-at-end-``); they slow the
        first and the last pipeline stage. Default 0.
    offload : {"none", "auto"}
        ``auto``: a plan that does not fit in HBM moves optimizer states, gradients, weights and then
        activations to host or pooled memory (ZeRO-Offload, arXiv:2101.06840; ZeRO-Infinity,
        arXiv:2104.07857), the transfers hidden behind the step's compute as far as it lasts
        (:mod:`hnplan.planning.training.offload`). Default ``none``.
    pipeline_schedule : {"1f1b", "dualpipe"}
        The pipeline schedule. ``1f1b``: a bubble of ``(pp - 1) / v`` micro-batch times (Megatron-LM
        1F1B and interleaved). ``dualpipe``: DeepSeek-V3's bidirectional schedule, whose bubble is
        ``(pp / 2 - 1)(F&B + B - 3 W)`` (arXiv:2412.19437 Sec. 3.2.1, Table 2: ``F&B`` a forward and a
        backward chunk overlapped, ``B`` a backward, ``W`` its weight-gradient part) for an even ``pp``
        without virtual stages (otherwise the 1F1B bubble). In memory, DualPipe keeps two copies of the
        parameters (each rank holds a stage of each direction: the first and the last stage's states on
        one rank) and ``pp + 1`` micro-batches of activations where 1F1B keeps ``pp`` (Table 2).
    recompute_modules : tuple of {"core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act", "shared_experts"}
        What selective recomputation (``recompute: selective``) re-runs: Megatron-Core's
        ``--recompute-granularity selective --recompute-modules`` (``megatron/core/transformer/
        transformer_config.py``): ``core_attn`` the attention core (the default, Korthikanti et al.
        arXiv:2205.05198 Sec. 5), ``layernorm`` the two norms before attention and the MLP, ``mla_up_proj``
        the MLA up-projections and RoPE, ``mlp`` the dense MLP, ``moe_act`` the routed experts' activation
        function, ``shared_experts`` the shared experts. Bytes saved: :mod:`hnplan.memory.recompute`.
    recompute_num_layers : int or None
        With ``recompute: full``, Megatron-Core's block method (``--recompute-granularity full
        --recompute-method block --recompute-num-layers N``; ``megatron/core/transformer/transformer_block.py``
        ``_checkpointed_forward``; ``megatron/training/arguments.py``): only the first ``N`` layers of
        each model chunk (a pipeline stage, or each of its virtual stages) keep just their input and run
        their forward again; the others keep all their activations. ``None`` (default): every layer is
        recomputed (the uniform method with one layer per unit). Memory and time:
        :mod:`hnplan.memory.recompute`.
    cpu_offload_layers : int
        Transformer Engine / Megatron-Core activation offloading (``--cpu-offloading
        --cpu-offloading-num-layers N``, activations only): the activations of ``N`` of the model's
        layers are copied to host memory during the forward pass and back before their backward pass,
        overlapped with the other layers' compute (``transformer_engine/pytorch/cpu_offload.py``,
        ``AsyncDoubleBufferGroupOffloadHandler``). Megatron-Core allows it only without pipeline
        parallelism and without recomputation (``transformer_config.py``), so it applies to plans with
        ``pp = 1`` and ``recompute: none``. Default 0. Memory and time: :mod:`hnplan.memory.recompute`.
    precision_aware_optimizer : bool
        Megatron-Core ``--use-precision-aware-optimizer`` (distributed optimizer with Transformer Engine's
        ``FusedAdam``): with bf16 weights (and fp8 delayed scaling) the optimizer reads the gradient buffer
        as it is (``decoupled_grad``, no fp32 copy of the gradient shard) and keeps the fp32 master weights
        as their 16-bit remainders beside the bf16 weights (``store_param_remainders``, on by default);
        with other fp8 recipes Megatron-Core keeps fp32 master weights and gradient copies as without it.
        Default False. Bytes: :func:`hnplan.memory.states.stack_accounting`.
    adam_moment_bytes : float
        Bytes per element of each of Adam's two moments: 4 (fp32, the default) or 2 (bf16:
        ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype``, which need ``precision_aware_optimizer``).
    distributed_optimizer : {"megatron-core", "apex"}
        Which ZeRO-1 optimizer keeps the states: ``megatron-core`` (default, ``distrib_optimizer.py``) or
        ``apex``, NeMo 1's ``distributed_fused_adam`` (Apex ``DistributedFusedAdam``: 16-bit master-weight
        remainders beside bf16 weights, its own reduce-scattered gradient shard at ``grad_reduce_bytes``,
        fp32 gradients for the word embeddings). Bytes: :func:`hnplan.memory.states.stack_accounting`.
    kernel_launch_us : float
        Host time per kernel launched outside a CUDA graph [us]: Python, the PyTorch dispatcher and the CUDA
        launch. A stretch of the step between device-host syncs takes ``max(GPU time, host time)``
        (:mod:`hnplan.compute.host`). Default 13.1: the eager PyTorch floor per call measured on an H200 host
        (x86); the planner scales it by the system's ``host_dispatch_factor`` (a Grace host).
    cuda_graph_scope : tuple of {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "full_iteration"}
        What the stack captures in CUDA graphs (Megatron-Core ``--cuda-graph-impl transformer_engine
        --cuda-graph-scope``, or ``local`` ``full_iteration``): those kernels cost no host launch. Default none.
    pp_p2p_sync : bool
        Without interleaving, ``torch.cuda.synchronize()`` after each batched P2P exchange (Megatron-Core
        ``p2p_communication.py``, ``batch_p2p_comm`` and ``batch_p2p_sync``). Default on, as Megatron-Core.
    dp_bucket_params : int or None
        Parameters per data-parallel bucket (Megatron-Core ``DistributedDataParallelConfig.bucket_size``):
        each bucket's gradient reduce-scatter (all-reduce) and parameter all-gather is one collective; the
        last bucket of the backward and the first of the forward have no compute left to hide behind.
        ``None`` (default): Megatron-Core's default ``max(40,000,000, 1,000,000 x dp)``
        (``distributed/distributed_data_parallel.py``). NeMo 2's ``MegatronCommOverlapCallback`` sets
        134,217,728 (128 x 1024 x 1024) when DP > 1 unless the recipe gives one
        (``nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py``).
    nccl_nvls : bool
        NCCL may reduce in the scale-up switches (NVLink SHARP, its NVLS algorithms) where the system
        enables it (``scaleup_in_network_reduction``); default True, NCCL's default (``NCCL_NVLS_ENABLE``
        2: used where the GPUs support multicast, NVIDIA/nccl ``src/transport/nvls.cc``). False: the job
        runs with ``NCCL_NVLS_ENABLE=0`` and its collectives use the NVLink rings and trees alone.
    """

    tp_comm: bool = Field(default=False, description="TP collectives overlap the layer's GEMMs")
    tp_overlap_cfg: dict[str, dict[PosInt, dict[UbLayer, TPOverlapLayer]]] = Field(
        default_factory=dict,
        description="userbuffers overlap method per layer, by accelerator id (or default) and the TP it applies from",
    )
    cp_comm: bool = Field(default=True, description="context-parallel K/V exchange overlaps attention")
    cp_algorithm: Literal["p2p_ring", "allgather"] = Field(
        default="p2p_ring",
        description="p2p_ring: Transformer Engine's K/V ring beside cp attention kernels; allgather: K/V "
        "all-gathered (exposed) before one attention kernel, dK/dV reduce-scattered (Llama 3)",
    )
    dp_grad_reduce: bool = Field(default=True, description="bucketed gradient reduce overlaps the backward")
    dp_param_gather: bool = Field(default=True, description="bucketed parameter all-gather overlaps the forward")
    # 1 (fp8) to 4 (fp32) bytes: a width in bits (32) or a fraction is another unit
    grad_reduce_bytes: Annotated[float, Field(ge=1.0, le=4.0)] = Field(
        default=4.0, description="bytes per gradient element on the wire (4 fp32, 2 bf16; not bits) [bytes]"
    )
    attention: Literal["flash", "unfused"] = Field(
        default="flash", description="flash: fused FlashAttention; unfused: s x s scores materialised"
    )
    attention_output_copy: bool = Field(
        default=False,
        description="Transformer Engine's FlashAttention backend on sbhd: at micro-batch > 1 the attention output is "
        "kept twice (flash-attn's bshd output and the output projection's sbhd copy)",
    )
    sequence_parallel: bool = Field(
        default=True,
        description="norms and residual adds (and their dropout masks) split over TP ranks "
        "(Megatron sequence parallelism)",
    )
    tp_comm_overlap_fraction: float = Field(
        default=0.75, ge=0.0, le=1.0, description="share of TP collective time hidden behind GEMMs when tp_comm"
    )
    overlap_gemm_slowdown: float = Field(
        default=0.14, ge=0.0, le=1.0, description="compute slowdown per second of communication it hides"
    )
    overlap_comm_ctas: dict[OverlapComm, PosInt] = Field(
        default_factory=dict,
        description="SMs (CTAs) an overlapped class's communication kernels hold (dp: NCCL channels of the DP "
        "communicator; tp: userbuffers num_sm; ep: the all-to-all's SMs); the compute beside them slows by "
        "SMs / (SMs - CTAs) - 1 in place of overlap_gemm_slowdown",
    )
    fp8_params: bool = Field(default=False, description="fp8 training keeps weights only as fp8 (fp8 param gather)")
    fp4_params: bool = Field(
        default=False, description="fp4 training keeps GEMM weights as NVFP4 and gathers them packed (fp4 param gather)"
    )
    fp8_weight_cache: bool = Field(
        default=True, description="Transformer Engine caches fp8 weight casts and transposes across micro-batches"
    )
    keep_fp8_transpose_cache: bool = Field(
        default=False, description="Megatron-FSDP keeps fp8 parameters' transposes whole between micro-batches (ZeRO-3)"
    )
    zero3_fp8_params: bool | None = Field(
        default=None, description="fp8 training under ZeRO-3 keeps quantised parameters (default: fp8_params)"
    )
    pipeline_balanced_ends: bool = Field(
        default=False, description="embedding and loss each take one layer's place on the first and last stage"
    )
    pipeline_layout: bool = Field(
        default=True,
        description="the recipes lay out each virtual stage's layers themselves (pipeline_model_parallel_layout), "
        "so a stage's layers need not divide by its virtual stages",
    )
    pipeline_uneven_stages: bool = Field(
        default=True,
        description="a last pipeline stage may hold fewer layers than the others (Megatron-Core 0.9+ "
        "--decoder-last-pipeline-num-layers); false: pp must divide the layers",
    )
    fp8_recipe: Literal["delayed", "current", "mxfp8", "blockwise", "nvfp4"] = Field(
        default="delayed",
        description="fp8 scaling recipe: delayed (amax history), current (per tensor), mxfp8, blockwise (1 x 128); "
        "nvfp4 is the recipe of the training dtype fp4",
    )
    nvfp4_rht: bool = Field(
        default=True,
        description="NVFP4 training applies random Hadamard transforms to the weight-gradient GEMM inputs "
        "(a column-wise cast of its own)",
    )
    fp8_attention: bool = Field(
        default=False,
        description="the attention core runs in FP8 (fp8 or fp4 dtype): bf16 ceilings x the stack's FP8 / bf16 "
        "attention ratio for the accelerator",
    )
    fp8_norm_cast_fusion: bool = Field(
        default=True, description="the norm before a GEMM writes its fp8 input (delayed and mxfp8 recipes)"
    )
    fp8_cast_transpose_fusion: bool = Field(
        default=True, description="one kernel writes an fp8 cast and its transpose (where transposes are needed)"
    )
    norm_cudnn: bool = Field(default=False, description="norms run cuDNN's kernels (NVTE_NORM_FWD_USE_CUDNN=1)")
    fp8_act_cast_fusion: bool = Field(default=False, description="the op fuser's SwiGLU returns its output's amax")
    fp8_output_proj: bool = Field(default=False, description="the LM head in MXFP8 (Megatron-Core fp8_output_proj)")
    fp8_current_amax_fusion: bool = Field(default=False, description="as for nvfp4, current scaling (TE 2.8+)")
    fused_grouped_mlp: bool = Field(
        default=False,
        description="MXFP8 routed experts in Transformer Engine's fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): "
        "SwiGLU and its quantisations in the GEMM epilogues",
    )
    amax_passes: int = Field(
        default=1,
        ge=1,
        le=3,
        description="streaming passes over a tensor of its per-tensor amax: 1 (Transformer Engine's read-and-reduce "
        "kernel, or compiled), 3 (eager PyTorch max(abs(x)))",
    )
    norm_kernel: Literal["fused", "eager"] = Field(
        default="fused", description="fused norm kernel, or PyTorch eager RMSNorm with fp32 upcast"
    )
    rope_kernel: Literal["fused", "eager", "eager_matrix", "eager_complex"] = Field(
        default="fused",
        description="fused rotary kernel, or a PyTorch eager chain: q cos + rotate_half(q) sin (eager), "
        "foundation-model-stack's 2 x 2 rotation in fp32 (eager_matrix), an fp32 complex multiply (eager_complex)",
    )
    rope_attention_factor_fused: bool = Field(
        default=False,
        description="the fused rotary kernel applies a YaRN attention factor other than 1 (Model."
        "rope_attention_factor); Transformer Engine's fused RoPE does not, so Megatron-Core runs such a model's "
        "rotary embedding as its eager chain (rope_kernel eager) in training",
    )
    act_kernel: Literal["fused", "eager"] = Field(
        default="fused", description="fused gated activation, or PyTorch eager silu then multiply (two kernels)"
    )
    autocast_fp32_params: bool = Field(default=False, description="torch.autocast over fp32 parameters (memory)")
    loss_kernel: Literal["fused", "eager"] = Field(default="fused", description="eager: logits.float() + cross_entropy")
    grads_in_backward: bool = Field(default=False, description="no gradient buffer kept between steps (memory, dp 1)")
    gqa_kv_copy: bool = Field(
        default=False, description="K and V copied to every query head before attention (SDPA without enable_gqa)"
    )
    autograd_grad_sums: bool = Field(
        default=False,
        description="eager autograd's gradient sums at separate q/k/v and gate/up inputs and at residual forks",
    )
    fp8_bf16_end_layers: int = Field(
        default=0, ge=0, description="Transformer layers kept in bf16 at each end of the model in fp8 or fp4 training"
    )
    offload: Literal["none", "auto"] = Field(
        default="none", description="move what does not fit in HBM to host or pooled memory (ZeRO-Offload/Infinity)"
    )
    pipeline_schedule: Literal["1f1b", "dualpipe"] = Field(
        default="1f1b",
        description="1f1b: Megatron's 1F1B / interleaved schedule; dualpipe: DeepSeek's bidirectional schedule "
        "(bubble (pp/2 - 1)(F&B + B - 3W), arXiv:2412.19437 Table 2)",
    )
    recompute_modules: tuple[
        Literal["core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act", "shared_experts"], ...
    ] = Field(
        default=("core_attn",),
        description="modules selective recomputation re-runs (Megatron-Core --recompute-modules); "
        "default the attention core",
    )
    recompute_num_layers: int | None = Field(
        default=None,
        ge=1,
        description="with recompute full: layers of each model chunk recomputed (Megatron-Core block method); "
        "none: every layer",
    )
    cpu_offload_layers: int = Field(
        default=0,
        ge=0,
        description="layers whose activations go to host memory and back (Megatron-Core / TE cpu_offloading; "
        "pp 1 and recompute none only)",
    )
    # at most 1 ms, 75x the eager floor measured (13.1 us): a figure in ns (13,100) is another unit
    kernel_launch_us: Annotated[float, Field(ge=0.0, le=1000.0)] = Field(
        default=13.1, description="host time per kernel launched outside a CUDA graph [us]"
    )
    cuda_graph_scope: tuple[Literal["attn", "mlp", "moe", "moe_router", "moe_preprocess", "full_iteration"], ...] = (
        Field(default=(), description="what the stack captures in CUDA graphs (no host launch per kernel)")
    )
    pp_p2p_sync: bool = Field(default=True, description="device sync after each P2P exchange without interleaving")
    dp_bucket_params: PosInt | None = Field(
        default=None,
        description="parameters per data-parallel bucket (Megatron-Core bucket_size); none: Megatron-Core's "
        "default max(40M, 1M x dp)",
    )
    nccl_nvls: bool = Field(
        default=True,
        description="NCCL reduces in the scale-up switches (NVLink SHARP) where the system enables it; "
        "false: NCCL_NVLS_ENABLE=0",
    )
    precision_aware_optimizer: bool = Field(
        default=False,
        description="Megatron-Core --use-precision-aware-optimizer: no fp32 gradient copy and 16-bit "
        "master-weight remainders with bf16 weights",
    )
    adam_moment_bytes: Literal[2, 4] = Field(
        default=4, description="bytes per element of each Adam moment (4 fp32; 2 bf16 with precision_aware_optimizer)"
    )
    distributed_optimizer: Literal["megatron-core", "apex"] = Field(
        default="megatron-core",
        description="ZeRO-1 optimizer: Megatron-Core's, or NeMo 1's Apex distributed_fused_adam",
    )

    def __hash__(self) -> int:  # the nested tp_overlap_cfg mapping hashed through its sorted items
        # frozen() changes only dicts and lists: the other values (numbers, names, tuples) hashed as they are
        return hash(tuple(frozen(v) if type(v) in (dict, list) else v for v in self.__dict__.values()))

    @model_validator(mode="after")
    def _moments_need_precision_aware(self):
        if self.adam_moment_bytes != 4 and not self.precision_aware_optimizer:
            raise ValueError("adam_moment_bytes 2 (bf16 moments) needs precision_aware_optimizer: true")
        check_tp_overlap_cfg(self.tp_overlap_cfg)
        return self
