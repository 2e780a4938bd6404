"""Training memory per accelerator: model states, activations and runtime overheads, worst stage.

References
----------
.. [1] Rajbhandari et al., ZeRO, SC20, arXiv:1910.02054.
.. [2] Korthikanti et al., arXiv:2205.05198 (activations).
.. [3] ``data/memory.yaml``: CUDA context, NCCL buffers and allocator fragmentation, each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Model
from hnplan.errors import InfeasiblePlan
from hnplan.memory.activations import stage_activation_bytes
from hnplan.memory.breakdown import MemoryBreakdown
from hnplan.memory.states import model_state_bytes_per_gpu


@dataclass(frozen=True)
class TrainingMemory(MemoryBreakdown):
    """Per-accelerator training memory of the fullest pipeline stage [bytes]; ``stage`` names it
    (``first`` or ``last``; ``first`` when ``pp = 1``)."""

    stage: str = "first"


def training_overheads(tensor_bytes: float, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1, ep: int = 1,
                       catalog: Catalog | None = None) -> dict:
    """Runtime overheads of one training process [bytes], by part ([3]_).

    ``cuda_context``; ``nccl``: one communicator per parallel group of more than one rank (TP, CP,
    DP x CP, PP, and EP with its all-to-all buffers); ``fragmentation``: the allocator's unusable
    reserve, a fraction of ``tensor_bytes`` (model states and activations).

    Returns
    -------
    dict
        ``{"cuda_context": bytes, "nccl": bytes, "fragmentation": bytes}``.
    """
    o = (catalog or load_catalog()).memory_overheads
    groups = sum(1 for g in (tp, cp, dp * cp, pp, ep) if g > 1)
    nccl = groups * o.nccl_gib_per_communicator.value + (o.nccl_alltoall_extra_gib.value if ep > 1 else 0.0)
    return {"cuda_context": units.GiB_to_bytes(o.cuda_context_gib.value),
            "nccl": units.GiB_to_bytes(nccl),
            "fragmentation": o.allocator_fragmentation_fraction.value * tensor_bytes}


def training_memory(model: Model, seq_len: int, microbatch: int, tp: int, pp: int, dp: int,
                    cp: int = 1, ep: int = 1, zero: int = 1, recompute: str = "none",
                    num_microbatches: int | None = None, flash_attention: bool = True, *,
                    virtual_stages: int = 1, recipe: str = "zero-paper", sequence_parallel: bool = True,
                    dropout: bool = True, overheads: bool = True, fp8_gemm_inputs: bool | None = None,
                    catalog: Catalog | None = None) -> TrainingMemory:
    """Per-accelerator training memory of the fullest pipeline stage [bytes].

    Model states of the stage (:func:`hnplan.memory.model_state_bytes_per_gpu`: embeddings on the first
    stage, LM head on the last) plus its activations (:func:`hnplan.memory.stage_activation_bytes`:
    micro-batches in flight under 1F1B or the interleaved schedule) plus runtime overheads
    (:func:`training_overheads`); the first and the last stage are both evaluated and the larger total
    is returned.

    Parameters
    ----------
    model : Model
    seq_len : int
        [tokens]
    microbatch : int
        Sequences per micro-batch.
    tp, pp, dp, cp, ep : int
        Parallel degrees (``ep`` divides ``dp x cp``).
    zero : {0, 1, 2, 3}
    recompute : {"none", "selective", "full"}
    num_microbatches : int, optional
        Micro-batches per step (limits those in flight); default ``pp``.
    flash_attention, sequence_parallel, dropout : bool
    virtual_stages : int
        Model chunks per stage of the interleaved schedule.
    recipe : str
        Model-state accounting (:data:`hnplan.memory.ACCOUNTINGS`).
    overheads : bool
        Include the runtime overheads (catalog data); ``False`` gives the tensors alone.
    fp8_gemm_inputs : bool, optional
        Save GEMM inputs as fp8 casts; default: when ``recipe == "fp8"``.

    Returns
    -------
    TrainingMemory

    Raises
    ------
    InputError
        For an unknown ZeRO stage, recompute mode or accounting.
    InfeasiblePlan
        When ``ep`` does not divide ``dp x cp``.
    """
    if ep > 1 and (dp * cp) % ep:
        raise InfeasiblePlan(f"expert parallel degree {ep} does not divide dp x cp = {dp * cp}")
    best = None
    fp8 = (recipe == "fp8") if fp8_gemm_inputs is None else fp8_gemm_inputs
    for stage in (("first",) if pp == 1 else ("first", "last")):
        params, grads, opt = model_state_bytes_per_gpu(model, tp, pp, dp, ep, zero, recipe, cp, stage)
        acts = stage_activation_bytes(model, seq_len, microbatch, tp, pp, cp, recompute, num_microbatches,
                                      virtual_stages, sequence_parallel, flash_attention, dropout, stage, fp8)
        tensors = params + grads + opt + acts
        over = sum(training_overheads(tensors, tp, pp, dp, cp, ep, catalog).values()) if overheads else 0.0
        mem = TrainingMemory(params, grads, opt, acts, 0.0, over, stage=stage)
        if best is None or mem.total_bytes > best.total_bytes:
            best = mem
    return best
