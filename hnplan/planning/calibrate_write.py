"""Writing a calibration (:func:`write_calibration`): the calibrated stack YAML and, when an
nccl-tests sweep fitted a fabric, that fabric's interconnect YAML and a system YAML that uses it.

The network files are named after the stack file they were fitted with
(``<system>-for-<stack file stem>.yaml``, ``<fabric>-<system>-for-<stack file stem>.yaml``), so a
second calibration (another stack, another cluster) in the same folder writes its own files instead
of replacing the pair the first stack file was written with; a file of that name written for another
stack file is never overwritten (one line, exit 2). Every file's first line records the stack file it
belongs to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import InputError
from hnplan.files import atomic_write as _atomic_write
from hnplan.planning.calibrate_fit import METHOD

if TYPE_CHECKING:
    from hnplan.planning.calibrate import Calibration

HEADER = "written by hnplan calibrate"
#: libyaml's safe emitter where PyYAML has it: the same text as the pure-Python one for these entries (every
#: catalog stack and a calibrated one) in a tenth of the time (about 1 ms against 12 ms for a stack file)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_FOR = " for the stack file "


def _dump(d: dict, header: str) -> str:
    """YAML text of an entry, ``id, name, source, notes`` first, provenance last, under a comment line."""
    head = [k for k in ("id", "name", "source", "notes") if k in d]
    tail = [k for k in ("field_sources", "assumptions") if k in d]
    ordered = {k: d[k] for k in [*head, *(k for k in d if k not in head and k not in tail), *tail]}
    return f"# {header}\n" + yaml.dump(ordered, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=110)


def _slug(stem: str) -> str:
    """A file stem as a catalog id part (lower-kebab-case): ``My Stack_v2`` -> ``my-stack-v2``."""
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "stack"


def _owner(path: Path) -> str | None:
    """The stack file a calibration file was written for (from its first line); ``""`` for a file not
    written by hnplan calibrate, ``None`` for no file."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
    if HEADER not in first or _FOR not in first:
        return ""
    return first.split(_FOR, 1)[1].split(";", 1)[0].strip()


def _check_free(path: Path, stack_path: Path) -> None:
    """Refuse to overwrite a network file that belongs to another stack file (or to nobody's calibration)."""
    owner = _owner(path)
    if owner is None or owner == str(stack_path):
        return
    whose = f"for the stack file {owner}" if owner else "by hand (not by hnplan calibrate)"
    raise InputError(
        f"{path}: written {whose}; not overwriting it for {stack_path} (write this calibration to another folder "
        "with --out, or remove the file)"
    )


def write_calibration(cal: Calibration, out=None, catalog: Catalog | None = None) -> dict[str, str]:
    """Write the calibrated stack YAML (atomically) and, when a sweep fitted a fabric, that fabric's
    interconnect YAML and a system YAML that uses it, next to the stack file.

    Parameters
    ----------
    cal : Calibration
    out : path, optional
        The stack file; default ``./<stack>-calibrated.yaml``.

    Returns
    -------
    dict
        ``{"stack": path}`` plus ``{"systems": [paths], "interconnects": [paths]}`` when a fabric was
        fitted (named ``<system>-for-<stack file stem>``, ``<fabric>-<system>-for-<stack file stem>``), and
        ``"stale"``: the network files an earlier calibration wrote for the same stack file that this one did
        not replace (a re-run without the sweep leaves them, with the earlier sweep's fabrics).
        ``hnplan train --stack <stack> [--system <system>]`` reads them.

    Raises
    ------
    InputError
        If the stack file exists and was not written by hnplan calibrate for that path, if a network file
        of that name exists and was written for another stack file (or not by hnplan calibrate), or if a
        written file does not read back as a valid catalog entry. Nothing is written then (the checks come
        first). A file an earlier calibration wrote for the same stack file is replaced.
    OSError
        If the folder cannot be written.
    """
    cat = catalog or load_catalog()
    path = (Path(out) if out is not None else Path.cwd() / f"{cal.calibrated.id}.yaml").resolve()
    comm = cal.comm
    fitted = [] if comm is None else [(k, p) for k, p in zip(comm.fabrics, comm.parameters) if p.fitted]
    tag = f"for-{_slug(path.stem)}"
    sys_ids = dict.fromkeys(sys_id for (sys_id, _), _ in fitted)
    plan = [path.parent / f"{comm.fabrics[k]}-{k[0]}-{tag}.yaml" for k, _ in fitted] if comm else []
    plan += [path.parent / f"{s}-{tag}.yaml" for s in sys_ids]
    if _owner(path) not in (None, str(path)):  # the user's own file (or a calibration written elsewhere)
        raise InputError(
            f"{path}: a file not written by hnplan calibrate for this path is there; not overwriting it "
            "(give --out another file, or remove it)"
        )
    for target in plan:  # before anything is written
        _check_free(target, path)
    import hnplan

    # the systems the fitted fabrics go into: train reads the fit with them (the stack alone keeps the catalog's)
    system = f" --system {plan[len(fitted)]}" if sys_ids else ""
    header = (
        f"{HEADER} on {cal.date}{_FOR}{path}; use: hnplan train --stack {path}{system}; hnplan "
        f"{hnplan.__version__}, catalog {cat.content_hash()[:12]}"
    )
    _atomic_write(path, _dump(cal.calibrated.model_dump(mode="json", exclude_unset=True), header))
    cat.stack(str(path))  # reads back as a stack (raises CatalogError otherwise)
    written: dict = {"stack": str(path)}
    if fitted and comm is not None:
        _write_network(cal, comm, fitted, path, tag, cat, written)
    # network files an earlier calibration wrote for this stack file that this one did not (a re-run without
    # the sweep, or a sweep of other systems): their fabrics are the earlier sweep's, not this run's
    now = {*written.get("systems", []), *written.get("interconnects", [])}
    written["stale"] = [
        str(f) for f in sorted(path.parent.glob(f"*-{tag}.yaml")) if str(f) not in now and _owner(f) == str(path)
    ]
    return written


def _write_network(cal: Calibration, comm, fitted: list, path: Path, tag: str, cat: Catalog, written: dict) -> None:
    """Write each fitted fabric's interconnect YAML and the system YAMLs that use them beside the stack file
    ``path``; their paths go into ``written`` (``systems``, ``interconnects``)."""
    sweep = Path(str(cal.collectives_path)).name
    systems: dict[str, dict] = {}
    ics = []
    for (sys_id, tier), p in fitted:
        fab = comm.fabrics[(sys_id, tier)]
        d = cat.interconnect(fab).model_dump(mode="json", exclude_unset=True)
        d["id"] = f"{fab}-{sys_id}-{tag}"
        d["name"] = f"{d['name']}, as measured on {sys_id}"
        d["notes"] = (
            f"{fab} with its bandwidth efficiency fitted on {cal.date} to the nccl-tests sweep {cal.collectives_path} "
            f"of {sys_id}'s {tier} tier: {p.value:.4g} (catalog {p.initial:g}); every other field is {fab}'s. "
            f"Written with the stack file {path}."
        )
        d["bw_efficiency"] = round(p.value, 4)
        fs = dict(d.get("field_sources") or {})
        fs["bw_efficiency"] = (
            f"fitted by hnplan calibrate on {cal.date} to the nccl-tests sweep {cal.collectives_path} "
            f"(rows of at least 16 MiB, {METHOD}); was {p.initial:g}" + (" (AT A BOUND)" if p.at_bound else "")
        )
        d["field_sources"] = fs
        ic_path = path.parent / f"{d['id']}.yaml"
        _atomic_write(ic_path, _dump(d, f"{HEADER} on {cal.date}{_FOR}{path}"))
        cat.interconnect(str(ic_path))
        ics.append(str(ic_path))
        if sys_id not in systems:
            sd = cat.system(sys_id).model_dump(mode="json", exclude_unset=True)
            sd["id"] = f"{sys_id}-{tag}"
            sd["name"] = f"{sd['name']}, network calibrated to {sweep}"
            sd["notes"] = (
                f"{sys_id} with the fabrics fitted on {cal.date} to the nccl-tests sweep {cal.collectives_path} "
                f"(the files it names); every other field is {sys_id}'s. Written with the stack file {path}."
            )
            # costed as the system it was calibrated from, where prices.yaml prices it (a price_item
            # with no price is refused as bad input; an unpriced system stays unpriced: cost n/a)
            if (
                "unit_price_usd" not in sd
                and "price_item" not in sd
                and "system" not in cat.design(sys_id).prices.missing
            ):
                sd["price_item"] = cat.system(sys_id).id
            systems[sys_id] = sd
        systems[sys_id][f"{tier}_fabric"] = str(ic_path)
    for sd in systems.values():
        sys_path = path.parent / f"{sd['id']}.yaml"
        _atomic_write(sys_path, _dump(sd, f"{HEADER} on {cal.date}{_FOR}{path}; its fabrics are the files it names"))
        cat.system(str(sys_path))
        written.setdefault("systems", []).append(str(sys_path))
    written["interconnects"] = ics
