"""The verdict of a design comparison in words: the fastest design, the cheapest to buy and per run, and what
the supernode fabric buys apart from the newer chip (split out of :mod:`hnplan.planning.compare`, which
re-exports it)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hnplan import units
from hnplan.formatting import counted, format_amount, styled
from hnplan.planning.records import as_records, first_max, first_min, is_na, n_unique

if TYPE_CHECKING:
    import pandas as pd

# two accelerators are one generation when their dense bf16 peaks differ by less than this factor (GB200's
# GPU and B200: 2,500 vs 2,250 TFLOP/s, datasheets in data/accelerators; H100: 989)
SAME_GENERATION_PEAK_RATIO = 1.25
# designs whose days to train differ by less than this factor train in the same time as the verdict prints it
# (the ratio it gives to two decimals would read 1.00x)
TIE_RATIO = 1.005


def _days_pair(a: float, b: float) -> tuple[str, str]:
    """Two day counts beside a ratio of them, with the decimals that tell them apart (up to four): a verdict of 1.06x
    read "(0.1 against 0.1 days)".

    >>> _days_pair(64.3, 71.1), _days_pair(0.0953, 0.101)
    (('64.3', '71.1'), ('0.095', '0.101'))
    """
    for decimals in range(1, 5):
        x, y = format_amount(a, decimals), format_amount(b, decimals)
        if x != y:
            return x, y
    return x, y


def _name(row) -> str:
    return f"**{row['system']}**"


def _names(rows: list[dict], best: dict, key: str) -> tuple[str, bool]:
    """The designs whose ``key`` is within :data:`TIE_RATIO` of ``best``'s, named together (``**a** and **b**``),
    and whether more than one is: a copy of a catalog system priced as it (``price_item``) costs as much."""
    tied = [r for r in rows if r[key] <= best[key] * TIE_RATIO]
    if len(tied) < 2:
        return _name(best), False
    return ", ".join(_name(r) for r in tied[:-1]) + f" and {_name(tied[-1])}", True


def _per_gpu(fast, slow) -> tuple[float, str]:
    """How many times as fast ``fast`` trains as ``slow`` per GPU, and the words that say so where the two train
    on different GPU counts (whole racks and servers bought: 1,024 of 1,152 GPUs of 72-GPU racks against 1,152
    on 8-GPU servers); ``(days ratio, "")`` where the counts agree or the table has none.

    Per GPU the speed is tokens/s over GPUs, so the ratio is ``(days_slow x gpus_slow) / (days_fast x gpus_fast)``
    (the job's tokens cancel). Divided by the ratio of the GPUs' dense peaks it is the ratio of MFUs.

    >>> _per_gpu({"days": 20.0, "gpus": 1024}, {"days": 45.0, "gpus": 1152})
    (2.53125, ', on 1,024 GPUs against 1,152: 2.53x the speed per GPU')
    """
    speed = slow["days"] / fast["days"]
    if "gpus" not in fast or "gpus" not in slow or fast["gpus"] == slow["gpus"]:
        return speed, ""
    per_gpu = speed * slow["gpus"] / fast["gpus"]
    return per_gpu, f", on {fast['gpus']:,} GPUs against {slow['gpus']:,}: {per_gpu:.2f}x the speed per GPU"


def _rest_split(sn: dict, sv: dict) -> str:
    """What the factor left to the fabric and the rest of the rack holds, where the rows say: the MFU each design's
    best plan reaches (its communication, its layout) and the goodput (failures and restarts in the larger failure
    domain, checkpoints), ``" (1.03x in MFU, the plans each design finds; 0.97x in goodput)"``; empty without them.

    >>> _rest_split({"mfu": 0.40, "goodput": 0.90}, {"mfu": 0.38, "goodput": 0.94})
    ' (1.05x in MFU, the plans each design finds, and 0.96x in goodput, failures and checkpoints)'
    """
    if not all(k in r and not is_na(r[k]) and r[k] for r in (sn, sv) for k in ("mfu", "goodput")):
        return ""
    return (
        f" ({sn['mfu'] / sv['mfu']:.2f}x in MFU, the plans each design finds, and {sn['goodput'] / sv['goodput']:.2f}x "
        "in goodput, failures and checkpoints)"
    )


def ok_rows(rows: list[dict]) -> list[dict]:
    """The rows whose ``status`` starts with ``ok`` (all of them in a table without ``status``)."""
    return [r for r in rows if "status" not in r or (isinstance(r["status"], str) and r["status"].startswith("ok"))]


def fabric_and_chip(table: pd.DataFrame | list[dict]) -> str:
    """What the supernode fabric buys and what the newer chip buys, told apart from the numbers.

    The fabric: a supernode against a server cluster whose GPU is of the same generation (dense bf16 peaks
    within :data:`SAME_GENERATION_PEAK_RATIO`; of several, the nearest in peak and HBM capacity), e.g. GB200
    NVL72 against HGX B200 and GB300 NVL72 against DGX B300; the part of the speed-up
    the supernode's own GPU peak explains is said. The chip: two server clusters with different GPUs, e.g.
    HGX B200 against HGX H100, same kind of fabric. Empty when the table has no such pair. ``table``: the frame
    of :func:`compare_training_designs` or its rows (:func:`compare_design_rows`), read alike.
    """
    rows = as_records(table)
    columns = set(rows[0]) if rows else set()
    ok = ok_rows(rows)
    if not ok or "peak_tflops" not in columns or "kind" not in columns:
        return ""
    parts = []
    servers = [r for r in ok if r["kind"] != "supernode"]
    for sn in (r for r in ok if r["kind"] == "supernode"):
        peers = [
            r
            for r in servers
            if 1 / SAME_GENERATION_PEAK_RATIO <= r["peak_tflops"] / sn["peak_tflops"] <= SAME_GENERATION_PEAK_RATIO
        ]
        if not peers:
            continue
        # the nearest chip: peak, then (where given) HBM capacity, which sets the plans that fit (GB300 against
        # B300, 288 and 270 GB, rather than B200, 180 GB, at the same 2,250 TFLOP/s bf16)
        distance = [
            {
                "row": r,
                "d": abs(math.log(r["peak_tflops"] / sn["peak_tflops"]))
                + (abs(math.log(r["hbm_gb"] / sn["hbm_gb"])) if "hbm_gb" in columns else 0.0),
            }
            for r in peers
        ]
        sv = first_min(distance, "d")["row"]
        speed = sv["days"] / sn["days"]
        chip = sn["peak_tflops"] / sv["peak_tflops"]
        # like with like: where the designs train on different GPU counts, the fabric's part is per GPU
        per_gpu, counts = _per_gpu(sn, sv)
        peers_are = "GPUs of the same generation" if abs(chip - 1) <= 0.02 else "the nearest GPUs"
        a_days, b_days = _days_pair(sn["days"], sv["days"])
        text = (
            f"**What the supernode fabric buys**: {_name(sn)} trains {speed:.2f}x as fast as {_name(sv)}, "
            f"{peers_are} on 8-GPU servers ({a_days} against {b_days} days{counts})"
        )
        if abs(chip - 1) > 0.02:
            text += (
                f"; its GPU peaks {chip:.2f}x as high ({sn['peak_tflops']:,.0f} against "
                f"{sv['peak_tflops']:,.0f} TFLOP/s), so {'per GPU ' if counts else ''}the fabric and the rest of "
                f"the rack account for about {per_gpu / chip:.2f}x{_rest_split(sn, sv)}"
            )
        elif counts:
            text += (
                f"; per GPU the fabric and the rest of the rack account for about {per_gpu:.2f}x{_rest_split(sn, sv)}"
            )
        if "run_musd" in columns:
            text += (
                f". The run costs {units.format_usd(sn['run_musd'] * units.MEGA)} on {sn['system']} against "
                f"{units.format_usd(sv['run_musd'] * units.MEGA)} on {sv['system']}"
            )
        parts.append(text + ".")
    if len(servers) > 1:
        new, old = first_max(servers, "peak_tflops"), first_min(servers, "peak_tflops")
        if new["peak_tflops"] / old["peak_tflops"] >= SAME_GENERATION_PEAK_RATIO:
            text = (
                f"**What the newer chip buys**: on the same kind of fabric (8-GPU servers), {_name(new)} trains "
                f"{old['days'] / new['days']:.2f}x as fast as {_name(old)} ({_days_pair(new['days'], old['days'])[0]} "
                f"against {_days_pair(new['days'], old['days'])[1]} days{_per_gpu(new, old)[1]}) with a {new['peak_tflops'] / old['peak_tflops']:.2f}x "
                "dense peak"
            )
            if "run_musd" in columns:
                text += (
                    f"; the run costs {units.format_usd(new['run_musd'] * units.MEGA)} against "
                    f"{units.format_usd(old['run_musd'] * units.MEGA)}"
                )
            parts.append(text + ".")
    return "\n\n".join(parts)


def verdict(table: pd.DataFrame | list[dict], style: str = "markdown", fixed: dict | None = None) -> str:
    """A paragraph naming the fastest design, the cheapest to buy and per training run, and (where the table
    allows) what the supernode fabric buys apart from what the newer chip buys (:func:`fabric_and_chip`).
    ``table``: the frame of :func:`compare_training_designs` or its rows (:func:`compare_design_rows`), read
    alike. ``style``: ``markdown`` (designs in bold, for notebooks and the console) or ``plain`` (a JSON field;
    :func:`hnplan.formatting.styled`). ``fixed``: the knobs pinned on every design (the comparison's ``fixed``),
    said once at the start (:func:`pins_text`), so that a reader knows the comparison is constrained.

    Raises
    ------
    ValueError
        For a style not in :data:`hnplan.formatting.TEXT_STYLES`.
    """
    text = _verdict(table)
    if pinned := pins_text(fixed):  # said first: every figure after it is of the constrained plans
        text = f"{pinned[0].upper()}{pinned[1:]} on every design, the other knobs searched. {text}"
    return styled(text, style)


#: how the verdict names each pinned knob (``hnplan train``'s flags), in the order it names them
_PIN_NAMES = {
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "cp": "CP",
    "ep": "EP",
    "etp": "ETP",
    "microbatch_size": "micro-batch size",
    "virtual_stages": "virtual stages",
    "recompute": "recompute",
    "zero_stage": "ZeRO",
}


def pins_text(fixed: dict | None) -> str:
    """The knobs pinned on every design in words (``plans pinned to TP 1, EP 8, recompute none``), in the order of
    ``hnplan train``'s flags; ``""`` when none are.

    >>> pins_text({"recompute": "none", "ep": 8, "tp": 1, "zero_stage": 1})
    'plans pinned to TP 1, EP 8, recompute none, ZeRO 1'
    >>> pins_text({}), pins_text(None)
    ('', '')
    """
    given = {k: v for k, v in (fixed or {}).items() if v is not None}
    if not given:
        return ""
    order = [k for k in _PIN_NAMES if k in given] + [k for k in given if k not in _PIN_NAMES]
    return "plans pinned to " + ", ".join(f"{_PIN_NAMES.get(k, k)} {given[k]}" for k in order)


def _verdict(table: pd.DataFrame | list[dict]) -> str:
    """:func:`verdict` in Markdown."""
    rows = as_records(table)
    columns = set(rows[0]) if rows else set()
    ok = ok_rows(rows)
    if not ok:
        return "No design has a feasible plan for this job."
    if len(ok) == 1:
        return _only_design(ok[0], len(rows))
    fast = first_min(ok, "days")
    priced = [r for r in ok if not is_na(r["capex_musd"])]
    on = f" on {fast['gpus']:,} GPUs" if "gpus" in columns and n_unique(ok, "gpus") > 1 else ""
    # designs within TIE_RATIO of the fastest (a copy of a catalog system with its own price) are named
    # together: the first of equal days was named fastest and, with every design tied, slowest too
    names, tie = _names(ok, fast, "days")
    text = f"{names} train{'' if tie else 's'} fastest ({format_amount(fast['days'], 1)} days at {fast['mfu']:.0%} MFU{on})"
    if not priced:
        text += "; no design has a price, so every cost is n/a."
    else:
        cheap = first_min(priced, "capex_musd")
        # whole units bought: say for how many GPUs where the designs buy different counts
        bought = f" for {int(cheap['gpus_bought']):,} GPUs" if n_unique(priced, "gpus_bought") > 1 else ""
        names, tie = _names(priced, cheap, "capex_musd")
        text += (
            f"; {names} cost{'' if tie else 's'} least to buy "
            f"({units.format_usd(cheap['capex_musd'] * units.MEGA)} capex{bought})."
        )
    if len(priced) < len(ok):
        text += (
            " "
            + "; ".join(
                f"cost n/a for {r['system']}: it has no price (give its file `unit_price_usd` or `price_item`)"
                for r in ok
                if is_na(r["capex_musd"])
            )
            + "."
        )
    if "run_musd" in columns and priced:
        run = first_min(priced, "run_musd")
        names, tie = _names(priced, run, "run_musd")
        basis = ""
        if "usd_per_gpu_hour" in columns and not is_na(run.get("usd_per_gpu_hour", float("nan"))):
            rates = ", ".join(f"{units.format_usd(r['usd_per_gpu_hour'])} on {r['system']}" for r in priced)
            basis = (
                f" (its TCO over {run['tco_years']:g} years with {run['tco_utilisation']:.0%} of the hours used: "
                f"{rates} per GPU-hour; an idle share raises each)"
            )
        text += (
            f" Per training run, at each design's TCO per GPU-hour{basis}, {names} cost{'' if tie else 's'} least "
            f"({units.format_usd(run['run_musd'] * units.MEGA)}, "
            f"{units.format_usd(run['usd_per_million_tokens'])} per million tokens)."
        )
    slow = first_max(ok, "days")
    if slow["days"] > fast["days"] * TIE_RATIO:
        text += f" The slowest, {slow['system']}, takes {slow['days'] / fast['days']:.2f}x as long."
    if on:  # the units of each design hold the count asked differently: the days compare purchases, not chips
        counts = ", ".join(f"{r['system']} {int(r['gpus']):,}" for r in ok)
        text += (
            f" The designs train on different GPU counts ({counts}: what each one's whole units hold of the count "
            "asked), so the days compare those purchases, not the chips one for one."
        )
    split = fabric_and_chip(rows)
    return text + ("\n\n" + split if split else "")


def _only_design(row: dict, designs: int) -> str:
    """The verdict of a table with one design that has a plan: what it does, no ranking (it is the fastest and
    the cheapest of one)."""
    only = "the one design compared" if designs == 1 else f"the only one of {designs} designs with a plan"
    text = f"{_name(row)} is {only}, so there is nothing to rank: it trains in {format_amount(row['days'], 1)} days at {row['mfu']:.0%} MFU"
    if not is_na(row.get("capex_musd")):
        text += f", costs {units.format_usd(row['capex_musd'] * units.MEGA)} to buy"
        if not is_na(row.get("run_musd")):
            text += (
                f" and {units.format_usd(row['run_musd'] * units.MEGA)} per training run at its TCO per GPU-hour "
                f"({units.format_usd(row['usd_per_million_tokens'])} per million tokens)"
            )
    else:
        text += "; cost n/a: it has no price (give its file `unit_price_usd` or `price_item`)"
    return text + "."


def heading(table: pd.DataFrame | list[dict], model: str, tokens: float, gpus: int) -> str:
    """The Markdown heading of a design comparison: the model, the tokens and the GPUs each design was planned
    on, taken from the table (its ``gpus`` and ``gpus_bought`` columns) rather than from the count asked.
    A count that is not whole scale-up domains or servers of a design is bought as whole units (7 GPUs asked:
    one 72-GPU GB200 NVL72 rack, one 8-GPU HGX server), and the job may train on fewer GPUs than asked (a
    data-parallel degree that divides the global batch: 128 of 144); the heading then names, per design, the GPUs
    trained on and bought.

    >>> rows = [{"system": "gb200-nvl72", "gpus": 7, "gpus_bought": 72}, {"system": "hgx-h100", "gpus": 7,
    ...          "gpus_bought": 8}]
    >>> heading(rows, "llama3.1-8b", 1e11, 7)
    '## llama3.1-8b: 100B tokens, 7 GPUs asked per design; planned (GPUs trained on, of those bought as whole units): gb200-nvl72 7 of 72, hgx-h100 7 of 8'
    >>> heading([{"system": "a", "gpus": 1024, "gpus_bought": 1024}], "m", 1.5e13, 1024)
    '## m: 15T tokens on 1,024 GPUs per design'
    """
    rows = as_records(table)
    planned = []
    for r in rows:
        trained = gpus if is_na(r.get("gpus")) else int(r["gpus"])
        bought = trained if is_na(r.get("gpus_bought")) else int(r["gpus_bought"])
        planned.append((r["system"], trained, bought))
    head = f"## {model}: {units.format_count(tokens)} tokens"
    if all(trained == bought == gpus for _, trained, bought in planned):
        return f"{head} on {counted(gpus, 'GPU')} per design"
    items = ", ".join(f"{s} {t:,} of {b:,}" for s, t, b in planned)
    return f"{head}, {counted(gpus, 'GPU')} asked per design; planned (GPUs trained on, of those bought as whole units): {items}"
