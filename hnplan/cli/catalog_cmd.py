"""``hnplan catalog``: list, show and validate catalog entries."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from hnplan.catalog import KINDS, load_catalog, validate_file
from hnplan.catalog.docs import schema_markdown
from hnplan.catalog.loader import Catalog
from hnplan.catalog.yaml_io import match_id, nearest_ids, nearest_name, read_yaml, unknown_kind_text
from hnplan.cli._app import EXIT_INPUT, app, console, err_console, handle_errors, print_json
from hnplan.errors import CatalogError, ScenarioError

catalog_app = typer.Typer(
    help="List, show and validate the hardware, network and model catalogs.", no_args_is_help=True
)
app.add_typer(catalog_app, name="catalog")


def _kind(kind: str | None) -> str | None:
    """A catalog kind as typed, singular or plural, in any case (``system`` and ``Systems`` for ``systems``,
    ``switch`` for ``switches``); anything else unchanged, for the catalog to refuse with the allowed kinds.

    >>> [_kind(k) for k in ("system", "switch", "storage", "models", "Systems", "MODEL", "sytem", None)]
    ['systems', 'switches', 'storage', 'models', 'systems', 'models', 'sytem', None]
    """
    if kind is None or kind in KINDS:
        return kind
    low = kind.lower()
    return next((k for k in (low, low + "s", low + "es") if k in KINDS), kind)


@catalog_app.command("list")
def list_(
    kind: str = typer.Argument(
        None,
        metavar="KIND",
        help=f"one of: {', '.join(KINDS)}, scenarios (`hnplan report`'s), cluster_mixes (`cluster simulate --mix`), "
        "prices (data/prices.yaml: what each price buys, in US dollars, as of when); all when omitted",
    ),
    json_: bool = typer.Option(False, "--json", help="print JSON"),
):
    """List catalog ids (with names) of one kind or of all kinds (scenarios: the ids `hnplan report --scenario`
    takes, from data/scenarios/; cluster_mixes: the job mixes `hnplan cluster simulate --mix` takes; prices: the
    dated prices the cost model reads, with the item each prices)."""
    with handle_errors():
        cat = load_catalog()
        low = None if kind is None else kind.lower().replace("-", "_")
        kind = _EXTRA_ALIASES.get(low or "") or _kind(kind)
        if kind is not None and kind not in KINDS and kind not in _EXTRA_KINDS:  # the kinds this command lists
            raise CatalogError(unknown_kind_text(kind, [*KINDS, *_EXTRA_KINDS]))
        kinds = [kind] if kind else [*KINDS, *_EXTRA_KINDS]
        out = {k: _listed(cat, k) for k in kinds}
        if json_:
            print_json(out)
            return
        for k, items in out.items():
            t = Table(title=k)
            t.add_column("id")
            t.add_column("name")
            for it in items:
                t.add_row(it["id"], it["name"])
            console.print(t)


_EXTRA_KINDS = ("scenarios", "cluster_mixes", "prices")  # listed by `catalog list`, not catalog kinds
#: the names a user may type for them (any case, - or _)
_EXTRA_ALIASES = {
    **{k: k for k in _EXTRA_KINDS},
    "scenario": "scenarios",
    "cluster_mix": "cluster_mixes",
    "mix": "cluster_mixes",
    "mixes": "cluster_mixes",
    "price": "prices",
}


def _listed(cat, kind: str) -> list[dict]:
    """``[{"id", "name"}]`` of one kind `catalog list` lists; prices also name their item, dollars and date."""
    if kind == "scenarios":
        return [{"id": s, "name": cat.scenario(s).name} for s in cat.scenario_ids()]
    if kind == "cluster_mixes":
        from hnplan.catalog.mixes import cluster_mix, cluster_mix_ids

        return [{"id": m, "name": cluster_mix(m, cat).name} for m in cluster_mix_ids(cat)]
    if kind == "prices":
        return [
            {"id": p.id, "name": f"{p.item}: ${p.usd:,.0f} per {p.per}, as of {p.as_of}", "item": p.item}
            for p in cat.prices
        ]
    return [{"id": e.id, "name": e.name} for e in cat.entries(kind)]


@catalog_app.command("show")
def show(
    ref: str = typer.Argument(..., metavar="REF", help="an id (h100-sxm) or a YAML file path"),
    kind: str = typer.Option(
        None,
        help="catalog kind, when the id is ambiguous (also scenarios, cluster_mixes and prices, as catalog list "
        "names them)",
    ),
    json_: bool = typer.Option(False, "--json", help="print JSON"),
):
    """Show one entry: every field with its unit in the key, and its sources and assumptions. An id that names
    entries of several kinds (default: a scenario and a cluster mix) shows each."""
    with handle_errors():
        cat = load_catalog()
        extra = None if kind is None else _EXTRA_ALIASES.get(kind.lower().replace("-", "_"))
        if kind is not None and extra is None and _kind(kind) not in KINDS:  # the kinds this command shows
            raise CatalogError(unknown_kind_text(kind, [*KINDS, *_EXTRA_KINDS]))
        kinds = [extra] if extra else [_kind(kind)] if kind else list(KINDS)
        found, errors = [], []
        for k in kinds:
            try:
                found.append((k, _extra_entry(cat, k, ref) if k in _EXTRA_KINDS else cat.get(k, ref)))
            except CatalogError as exc:
                errors.append(exc)
        if kind is None and not (ref.endswith((".yaml", ".yml")) or "/" in ref):
            # an id of the kinds catalog list adds (a scenario, a cluster mix, a price), beside any catalog entry
            # of that id: "default" is a scenario and a cluster mix
            found += [(k, _extra_entry(cat, k, ref)) for k in _EXTRA_KINDS if _has_extra(cat, k, ref)]
        if not found and kind is None and _scenario_file(ref):
            # a scenario file: the scenario, not "no catalog entry of any kind" nor a stack's unknown keys
            # (description, notebooks)
            found.append(("scenarios", _scenario(cat, ref)))
        if not found and kind is None and _mix_file(ref):  # a job mix's file: the mix, not a stack's unknown keys
            found.append(("cluster_mixes", _extra_entry(cat, "cluster_mixes", ref)))
        if not found and (ref.endswith((".yaml", ".yml")) or "/" in ref):
            # a file that fits no kind: the problems of the kind it comes closest to (fewest fields named),
            # e.g. a model file with one bad field, not "no catalog entry" for every kind
            # (an error saying the file is of another kind is about a kind the file does not fit)
            closest = min(
                errors, key=lambda e: (bool(re.search(r" entry \(data/\w+/: ", str(e))), str(e).count("field "))
            )
            if all("expected one mapping of" in str(e) for e in errors):  # empty, a list: no kind is closer
                raise CatalogError(re.sub(r"of \w+ fields", "of an entry's fields", str(closest)), path=ref)
            raise closest
        if not found:
            if len(kinds) == 1:  # one kind asked for: the catalog's own message (nearest ids or every id)
                raise errors[0]
            raise CatalogError(_unknown_anywhere(cat, ref))
        if json_:
            print_json({k: entry.model_dump(mode="json", exclude_none=True) for k, entry in found})
            return
        for k, entry in found:
            console.print(f"[bold]{k}[/]: {entry.id}")
            d = entry.model_dump(mode="json", exclude_none=True)
            tail = ("field_sources", "assumptions")  # the values first, their provenance after them
            d = {**{k: v for k, v in d.items() if k not in tail}, **{k: d[k] for k in tail if k in d}}
            text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=10_000)
            console.print(text, markup=False, highlight=False, soft_wrap=True)


def _has_extra(cat, kind: str, ref: str) -> bool:
    """Whether ``ref`` is an id of one of the kinds `catalog list` adds (:data:`_EXTRA_KINDS`), in any case."""
    if kind == "scenarios":
        return match_id(ref, cat.scenario_ids()) is not None
    if kind == "cluster_mixes":
        from hnplan.catalog.mixes import cluster_mix_ids

        return match_id(ref, cluster_mix_ids(cat)) is not None
    return match_id(ref, [p.id for p in cat.prices]) is not None


def _extra_entry(cat, kind: str, ref: str):
    """The entry of one of :data:`_EXTRA_KINDS` by id or file (a price by id only: they share one file).

    Raises
    ------
    CatalogError
        For an unknown id (the nearest named) or an invalid file.
    """
    if kind == "scenarios":
        return _scenario(cat, ref)
    if kind == "cluster_mixes":
        from hnplan.catalog.mixes import cluster_mix

        return cluster_mix(ref, cat)
    ids = [p.id for p in cat.prices]
    hit = match_id(ref, ids)
    if hit is None:
        near = nearest_ids(ref.lower(), ids)
        raise CatalogError(
            f"unknown price id {ref!r}; {'nearest: ' + ', '.join(near) if near else 'catalog list prices lists them'}"
        )
    return next(p for p in cat.prices if p.id == hit)


def _mix_file(ref: str) -> bool:
    """Whether ``ref`` is a YAML file of a cluster job mix: in a ``cluster_mixes/`` folder, or told by its
    ``classes`` and ``offered_load``."""
    path = Path(ref)
    if not (ref.endswith((".yaml", ".yml")) and path.is_file()):
        return False
    if path.resolve().parent.name == "cluster_mixes":
        return True
    try:
        raw = read_yaml(path)
    except CatalogError:
        return False
    return isinstance(raw, dict) and {"classes", "offered_load"} <= set(raw)


def _scenario(cat, ref: str):
    """A scenario by id (in any case, as catalog ids are matched) or file path."""
    return cat.scenario(match_id(ref, cat.scenario_ids()) or ref)


def _scenario_file(ref: str) -> bool:
    """Whether ``ref`` is a YAML file of a scenario: in a ``scenarios/`` folder, or told by its ``notebooks``
    (as ``catalog validate`` tells one, :func:`~hnplan.catalog.checks.validate_file`)."""
    path = Path(ref)
    if not (ref.endswith((".yaml", ".yml")) and path.is_file()):
        return False
    if path.resolve().parent.name == "scenarios":
        return True
    try:
        raw = read_yaml(path)
    except CatalogError:  # unreadable: the kinds' own messages say why
        return False
    return isinstance(raw, dict) and "notebooks" in raw


def _unknown_anywhere(cat, ref: str) -> str:
    """One line for an id found in no kind: up to three of the closest ids over the whole catalog, each with
    its kind (:func:`difflib.get_close_matches`, cutoff 0.6, of the id in lower case, as ids are), or when none
    is that close, the kinds there are and how to list their ids.

    ``nosuch`` used to be answered "nearest switch ids: nvswitch3" (a 0.53 match, the only one above 0.5),
    which read as a suggestion rather than as "no such id".
    """
    import difflib

    owner = {i: "scenarios" for i in cat.scenario_ids()} | {i: k for k in KINDS for i in cat.ids(k)}
    near = difflib.get_close_matches(ref.lower(), list(owner), n=3, cutoff=0.6)
    if near:
        return f"no catalog entry {ref!r} of any kind; closest ids: " + ", ".join(f"{i} ({owner[i]})" for i in near)
    return (
        f"no catalog entry {ref!r} of any kind, and no id close to it; kinds: {', '.join(KINDS)}, scenarios "
        "(list one's ids with 'hnplan catalog list KIND')"
    )


@catalog_app.command("validate")
def validate(
    path: Path = typer.Argument(
        None, metavar="PATH", help="a data folder or one YAML file; default: the project's data/"
    ),
    kind: str = typer.Option(
        None, "--kind", help=f"catalog of a single file outside data/ (default: told by its keys): {', '.join(KINDS)}"
    ),
):
    """Validate every catalog file (or one file); list every problem with file, entry and field."""
    kind = _kind(kind)
    if path is not None and not path.exists():
        err_console.print(f"[bold red]error:[/] {escape(str(path))}: no such file or folder", highlight=False)
        raise typer.Exit(EXIT_INPUT)
    if kind is not None and kind not in (*KINDS, "scenarios"):
        allowed = ", ".join((*KINDS, "scenarios"))
        near = nearest_name(kind.lower(), (*KINDS, "scenarios"))
        hint = f" (did you mean {near}?)" if near else ""
        err_console.print(f"[bold red]error:[/] --kind must be one of {allowed}; got {kind!r}{hint}", highlight=False)
        raise typer.Exit(EXIT_INPUT)
    if path is not None and not path.is_dir():
        try:
            entry = validate_file(path, kind)
            if type(entry).__name__ == "Scenario":  # in data/scenarios/, --kind scenarios, or told by its keys
                # what `report` checks before it runs: the notebooks, their parameters, the catalog ids
                from hnplan.reports import validate_scenario

                validate_scenario(entry, source=str(path))
        except (CatalogError, ScenarioError) as exc:
            err_console.print(f"[bold red]invalid:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(EXIT_INPUT) from None
        # a file outside the catalog folders, its kind told by its keys: say which it was read as
        told = (
            kind is None
            and path.resolve().parent.name not in (*KINDS, "scenarios")
            and (type(entry) in KINDS.values() or type(entry).__name__ == "Scenario")
        )
        name = type(entry).__name__
        article = "an" if name[0] in "AEIOU" else "a"  # an Accelerator, an Interconnect
        console.print(f"{path}: valid" + (f" ({article} {name} entry, told by its keys)" if told else ""))
        return
    if path is not None and not any((path / k).is_dir() for k in KINDS) and not (path / "facility.yaml").is_file():
        # a folder of something else: one line, not one per defaults file it lacks
        err_console.print(
            f"[bold red]error:[/] {escape(str(path))}: not a catalog folder (none of {', '.join(f'{k}/' for k in KINDS)} "
            "or facility.yaml in it); give one YAML file, or a folder laid out as the project's data/",
            highlight=False,
        )
        raise typer.Exit(EXIT_INPUT)
    try:
        cat = Catalog(path) if path is not None else load_catalog()
    except CatalogError as exc:  # HNPLAN_DATA naming no folder
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_INPUT) from None
    problems = cat.validate()
    if not problems:  # each scenario as `report` checks it: its notebooks, their parameters, the ids
        from hnplan.reports import validate_scenario

        for sid in cat.scenario_ids():
            try:
                validate_scenario(cat.scenario(sid), cat, source=str(Path(cat.root) / "scenarios" / f"{sid}.yaml"))
            except (CatalogError, ScenarioError) as exc:
                problems.append(str(exc))
    runs_file = Path(cat.root) / "validation" / "training_runs.yaml"
    if not problems and runs_file.is_file():  # the published runs the model is validated against
        from hnplan.catalog.runs import training_runs

        try:
            runs = len(training_runs(runs_file))
        except CatalogError as exc:
            problems = [str(exc)]
    if problems:
        for p in problems:
            err_console.print(f"[bold red]invalid:[/] {escape(p)}", highlight=False)
        raise typer.Exit(EXIT_INPUT)
    n = sum(len(cat.ids(k)) for k in KINDS)
    said = f", {runs} validation runs" if runs_file.is_file() else ""
    console.print(f"{cat.root}: {n} entries valid, {len(cat.prices)} prices, {len(cat.scenario_ids())} scenarios{said}")


@catalog_app.command("schema")
def schema(kind: str = typer.Argument(None, metavar="KIND", help=f"one of: {', '.join(KINDS)}; all when omitted")):
    """Print the fields of a catalog kind (units in the names) as a Markdown table."""
    with handle_errors():
        for k in [_kind(kind)] if kind else list(KINDS):
            console.print(schema_markdown(k) + "\n", markup=False, highlight=False, soft_wrap=True)
