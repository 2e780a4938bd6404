"""Loading and looking up catalog entries: the only code in hnplan that reads ``data/``.

Layout of a data folder::

    data/accelerators/<id>.yaml    one Accelerator per file
    data/interconnects/<id>.yaml   one Interconnect per file
    data/switches/<id>.yaml        one Switch per file
    data/systems/<id>.yaml         one System per file
    data/models/<id>.yaml          one Model per file
    data/stacks/<id>.yaml          one SoftwareStack per file (training software: overlaps, kernels, calibration)
    data/prices.yaml               a list of Price entries
    data/facility.yaml             one Facility entry
    data/reliability.yaml          one Reliability entry (failure rates, checkpoint/restart defaults)
    data/uncertainty.yaml          a list of UncertainInput (ranges of procurement what-if inputs)
    data/memory.yaml               one MemoryOverheads entry (runtime overheads, serving defaults)
    data/scenarios/<id>.yaml       one Scenario per file

Every lookup takes an id (``h100-sxm``) or the path of a YAML file holding one entry of the same
schema, so users can bring their own hardware or model without editing ``data/``.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from pydantic import BaseModel

from hnplan.catalog.design import Design, resolve_design
from hnplan.catalog.schemas import (
    KINDS,
    Accelerator,
    Interconnect,
    Model,
    SoftwareStack,
    Switch,
    System,
)
from hnplan.catalog.single_files import SingleFiles
from hnplan.catalog.yaml_io import (  # noqa: F401 - DEFAULT_DATA_DIR and read_yaml re-exported
    DEFAULT_DATA_DIR,
    _looks_like_path,
    _read_yaml,
    _singular,
    data_dir,
    match_id,
    nearest_ids,
    parse_entry,
    read_yaml,
    unknown_kind_text,
)
from hnplan.errors import CatalogError

#: the fields of a system that name other entries (an id or a file path), and the kind of each
SYSTEM_REFS = (
    ("accelerator", "accelerators"),
    ("scaleup_fabric", "interconnects"),
    ("scaleout_fabric", "interconnects"),
    ("scaleout_switch", "switches"),
    ("scaleup_switch", "switches"),
    ("storage", "storage"),
)


class Catalog(SingleFiles):
    """Typed, validated access to the catalogs of one data folder.

    Parameters
    ----------
    root : path, optional
        The data folder; defaults to :func:`data_dir`.

    Examples
    --------
    >>> cat = Catalog()
    >>> cat.accelerator("h100-sxm").dense_tflops["bf16"]
    989.4
    >>> cat.accelerator("h100-sxn")
    Traceback (most recent call last):
    ...
    hnplan.errors.CatalogError: unknown accelerator id 'h100-sxn'; nearest: h100-sxm, h800-sxm, h200-sxm
    """

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else data_dir()
        self._cache: dict[str, dict] = {}  # kind -> {id: (entry, path)}, every file of the kind parsed
        self._one: dict[tuple[str, str], tuple[BaseModel, Path]] = {}  # (kind, id) -> (entry, path), parsed on demand
        self._files: dict[str, dict[str, Path]] = {}  # kind -> {file stem: path}, listed, not parsed
        self._designs: dict[tuple, Design] = {}

    # -- loading ---------------------------------------------------------------------------
    # A lookup by id parses only that entry's file (``<kind>/<id>.yaml``); listing every entry of a kind
    # (``entries``, ``validate``) parses them all. Both check that the entry's id is its file name.
    def _kind_dir(self, kind: str) -> Path:
        return self.root / kind

    def _kind_files(self, kind: str) -> dict[str, Path]:
        if kind not in self._files:
            folder = self._kind_dir(kind)
            paths = sorted(folder.glob("*.y*ml")) if folder.is_dir() else []
            self._files[kind] = {p.stem: p for p in paths}
        return self._files[kind]

    def _parse_file(self, kind: str, path: Path):
        obj = parse_entry(_read_yaml(path), KINDS[kind], path)
        if obj.id != path.stem:
            raise CatalogError(
                f"{path}: entry id {obj.id!r} differs from the file name {path.stem!r}",
                path=path,
                entry=obj.id,
                field="id",
            )
        return obj

    def resolve_id(self, kind: str, ref: str) -> str | None:
        """The catalog id ``ref`` names in ``kind``, or None when no entry has it: the id itself, or one
        that differs from it only in case (catalog ids are lower-kebab-case, so ``HGX-H100-IB-NDR`` is
        ``hgx-h100-ib-ndr`` and ``Llama3.1-405B`` is ``llama3.1-405b``). The one place an id typed by a
        user is matched to a file name; every lookup by id goes through it.

        >>> cat = Catalog()
        >>> cat.resolve_id("systems", "HGX-H100-IB-NDR"), cat.resolve_id("models", "Llama3.1-405B")
        ('hgx-h100-ib-ndr', 'llama3.1-405b')
        >>> cat.resolve_id("systems", "gb200-nvl27") is None
        True
        """
        return match_id(ref, self._kind_files(kind))

    def _load_entry(self, kind: str, entry_id: str):
        """``(entry, path)`` of one id (in any case, :meth:`resolve_id`), parsing only its file; None when no
        file has that name."""
        resolved = self.resolve_id(kind, entry_id)
        if resolved is None:
            return None
        entry_id = resolved
        if kind in self._cache:
            return self._cache[kind].get(entry_id)
        key = (kind, entry_id)
        if key not in self._one:
            path = self._kind_files(kind)[entry_id]
            self._one[key] = (self._parse_file(kind, path), path)
        return self._one[key]

    def _load_kind(self, kind: str) -> dict:
        if kind not in self._cache:
            entries: dict[str, tuple[BaseModel, Path]] = {}
            for stem, path in self._kind_files(kind).items():
                hit = self._one.get((kind, stem))
                entries[stem] = hit if hit is not None else (self._parse_file(kind, path), path)
            self._cache[kind] = entries
        return self._cache[kind]

    def ids(self, kind: str) -> list[str]:
        """Sorted ids of one catalog kind (accelerators, interconnects, switches, systems, models): the file
        names, not parsed (:meth:`validate` checks each file's id against its name)."""
        self._check_kind(kind)
        return sorted(self._kind_files(kind))

    def entries(self, kind: str) -> list:
        """All entries of one kind, sorted by id."""
        self._check_kind(kind)
        return [obj for _, (obj, _) in sorted(self._load_kind(kind).items())]

    def path_of(self, kind: str, entry_id: str) -> Path:
        """The file an entry was loaded from."""
        hit = self._load_entry(kind, entry_id)
        if hit is None:
            raise KeyError(entry_id)
        return hit[1]

    @staticmethod
    def _check_kind(kind: str):
        if kind not in KINDS:
            raise CatalogError(unknown_kind_text(kind, KINDS))

    def get(self, kind: str, ref):
        """Look up an entry by id, by the path of a YAML file with one entry, or pass an entry through.

        Raises
        ------
        CatalogError
            For an unknown id (the message lists the nearest valid ids) or an invalid file.
        """
        self._check_kind(kind)
        schema = KINDS[kind]
        if isinstance(ref, schema):
            return ref
        ref = str(ref)
        hit = self._load_entry(kind, ref)
        if hit is not None:
            return hit[0]
        if _looks_like_path(ref):
            path = Path(ref)
            return parse_entry(_read_yaml(path), schema, path)
        known = self._kind_files(kind)
        near = nearest_ids(ref.lower(), known)
        hint = f"; nearest: {', '.join(near)}" if near else f"; valid ids: {', '.join(sorted(known))}"
        raise CatalogError(f"unknown {_singular(kind)} id {ref!r}{hint}", entry=ref)

    def accelerator(self, ref) -> Accelerator:
        """An :class:`Accelerator` by id or file path."""
        return self.get("accelerators", ref)

    def interconnect(self, ref) -> Interconnect:
        """An :class:`Interconnect` by id or file path."""
        return self.get("interconnects", ref)

    def switch(self, ref) -> Switch:
        """A :class:`Switch` by id or file path."""
        return self.get("switches", ref)

    def system(self, ref) -> System:
        """A :class:`System` by id or file path; its references are checked to exist (an unknown one
        raises, naming the file when ``ref`` is a path)."""
        sys_ = self.get("systems", ref)
        from_file = isinstance(ref, (str, Path)) and _looks_like_path(str(ref))
        try:
            self._check_system_refs(sys_, origin=ref if from_file else None)
        except CatalogError as exc:
            if isinstance(ref, (str, Path)) and _looks_like_path(str(ref)):
                raise CatalogError(f"{ref}: {exc}", path=ref, entry=exc.entry, field=exc.field) from None
            raise
        return sys_

    def design(self, ref) -> Design:
        """The :class:`~hnplan.catalog.design.Design` of a system: the system with its accelerator,
        fabrics, switches, prices and facility defaults resolved once, and its bills of materials
        memoised per GPU count.

        Parameters
        ----------
        ref : str, path, System or Design
            A system id, the path of a YAML file holding one system, a system entry, or a Design
            (passed through).

        Returns
        -------
        Design
            The same object for repeated calls with the same system (cached per catalog).

        Raises
        ------
        CatalogError
            For an unknown id (the message lists the nearest ids), an invalid file, or a system whose
            accelerator, fabric or switch is not in the catalog.

        Examples
        --------
        >>> cat = Catalog()
        >>> cat.design("gb200-nvl72") is cat.design("gb200-nvl72")
        True
        """
        if isinstance(ref, Design):
            return ref
        if isinstance(ref, System):
            try:  # only this id's file is parsed (entries are parsed on demand)
                hit = self._load_entry("systems", ref.id)
            except CatalogError:
                hit = None
            own = hit is not None and hit[0] is ref
            key: tuple[str, ...] = ("id", ref.id) if own else ("entry", ref.model_dump_json())
            source = ref.id if own else "(entry)"
        else:
            text = str(ref)
            resolved = self.resolve_id("systems", text)
            is_id = resolved is not None
            text = resolved or text  # HGX-H100-IB-NDR is the design of hgx-h100-ib-ndr, not another one
            path = Path(text)
            # a file by its bytes too: a file edited since a design of it was made (in a notebook's kernel, a
            # sweep's thread workers) is another design
            raw = hashlib.sha256(path.read_bytes()).hexdigest() if not is_id and path.is_file() else ""
            key = ("id", text) if is_id else ("path", str(path.resolve()), raw)
            source = text
        if key not in self._designs:
            sys_ = self.system(ref)
            if key[0] == "path":
                source = str(Path(str(ref)))
            self._designs[key] = resolve_design(sys_, self.get, self.price, lambda name: getattr(self, name), source)
        return self._designs[key]

    def model(self, ref) -> Model:
        """A :class:`Model` by id or file path."""
        return self.get("models", ref)

    def stack(self, ref) -> SoftwareStack:
        """A :class:`SoftwareStack` by id or file path; the accelerators it calibrates are checked to exist."""
        st = self.get("stacks", ref)
        # a stack read from a user's file: the messages name the file (a catalog id's file is named by the catalog's
        # own checks, which prefix it)
        who = (
            f"{Path(ref)}: stack {st.id}"
            if isinstance(ref, (str, Path)) and _looks_like_path(str(ref))
            else f"stack {st.id}"
        )
        for acc_id, effs in (st.matmul_efficiency or {}).items():
            try:
                acc = self.accelerator(acc_id)
            except CatalogError as exc:
                raise CatalogError(
                    f"{who}: field 'matmul_efficiency': {exc}", entry=st.id, field="matmul_efficiency"
                ) from None
            extra = sorted(set(effs) - set(acc.dense_tflops))
            if extra:
                raise CatalogError(
                    f"{who}: field 'matmul_efficiency.{acc_id}': {acc_id} has no "
                    f"{', '.join(extra)} peak; its dtypes: {', '.join(acc.dense_tflops)}",
                    entry=st.id,
                    field=f"matmul_efficiency.{acc_id}",
                )
        # keyed by accelerator id as well
        for cal in (
            "attention_efficiency",
            "attention_fp8_ratio",
            "attention_fp8_ratio_mla",
            "attention_fp8_sliding_bwd_causal",
            "ep_comm_overlap_fraction_by_accelerator",
            "choices_by_accelerator",
        ):
            for acc_id in getattr(st, cal) or {}:
                try:
                    self.accelerator(acc_id)
                except CatalogError as exc:
                    raise CatalogError(f"{who}: field '{cal}': {exc}", entry=st.id, field=cal) from None
        return st

    def _check_system_refs(self, s: System, origin: str | Path | None = None):
        """Check that the entries a system names exist; ``origin``, the system's own file, lets the message
        of a relative path that is not found from the working folder name the file beside ``origin`` that
        was likely meant (paths in a file are read from the working folder, as on the command line)."""
        for field, kind in SYSTEM_REFS:
            ref = getattr(s, field)
            if ref is None:
                continue
            try:
                self.get(kind, ref)
            except CatalogError as exc:
                hint = ""
                beside = None if origin is None else Path(origin).parent / ref
                if beside is not None and _looks_like_path(ref) and not Path(ref).exists() and beside.is_file():
                    hint = (
                        f"; a path in a file is read from the folder hnplan runs in ({Path.cwd()}), as on the "
                        f"command line, not from the file's folder: write {beside} (or an absolute path)"
                    )
                raise CatalogError(f"system {s.id!r}, field {field!r}: {exc}{hint}", entry=s.id, field=field) from None

    # -- whole-catalog check and fingerprint --------------------------------------------------
    def validate(self) -> list[str]:
        """Load every file and check cross-references; return a list of problems (empty if clean).

        Never raises for bad data: each problem is one message naming file, entry and field.
        """
        problems: list[str] = []
        for kind in KINDS:
            try:
                self._load_kind(kind)
            except CatalogError as exc:
                problems.append(str(exc))
                # load the remaining files one by one so every bad file is reported
                for path in sorted(self._kind_dir(kind).glob("*.y*ml")):
                    try:
                        parse_entry(_read_yaml(path), KINDS[kind], path)
                    except CatalogError as e2:
                        if str(e2) != str(exc):
                            problems.append(str(e2))
                self._cache.pop(kind, None)
                for key in [k for k in self._one if k[0] == kind]:
                    del self._one[key]
        if not problems:
            for s in self.entries("systems"):
                try:
                    self._check_system_refs(s)
                    if s.price_item is not None:  # a price_item prices.yaml lacks is bad input (design.py)
                        self.design(s.id).prices  # noqa: B018
                except CatalogError as exc:
                    where = str(self.path_of("systems", s.id))
                    problems.append(str(exc) if str(exc).startswith(where) else f"{where}: {exc}")
            for st in self.entries("stacks"):
                try:
                    self.stack(st.id)
                except CatalogError as exc:
                    problems.append(f"{self.path_of('stacks', st.id)}: {exc}")
            for sw in self.entries("switches"):
                try:
                    self.get("interconnects", sw.fabric)
                except CatalogError as exc:
                    problems.append(f"{self.path_of('switches', sw.id)}: field 'fabric': {exc}")
        for getter in (
            lambda: self.prices,
            lambda: self.facility,
            lambda: self.reliability,
            lambda: self.uncertainties,
            lambda: self.memory_overheads,
        ):
            try:
                getter()
            except CatalogError as exc:
                problems.append(str(exc))
        try:  # (a reliability.yaml that does not parse is reported above)
            measured_on = self.reliability.measured_on
        except CatalogError:
            measured_on = []
        for ref in measured_on:  # the accelerators the rates were measured on: a typo would label every system carried
            if ref not in self.ids("accelerators"):  # an id only: a bad accelerator file is its own problem
                try:
                    self.get("accelerators", ref)
                except CatalogError as exc:
                    problems.append(f"{self.root / 'reliability.yaml'}: field 'measured_on': {exc}")
        for sid in self.scenario_ids():
            try:
                self.scenario(sid)
            except CatalogError as exc:
                problems.append(str(exc))
        return problems

    def file_digest(self, kind: str, ref: str) -> str | None:
        """SHA-256 (first 16 hex digits) of the bytes of the YAML file ``ref`` names and, for a system, of the
        files its fields name by path (:data:`SYSTEM_REFS`); None when ``ref`` is a catalog id, which
        :meth:`content_hash` covers.

        Parameters
        ----------
        kind : str
            A catalog kind (``systems``, ``models``, ``stacks``, ...).
        ref : str
            An id or a path, as lookups take it (a relative path is read from the working folder).

        Raises
        ------
        CatalogError
            For a file that does not load, as :meth:`get` (and :meth:`system`) raise.
        """
        if not _looks_like_path(ref):
            return None
        paths = [Path(ref)]
        if kind == "systems":
            sys_ = self.system(ref)
            paths += [Path(r) for f, _ in SYSTEM_REFS if isinstance(r := getattr(sys_, f), str) and _looks_like_path(r)]
        else:
            self.get(kind, ref)
        h = hashlib.sha256()
        for path in paths:
            h.update(str(path).encode())
            h.update(path.read_bytes())
        return h.hexdigest()[:16]

    def content_hash(self) -> str:
        """SHA-256 (first 12 hex digits) of every data file's bytes, for report provenance."""
        h = hashlib.sha256()
        for path in sorted(self.root.rglob("*.y*ml")):
            h.update(str(path.relative_to(self.root)).encode())
            h.update(path.read_bytes())
        return h.hexdigest()[:12]


@functools.lru_cache(maxsize=4)
def _cached(root: str) -> Catalog:
    return Catalog(root)


def load_catalog(root: str | Path | None = None) -> Catalog:
    """The (cached) :class:`Catalog` of a data folder, default :func:`data_dir`."""
    return _cached(str(Path(root) if root is not None else data_dir()))
