"""The points of a design-space sweep (:mod:`hnplan.planning.sweep`): the spec's grid crossed with its
samples, each with its key in the dataset, and grouped by the plan inputs they share.

Points come from a :class:`hnplan.catalog.sweeps.SweepSpec`: the Cartesian product of its list axes,
crossed with ``samples`` draws of its distribution axes (independent uniform numbers from
``numpy.random.default_rng(seed)`` for Monte Carlo, or ``scipy.stats.qmc.LatinHypercube(seed=seed)``,
mapped through each distribution's inverse CDF). Every grid combination sees the same draws (common
random numbers), so two designs are compared under the same prices and failure rates.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.sweeps import ID_INPUTS, SweepSpec, load_sweep_spec
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InputError
from hnplan.planning.sweep_io import PLAN_KEY


# -- points ------------------------------------------------------------------------------------
def _frozen(u: np.ndarray, axis, catalog: Catalog, name: str) -> np.ndarray:
    """Values of a distribution axis at uniform numbers ``u`` in [0, 1) (inverse CDF)."""
    from scipy import stats

    if axis.distribution == "catalog":
        r = catalog.uncertainties[name]
        kind, low, high, mode = r.distribution, r.low, r.high, r.mode
    else:
        kind, low, high, mode = axis.distribution, axis.low, axis.high, axis.mode
    assert low is not None and high is not None  # the spec's validator checks the bounds
    if kind == "triangular":
        assert mode is not None
        dist = stats.triang(c=(mode - low) / (high - low), loc=low, scale=high - low)
    elif kind == "loguniform":
        dist = stats.loguniform(low, high)
    else:
        dist = stats.uniform(loc=low, scale=high - low)
    return dist.ppf(u)


def _uniforms(spec: SweepSpec, dims: int) -> np.ndarray:
    """``samples x dims`` numbers in [0, 1): independent (Monte Carlo) or a Latin hypercube."""
    if dims == 0:
        return np.zeros((spec.samples, 0))
    if spec.sampling == "latin-hypercube":
        from scipy.stats import qmc

        # random-cd: permutations within columns that lower the centred discrepancy (fewer chance
        # correlations between inputs); each column keeps one draw per 1/samples stratum
        opt = "random-cd" if dims > 1 else None
        return qmc.LatinHypercube(d=dims, seed=spec.seed, optimization=opt).random(spec.samples)
    return np.random.default_rng(spec.seed).random((spec.samples, dims))


def point_id(point: dict) -> str:
    """The key of a point in a dataset: SHA-256 (16 hex digits) of its spec-given inputs as sorted JSON (with,
    from :func:`sweep_points`, the content digest of each file an input names by path)."""
    payload = json.dumps({k: point[k] for k in sorted(point)}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def sweep_points(spec, catalog: Catalog | None = None) -> pd.DataFrame:
    """Every point of a spec: the grid of its list axes crossed with its samples.

    Returns
    -------
    pandas.DataFrame
        One row per point: ``point_id``, ``sample`` (draw index, 0 for a grid), the spec's inputs
        (``global_batch_tokens`` converted to ``global_batch_seqs``; ``stack`` and ``dtype`` defaulted).

    Raises
    ------
    InputError
        When a batch in tokens is not a multiple of the sequence length.
    """
    cat = catalog or load_catalog()
    spec = load_sweep_spec(spec, cat)
    grid = spec.grid_axes()
    names = list(grid)
    combos = (
        pd.MultiIndex.from_product([grid[n] for n in names], names=names).to_frame(index=False)
        if names
        else pd.DataFrame(index=[0])
    )
    dists = spec.distribution_axes()
    u = _uniforms(spec, len(dists))
    draws = pd.DataFrame({name: _frozen(u[:, j], axis, cat, name) for j, (name, axis) in enumerate(dists.items())})
    draws["sample"] = np.arange(spec.samples)
    pts = combos.merge(draws, how="cross")
    for k, v in spec.fixed.items():
        pts[k] = v
    pts["stack"] = pts["stack"] if "stack" in pts else DEFAULT_STACK
    pts["dtype"] = pts["dtype"] if "dtype" in pts else "bf16"
    if "global_batch_tokens" in pts:
        bad = pts["global_batch_tokens"] % pts["seq_len"] != 0
        if bad.any():
            r = pts[bad].iloc[0]
            raise InputError(
                f"sweep {spec.id}: global_batch_tokens {r['global_batch_tokens']} is not a multiple of "
                f"seq_len {r['seq_len']}"
            )
        pts["global_batch_seqs"] = (pts.pop("global_batch_tokens") // pts["seq_len"]).astype(int)
    for k in ("gpus", "seq_len", "global_batch_seqs"):
        pts[k] = pts[k].astype(int)
    pts["tokens"] = pts["tokens"].astype(float)
    given = [c for c in pts.columns if c != "sample"]
    # a system, model or stack given by path is keyed by its file's bytes too (and a system's by those of the
    # files it names by path): an edited file makes new points, which a resume evaluates. Catalog ids keep the
    # key of their values alone; their data is the catalog's hash, recorded in each row.
    files = {
        name: digests
        for name, kind in ID_INPUTS.items()
        if name in pts and (digests := {v: d for v in pts[name].unique() if (d := cat.file_digest(f"{kind}s", v))})
    }
    pts.insert(
        0,
        "point_id",
        [
            point_id({**r, **{f"{n}_file_sha256": d[r[n]] for n, d in files.items() if r[n] in d}})
            for r in pts[given].to_dict("records")
        ],
    )
    return pts


def plan_groups(points: pd.DataFrame, chunk_size: int) -> list[tuple[dict, list[pd.DataFrame]]]:
    """Points grouped by their plan inputs (:data:`PLAN_KEY`), each group cut into chunks."""
    out = []
    for key, grp in points.groupby(list(PLAN_KEY), sort=True):
        chunks = [grp.iloc[i : i + chunk_size] for i in range(0, len(grp), chunk_size)]
        out.append((dict(zip(PLAN_KEY, key, strict=True)), chunks))
    return out
