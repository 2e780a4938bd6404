"""The reading of an inference capacity plan in words (:func:`capacity_verdict`), apart from the planner
(:mod:`hnplan.planning.inference.capacity`) that computes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hnplan.formatting import counted

if TYPE_CHECKING:
    import pandas as pd


def capacity_verdict(rates: pd.DataFrame, frontiers: pd.DataFrame | None = None) -> str:
    """A short Markdown reading of :func:`gpus_vs_rate` (and :func:`design_frontiers`): which design
    needs fewer GPUs and costs less per million tokens at the lowest and highest rate, and each
    design's peak output tokens/s per GPU."""
    lines = []
    ok = rates[rates["status"] == "ok"] if "status" in rates else rates
    for q in sorted({ok["qps"].min(), ok["qps"].max()}) if len(ok) else []:
        at = ok[ok["qps"] == q].sort_values(["gpus", "usd_per_million_tokens"])
        if at.empty:
            continue
        parts = ", ".join(
            f"**{r.system}** {counted(int(r.gpus), 'GPU')} (TP{r.tp} EP{r.ep}, batch {r.batch}, "
            f"\\${r.usd_per_million_tokens:.3f}/M tokens)"
            for r in at.itertuples()
        )
        cheapest = at.sort_values("usd_per_million_tokens").iloc[0]["system"]
        lines.append(f"- At {q:g} requests/s: {parts}; cheapest per token: **{cheapest}**.")
    failed = rates[rates["status"] != "ok"] if "status" in rates else rates.iloc[0:0]
    for r in failed.itertuples():
        lines.append(f"- {r.system} at {r.qps:g} requests/s: {r.status}")
    if frontiers is not None and "tokens_per_s_per_gpu" in frontiers:
        fo = frontiers[frontiers["status"] == "ok"]
        for system, g in fo.groupby("system", sort=False):
            best = g.loc[g["tokens_per_s_per_gpu"].idxmax()]
            lines.append(
                f"- {system} ({best['layout']}): at most {best['tokens_per_s_per_gpu']:,.0f} output tokens/s "
                f"per GPU, at batch {int(best['batch'])} and {best['tokens_per_s_per_user']:.1f} tokens/s per user."
            )
    return "\n".join(lines) if lines else "No design met the SLOs at any rate."
