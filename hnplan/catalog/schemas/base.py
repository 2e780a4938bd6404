"""Shared pieces of the catalog schemas: id pattern, dtypes, constrained number types, the source check
and the base classes every entry inherits (strict, frozen, with provenance).
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ID_PATTERN = r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$"
_PLACEHOLDER = re.compile(r"^\s*(todo|tbd|fixme|xxx|\?+|n/?a|none|unknown)\s*[.!:]?\s*$", re.I)

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
Positive = Annotated[float, Field(gt=0.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
PosInt = Annotated[int, Field(gt=0)]


def _check_source(value: str) -> str:
    if not value or not value.strip() or _PLACEHOLDER.match(value) or "TODO" in value:
        raise ValueError(
            "must name a datasheet, paper and table, or a labelled assumption; got an empty or placeholder source"
        )
    return value


Source = Annotated[str, Field(min_length=3)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, defer_build=True)


class Entry(_Strict):
    """Fields shared by every catalog entry."""

    id: str = Field(pattern=ID_PATTERN, description="lower-kebab-case id, e.g. h100-sxm")
    name: str = Field(min_length=1, description="human-readable name")
    source: Source = Field(description="datasheet, paper and table, or repository file")
    notes: str | None = None
    field_sources: dict[str, str] = Field(
        default_factory=dict, description="field -> source, where it differs from `source`"
    )
    assumptions: dict[str, str] = Field(
        default_factory=dict, description="field -> why this unpublished value was assumed"
    )

    _calibrations: ClassVar[tuple[str, ...]] = ()

    @field_validator("source")
    @classmethod
    def _source_not_placeholder(cls, v: str) -> str:
        return _check_source(v)

    @model_validator(mode="after")
    def _provenance_keys(self):
        known = set(type(self).model_fields)
        for label, mapping in (("field_sources", self.field_sources), ("assumptions", self.assumptions)):
            for key, text in mapping.items():
                if key.split(".")[0] not in known:
                    raise ValueError(f"{label} names unknown field {key!r}; fields: {', '.join(sorted(known))}")
                _check_source(text)
        for cal in self._calibrations:
            if getattr(self, cal, None) is None:
                continue
            if not any(k.split(".")[0] == cal for k in (*self.field_sources, *self.assumptions)):
                raise ValueError(
                    f"calibration field {cal!r} needs its own provenance: add it to field_sources "
                    "(measurement and source) or to assumptions (with the reason)"
                )
        return self
