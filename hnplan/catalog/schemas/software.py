"""Software kinds: training stacks (their choices and the knobs they implement); serving engines in serving.py."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, ValidationError, model_validator

from hnplan.catalog.schemas.base import Dtype, Entry, Fraction, Positive
from hnplan.catalog.schemas.stack_choices import OverlapComm, StackChoices  # noqa: F401  (re-exported)


class SoftwareStack(Entry, StackChoices):
    """A training software stack: its choices (:class:`StackChoices`: what it overlaps, its attention
    kernel, whether it runs sequence parallelism), the knobs it implements, and the GEMM efficiency
    measured inside training with it (per accelerator).

    ``matmul_efficiency`` replaces an accelerator's catalog value (a GEMM micro-benchmark) when a
    published in-training measurement with this stack exists; accelerators it does not list keep
    their own. ``attention_efficiency`` does the same for the attention law's per-pass ceilings
    (``Accelerator.attention_efficiency``) where the stack's attention kernel is an older or slower
    one than the kernels the catalog's law was fitted on. ``ep_comm_overlap_fraction_by_accelerator`` replaces
    the choice ``ep_comm_overlap_fraction`` on the accelerators it lists: how much of the expert all-to-all an
    overlap hides is measured per chip family (the SMs the communication takes, the HBM and L2 it shares with
    the compute beside it), so a stack carries one value per family, each with its own provenance, and the
    scalar for the chips it lists not (a job's explicit choice or override of the fraction wins over both).
    ``choices_by_accelerator`` does the same for any choice the stack's recipes set per accelerator (the
    dispatcher, the CUDA-graph scope, the norm kernel of Megatron-Bridge's B200 recipes).
    """

    zero_stages: list[Literal[0, 1, 2, 3]] | None = Field(
        default=None, description="ZeRO stages the stack implements (a search tries only these); none: all"
    )
    recompute_modes: list[Literal["none", "selective", "full"]] | None = Field(
        default=None, description="activation recomputation modes the stack implements; none: all"
    )
    train_dtypes: list[Literal["bf16", "fp8", "fp4"]] | None = Field(
        default=None,
        description="training GEMM dtypes the stack implements (a plan in another is refused; fp4 needs an NVFP4 "
        "recipe, fp8 an fp8 one); none: all",
    )
    zero_with_pipeline: bool = Field(
        default=False,
        description="ZeRO stages 2 and 3 combine with pipeline parallelism (FSDP-style sharding per stage); "
        "false: as Megatron-LM and DeepSpeed, a search pairs them with pp = 1 only",
    )
    matmul_efficiency: dict[str, dict[Dtype, Fraction]] | None = Field(
        default=None,
        description="accelerator id -> dtype -> large-GEMM efficiency measured in training "
        "with this stack [fraction of the dense peak]; replaces the accelerator's "
        "(calibration)",
    )
    matmul_efficiency_short_run: list[Dtype] | None = Field(
        default=None,
        description="dtypes whose matmul_efficiency values are not in-training rates but ceilings in the "
        "accelerator's short-run frame (a GEMM benchmark of the stack's library, held against the chip's bf16 "
        "ceiling): the chip's sustained_compute_fraction applies to them as to the accelerator's own ceilings; "
        "the other dtypes hold the in-training clock",
    )

    attention_efficiency: dict[str, dict[Literal["fwd", "bwd"], Fraction]] | None = Field(
        default=None,
        description="accelerator id -> pass -> ceiling of the attention law with this stack's attention kernel "
        "[fraction of the bf16 dense peak]; replaces the accelerator's (calibration)",
    )
    attention_fp8_ratio: dict[str, dict[Literal["fwd", "bwd"], Positive]] | None = Field(
        default=None,
        description="accelerator id -> pass -> FP8 / bf16 throughput ratio of this stack's attention kernel "
        "(same benchmark run), applied to the attention ceilings when fp8_attention is on (calibration)",
    )
    attention_fp8_ratio_mla: dict[str, dict[Literal["fwd", "bwd"], Positive]] | None = Field(
        default=None,
        description="accelerator id -> pass -> FP8 / bf16 throughput ratio of this stack's attention kernel at the "
        "MLA shape (Q/K heads wider than V, DeepSeek-V2/V3), where the FP8 gain differs from grouped-query "
        "attention's; replaces attention_fp8_ratio for models with MLA (calibration)",
    )
    attention_fp8_sliding_bwd_causal: dict[str, bool] | None = Field(
        default=None,
        description="accelerator id -> true where this stack's FP8 attention backward of a sliding-window layer "
        "walks the whole causal triangle, the key tiles outside the window not skipped: timed as the full causal "
        "backward at the FP8 ratio when fp8_attention is on (measured)",
    )

    ep_comm_overlap_fraction_by_accelerator: dict[str, Fraction] | None = Field(
        default=None,
        description="accelerator id -> share of the expert all-to-all time hidden behind compute when ep_comm, "
        "measured on that chip family with this stack's overlap; replaces ep_comm_overlap_fraction there "
        "(calibration)",
    )

    choices_by_accelerator: dict[str, dict[str, object]] | None = Field(
        default=None,
        description="accelerator id -> {choice: value}: choices (StackChoices fields) the stack's recipes set "
        "otherwise on that accelerator (Megatron-Bridge writes its performance recipes per GPU type); they replace "
        "the stack's own there (a job's explicit choices or overrides win)",
    )

    _calibrations: ClassVar[tuple[str, ...]] = (
        "matmul_efficiency",
        "attention_efficiency",
        "attention_fp8_ratio",
        "attention_fp8_ratio_mla",
        "attention_fp8_sliding_bwd_causal",
        "ep_comm_overlap_fraction_by_accelerator",
        "choices_by_accelerator",
    )

    @model_validator(mode="after")
    def _accelerator_choices_valid(self):
        own = {k: getattr(self, k) for k in StackChoices.model_fields}
        for acc_id, values in (self.choices_by_accelerator or {}).items():
            unknown = sorted(set(values) - set(StackChoices.model_fields))
            if unknown:
                raise ValueError(f"choices_by_accelerator.{acc_id} names unknown choice {unknown[0]!r}")
            try:  # each value as its field allows, named by where it sits
                StackChoices(**{**own, **values})
            except ValidationError as exc:
                e = exc.errors()[0]
                where = "".join(f".{x}" for x in e["loc"])
                raise ValueError(f"choices_by_accelerator.{acc_id}{where}: {e['msg']}") from None
        return self
