"""Design-space sweep specifications (``data/sweeps/<id>.yaml`` or any YAML path): the schema and the loader.

A spec names *axes*: the planner's inputs (design, model, GPU count, batch, sequence, stack, dtype,
tokens) as lists (a grid), and the procurement what-if inputs
(:data:`hnplan.catalog.schemas.WHATIF_INPUTS`: electricity price, PUE, hardware price, utilisation,
failure rates, checkpoint bandwidth, lifetime, build cost, maintenance) as lists or as distributions
sampled by Monte Carlo or a Latin hypercube. See docs/sweep.md.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from hnplan import units
from hnplan.catalog.loader import Catalog, _looks_like_path, _read_yaml, load_catalog, parse_entry
from hnplan.catalog.schemas import ID_PATTERN, WHATIF_INPUTS, _Strict, whatif_range_problem
from hnplan.catalog.schemas.workload import MAX_TRAINING_TOKENS
from hnplan.catalog.yaml_io import nearest_name
from hnplan.defaults import TRAIN_DTYPES
from hnplan.errors import CatalogError

#: planner inputs: discrete, given as lists (grid axes) or fixed values
PLAN_AXES = (
    "system",
    "model",
    "gpus",
    "seq_len",
    "global_batch_tokens",
    "global_batch_seqs",
    "tokens",
    "stack",
    "dtype",
)
#: the axes a point must have (from ``axes`` or ``fixed``); the batch is given in tokens or in sequences
REQUIRED_AXES = ("system", "model", "gpus", "seq_len", "tokens")
#: planner inputs that are whole counts >= 1, and the ones that are catalog ids (or YAML paths)
COUNT_INPUTS = ("gpus", "seq_len", "global_batch_tokens", "global_batch_seqs")
ID_INPUTS = {"system": "system", "model": "model", "stack": "stack"}
SAMPLINGS = ("grid", "monte-carlo", "latin-hypercube")
DISTRIBUTIONS = ("uniform", "triangular", "loguniform", "catalog")


class Distribution(_Strict):
    """A continuous axis: ``uniform`` (low, high), ``triangular`` (low, mode, high), ``loguniform``
    (low, high > 0), or ``catalog`` (the input's range and distribution in ``data/uncertainty.yaml``,
    with its source)."""

    distribution: Literal["uniform", "triangular", "loguniform", "catalog"]
    low: float | None = None
    high: float | None = None
    mode: float | None = None

    @model_validator(mode="after")
    def _bounds(self):
        if self.distribution == "catalog":
            if (self.low, self.high, self.mode) != (None, None, None):
                raise ValueError(
                    "a 'catalog' distribution takes its range from data/uncertainty.yaml: give no low, high or mode"
                )
            return self
        if self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"{self.distribution} needs low < high; got low {self.low}, high {self.high}")
        if self.distribution == "triangular" and (self.mode is None or not self.low <= self.mode <= self.high):
            raise ValueError("a triangular distribution needs low <= mode <= high")
        if self.distribution == "loguniform" and self.low <= 0:
            raise ValueError(f"a loguniform distribution needs low > 0; got {self.low}")
        return self


#: the most points one spec may make: they are drawn and tabulated in memory before any runs (the point
#: table of data/sweeps/example.yaml takes 180 bytes a row, so a million rows about 180 MB; a billion
#: Latin-hypercube draws of five inputs alone would need 37 GiB and stopped with numpy's MemoryError)
MAX_SWEEP_POINTS = 1_000_000


def _dtype_lower_case(data):
    """``data`` (a spec's mapping before validation) with its ``dtype`` values, under ``fixed`` or ``axes``, as the
    catalog spells dtypes: lower case, surrounding spaces dropped (``FP8`` is ``fp8``, as ``--dtype`` takes it).

    >>> _dtype_lower_case({"fixed": {"dtype": " FP8"}, "axes": {"dtype": ["BF16", "fp4"]}})
    {'fixed': {'dtype': 'fp8'}, 'axes': {'dtype': ['bf16', 'fp4']}}
    """
    if not isinstance(data, dict):
        return data

    def low(v):
        return v.strip().lower() if isinstance(v, str) else v

    out = dict(data)
    for where in ("fixed", "axes"):
        block = data.get(where)
        if isinstance(block, dict) and "dtype" in block:
            value = block["dtype"]
            out[where] = {**block, "dtype": [low(v) for v in value] if isinstance(value, list) else low(value)}
    return out


class SpecProblems(ValueError):
    """Every problem a spec's cross-field checks found (``problems``: one sentence each, naming its field path), so
    a spec is refused once with all of them rather than once per fix."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class SweepSpec(_Strict):
    """A design-space sweep: grid axes crossed with ``samples`` draws of the distribution axes."""

    id: str = Field(pattern=ID_PATTERN, description="lower-kebab-case id (the file name under data/sweeps/)")
    name: str = Field(min_length=1)
    description: str = ""
    sampling: Literal["grid", "monte-carlo", "latin-hypercube"] = Field(
        default="grid", description="how distribution axes are sampled (grid: no distribution axes)"
    )
    samples: int = Field(default=1, ge=1, description="draws of the distribution axes per grid combination")
    seed: int = Field(default=0, ge=0, description="seed of the Monte Carlo / Latin hypercube draws")
    chunk_size: int = Field(default=25, ge=1, description="points per Dask task")
    fixed: dict[str, str | int | float] = Field(default_factory=dict, description="inputs shared by every point")
    axes: dict[str, list[str | int | float] | Distribution] = Field(
        default_factory=dict, description="input -> list of values (grid) or a distribution"
    )

    @model_validator(mode="before")
    @classmethod
    def _axes_shape(cls, data):
        # a single value under axes failed both union branches ("should be a valid list; ... a valid dictionary")
        axes = data.get("axes") if isinstance(data, dict) else None
        for name, axis in axes.items() if isinstance(axes, dict) else []:
            if not isinstance(axis, list | dict):
                raise ValueError(
                    f"axes.{name}: expected a list of values or a distribution mapping "
                    f"({{distribution: uniform, low: ..., high: ...}}), got {axis!r}; a single value goes under fixed"
                )
        return _dtype_lower_case(data)

    @model_validator(mode="after")
    def _check(self):
        """Every cross-field problem of the spec (unknown or repeated inputs, a missing one, axes and values out of
        range), each a sentence naming its field path; raised together as :class:`SpecProblems`."""
        problems = []
        allowed = PLAN_AXES + WHATIF_INPUTS
        for where, names in (("axes", self.axes), ("fixed", self.fixed)):
            bad = sorted(set(names) - set(allowed))
            if bad:
                named = [f"{b} (did you mean {n}?)" if (n := nearest_name(b, allowed)) else b for b in bad]
                problems.append(f"{where}: unknown input {', '.join(named)}; allowed: {', '.join(allowed)}")
        both = sorted(set(self.axes) & set(self.fixed))
        if both:
            problems.append(f"{', '.join(both)} given both in axes and in fixed")
        given = set(self.axes) | set(self.fixed)
        missing = [a for a in REQUIRED_AXES if a not in given]
        if missing:
            problems.append(f"missing input {', '.join(missing)} (in axes or fixed)")
        batch = {"global_batch_tokens", "global_batch_seqs"} & given
        if len(batch) != 1:
            problems.append("give exactly one of global_batch_tokens and global_batch_seqs (in axes or fixed)")
        for name, axis in self.axes.items():
            if name not in allowed:  # named above; its values have no range to check
                continue
            if isinstance(axis, Distribution):
                if name in PLAN_AXES:
                    problems.append(f"axes.{name}: a planner input is discrete; give a list of values")
                    continue
                for bound in (axis.low, axis.high):  # a draw outside the input's range has no meaning
                    problem = None if bound is None else whatif_range_problem(name, bound)
                    if problem:
                        problems.append(f"axes.{name}: {problem}")
                if self.sampling == "grid":
                    problems.append(f"axes.{name} is a distribution: set sampling to monte-carlo or latin-hypercube")
            elif not axis:
                problems.append(f"axes.{name}: an empty list")
            elif repeat := _repeat_problem(name, axis):
                problems.append(repeat)
        if self.sampling == "grid" and self.samples != 1:
            problems.append("samples is for monte-carlo or latin-hypercube sampling; a grid takes samples: 1")
        points = self.samples * math.prod(len(a) for a in self.axes.values() if not isinstance(a, Distribution))
        if points > MAX_SWEEP_POINTS:
            problems.append(
                f"{points:,} points (grid combinations x samples) exceed the {MAX_SWEEP_POINTS:,} a sweep takes "
                "(its points are drawn and held in memory at once): lower samples or split the spec"
            )
        for where, name, value in self.given_values():
            problem = _value_problem(name, value) if name in allowed else None
            if problem:
                problems.append(f"{where}: {problem}")
        if problems:
            raise SpecProblems(problems)
        return self

    def given_values(self):
        """``(where, input, value)`` for every value the spec gives in ``fixed`` and in list axes
        (``where`` is ``fixed.gpus`` or ``axes.gpus[1]``)."""
        for name, value in self.fixed.items():
            yield f"fixed.{name}", name, value
        for name, axis in self.grid_axes().items():
            for i, value in enumerate(axis):
                yield f"axes.{name}[{i}]", name, value

    def distribution_axes(self) -> dict[str, Distribution]:
        """The axes sampled by Monte Carlo or Latin hypercube, in spec order."""
        return {k: v for k, v in self.axes.items() if isinstance(v, Distribution)}

    def grid_axes(self) -> dict[str, list]:
        """The axes given as lists, in spec order."""
        return {k: v for k, v in self.axes.items() if not isinstance(v, Distribution)}


def _repeat_problem(name: str, values: list) -> str | None:
    """Why a list axis gives one value twice (``gpus: [512, 512]``, or ``512`` and ``512.0``), or None: its
    points would be the same points, evaluated and written twice under one ``point_id``, so every draw of
    that combination would count double in the dataset's means, probabilities and Sobol indices."""
    seen: dict = {}
    for i, value in enumerate(values):
        key = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if key in seen:
            return f"axes.{name}[{i}]: {value!r} repeats axes.{name}[{seen[key]}] (the same points would run twice)"
        seen[key] = i
    return None


def _suffix_hint(value) -> str:
    """For a count written with the command line's suffix (``15T``, ``4Mi``), which YAML reads as a string:
    the number to write instead; for anything else (``eight``) nothing.

    >>> _suffix_hint("15T"), _suffix_hint("4Mi"), _suffix_hint("eight")
    (' (YAML has no unit suffixes: write 15T as 15.0e+12)', ' (YAML has no unit suffixes: write 4Mi as 4194304)', '')
    """
    if not isinstance(value, str):
        return ""
    try:
        n = units.parse_count(value)
    except ValueError:
        return ""
    e = 3 * int(math.log10(n) // 3) if n >= 1e6 else 0
    if e and round(n / 10**e, 1) * 10**e == n:  # 15.0e+12: a number in YAML 1.1 (PyYAML) and 1.2 alike
        text = f"{n / 10**e:.1f}e+{e:02d}"
    else:
        text = f"{int(n)}" if n.is_integer() else f"{n:g}"
    return f" (YAML has no unit suffixes: write {value} as {text})"


def _value_problem(name: str, value) -> str | None:
    """Why ``value`` cannot be input ``name`` (None if it can): counts are whole numbers >= 1, ``tokens``
    and the what-if inputs finite numbers (``tokens`` > 0), ids and ``dtype`` strings. YAML reads
    ``15T`` as a string: the message says to write ``15.0e+12``."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "dtype":
        return None if value in TRAIN_DTYPES else f"expected one of {', '.join(TRAIN_DTYPES)}, got {value!r}"
    if name in ID_INPUTS:
        return None if isinstance(value, str) else f"expected an id (a string), got {value!r}"
    if not number:
        return f"expected a number, got {value!r}" + _suffix_hint(value)
    if not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if name in COUNT_INPUTS and not (value >= 1 and float(value).is_integer()):
        return f"expected a whole number >= 1, got {value!r}"
    if name == "tokens" and not value > 0:
        return f"expected a number > 0, got {value!r}"
    if name == "tokens" and value > MAX_TRAINING_TOKENS:
        return f"expected at most {MAX_TRAINING_TOKENS:g} (3,000 times all public human text), got {value!r}"
    if name in WHATIF_INPUTS:
        return whatif_range_problem(name, float(value))
    return None


def sweep_ids(catalog: Catalog | None = None) -> list[str]:
    """Ids of the specs in ``data/sweeps/``."""
    cat = catalog or load_catalog()
    return sorted(p.stem for p in (cat.root / "sweeps").glob("*.y*ml"))


def load_sweep_spec(ref, catalog: Catalog | None = None) -> SweepSpec:
    """A :class:`SweepSpec` by id (``data/sweeps/<id>.yaml``) or YAML path.

    Raises
    ------
    CatalogError
        For an unknown id, a missing file, invalid YAML or a spec that fails validation (the message
        names the file and each bad field: a count that is not a whole number >= 1, ``15T`` where YAML
        needs ``15.0e+12``), a system, model or stack id the catalog does not hold (named with its
        field, ``axes.system[2]``), or a ``catalog`` distribution on an input that
        ``data/uncertainty.yaml`` gives no range for.
    """
    if isinstance(ref, SweepSpec):
        return ref
    cat = catalog or load_catalog()
    ref = str(ref)
    path = Path(ref) if _looks_like_path(ref) else cat.root / "sweeps" / f"{ref}.yaml"
    if not _looks_like_path(ref) and not path.exists():
        raise CatalogError(f"unknown sweep spec {ref!r}; available: {', '.join(sweep_ids(cat)) or 'none'}", entry=ref)
    try:
        spec = parse_entry(_read_yaml(path), SweepSpec, path)
    except CatalogError as exc:
        if len(exc.problems) < 2:
            raise
        raise _spec_error(path, exc.entry, exc.field, exc.problems) from None
    found: list[tuple[str, str]] = []  # (field, problem): every one, so one run names them all
    for where, name, value in spec.given_values():  # a mistyped id stops the sweep before any point runs
        if name in ID_INPUTS and not (name == "stack" and value == "none"):
            try:
                getattr(cat, ID_INPUTS[name])(value)
            except CatalogError as exc:
                found.append((where, f"{where}: {exc}"))
    for name, axis in spec.distribution_axes().items():
        if axis.distribution == "catalog" and name not in cat.uncertainties:
            found.append(
                (
                    f"axes.{name}",
                    f"axes.{name}: 'catalog' distribution, but {cat.root / 'uncertainty.yaml'} has no range for "
                    f"{name}; it has: {', '.join(cat.uncertainties)}",
                )
            )
    if len(found) == 1:
        raise CatalogError(f"{path}: {found[0][1]}", path=path, entry=spec.id, field=found[0][0])
    if found:
        raise _spec_error(path, spec.id, found[0][0], [text for _, text in found])
    return spec


def _spec_error(path: Path, entry, field, problems: list[str]) -> CatalogError:
    """A spec's several problems as one error: a line naming the file, the entry and their count, then one
    indented line per problem (each naming its field path), so none hides behind the first."""
    lines = "".join(f"\n  {p}" for p in problems)
    return CatalogError(
        f"{path}: entry {entry!r} (SweepSpec) has {len(problems)} problems:{lines}",
        path=path,
        entry=entry,
        field=field,
        problems=problems,
    )
