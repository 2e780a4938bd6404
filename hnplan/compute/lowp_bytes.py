"""Per-recipe byte accounting of low-precision training: the bytes per element of a quantised copy, of the
sequence-parallel all-gathers and of the distributed optimizer's parameter all-gather, and the quantised weights a
step keeps.

A recipe ([1]_, [3]_, [5]_, [6]_) stores a quantised tensor as one copy or two: per-tensor fp8 (``delayed``,
``current``, :data:`PER_TENSOR`) 1 byte an element with one scale per tensor; the block-scaled recipes a row-wise and
a column-wise copy, each 1 byte an element plus its scales (:data:`BLOCK_SCALE_BYTES`: ``mxfp8`` one E8M0 byte per
32 elements, ``blockwise`` one fp32 per 128) or, ``nvfp4``, half a byte plus one E4M3 scale per 16 elements
(:data:`NVFP4_COPY`). The kernels that write the copies, rows of the operator table, are built in
:mod:`hnplan.compute.fp8_recipes`, which re-exports the names of this module (the references keep its
numbering).

Bytes on the wire ([8]_, [9]_, [10]_). With sequence parallelism Transformer Engine all-gathers the
quantised tensors, not the bf16 ones (:func:`sp_gather_bytes`): the forward input of a column-parallel
GEMM (QKV, MLP up; ``gather_along_first_dim`` with the input quantizer, row-wise usage only) and, in
the backward, the output gradient of a row-parallel one (output projection, MLP down; usage row-wise
and column-wise, both gathered for the block-scaled recipes, so an MXFP8 output gradient sends
``2 x (1 + 1/32)`` bytes an element, a little more than bf16). Per-tensor FP8 (``delayed``, ``current``)
gathers the row-wise fp8 data only (``_all_gather_fp8``: 1 byte, one scale shared by the ranks) and
transposes after the gather; MXFP8 (``_all_gather_mxfp8``) and ``blockwise`` send each copy with its
scales; NVFP4 (``_all_gather_nvfp4``, Transformer Engine 2.9 onwards) the packed E2M1 pairs and the E4M3
block scales, ``1/2 + 1/16`` bytes a copy, its per-tensor scale taken from an amax all-reduced over
the TP group first (as ``current``). The reduce-scatters (the row-parallel outputs forward, the
column-parallel data gradients backward) are GEMM outputs and stay bf16. The backward's re-gather of
a column-parallel input for its weight gradient runs beside the data-gradient GEMM (``async_op``) and
is not counted, in bf16 as in the quantised recipes. The distributed optimizer's parameter all-gather
(:func:`param_gather_bytes_per_weight`): bf16, or with fp8 parameters the fp8 weights (1 byte) of the per-tensor
and blockwise recipes; MXFP8 parameters are gathered in bf16 into the gradient buffer and cast after
the gather (Megatron-Core ``param_and_grad_buffer.py``: "For MXFP8 param: Create a shared buffer for
param AG", ``reuse_grad_buf_for_mxfp8_param_ag``): 2 bytes; NVFP4 parameters (``fp4_params``) the
packed weights, half a byte, each rank casting its shard after an all-reduce of the 16 x 16 block
amaxes (fp32, one per 256 weights) over the data-parallel group, counted as ``2 x 4 / 256`` bytes of
gather a weight (an all-reduce moves about twice its bytes; labelled approximation).

References
----------
.. [1] NVIDIA Transformer Engine, ``transformer_engine/common/recipe/__init__.py`` (``DelayedScaling``,
   ``Float8CurrentScaling``, ``MXFP8BlockScaling``) and the FP8 primer of its documentation.
.. [3] Open Compute Project, "OCP Microscaling Formats (MX) Specification" v1.0 (32-element blocks,
   E8M0 scales); Transformer Engine ``transformer_engine/pytorch/utils.py``
   (``is_non_tn_fp8_gemm_supported``: compute capability 10.x and 11.x, Blackwell).
.. [5] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 3.3.2 (1 x 128 activation tiles,
   128 x 128 weight blocks, online scales).
.. [6] NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149, Sec. 3-4 (16-element blocks,
   E4M3 block scales and an fp32 tensor scale; FP4 Fprop, Dgrad and Wgrad GEMMs; 16 x 16 weight blocks;
   random Hadamard transforms on the Wgrad inputs; stochastic rounding of gradients; a few layers in bf16).
.. [8] NVIDIA Transformer Engine v2.9-v2.14, ``transformer_engine/pytorch/module/linear.py``,
   ``layernorm_linear.py``, ``layernorm_mlp.py`` (forward: the input quantizer set to row-wise usage
   before ``gather_along_first_dim``; backward: the grad-output quantizer set to row-wise and
   column-wise usage, the re-gather of the input with ``async_op=True`` beside the dgrad GEMM, the
   dgrad ``reduce_scatter_along_first_dim`` in the activation dtype; ``_customize_quantizers_nvfp4``:
   amax reduction over the TP group) and ``module/base.py`` (``grad_output_preprocess``; ``initialize_ub``:
   the userbuffers of the overlapped all-gathers hold fp8 in fp8 training); v1.8 likewise gathered the
   fp8 norm output and the fp8 output gradient (``layernorm_linear.py``, ``base.py``).
.. [9] NVIDIA Transformer Engine, ``transformer_engine/pytorch/distributed.py`` (``_all_gather_fp8``:
   "we cannot directly gather the transposed fp8 tensor"; ``_all_gather_mxfp8``,
   ``_start_all_gather_fp8_blockwise``, ``_all_gather_nvfp4``: data and scale-inverses of each usage
   gathered; the NVFP4 one since v2.9, "NVFP4 recipe" #2177), ``tensor/utils.py``
   (``_cast_master_weights_to_nvfp4_2d``: NVFP4 primary weights, v2.14).
.. [10] NVIDIA Megatron-LM (the commit Megatron-Bridge v0.5.1 pins, 458c8d0), ``megatron/core/distributed/
   param_and_grad_buffer.py`` (MXFP8 parameters gathered in the gradient buffer's dtype; NVFP4 parameters
   as packed bytes, "NVFP4 native weights for DDP" #4005), ``megatron/core/fp4_utils.py``
   (``quantize_nvfp4_param_shard``: amax reduction over the data-parallel group), and Megatron-Bridge
   ``src/megatron/bridge/training/mixed_precision.py`` @ v0.5.1 (``bf16_with_nvfp4_mixed``:
   ``fp4_param_gather = True``; ``bf16_with_mxfp8_mixed``: ``fp8_param_gather``,
   ``reuse_grad_buf_for_mxfp8_param_ag``).
"""

from __future__ import annotations

from hnplan import units

FP8_RECIPES = ("delayed", "current", "mxfp8", "blockwise", "nvfp4")
# the recipe a low-precision training dtype implies where it has only one (fp4: NVFP4 block scaling [6]_)
DTYPE_RECIPE = {"fp4": "nvfp4"}
# scale bytes per element of the block-scaled recipes: one E8M0 byte per 32 elements (OCP MX v1.0);
# one fp32 scale per 1 x 128 tile (DeepSeek-V3 Sec. 3.3.2, Transformer Engine Float8BlockScaling)
BLOCK_SCALE_BYTES = {"mxfp8": 1.0 / 32, "blockwise": 4.0 / 128}
BF16, FP8, FP4 = (units.dtype_bytes(d) for d in ("bf16", "fp8", "fp4"))  # bytes per element
NVFP4_COPY = FP4 + 1.0 / 16  # bytes per element of one NVFP4 copy: E2M1 + one E4M3 scale per 16 elements [6]_


PER_TENSOR = ("delayed", "current")  # one scale per tensor: the row-wise fp8 data alone is gathered


def scaled_copy_bytes(recipe: str) -> float:
    """Bytes per element of one row-wise or column-wise copy of a tensor quantised with a block-scaled
    ``recipe`` [bytes]: ``mxfp8`` and ``blockwise`` 1 byte plus their scales (:data:`BLOCK_SCALE_BYTES`),
    ``nvfp4`` :data:`NVFP4_COPY`.

    >>> scaled_copy_bytes("mxfp8"), scaled_copy_bytes("nvfp4")   # 1 + 1/32; 1/2 + 1/16
    (1.03125, 0.5625)
    """
    return NVFP4_COPY if recipe == "nvfp4" else FP8 + BLOCK_SCALE_BYTES[recipe]


def sp_gather_bytes(recipe: str) -> tuple[float, float]:
    """Bytes per element of Transformer Engine's sequence-parallel all-gathers in a low-precision
    ``recipe`` ([8]_, [9]_; module docstring): ``(forward input of a column-parallel GEMM, backward
    output gradient of a row-parallel GEMM)`` [bytes/element]; bf16 would be ``(2, 2)``.

    >>> sp_gather_bytes("current")
    (1.0, 1.0)
    >>> sp_gather_bytes("mxfp8")          # 1 + 1/32; row-wise and column-wise copies of the gradient
    (1.03125, 2.0625)
    >>> sp_gather_bytes("nvfp4")          # 1/2 + 1/16 a copy
    (0.5625, 1.125)
    """
    if recipe in PER_TENSOR:
        return FP8, FP8
    copy = scaled_copy_bytes(recipe)
    return copy, 2.0 * copy


# bytes per GEMM weight of the distributed optimizer's parameter all-gather with low-precision
# parameters ([10]_; module docstring): MXFP8 parameters travel as bf16 and are cast after the gather;
# NVFP4 ones packed, plus the data-parallel all-reduce of one fp32 amax per 16 x 16 block
LOWP_PARAM_GATHER_BYTES = {
    "delayed": FP8,
    "current": FP8,
    "blockwise": FP8,
    "mxfp8": BF16,
    "nvfp4": FP4 + 2.0 * 4.0 / 256,
}


def quantised_weight_bytes(recipe: str, tn_only: bool = True) -> float:
    """Bytes per GEMM weight of the quantised weight Transformer Engine keeps for the forward and the
    data-gradient GEMMs of a step [bytes] ([1]_, [3]_, [6]_, [9]_): the row-wise copy and, where the
    data-gradient GEMM needs another layout, the column-wise one.

    * per-tensor fp8 (``delayed``, ``current``): 1 byte; on chips whose fp8 GEMMs take only the TN layout
      (Hopper, ``tn_only``) plus the fp8 transpose, 1 more (``Float8Quantizer``: the ``_transpose`` is made
      only where ``is_non_tn_fp8_gemm_supported`` is false);
    * ``mxfp8`` and ``blockwise``: a row-wise and a column-wise copy, each 1 byte plus its scales
      (``1/32``: one E8M0 byte per 32 elements; ``4/128``: one fp32 per 128);
    * ``nvfp4``: a row-wise and a column-wise copy (the transpose of the 16 x 16-block quantised weight,
      Transformer Engine ``post_all_gather_processing``), each ``1/2 + 1/16`` bytes (the per-tensor fp32
      scale is a few bytes a tensor, not counted).

    >>> quantised_weight_bytes("current"), quantised_weight_bytes("current", tn_only=False)
    (2.0, 1.0)
    >>> quantised_weight_bytes("mxfp8", tn_only=False)   # 2 x (1 + 1/32)
    2.0625
    >>> quantised_weight_bytes("nvfp4", tn_only=False)   # 2 x (1/2 + 1/16)
    1.125
    """
    if recipe in PER_TENSOR:
        return FP8 * (2.0 if tn_only else 1.0)
    return 2.0 * scaled_copy_bytes(recipe)


def param_gather_bytes_per_weight(recipe: str, dtype: str, fp8_params: bool, fp4_params: bool) -> float:
    """Bytes per GEMM weight the distributed optimizer all-gathers [bytes]: bf16 (2) unless the stack
    keeps low-precision parameters of the training ``dtype`` (``fp8_params`` in fp8, ``fp4_params`` in
    fp4), then :data:`LOWP_PARAM_GATHER_BYTES` of the ``recipe``.

    >>> param_gather_bytes_per_weight("current", "fp8", True, False)
    1.0
    >>> param_gather_bytes_per_weight("mxfp8", "fp8", True, False)   # gathered in bf16, cast after
    2.0
    >>> param_gather_bytes_per_weight("nvfp4", "fp4", False, True)   # 1/2 + 2 x 4 / 256
    0.53125
    """
    if (dtype == "fp8" and fp8_params) or (dtype == "fp4" and fp4_params):
        return LOWP_PARAM_GATHER_BYTES[recipe]
    return BF16
