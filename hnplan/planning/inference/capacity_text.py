"""The reading of an inference capacity plan in words (:func:`capacity_verdict`), apart from the planner
(:mod:`hnplan.planning.inference.capacity`) that computes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hnplan.formatting import counted

if TYPE_CHECKING:
    import pandas as pd


def _design_part(r) -> str:
    """``**system** N GPUs (TPt EPe, batch b, $x/M tokens)``, with the GPUs bought and their price where whole
    units hold more than the GPUs used."""
    extra = ""
    b = getattr(r, "gpus_bought", None)
    if b is not None and b == b and int(b) > int(r.gpus):
        per = getattr(r, "usd_per_million_tokens_bought", None)
        extra = f"; {int(b):,} bought" + (f", \\${per:.3f}/M on them" if per is not None and per == per else "")
    return (
        f"**{r.system}** {counted(int(r.gpus), 'GPU')} (TP{r.tp} EP{r.ep}, batch {r.batch}, "
        f"\\${r.usd_per_million_tokens:.3f}/M tokens{extra})"
    )


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
        bought = at["usd_per_million_tokens_bought"] if "usd_per_million_tokens_bought" in at else None
        parts = ", ".join(_design_part(r) for r in at.itertuples())
        cheapest = at.sort_values("usd_per_million_tokens").iloc[0]["system"]
        line = f"- At {q:g} requests/s: {parts}; cheapest per token: **{cheapest}**"
        if bought is not None and bought.notna().any():
            # on the whole units bought, idle GPUs paid for: the cheaper design may be the other one
            on_bought = at.assign(_b=bought.fillna(at["usd_per_million_tokens"])).sort_values("_b").iloc[0]["system"]
            line += (
                " on the GPUs used, and on the whole units bought too"
                if on_bought == cheapest
                else f" on the GPUs used, **{on_bought}** on the whole units bought (when nothing else runs on their "
                "idle GPUs)"
            )
        lines.append(line + ".")
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
