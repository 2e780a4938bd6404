"""Sizing: the smallest purchase of a design that trains a model by a deadline (the one answer of
``hnplan size`` and of the ``hardware_sizing`` notebook), and what it costs.

The search is :func:`size_for_deadline` (:mod:`hnplan.planning.sizing_search`, where its steps are
described): whole purchasable units whose count has only the prime factors 2, 3 and 5, from the
100 %-MFU lower bound up to the first count that meets the deadline, then refined between the last miss
and that count. Time-to-train at a count is :func:`hnplan.planning.time_to_train.time_to_train`
(goodput from the reliability model on by default). This module builds the tables on it: one row per
design (:func:`size_table`, :func:`size_designs`), the purchase's racks, power and costs
(:func:`size_design`) and the verdict in words (:func:`sizing_verdict`). For a fixed purchase (``hnplan
size --gpus``) :func:`time_on_purchase` (:mod:`hnplan.planning.sizing_purchase`) weighs the same job layouts the search weighs at each count (64
of each 72-GPU rack, :func:`hnplan.planning.sizing_search.job_gpu_options`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.formatting import counted, format_amount
from hnplan.planning.design import purchase_fields
from hnplan.planning.records import frame_records
from hnplan.planning.sizing_purchase import time_on_purchase as time_on_purchase  # re-exported: it lived here
from hnplan.planning.sizing_search import (  # noqa: F401  (the search is public here too)
    MAX_EVALS,
    REFINE_STEPS,
    _next_smooth,
    _prev_smooth,
    job_gpu_options,
    size_for_deadline,
)

if TYPE_CHECKING:
    import pandas as pd


def size_table(
    model,
    systems,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    *,
    deadline_days: float | None = None,
    gpus: int | None = None,
    dtype: str = "bf16",
    goodput: bool = True,
    mode: str = "async",
    catalog: Catalog | None = None,
    offload: str = "none",
    stack=DEFAULT_STACK,
) -> pd.DataFrame:
    """One row per system: :func:`size_for_deadline` for ``deadline_days``, or
    :func:`time_on_purchase` for ``gpus`` (the answer of ``hnplan size``),
    each planned with ``stack`` (a software stack id, path or entry; default ``megatron-core``,
    :data:`hnplan.defaults.DEFAULT_STACK`, as ``hnplan size``; None: no stack entry).

    Exactly one of ``deadline_days`` and ``gpus`` is given. A system without an answer keeps its row
    with the reason in ``status`` (``ok`` otherwise).

    Returns
    -------
    pandas.DataFrame
        Columns of :func:`time_to_train` plus ``units, gpus_bought`` (``gpus`` is the job's count), with
        ``deadline_days, slack_days, evaluated, skipped`` when sizing and ``gpu_options`` for
        ``gpus`` (:func:`time_on_purchase`), ``gpus_choice`` (the count kept and why, in words; "" where no
        count has a plan) and ``status``; ``attrs["units"]`` maps columns to units.

    Raises
    ------
    InputError
        Unless exactly one of ``deadline_days`` and ``gpus`` is given.
    """
    import pandas as pd  # here, not at the top: the command line reads the rows (size_rows)

    df = pd.DataFrame(
        _size_rows(
            model,
            systems,
            tokens,
            seq_len,
            global_batch_seqs,
            deadline_days=deadline_days,
            gpus=gpus,
            dtype=dtype,
            goodput=goodput,
            mode=mode,
            catalog=catalog,
            offload=offload,
            stack=stack,
        )
    )
    df.attrs["units"] = dict(TIME_UNITS)
    return df


def size_rows(
    model,
    systems,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    *,
    deadline_days: float | None = None,
    gpus: int | None = None,
    dtype: str = "bf16",
    goodput: bool = True,
    mode: str = "async",
    catalog: Catalog | None = None,
    offload: str = "none",
    stack=DEFAULT_STACK,
) -> list[dict]:
    """:func:`size_table` as plain rows, without pandas: ``df.to_dict("records")`` of its frame
    (:func:`hnplan.planning.records.frame_records`: the same columns, values and NaN), what ``hnplan size``
    prints; the units are :data:`TIME_UNITS`. Parameters and errors as there."""
    return frame_records(
        _size_rows(
            model,
            systems,
            tokens,
            seq_len,
            global_batch_seqs,
            deadline_days=deadline_days,
            gpus=gpus,
            dtype=dtype,
            goodput=goodput,
            mode=mode,
            catalog=catalog,
            offload=offload,
            stack=stack,
        )
    )


def _size_rows(
    model,
    systems,
    tokens: float,
    seq_len: int,
    global_batch_seqs: int,
    *,
    deadline_days: float | None,
    gpus: int | None,
    dtype: str,
    goodput: bool,
    mode: str,
    catalog: Catalog | None,
    offload: str,
    stack,
) -> list[dict]:
    """The rows of :func:`size_table`, each with the keys its design has."""
    if (deadline_days is None) == (gpus is None):
        raise InputError("give exactly one of a deadline (days) and a GPU count")
    cat = catalog or load_catalog()
    rows = []
    for s in systems:
        sid = cat.system(s).id
        try:
            if gpus is not None:
                row = time_on_purchase(
                    model,
                    s,
                    gpus,
                    tokens,
                    seq_len,
                    global_batch_seqs,
                    dtype,
                    cat,
                    goodput=goodput,
                    mode=mode,
                    offload=offload,
                    stack=stack,
                )
            else:
                assert deadline_days is not None
                row = size_for_deadline(
                    model,
                    s,
                    tokens,
                    deadline_days,
                    seq_len,
                    global_batch_seqs,
                    dtype,
                    cat,
                    goodput=goodput,
                    mode=mode,
                    offload=offload,
                    stack=stack,
                )
            row["status"] = "ok"
        except InfeasiblePlan as exc:
            row = dict(system=sid, status=f"no plan: {exc}", gpus_choice="")
        rows.append(row)
    return rows


TIME_UNITS = {
    "days": "days",
    "gpu_hours": "GPU-hours",
    "energy_mwh": "MWh",
    "co2_t": "t CO2",
    "slack_days": "days",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction",
    "goodput": "fraction",
}


def size_design(
    model,
    system,
    tokens: float,
    deadline_days: float,
    seq_len: int,
    global_batch_seqs: int,
    dtype: str = "bf16",
    catalog: Catalog | None = None,
    *,
    goodput: bool = True,
    mode: str = "async",
    budget_usd: float | None = None,
    offload: str = "none",
    stack=DEFAULT_STACK,
) -> dict:
    """:func:`size_for_deadline` and what that purchase costs.

    Parameters
    ----------
    budget_usd : float, optional
        Flags ``within_budget`` (capex at most the budget).
    stack : str or SoftwareStack, optional
        The software stack every count is planned with (an id, a YAML path or an entry, as ``hnplan size
        --stack`` takes it); default ``megatron-core`` (:data:`hnplan.defaults.DEFAULT_STACK`); None: no stack entry.

    Returns
    -------
    dict
        :func:`size_for_deadline`'s keys plus ``racks, it_power_mw, facility_power_mw, capex_usd,
        opex_usd_per_year, tco_usd, run_usd`` (the run at TCO rates), ``within_budget`` and ``status``;
        without a price (:func:`hnplan.planning.design.cost_or_gap`) the costs are NaN and ``cost_note``
        says why.

    Raises
    ------
    As :func:`size_for_deadline`.
    """
    cat = catalog or load_catalog()
    sys_ = cat.system(system)
    row = size_for_deadline(
        model,
        sys_,
        tokens,
        deadline_days,
        seq_len,
        global_batch_seqs,
        dtype,
        cat,
        goodput=goodput,
        mode=mode,
        offload=offload,
        stack=stack,
    )
    # the units bought, the job's spares included (power and costs)
    fields = purchase_fields(cat.design(sys_), row["gpus_bought"], row["days"], budget_usd)
    fields.pop("within_power_cap")
    row.update(fields, status="ok")
    return row


def size_designs(
    model,
    systems,
    tokens: float,
    deadline_days: float,
    seq_len: int,
    global_batch_seqs: int,
    budget_usd: float | None = None,
    dtype: str = "bf16",
    mode: str = "async",
    catalog: Catalog | None = None,
    *,
    goodput: bool = True,
    offload: str = "none",
    stack=DEFAULT_STACK,
) -> pd.DataFrame:
    """:func:`size_design` for each design, planned with ``stack``: one row per system (a design that
    cannot meet the deadline keeps its row with the reason in ``status``); ``attrs['units']`` maps columns
    to units."""
    cat = catalog or load_catalog()
    rows = []
    for s in systems:
        entry = cat.system(s)  # an id or a file path, resolved once; the entry is passed on, not its id
        sid = entry.id
        try:
            rows.append(
                size_design(
                    model,
                    entry,
                    tokens,
                    deadline_days,
                    seq_len,
                    global_batch_seqs,
                    dtype,
                    cat,
                    goodput=goodput,
                    mode=mode,
                    budget_usd=budget_usd,
                    offload=offload,
                    stack=stack,
                )
            )
        except InfeasiblePlan as exc:
            rows.append({"system": sid, "status": f"infeasible: {exc}"})
    import pandas as pd  # here, not at the top: hnplan size reads plain rows (size_rows)

    df = pd.DataFrame(rows)
    df.attrs["units"] = {
        **TIME_UNITS,
        "it_power_mw": "MW",
        "facility_power_mw": "MW",
        "capex_usd": "USD",
        "opex_usd_per_year": "USD/year",
        "tco_usd": "USD",
        "run_usd": "USD",
    }
    return df


def sizing_verdict(df: pd.DataFrame) -> str:
    """A Markdown sentence per design of a :func:`size_designs` table: what it takes (with what sets the rack count
    when it is the facility's power per rack, :func:`hnplan.planning.design.rack_constraint`), and the cheapest."""
    import pandas as pd  # here, not at the top: hnplan size reads plain rows (size_rows)

    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "No design meets the deadline with this global batch; relax the deadline or raise the batch."
    lines = [
        f"- **{r['system']}**: {int(r['gpus']):,} GPUs"
        + (
            f" (of {int(r['gpus_bought']):,} bought, the rest spares)"
            if pd.notna(r.get("gpus_bought")) and int(r["gpus_bought"]) != int(r["gpus"])
            else ""
        )
        + f" in {int(r['racks'])} racks"
        + (f" (set by {r['racks_bound_by']})" if str(r.get("racks_bound_by", "")).startswith("power") else "")
        + ", "
        f"{r['facility_power_mw']:.1f} MW facility power, {units.format_usd(r['capex_usd'])} capex, "
        f"{format_amount(r['days'], 1)} days"
        + ("" if r["within_budget"] in (None, True) or pd.isna(r["within_budget"]) else " (over budget)")
        for _, r in ok.iterrows()
    ]
    priced = ok[ok["capex_usd"].notna()]
    if not priced.empty:
        cheap = priced.loc[priced["capex_usd"].idxmin()]
        lines.append(
            f"\nThe cheapest design to buy for this deadline is **{cheap['system']}** "
            f"({units.format_usd(cheap['capex_usd'])})"
            + ("" if len(priced) == len(ok) else ", of those with a price")
            + "."
        )
    for _, r in ok[ok["capex_usd"].isna()].iterrows():
        lines.append(f"{r['system']}: cost n/a, it has no price (give its file `unit_price_usd` or `price_item`).")
    if "goodput_mode" in ok and (ok["goodput_mode"] != "off").all():
        lines.append(
            f"Days include failures, restarts and checkpoint stalls (goodput "
            f"{units.format_span(ok['goodput'].min(), ok['goodput'].max(), '.1%')})."
        )
    elif "goodput_mode" in ok:
        lines.append("Days leave failures out (goodput off).")
    for _, r in ok.iterrows():
        if isinstance(r.get("batch_note"), str) and r["batch_note"]:
            lines.append(f"{r['system']}: {r['batch_note']}.")
        skipped = r.get("skipped")
        if isinstance(skipped, list) and skipped:
            lines.append(
                f"{r['system']}: {counted(len(skipped), 'smaller count')} skipped, e.g. "
                f"{skipped[0]['gpus']:,} GPUs: {skipped[0]['reason']}"
            )
    missing = df[df["status"] != "ok"]
    if not missing.empty:
        lines.append(
            " Cannot meet it: " + "; ".join(f"{r['system']} ({r['status']})" for _, r in missing.iterrows()) + "."
        )
    return "\n".join(lines)
