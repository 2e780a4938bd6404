"""``hnplan compare``: supernode or 8-GPU-server cluster for one training job, design by design."""

from __future__ import annotations

import math
import re

import typer

from hnplan.cli._app import app, console, count, current_context, decimal_hint, escape, handle_errors, print_json
from hnplan.cli._options import check_expert_flags, check_seq_len, dtype_name, plan_option, plan_pins
from hnplan.cli._usage import typed_flag
from hnplan.defaults import DEFAULT_STACK, TRAIN_DTYPES
from hnplan.formatting import counted, format_amount

#: hnplan.catalog.schemas.workload.MAX_TRAINING_TOKENS, written out so that --help does not import the catalog
#: schemas (tests/test_cli_compare.py checks they agree)
MAX_TRAINING_TOKENS = 1e18
#: the scenario whose design comparison gives the defaults of --systems, --seq-len and --global-batch-tokens
DEFAULT_SCENARIO = "default"
_NOTEBOOK = "design_comparison"


@app.command()
def compare(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="accelerators in each design"),
    tokens: float = typer.Option(
        ...,
        "--tokens",
        parser=count(maximum=MAX_TRAINING_TOKENS, why="3,000 times all public human text"),
        metavar="COUNT",
        help="training tokens (15T, 15e12, 300B), at most 1e18",
    ),
    systems: list[str] = typer.Option(
        None,
        "--systems",
        "--system",
        help="system ids or YAML paths: several comma-separated or the option repeated (--system as in size); "
        "default: the designs of the default "
        "scenario (data/scenarios/default.yaml)",
    ),
    seq_len: int = typer.Option(
        None,
        "--seq-len",
        parser=count(integer=True),
        metavar="COUNT",
        help="sequence length [tokens] (8192, 8Ki); default: the default scenario's",
    ),
    global_batch_tokens: int = typer.Option(
        None,
        "--global-batch-tokens",
        parser=count(integer=True),
        metavar="COUNT",
        help="tokens per step (16Mi = 16,777,216); default: the default scenario's",
    ),
    dtype: str = typer.Option(
        "bf16",
        "--dtype",
        callback=dtype_name,
        help="bf16, fp8 or fp4; a design whose GPU lacks it, or cannot run the stack's fp8 recipe (MXFP8 on Hopper), is planned in bf16 (said in status)",
    ),
    offload: str = typer.Option(
        "none", "--offload", help="none, or auto: plans that do not fit in HBM use host or pooled memory"
    ),
    stack: str = typer.Option(
        DEFAULT_STACK,
        "--stack",
        help="software stack id or YAML path (data/stacks/), as hnplan train takes it (and its default, as the "
        "design comparison notebook's)",
    ),
    goodput: bool = typer.Option(
        True,
        "--goodput/--no-goodput",
        help="divide each design's throughput by the goodput of the reliability model (failures, restarts, "
        "checkpoint stalls), as hnplan size does; --no-goodput: no failures",
    ),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", help="checkpoint mode of the goodput: sync or async; default: async"
    ),
    trust: bool = typer.Option(
        True,
        "--trust/--no-trust",
        help="say how far to trust the comparison (plans every published run on the designs' accelerators, "
        "about 0.6 s the first time, then read from a cache, as the designs' best plans are; HNPLAN_NO_CACHE=1: "
        "plan them every time); "
        "--no-trust: the table and the verdict only",
    ),
    tp: int = plan_option("tp", defaults=False),
    pp: int = plan_option("pp", defaults=False),
    dp: int = plan_option("dp", defaults=False),
    cp: int = plan_option("cp", defaults=False),
    ep: int = plan_option("ep", defaults=False),
    etp: int = plan_option("etp", defaults=False),
    microbatch_size: int = plan_option("microbatch_size", defaults=False),
    virtual_stages: int = plan_option("virtual_stages", defaults=False),
    recompute: str = plan_option("recompute", defaults=False),
    zero: int = plan_option("zero", defaults=False),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Which design trains the job best: per system its fastest plan that fits, step time, MFU, days, racks,
    power, energy, capex and cost per million tokens, then the verdict and how far to trust it.

    Each design gets --gpus accelerators and its own best plan (the search of hnplan train); --tp, --pp, --dp,
    --cp, --ep, --etp, --microbatch-size, --virtual-stages, --recompute and --zero pin those knobs on every
    design, as in hnplan train, and the rest are searched (a design on which no plan holds the pins says why in its
    status). Days, energy
    and the run's cost are after the goodput of the reliability model on the GPUs that train (failures,
    restarts, checkpoint stalls; --checkpoint sync or async), as in hnplan size; --no-goodput leaves
    failures out. The verdict names the fastest design, the cheapest to buy and per run, and what the supernode
    fabric buys apart from the newer chip; the notes say how well the validation set covers each
    accelerator. Exit 3 when no design can run the job.
    """
    # the planners (numpy, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs, check_stack_dtype
    from hnplan.errors import InfeasiblePlan, InputError, PlanRuleError, check_choice
    from hnplan.planning.compare import UNITS, compare_design_rows, trust_notes, verdict
    from hnplan.planning.design import CHECKPOINT_MODES, check_fabric_gpus
    from hnplan.units import format_count

    with handle_errors():
        flag = typed_flag(current_context(), "systems")  # --system or --systems, as typed, in the messages
        cat = load_catalog()
        # --systems a,b and --systems a --systems b alike (typer keeps only the last of a repeated plain option)
        given = ",".join(systems) if systems else None
        defaults = _scenario_defaults(cat) if None in (given, seq_len, global_batch_tokens) else {}
        defaulted = [  # said on stderr once the designs are planned, as train says its defaults
            f"{name} {value}"
            for name, value, mine in (
                ("--systems", ",".join(defaults.get("systems", ())), given),
                ("--seq-len", f"{int(defaults.get('seq_len', 0)):,}", seq_len),
                ("--global-batch-tokens", f"{int(defaults.get('global_batch_tokens', 0)):,}", global_batch_tokens),
            )
            if mine is None
        ]
        names = _system_list(given, flag) if given is not None else list(defaults["systems"])
        seq_len = seq_len if seq_len is not None else int(defaults["seq_len"])
        if global_batch_tokens is None:
            global_batch_tokens = int(defaults["global_batch_tokens"])
        refs = {"--model": ("models", model), **{f"{flag} {s}": ("systems", s) for s in names}}
        check_refs({**refs, "--stack": ("stacks", stack)}, cat)
        ref_of: dict[str, str] = {}  # each design's id -> the id or YAML path it was given as
        twice: list[str] = []  # ids given more than once, compared once (said on stderr)
        for name in names:
            sid = cat.system(name).id
            if sid in ref_of and cat.resolve_id("systems", name) == cat.resolve_id("systems", ref_of[sid]) == sid:
                twice += [] if sid in twice else [sid]
                continue  # one id typed twice (or in two cases: gb200-nvl72, GB200-NVL72): one design
            if sid in ref_of:  # the table, verdict and JSON name designs by id: two of one id cannot be told apart
                raise InputError(f"{flag}: {ref_of[sid]} and {name} are both system '{sid}'; give each its own id")
            ref_of[sid] = name
        names = list(ref_of.values())
        if twice:
            from hnplan.cli._app import err_console

            err_console.print(f"{flag}: {', '.join(twice)} given more than once; compared once", highlight=False)
        for name in names:  # the flag and each design's bound, not the bill of materials' ports
            check_fabric_gpus(name, gpus, "--gpus", cat)
        check_choice("--dtype", dtype, TRAIN_DTYPES)
        if stack is not None:  # one stack for every design: a dtype it has no recipe for is bad input, as in train
            check_stack_dtype(cat.stack(stack), dtype)
        check_choice("--offload", offload, ("none", "auto"))
        if checkpoint is not None and not goodput:  # the mode sets the goodput, which --no-goodput leaves out
            raise InputError(
                f"--checkpoint {checkpoint}: the checkpoint mode sets the goodput; --no-goodput leaves it out"
            )
        checkpoint = checkpoint or "async"
        check_choice("--checkpoint", checkpoint, CHECKPOINT_MODES)
        # the knobs pinned on every design: bad pins (an expert degree on a dense model, a recompute mode hnplan does
        # not know) are bad input, as in train, checked here and by the planner before any design is planned
        check_expert_flags(model, tp=tp, ep=ep, etp=etp)
        fixed = plan_pins(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            etp=etp,
            microbatch_size=microbatch_size,
            virtual_stages=virtual_stages,
            recompute=recompute,
            zero=zero,
        )
        pinned = math.prod(fixed.get(k, 1) for k in ("tp", "pp", "dp", "cp"))
        if pinned > gpus:  # each design would buy past the count asked just to hold the pins: say so, as train does
            names = " x ".join(f"{k} {fixed[k]}" for k in ("tp", "pp", "dp", "cp") if k in fixed)
            raise PlanRuleError(
                f"{names}{f' = {pinned:,}' if ' x ' in names else ''} needs {counted(pinned, 'GPU')}, more than "
                f"--gpus {gpus:,}: give --gpus {pinned:,} or more, or pin fewer ranks"
            )
        check_seq_len(model, seq_len)  # before the batch's check, as train: bad input, not a plan per design
        if global_batch_tokens % seq_len:
            raise InputError(
                f"--global-batch-tokens {global_batch_tokens:,} is not a multiple of --seq-len {seq_len:,}"
                + (decimal_hint(global_batch_tokens) or decimal_hint(seq_len))
            )
        if tokens < global_batch_tokens:  # time to train counts whole steps' worth of tokens
            raise InputError(
                f"--tokens {format_count(tokens)} is less than one step of --global-batch-tokens {global_batch_tokens:,}"
            )
        table = compare_design_rows(  # the frame's rows without pandas: a repeat call reads them from a cache
            model,
            names,
            gpus,
            tokens,
            seq_len,
            global_batch_tokens // seq_len,
            dtype,
            catalog=cat,
            offload=offload,
            stack=stack,
            goodput=goodput,
            mode=checkpoint,
            fixed=fixed,
        )
        rows = [_clean(r) for r in table]
        if not any(str(r["status"]).startswith("ok") for r in rows):  # no design runs the job: one line, exit 3
            raise InfeasiblePlan("; ".join(f"{r['system']}: {r['status'].removeprefix('no plan: ')}" for r in rows))
        style = "plain" if json_ else "markdown"  # a JSON field is plain text; the console renders the bold
        said = verdict(table, style, fixed=fixed)
        notes = trust_notes(table, model, cat, stack, names, style=style) if trust else None
        from hnplan.planning.calibration_note import uncalibrated_sentence

        # a design whose chip lacks its sustained clock or memory-kernel efficiencies is planned at the ideal 1.0
        # and ranks optimistic: said with or without the trust notes (which repeat it), as train and infer say it
        ran = [cat.system(ref_of[r["system"]]).accelerator for r in rows if str(r["status"]).startswith("ok")]
        calibration = uncalibrated_sentence(ran, cat, style=style)
        if defaulted:  # on stderr, so that --json's stdout stays one object
            from hnplan.cli._app import err_console

            err_console.print(
                f"defaults: {', '.join(defaulted)} (the default scenario's design comparison, "
                "data/scenarios/default.yaml; give the flags to change them)",
                highlight=False,
                markup=False,
            )
        if json_:
            print_json(
                {
                    "model": cat.model(model).id,
                    "gpus": gpus,
                    "tokens": tokens,
                    "seq_len": seq_len,
                    "global_batch_tokens": global_batch_tokens,
                    "dtype": dtype,
                    "offload": offload,
                    "stack": stack,
                    "goodput": goodput,
                    "checkpoint": checkpoint,
                    "fixed": fixed,
                    "units": UNITS,
                    "designs": [_json_row(r) for r in rows],
                    "verdict": said,
                    "trust": notes,
                    **({"calibration_note": calibration} if calibration else {}),
                }
            )
            return
        console.print(
            _table(rows, f"{cat.model(model).id} on {counted(gpus, 'GPU')} per design, {format_count(tokens)} tokens")
        )
        console.print()
        console.print(_markup(said), highlight=False)
        if notes:
            console.print()
            # rendered as Markdown: the bullets keep a hanging indent at any width, `code` spans print as code
            from rich.markdown import Markdown

            console.print(Markdown("**How far to trust it**: " + notes))
        elif calibration:
            from rich.markdown import Markdown

            console.print()
            console.print(Markdown(calibration))  # as the trust notes that repeat it: code spans, no backticks


def _scenario_defaults(cat) -> dict:
    """``systems``, ``seq_len`` and ``global_batch_tokens`` of the default scenario's design comparison."""
    from hnplan.errors import InputError

    for nb in cat.scenario(DEFAULT_SCENARIO).notebooks:
        if nb.notebook == _NOTEBOOK:
            p = nb.parameters
            missing = [k for k in ("systems", "seq_len", "global_batch_tokens") if k not in p]
            if missing:
                raise InputError(
                    f"scenarios/{DEFAULT_SCENARIO}.yaml notebook {_NOTEBOOK}: parameters lack {', '.join(missing)}"
                )
            return p
    raise InputError(f"scenarios/{DEFAULT_SCENARIO}.yaml has no {_NOTEBOOK} notebook to take the defaults from")


def _system_list(text: str, flag: str = "--systems") -> list[str]:
    """The ids of ``--systems a,b,c``, blanks dropped, in the order given, repeats kept (the caller compares each
    design once and says which were given more than once); ``flag``: the option as typed, for the message of a
    list with no id.

    >>> _system_list(" gb200-nvl72, hgx-h100-ib-ndr,,gb200-nvl72 ")
    ['gb200-nvl72', 'hgx-h100-ib-ndr', 'gb200-nvl72']
    """
    from hnplan.errors import InputError

    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError(f"{flag} names no system; give ids separated by commas (data/systems)")
    return names


_WHOLE = (
    "gpus", "gpus_bought", "tp", "pp", "dp", "cp", "ep", "etp", "microbatch_size", "virtual_stages", "zero_stage", "racks"
)  # fmt: skip


def _clean(r: dict) -> dict:
    """A planner row as printed: counts as integers (a frame with a design without a plan holds them as
    floats), and a design without a plan without the NaN of the columns it has no value for.

    >>> _clean({"system": "a", "tp": 4.0, "days": float("nan"), "status": "no plan: x"})
    {'system': 'a', 'tp': 4, 'status': 'no plan: x'}
    """
    ok = str(r.get("status", "")).startswith("ok")
    out = {}
    for k, v in r.items():
        if isinstance(v, float) and math.isnan(v):
            if ok:
                out[k] = v  # a design without a price: its costs are n/a (null in JSON)
            continue
        out[k] = int(v) if k in _WHOLE else v
    return out


def _json_row(r: dict) -> dict:
    """One design of the JSON answer: the planner's columns, the step-time parts under ``breakdown_s``."""
    out = {k: v for k, v in r.items() if not k.startswith("t_")}
    parts = {k[2:-2]: v for k, v in r.items() if k.startswith("t_") and k.endswith("_s")}
    if parts:  # a design without a plan has no step time to break down
        out["breakdown_s"] = parts
    return out


def _money(x: float, per_token: bool = False) -> str:
    """USD with a scale (``$80.4M``), or ``n/a`` for a design without a price."""
    from hnplan.units import MEGA, format_usd

    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format_usd(x) if per_token else format_usd(x * MEGA)  # the planner's capex is in million USD


def _plan_text(r: dict) -> str:
    """``TP2 PP9 DP32 CP2 EP1 mb1 rc-none``: the degrees, micro-batch size and recomputation of a plan (``rc-``,
    as the validation table writes it: a bare ``none`` named nothing); the expert tensor parallelism where experts
    are split (EP > 1) and it is not TP (``TP2 PP4 DP8 CP1 EP8 ETP1 mb1 rc-none``); the virtual stages where more
    than one (``v2``) and the ZeRO stage where not the planner's usual 1 (``z3``), as a pin may set them.

    >>> _plan_text({"tp": 2, "pp": 4, "dp": 8, "cp": 1, "ep": 8, "etp": 1, "microbatch_size": 1, "recompute": "none"})
    'TP2 PP4 DP8 CP1 EP8 ETP1 mb1 rc-none'
    >>> _plan_text({"tp": 1, "pp": 4, "dp": 16, "cp": 1, "ep": 1, "microbatch_size": 2, "recompute": "none",
    ...             "virtual_stages": 2, "zero_stage": 3})
    'TP1 PP4 DP16 CP1 EP1 mb2 v2 z3 rc-none'
    """
    etp = f" ETP{r['etp']}" if r["ep"] > 1 and r.get("etp", r["tp"]) != r["tp"] else ""
    vp = f" v{r['virtual_stages']}" if (r.get("virtual_stages") or 1) > 1 else ""
    zero = f" z{r['zero_stage']}" if r.get("zero_stage", 1) not in (1, None) else ""
    return (
        f"TP{r['tp']} PP{r['pp']} DP{r['dp']} CP{r['cp']} EP{r['ep']}{etp} mb{r['microbatch_size']}{vp}{zero} "
        f"rc-{r['recompute']}"
    )


def _table(rows: list[dict], title: str):
    """The designs side by side, one row each; a design without a plan keeps its row with the reason."""
    from rich.table import Table

    t = Table(title=escape(title))
    # MFU is of the dense peak in each design's dtype (fp4's is twice fp8's on Blackwell): the header names it
    dtypes = list(dict.fromkeys(str(r["dtype"]) for r in rows if str(r["status"]).startswith("ok")))
    mfu = f"MFU ({dtypes[0]} peak)" if len(dtypes) == 1 else "MFU (own dtype's peak)"
    cols = (
        "system",
        "plan",
        "step [s]",
        mfu,
        "days",
        "goodput",
        "racks",
        "IT / facility [MW]",
        "energy [MWh]",
        "capex",
        "$ per 1M tokens",
        "status",
    )
    for col in cols:
        t.add_column(
            escape(col),
            justify="left" if col in ("system", "plan", "status") else "right",
            no_wrap=col in ("system", "plan"),  # an id or a plan is never broken across lines
        )
    for r in rows:
        if not str(r["status"]).startswith("ok"):
            t.add_row(escape(r["system"]), *["-"] * (len(cols) - 2), escape(str(r["status"])))
            continue
        t.add_row(
            escape(r["system"]),
            _plan_text(r),
            f"{r['step_time_s']:,.3f}",
            f"{r['mfu']:.1%}",
            format_amount(r["days"], 1),  # two significant digits where the decimals would print 0
            f"{r['goodput']:.1%}" if r["goodput_mode"] != "off" else "off",
            f"{r['racks']:,}",
            f"{format_amount(r['it_power_mw'], 2)} / {format_amount(r['facility_power_mw'], 2)}",
            format_amount(r["energy_mwh"], 0),
            _money(r["capex_musd"]),
            _money(r["usd_per_million_tokens"], per_token=True),
            escape(str(r["status"])),
        )
    return t


def _markup(text: str) -> str:
    """The planner's Markdown sentences as rich markup: ``**x**`` bold, everything else printed as written.

    >>> _markup("**gb200-nvl72** trains fastest [days]")
    '[bold]gb200-nvl72[/bold] trains fastest \\\\[days]'
    """
    return re.sub(r"\*\*(.+?)\*\*", r"[bold]\1[/bold]", escape(text))
