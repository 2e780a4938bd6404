"""Checks against a catalog: :func:`validate_file` for one YAML file (``hnplan catalog validate``) and
:func:`check_refs` for the ids a command is given. They look entries up in a
:class:`~hnplan.catalog.loader.Catalog`; the whole-catalog check is the catalog's own
(:meth:`~hnplan.catalog.loader.Catalog.validate`).
"""

from __future__ import annotations

from pathlib import Path

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import (
    KINDS,
    Facility,
    MemoryOverheads,
    Price,
    Reliability,
    Scenario,
    System,
    UncertainInput,
)
from hnplan.catalog.yaml_io import _read_yaml, _what, parse_entry
from hnplan.errors import CatalogError, InputError


def validate_file(path: str | Path, kind: str | None = None):
    """Validate one YAML file; ``kind`` is inferred from its parent folder when omitted, and from its keys
    (:func:`kind_of_keys`) when that folder is no catalog's. A system's or a
    stack's references (accelerators, interconnects, switches) are checked against the data folder the
    file sits in, or the default one.

    Returns the parsed entry (or list of prices). Raises :class:`CatalogError`.
    """
    path = Path(path)
    raw = _read_yaml(path)
    if kind is not None and kind not in KINDS and kind != "scenarios":  # given, not guessed from the folder
        raise CatalogError(f"{path}: kind must be one of {', '.join(KINDS)}, scenarios; got {kind!r}", path=path)
    kind = kind or path.resolve().parent.name
    if path.name == "prices.yaml":
        return [parse_entry(item, Price, path) for item in raw]
    if path.name == "facility.yaml":
        return parse_entry(raw, Facility, path)
    if path.name == "reliability.yaml":
        return parse_entry(raw, Reliability, path)
    if path.name == "uncertainty.yaml":
        return [parse_entry(item, UncertainInput, path) for item in raw]
    if path.name == "memory.yaml":
        return parse_entry(raw, MemoryOverheads, path)
    if kind not in KINDS and kind != "scenarios" and isinstance(raw, dict) and "notebooks" in raw:
        kind = "scenarios"  # a scenario file outside data/scenarios/, told by its notebooks
    if kind == "scenarios":
        return parse_entry(raw, Scenario, path)
    if kind not in KINDS:
        guessed = kind_of_keys(raw)
        if guessed is None and not isinstance(raw, dict):  # empty, a list, a bare value: no keys to tell by
            raise CatalogError(
                f"{path}: expected one mapping of an entry's fields, got {_what(raw)}",
                path=path,
            )
        if guessed is None:
            raise CatalogError(
                f"{path}: cannot tell which catalog this file belongs to (its folder {kind!r} is none of them, "
                f"nor do its keys say); pass the kind (--kind), one of: {', '.join(KINDS)}",
                path=path,
            )
        kind = guessed
    entry = parse_entry(raw, KINDS[kind], path)
    # references to other entries: checked against the data folder the file sits in, else the default one
    root = path.parent.parent if path.parent.name == kind else None
    cat = Catalog(root) if root is not None and (root / "accelerators").is_dir() else load_catalog()
    try:
        if kind == "stacks":
            cat.stack(entry)
        elif isinstance(entry, System):  # kind == "systems"
            cat._check_system_refs(entry, origin=path)
            if entry.price_item is not None:  # one prices.yaml does not price is refused (design.py)
                cat.design(entry).prices  # noqa: B018
    except CatalogError as exc:
        raise CatalogError(f"{path}: {exc}", path=path, entry=entry.id, field=exc.field) from None
    return entry


def kind_of_keys(raw) -> str | None:
    """The catalog kind a file of no catalog folder holds, told by its keys: the one kind whose own fields
    (beyond the ``id, name, source, notes, field_sources, assumptions`` every kind has) hold the most of
    them, at least two and more than any other kind's; ``None`` when no kind stands out (or not a mapping).
    A mistyped key still points at its kind when the others do, so validation then names the typo.

    >>> kind_of_keys({"id": "m", "layers": 2, "hidden": 64, "heads": 4})
    'models'
    >>> kind_of_keys({"id": "x", "name": "x"}) is None
    True
    """
    if not isinstance(raw, dict):
        return None
    common = set.intersection(*(set(schema.model_fields) for schema in KINDS.values()))
    own = [k for k in raw if k not in common]
    score = {kind: sum(k in schema.model_fields for k in own) for kind, schema in KINDS.items()}
    ranked = sorted(score.items(), key=lambda kv: -kv[1])
    (best, top), (_, second) = ranked[0], ranked[1]
    return best if top >= 2 and top > second else None


def check_refs(refs: dict[str, tuple[str, object]], catalog: Catalog | None = None) -> None:
    """Look up every catalog reference of a request, in order; the first unknown one raises. Commands check
    their ids first, so a mistyped id is what a user hears about first, with the nearest valid ids.

    Parameters
    ----------
    refs : dict
        ``{label: (kind, ref)}``: the label names where the reference came from (``"--model"``), the kind
        is a catalog kind (``models``, ``systems``, ``stacks``, ...), the ref an id, a YAML path or an
        entry. ``None`` refs are skipped (an option left at no value). A system's own references
        (accelerator, fabrics, switches, storage, and a ``price_item``'s price) are checked with it.
    catalog : Catalog, optional
        Default :func:`hnplan.catalog.load_catalog`.

    Raises
    ------
    CatalogError
        ``"<label>: unknown <kind> id '<ref>'; nearest: <ids>"`` for the first reference not in the
        catalog (or an invalid file).

    Examples
    --------
    >>> check_refs({"--model": ("models", "llama3.1-8bb")})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hnplan.errors.CatalogError: --model: unknown model id 'llama3.1-8bb'; nearest: llama3.1-8b, ...
    """
    cat = catalog or load_catalog()
    for label, (kind, ref) in refs.items():
        if ref is None:
            continue
        try:
            entry = cat.system(ref) if kind == "systems" else cat.get(kind, ref)
            if kind == "systems" and entry.price_item is not None:  # a price_item prices.yaml lacks is bad input
                cat.design(ref).prices  # noqa: B018  (the ref: the error names the file)
        except CatalogError as exc:
            raise CatalogError(f"{label}: {exc}", path=exc.path, entry=exc.entry, field=exc.field) from None


def check_stack_dtype(stack, dtype: str) -> None:
    """Refuse a training dtype the software stack has no recipe for (its ``train_dtypes``), e.g. fp4 with
    torchtitan-2506, whose quantisation converters at its commit are torchao float8 and MXFP8 only.

    The message starts ``dtype <value>`` (the CLI says it as ``--dtype <value>``) and names the stack. Here, beside
    the catalog, so that ``compare`` refuses it once for every design without importing the training planner.

    Raises
    ------
    InputError
        If the stack lists ``train_dtypes`` and ``dtype`` is not among them.
    """
    allowed = stack.train_dtypes if stack is not None else None
    if allowed is not None and dtype not in allowed:
        raise InputError(
            f"dtype {dtype} is not available with stack {stack.id!r}: it trains in {', '.join(allowed)} only "
            f"(field train_dtypes of data/stacks/{stack.id}.yaml); choose one of those or another stack"
        )
