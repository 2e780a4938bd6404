"""Reading catalog YAML: the data folder, a strict safe loader (C loader where present; duplicate keys
refused), one-line errors naming the file, entry and field, and parsing an entry into its schema.

:mod:`hnplan.catalog.loader` builds the catalog on these and re-exports them.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from hnplan.catalog.schemas.base import ID_PATTERN
from hnplan.errors import CatalogError

T = TypeVar("T", bound=BaseModel)

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


def data_dir() -> Path:
    """The data folder: ``$HNPLAN_DATA`` if set, else ``data/`` at the project root.

    Raises
    ------
    CatalogError
        When ``$HNPLAN_DATA`` names no folder, or one without the catalog's folders (every id would otherwise
        be "unknown", with no valid ids).
    """
    given = os.environ.get("HNPLAN_DATA")
    if given is None:
        return DEFAULT_DATA_DIR
    if not Path(given).is_dir():
        raise CatalogError(f"HNPLAN_DATA={given}: no such folder (point it at a copy of hnplan's data/)", path=given)
    if not any((Path(given) / name).exists() for name in ("systems", "models", "accelerators", "facility.yaml")):
        # a folder of something else: every id would be "unknown" with an empty list of valid ids
        raise CatalogError(
            f"HNPLAN_DATA={given}: not a catalog folder (no systems/, models/, accelerators/ or facility.yaml in it; "
            "point it at a copy of hnplan's data/)",
            path=given,
        )
    return Path(given)


_STR = "tag:yaml.org,2002:str"


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's C parser where built) that refuses a key given twice in one mapping and
    reads ``1e12`` as a number (YAML 1.2 floats; YAML 1.1 wants ``1.0e+12`` and PyYAML returns a string)."""

    #: the tag each plain scalar resolved to, by its text and implicitness (:meth:`resolve`); bounded
    _RESOLVED: dict = {}
    _RESOLVED_MAX = 1 << 15

    def resolve(self, kind, value, implicit):
        """PyYAML's tag resolution, remembered for plain scalars: a catalog repeats its keys and values (``id``,
        ``source``, ``bf16``) thousands of times, each otherwise matched against the resolvers' patterns again."""
        if kind is not yaml.ScalarNode or self.yaml_path_resolvers:  # a path resolver's tag depends on the path
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._RESOLVED.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(self._RESOLVED) < self._RESOLVED_MAX and len(value) <= 64:
                self._RESOLVED[key] = tag
        return tag

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key_node.tag == _STR and type(key_node) is yaml.ScalarNode:
                key = key_node.value  # a string key constructs to its text (SafeConstructor.construct_yaml_str)
            else:
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (TypeError, yaml.YAMLError):
                    continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"duplicate key {key!r} (first given on line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def construct_document(self, node):
        """The document's data by :func:`_plain_data` where every node is a plain mapping, sequence or scalar
        (the catalogs and runs files), else by PyYAML's constructor (merge keys, other tags, a recursive alias, a
        duplicate key and its error)."""
        try:
            data = _plain_data(self, node, {})
        except _NotPlain:
            return super().construct_document(node)
        self.constructed_objects, self.recursive_objects, self.deep_construct = {}, {}, False
        return data


class _NotPlain(Exception):
    """A node that :func:`_plain_data` leaves to PyYAML's constructor."""


_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
#: the scalar tags built by the safe constructor's own functions (no state: null, bool, int, float)
_SCALARS = {
    t: _StrictLoader.yaml_constructors[t] for t in (f"tag:yaml.org,2002:{k}" for k in ("null", "bool", "int", "float"))
}


def _plain_data(loader, node, built: dict):
    """What PyYAML's safe constructor builds from ``node`` (the same values, types and key order; a mapping or
    sequence met again through an alias is the same object, as PyYAML's memo of constructed nodes makes it),
    without its per-node bookkeeping (``construct_object``'s memo and recursion guard for every node, a generator
    per collection), for a tree of plain mappings, sequences and string, null, bool, int and float scalars (each
    scalar by the safe constructor's own function): half of the 0.06 s of CPU that reading
    ``data/validation/training_runs.yaml`` took, the rest libyaml's parse. ``built``: ``{id(node): data}`` of the
    collections begun (None until done). Raises :class:`_NotPlain` on any other node: another tag, a collection
    inside itself (an alias to an enclosing node), a merge (``<<``) or value (``=``) key, a key that is not a
    scalar, or a key given twice (PyYAML's constructor then builds the document, or raises its error, as before)."""
    tag = node.tag
    if type(node) is yaml.ScalarNode:
        if tag == _STR:
            return node.value
        make = _SCALARS.get(tag)
        if make is None:
            raise _NotPlain
        return make(loader, node)
    at = id(node)
    if at in built:
        if built[at] is None:  # an alias to a collection being built: recursive
            raise _NotPlain
        return built[at]
    built[at] = None
    if tag == _SEQ and type(node) is yaml.SequenceNode:
        built[at] = data = [_plain_data(loader, child, built) for child in node.value]
        return data
    if tag != _MAP or type(node) is not yaml.MappingNode:
        raise _NotPlain
    out: dict = {}
    for key_node, value_node in node.value:
        if type(key_node) is not yaml.ScalarNode:
            raise _NotPlain
        key = _plain_data(loader, key_node, built)
        if key in out:
            raise _NotPlain
        out[key] = _plain_data(loader, value_node, built)
    built[at] = out
    return out


_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def read_yaml(path: str | Path, what: str = ""):
    """Parse one YAML file safely: a duplicate key is refused, ``1e12`` is a float.

    Parameters
    ----------
    path : path
        The file.
    what : str
        How to name the file in messages (``--params``); default its path.

    Raises
    ------
    CatalogError
        One line naming the file: not found, a directory, not readable, not UTF-8 text, or not valid YAML.
    """
    path = Path(path)
    name = f"{what} {path}" if what else str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a safe loader)
    except FileNotFoundError:
        raise CatalogError(f"{name}: file not found", path=path) from None
    except IsADirectoryError:
        raise CatalogError(f"{name}: is a folder, expected a YAML file", path=path) from None
    except PermissionError:
        raise CatalogError(f"{name}: permission denied (cannot read the file)", path=path) from None
    except UnicodeDecodeError as exc:
        raise CatalogError(
            f"{name}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); expected YAML", path=path
        ) from None
    except OSError as exc:
        raise CatalogError(f"{name}: cannot read: {exc.strerror or exc}", path=path) from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{name}: not valid YAML: {' '.join(str(exc).split())}", path=path) from None


_read_yaml = read_yaml


def match_id(ref: str, ids) -> str | None:
    """The id of ``ids`` that ``ref`` names: itself, or the one it differs from only in case (catalog ids are
    lower-kebab-case file names, so ``HGX-H100-IB-NDR`` names ``hgx-h100-ib-ndr``); None when none does. The one
    rule by which a typed id is matched (:meth:`~hnplan.catalog.loader.Catalog.resolve_id`, cluster mixes).

    >>> match_id("GB200-NVL72", ["gb200-nvl72", "hgx-h100-ib-ndr"]), match_id("gb200", ["gb200-nvl72"])
    ('gb200-nvl72', None)
    """
    if ref in ids:
        return ref
    folded = ref.lower()
    return folded if folded in ids else None


def nearest_ids(ref: str, ids) -> list[str]:
    """Up to three catalog ids close to an unknown one, nearest first: the ids that begin with it as whole
    hyphen-separated parts (``dgx-b200`` for ``dgx-b200-ib-ndr``: an id typed without its fabric, which the ratio
    below ranks after ``dgx-b300``), the ids that hold it as one of their parts (``h100`` in ``hgx-h100-ib-ndr``: a
    chip or size typed for the system or model that carries it, which the ratio misses in a long id), then
    :func:`difflib.get_close_matches` (cutoff 0.5: looser than :func:`nearest_name`, ids being longer and hyphenated).

    >>> nearest_ids("gb200-nvl27", ["gb200-nvl72", "hgx-h100-ib-ndr"])
    ['gb200-nvl72']
    >>> nearest_ids("H100", ["dgx-a100-hdr", "hgx-h100-ib-ndr", "hgx-h100-roce-400g", "hgx-h200-ib-ndr"])
    ['hgx-h100-ib-ndr', 'hgx-h100-roce-400g']
    >>> nearest_ids("dgx-b200", ["dgx-b300", "dgx-b200-ib-ndr", "hgx-b200-ib-xdr"])
    ['dgx-b200-ib-ndr', 'dgx-b300', 'hgx-b200-ib-xdr']
    """
    names = [str(i) for i in ids]
    part = str(ref).lower()
    starts = [i for i in names if part and i.startswith(part + "-")]
    holding = starts + [i for i in names if part in i.split("-") and i not in starts] if part else []
    # the shortest, plainest first, the ids that begin with it before the others (a stable sort of each group)
    holding.sort(key=lambda i: (i not in starts, -difflib.SequenceMatcher(None, part, i).ratio()))
    close = difflib.get_close_matches(str(ref), names, n=3, cutoff=0.5)
    return list(dict.fromkeys([*holding, *close]))[:3]


def nearest_name(name: str, allowed) -> str | None:
    """The allowed name closest to a typo'd one (:func:`difflib.get_close_matches`, cutoff 0.6), or None.

    >>> nearest_name("gpu", ["gpus", "model", "seq_len"])
    'gpus'
    """
    near = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return near[0] if near else None


def unknown_field_text(name: str, allowed, quote: bool = False) -> str:
    """``field gpu: unknown (did you mean gpus?)``, or with the allowed names when none is near
    (names in quotes with ``quote``)."""
    near = nearest_name(name, allowed)
    q = repr if quote else str
    hint = f"did you mean {q(near)}?" if near else f"allowed: {', '.join(map(str, allowed))}"
    return f"field {q(name)}: unknown ({hint})"


def unknown_kind_text(kind: str, allowed) -> str:
    """One line for a catalog kind that is none of ``allowed``: the kind as typed, every allowed kind and,
    where one is close (:func:`nearest_name` of the kind in lower case), that one.

    >>> unknown_kind_text("scenarioz", ["systems", "models", "scenarios"])
    "unknown catalog kind 'scenarioz'; allowed: systems, models, scenarios (did you mean scenarios?)"
    >>> unknown_kind_text("nosuch", ["systems", "models"])
    "unknown catalog kind 'nosuch'; allowed: systems, models"
    """
    near = nearest_name(str(kind).lower(), allowed)
    hint = f" (did you mean {near}?)" if near else ""
    return f"unknown catalog kind {kind!r}; allowed: {', '.join(map(str, allowed))}{hint}"


def _model_at(schema: type[BaseModel], loc) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (a nested model's, through optional, list and
    dict fields), or None where the path leaves the models."""
    model: type[BaseModel] | None = schema
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int) or part not in model.model_fields:
            continue  # a list index or a dict key
        model = _first_model(model.model_fields[part].annotation)
    return model


def _first_model(tp) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _is_tag(part) -> bool:
    """A pydantic union-branch tag in an error location (``list[float]``, ``function-after[...]``)."""
    return isinstance(part, str) and "[" in part


#: catalog keys a past release read and the current one does not: the unknown-key message says what replaced
#: them, so an older catalog fails with the way forward instead of only a list of allowed keys
RETIRED_KEYS = {
    name: "retired: NCCL's own latency model (hnplan.comm.nccl, NVIDIA/nccl src/graph/tuning.cc) replaced it; set "
    "'nccl_link' (nvlink or net) instead"
    for name in ("collective_base_latency_us", "ll_latency_us", "inr_latency_us")
}


def validation_problems(exc: ValidationError, schema: type[BaseModel], quote: bool = True) -> tuple[str, list[str]]:
    """Each problem of a failed validation as ``field 'x': what is wrong`` (an unknown key with the
    nearest allowed name, a missing one with its description), unknown keys first (a typo'd key
    is usually why a required one is missing); and the first field named. ``quote=False`` writes
    ``field x``."""
    q = repr if quote else str
    unknown: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    errors = exc.errors()
    # a union field (a list, or a distribution mapping) reports every branch: its branch tags
    # ("list[...]", "function-after[...]") are no field, and a branch's "should be a valid list" beside
    # the errors of the branch the value was written for says nothing
    fields = [".".join(str(p) for p in e["loc"] if p != "[key]" and not _is_tag(p)) or "(entry)" for e in errors]

    def other_branch(i: int) -> bool:
        e = errors[i]
        return (
            any(_is_tag(p) for p in e["loc"])
            and e["type"].endswith("_type")
            and any(
                j != i and fields[j].startswith(fields[i]) and not errors[j]["type"].endswith("_type")
                for j in range(len(errors))
            )
        )

    for i, err in enumerate(errors):
        if other_branch(i):
            continue
        parts = [p for p in err["loc"] if p != "[key]" and not _is_tag(p)]
        field = fields[i]
        if err["type"] == "extra_forbidden":
            holder = _model_at(schema, parts[:-1])
            allowed = list(holder.model_fields) if holder is not None else []
            near = nearest_name(str(parts[-1]), allowed)
            prefix = ".".join(map(str, parts[:-1]))
            hint = (
                RETIRED_KEYS[str(parts[-1])]
                if str(parts[-1]) in RETIRED_KEYS and "nccl_link" in allowed
                else f"did you mean {q((prefix + '.' if prefix else '') + near)}?"
                if near
                else (f"allowed keys: {', '.join(allowed)}" if allowed else "not a field here")
            )
            unknown.append((field, f"field {q(field)}: unknown key ({hint})"))
            continue
        msg = err["msg"]
        if err["type"] == "missing":
            desc = schema.model_fields.get(field)
            msg = "required field is missing" + (f" ({desc.description})" if desc and desc.description else "")
        if err["type"] == "value_error":  # a validator's own sentence: pydantic's "Value error, " prefix says nothing
            msg = msg.removeprefix("Value error, ")
            if field == "(entry)":  # an entry-wide check names its fields itself, each of its problems apart
                found = getattr(err.get("ctx", {}).get("error"), "problems", None) or [msg]
                other.extend((field, text) for text in found)
                continue
        if err["type"] in _BOUND_ERRORS:  # "greater than or equal to 1" says more with the unit: 1 [Gb/s]
            msg += _unit_of(schema, parts)
        if err["type"] in _NUMBER_PARSING and isinstance(err.get("input"), str):  # nic_gbps: 400Gb, usd: 300k
            unit = _unit_of(schema, parts).strip(" []")
            msg += f"; got {err['input']!r}: write the number alone" + (f", in {unit}" if unit else "")
        if err["type"].startswith("date_"):  # "invalid character in year" for 14 May 2020
            msg += f" (write YYYY-MM-DD, e.g. 2025-06-01); got {err['input']!r}"
        if err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == ID_PATTERN:
            msg = f"an id is lower-kebab-case (a-z, 0-9, '-' or '.' between them, e.g. 'my-gpu'); got {err['input']!r}"
        other.append((field, f"field {q(field)}: {msg}"))
    unknown = _merge_unknown(unknown)
    both = unknown + other
    return (both[0][0] if both else "(entry)"), [t for _, t in both]


def _merge_unknown(unknown: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Unknown keys of one mapping with no near name list its allowed keys once, at the first of them
    (``field 'a': unknown key (allowed keys: ...); field 'b': unknown key (allowed keys as above)``)."""
    out, said = [], set()
    for field, text in unknown:
        at = text.find("(allowed keys: ")
        if at >= 0 and text.endswith(")"):
            if text[at:] in said:
                text = text[:at] + "(allowed keys as above)"
            else:
                said.add(text[at:])
        out.append((field, text))
    return out


_BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
_NUMBER_PARSING = ("float_parsing", "int_parsing")


def _unit_of(schema: type[BaseModel], parts: list) -> str:
    """`` [unit]`` of the field at ``parts`` (the last bracket of its description, e.g. ``[Gb/s]``), or ""
    where the description states none or the field is a bare ratio (``[-]``)."""
    for i in range(len(parts), 0, -1):
        holder = _model_at(schema, parts[: i - 1])
        name = parts[i - 1]
        if holder is not None and isinstance(name, str) and name in holder.model_fields:
            units_ = re.findall(r"\[([^\]]+)\]", holder.model_fields[name].description or "")
            return f" [{units_[-1]}]" if units_ and units_[-1] != "-" else ""
    return ""


def _format_validation(exc: ValidationError, schema: type[BaseModel], path, entry) -> CatalogError:
    first_field, problems = validation_problems(exc, schema)
    return CatalogError(
        f"{path}: entry {entry!r} ({schema.__name__}) is invalid: {'; '.join(problems)}",
        path=path,
        entry=entry,
        field=first_field,
        problems=problems,
    )


def _what(raw) -> str:
    """What a YAML document holds instead of a mapping, in words a user reads.

    >>> [_what(x) for x in (None, [1, 2], "gpus: 8", 3)]
    ['nothing (the file is empty)', 'a list of 2 items', "the text 'gpus: 8'", 'the int 3']
    """
    if raw is None:
        return "nothing (the file is empty)"
    if isinstance(raw, list):
        return f"a list of {len(raw)} item{'s' if len(raw) != 1 else ''}"
    if isinstance(raw, str):
        return f"the text {raw[:40]!r}"
    return f"the {type(raw).__name__} {raw!r}"


def _a(name: str) -> str:
    """A schema's name after its indefinite article: ``a Model``, ``an Accelerator``, ``an Interconnect``."""
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def parse_entry(raw, schema: type[T], path) -> T:
    """Validate one mapping against a schema, raising :class:`CatalogError` that names the file,
    the entry and each bad field (with the allowed keys or values)."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: expected one mapping of {schema.__name__} fields, got {_what(raw)}", path=path)
    entry = raw.get("id", "?")
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        other = _other_kind(raw, schema)
        if other is not None:
            kind, theirs = other
            foreign = [k for k in raw if k not in schema.model_fields]
            raise CatalogError(
                f"{path}: entry {entry!r} is {_a(theirs.__name__)} entry (data/{kind}/: its keys "
                f"{', '.join(map(str, foreign[:4]))}{', ...' if len(foreign) > 4 else ''} are {theirs.__name__} "
                f"fields), not {_a(schema.__name__)}",
                path=path,
                entry=entry,
            ) from None
        raise _format_validation(exc, schema, path, entry) from None


def _other_kind(raw: dict, schema: type[BaseModel]) -> tuple[str, type[BaseModel]] | None:
    """The catalog kind (name, schema) whose fields hold every key of ``raw`` when three or more of them are
    not ``schema``'s: a file of another kind given where ``schema`` is expected (a model file as --system)."""
    if sum(k not in schema.model_fields for k in raw) < 3:
        return None
    from hnplan.catalog.schemas import KINDS

    for kind, theirs in KINDS.items():
        if theirs is not schema and all(k in theirs.model_fields for k in raw):
            return kind, theirs
    return None


def _singular(kind: str) -> str:
    """The catalog kind's name for one entry: ``switches`` -> ``switch``, ``storage`` -> ``storage``."""
    if kind.endswith("ches"):
        return kind[:-2]
    return kind[:-1] if kind.endswith("s") else kind


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or os.sep in ref or "/" in ref
