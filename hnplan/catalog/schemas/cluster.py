"""Cluster job mixes for the shared-cluster simulation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from hnplan.catalog.schemas.base import (
    Entry,
    NonNegative,
    PosInt,
    Positive,
    Source,
    _check_source,
    _Strict,
)
from hnplan.catalog.schemas.economics import SourcedValue


# -- cluster job mixes ---------------------------------------------------------------------------
class Distribution(_Strict):
    """A discrete distribution (``values`` with ``weights``) or a log-normal (``mu``, ``sigma`` of the
    natural log of the quantity), with its source."""

    kind: Literal["discrete", "lognormal"]
    values: list[float] | None = None
    weights: list[Annotated[float, Field(ge=0.0)]] | None = None
    mu: float | None = Field(default=None, description="mean of ln(x), x in the mix's unit")
    sigma: NonNegative | None = Field(default=None, description="standard deviation of ln(x)")
    max: Positive | None = Field(default=None, description="draws above this are cut to it (a run-time limit)")
    unit: str = Field(min_length=1)
    source: Source
    assumption: bool = False

    @field_validator("source")
    @classmethod
    def _src(cls, v):
        return _check_source(v)

    @model_validator(mode="after")
    def _shape(self):
        if self.kind == "discrete":
            if not self.values or not self.weights or len(self.values) != len(self.weights):
                raise ValueError("a discrete distribution needs values and weights of equal, non-zero length")
            if sum(self.weights) <= 0:
                raise ValueError("a discrete distribution's weights must not all be 0 (nothing would be drawn)")
            bad = [v for v in self.values if not v > 0]
            if bad:  # GPUs, a GPU share and a run time: a job of none of them cannot be run or timed
                raise ValueError(f"values must be > 0 (GPUs, milli-GPUs or seconds of a job); got {bad[0]:g}")
        elif self.mu is None or self.sigma is None:
            raise ValueError("a lognormal distribution needs mu and sigma")
        return self


class JobClassMix(_Strict):
    """One priority class of a synthetic job mix."""

    cls: Literal["inference", "training", "fine-tuning", "development"]
    share: SourcedValue = Field(description="fraction of submitted jobs in this class")
    gpus: Distribution = Field(description="whole GPUs per job [GPU]")
    fractional: SourcedValue | None = Field(
        default=None, description="probability that a 1-GPU job asks for a share of a GPU"
    )
    gpu_milli: Distribution | None = Field(default=None, description="share of the GPU of a fractional job [milli-GPU]")
    duration_s: Distribution = Field(description="run time on an ideal allocation [s]")
    checkpoint_s: SourcedValue = Field(description="checkpoint period [s]; 0 = stateless, a negative value = never")
    tp_gpus: PosInt = Field(
        default=1, description="tensor/expert-parallel group that must share a scale-up domain [GPUs]"
    )

    @field_validator("gpus")
    @classmethod
    def _whole_gpus(cls, v):
        bad = [x for x in (v.values or []) if x != int(x)] if v.kind == "discrete" else []
        if bad:
            raise ValueError(f"values are whole GPUs per job (a share of one is gpu_milli's); got {bad[0]:g}")
        return v


class ClusterMix(Entry):
    """A synthetic job mix for the cluster simulation (``data/cluster_mixes/<id>.yaml``)."""

    offered_load: SourcedValue = Field(
        description="offered GPU demand as a fraction of the cluster's GPUs (sets the arrival rate)"
    )
    classes: list[JobClassMix] = Field(min_length=1)

    @field_validator("offered_load")
    @classmethod
    def _load(cls, v):
        if not v.value > 0:
            raise ValueError(f"value must be > 0 (a fraction of the cluster's GPUs); got {v.value:g}")
        return v

    fgd_workload: str | None = Field(default=None, description="notes on the workload FGD targets")
