"""The memory-bound kernels a software stack adds around the GEMMs: FP8 recipes and eager PyTorch chains.

FP8 recipe bytes ([1]_, [2]_): an fp8 GEMM reads fp8 inputs (counted in its own row of
:mod:`hnplan.compute.operators`), so every bf16 tensor that enters one is quantised first, in its own
kernel, and these kernels are rows of the operator table, each bytes moved at a measured kernel class
(``fp8_cast``, ``amax`` of the accelerator's ``memory_kernel_efficiency``). Per GEMM ``Y = X W^T`` of an
fp8 pass, with ``e`` the elements of the tensor quantised:

* activation ``X`` (forward, ``<gemm>_x_fp8``) and output gradient ``dY`` (backward, ``<gemm>_dy_fp8``):
  read bf16 (2 bytes), write fp8 (1 byte);
* per-tensor recipes on chips whose fp8 GEMMs take only the TN layout (Hopper; ``fp8_tn_only``) also
  need the transposed copy for the weight-gradient GEMM: one more fp8 byte written by the fused
  cast-transpose kernel (``cast_transpose``), or a separate transpose (``<name>_t``: read 1, write 1);
* ``current`` scaling (``Float8CurrentScaling``) reads each tensor once more for its amax before the
  cast (``<name>_amax``: ``amax_passes`` x 2 bytes at the ``amax`` class, see *The amax pass* below);
  ``delayed`` scaling (``DelayedScaling``)
  computes the amax inside the cast and takes the scale from the amax history (the per-step history
  update touches a few numbers per tensor and is not counted);
* ``mxfp8`` (``MXFP8BlockScaling``, Blackwell [3]_): read bf16, write a row-wise and a column-wise
  quantised copy (scaled along different axes, so neither is a transpose of the other) plus one E8M0
  scale byte per 32 elements each: ``2 + 2 x (1 + 1/32)`` bytes, no amax pass; ``blockwise``
  (DeepSeek-V3's fine-grained scaling [5]_, Transformer Engine ``Float8BlockScaling``): the same two
  copies with one fp32 scale per 128 elements, ``2 + 2 x (1 + 4/128)`` bytes;
* ``nvfp4`` (``NVFP4BlockScaling``, Blackwell, with the training dtype ``fp4`` [6]_, [7]_): FP4 E2M1
  elements in blocks of 16 with one FP8 E4M3 scale each and one fp32 scale per tensor, the GEMMs of the
  forward, data-gradient and weight-gradient passes all in FP4. The per-tensor scale needs the tensor's
  amax before the cast (``<name>_amax``: ``amax_passes`` x 2 bytes at the ``amax`` class, as ``current``; so the norm cannot
  write the quantised copies), then one kernel reads bf16 and writes a row-wise and a column-wise copy
  (``<name>_nvfp4``: ``2 + 2 x (1/2 + 1/16)`` bytes). Where the tensor is the output of a Transformer
  Engine norm or activation kernel, that kernel returns the amax of the bf16 it writes and the amax pass
  goes away ([11]_: ``FUSED_NORM_AMAX_NVFP4`` of ``LayerNormLinear``'s norm, Transformer Engine's own norm
  kernel only, not cuDNN's (``norm_cudnn``), ``FUSED_ACTIVATION_AMAX_NVFP4``
  of the SwiGLU forward and backward when the op fuser runs it, ``fp8_act_cast_fusion``), unless Hadamard
  transforms are on (the column-wise scale then comes from the amax after the transform, which the
  quantiser reads itself). Of the eight bf16 tensors a Llama layer quantises per micro-batch (the inputs
  of QKV, output projection, MLP up and down, and the output gradients of the four) the norm returns the
  amax of the QKV and MLP-up inputs, and with the op fuser the SwiGLU that of the MLP-down input and its
  backward that of the MLP-up output gradient: 4 of 8 amax passes, among them the two widest (``ffn`` and
  ``2 x ffn`` columns). With random Hadamard transforms on the
  weight-gradient inputs (``nvfp4_rht``: activations and output gradients, not weights; the 16 x 16
  transform is applied to the column-wise copy only) the column-wise copy is written by a kernel of its
  own that reads the bf16 tensor again (``<name>_nvfp4_rht``: ``2 + 1/2 + 1/16`` bytes; the row-wise
  cast then writes ``1/2 + 1/16``), and the amax pass returns the amax of both the tensor and its
  transform in one read (labelled assumption: Transformer Engine's fused amax kernel). The weights'
  16 x 16 block scaling (one scale shared by the row-wise and the column-wise copy) and the stochastic
  rounding of the gradients change arithmetic in the cast, not the bytes it moves, so they are not
  separate rows (both scale copies are counted at one byte per 16 elements, labelled assumption).
  Transformer Engine has no fp4 parameters: weights stay bf16, cast once per step when cached;
* with ``fp8_norm_cast_fusion`` (``LayerNormLinear``/``LayerNormMLP``) the norm before the QKV/MLP-up
  GEMM writes the quantised input itself: the cast's bf16 read and row-wise write go away, what
  remains is the transposed (Hopper) or column-wise (MXFP8) copy; a current-scaling cast cannot fuse
  (it needs the finished tensor's amax), and an MXFP8 one only where the stack runs cuDNN's norm
  kernels (``norm_cudnn``, ``NVTE_NORM_FWD_USE_CUDNN=1``): Transformer Engine's own norm writes bf16
  and the cast follows [11]_;
* the weight ``W`` is cast the same way (``<gemm>_w_fp8``; its transpose feeds the data-gradient GEMM)
  once per micro-batch, once per optimizer step when Transformer Engine caches the cast across the
  step's micro-batches (``fp8_weight_cache``; phase ``step``), or never with fp8 parameters
  (``fp8_params``: the optimizer writes fp8 weights).

The amax pass ([12]_, [13]_): an amax row moves the stack's ``amax_passes`` streaming passes over the tensor's bf16
bytes at the ``amax`` class, the bandwidth of one pass. Transformer Engine 2.8-2.14 (``nvte_compute_amax``, called by
the current-scaling and NVFP4 quantizers) reads the tensor once, abs and max in registers, a block reduction and one
atomic per block: 1 pass; so does torchao's ``max(abs(x))`` compiled by Inductor (the abs fused into the reduction);
eager PyTorch runs ``abs`` (read and write) and the reduction (read): 3. The class is calibrated on the amax timed on
the H200 (``data/reference/h200_kernels.csv``: 8,192 x 14,336 bf16, 234.9 MB, 200.0 us, 1,174 GB/s on the bytes read
once) as PyTorch's eager op (inferred: the table does not name the call, and a one-pass read-and-reduce streams at
4,266 GB/s on the same chip, ``read_reduce``): ``3 x 234.9 MB / (200.0 - 2.85 us) / 4,278 GB/s = 0.835`` of the
copy a pass, less the kernel overhead the model adds to each row.

Eager PyTorch chains (norms, rotary embeddings, the SwiGLU, the K/V copies of grouped-query attention) and the
bytes they move: :mod:`hnplan.compute.eager_ops` (re-exported here).

Bytes per element of the recipes' quantised copies, of the sequence-parallel all-gathers and of the
distributed optimizer's parameter all-gather: :mod:`hnplan.compute.lowp_bytes` (re-exported here).

References
----------
.. [1] NVIDIA Transformer Engine, ``transformer_engine/common/recipe/__init__.py`` (``DelayedScaling``,
   ``Float8CurrentScaling``, ``MXFP8BlockScaling``) and the FP8 primer of its documentation.
.. [2] Micikevicius et al., "FP8 Formats for Deep Learning", arXiv:2209.05433 (per-tensor scaling).
.. [3] Open Compute Project, "OCP Microscaling Formats (MX) Specification" v1.0 (32-element blocks,
   E8M0 scales); Transformer Engine ``transformer_engine/pytorch/utils.py``
   (``is_non_tn_fp8_gemm_supported``: compute capability 10.x and 11.x, Blackwell).
.. [5] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 3.3.2 (1 x 128 activation tiles,
   128 x 128 weight blocks, online scales).
.. [6] NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149, Sec. 3-4 (16-element blocks,
   E4M3 block scales and an fp32 tensor scale; FP4 Fprop, Dgrad and Wgrad GEMMs; 16 x 16 weight blocks;
   random Hadamard transforms on the Wgrad inputs; stochastic rounding of gradients; a few layers in bf16).
.. [7] NVIDIA Transformer Engine, ``transformer_engine/common/recipe/__init__.py`` (``NVFP4BlockScaling``:
   ``disable_rht``, ``disable_stochastic_rounding``, ``disable_2d_quantization``, and the
   ``NVTE_NVFP4_DISABLE_*`` environment variables MLPerf Training v5.1 submissions set).
.. [11] NVIDIA Transformer Engine v2.8-v2.14, ``transformer_engine/pytorch/csrc/extensions/normalization.cpp``
   (``layernorm_fwd`` / ``rmsnorm_fwd``: ``Impl::FUSED_NORM_AMAX_NVFP4``, the norm writes bf16 and its amax,
   then ``NVFP4Quantizer::quantize_with_amax``; ``Impl::UNFUSED`` when ``with_rht`` and
   ``with_post_rht_amax`` or when ``NVTE_NORM_FWD_USE_CUDNN`` is set; an MXFP8 quantizer is
   ``Impl::FULLY_FUSED``, the norm writing the MXFP8 copies, only with ``NVTE_NORM_FWD_USE_CUDNN`` and
   ``Impl::UNFUSED`` otherwise), ``activation.cpp`` (``activation_helper`` / ``dactivation_helper``:
   ``FUSED_ACTIVATION_AMAX_NVFP4`` likewise), ``quantizer.cpp`` (``NVFP4Quantizer::quantize_impl``: a
   separate ``nvte_compute_amax`` otherwise) and ``ops/basic/activation.py`` (the op fuser's ``SwiGLU`` passes
   ``next_op_input_quantizer`` and ``prev_op_grad_output_quantizer`` to ``tex.swiglu`` / ``tex.dswiglu``);
   both fused paths arrived in v2.8, with the NVFP4 recipe (absent from v2.7), and for current scaling
   (``FUSED_NORM_AMAX_FP8``, ``FUSED_ACTIVATION_AMAX_FP8``; pull requests #2004 and #2013) in the same release,
   which a stack states with ``fp8_current_amax_fusion``.
.. [12] NVIDIA Transformer Engine v2.8, v2.9, v2.14, ``transformer_engine/common/recipe/current_scaling.cu``
   (``amax_kernel``, ``launch_amax_kernel``, ``nvte_compute_amax``) and ``pytorch/csrc/quantizer.cpp``
   (``Float8CurrentScalingQuantizer``, ``NVFP4Quantizer``: ``nvte_compute_amax_with_config`` before the cast).
.. [13] pytorch/ao ``torchao/float8/float8_utils.py`` (``tensor_to_amax``: ``torch.max(torch.abs(x))``); pytorch/ao
   pull request 905 (the eager ``torch.max(torch.abs)`` runs three kernels); pytorch/pytorch issue 153103 (Inductor
   computes the tensorwise amax in two kernels: block maxima read from the tensor, then their reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

from hnplan.catalog.schemas import Accelerator, StackChoices
from hnplan.compute._op import above_one
from hnplan.compute.counts import achievable_hbm_Bps
from hnplan.compute.eager_ops import (  # noqa: F401  (re-exported)
    NORM_EAGER_BWD_BYTES,
    NORM_EAGER_BYTES,
    ROPE_CHAIN_BYTES,
    ROPE_EAGER_BYTES,
    SWIGLU_EAGER_BYTES,
    act_op,
    kv_expand_op,
    norm_op,
    rope_op,
)
from hnplan.compute.lowp_bytes import (  # noqa: F401  (re-exported: the per-recipe bytes live there)
    BF16,
    BLOCK_SCALE_BYTES,
    DTYPE_RECIPE,
    FP4,
    FP8,
    FP8_RECIPES,
    LOWP_PARAM_GATHER_BYTES,
    NVFP4_COPY,
    PER_TENSOR,
    param_gather_bytes_per_weight,
    quantised_weight_bytes,
    scaled_copy_bytes,
    sp_gather_bytes,
)
from hnplan.compute.tp_overlap import ub_config
from hnplan.errors import InputError

# GEMMs whose input is the output of a norm (Transformer Engine LayerNormLinear / LayerNormMLP)
NORM_FED = frozenset({"qkv_proj", "q_proj", "q_down", "kv_down", "mlp_up", "shared_expert_up"})
# the dense MLP's GEMMs next to its SwiGLU: the down projection's input is the activation's output, the up
# projection's output gradient the activation backward's (with the op fuser, both Transformer Engine kernels [11]_)
ACT_FED, ACT_GRAD = frozenset({"mlp_down"}), frozenset({"mlp_up"})
# row-parallel GEMMs whose output (and so output gradient) is sequence-sharded under sequence parallelism
ROW_PARALLEL = frozenset({"o_proj", "mlp_down", "shared_expert_down"})
# GEMMs that stay in bf16 in fp8 training: the LM head (Megatron-Core's output layer is a plain
# ColumnParallelLinear, not a Transformer Engine module; DeepSeek-V3 Sec. 3.3.1 keeps it in bf16) and
# the MoE router (a plain linear layer in both)
BF16_GEMMS = frozenset({"lm_head", "router"})


@dataclass(frozen=True)
class StepKernels:
    """The kernel choices of a stack the operator model needs (from :class:`StackChoices`).

    ``weight_cast``: ``microbatch`` (every forward), ``step`` (cached across a step's micro-batches)
    or ``none`` (fp8 parameters). ``ep_dispatcher``: the MoE token dispatcher (``alltoall`` or ``flex``,
    :class:`hnplan.catalog.schemas.StackChoices`), which sets the permutation bytes. ``cp_algorithm``:
    ``p2p_ring`` (attention as Transformer Engine's ring of ``cp`` kernels) or ``allgather`` (one kernel over
    the gathered K/V). ``tp_overlap_chunks``: the stack overlaps TP communication with Transformer Engine's
    userbuffers (``tp_comm``), which run the overlapped GEMMs in chunks; ``tp_overlap_cfg``: the stack's
    userbuffers configurations by TP degree (:func:`hnplan.compute.tp_overlap.ub_config`), which set the
    chunk count of each overlapped GEMM (:func:`hnplan.compute.tp_overlap.overlap_chunks`).
    ``act_cast_fusion``: the SwiGLU runs in Transformer Engine with the next GEMM's quantizer
    (``fp8_act_cast_fusion``). ``norm_cudnn``: Transformer Engine's norms run cuDNN's kernels
    (``NVTE_NORM_FWD_USE_CUDNN=1``), which write MXFP8 but return no amax [11]_. ``current_amax_fusion``:
    the norm and activation kernels return the amax for current scaling as well (Transformer Engine 2.8+).
    ``fp8_head``: the LM head is an fp8 GEMM with its quantisation rows, not one of :data:`BF16_GEMMS`
    (``fp8_output_proj``). ``amax_passes``: streaming passes of an amax over its tensor (module docstring).
    ``grad_sums``: eager autograd's gradient sums (``autograd_grad_sums``, :func:`hnplan.compute.eager_ops.grad_sum_op`).
    ``fused_grouped_mlp``: MXFP8 routed experts in Transformer Engine's fused grouped MLP (``fused_grouped_mlp``,
    :func:`fused_expert_mlp`). ``expert_bias_kernel``: how a model's expert FC2 bias is added in training
    (:func:`hnplan.compute.eager_ops.expert_bias_op`). ``autocast_fp32``: ``torch.autocast`` over fp32 parameters
    (``autocast_fp32_params``, :func:`hnplan.compute.eager_ops.autocast_stream_ops`).
    """

    fp8_recipe: str = "delayed"
    weight_cast: str = "step"
    norm_cast_fusion: bool = True
    cast_transpose_fusion: bool = True
    norm_kernel: str = "fused"
    rope_kernel: str = "fused"
    ep_dispatcher: str = "alltoall"
    cp_algorithm: str = "p2p_ring"
    nvfp4_rht: bool = True
    tp_overlap_chunks: bool = False
    tp_overlap_cfg: tuple = ()
    act_cast_fusion: bool = False
    norm_cudnn: bool = False
    current_amax_fusion: bool = False
    fp8_head: bool = False
    amax_passes: int = 1
    act_kernel: str = "fused"
    gqa_kv_copy: bool = False
    grad_sums: bool = False
    fused_grouped_mlp: bool = False
    rope_attention_factor_fused: bool = False
    expert_bias_kernel: str = "per_expert"
    autocast_fp32: bool = False

    @classmethod
    def of(cls, choices: StackChoices | None, dtype: str | None = None) -> StepKernels:
        """The kernels of a stack's choices (None: hnplan's default stack); a training ``dtype`` with one
        recipe of its own (``fp4``: ``nvfp4``, :data:`DTYPE_RECIPE`) replaces the stack's fp8 recipe."""
        ch = StackChoices() if choices is None else choices
        cast = "none" if ch.fp8_params else ("step" if ch.fp8_weight_cache else "microbatch")
        return cls(
            DTYPE_RECIPE.get(dtype or "", ch.fp8_recipe),
            cast,
            ch.fp8_norm_cast_fusion,
            ch.fp8_cast_transpose_fusion,
            ch.norm_kernel,
            ch.rope_kernel,
            ch.ep_dispatcher,
            ch.cp_algorithm,
            ch.nvfp4_rht,
            ch.tp_comm,
            ub_config(ch.tp_overlap_cfg),
            ch.fp8_act_cast_fusion,
            ch.norm_cudnn,
            ch.fp8_current_amax_fusion,
            ch.fp8_output_proj,
            ch.amax_passes,
            ch.act_kernel,
            ch.gqa_kv_copy,
            ch.autograd_grad_sums,
            ch.fused_grouped_mlp,
            ch.rope_attention_factor_fused,
            ch.expert_bias_kernel,
            ch.autocast_fp32_params,
        )


DEFAULT_KERNELS = StepKernels()  # hnplan's default stack (megatron-core)
#: the quantisations the fused grouped MLP writes in GEMM epilogues: the FC2 input (the SwiGLU output) in the
#: forward, the FC1 output gradient (the SwiGLU backward's) in the backward
FUSED_EXPERT_QUANT = frozenset({"expert_down_x", "expert_up_dy"})


def fused_expert_mlp(k: StepKernels, wb: float, phase: str = "train") -> bool:
    """Whether a training step's routed experts run Transformer Engine's fused grouped MLP: the stack's
    ``fused_grouped_mlp`` under MXFP8 with quantised GEMMs (``wb``, weight bytes per element, below bf16's 2).
    Its FC1 GEMM applies the SwiGLU in the epilogue and writes the FC2 input quantised, its FC2 data-gradient
    GEMM the SwiGLU backward and the FC1 output gradient quantised (``transformer_engine/pytorch/ops/fused/
    grouped_mlp.py``, cuDNN frontend ``grouped_gemm_glu_wrapper_sm100`` / ``grouped_gemm_dglu_wrapper_sm100``),
    so the operator table has no ``expert_act`` rows and no :data:`FUSED_EXPERT_QUANT` quantisation rows. NVFP4
    keeps them: its fused path quantises the FC2 input in a kernel of its own.

    >>> fused_expert_mlp(StepKernels("mxfp8", fused_grouped_mlp=True), 1.0)
    True
    >>> fused_expert_mlp(StepKernels("mxfp8", fused_grouped_mlp=True), 2.0)  # a bf16 step
    False
    """
    return k.fused_grouped_mlp and k.fp8_recipe == "mxfp8" and wb < 2.0 and phase == "train"


def check_recipe(acc: Accelerator, recipe: str) -> None:
    """Raise :class:`hnplan.errors.InputError` when ``acc`` cannot run the fp8 recipe: MXFP8 block scaling
    needs Blackwell tensor cores (Transformer Engine ``check_mxfp8_support``: compute capability 10.0 and
    later, the same chips whose fp8 GEMMs take non-TN layouts, ``fp8_tn_only: false``).

    >>> from types import SimpleNamespace
    >>> check_recipe(SimpleNamespace(id="h100-sxm", fp8_tn_only=None), "mxfp8")
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: fp8 recipe mxfp8 needs Blackwell tensor cores (MXFP8 block scaling); h100-sxm runs per-tensor (delayed, current) or blockwise fp8
    """
    if recipe == "nvfp4" and not (acc.dense_tflops or {}).get("fp4"):
        raise InputError(f"NVFP4 training (dtype fp4) needs FP4 tensor cores (Blackwell); {acc.id} has no fp4 peak")
    if recipe == "mxfp8" and acc.fp8_tn_only is not False:
        raise InputError(
            f"fp8 recipe mxfp8 needs Blackwell tensor cores (MXFP8 block scaling); {acc.id} runs per-tensor "
            "(delayed, current) or blockwise fp8"
        )


def mxfp8_gemm_accelerator(acc: Accelerator, provenance: dict[str, str] | None = None) -> Accelerator:
    """The accelerator whose fp8 GEMMs run as MXFP8 GEMMs: the fp8 ceilings (``gemm_efficiency`` and
    ``matmul_efficiency``: per-tensor FP8 measurements, or a stack's) times the chip's ``mxfp8_gemm_ratio``, the
    rate of a block-scaled GEMM over a per-tensor one of the same shape (Transformer Engine's cuBLASLt GEMMs on a
    B300: 0.951, :mod:`hnplan.validation.mxfp8_gemm`); unchanged where the chip has none. ``provenance`` (when
    given) gets ``mxfp8_gemm_ratio``: which applied.

    >>> from hnplan.catalog.loader import load_catalog
    >>> acc, prov = load_catalog().accelerator("gb200"), {}
    >>> round(mxfp8_gemm_accelerator(acc, prov).gemm_efficiency["fp8"], 4), prov["mxfp8_gemm_ratio"]
    (0.6315, 'accelerator gb200 (MXFP8 GEMMs at 0.951 of the per-tensor fp8 rate)')
    """
    ratio = acc.mxfp8_gemm_ratio
    prov = provenance if provenance is not None else {}
    if ratio is None:
        prov["mxfp8_gemm_ratio"] = f"no MXFP8 / per-tensor fp8 GEMM ratio for {acc.id}: the fp8 ceiling"
        return acc
    prov["mxfp8_gemm_ratio"] = f"accelerator {acc.id} (MXFP8 GEMMs at {ratio:g} of the per-tensor fp8 rate)"
    update = {"matmul_efficiency": {**acc.matmul_efficiency, "fp8": acc.matmul_efficiency["fp8"] * ratio}}
    if acc.gemm_efficiency is not None and "fp8" in acc.gemm_efficiency:
        update["gemm_efficiency"] = {**acc.gemm_efficiency, "fp8": acc.gemm_efficiency["fp8"] * ratio}
    return acc.model_copy(update=update)


def needs_transpose(acc: Accelerator, recipe: str) -> bool:
    """Whether per-tensor fp8 GEMMs on ``acc`` need transposed fp8 copies (TN layout only; MXFP8 never)."""
    return recipe in ("delayed", "current") and acc.fp8_tn_only is not False


def quantise(
    name: str,
    elems: float,
    k: StepKernels,
    transpose: bool,
    norm_fused: bool = False,
    shard: float = 1.0,
    weight: bool = False,
    amax_fused: bool = False,
) -> list:
    """The kernels quantising one bf16 tensor of ``elems`` elements to fp8: ``[(row name, kernel class,
    bytes)]`` (module docstring). ``norm_fused``: the preceding norm already wrote the row-wise copy.
    ``shard``: the tensor is quantised on ``elems / shard`` elements of each rank and then all-gathered
    in fp8 (sequence parallelism: Transformer Engine gathers the fp8 input of a column-parallel GEMM and
    the fp8 output gradient of a row-parallel one), so the cast and amax read that share and the
    transpose, which needs the gathered tensor, is its own kernel over all ``elems``. ``weight``: the
    tensor is a GEMM weight (no Hadamard transform under ``nvfp4``: weights are no weight-gradient input).
    ``amax_fused``: the Transformer Engine kernel that wrote the tensor returned its amax (``nvfp4``, and
    ``current`` with ``current_amax_fusion``; [11]_)."""
    local = elems / shard
    if k.fp8_recipe == "nvfp4":
        return _nvfp4(name, local, k.nvfp4_rht and not weight, amax_fused, k.amax_passes)
    # a current-scaling cast needs the finished tensor's amax; an MXFP8 one is written by cuDNN's norm only [11]_
    fuse_norm = norm_fused and k.norm_cast_fusion and k.fp8_recipe != "current"
    fuse_norm = fuse_norm and (k.fp8_recipe != "mxfp8" or k.norm_cudnn)
    if k.fp8_recipe in BLOCK_SCALE_BYTES:  # blocks along either axis are local to a shard of tokens
        copy = scaled_copy_bytes(k.fp8_recipe)
        by = (0.0 if fuse_norm else BF16 + copy) + copy
        return [(f"{name}_{k.fp8_recipe}", "fp8_cast", by * local)]
    fused_t = transpose and k.cast_transpose_fusion and not above_one(shard)
    out = []
    if k.fp8_recipe == "current" and not (amax_fused and k.current_amax_fusion):
        out.append((f"{name}_amax", "amax", k.amax_passes * BF16 * local))
    if not fuse_norm:
        out.append((f"{name}_fp8", "fp8_cast", (BF16 + FP8 + (FP8 if fused_t else 0.0)) * local))
    if transpose and not (fused_t and not fuse_norm):
        out.append((f"{name}_fp8_t", "fp8_cast", 2.0 * FP8 * elems))
    return out


def _nvfp4(name: str, elems: float, rht: bool, amax_fused: bool = False, passes: int = 1) -> list:
    """The NVFP4 quantisation of ``elems`` local bf16 elements (module docstring; blocks of 16 along either
    axis are local to a shard, so a sequence-parallel tensor is quantised on its shard): the amax pass
    for the per-tensor scale, then the cast to a row-wise and a column-wise copy, or with ``rht`` the
    row-wise cast and the Hadamard-transformed column-wise cast as two kernels. ``amax_fused``: the producing
    kernel returned the amax (no amax pass), honoured without ``rht`` only (the post-transform amax is the
    quantiser's own, [11]_). ``passes``: the stack's streaming passes of an amax (``amax_passes``).

    >>> [(n, c, round(b, 4)) for n, c, b in _nvfp4("x", 1.0, False)]
    [('x_amax', 'amax', 2.0), ('x_nvfp4', 'fp8_cast', 3.125)]
    >>> [(n, c, round(b, 4)) for n, c, b in _nvfp4("x", 1.0, True)]
    [('x_amax', 'amax', 2.0), ('x_nvfp4', 'fp8_cast', 2.5625), ('x_nvfp4_rht', 'fp8_cast', 2.5625)]
    >>> [(n, c, round(b, 4)) for n, c, b in _nvfp4("x", 1.0, False, amax_fused=True)]
    [('x_nvfp4', 'fp8_cast', 3.125)]
    """
    out = [] if amax_fused and not rht else [(f"{name}_amax", "amax", passes * BF16 * elems)]
    if rht:
        out.append((f"{name}_nvfp4", "fp8_cast", (BF16 + NVFP4_COPY) * elems))
        out.append((f"{name}_nvfp4_rht", "fp8_cast", (BF16 + NVFP4_COPY) * elems))
    else:
        out.append((f"{name}_nvfp4", "fp8_cast", (BF16 + 2.0 * NVFP4_COPY) * elems))
    return out


def fp8_gemm_rows(op, acc: Accelerator, k: StepKernels, recompute: str, count: float, sp_tp: int = 1) -> list:
    """Quantisation rows of one fp8 GEMM operator ``op`` (an ``_Op`` of kind ``gemm``) in training, as raw
    operator rows ``(name, scope, kind, phase, count, flops, bytes, m, n, k, groups)``; their kernel
    class follows from the name (:func:`kernel_class`). ``sp_tp``: the TP degree when sequence parallelism
    shards the input of the column-parallel GEMMs after a norm and the output gradient of the
    row-parallel ones (1 otherwise)."""
    t = needs_transpose(acc, k.fp8_recipe)
    x, dy = op.groups * op.m * op.k, op.groups * op.m * op.n
    w = op.w_bytes / op.in_bytes
    fed = op.name in NORM_FED
    # the producer of the tensor returns its amax (nvfp4 [11]_): a LayerNormLinear norm, the op fuser's SwiGLU
    x_amax = (fed and k.norm_cast_fusion and not k.norm_cudnn) or (op.name in ACT_FED and k.act_cast_fusion)
    dy_amax = op.name in ACT_GRAD and k.act_cast_fusion
    fused = fused_expert_mlp(k, op.in_bytes)  # the fused grouped MLP writes two of the experts' inputs in epilogues
    per = []
    if not (fused and f"{op.name}_x" in FUSED_EXPERT_QUANT):
        per += [("fwd", r) for r in quantise(f"{op.name}_x", x, k, t, fed, sp_tp if fed else 1.0, amax_fused=x_amax)]
    dy_shard = sp_tp if op.name in ROW_PARALLEL else 1.0
    if not (fused and f"{op.name}_dy" in FUSED_EXPERT_QUANT):
        per += [("bwd", r) for r in quantise(f"{op.name}_dy", dy, k, t, shard=dy_shard, amax_fused=dy_amax)]
    if k.weight_cast != "none":
        per += [
            ("fwd" if k.weight_cast == "microbatch" else "step", r)
            for r in quantise(f"{op.name}_w", w, k, t, weight=True)
        ]
    rows = []
    for phase, (name, _, by) in per:
        rows.append((name, op.scope, "elementwise", phase, count, 0.0, by, 0.0, 0.0, 0.0, 1.0))
        if phase == "fwd" and recompute == "full" and op.scope.endswith("layer") and "_w_" not in name:
            rows.append((name, op.scope, "elementwise", "recompute", count, 0.0, by, 0.0, 0.0, 0.0, 1.0))
    return rows


def weight_cast_bytes_per_param(acc: Accelerator, k: StepKernels) -> dict[str, float]:
    """Bytes per fp8 GEMM weight of the once-per-step weight cast, by kernel class [bytes]; empty unless the
    weight cast is cached per step."""
    if k.weight_cast != "step":
        return {}
    out: dict[str, float] = {}
    for _, cls, by in quantise("w", 1.0, k, needs_transpose(acc, k.fp8_recipe), weight=True):
        out[cls] = out.get(cls, 0.0) + by
    return out


def kernel_class(name: str) -> str | None:
    """Kernel class of a row this module names (``*_amax``, ``*_fp8``, ``*_fp8_t``, ``*_mxfp8``, ``*_nvfp4``,
    ``*_norm_eager``, ``rope_eager``, ``*_act_eager``, ``*_grad_sum``, ``*_bias_eager``, ``*_clamp_eager``), or
    None."""
    if name.endswith("_amax"):
        return "amax"
    if name.endswith(("_fp8", "_fp8_t", "_mxfp8", "_blockwise", "_nvfp4", "_nvfp4_rht")):
        return "fp8_cast"
    if name.endswith("_norm_eager"):
        return "norm_eager"
    if name == "rope_eager" or name.endswith(("_act_eager", "_grad_sum", "_bias_eager", "_clamp_eager")):
        return "residual"
    return None


def class_Bps(acc: Accelerator, kernel_class: str) -> float:
    """Achievable bandwidth of a memory-bound kernel class on ``acc``: the streaming copy (HBM x
    ``hbm_efficiency``) x the class's ``memory_kernel_efficiency`` (1 where absent) [bytes/s]."""
    return achievable_hbm_Bps(acc) * (acc.memory_kernel_efficiency or {}).get(kernel_class, 1.0)


def optimizer_step_s(acc: Accelerator, params, adam_bytes_per_param: float, grad_bytes: float):
    """Optimizer-step kernels on ``params`` local (sharded) parameters [s]: the fused Adam update
    (``adam_bytes_per_param``) and the gradient-norm pass of gradient clipping (one read of the gradient
    buffer, ``grad_bytes`` per element; Megatron-LM ``clip_grad_norm_fp32`` with ``multi_tensor_l2norm``),
    both multi-tensor kernels at the ``optimizer`` class measured for fused AdamW."""
    return params * (adam_bytes_per_param + grad_bytes) / class_Bps(acc, "optimizer")


def weight_cast_step_s(acc: Accelerator, k: StepKernels, fp8_weights):
    """The once-per-step fp8 cast of ``fp8_weights`` local GEMM weights when the stack caches it [s]
    (0 for a weight cast per micro-batch, counted in the operator rows, or fp8 parameters)."""
    by = weight_cast_bytes_per_param(acc, k)
    return sum(fp8_weights * b / class_Bps(acc, c) for c, b in by.items()) if by else 0.0 * fp8_weights
