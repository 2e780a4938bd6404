"""Scenario and report parameters: the notebooks' declared parameters (their ``parameters`` cell), the checks a
value passes before any notebook runs (type, range, finite numbers), caller-relative paths and catalog ids.

:mod:`hnplan.reports` runs the notebooks and re-exports these.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
from pathlib import Path

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import WHATIF_INPUTS, whatif_range_problem
from hnplan.catalog.schemas.workload import MAX_TRAINING_TOKENS
from hnplan.catalog.sweeps import _suffix_hint
from hnplan.errors import CatalogError, ScenarioError

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "reports"

# scenario parameter names that hold catalog ids, and the catalog kind they refer to
_ID_PARAMS = {
    "model": "models",
    "models": "models",
    "system": "systems",
    "systems": "systems",
    "mix_systems": "systems",
    "traditional": "systems",
    "supernode": "systems",
    "seed_supernode": "systems",
    "validation_models": "models",
    "accelerator": "accelerators",
    "accelerators": "accelerators",
    "stack": "stacks",
    "engine": "engines",
}
# parameters mapping system ids to a value (``system_engines: {cloudmatrix-384: cloudmatrix-infer}``): the
# kind of their values (engines) or, for dtypes, a choice checked by :func:`_choices`
_SYSTEM_MAPS = {"system_engines": "engines", "system_dtypes": None}
# parameters naming a sweep spec (an id in data/sweeps/ or a YAML path), and folders (always paths when given)
_SPEC_PARAMS = ("spec",)
_FOLDER_PARAMS = ("dataset",)
# upper bounds of named parameters, as the command line has them (``hnplan size --tokens``)
_MAXIMA = {
    "tokens": (MAX_TRAINING_TOKENS, "3,000 times all public human text"),
    "probability": (1.0, "a probability"),  # design_space: the chance of meeting the deadline
    "map_at": (1.0, "a fraction of the arrival window"),  # cluster_operations: the fragmentation map's moment
    "n_jobs": (1_000_000, "the jobs a cluster run is limited to"),  # hnplan.cluster.jobs.MAX_JOBS, without numpy
    # procurement_whatif's Monte Carlo: each sample is one full cost evaluation (~0.35 ms, a row of ~20 numbers),
    # so 1e5 samples take about half a minute; the p5/p95 bands' rank error is then sqrt(0.05 * 0.95 / 1e5)
    # = 0.07 percentage points, far below the width of the input ranges (data/uncertainty.yaml)
    "n_samples": (100_000, "the Monte Carlo samples that still run in about a minute"),
}


def notebook_path(name: str) -> Path:
    """Path of ``notebooks/<name>.ipynb``; raises ScenarioError listing the notebooks if absent."""
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if not path.exists():
        have = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
        raise ScenarioError(f"unknown notebook {name!r}; available: {', '.join(have)}")
    return path


def _type_of_default(default: str):
    import ast

    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return None
    return None if value is None else type(value)  # a None default takes any type


def notebook_parameters(notebook: str) -> dict[str, dict]:
    """The parameters a notebook declares: name -> ``{"default": source text of the default}``, in order,
    with ``"types"`` (type names) for a parameter whose line carries papermill's type comment
    (``utilisation = "simulated"  # type: str|float|None ...``): one that takes more than its default's type.

    Read with the notebook's JSON and Python's own parser (:mod:`ast`) from the one cell tagged
    ``parameters``, the same names ``papermill.inspect_notebook`` finds (a test checks it), without
    importing papermill and nbformat (seconds of start-up: a report re-run with nothing to do needs
    neither). Cached per file content.
    """
    path = notebook_path(notebook)
    return _parameters_of(path, path.read_bytes())


@functools.lru_cache(maxsize=64)
def _parameters_of(path: Path, content: bytes) -> dict[str, dict]:
    import ast

    cells = json.loads(content)["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        raise ScenarioError(f"{path}: expected one cell tagged 'parameters', found {len(tagged)}")
    src = "".join(tagged[0]["source"])
    lines = src.splitlines()
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            comment = _TYPE_COMMENT.search(lines[(node.end_lineno or node.lineno) - 1])
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    out[t.id] = {"default": ast.get_source_segment(src, node.value)}
                    if comment:
                        out[t.id]["types"] = comment.group(1)
    return out


#: papermill's type comment after a parameter (``# type: str|float|None``), its types without spaces
_TYPE_COMMENT = re.compile(r"#\s*type:\s*(\S+)")
_TYPE_NAMES = {"str": str, "float": float, "int": int, "bool": bool, "list": list, "None": type(None)}


def _check_union(key: str, value, types: str, where: str, notebook: str):
    """``value`` as one of a type comment's types (``str|float|None``; a number given as a string is a
    number where ``float`` is allowed), a what-if input's number within its range (:data:`WHATIF_INPUTS`)."""
    allowed = [_TYPE_NAMES[t] for t in types.split("|") if t in _TYPE_NAMES]
    if float in allowed:
        value = _as_number(value, float)
    number = _is_number(value)
    if not any(isinstance(value, t) and not (t in (int, float) and isinstance(value, bool)) for t in allowed) and not (
        number and float in allowed
    ):
        raise ScenarioError(
            f"{where}: notebook {notebook!r}, parameter {key!r}: expected one of {types.replace('|', ', ')}, "
            f"got {type(value).__name__} {value!r}"
        )
    if number and key in WHATIF_INPUTS:
        problem = whatif_range_problem(key, float(value))
        if problem:
            raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {problem}")
    if key == "utilisation" and isinstance(value, str):
        # a word the planner does not take ("simualted") failed inside the notebook, exit 1
        from hnplan.errors import InputError
        from hnplan.planning.design import parse_utilisation

        try:
            parse_utilisation(value)
        except InputError as exc:
            raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {exc}") from None
    return value


def _declared(notebook: str) -> set:
    return set(notebook_parameters(notebook))


def _literal(default: str):
    import ast

    try:
        return ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return None


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_number(value, want):
    """``"1e12"`` (a string to YAML 1.1 readers) as the number the notebook expects; other values unchanged."""
    if want in (int, float) and isinstance(value, str):
        try:
            num = float(value.replace("_", ""))
        except ValueError:
            return value
        return int(num) if want is int and num.is_integer() else num
    return value


def _check_range(key: str, value, default, where: str, notebook: str) -> None:
    """Numbers finite; a count or size whose default is positive stays positive (non-negative stays
    non-negative), element by element for lists; the named bounds of :data:`_MAXIMA` (``tokens`` at most
    :data:`MAX_TRAINING_TOKENS`, ``n_samples`` at most 100,000)."""

    values = value if isinstance(value, list) else [value]
    defaults = default if isinstance(default, list) else [default]
    nums = [d for d in defaults if _is_number(d)]
    for v in values:
        if not _is_number(v):
            continue
        bad = None
        if not math.isfinite(v):
            bad = "a finite number"
        elif nums and min(nums) > 0 and v <= 0:
            bad = "a positive number"
        elif nums and min(nums) >= 0 and v < 0:
            bad = "a number >= 0"
        elif key in _MAXIMA and v > _MAXIMA[key][0]:
            bad = f"at most {_MAXIMA[key][0]:g} ({_MAXIMA[key][1]})"
        if bad:
            raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: must be {bad}; got {v!r}")


def check_parameters(notebook: str, params: dict, where: str) -> dict:
    """Check parameter names against the notebook's ``parameters`` cell, their types against its literal
    defaults (an int may stand for a float; a list must stay a list, non-empty where its default is; ``1e12``
    read as a string is a number) and their ranges (finite; positive where the default is positive).

    Returns
    -------
    dict
        The parameters with numbers given as strings converted.

    Raises
    ------
    ScenarioError
        Naming ``where`` (the scenario file or --params file), the notebook and the parameter.
    """
    declared = notebook_parameters(notebook)
    unknown = set(params) - set(declared)
    if unknown:
        near = {k: difflib.get_close_matches(k, list(declared), n=1, cutoff=0.6) for k in sorted(unknown)}
        hints = [f"{k!r} (did you mean {v[0]!r}?)" for k, v in near.items() if v]
        raise ScenarioError(
            f"{where}: notebook {notebook!r} has no parameter(s) {sorted(unknown)}"
            + (f": {', '.join(hints)}" if hints else "")
            + f"; its parameters: {', '.join(declared)}"
        )
    out = dict(params)
    for key, value in params.items():
        default = _literal(declared[key]["default"])
        want = _type_of_default(declared[key]["default"])
        if value is None:
            continue
        if "types" in declared[key]:
            value = _check_union(key, value, declared[key]["types"], where, notebook)
            _check_range(key, value, None, where, notebook)
            out[key] = value
            continue
        if want is list and isinstance(value, list) and default:
            elem = type(default[0]) if _is_number(default[0]) else None
            value = [_as_number(v, elem) for v in value]
        value = _as_number(value, want)
        if want is not None:
            numeric = want in (int, float)
            ok = (
                (isinstance(value, want) and not (numeric and isinstance(value, bool)))
                or (want is float and _is_number(value))
                or (want is int and isinstance(value, float) and value.is_integer())
            )
            if not ok:
                raise ScenarioError(
                    f"{where}: notebook {notebook!r}, parameter {key!r}: expected {want.__name__} "
                    f"like its default {declared[key]['default']}, got {type(value).__name__} "
                    f"{value!r}" + (_suffix_hint(value) if want in (int, float) else "")
                )
            if want is int and isinstance(value, float):
                value = int(value)
            if want is list and default and not value:  # systems: [] ran the notebooks into a KeyError
                raise ScenarioError(
                    f"{where}: notebook {notebook!r}, parameter {key!r}: an empty list; give at least one value "
                    f"like its default {declared[key]['default']}"
                )
        _check_range(key, value, default, where, notebook)
        out[key] = value
    return out


def check_batch(notebook: str, params: dict, where: str) -> None:
    """A notebook's ``global_batch_tokens`` a whole number of ``seq_len`` sequences (each given, or its
    default), as ``hnplan train --global-batch-tokens`` requires: the notebooks plan ``global_batch_tokens //
    seq_len`` sequences, so 16,000,000 at 8,192 planned 1,953 sequences (15,998,976 tokens) unsaid.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook and both values.
    """
    declared = notebook_parameters(notebook)
    if "global_batch_tokens" not in declared or "seq_len" not in declared:
        return
    gbt, seq = (
        params[k] if params.get(k) is not None else _literal(declared[k]["default"])
        for k in ("global_batch_tokens", "seq_len")
    )
    if _is_number(gbt) and _is_number(seq) and seq > 0 and gbt % seq:
        raise ScenarioError(
            f"{where}: notebook {notebook!r}, parameter 'global_batch_tokens': {gbt:,} is not a multiple of "
            f"seq_len {seq:,}: tokens per step are whole sequences, such as {gbt // seq * seq:,} or "
            f"{(gbt // seq + 1) * seq:,}"
        )


#: parameters naming the designs a notebook plans on
_SYSTEM_PARAMS = ("systems", "system", "mix_systems", "supernode", "traditional", "seed_supernode")


def check_fabric(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """Every GPU count given (``gpus``, ``scaling_gpus``, any ``*_gpus``) within one scale-out fabric of each
    design the notebook plans on (:func:`hnplan.planning.design.check_fabric_gpus`: a 3-tier fat-tree), as
    ``hnplan compare``, ``size`` and ``tco`` refuse a ``--gpus`` beyond it: ``gpus: 1e6`` passed the checks
    and ran ``design_comparison`` for over ten minutes of CPU. Counts left at the notebook's defaults are not
    checked.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter, its count, the design and the limit.
    """
    declared = notebook_parameters(notebook)
    counts = [
        (key, g)
        for key, value in params.items()
        if key in declared and (key == "gpus" or key.endswith("_gpus"))
        for g in (value if isinstance(value, list) else [value])
        if _is_number(g) and math.isfinite(g)
    ]
    if not counts:
        return
    systems: list = []
    for key in _SYSTEM_PARAMS:
        if key in declared:
            value = params[key] if params.get(key) is not None else _literal(declared[key]["default"])
            systems += value if isinstance(value, list) else [value]
    from hnplan.errors import InputError
    from hnplan.planning.design import check_fabric_gpus

    cat = catalog or load_catalog()
    for key, g in counts:
        for system in (s for s in systems if isinstance(s, str)):
            try:
                check_fabric_gpus(system, int(g), f"parameter {key!r}:", cat)
            except InputError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, {exc}") from None
    if notebook in _WHOLE_DOMAIN_NOTEBOOKS:
        _check_whole_domains(notebook, counts, systems, where, cat)


#: notebooks that draw one job list for a cluster of ``gpus`` and place it on each design: a count that is not
#: whole scale-up domains capped the largest jobs at a size their TP groups do not divide (``gpus: 100``: "tp = 8
#: must divide the job's 100 GPUs", exit 1), where ``hnplan cluster simulate --gpus`` takes whole domains
_WHOLE_DOMAIN_NOTEBOOKS = ("cluster_operations",)


def _check_whole_domains(notebook: str, counts: list, systems: list, where: str, cat: Catalog) -> None:
    """Each count a whole number of every design's scale-up domain (``scaleup_domain_gpus``); the message names
    the nearest counts that are (multiples of the domains' least common multiple)."""
    domains = {s: cat.system(s).scaleup_domain_gpus for s in systems if isinstance(s, str)}
    if not domains:
        return
    step = math.lcm(*domains.values())
    for key, g in counts:
        bad = [f"{s}'s {d}-GPU domains" for s, d in domains.items() if int(g) % d]
        if bad:
            below, above = int(g) // step * step, -(-int(g) // step) * step
            near = " or ".join(f"{n:,}" for n in (below, above) if n > 0)
            raise ScenarioError(
                f"{where}: notebook {notebook!r}, parameter {key!r}: {int(g):,} GPUs are not whole scale-up "
                f"domains ({', '.join(bad)}); give a multiple of {step:,}, such as {near}"
            )


def _looks_like_path(ref) -> bool:
    return isinstance(ref, str) and (ref.endswith((".yaml", ".yml")) or "/" in ref or os.sep in ref)


def resolve_paths(params: dict, base: str | Path | None = None) -> dict:
    """The parameters with every catalog reference or sweep spec given as a relative file path
    (``model: ./dense1t.yaml``, ``spec: ./mine.yaml``) and every folder (``dataset: mine``) made absolute
    against ``base`` (default: the caller's working directory), so a notebook that runs in ``notebooks/``
    finds the same file (a relative dataset was read and written under ``notebooks/``)."""
    root = Path(base) if base is not None else Path.cwd()

    def fix(ref):
        if _looks_like_path(ref) and not Path(ref).is_absolute():
            return str((root / ref).resolve())
        return ref

    out = dict(params)
    for key, value in params.items():
        if key in _ID_PARAMS or key in _SPEC_PARAMS:
            out[key] = [fix(v) for v in value] if isinstance(value, list) else fix(value)
        elif key in _FOLDER_PARAMS and isinstance(value, str) and value and not Path(value).is_absolute():
            out[key] = str((root / value).resolve())
    return out


def _choices(notebook: str, key: str) -> tuple | None:
    """The values a parameter may take where the notebook's planner allows a fixed set (``dtype``, checkpoint
    ``mode``, placement ``policies``), from the planner's own constant; None for any other parameter. Imported
    only when such a parameter is given."""
    if key == "policies":
        from hnplan.cluster.policies import POLICIES

        return POLICIES
    if key == "mode":
        if notebook == "memory":
            from hnplan.planning.memory import MODES

            return MODES
        from hnplan.reliability.checkpoint import CHECKPOINT_MODES

        return CHECKPOINT_MODES
    if key in ("dtype", "system_dtypes"):
        if notebook == "inference_capacity":
            from hnplan.planning.inference.core import SERVE_DTYPES

            return SERVE_DTYPES
        if notebook in ("design_comparison", "training_plan", "roofline"):
            from hnplan.planning.training.plan import TRAIN_DTYPES

            return TRAIN_DTYPES
    return None


def _check_choices_and_maps(notebook: str, params: dict, where: str, cat: Catalog) -> None:
    """A fixed-set parameter one of its values, a cluster ``mix`` a mix the catalog holds, and the keys of
    ``system_dtypes`` / ``system_engines`` system ids with valid values: each failed inside the notebook (a
    ``KeyError`` for ``dtype: fp7`` or ``engine: nope``) or, for a mistyped system key, was ignored unsaid."""
    from hnplan.errors import InputError, check_choice

    def fail(key, msg):
        raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {msg}")

    for key, value in params.items():
        allowed = _choices(notebook, key)
        if value is None:
            continue
        if key == "mix" and isinstance(value, str):
            from hnplan.catalog.mixes import cluster_mix

            try:
                cluster_mix(value, cat)
            except CatalogError as exc:
                fail(key, exc)
        if key in _SYSTEM_MAPS and isinstance(value, dict):
            for system, v in value.items():
                try:
                    cat.system(system)
                except CatalogError as exc:
                    fail(key, exc)
                if _SYSTEM_MAPS[key] is not None and v is not None:
                    try:
                        cat.get(_SYSTEM_MAPS[key], v)
                    except CatalogError as exc:
                        fail(key, f"{system}: {exc}")
                elif allowed is not None:
                    try:
                        check_choice(f"{system}'s dtype", v, allowed)
                    except InputError as exc:
                        fail(key, exc)
            continue
        if allowed is not None:
            for v in value if isinstance(value, list) else [value]:
                try:
                    check_choice(key, v, allowed)
                except InputError as exc:
                    fail(key, exc)


def check_ids(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """Check that parameters holding catalog ids (``model``, ``systems``, ...) name existing entries, and
    that a sweep spec (``spec``) loads (:func:`hnplan.catalog.sweeps.load_sweep_spec`: its file and fields),
    a cluster ``mix`` exists, fixed-set parameters (``dtype``, ``mode``, ``policies``) hold one of their values
    and ``system_dtypes`` / ``system_engines`` map system ids to valid values.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter and the nearest ids.
    """
    cat = catalog or load_catalog()
    _check_choices_and_maps(notebook, params, where, cat)
    for key, value in params.items():
        if key in _SPEC_PARAMS and isinstance(value, str):
            from hnplan.catalog.sweeps import load_sweep_spec

            try:
                load_sweep_spec(value, cat)
            except CatalogError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {exc}") from None
        kind = _ID_PARAMS.get(key)
        if kind is None:
            continue
        twice = sorted({v for v in value if value.count(v) > 1}) if isinstance(value, list) else []
        if twice:  # two rows of one design: "the slowest, gb200-nvl72, takes 1.00x as long"
            raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: lists {', '.join(twice)} twice")
        for ref in value if isinstance(value, list) else [value]:
            if ref is None:  # an optional reference left to the notebook's default (``stack = None``)
                continue
            try:
                cat.get(kind, ref) if kind != "systems" else cat.system(ref)
            except CatalogError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {exc}") from None
        seen: dict[str, str] = {}  # a YAML copy that kept a catalog id names its rows as that id: two of one id
        for ref in value if isinstance(value, list) else []:
            entry_id = cat.get(kind, ref).id
            if entry_id in seen:
                raise ScenarioError(
                    f"{where}: notebook {notebook!r}, parameter {key!r}: {seen[entry_id]} and {ref} are both "
                    f"'{entry_id}'; give each its own id"
                )
            seen[entry_id] = ref
