"""Reading a sweep's dataset (:mod:`hnplan.planning.sweep`): designs, their Pareto front of
time-to-train vs TCO vs power, first-order Sobol indices of the sampled inputs, and the cheapest design
that meets a deadline with a stated probability.

A *design* is one combination of the sweep's planner inputs (system, GPU count, model, batch,
sequence, stack, dtype, tokens); its rows are the draws of the sampled procurement inputs. A *workload*
is what is to be trained (model, tokens, sequence, batch): designs are only compared within one, so a
sweep over two models has a Pareto front and a cheapest design per model (a design that trains the
smaller model is not a faster way to train the larger one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hnplan import units
from hnplan.catalog.schemas import WHATIF_INPUTS
from hnplan.errors import InputError
from hnplan.formatting import counted, format_amount
from hnplan.labels import name_and_unit

DESIGN_KEYS = ("system", "gpus", "model", "global_batch_seqs", "seq_len", "stack", "dtype", "tokens")
OBJECTIVES = ("days_to_train", "tco_usd", "facility_power_w")
#: the planner inputs that say what is trained; the others (system, GPU count, stack, dtype) say how
WORKLOAD_KEYS = ("model", "tokens", "seq_len", "global_batch_seqs")


def rows_of_spec(df: pd.DataFrame, points: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """The dataset's rows of a spec's current points, with how many rows were left out and how many
    points are not in the dataset yet.

    A dataset folder keeps every point ever written to it: a spec re-run with another seed, sample count
    or range adds its points beside the earlier ones, whose draws are no longer the spec's (and two Latin
    hypercubes side by side are not one). ``points`` is :func:`hnplan.planning.sweep.sweep_points` of the
    spec; rows are matched on ``point_id``.

    Returns
    -------
    (rows, left_out, missing)
        The matching rows, the count of other rows, and the count of the spec's points with no row.

    Raises
    ------
    InputError
        When the dataset holds none of the spec's points (nothing to read: run the sweep first).
    """
    keep = df["point_id"].isin(points["point_id"])
    rows = df[keep]
    if rows.empty:
        raise InputError(
            f"the dataset holds none of the spec's {len(points):,} points ({len(df):,} rows of other specs or "
            "earlier versions of it): run `hnplan sweep SPEC --out DIR` on it first, or let the report evaluate "
            "them (run_missing)"
        )
    return rows, int((~keep).sum()), int((~points["point_id"].isin(rows["point_id"])).sum())


def other_catalog_rows(df: pd.DataFrame, catalog=None) -> int:
    """Rows evaluated with another catalog than ``catalog``'s (default: the one loaded now), by their
    ``catalog_hash``: a resumed sweep keeps the numbers its points were first evaluated with."""
    from hnplan.catalog.loader import load_catalog

    return int((df["catalog_hash"] != (catalog or load_catalog()).content_hash()).sum())


def other_code_rows(df: pd.DataFrame) -> int:
    """Rows computed by other hnplan code than the one running now, by their ``code_fingerprint``
    (:func:`hnplan.planning.prediction_cache.source_fingerprint`); a row written before the column counts."""
    from hnplan.planning.prediction_cache import source_fingerprint

    return int((df["code_fingerprint"] != source_fingerprint()).sum())


def with_design(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with a ``design`` label: ``"<gpus> x <system>"`` plus whichever other planner inputs vary,
    and a ``workload`` label: the model id plus whichever of tokens, sequence and batch vary."""
    out = df.copy()
    varying = [k for k in DESIGN_KEYS[2:] if k in out and out[k].nunique() > 1]
    label = out["gpus"].map("{:,}".format) + " x " + out["system"].astype(str)
    for k in varying:
        label = label + f" {k}=" + out[k].astype(str)
    out["design"] = label
    work = out["model"].astype(str) if "model" in out else pd.Series("", index=out.index)
    for k in WORKLOAD_KEYS[1:]:
        if k in out and out[k].nunique() > 1:
            work = work + f" {k}=" + out[k].astype(str)
    out["workload"] = work
    return out


def _workloads(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(workload, rows)`` of a table, in order of first appearance (one group when it has no label)."""
    if "workload" not in table:
        return [("", table)]
    return [(str(w), g) for w, g in table.groupby("workload", sort=False)]


def design_summary(df: pd.DataFrame, q: float = 0.9) -> pd.DataFrame:
    """One row per design: points, failures, mean and ``q``-quantile of each objective, the plan's MFU.

    Returns
    -------
    pandas.DataFrame
        ``design, workload, system, gpus, points, failed, mfu, days_mean, days_p<q>, tco_mean_usd,
        facility_power_w`` (power is fixed by the design and the PUE draw: its mean), sorted by mean days.
    """
    d = with_design(df)
    rows = []
    pct = round(q * 100)
    for design, g in d.groupby("design", sort=False):
        ok = g[g["error"].isna()]
        rows.append(
            dict(
                design=design,
                workload=g["workload"].iloc[0],
                system=g["system"].iloc[0],
                gpus=int(g["gpus"].iloc[0]),
                points=len(g),
                failed=len(g) - len(ok),
                error=g["error"].dropna().iloc[0] if len(ok) < len(g) else None,
                mfu=ok["mfu"].mean(),
                days_mean=ok["days_to_train"].mean(),
                **{f"days_p{pct}": ok["days_to_train"].quantile(q) if len(ok) else np.nan},
                tco_mean_usd=ok["tco_usd"].mean(),
                facility_power_w=ok["facility_power_w"].mean(),
            )
        )
    return pd.DataFrame(rows).sort_values("days_mean", ignore_index=True, na_position="last")


def pareto_front(df: pd.DataFrame, objectives=OBJECTIVES) -> pd.DataFrame:
    """The rows no other row beats on every objective (all minimised): the Pareto front.

    A row is dominated when another is no worse on every objective and better on one. O(n^2) over
    the rows (rows with a NaN objective are left out), vectorised per row.

    Returns
    -------
    pandas.DataFrame
        The non-dominated rows, sorted by the first objective.
    """
    ok = df.dropna(subset=list(objectives))
    v = ok[list(objectives)].to_numpy(float)
    keep = np.ones(len(v), bool)
    for i in range(len(v)):
        no_worse = (v <= v[i]).all(axis=1)
        better = (v < v[i]).any(axis=1)
        keep[i] = not (no_worse & better).any()
    return ok[keep].sort_values(list(objectives)[0], ignore_index=True)


def design_pareto(summary: pd.DataFrame) -> pd.DataFrame:
    """The Pareto front of designs on mean time-to-train, mean TCO and facility power, within each
    workload (the fronts of a sweep over two models side by side, in the summary's order of workloads)."""
    objectives = ("days_mean", "tco_mean_usd", "facility_power_w")
    fronts = [pareto_front(g, objectives) for _, g in _workloads(summary)]
    return pd.concat(fronts, ignore_index=True) if fronts else summary.iloc[:0]


def first_order_index(x, y, bins: int | None = None) -> float:
    """First-order Sobol index ``S = Var(E[Y|X]) / Var(Y)`` of one input from given data.

    Parameters
    ----------
    x, y : array [n]
        Samples of the input and the output (Monte Carlo or Latin hypercube, inputs independent).
    bins : int, optional
        Equal-count classes of ``x``; default ``round(sqrt(n))``.

    Returns
    -------
    float
        The index in [0, 1] (0 for a constant output).

    Notes
    -----
    The given-data estimator of Plischke, Borgonovo & Smith, "Global sensitivity measures from given
    data", European Journal of Operational Research 226(3):536-550, 2013 (Sec. 3): sort by ``x``,
    cut into ``M`` classes, and take the between-class share of the variance. The finite-class bias
    is removed as in the ANOVA effect size epsilon^2: ``S = (SS_between - (M - 1) SS_within /
    (n - M)) / SS_total``, clipped to [0, 1]. No Saltelli design is needed, so the sweep's own
    samples serve.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x1, x2 = rng.random(20000), rng.random(20000)
    >>> round(first_order_index(x1, 3 * x1 + x2), 2)  # exact: 9 / 10
    0.9
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(y)
    if n < 4 or len(x) != n:
        raise InputError(f"need at least 4 paired samples of input and output; got {len(x)} and {n}")
    ss_total = ((y - y.mean()) ** 2).sum()
    if ss_total <= 0:
        return 0.0
    m = _classes(n, bins)
    order = np.argsort(x, kind="stable")
    classes = np.empty(n, int)
    classes[order] = np.arange(n) * m // n
    counts = np.bincount(classes, minlength=m)
    means = np.bincount(classes, weights=y, minlength=m) / counts
    ss_between = (counts * (means - y.mean()) ** 2).sum()
    ss_within = ss_total - ss_between
    s = (ss_between - (m - 1) * ss_within / (n - m)) / ss_total
    return float(np.clip(s, 0.0, 1.0))


#: share of the indices of an input the output does not depend on that fall below the noise floor
NOISE_LEVEL = 0.95


def _classes(n: int, bins: int | None) -> int:
    """Classes ``M`` :func:`first_order_index` cuts ``n`` samples into."""
    return max(2, min(n // 2, bins or int(round(np.sqrt(n)))))


def first_order_noise_floor(n: int, bins: int | None = None, level: float = NOISE_LEVEL) -> float:
    """The noise floor of :func:`first_order_index`: the value the index of an input the output does not
    depend on stays below with probability ``level``, from ``n`` samples.

    It is not a confidence interval of an index: it says how large an index chance alone makes, so an
    index at or below it is not distinguishable from zero.

    Parameters
    ----------
    n : int
        Samples the index is estimated from (at least 4).
    bins : int, optional
        As in :func:`first_order_index`.
    level : float
        Probability in (0, 1); default :data:`NOISE_LEVEL`.

    Returns
    -------
    float
        The floor in [0, 1).

    Raises
    ------
    InputError
        For fewer than 4 samples or a ``level`` outside (0, 1).

    Notes
    -----
    For an output independent of the input, the input's ``M`` classes are a partition of the samples
    that ignores the output, so (output normally distributed) ``F = (SS_between / (M - 1)) /
    (SS_within / (n - M))`` follows Fisher's F distribution with ``(M - 1, n - M)`` degrees of freedom
    (one-way analysis of variance; Montgomery, *Design and Analysis of Experiments*, 8th ed., Sec. 3.3).
    The bias-corrected index is ``S = c (F - 1) / (c F + 1)`` with ``c = (M - 1) / (n - M)``, increasing
    in ``F``, so its ``level`` quantile is that of ``F``, taken from ``scipy.stats.f``. At 6 samples
    (``M`` = 2) the 95 % floor is 0.57; at 50 (``M`` = 7) 0.14. With several inputs, one irrelevant index
    in twenty still exceeds the 95 % floor by chance.
    """
    from scipy import stats

    if n < 4:
        raise InputError(f"need at least 4 samples for a noise floor; got {n}")
    if not 0 < level < 1:
        raise InputError(f"level must be in (0, 1); got {level}")
    m = _classes(n, bins)
    c = (m - 1) / (n - m)
    f = float(stats.f.ppf(level, m - 1, n - m))
    return float(max(0.0, c * (f - 1) / (c * f + 1)))


def sobol_indices(df: pd.DataFrame, outputs=("days_to_train", "tco_usd")) -> pd.DataFrame:
    """First-order Sobol indices of every sampled procurement input, per design and output.

    Only the inputs that vary within a design (the sweep's distribution axes) are indexed.

    Returns
    -------
    pandas.DataFrame
        ``design, output, input, S1, noise_floor`` (:func:`first_order_noise_floor`: the index an input
        that does not matter stays below in 95 % of samples of this size), ``above_noise`` (``S1`` above
        the floor; otherwise not distinguishable from zero), ``draws`` (the design's successful draws the
        index is estimated from), sorted by design, output and descending ``S1``; empty when no design has
        four or more successful draws.

    Notes
    -----
    A sweep gives every design the same draws (common random numbers), so a chance correlation
    between two sampled inputs shows in every design alike: averaging over designs does not remove
    it; more samples do.
    """
    d = with_design(df[df["error"].isna()])
    rows = []
    for design, g in d.groupby("design", sort=False):
        if len(g) < 4:
            continue
        sampled = [k for k in WHATIF_INPUTS if k in g and g[k].nunique() > 1]
        floor = first_order_noise_floor(len(g))
        for out in outputs:
            for k in sampled:
                s1 = first_order_index(g[k], g[out])
                rows.append(
                    dict(
                        design=design,
                        output=out,
                        input=k,
                        S1=s1,
                        noise_floor=floor,
                        above_noise=s1 > floor,
                        draws=len(g),
                    )
                )
    res = pd.DataFrame(rows, columns=["design", "output", "input", "S1", "noise_floor", "above_noise", "draws"])
    return res.sort_values(["design", "output", "S1"], ascending=[True, True, False], ignore_index=True)


def sobol_table(sobol: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """The first-order indices of :func:`sobol_indices` averaged over designs, one row per input and one
    column per output, as text: an index at or below the noise floor (the largest of the designs', as
    common random numbers make the designs' noise alike) reads ``0.03 (noise)``.

    Parameters
    ----------
    labels : dict, optional
        Column title per output; default the output's name with ``S1 [-]``.
    """
    if sobol.empty:
        return pd.DataFrame()
    floor = sobol["noise_floor"].max()
    mean = sobol.pivot_table(index="input", columns="output", values="S1", aggfunc="mean")
    table = mean.map(lambda v: f"{v:.2f}" if v > floor else f"{v:.2f} (noise)")
    labels = labels or {}
    return table.rename(columns={c: labels.get(c, f"{c}: S1 [-]") for c in table.columns}).rename_axis(
        index="input", columns=None
    )


def deadline_table(df: pd.DataFrame, deadline_days: float, cost: str = "tco_usd") -> pd.DataFrame:
    """Per design: the probability of training within ``deadline_days`` over the draws, and its mean cost.

    Returns
    -------
    pandas.DataFrame
        ``design, workload, system, gpus, p_meet, cost_mean_usd, days_mean, failed`` sorted by cost (a
        design whose search failed has ``p_meet`` 0).
    """
    if deadline_days <= 0:
        raise InputError(f"deadline must be > 0 days; got {deadline_days}")
    d = with_design(df)
    rows = []
    for design, g in d.groupby("design", sort=False):
        met = (g["days_to_train"] <= deadline_days) & g["error"].isna()
        rows.append(
            dict(
                design=design,
                workload=g["workload"].iloc[0],
                system=g["system"].iloc[0],
                gpus=int(g["gpus"].iloc[0]),
                p_meet=float(met.mean()),
                cost_mean_usd=g[cost].mean(),
                days_mean=g["days_to_train"].mean(),
                failed=int(g["error"].notna().sum()),
            )
        )
    return pd.DataFrame(rows).sort_values("cost_mean_usd", ignore_index=True, na_position="last")


def cheapest_meeting(table: pd.DataFrame, probability: float, workload: str | None = None) -> pd.Series | None:
    """The cheapest design of a :func:`deadline_table` that meets the deadline with at least
    ``probability`` (None when none does), among the designs of ``workload``.

    Raises
    ------
    InputError
        For a probability outside (0, 1], or no ``workload`` named while the table holds several (the
        cheapest way to train one model is not found among designs that train another).
    """
    if not 0 < probability <= 1:
        raise InputError(f"probability must be in (0, 1]; got {probability}")
    groups = dict(_workloads(table))
    if workload is None and len(groups) > 1:
        raise InputError(f"the table holds {len(groups)} workloads ({', '.join(groups)}): name one")
    if workload is not None:
        if workload not in groups:
            raise InputError(f"unknown workload {workload!r}; the table holds: {', '.join(groups)}")
        table = groups[workload]
    ok = table[table["p_meet"] >= probability].sort_values("cost_mean_usd")
    return None if ok.empty else ok.iloc[0]


def summary_text(
    summary: pd.DataFrame,
    front: pd.DataFrame,
    sobol: pd.DataFrame,
    table: pd.DataFrame,
    deadline_days: float,
    probability: float,
) -> str:
    """A short Markdown reading of the design space, every figure from the tables passed in; the Pareto
    front, the fastest design and the cheapest one meeting the deadline are said per workload when the
    sweep holds several."""
    lines = []
    works = _workloads(summary)
    fronts, tables = dict(_workloads(front)), dict(_workloads(table))
    for work, designs in works:
        lead = f"- For **{work}**: " if len(works) > 1 else "- "
        wfront = fronts.get(work, front.iloc[:0])
        if len(wfront):
            lines.append(
                f"{lead}{len(wfront)} of {len(designs)} designs are on the Pareto front of mean time-to-train, "
                f"mean TCO and facility power: {', '.join(wfront['design'])}; every other design is dominated by "
                "one of them (no better on any of the three, worse on at least one)."
            )
        fastest = designs.dropna(subset=["days_mean"])
        if len(fastest):
            f = fastest.iloc[0]
            lines.append(
                f"{lead}{'the' if len(works) > 1 else 'The'} fastest design is **{f['design']}**: "
                f"{format_amount(f['days_mean'], 1)} days on average "
                f"(MFU {f['mfu']:.1%}), mean TCO ${f['tco_mean_usd'] / units.MEGA:,.1f}M, "
                f"{f['facility_power_w'] / units.MEGA:.2f} MW."
            )
    for out, what in (("days_to_train", "time-to-train"), ("tco_usd", "TCO")):
        s = sobol[sobol["output"] == out]
        if len(s):
            top = s.groupby("input")["S1"].mean().sort_values(ascending=False)
            top.index = [name_and_unit(i)[0] for i in top.index]  # the inputs in a reader's words
            floor = s["noise_floor"].max()
            draws = int(s["draws"].min())
            noise = (
                f"at {draws} draws per design the noise floor is {floor:.2f} (an input that does not matter "
                f"scores below it {NOISE_LEVEL:.0%} of the time): indices at or below it are not "
                "distinguishable from zero."
            )
            if top.iloc[0] <= floor:
                lines.append(
                    f"- No sampled input is distinguishable from zero for {what} (largest first-order Sobol "
                    f"index {top.iloc[0]:.2f}, {top.index[0]}, averaged over designs); " + noise
                )
                continue
            rest = top.iloc[1:][top.iloc[1:] > floor]
            lines.append(
                f"- Over the sampled inputs, {what} is driven most by **{top.index[0]}** (first-order "
                f"Sobol index {top.iloc[0]:.2f}, averaged over designs)"
                + (", then " + ", ".join(f"{k} ({v:.2f})" for k, v in rest.items()) if len(rest) else "")
                + "; "
                + noise
            )
    for work, _ in works:
        rows = tables.get(work, table.iloc[:0])
        lead = f"- For **{work}**: the" if len(works) > 1 else "- The"
        best = cheapest_meeting(rows, probability)
        if best is None:
            hi = rows.sort_values("p_meet", ascending=False).iloc[0] if len(rows) else None
            lines.append(
                f"- **No design** trains {work + ' ' if len(works) > 1 else ''}within {counted(deadline_days, 'day', spec='g')} "
                f"with probability {probability:.0%}"
                + (f"; the likeliest is {hi['design']} at {hi['p_meet']:.0%}." if hi is not None else ".")
            )
        else:
            lines.append(
                f"{lead} cheapest design that trains within {counted(deadline_days, 'day', spec='g')} with probability at least "
                f"{probability:.0%} is **{best['design']}** (it meets the deadline in {best['p_meet']:.0%} of "
                f"the draws; mean TCO ${best['cost_mean_usd'] / units.MEGA:,.1f}M)."
            )
    failed = summary[summary["failed"] > 0]
    for _, r in failed.iterrows():
        lines.append(f"- {r['design']}: {r['failed']} of {r['points']} points failed ({r['error']}).")
    return "\n".join(lines)
