"""The ZeRO choices of a training stack (:class:`ZeroChoices`: HSDP sharding, the gathered and unsharded
working buffers, where ZeRO 3 waits for its gradients), which
:class:`~hnplan.catalog.schemas.stack_choices.StackChoices` inherits."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hnplan.catalog.schemas.base import PosInt
from hnplan.catalog.schemas.moe_choices import MoEChoices


class ZeroChoices(MoEChoices):
    """How a training stack shards and gathers under ZeRO (PyTorch FSDP, Megatron-FSDP, DeepSpeed): the HSDP
    group, the gathered parameters and unsharded gradients resident at once, and where ZeRO 3 waits for its
    last gradient collective. Part of :class:`~hnplan.catalog.schemas.stack_choices.StackChoices` (a stack's
    and a job's choices), with the mixture-of-experts choices it inherits
    (:class:`~hnplan.catalog.schemas.moe_choices.MoEChoices`); defaults: hnplan's default stack
    (``data/stacks/megatron-core.yaml``).

    Attributes
    ----------
    zero3_shard_ranks : int or None
        HSDP (PyTorch FSDP ``HYBRID_SHARD``): a ZeRO 3 plan shards its dense parameters, gradients and optimizer
        states over groups of this many consecutive data-parallel ranks (FSDP1's default: the GPUs of a server)
        and replicates them across the ``dp x cp / zero3_shard_ranks`` groups; each unit's gradient is
        reduce-scattered in its group, then its shard all-reduced across the replicas. A plan whose ``dp x cp``
        it does not divide, or does not exceed, shards over all ``dp x cp`` ranks. None (default): no hybrid
        sharding. Routed experts keep their own data-parallel group. Memory
        (:func:`hnplan.memory.states.model_state_table` and, one plan of it,
        :func:`hnplan.memory.model_state_bytes_per_gpu`): :func:`hnplan.memory.states.zero_shard_ranks`; communication:
        :func:`hnplan.planning.training.dp_collectives.dp_comm_exposed`.
    zero3_gathered_units : int
        ZeRO 3 (FSDP): units (a Transformer layer, the embedding, the head) whose all-gathered parameters are
        resident at once: the unit computing and the one prefetched, 2 (PyTorch FSDP's rate limiter,
        Megatron-FSDP's one-successor prefetch). Memory: :mod:`hnplan.memory.zero_working`.
    zero_unsharded_grad_bytes : float or None
        ZeRO 2 and 3: bytes per parameter of the unit-sized gradient buffers alive at the backward's peak,
        summed over the units (the unit computing its gradients and the one being reduce-scattered); None:
        ``2 x grad_reduce_bytes``. Memory: :mod:`hnplan.memory.zero_working`.
    zero3_max_live_params : int or None
        ZeRO 3 as DeepSpeed runs it: each submodule's parameters gathered before it runs and released after, the
        next ones prefetched while fewer than this many are gathered (``stage3_max_live_parameters``, 1e9 by
        default); the gathered weights are then ``2 M + zero3_max_live_params`` parameters (``M`` the largest
        submodule) in place of ``zero3_gathered_units`` layers. None: FSDP's layer units.
        Memory: :mod:`hnplan.memory.zero_working`.
    zero_reduce_bucket_params : int or None
        ZeRO 2 and 3 as DeepSpeed runs them: gradients reduced through two buckets of this many elements
        (``reduce_bucket_size``, 5e8 by default; ``overlap_comm``): ``M + 2 max(bucket, M)`` unsharded
        gradients in the training dtype in place of ``zero_unsharded_grad_bytes`` units. None: FSDP's units.
    zero3_grad_wait : {"step", "microbatch"}
        Where a ZeRO 3 step waits for the backward's last gradient reduce-scatter (the input layer's, and under
        HSDP that shard's all-reduce across the replicas), which no compute of the backward is left to hide:
        ``step`` (default, Megatron-FSDP) once, before the optimizer step: its ``optim_grads_params`` strategy
        reduce-scatters in every backward and only ``finish_grad_sync`` waits, which Megatron-Core's
        ``finalize_model_grads`` calls after the last micro-batch (NVIDIA/Megatron-LM @ d98e8a64ddf3,
        ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py``, ``_root_post_backward`` and
        ``finish_grad_sync``); ``microbatch`` (PyTorch FSDP) at the end of every backward: FSDP1's
        ``_post_backward_final_callback`` makes the compute stream wait for the post-backward stream and,
        under HSDP, the all-reduce (``torch/distributed/fsdp/_runtime_utils.py``, pytorch/pytorch @
        3ade90a6aaa9), FSDP2's ``_root_post_backward_final_callback`` for the last reduce-scatter's event and
        each group's ``finalize_backward`` for its post-reduce event (``torch/distributed/fsdp/_fully_shard/
        _fsdp_state.py`` @ 1fd469d0c96e). Time:
        :func:`hnplan.planning.training.dp_collectives.dp_comm_exposed`.
    hsdp_all_reduce : {"step", "microbatch"}
        HSDP (``zero3_shard_ranks``): which backwards all-reduce their gradient shards across the replicas.
        ``step`` (default, Megatron-FSDP) the last micro-batch's only: each backward reduce-scatters in the shard
        group, and the all-reduce over the outer data-parallel group runs only with ``is_last_microbatch`` (or
        ``model_auto_sync``, off unless set), which Megatron-LM's schedules clear through ``no_sync`` for the
        other micro-batches (NVIDIA/Megatron-LM @ d98e8a64ddf3,
        ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py`` ``_process_post_backward_gradients``:
        ``outer_fsdp_group_grad_reduce=use_hybrid_fsdp and (is_last_microbatch or model_auto_sync)``;
        ``param_and_grad_buffer.py`` ``GradReducePipeline.reduce_gradients``). ``microbatch`` (PyTorch FSDP) every
        backward: FSDP1 ``HYBRID_SHARD`` all-reduces after each reduce-scatter outside ``no_sync``
        (``torch/distributed/fsdp/_runtime_utils.py`` ``_reduce_grad``), FSDP2 unless the loop calls
        ``set_requires_all_reduce(False)`` (``torch/distributed/fsdp/_fully_shard/_fully_shard.py``), which
        torchtitan @ e7c0cae934df (``torchtitan/train.py``) does not. Time:
        :func:`hnplan.planning.training.dp_collectives.dp_comm_exposed`.
    """

    zero3_shard_ranks: int | None = Field(
        default=None,
        ge=2,
        description="HSDP: ZeRO 3 shards over groups of this many data-parallel ranks, replicated across groups",
    )
    zero3_gathered_units: int = Field(
        default=2, ge=1, le=8, description="ZeRO 3: units whose gathered parameters are resident at once"
    )
    zero_unsharded_grad_bytes: Annotated[float, Field(ge=0.0, le=32.0)] | None = Field(
        default=None,
        description="ZeRO 2/3: bytes per parameter of the unit-sized unsharded gradient buffers alive at once "
        "(summed over units; none: 2 x grad_reduce_bytes) [bytes]",
    )
    zero3_max_live_params: PosInt | None = Field(
        default=None,
        description="ZeRO 3 per submodule (DeepSpeed stage3_max_live_parameters): gathered parameters beyond the "
        "module computing and one prefetched; none: zero3_gathered_units layers (FSDP) [parameters]",
    )
    zero_reduce_bucket_params: PosInt | None = Field(
        default=None,
        description="ZeRO 2/3 gradient buckets (DeepSpeed reduce_bucket_size, two with overlap_comm); none: "
        "zero_unsharded_grad_bytes units (FSDP) [elements]",
    )
    hsdp_all_reduce: Literal["step", "microbatch"] = Field(
        default="step",
        description="HSDP: the gradient all-reduce across the replicas after the last micro-batch's backward only "
        "(Megatron-FSDP) or after every backward (PyTorch FSDP)",
    )
    zero3_grad_wait: Literal["step", "microbatch"] = Field(
        default="step",
        description="ZeRO 3: where the backward's last gradient reduce-scatter (and HSDP all-reduce) is waited "
        "for: once before the optimizer step (Megatron-FSDP) or after every micro-batch (PyTorch FSDP)",
    )
