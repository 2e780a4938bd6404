"""The claims audit: every numeric claim of the supernode seed documents as a stated experiment.

Each claim (:class:`Claim`) names its seed file, the experiment that tests it (the parameters and the
grid it runs over: model size, GPU count, fabric, chip), the numbers the planners compute at every
grid point, and a verdict computed from those numbers by :func:`decide`:

* ``holds``: the claim's inequality is true at every point of the grid;
* ``does not hold``: it is true at none (the condition names the point that comes closest);
* ``holds under conditions``: true at some points; the condition names the region
  ("holds for models of at least 145.6B parameters at 2,304 GPUs or more");
* ``not testable``: a quantity the test needs is missing, and the condition names it;
* ``undecided``: (the shared-cluster claims, simulated over independent job streams) at every point the
  95 % interval of the metric straddles the threshold; a point whose interval straddles it decides
  nothing, and a claim that holds wherever it is decided but is undecided elsewhere holds under conditions.

Claims about the architecture compare the supernode with a **same-chip baseline**: the 8-GPU server
design carrying the supernode's own accelerator and scale-out NIC (:func:`same_chip_baseline`), so that
a newer chip is never credited to the fabric. The experiments live in
:mod:`hnplan.planning.claims_training` (planner-based; designs and grids in :mod:`hnplan.planning.claims_grid`)
and :mod:`hnplan.planning.claims_other`
(storage, reliability, inference, catalog arithmetic, and the claims that cannot be tested).
Claims about shared-cluster utilisation call :func:`cluster_utilisation` (one place to wire a cluster
simulator).
"""

from __future__ import annotations

import math
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import HnplanError
from hnplan.labels import quantity_text
from hnplan.planning.records import as_records, first_max, first_min, frame_records, is_na

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported by the functions that build frames, not here: `hnplan claims` on a claim whose experiment
# builds plain rows (the storage claim) runs without it (pandas' import is about 0.25 s of CPU)

VERDICTS = ("holds", "does not hold", "holds under conditions", "not testable", "undecided")
SEED_FILES = {"000": "000_14d202129fb34c3d.txt", "001": "001_baa31eb37780e878.txt", "002": "002_2d5e16c6f36d2699.txt"}
JSON_KEYS = ("id", "seed_file", "claim", "experiment", "verdict", "condition", "numbers", "points")


class _Points:
    """:attr:`Claim.points`: a DataFrame, or plain rows (a list of dicts, the values a DataFrame of them holds)
    kept as they are until the frame is asked for; :meth:`Claim.as_dict` reads the rows without building it.
    A data descriptor, so that the dataclass's ``__init__`` stores the value given (default: no rows)."""

    def __set_name__(self, owner, name: str) -> None:
        self._name = f"_{name}"

    def __get__(self, obj, owner=None) -> Any:
        if obj is None:
            return ()  # the dataclass's default: no rows
        value = obj.__dict__[self._name]
        if isinstance(value, (list, tuple)):
            import pandas as pd

            value = obj.__dict__[self._name] = pd.DataFrame(list(value))
        return value

    def __set__(self, obj, value: Any) -> None:
        obj.__dict__[self._name] = value


@dataclass
class Claim:
    """One audited claim: what the seed says, the experiment, the verdict and the numbers behind it.

    ``points`` is the experiment's grid (one row per point, the claim's metric and a boolean ``holds``
    column; rows shown for context have ``holds`` None); ``numbers`` the headline numbers (threshold,
    best and worst metric, ...); ``metric``, ``op`` and ``axes`` say which column the verdict reads.
    ``points`` may be given as a DataFrame or as plain rows (a list of dicts): it reads as a DataFrame either
    way, built from the rows on first use.
    """

    id: str
    seed_file: str
    claim: str
    experiment: str
    verdict: str
    condition: str
    numbers: dict = field(default_factory=dict)
    points: pd.DataFrame = _Points()  # a DataFrame or rows (a list of dicts), read as a DataFrame
    metric: str = ""  # the points' column the verdict reads ("" when not testable)
    op: str = ""  # ">=" or "<="
    axes: tuple = ()  # the grid's axes, in the order the condition names them

    def point_rows(self) -> list[dict]:
        """``points`` as rows: the values its DataFrame holds (``to_dict("records")``), from the rows themselves
        where they were given as rows (:func:`hnplan.planning.records.frame_records`: no DataFrame built)."""
        value = self.__dict__["_points"]
        return frame_records(list(value)) if isinstance(value, (list, tuple)) else value.to_dict("records")

    def as_dict(self) -> dict:
        """The JSON shape of ``hnplan claims --json`` (keys :data:`JSON_KEYS`)."""
        pts = [{k: None if is_na(v) else v for k, v in r.items()} for r in self.point_rows()]
        return {
            "id": self.id,
            "seed_file": self.seed_file,
            "claim": self.claim,
            "experiment": self.experiment,
            "verdict": self.verdict,
            "condition": self.condition,
            "numbers": {k: _plain(v) for k, v in self.numbers.items()},
            "points": [{k: _plain(v) for k, v in p.items()} for p in pts],
        }


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def doc(fn) -> str:
    """An experiment function's docstring on one line (the first sentence of its ``experiment`` text)."""
    return " ".join((fn.__doc__ or fn.__name__).split())


def seed_files(*keys: str) -> str:
    """``"000, 002"`` -> the seed file names, comma-separated."""
    return ", ".join(SEED_FILES[k] for k in keys)


# -- verdicts from numbers ------------------------------------------------------------------------
def fmt_axis(name: str, value) -> str:
    """A grid value as text: parameters in B/T, GPU counts with separators, rates in Gb/s."""
    if name == "params":
        return f"{value / units.TERA:.3g}T" if value >= units.TERA else f"{value / units.GIGA:.4g}B"
    if name == "gpus":
        return f"{int(value):,}"
    if name == "nic_gbps":
        return f"{value:g} Gb/s"
    if name == "size_bytes":
        return units.format_size(value)
    if name == "ranks":
        return f"{int(value):,}"
    return str(value)


_AXIS_WORDS = {
    "params": ("models of", "parameters"),
    "gpus": ("", "GPUs"),
    "nic_gbps": ("NICs of", "per GPU"),
    "servers_per_rack": ("", "servers per rack"),
    "size_bytes": ("buffers of", ""),
    "ranks": ("", "ranks"),
}


def _bound_text(axis: str, op: str, value) -> str:
    pre, post = _AXIS_WORDS.get(axis, (axis, ""))
    v = fmt_axis(axis, value)
    word = "at least" if op == ">=" else "at most"
    return " ".join(p for p in (pre, word, v, post) if p)


def describe_region(points: pd.DataFrame | list[dict], axes: list[str]) -> str:
    """The grid points where ``holds`` is true, in words.

    First tries a single threshold per axis (an orthant: ``holds == AND_i (axis_i op_i X_i)`` over the
    evaluated points, with at most one threshold per axis); otherwise lists, per value of the first
    axes, the values of the last axis where the claim holds. ``points``: a DataFrame or its rows.
    """
    pts = [r for r in as_records(points) if not is_na(r["holds"])]
    ok = [bool(r["holds"]) for r in pts]
    choices = []
    for a in axes:
        opts: list[tuple[str | None, object]] = [(None, None)]
        for v in sorted({r[a] for r in pts}):
            opts += [(">=", v), ("<=", v)]
        choices.append(opts)
    best = None
    for combo in _product(choices):
        mask = [
            all(op is None or (r[a] >= v if op == ">=" else r[a] <= v) for a, (op, v) in zip(axes, combo)) for r in pts
        ]
        if mask == ok:
            n = sum(op is not None for op, _ in combo)
            if best is None or n < best[0]:
                best = (n, combo)
    if best is not None:
        parts = [_bound_text(a, op, v) for a, (op, v) in zip(axes, best[1]) if op is not None]
        return "holds for " + " and ".join(parts) + " (within the grid)"
    last, rest = axes[-1], axes[:-1]
    groups: dict[tuple, list[dict]] = {}
    for r in pts:  # the rows per value of the first axes, in sorted order (DataFrame.groupby(rest, sort=True))
        groups.setdefault(tuple(r[a] for a in rest), []).append(r)
    lines = []
    for key in sorted(groups):
        good = [r[last] for r in groups[key] if bool(r["holds"])]
        if good:
            head = ", ".join(fmt_axis(a, k) for a, k in zip(rest, key))
            lines.append(
                (head + ": " if head else "")
                + ", ".join(fmt_axis(last, v) for v in sorted(good))
                + f" {_AXIS_WORDS.get(last, ('', ''))[1]}".rstrip()
            )
    return "holds only at " + "; ".join(lines)


def _product(choices):
    if not choices:
        yield ()
        return
    for first in choices[0]:
        for rest in _product(choices[1:]):
            yield (first, *rest)


def decide(
    points: pd.DataFrame | list[dict], axes: list[str], metric: str, op: str, threshold: float, unit: str = ""
) -> tuple[str, str]:
    """The verdict and its condition from a grid with a boolean (or NaN) ``holds`` column.

    Parameters
    ----------
    points : DataFrame or list of dict
        One row per grid point: the ``axes`` columns, the ``metric`` column and ``holds`` (NaN where
        the point could not be evaluated, e.g. no plan fits); or its rows.
    axes : list of str
        The grid's axes, in the order the condition names them.
    metric, op, threshold, unit
        The claim's inequality ``metric op threshold`` (``op`` is ``">="`` or ``"<="``), for the text
        (the metric in words and its unit, :func:`hnplan.labels.quantity_text`: ``communication share >= 0.6``).

    Returns
    -------
    (verdict, condition)
    """
    pts = [r for r in as_records(points) if not is_na(r["holds"])]
    if not pts:
        return "not testable", "no point of the grid could be evaluated (no plan fits or divides)"
    ok = [bool(r["holds"]) for r in pts]
    thr = quantity_text(metric, f"{op} {units.format_count(threshold)}", unit)  # 1M, not 1e+06; in words
    if all(ok):
        return "holds", f"{thr} at every one of the {len(pts)} points evaluated"
    if not any(ok):
        m = [{**r, metric: float(r[metric])} for r in pts]
        i = first_max(m, metric) if op == ">=" else first_min(m, metric)  # the first of equal ones, NaN skipped
        where = ", ".join(f"{fmt_axis(a, i[a])}" + (f" {_AXIS_WORDS[a][1]}" if a in _AXIS_WORDS else "") for a in axes)
        return "does not hold", (
            f"{thr} at none of the {len(pts)} points; closest at {where}: "
            + quantity_text(metric, f"= {units.format_count(i[metric])}", unit)
        )
    return "holds under conditions", f"{thr}: " + describe_region(points, axes)


def verdict_points(df: pd.DataFrame | list[dict], metric: str, op: str, threshold: float) -> pd.DataFrame | list[dict]:
    """Add the ``holds`` column (``metric op threshold``; NaN where the metric is NaN); to a DataFrame, or to
    each of its rows (a list of dicts: new rows are returned, a lacking metric read as NaN)."""
    if isinstance(df, list):
        out = []
        for r in df:
            x = r.get(metric, math.nan)
            v = math.nan if is_na(x) else float(x)
            out.append(
                {**r, "holds": math.nan if math.isnan(v) else (v >= threshold if op == ">=" else v <= threshold)}
            )
        return out
    v = df[metric].astype(float)
    holds = (v >= threshold) if op == ">=" else (v <= threshold)
    df = df.copy()
    df["holds"] = holds.astype(object).where(v.notna(), np.nan)
    return df


# -- the audit -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditSetup:
    """The grids and designs the experiments run over (each claim's ``experiment`` names the ones it uses).

    The defaults follow Megatron-LM (Narayanan et al., SC21, Table 1): one 2,048-token sequence per GPU
    per step; GPU counts are multiples of 72 (whole NVL72 racks) and of 8 (whole servers).
    """

    supernode: str = "gb200-nvl72"
    traditional: str = "hgx-b200-ib-xdr"  # made same-chip by same_chip_baseline
    older: str = "hgx-h100-ib-ndr"  # only to show what a chip change alone does
    seed_supernode: str = "seed-40card"
    models: tuple = ("megatron-18.4b", "megatron-145.6b", "megatron-1t")
    gpus: tuple = (576, 2304, 9216)
    hundred_b_models: tuple = ("megatron-76.1b", "megatron-145.6b")
    hundred_b_gpus: tuple = (576, 1152, 2304)
    ten_k_gpus: int = 10080  # 140 NVL72 racks = 1,260 servers: the seeds' "10,000 cards"
    vision_gpus: tuple = (4608, 9216)
    trillion_model: str = "megatron-1t"
    trillion_gpus: tuple = (1296, 2592, 4104)  # 18, 36, 57 racks: 1,296 is the nearest rack count to 1,280
    nic_gbps: tuple = (100, 200, 400)
    traditional_nic_gbps: tuple = (100, 400)  # the fabric axis of the claims about "traditional" clusters
    nic_models: tuple = ("megatron-18.4b", "megatron-145.6b", "megatron-1t")
    nic_gpus: tuple = (576, 2304)
    nic_tolerance: float = 0.10  # a NIC rate is "enough" within 10 % of the fastest one's step
    scoring_models: tuple = ("megatron-1.7b", "megatron-7.5b", "megatron-39.1b")
    iops_models: tuple = ("megatron-1.7b", "megatron-18.4b", "megatron-145.6b", "megatron-1t")
    scoring_tokens: int = 128
    seq_len: int = 2048
    seqs_per_gpu: int = 1
    dtype: str = "bf16"
    storage: str = "ddn-ai400x2"
    tcp_interconnect: str | None = None  # kernel-TCP transport for the RDMA claims; None: look in the catalog
    reliability_gpus: int = 1280
    # (system, model, GPUs) of the tiering experiment: counts too small for the model's state in HBM
    tiering_points: tuple = (
        ("hgx-h100-ib-ndr", "megatron-76.1b", 8),
        ("hgx-h100-ib-ndr", "megatron-145.6b", 8),
        ("hgx-h100-ib-ndr", "megatron-145.6b", 16),
        ("gb200-nvl72", "megatron-1t", 72),
        ("gb200-nvl72", "megatron-1t", 144),
    )
    # the shared-cluster claims (hnplan.cluster): one job stream per offered load, on each design
    cluster_traditional: str = "hgx-b200-ib-xdr"  # a catalog system (the simulation needs its failure unit)
    cluster_gpus: int | None = None  # GPUs per design; None: hnplan.cluster.topology.CLUSTER_GPUS
    cluster_jobs: int = 10000  # assumption: a run long enough that the start-up transient is a small share
    cluster_loads: tuple = (0.5, 0.7, 0.9, 1.0)  # offered loads spanning the claims' 40-92 % utilisation range
    cluster_mix: str = "default"
    cluster_seed: int = 0
    # independent job streams per point (hnplan.cluster.replicate): a verdict on a 95 % interval, not one seed
    cluster_replications: int = 5
    # processes running the cluster runs side by side; None: the cores (hnplan.cluster.claims.audit_workers)
    cluster_workers: int | None = None


def _experiments():
    from hnplan.planning import claims_other as o
    from hnplan.planning import claims_training as t

    return (*t.EXPERIMENTS, *o.EXPERIMENTS)


def claim_ids() -> list[str]:
    """Ids of every audited claim, in audit order."""
    return [cid for cid, *_ in _experiments()]


def audit(
    setup: AuditSetup | None = None,
    catalog: Catalog | None = None,
    only: list[str] | None = None,
    progress=None,
) -> list[Claim]:
    """Run every experiment (or those whose claim id is in ``only``); an experiment that fails with an
    hnplan error is returned as ``not testable`` with the error as its condition. ``progress``: called as
    ``progress(done, total)`` while the shared-cluster experiments simulate runs no cache holds
    (:data:`hnplan.cluster.claims.RUN_PROGRESS`; minutes on two cores, nothing when every run is cached)."""
    cat = catalog or load_catalog()
    s = setup or AuditSetup()
    if progress is not None:  # handed to the cluster runs by cluster_utilisation, only if a cluster claim runs
        token = _CLUSTER_PROGRESS.set(progress)
        try:
            return audit(s, cat, only)
        finally:
            _CLUSTER_PROGRESS.reset(token)
    out = []
    for cid, seeds, text, fn in _experiments():
        if only and cid not in only:
            continue
        try:
            out.append(fn(cat, s))
        except HnplanError as exc:
            out.append(
                Claim(cid, seed_files(*seeds), text, doc(fn), "not testable", f"the experiment could not run: {exc}")
            )
    return out


def claims_table(claims: list[Claim]) -> pd.DataFrame:
    """The audit as a table: ``id, seed_file, claim, experiment, verdict, condition``."""
    import pandas as pd

    return pd.DataFrame([{k: getattr(c, k) for k in JSON_KEYS[:6]} for c in claims])


def audit_headline(claims: list[Claim]) -> str:
    """The short "What this means" that opens the report, generated from the verdicts: how many claims
    got each verdict and, where the audit ran both baselines, the speed-up the same chip gives against
    the one an older chip gives (what the fabric buys apart from what the chip buys)."""
    counts = Counter(c.verdict for c in claims)
    lines = [f"Of {len(claims)} claims: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v, 0)) + "."]
    for c in claims:
        if "same_chip_speedup" in c.numbers and "chip_and_fabric_speedup" in c.numbers:
            lines.append(
                f"\nAt equal GPU counts the supernode's median speed-up is {c.numbers['same_chip_speedup']:.2f}x "
                f"over servers with the same chip and {c.numbers['chip_and_fabric_speedup']:.2f}x over "
                f"servers with the older chip (`{c.id}`): the difference between the two is the chip's, "
                "not the fabric's."
            )
    return "\n".join(lines)


def audit_conditions(claims: list[Claim]) -> str:
    """Each claim's verdict with its condition (where it flips, or what is missing), grouped by verdict."""
    lines: list[str] = []
    for v in VERDICTS:
        group = [c for c in claims if c.verdict == v]
        if group:
            lines.append(f"\n**{v.capitalize()}** ({len(group)}):")
            lines += [f"- `{c.id}` ({c.claim}): {c.condition}" for c in group]
    return "\n".join(lines).lstrip("\n")


def audit_summary(claims: list[Claim]) -> str:
    """The whole "What this means" text, generated from the verdicts: :func:`audit_headline`, then
    :func:`audit_conditions`."""
    return audit_headline(claims) + "\n\n" + audit_conditions(claims)


#: the caller's ``progress(done, total)`` for the shared-cluster runs (:func:`audit`), handed to
#: :data:`hnplan.cluster.claims.RUN_PROGRESS` by :func:`cluster_utilisation`: the simulation (and pandas) is
#: imported only when a cluster claim runs, not for ``claims --only storage-1m-iops``
_CLUSTER_PROGRESS: ContextVar = ContextVar("hnplan_claims_cluster_progress", default=None)


def cluster_available() -> bool:
    """Whether hnplan has its shared-cluster simulation (``hnplan.cluster``)."""
    import importlib.util

    return importlib.util.find_spec("hnplan.cluster") is not None


def cluster_utilisation(catalog: Catalog, setup: AuditSetup, claim_id: str) -> pd.DataFrame | None:
    """The grid behind a utilisation or fragmentation claim from the shared-cluster simulation
    (:func:`hnplan.cluster.claims.audit_points`), or None without ``hnplan.cluster``.

    Returns
    -------
    DataFrame or None
        One row per grid point: ``offered_load`` [fraction of the GPUs], ``design`` (the design,
        with its placement or partitioning), ``utilisation`` (useful GPU-time over installed
        GPU-time, after the warm-up), ``offered_load_window``, ``fragmentation``,
        ``concurrent_jobs`` and ``holds``. ``attrs`` carries ``metric``, ``op``, ``threshold``,
        ``condition`` (the job mix, policy, cluster size and loads it holds or fails under) and ``gpus``
        (the cluster size simulated per design [GPUs]).
    """
    if not cluster_available():
        return None
    from hnplan.cluster.claims import audit_points
    from hnplan.cluster.topology import CLUSTER_GPUS
    from hnplan.planning.prediction_cache import run_cache

    gpus = setup.cluster_gpus or CLUSTER_GPUS
    hook = _CLUSTER_PROGRESS.get()
    if hook is not None:
        from hnplan.cluster.claims import RUN_PROGRESS

        token, own = RUN_PROGRESS.set(hook), _CLUSTER_PROGRESS.set(None)
        try:
            return cluster_utilisation(catalog, setup, claim_id)
        finally:
            _CLUSTER_PROGRESS.reset(own)
            RUN_PROGRESS.reset(token)
    pts, metric, op, thr, cond = audit_points(
        claim_id,
        setup.cluster_traditional,
        setup.supernode,
        gpus=gpus,
        mix=setup.cluster_mix,
        loads=tuple(setup.cluster_loads),
        jobs=setup.cluster_jobs,
        seed=setup.cluster_seed,
        replications=setup.cluster_replications,
        catalog=catalog,
        workers=setup.cluster_workers,
        cache=run_cache(catalog),  # the runs kept on disk (HNPLAN_NO_CACHE=1: none)
    )
    pts.attrs.update(metric=metric, op=op, threshold=thr, condition=cond, gpus=gpus)
    return pts
