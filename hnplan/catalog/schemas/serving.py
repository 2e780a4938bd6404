"""Serving engines: the scheduler limits and per-iteration costs the inference planner applies."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from hnplan.catalog.schemas.base import Dtype, Entry, Fraction, NonNegative, PosInt, Positive


class ServingEngine(Entry):
    """A serving engine's scheduler limits and per-iteration costs, as the inference planner applies them.

    ``max_num_seqs`` caps the concurrent sequences of one scheduler (one attention group: a replica, or
    one data-parallel attention rank with expert parallelism) below what the KV cache holds;
    ``max_num_batched_tokens`` is the token budget of one iteration (the prefill chunk with chunked
    prefill); ``iteration_overhead_s`` is host time per iteration the GPU waits for (scheduling,
    sampling, input preparation) that the engine does not overlap with the forward pass. ``nccl_nvls``
    false: the engine's NCCL runs without NVLink SHARP (``NCCL_NVLS_ENABLE=0``, or cuMem off, which NVLS
    needs), so its TP all-reduces inside an NVLink domain run on NCCL's rings and trees.
    ``tp_allreduce_custom_max_bytes`` records which all-reduce implementation the engine runs by message
    size (:func:`hnplan.planning.inference.tp_allreduce_path`). ``ep_decode_alltoall`` names the expert
    all-to-all kernel of a decode step (``oneshot``: an EP library's low-latency kernel that writes to every
    peer at once, at ``oneshot_alltoall_efficiency`` of the line rate of the tier it crosses: the scale-out share
    across scale-up domains, the scale-up link inside one (at most its all-to-all bandwidth); prefill keeps the pairwise
    exchange at the fabric's all-to-all bandwidth, the high-throughput kernels). ``speculative_tokens``
    draft tokens (multi-token prediction, a draft model) are verified by each decode step, each accepted
    with ``acceptance_rate`` given the one before (:func:`hnplan.planning.inference.speculative.tokens_per_step`).
    ``decode_overlap_efficiency`` is the share of the smaller of a decode step's compute and communication
    that the engine's two-micro-batch overlap hides (with ``Replica.overlap``;
    :func:`hnplan.planning.inference.speculative.overlapped_step_s`); absent: all of it (an upper bound).
    ``expert_load_imbalance`` is the busiest expert-parallel rank's routed tokens over what random routing puts
    there, under the engine's expert placement and a real router (EPLB's redundant experts balance the mean
    load, not all of it; :func:`hnplan.planning.inference.speculative.routing_peak`); absent: 1 (random
    routing, the floor of any router).
    """

    max_num_seqs: PosInt = Field(description="most concurrent sequences one scheduler runs [-]")
    max_num_batched_tokens: PosInt = Field(
        description="token budget of one iteration; the prefill chunk when chunked_prefill [tokens]"
    )
    chunked_prefill: bool = Field(description="prompts are split into chunks batched with decodes (Sarathi-Serve)")
    memory_utilization: Fraction = Field(
        description="fraction of device memory the engine sizes itself from (vLLM gpu_memory_utilization, "
        "SGLang mem_fraction_static, TensorRT-LLM free_gpu_memory_fraction)"
    )
    memory_rule: Literal["total", "free"] = Field(
        default="total",
        description="total: the fraction of the visible HBM holds weights, workspace and KV "
        "(vLLM, SGLang); free: the KV cache takes the fraction of what is free after "
        "weights, workspace and overheads (TensorRT-LLM)",
    )
    # at most 1 s, 250x the 4 ms measured for vLLM (data/engines/vllm.yaml): 4 typed for 4 ms is another unit
    iteration_overhead_s: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        description="host time per iteration not overlapped with the GPU (scheduler, sampling, inputs) [s]"
    )
    weight_dtypes: list[Dtype] = Field(min_length=1, description="weight / GEMM dtypes the engine serves")
    kv_dtypes: list[Dtype] = Field(min_length=1, description="KV-cache dtypes the engine supports")
    dequant_overhead: dict[Dtype, NonNegative] = Field(
        default_factory=dict,
        description="dtype -> extra fraction of the GEMM-and-attention time per pass for "
        "(de)quantisation not fused into the kernels [-]; absent: 0",
    )
    nccl_nvls: bool = Field(
        default=True,
        description="the engine's NCCL may reduce in the scale-up switches (NVLink SHARP) where the system "
        "enables it; false: NCCL_NVLS_ENABLE=0 or NCCL_CUMEM_ENABLE=0 (NVLS needs cuMem)",
    )
    tp_allreduce_custom_max_bytes: dict[PosInt, Positive] = Field(
        default_factory=dict,
        description="TP degree -> largest TP all-reduce message the engine hands to its own one-shot / two-shot "
        "kernels inside an NVLink domain (peer loads from registered buffers), larger ones going to NCCL "
        "[bytes]; a TP degree not listed: not recorded, NCCL assumed",
    )
    cuda_graph_batch_sizes: list[PosInt] = Field(
        default_factory=list,
        description="batch sizes the engine captures its decode step at, with padding: a generation-only "
        "iteration of b sequences runs the graph of the smallest captured size >= b, dummy sequences filling "
        "the rest (sizes above min(max_num_seqs, max_num_batched_tokens) fall back to that cap); empty: no "
        "padding [sequences]",
    )
    ep_decode_alltoall: Literal["pairwise", "oneshot"] = Field(
        default="pairwise",
        description="expert all-to-all of a decode step: pairwise exchange (NCCL, p - 1 sequential steps) or "
        "oneshot (an EP library's low-latency kernel writing to every peer at once, DeepEP low-latency mode)",
    )
    oneshot_alltoall_efficiency: Fraction | None = Field(
        default=None,
        description="fraction of the per-direction line rate the oneshot all-to-all reaches on the tier it crosses "
        "(scale-out across domains, scale-up inside one); required with ep_decode_alltoall oneshot (calibration)",
    )
    speculative_tokens: Annotated[int, Field(ge=0, le=16)] = Field(
        default=0,
        description="draft tokens each decode step verifies besides the next token (multi-token prediction "
        "or a draft model); 0: no speculative decoding [tokens]",
    )
    acceptance_rate: Fraction | None = Field(
        default=None,
        description="probability a draft token is accepted given the one before it was; required when "
        "speculative_tokens > 0 (calibration)",
    )
    decode_overlap_efficiency: Fraction | None = Field(
        default=None,
        description="share of the smaller of a decode step's compute and communication that two-micro-batch "
        "overlap hides (with the replica's overlap); absent: all of it, max(compute, communication) "
        "(calibration)",
    )
    expert_load_imbalance: Annotated[float, Field(ge=1.0, le=8.0)] | None = Field(
        default=None,
        description="routed tokens of the busiest expert-parallel rank over the peak of random routing, under "
        "the engine's expert placement (EPLB) and a real router; absent: 1, random routing (calibration)",
    )
    _calibrations: ClassVar[tuple[str, ...]] = (
        "oneshot_alltoall_efficiency",
        "acceptance_rate",
        "decode_overlap_efficiency",
        "expert_load_imbalance",
    )

    @model_validator(mode="after")
    def _kernels(self):
        if self.ep_decode_alltoall == "oneshot" and self.oneshot_alltoall_efficiency is None:
            raise ValueError("ep_decode_alltoall is oneshot: give oneshot_alltoall_efficiency (with its provenance)")
        if self.speculative_tokens > 0 and self.acceptance_rate is None:
            raise ValueError("speculative_tokens > 0: give acceptance_rate (with its provenance)")
        if self.speculative_tokens == 0 and self.acceptance_rate is not None:  # a rate that would change nothing
            raise ValueError("acceptance_rate is given but speculative_tokens is 0: give the draft tokens or drop it")
        if self.ep_decode_alltoall == "pairwise" and self.oneshot_alltoall_efficiency is not None:
            raise ValueError(
                "oneshot_alltoall_efficiency is given but ep_decode_alltoall is pairwise: set it to oneshot or drop it"
            )
        return self
