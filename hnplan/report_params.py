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

from hnplan.catalog.schemas import WHATIF_INPUTS, whatif_range_problem
from hnplan.catalog.schemas.workload import MAX_TRAINING_TOKENS
from hnplan.catalog.sweeps import _suffix_hint
from hnplan.errors import ScenarioError

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
        named = [f"{k!r} (did you mean {v[0]!r}?)" if v else repr(k) for k, v in near.items()]
        raise ScenarioError(
            f"{where}: notebook {notebook!r} has no parameter{'s' if len(named) > 1 else ''} {', '.join(named)}"
            f"; its parameters: {', '.join(declared)}"
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
