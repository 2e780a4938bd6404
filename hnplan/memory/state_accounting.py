"""Bytes per parameter of model states by precision recipe and stack, and their ZeRO sharding.

Split from :mod:`hnplan.memory.states`, which re-exports every name here.

Each *accounting* (a precision recipe) fixes the bytes per parameter of weights, gradients and
optimizer states (everything the optimizer step keeps: fp32 master weights, fp32 gradient copies,
Adam moments). ZeRO stage 1 shards the optimizer part over the data-parallel group, stage 2 also the
gradients, stage 3 also the weights ([1]_ Sec. 5); Megatron's distributed optimizer is stage 1 ([3]_).

References
----------
.. [1] Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
   SC20, arXiv:1910.02054, Sec. 3.1 (2 + 2 + 12 bytes per parameter), Sec. 5 and Fig. 1.
.. [2] DeepSpeed pull request #5099 (deepspeed/runtime/zero/stage_1_and_2.py,
   ``estimate_zero2_model_states_mem_needs``: ``2 + 18 / N`` with an fp32 gradient copy);
   Rajbhandari et al., "ZeRO-Infinity", SC21, arXiv:2104.07857, Sec. 3 (20 bytes per parameter).
.. [3] Megatron Core developer guide, "Distributed Optimizer" (bytes per parameter: fp16 params and
   grads 20 = 4 + 16/d; bf16 params, fp32 grads 18 = 6 + 12/d; fp32 params and grads 16 = 8 + 8/d).
.. [4] NVIDIA Megatron-LM, ``megatron/core/distributed/param_and_grad_buffer.py`` (one contiguous
   ``main_grad`` buffer, fp32 with ``grad_reduce_in_fp32`` else the parameter dtype) and
   ``megatron/core/optimizer/distrib_optimizer.py`` (fp32 main parameters of the shard, their fp32
   gradients, Adam moments); Transformer Engine ``transformer_engine/pytorch/module/linear.py``
   (fp8 weight and transpose workspaces cached across micro-batches).
.. [5] Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.2 (one layer fewer on
   the first and the last pipeline stage to balance memory).
.. [6] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, Sec. 2.2 (multi-token-prediction
   modules), 3.2.3 (embedding and output head shared with the MTP module on one DualPipe rank) and :mod:`hnplan.memory.recompute` (their parameters on the last stage).
.. [7] NVIDIA Megatron-LM ``megatron/core/optimizer/optimizer_config.py`` (``use_precision_aware_optimizer``,
   ``store_param_remainders``, ``exp_avg_dtype``), ``optimizer/__init__.py`` and ``distrib_optimizer.py``
   (``decoupled_grad``: the shard of the gradient buffer, no fp32 copy) @ 92c8482e6dcd; Transformer Engine
   ``transformer_engine/pytorch/optimizers/fused_adam.py`` v2.9 (``store_param_remainders``: the trailing 16
   bits of the fp32 master weight, the rest is the bf16 weight).
.. [8] NVIDIA Apex ``apex/contrib/optimizers/distributed_fused_adam.py`` @ b7a4acc1 (2024-08-30):
   ``StateBucket`` (``param_remainders_shard`` int16 with ``store_param_remainders``, ``exp_avg_shard`` and
   ``exp_avg_sq_shard`` in the optimizer dtype), ``_init_grad_buffer`` (the contiguous gradient buffer in
   ``grad_sync_dtype``) and ``_start_bucket_grad_sync`` (each bucket's reduce-scatter writes a new
   ``sync_grads_shard``, kept as ``grads_shard`` until the step); NVIDIA NeMo v2.0.0 (the 24.09 container)
   ``nemo/collections/nlp/models/language_modeling/megatron_base_model.py`` ``setup_optimization`` (fp32
   optimizer, bf16 model with ``megatron_amp_O2``: ``store_params=False``, ``store_param_remainders=True``) and
   ``nemo/core/optim/distributed_adam.py`` (sharded over the data-parallel group with context parallelism).
.. [9] NVIDIA Megatron-LM @ d98e8a64ddf3, Megatron-FSDP: ``megatron_fsdp/param_and_grad_buffer.py`` (a
   column-wise "transpose weight buffer" is sharded only for MXFP8, ``mixed_precision.fp8_need_transpose_data``),
   ``megatron_fsdp.py`` ``release_module_parameters`` (after a unit's forward its parameters are resharded and,
   unless ``keep_fp8_transpose_cache``, ``fp8_discard_transpose_cache`` drops the fp8 transpose), ``src/README.md``
   (``keep_fp8_transpose_cache``: "number of parameter x 1 Byte" more memory); Megatron-Core
   ``transformer/module.py`` ``set_is_first_microbatch`` (every Transformer Engine module of the wrapped model, with
   or without FSDP) and Transformer Engine ``module/base.py`` ``get_weight_workspace`` (the cast kept in the
   module's ``_fp8_workspaces``, whole: Megatron-FSDP passes no ``fsdp_group`` to Transformer Engine).
.. [10] NVIDIA Megatron-LM @ 6a6cd478839d: ``models/gpt/gpt_model.py`` (the word embedding a
   ``tensor_parallel.VocabParallelEmbedding``, the output head a ``tensor_parallel.ColumnParallelLinear``: no
   Transformer Engine module, bf16 GEMMs and no fp8 cast) and ``fp8_utils.py`` ``get_fp8_context`` (no fp8 autocast
   for the ``first_last_layers_bf16`` layers); Transformer Engine ``module/base.py`` ``get_weight_workspace`` (only
   a module's GEMM weights are cast and cached in fp8; its norm weights enter the fused norm in bf16).
"""

from __future__ import annotations

from dataclasses import dataclass

from hnplan.compute.fp8_recipes import NVFP4_COPY, quantised_weight_bytes
from hnplan.compute.lowp_bytes import FP8, PER_TENSOR
from hnplan.errors import check_choice

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class StateAccounting:
    """Bytes per parameter of a training precision recipe [bytes/parameter].

    ``optimizer_bytes`` is everything the optimizer step keeps besides the working weights and
    gradients: fp32 master weights, fp32 gradient copies, Adam's momentum and variance.
    ``embedding_grad_extra`` and ``embedding_optimizer_extra``: bytes a word-embedding parameter
    (:attr:`StageParams.embedding`) keeps beyond these in its gradient buffer and in the sharded optimizer
    part (NeMo 1 reduces the embeddings' gradients in fp32 beside bf16 ones, [8]_); 0 by default.
    ``unquantised_weight_bytes``: the weight bytes of the parameters outside the low-precision GEMMs
    (embeddings, output head, norms, and every weight of the ``bf16_end_layers`` Transformer layers at each
    end of the model) where they differ from ``weight_bytes`` (low-precision parameters: those stay bf16);
    None: the same.
    """

    name: str
    weight_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    source: str
    embedding_grad_extra: float = 0.0
    embedding_optimizer_extra: float = 0.0
    unquantised_weight_bytes: float | None = None
    bf16_end_layers: int = 0
    zero3_shard_bytes: float | None = None
    zero3_whole_bytes: float = 0.0
    zero3_gather_bytes: float | None = None
    zero3_unquantised: float | None = None

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes

    def zero3_weight_bytes(self, shards) -> float:
        """Weight bytes per low-precision GEMM parameter a rank keeps between micro-batches at ZeRO stage 3
        [bytes/parameter]: ``zero3_shard_bytes / shards`` (the part ZeRO-3 shards: the bf16 weight, or the
        quantised parameter's buffers Megatron-FSDP shards; default ``weight_bytes``) plus
        ``zero3_whole_bytes`` (caches every rank keeps whole for the layers it computes:
        :func:`stack_accounting`)."""
        shard = self.weight_bytes if self.zero3_shard_bytes is None else self.zero3_shard_bytes
        return shard / shards + self.zero3_whole_bytes

    def zero3_unquantised_bytes(self, shards) -> float:
        """Weight bytes per parameter outside the low-precision GEMMs (embeddings, head, norms, the bf16 end
        layers) at ZeRO stage 3 [bytes/parameter]: their bf16 (or ``unquantised_weight_bytes``) shard, no
        cached cast."""
        u = self.zero3_unquantised if self.zero3_unquantised is not None else self.unquantised_weight_bytes
        return (self.weight_bytes if u is None else u) / shards

    @property
    def zero3_gathered_bytes(self) -> float:
        """Bytes per low-precision GEMM parameter of a unit gathered at ZeRO stage 3 [bytes/parameter]:
        ``zero3_gather_bytes``, by default ``weight_bytes`` less the caches kept whole."""
        if self.zero3_gather_bytes is not None:
            return self.zero3_gather_bytes
        return self.weight_bytes - self.zero3_whole_bytes


ACCOUNTINGS = {
    a.name: a
    for a in (
        StateAccounting(
            "zero-paper",
            2.0,
            2.0,
            12.0,
            "ZeRO [1] Sec. 3.1: fp16 weights and gradients; fp32 master weights, momentum, variance",
        ),
        StateAccounting(
            "fp32-grad-accum",
            2.0,
            2.0,
            16.0,
            "DeepSpeed fp16 optimizer [2]: fp16 weights and gradients; fp32 gradients, master "
            "weights, momentum, variance (ZeRO-2: 2 + 18/N)",
        ),
        StateAccounting(
            "megatron-bf16",
            2.0,
            4.0,
            12.0,
            "Megatron Core distributed optimizer [3]: bf16 weights, fp32 main gradients (6 + 12/d)",
        ),
        StateAccounting(
            "fp32",
            4.0,
            4.0,
            8.0,
            "fp32 weights and gradients, Adam momentum and variance, no master copy [3] (8 + 8/d)",
        ),
        StateAccounting(
            "fp8",
            2.0,
            4.0,
            12.0,
            "fp8 GEMMs with Transformer Engine: the model states of megatron-bf16 (bf16 weights, "
            "fp32 main gradients); the fp8 casts of the weights are transient, one layer at a time "
            "(labelled assumption); activations keep fp8 GEMM inputs",
        ),
    )
}


def stack_accounting(
    dtype: str,
    grad_bytes: float = 4.0,
    fp8_params: bool = False,
    fp8_weight_cache: bool = True,
    precision_aware: bool = False,
    moment_bytes: float = 4.0,
    fp8_recipe: str = "delayed",
    optimizer: str = "megatron-core",
    fp4_params: bool = False,
    bf16_end_layers: int = 0,
    keep_fp8_transpose_cache: bool = False,
    zero3_fp8_params: bool | None = None,
) -> StateAccounting:
    """Bytes per parameter as a Megatron-Core stack keeps them with the distributed optimizer ([3]_, [4]_, [7]_).

    * weights: bf16 (2 bytes); in fp8 training plus Transformer Engine's cached fp8 cast and
      transpose (+2) when ``fp8_weight_cache``; in fp4 training (NVFP4) bf16 weights plus the cached
      row- and column-wise NVFP4 casts (+1.125, :data:`hnplan.compute.fp8_recipes.NVFP4_COPY`); the cache is
      of the quantised GEMMs' weights only: embeddings, head, norms and the ``bf16_end_layers`` layers keep
      their bf16 weights alone (``unquantised_weight_bytes`` 2, [10]_);
    * with low-precision parameters (``fp8_params`` in fp8, ``fp4_params`` in fp4 training; Megatron-Core
      ``fp8_param_gather`` / ``fp4_param_gather``) only the quantised GEMM weights the forward and the
      data-gradient GEMMs read, no bf16 copy (:func:`hnplan.compute.fp8_recipes.quantised_weight_bytes`:
      per-tensor fp8 1 + 1 transpose, kept on Blackwell too; NVFP4 2 x (1/2 + 1/16)); embeddings, head,
      norms and the ``bf16_end_layers`` layers at each end stay bf16 (``unquantised_weight_bytes`` 2;
      docs/memory.md gives the Megatron-Core and Transformer Engine sources);
    * gradients: the contiguous ``main_grad`` buffer at ``grad_bytes`` a parameter (4: fp32,
      ``grad_reduce_in_fp32``; 2: bf16);
    * optimizer (sharded by ZeRO >= 1 / the distributed optimizer): fp32 main weights (4) and Adam's two
      moments (``2 x moment_bytes``), plus an fp32 copy of the gradient shard (4) when the buffer is not
      fp32 ([3]_: ``4 + 16/d`` for 16-bit gradients, ``6 + 12/d`` for fp32 ones). With the
      precision-aware optimizer ([7]_) in bf16 training or with fp8 delayed scaling, Transformer Engine's
      ``FusedAdam`` reads the gradient buffer in place (no copy) and, for bf16 weights, keeps only the
      16 low bits of each fp32 master weight (its high 16 bits are the bf16 weight): 2 bytes.

    ZeRO stage 3 (:meth:`StateAccounting.zero3_weight_bytes`, Megatron-FSDP [9]_): the bf16 weights are sharded
    but Transformer Engine's cached casts (``fp8_weight_cache``) are kept whole for every layer the rank computes;
    low-precision parameters are sharded as their row-wise data (MXFP8: row- and column-wise), the other layout
    is made after each all-gather and dropped after the unit's forward (the ZeRO-3 working set,
    :mod:`hnplan.memory.zero_working`) unless ``keep_fp8_transpose_cache`` keeps it, whole. ``zero3_fp8_params``
    (default ``fp8_params``): whether fp8 training under ZeRO-3 runs on quantised parameters (Megatron-FSDP with
    ``fp8_param_gather``, which a stack may set where its ZeRO-1 path keeps bf16 weights).

    ``optimizer="apex"``: NeMo 1's ``distributed_fused_adam`` ([8]_) instead of Megatron-Core's: fp32 master
    weights as 16-bit remainders beside bf16 weights (4 bytes with ``fp8_params``: NeMo stores them whole),
    fp32 moments, and the reduce-scatter's own gradient shard at ``grad_bytes`` (no fp32 copy); ``precision_aware``
    and ``moment_bytes`` are Megatron-Core options and do not apply.

    Examples
    --------
    >>> a = stack_accounting("bf16", 4.0); (a.weight_bytes, a.grad_bytes, a.optimizer_bytes)
    (2.0, 4.0, 12.0)
    >>> a = stack_accounting("fp8", 2.0, fp8_params=True); (a.weight_bytes, a.grad_bytes, a.optimizer_bytes)
    (2.0, 2.0, 16.0)
    >>> stack_accounting("fp8", 4.0).weight_bytes, stack_accounting("fp8", 4.0, fp8_weight_cache=False).weight_bytes
    (4.0, 2.0)

    At ZeRO-3 over 64 ranks: the bf16 shard plus the whole cached fp8 cast and transpose; per-tensor fp8
    parameters: the row-wise shard, plus the transpose, whole, with ``keep_fp8_transpose_cache``:

    >>> stack_accounting("fp8", 4.0).zero3_weight_bytes(64)   # 2 / 64 + 2
    2.03125
    >>> p = stack_accounting("fp8", 2.0, fp8_params=True, fp8_recipe="current")
    >>> p.zero3_weight_bytes(64), stack_accounting("fp8", 2.0, True, keep_fp8_transpose_cache=True).zero3_weight_bytes(64)
    (0.015625, 1.015625)

    NVFP4 (``fp4``): bf16 weights plus the cached row- and column-wise NVFP4 casts, 2 x (1/2 + 1/16) bytes;
    NVFP4 parameters: the two NVFP4 copies alone, the embeddings, head and norms in bf16:

    >>> stack_accounting("fp4", 4.0).weight_bytes
    3.125
    >>> a = stack_accounting("fp4", 4.0, fp4_params=True); (a.weight_bytes, a.unquantised_weight_bytes)
    (1.125, 2.0)

    DeepSeek-V3's Megatron-Bridge recipe (bf16 gradients, bf16 moments, precision-aware): 2 + 2 + 6.

    >>> a = stack_accounting("bf16", 2.0, precision_aware=True, moment_bytes=2.0)
    >>> (a.weight_bytes, a.grad_bytes, a.optimizer_bytes)
    (2.0, 2.0, 6.0)

    NeMo 24.09's Llama 3.1 recipes (Apex distributed Adam, ``grad_sync_dtype: bf16``): 2 + 2 + (2 + 8 + 2) / d.

    >>> a = stack_accounting("bf16", 2.0, optimizer="apex"); (a.weight_bytes, a.grad_bytes, a.optimizer_bytes)
    (2.0, 2.0, 12.0)
    """
    fp8 = dtype in ("fp8", "fp4")  # a low-precision GEMM dtype with Transformer Engine casts of the weights
    fp8_params = (fp8_params and dtype == "fp8") or (fp4_params and dtype == "fp4")  # low-precision parameters
    w_other = None
    z3_shard, z3_whole, z3_gather, z3_unq = None, 0.0, None, None  # ZeRO-3: all of w sharded
    z3_params = fp8_params if (zero3_fp8_params is None or dtype != "fp8") else zero3_fp8_params
    if z3_params:
        # [9]: Megatron-FSDP shards the row-wise data (MXFP8: the column-wise too); the other layout is made
        # after the all-gather and dropped after the unit's forward unless keep_fp8_transpose_cache
        q_recipe = "nvfp4" if dtype == "fp4" else fp8_recipe
        z3_gather = quantised_weight_bytes(q_recipe)
        z3_shard = z3_gather if q_recipe == "mxfp8" else (FP8 if q_recipe in PER_TENSOR else z3_gather / 2.0)
        z3_whole, z3_unq = (z3_gather - z3_shard if keep_fp8_transpose_cache else 0.0), 2.0
        z3_gather -= z3_whole  # a kept transpose is not gathered again
    if fp8_params:
        recipe = "nvfp4" if dtype == "fp4" else fp8_recipe
        w, w_other = quantised_weight_bytes(recipe), 2.0
        wsrc = (
            f"{recipe} GEMM weights only, row-wise and column-wise ({dtype} param gather); embeddings, head, norms bf16"
        )
    elif dtype == "fp4" and fp8_weight_cache:  # bf16 weights; the cast: two NVFP4 copies (fp8_recipes)
        w, wsrc = (
            2.0 + 2.0 * NVFP4_COPY,
            "bf16 weights plus Transformer Engine's cached NVFP4 row- and column-wise casts",
        )
        w_other = 2.0  # [10]: the embeddings, head, norms (and bf16 end layers) run no quantised GEMM: no cast
        if not z3_params:  # [4][9]: the module's cached casts stay whole under ZeRO-3
            z3_shard, z3_whole, z3_unq = 2.0, w - 2.0, 2.0
    elif fp8 and fp8_weight_cache:
        w, wsrc = 4.0, "bf16 weights plus Transformer Engine's cached fp8 casts and transposes"
        w_other = 2.0  # [10]: the embeddings, head, norms (and bf16 end layers) run no fp8 GEMM: no cast
        if not z3_params:
            z3_shard, z3_whole, z3_unq = 2.0, w - 2.0, 2.0
    else:
        w, wsrc = 2.0, "bf16 weights" + (" (fp8 casts transient)" if fp8 else "")
    g = float(grad_bytes)
    # last fields; the bf16 end layers keep no low-precision copy, parameter or cache ([10])
    lowp = (w_other, bf16_end_layers if w_other is not None else 0, z3_shard, z3_whole, z3_gather, z3_unq)
    if optimizer == "apex":  # [8]: remainders unless fp8 params (store_params), fp32 moments, own grad shard
        master = 4.0 if (fp8 and fp8_params) else 2.0
        emb = max(0.0, 4.0 - g)  # [8]: the word embeddings' buckets reduce in fp32 (with_fp32_embedding_grads)
        return StateAccounting(
            f"stack-{dtype}-g{g:g}"
            + (f"-{dtype}params" if fp8 and fp8_params else "")
            + ("-keept" if z3_whole and z3_params else "")
            + ("-z3params" if z3_params and not fp8_params else "")
            + "-apex",
            w,
            g,
            master + 8.0 + g,
            f"Apex DistributedFusedAdam [8]: {wsrc}; {g:g}-byte gradient buffer; fp32 master weights"
            + (" as 16-bit remainders" if master == 2.0 else "")
            + f", fp32 Adam moments and the reduce-scattered {g:g}-byte gradient shard"
            + ("; fp32 gradients for the word embeddings" if emb else ""),
            emb,
            emb,
            *lowp,
        )
    in_place = precision_aware and (
        not fp8 or (dtype == "fp8" and fp8_recipe == "delayed")
    )  # [7]: decoupled_grad, TE master weights
    remainders = in_place and not (fp8 and fp8_params)  # store_param_remainders needs bf16 weights
    master = 2.0 if remainders else 4.0
    grad_copy = 4.0 if (g < 4.0 and not in_place) else 0.0
    opt = master + 2.0 * float(moment_bytes) + grad_copy
    name = (
        f"stack-{dtype}-g{g:g}"
        + (f"-{dtype}params" if fp8 and fp8_params else "")
        + ("-nocache" if fp8 and not fp8_params and not fp8_weight_cache else "")
        + ("-keept" if z3_whole and z3_params else "")
        + ("-z3params" if z3_params and not fp8_params else "")
        + ("-precaware" if precision_aware else "")
        + (f"-m{float(moment_bytes):g}" if moment_bytes != 4 else "")
    )
    return StateAccounting(
        name,
        w,
        g,
        opt,
        f"Megatron-Core distributed optimizer [3][4]: {wsrc}; {g:g}-byte "
        f"main-grad buffer; fp32 master weights"
        + (" as 16-bit remainders [7]" if remainders else "")
        + f" and {float(moment_bytes):g}-byte Adam moments"
        + (", fp32 copy of the gradient shard" if grad_copy else ""),
        0.0,
        0.0,
        *lowp,
    )


def accounting(name: str | StateAccounting) -> StateAccounting:
    """The :class:`StateAccounting` of a name in :data:`ACCOUNTINGS`.

    Raises
    ------
    InputError
        For an unknown name; the message lists the known ones.
    """
    if isinstance(name, StateAccounting):
        return name
    check_choice("accounting", name, ACCOUNTINGS)
    return ACCOUNTINGS[name]


def zero_model_state_bytes(
    n_params, dp: int, zero: int, recipe: str | StateAccounting = "zero-paper"
) -> tuple[float, float, float]:
    """Model states per data-parallel rank, ``(weights, grads, optimizer)`` [bytes].

    ``n_params`` parameters [parameters] replicated over ``dp`` ranks at ZeRO stage ``zero``: stage 0
    keeps every byte of the accounting, stage 1 shards the optimizer part, stage 2 also the gradients,
    stage 3 also the weights ([1]_ Sec. 5).

    Parameters
    ----------
    n_params : float or array
        Parameters held by the rank before ZeRO sharding [parameters].
    dp : int
        Ranks that share the states (data-parallel group size).
    zero : {0, 1, 2, 3}
    recipe : str
        A name in :data:`ACCOUNTINGS` (default the ZeRO paper's 2 + 2 + 12).

    Returns
    -------
    tuple of float
        ``(weights, grads, optimizer)`` [bytes].

    Raises
    ------
    InputError
        For a ZeRO stage outside 0-3 or an unknown accounting.

    Examples
    --------
    The ZeRO paper's Fig. 1 (7.5B parameters, 64-way data parallel, in GB):

    >>> [round(sum(zero_model_state_bytes(7.5e9, 64, z)) / 1e9, 1) for z in (0, 1, 2, 3)]
    [120.0, 31.4, 16.6, 1.9]
    """
    check_choice("zero stage", zero, ZERO_STAGES)
    a = accounting(recipe)
    return (
        a.zero3_weight_bytes(dp) * n_params if zero >= 3 else a.weight_bytes * n_params,
        a.grad_bytes * n_params / (dp if zero >= 2 else 1),
        a.optimizer_bytes * n_params / (dp if zero >= 1 else 1),
    )
