"""``hnplan size``: the smallest GPU count per design for a deadline, or the days a GPU count takes."""

from __future__ import annotations

import math
import re

import typer
from rich.markup import escape
from rich.table import Table

from hnplan.cli._app import (
    app,
    console,
    count,
    current_context,
    decimal_hint,
    err_console,
    exit_infeasible,
    handle_errors,
    print_json,
)
from hnplan.cli._options import DEFAULT_BATCH_TOKENS, DEFAULT_SEQ_LEN, check_seq_len, dtype_name, option_given
from hnplan.cli._usage import typed_flag
from hnplan.defaults import DEFAULT_STACK
from hnplan.errors import InfeasiblePlan, InputError, check_choice
from hnplan.formatting import counted, deadline_days_text
from hnplan.formatting import format_amount as _amount
from hnplan.units import format_count, format_usd

POWER_CAP_MAX_MW = 100_000.0
"""The largest ``--power-cap-mw`` read as megawatts (100 GW): a larger figure is watts or kilowatts typed as MW."""

#: hnplan.catalog.schemas.workload.MAX_TRAINING_TOKENS (where its reason is), written out so that the
#: command's --help does not import the catalog schemas; tests/test_report_params.py checks they agree
MAX_TRAINING_TOKENS = 1e18


@app.command()
def size(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    tokens: float = typer.Option(
        ...,
        "--tokens",
        parser=count(maximum=MAX_TRAINING_TOKENS, why="3,000 times all public human text"),
        metavar="COUNT",
        help="training tokens (15T, 15e12, 300B), at most 1e18",
    ),
    systems: list[str] = typer.Option(
        ...,
        "--system",
        "--systems",
        help="system ids or YAML paths: one, several comma-separated, or the option repeated (--systems as in compare)",
    ),
    deadline_days: float = typer.Option(None, "--deadline-days", help="deadline [days]: find the GPU count"),
    gpus: int = typer.Option(None, "--gpus", min=1, help="GPU count: find the days"),
    seq_len: int = typer.Option(
        DEFAULT_SEQ_LEN, "--seq-len", parser=count(integer=True), metavar="COUNT", help="sequence length [tokens]"
    ),
    global_batch_tokens: int = typer.Option(
        DEFAULT_BATCH_TOKENS,
        "--global-batch-tokens",
        parser=count(integer=True),
        metavar="COUNT",
        help="tokens per step (16Mi = 16,777,216)",
    ),
    dtype: str = typer.Option(
        "bf16", "--dtype", callback=dtype_name, help="bf16, fp8 or fp4 (NVFP4 recipe, Blackwell); MFU is of its peak"
    ),
    goodput: bool = typer.Option(
        True,
        "--goodput/--no-goodput",
        help="divide the throughput by the goodput of the reliability model (failures, "
        "restarts, checkpoint stalls); --no-goodput: no failures",
    ),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", help="checkpoint mode of the goodput: sync or async; default: async"
    ),
    offload: str = typer.Option(
        "none", "--offload", help="none, or auto: plans that do not fit in HBM use host or pooled memory"
    ),
    stack: str = typer.Option(
        DEFAULT_STACK,
        "--stack",
        help="software stack id or YAML path (data/stacks/, or what hnplan calibrate wrote), as hnplan train "
        "takes it (and its default)",
    ),
    budget_usd: float = typer.Option(
        None,
        "--budget-usd",
        parser=count(usd=True),
        metavar="USD",
        help="capex budget [USD] (300M, 3e8, '$1.5B', 300,000,000): each design's capex and whether the purchase "
        "keeps to it",
    ),
    power_cap_mw: float = typer.Option(
        None,
        "--power-cap-mw",
        help="facility power cap [MW] (> 0, at most 100,000): each design's facility power and whether it keeps to it",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Days, GPU-hours and energy per design: the smallest GPU count meeting --deadline-days, or the
    time --gpus take (best parallel plan each, after the goodput unless --no-goodput). Counts with
    no valid plan are skipped and listed."""
    # planners (numpy, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.planning.design import CHECKPOINT_MODES
    from hnplan.planning.sizing import size_rows

    # --system a --system b or --system a,b; a design named twice is sized once
    systems = list(dict.fromkeys(s.strip() for text in systems for s in text.split(",") if s.strip()))
    with handle_errors():
        flag = typed_flag(current_context(), "systems")  # --system or --systems, as typed, in the messages
        if not systems:
            raise InputError(f"{flag} names no system; give an id (data/systems) or a YAML path")
        refs = {"--model": ("models", model), **{f"{flag} {s}": ("systems", s) for s in systems}}
        check_refs({**refs, "--stack": ("stacks", stack)})
        if offload is not None:
            check_choice("--offload", offload, ("none", "auto"))
        if checkpoint is not None and not goodput:  # the mode sets the goodput, which --no-goodput leaves out
            raise InputError(
                f"--checkpoint {checkpoint}: the checkpoint mode sets the goodput; --no-goodput leaves it out"
            )
        checkpoint = checkpoint or "async"
        check_choice("--checkpoint", checkpoint, CHECKPOINT_MODES)  # before any search, not per design
        if (deadline_days is None) == (gpus is None):
            raise InputError("give exactly one of --deadline-days and --gpus")
        if gpus is not None:  # the flag and each design's limit, not the bill of materials' ports
            from hnplan.planning.design import check_fabric_gpus

            for ref in systems:
                check_fabric_gpus(ref, gpus, "--gpus")
        seen: dict[str, str] = {}  # the table and JSON name designs by id: a copy that kept a catalog id is refused
        for ref in systems:
            sid = load_catalog().system(ref).id
            if sid in seen and load_catalog().resolve_id("systems", ref) == sid == load_catalog().resolve_id(
                "systems", seen[sid]
            ):
                continue  # one id typed twice in two cases (gb200-nvl72, GB200-NVL72): one design
            if sid in seen:
                raise InputError(f"{flag}: {seen[sid]} and {ref} are both system '{sid}'; give each its own id")
            seen[sid] = ref
        systems = list(seen.values())
        model_id = load_catalog().model(model).id  # the table's title and the JSON name the model as train does
        if deadline_days is not None and not deadline_days > 0:
            raise InputError(f"--deadline-days must be > 0; got {deadline_days:g}")
        if deadline_days is not None:
            from hnplan import units
            from hnplan.catalog.schemas.economics import WHATIF_RANGES

            years = WHATIF_RANGES["years"][2]  # the bound of cluster simulate --days and tco --years too
            longest = units.s_to_days(units.years_to_s(years))
            if deadline_days > longest:
                raise InputError(
                    f"--deadline-days must be at most {longest:,.2f} ({years:g} years, the longest the cost model "
                    f"amortises a cluster over); got {deadline_days:g}"
                )
        if tokens < global_batch_tokens:  # time to train counts whole steps' worth of tokens
            raise InputError(
                f"--tokens {format_count(tokens)} is less than one step of --global-batch-tokens {global_batch_tokens:,}"
            )
        check_seq_len(model, seq_len)  # before the batch's check: a sequence the model cannot take
        if global_batch_tokens % seq_len:
            raise InputError(
                f"--global-batch-tokens {global_batch_tokens:,} is not a multiple of --seq-len {seq_len:,}"
                + (decimal_hint(global_batch_tokens) or decimal_hint(seq_len))
            )
        if power_cap_mw is not None and not power_cap_mw > 0:  # bad input before the search
            raise InputError(f"--power-cap-mw must be > 0; got {power_cap_mw:g}")
        if power_cap_mw is not None and power_cap_mw > POWER_CAP_MAX_MW:  # watts or kW typed as MW
            raise InputError(
                f"--power-cap-mw {power_cap_mw:,.0f} is above {POWER_CAP_MAX_MW:,.0f} MW (100 GW): the cap is in MW "
                f"(a 1.2 MW hall is 1.2); got watts or kW?"
            )
        table = size_rows(  # the frame's rows, without pandas
            model,
            systems,
            tokens,
            seq_len,
            global_batch_tokens // seq_len,
            deadline_days=deadline_days,
            gpus=gpus,
            dtype=dtype,
            goodput=goodput,
            mode=checkpoint,
            offload=offload,
            stack=stack,
        )
        limits = budget_usd is not None or power_cap_mw is not None
        if limits:  # what each purchase costs and draws, against the budget and the cap
            from hnplan.planning.design import design_of, purchase_fields

            by_id = {load_catalog().system(ref).id: ref for ref in systems}
            for r in table:
                if r.get("status") == "ok":
                    bought = int(r.get("gpus_bought") or r["gpus"])
                    r.update(
                        purchase_fields(design_of(by_id[r["system"]]), bought, r["days"], budget_usd, power_cap_mw)
                    )
        rows = [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))} for r in table]
        if not any(r.get("status") == "ok" for r in rows):  # no design has an answer: one line, exit 3
            raise InfeasiblePlan("; ".join(f"{r['system']}: {r['status'].removeprefix('no plan: ')}" for r in rows))
        note = ""
        if any(r.get("status") == "ok" and r["parallel"]["ep"] > 1 for r in rows):  # an expert all-to-all runs
            from hnplan.planning.trust import moe_dispatch_sentence

            note = moe_dispatch_sentence(model, stack)
        from hnplan.planning.calibration_note import uncalibrated_sentence

        # a design whose chip lacks its sustained clock or memory-kernel efficiencies is sized at the ideal 1.0
        # (too few GPUs, too few days): said as train and compare say it
        cat = load_catalog()
        acc_of = {cat.system(ref).id: cat.system(ref).accelerator for ref in systems}  # ids or YAML paths
        calibration = uncalibrated_sentence(
            [acc_of[r["system"]] for r in rows if r.get("status") == "ok"], cat, style="plain" if json_ else "markdown"
        )
        ctx = current_context()
        defaulted = [f"{flag} {value:,}" for flag, name, value in (("--seq-len", "seq_len", seq_len),
                     ("--global-batch-tokens", "global_batch_tokens", global_batch_tokens)) if not option_given(ctx, name)]  # fmt: skip
        if defaulted:  # on stderr, as train says them, so that --json's stdout stays one object
            err_console.print(
                f"defaults: {', '.join(defaulted)} (Llama 3 405B's, as train; give the flags to change them)",
                highlight=False,
                markup=False,
            )
        if json_:
            print_json(
                {
                    "model": model_id,
                    "tokens": tokens,
                    "seq_len": seq_len,
                    "global_batch_tokens": global_batch_tokens,
                    "dtype": dtype,
                    "deadline_days": deadline_days,
                    "goodput": goodput,
                    "checkpoint": checkpoint,
                    "stack": stack,
                    **({"budget_usd": budget_usd} if budget_usd is not None else {}),
                    **({"power_cap_mw": power_cap_mw} if power_cap_mw is not None else {}),
                    "results": rows,
                    **({"moe_dispatch_note": note} if note else {}),
                    **({"calibration_note": calibration} if calibration else {}),
                    # every design breaks a limit (exit 3): said in the object too, as the other refusals are
                    **({"infeasible": over} if (over := over_limits_text(rows, budget_usd, power_cap_mw)) else {}),
                }
            )
            _exit_if_over_limits(rows, budget_usd, power_cap_mw)
            return
        t = Table(
            title=f"{model_id}: {format_count(tokens)} tokens"
            + (f" within {deadline_days_text(deadline_days)}" if deadline_days else "")
        )
        sizing = deadline_days is not None  # the slack column only where there is a deadline
        cols = ("system", "GPUs", "days", *(("slack [days]",) if sizing else ()), "GPU-hours", "energy [MWh]")
        money = ("capex", "facility [MW]") if limits else ()
        for col in (*cols, *money, f"MFU ({dtype} peak)", "goodput", "plan"):
            # "[days]" is not rich markup; figures right-aligned, so that their magnitudes line up
            t.add_column(escape(col), justify="left" if col in ("system", "plan") else "right")
        notes = []
        units_of = {cat.system(ref).id: cat.system(ref).unit_gpus for ref in systems}  # ids or YAML paths
        for r in rows:
            if r.get("status") != "ok":
                t.add_row(r["system"], *["-"] * (len(cols) + len(money) + 1), r.get("status", ""))
                continue
            p = r["parallel"]
            slack = (_amount(r["slack_days"], 1) if "slack_days" in r else "-",) if sizing else ()
            t.add_row(
                r["system"],
                f"{int(r['gpus']):,}",
                _amount(r["days"], 1),
                *slack,
                _amount(r["gpu_hours"], 0),
                _amount(r["energy_mwh"], 0),
                *(
                    (format_usd(r["capex_usd"]) if "capex_usd" in r else "n/a", f"{r['facility_power_mw']:.2f}")
                    if limits
                    else ()
                ),
                f"{r['mfu']:.1%}",
                f"{r['goodput']:.2%}" if goodput else "off",
                f"TP{p['tp']} PP{p['pp']} DP{p['dp']} CP{p['cp']} EP{p['ep']}",
            )
            notes += _skipped_lines(r["system"], r.get("skipped", []))
            if r.get("batch_note"):
                notes.append(f"{r['system']}: {r['batch_note']}")
            unit = units_of.get(r["system"], 1)
            bought_gpus = int(r.get("gpus_bought") or -(-int(r["gpus"]) // unit) * unit)
            if bought_gpus != int(r["gpus"]):  # a job on part of its whole racks or servers: what is bought
                bought = bought_gpus // unit
                spares = ", the rest idle as spares" if "gpus_bought" in r else ""
                notes.append(
                    f"{r['system']}: the job runs on {counted(int(r['gpus']), 'GPU')} of {bought_gpus:,} bought "
                    f"({bought:,} whole unit{'s' * (bought > 1)} of {unit}{spares}); GPU-hours count the job's "
                    "GPUs, energy every GPU bought (the idle ones at their idle power)"
                )
            if r.get("gpus_choice"):  # --gpus on units whose GPU count is not a power of two: the faster job
                notes.append(f"{r['system']}: {r['gpus_choice']}")
            if limits:
                notes += _limit_lines(r, budget_usd, power_cap_mw, sizing)
        console.print(t)
        if note:
            notes.append(note)
        if calibration:
            notes.append(calibration)
        for line in notes:
            console.print(line, highlight=False, markup=False)
        _exit_if_over_limits(rows, budget_usd, power_cap_mw)


def over_limits_text(rows: list[dict], budget_usd: float | None, power_cap_mw: float | None) -> str | None:
    """Why no purchase keeps to the budget and the power cap, in one line; None when one design's does (or
    may: a design without a price is not known to break the budget) or no limit was given.

    >>> rows = [{"system": "a", "status": "ok", "gpus_bought": 1152, "capex_usd": 8.04e7, "within_budget": False,
    ...          "facility_power_mw": 2.41, "within_power_cap": True},
    ...         {"system": "b", "status": "ok", "gpus_bought": 1152, "capex_usd": 4e7, "within_budget": True,
    ...          "facility_power_mw": 3.5, "within_power_cap": False}]
    >>> over_limits_text(rows, 5e7, 3.0)
    'no design keeps to the $50M budget and the 3 MW power cap: a: 1,152 GPUs bought cost $80.4M; b: 1,152 GPUs bought draw 3.50 MW'
    >>> over_limits_text([dict(rows[0], within_budget=True)], 1e8, 3.0) is None  # a within both
    True
    """
    if budget_usd is None and power_cap_mw is None:
        return None
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok or any(r.get("within_budget") is not False and r.get("within_power_cap") is not False for r in ok):
        return None
    limits = [f"the {format_usd(budget_usd)} budget"] if budget_usd is not None else []
    limits += [f"the {power_cap_mw:g} MW power cap"] if power_cap_mw is not None else []
    why = []
    for r in ok:
        bought = f"{int(r['gpus_bought'] if 'gpus_bought' in r else r['gpus']):,} GPUs bought"
        over = [f"cost {format_usd(r['capex_usd'])}"] if r.get("within_budget") is False else []
        over += [f"draw {r['facility_power_mw']:.2f} MW"] if r.get("within_power_cap") is False else []
        why.append(f"{r['system']}: {bought} {' and '.join(over)}")
    return f"no design keeps to {' and '.join(limits)}: {'; '.join(why)}"


def _exit_if_over_limits(rows: list[dict], budget_usd: float | None, power_cap_mw: float | None) -> None:
    """After the report: one ``infeasible:`` line and exit 3 when every design answered breaks a limit."""
    text = over_limits_text(rows, budget_usd, power_cap_mw)
    if text is not None:
        exit_infeasible(text)


def _limit_lines(r: dict, budget_usd: float | None, power_cap_mw: float | None, sizing: bool) -> list[str]:
    """Whether a design's purchase keeps to the budget and the power cap, in words; for a deadline, that the
    count the search found (the fewest that meet it) breaks them where it does.

    >>> r = {"system": "s", "gpus_bought": 1152, "capex_usd": 8.04e7, "within_budget": False,
    ...      "facility_power_mw": 2.41, "within_power_cap": True}
    >>> _limit_lines(r, 5e7, 3.0, True)[0].split("; ")
    ['s: over budget: 1,152 GPUs bought cost $80.4M capex, above the $50M budget', 'within the 3 MW power cap (2.41 MW facility power)', 'the fewest GPUs the search found to meet the deadline break the budget']
    """
    said, broken = [], []
    if r.get("within_budget") is False:
        broken.append("the budget")
        said.append(
            f"over budget: {int(r['gpus_bought'] if 'gpus_bought' in r else r['gpus']):,} GPUs bought cost "
            f"{format_usd(r['capex_usd'])} capex, above the {format_usd(budget_usd)} budget"
        )
    elif r.get("within_budget"):
        said.append(f"within the {format_usd(budget_usd)} budget ({format_usd(r['capex_usd'])} capex)")
    elif budget_usd is not None:
        said.append(f"budget not checked: cost {r.get('cost_note', 'n/a')}")
    if r.get("within_power_cap") is False:
        broken.append("the power cap")
        said.append(
            f"over the power cap: {r['facility_power_mw']:.2f} MW facility power, above the {power_cap_mw:g} MW cap"
        )
    elif r.get("within_power_cap"):
        said.append(f"within the {power_cap_mw:g} MW power cap ({r['facility_power_mw']:.2f} MW facility power)")
    if sizing and broken:
        said.append(f"the fewest GPUs the search found to meet the deadline break {' and '.join(broken)}")
    return [f"{r['system']}: {'; '.join(said)}"] if said else []


def _skipped_lines(system: str, skipped: list[dict]) -> list[str]:
    """One line per reason for the counts a sizing skipped: the counts, then the reason once (N for the
    count, written with or without thousands separators, where several share it; the batch factor the
    reason suggests, which is the count's own odd factor, said as such where it differs between them; the
    example batch, K sequences per GPU on N GPUs, as N x K, or a multiple of N where K differs).

    >>> r = "no plan on {0} GPUs divides; try a batch with the factor {1}, such as {2} sequences, {3} per GPU"
    >>> _skipped_lines("s", [{"gpus": 1536, "reason": r.format(1536, 3, "1,536", "one")},
    ...                      {"gpus": 1280, "reason": r.format(1280, 5, "1,280", "one")}])
    ["s: skipped 1,536, 1,280 GPUs: no plan on N GPUs divides; try a batch with N's odd factor, such as N sequences, one per GPU"]
    >>> _skipped_lines("s", [{"gpus": 216, "reason": r.format(216, 27, "4,104", "19")},
    ...                      {"gpus": 648, "reason": r.format(648, 81, "4,536", "7")}])
    ["s: skipped 216, 648 GPUs: no plan on N GPUs divides; try a batch with N's odd factor, such as a multiple of N sequences"]
    """
    mark, fmark, emark = "\x00", "\x01", "\x02"
    factor = re.compile(r"with the factor (\d+)")
    example = re.compile(r"such as ([\d,]+) sequences, (one|[\d,]+) per GPU")
    groups: dict[str, list[tuple[int, str, int]]] = {}
    for s in skipped:
        n, reason, per_gpu = int(s["gpus"]), s["reason"], 0
        ex = example.search(reason)
        k = 1 if ex and ex[2] == "one" else int(ex[2].replace(",", "")) if ex else 0
        if ex and int(ex[1].replace(",", "")) == k * n:  # K sequences a GPU on the N GPUs
            per_gpu, reason = k, example.sub(emark, reason)
        key = reason.replace(f"{n:,}", mark).replace(str(n), mark)
        found = factor.search(key)
        groups.setdefault(factor.sub(f"with the factor {fmark}", key), []).append(
            (n, found[1] if found else "", per_gpu)
        )
    lines = []
    for reason, members in groups.items():
        counts, factors, per = [n for n, _, _ in members], {f for _, f, _ in members}, {k for _, _, k in members}
        text = reason.replace(mark, f"{counts[0]:,}" if len(counts) == 1 else "N")
        text = text.replace(
            f"the factor {fmark}", f"the factor {factors.pop()}" if len(factors) == 1 else "N's odd factor"
        )
        k = per.pop() if len(per) == 1 else 0  # 0: K differs between the counts
        each = "one" if k == 1 else f"{k:,}"
        if not k:
            shown = "such as a multiple of N sequences"
        elif len(counts) == 1:
            shown = f"such as {k * counts[0]:,} sequences, {each} per GPU"
        else:
            shown = f"such as {'N' if k == 1 else f'N x {k:,}'} sequences, {each} per GPU"
        lines.append(f"{system}: skipped {', '.join(f'{c:,}' for c in counts)} GPUs: {text.replace(emark, shown)}")
    return lines
