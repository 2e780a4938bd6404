"""Checks of a sub-command's parsed options, the parser of count options (``15T``, ``16Mi``), and planner
messages put in the user's words: the option's flag (``--seq-len``), not the planner's parameter name
(``seq_len``)."""

from __future__ import annotations

import re

import typer

from hnplan.errors import InputError


def _option_name(ctx, name: str) -> str:
    for p in ctx.command.params:
        if p.name == name:
            return max(getattr(p, "opts", None) or ["--" + name.replace("_", "-")], key=len)
    return name


#: the job's sequence length [tokens] where ``train``, ``size`` (and the default scenario's design comparison, so
#: ``compare``) are given none: Llama 3 405B's pre-training sequence (Llama 3 paper, arXiv:2407.21783, Sec. 3.4.1)
DEFAULT_SEQ_LEN = 8192
#: the job's global batch [tokens per step] where none is given: 16Mi tokens, Llama 3 405B's batch of 2,048
#: sequences of 8,192 at the end of its pre-training (ibid.)
DEFAULT_BATCH_TOKENS = 16_777_216

#: the largest whole number a float64 holds exactly (9.0e15); a larger count (``--global-batch-size 1e23``)
#: overflows numpy's 64-bit integers in the planners, and no count of GPUs, jobs or tokens comes near it
MAX_COUNT = 2**53


def check_finite(ctx) -> None:
    """Refuse ``inf`` and ``nan`` in every float option of the running sub-command (click's ``min=``/``max=``
    ranges let them through), and whole numbers beyond :data:`MAX_COUNT` in every integer option but a
    random seed: one :class:`InputError` naming the option."""
    import math

    for name, value in ctx.params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError(f"{_option_name(ctx, name)} must be a finite number; got {v}")
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_COUNT and name != "seed":
                raise InputError(f"{_option_name(ctx, name)} must be at most 2**53 = {MAX_COUNT:.2g}; got {v:.3g}")


def dtype_name(value: str | None) -> str | None:
    """A ``--dtype`` / ``--kv-dtype`` value as the catalog spells dtypes (lower case: ``FP8`` is ``fp8``,
    ``BF16`` is ``bf16``), surrounding spaces dropped; ``None`` (the option's default) unchanged.

    >>> dtype_name(" FP8"), dtype_name("Bf16"), dtype_name(None)
    ('fp8', 'bf16', None)
    """
    return value.strip().lower() if isinstance(value, str) else value


def name_option(ctx, text: str) -> str:
    """A planner's ``recompute must be one of ...; got 'foo'`` (any ``NAME must be ...; got VALUE``) or
    ``seq_len 200000 exceeds ...`` as the flag the user typed (``--recompute must be one of ...``) when the
    running command has that option and it holds the refused value; any other message unchanged.

    >>> from types import SimpleNamespace as NS
    >>> option = NS(name="recompute", opts=["--recompute"])
    >>> ctx = NS(params={"recompute": "foo"}, command=NS(params=[option]))
    >>> name_option(ctx, "recompute must be one of none, selective, full; got 'foo'")
    "--recompute must be one of none, selective, full; got 'foo'"
    >>> ctx = NS(params={"dtype": "fp9"}, command=NS(params=[NS(name="dtype", opts=["--dtype"])]))
    >>> name_option(ctx, "unknown dtype 'fp9'; allowed: bf16, fp8")
    "--dtype: unknown dtype 'fp9'; allowed: bf16, fp8"
    >>> ctx = NS(params={"share": 0.0}, command=NS(params=[NS(name="share", opts=["--share"])]))
    >>> name_option(ctx, "share must be in (0, 1]; got 0.0")
    '--share must be in (0, 1]; got 0.0'
    >>> ctx = NS(params={"seq_len": 200000}, command=NS(params=[NS(name="seq_len", opts=["--seq-len"])]))
    >>> name_option(ctx, "seq_len 200,000 exceeds the model's maximum sequence length 131,072")
    "--seq-len 200,000 exceeds the model's maximum sequence length 131,072"
    >>> ctx = NS(params={"tp": 8}, command=NS(params=[NS(name="tp", opts=["--tp"])]))
    >>> name_option(ctx, "tp 3 does not divide --gpus 64"), name_option(ctx, "tp 8 does not divide --gpus 60")
    ('tp 3 does not divide --gpus 64', '--tp 8 does not divide --gpus 60')
    >>> name_option(ctx, "tp 8 x pp 4 = 32 does not divide --gpus 60")
    'tp 8 x pp 4 = 32 does not divide --gpus 60'
    >>> ctx = NS(params={"tokens_per_s": 1e30}, command=NS(params=[NS(name="tokens_per_s", opts=["--tokens-per-s"])]))
    >>> name_option(ctx, "tokens_per_s 1e+30: more than the storage reads")
    '--tokens-per-s 1e+30: more than the storage reads'
    """
    if ctx is None:
        return text
    u = re.match(r"^unknown ([a-z][a-z_]*) '([^']*)'", text)  # "unknown dtype 'fp9'; allowed: ..."
    if u is not None and str(ctx.params.get(u.group(1))) == u.group(2):
        return f"{_option_name(ctx, u.group(1))}: {text}"
    m = re.match(r"^([a-z][a-z_ ]*?) must be .*; got (.+)$", text)
    if m is not None:
        name, given = m.group(1).replace(" ", "_"), m.group(2)
    else:  # "seq_len 200000 exceeds ...": the parameter, then the value it was given
        m = re.match(r"^([a-z][a-z_]*) (\S+) ", text)
        value = None if m is None else ctx.params.get(m.group(1))
        written = {str(value), f"{value:,}"} if isinstance(value, int) else {str(value)}  # 200000 or 200,000
        # the value may end a clause ("tokens_per_s 1e+30: the data loader reads ...")
        if m is None or m.group(2).rstrip(":;,") not in written or text[m.end() :].startswith("x "):
            return text  # not a parameter and its value, or the first factor of a product (tp 8 x pp 4 ...)
        name, given = m.group(1), repr(ctx.params[m.group(1)])
    if name not in ctx.params or repr(ctx.params[name]) != given:
        return text
    flag = _option_name(ctx, name)
    return text if flag == name else flag + text[len(m.group(1)) :]


def path_option(ctx, path: str, folder_needed: bool = False) -> str | None:
    """The flag of the running command whose path value is ``path`` or lies under it (``--out x/y.yaml``
    when the folder ``x`` cannot be made), or ``None``: an operating-system error says which option gave
    the path. ``folder_needed`` (a file stands where a folder was to be made): a value under ``path`` is
    the one that asked for the folder, so it is named before a value that is ``path`` itself
    (``--runs runs.yaml --out runs.yaml/x.yaml`` named ``--runs``).

    >>> from types import SimpleNamespace as NS
    >>> ctx = NS(params={"out": "runs/my.yaml", "gpus": 8}, command=NS(params=[NS(name="out", opts=["--out"])]))
    >>> path_option(ctx, "runs"), path_option(ctx, "runs/my.yaml"), path_option(ctx, "elsewhere")
    ('--out', '--out', None)
    >>> opts = [NS(name="runs", opts=["--runs"]), NS(name="out", opts=["--out"])]
    >>> ctx = NS(params={"runs": "r.yaml", "out": "r.yaml/x.yaml"}, command=NS(params=opts))
    >>> path_option(ctx, "r.yaml"), path_option(ctx, "r.yaml", folder_needed=True)
    ('--runs', '--out')
    """
    from pathlib import Path

    if ctx is None or not path:
        return None
    target = Path(path).absolute()
    given = [
        (name, str(v), Path(v).absolute())
        for name, value in ctx.params.items()
        for v in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(v, (str, Path)) and v
    ]
    # the path itself first, then a folder of a value written as a path: an id (h100-sxm) also reads as a
    # path under the working folder, which lies under the failing path when that is one of its parents
    # (--shapes-json /tmp named --accelerator)
    exact = [name for name, _, g in given if g == target]
    under = [name for name, raw, g in given if "/" in raw and target in g.parents]
    for name in (under + exact) if folder_needed else (exact + under):
        return _option_name(ctx, name)
    return None


#: a negative number as typed to a count or amount option, suffix and exponent allowed (-1T, -300M, -1e9): told its
#: lower bound ("must be at least 1"), as 0 is, rather than the parser's message
_NEGATIVE = re.compile(r"\s*-\s*[0-9.,]+(?:[eE][+-]?[0-9]+)?\s*[A-Za-z]*\s*")


def count(integer: bool = False, minimum: float = 1, maximum: float | None = None, why: str = "", usd: bool = False):
    """A typer ``parser=`` for an option that takes a count (tokens, tokens/s, GPU-hours): ``15T``, ``16M``,
    ``8k``, ``15e12`` or ``16,777,216`` (:func:`hnplan.units.parse_count`); with ``usd`` an amount of dollars
    that may start with ``$`` (``$1.5B``). A bad, too small or too large value (above ``maximum``, with ``why``
    it is the bound) is refused with one line naming the option (exit 2).

    >>> count(integer=True)("16M"), count()("15T"), count(usd=True)("$1.5B")
    (16000000, 15000000000000.0, 1500000000.0)
    >>> try:
    ...     count(usd=True)("300Mi")  # Mi counts tokens (2**20), not dollars
    ... except Exception as exc:
    ...     print(str(exc)[:39])
    cannot read amount '300Mi': expected US
    """
    from hnplan.units import parse_count

    def parse(text):
        import math
        import re

        if usd and isinstance(text, str) and text.strip().startswith("$"):
            text = text.strip()[1:]

        try:  # inf and nan pass to check_finite, which names the option the same way for every float flag
            if not math.isfinite(float(text)):
                return float(text)
        except (TypeError, ValueError):
            pass
        try:
            if usd and re.search(r"[KkMGT]i\s*$", str(text)):  # binary suffixes count tokens, not dollars
                raise ValueError(text)
            value = parse_count(text, integer=integer)
        except ValueError as exc:
            if usd:  # an amount of dollars, not a count: no binary suffixes, and the $ it may start with
                raise typer.BadParameter(
                    f"cannot read amount {text!r}: expected US dollars as a number, optionally after $ and with k, M, "
                    "B or T ($1.5B, 300M, 1.5e9)"
                    if not _NEGATIVE.fullmatch(str(text))
                    else f"must be at least {minimum:g}; got {text}"
                ) from None
            if _NEGATIVE.fullmatch(str(text)) and "cannot read" not in str(exc):
                # a negative count was read: its bound, as 0 is told (not "non-negative", which 0 is)
                raise typer.BadParameter(f"must be at least {minimum:g}; got {text}") from None
            raise typer.BadParameter(str(exc)) from None
        if value < minimum:
            raise typer.BadParameter(f"must be at least {minimum:g}; got {text}")
        if integer and value > MAX_COUNT:  # a whole count beyond it overflows the planners' 64-bit integers
            raise typer.BadParameter(f"must be at most 2**53 = {MAX_COUNT:.2g}; got {text}")
        if maximum is not None and value > maximum:
            raise typer.BadParameter(f"must be at most {maximum:.0e}{' (' + why + ')' if why else ''}; got {text}")
        return value

    parse.__name__ = "count" if integer else "number"
    return parse


def decimal_hint(tokens: int) -> str:
    """A hint for a token count that looks decimal where a power of two was meant (``16M`` = 16,000,000;
    ``16Mi`` = 16,777,216 = 2,048 x 8,192); empty for any other count.

    >>> decimal_hint(16_000_000)
    ' (16M is 16,000,000; 16Mi is 16 x 2**20)'
    """
    from hnplan.units import GIGA, KILO, MEGA, TERA

    for scale, name in ((TERA, "T"), (GIGA, "G"), (MEGA, "M"), (KILO, "k")):
        if tokens >= scale and tokens % scale == 0:
            n = int(tokens // scale)
            binary = "Ki" if name == "k" else f"{name}i"
            power = {"k": 10, "M": 20, "G": 30, "T": 40}[name]
            return f" ({n}{name} is {tokens:,}; {n}{binary} is {n} x 2**{power})"
    return ""


def check_expert_flags(model: str, tp: int | None = None, **degrees: int | None) -> None:
    """Refuse an expert-parallel degree above 1 (``ep=2``, ``etp=2``) on a model without experts: a dense
    model has no experts to split, so the flag is bad input (exit 2), not an infeasible plan (exit 3). A dense
    model's ``etp`` is its ``tp`` (what ``train``, ``memory``, ``compare`` and ``sweep`` report for it), so
    ``--etp`` equal to the given ``--tp`` is accepted (it changes nothing) and any other ``--etp`` refused.

    Raises
    ------
    InputError
        Naming the first such flag and the model.
    """
    from hnplan.catalog import load_catalog

    m = load_catalog().model(model)
    if m.moe is not None:
        return
    for name, v in degrees.items():
        if v is None or (name == "etp" and v == tp):
            continue
        flag = "--" + name.replace("_", "-")
        if name == "etp" and tp is not None:
            raise InputError(
                f"{flag} {v}: {m.id} is a dense model, with no experts to split: its etp is its tp ({tp}); drop {flag}"
            )
        if v > 1 or name == "etp":
            raise InputError(f"{flag} {v}: {m.id} is a dense model, with no experts to split; drop {flag}")


def check_overlap_flags(tp: int | None, ep: int | None, tp_overlap: bool | None, ep_overlap: bool | None) -> None:
    """Refuse ``--tp-overlap`` with ``--tp 1`` and ``--ep-overlap`` with ``--ep 1``: a plan without tensor (expert)
    parallelism has no TP collective (expert all-to-all) to overlap, so the flag would be accepted and change nothing.
    ``--no-...`` and a searched degree (not given) pass.

    Raises
    ------
    InputError
        Naming the flag and the degree that leaves it nothing to overlap.

    >>> check_overlap_flags(8, None, True, None)  # TP 8: its collectives overlap
    >>> check_overlap_flags(1, None, False, None)  # --no-tp-overlap at TP 1: nothing to switch off, nothing lost
    >>> check_overlap_flags(1, None, True, None)
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: --tp-overlap with --tp 1: a plan without tensor parallelism has no TP collective to overlap; drop --tp-overlap or give --tp above 1
    """
    if tp_overlap and tp == 1:
        raise InputError(
            "--tp-overlap with --tp 1: a plan without tensor parallelism has no TP collective to overlap; "
            "drop --tp-overlap or give --tp above 1"
        )
    if ep_overlap and ep == 1:
        raise InputError(
            "--ep-overlap with --ep 1: a plan without expert parallelism has no expert all-to-all to overlap; "
            "drop --ep-overlap or give --ep above 1"
        )


def check_seq_len(model: str, seq_len: int) -> None:
    """Refuse ``--seq-len`` beyond the model's ``max_seq`` before any other check of the batch, in the words
    ``train`` uses (``--global-batch-tokens 16Mi --seq-len 200000`` was refused as a batch that is not a
    multiple of the sequence, and ``compare`` refused 262,144 per design as an infeasible plan, exit 3).

    Raises
    ------
    InputError
        ``--seq-len 262,144 exceeds llama3.1-70b's maximum sequence length 131,072 (field max_seq of its
        catalog entry)``.
    """
    from hnplan.catalog import load_catalog

    m = load_catalog().model(model)
    if seq_len > m.max_seq:
        raise InputError(
            f"--seq-len {seq_len:,} exceeds {m.id}'s maximum sequence length {m.max_seq:,} "
            "(field max_seq of its catalog entry)"
        )


def check_dtype_flag(accelerator: str, dtype: str) -> None:
    """Refuse ``--dtype`` where the accelerator has no dense peak in it (fp4 on an H100), naming the flag, as
    ``train`` and ``infer`` do; a dtype hnplan does not know is left to the planner's own message.

    Raises
    ------
    InputError
        ``--dtype fp4 is not available: accelerator 'h100-sxm' has no fp4 peak (dense_tflops lists ...)``.
    """
    from hnplan import units
    from hnplan.catalog import load_catalog

    try:
        units.dtype_bytes(dtype)
    except ValueError:
        return
    acc = load_catalog().accelerator(accelerator)
    if dtype not in acc.dense_tflops:
        raise InputError(
            f"--dtype {dtype} is not available: accelerator {acc.id!r} has no {dtype} peak "
            f"(dense_tflops lists {', '.join(acc.dense_tflops)}); choose one of those"
        )


def option_given(ctx, name: str) -> bool:
    """Whether the running sub-command's option ``name`` (its parameter name, ``bf_interval``) was given by
    the user rather than left at its default, so that a flag that means nothing beside another one can be
    refused even where it was typed with its default value (``--no-backfill --bf-interval 0``)."""
    if ctx is None:
        return False
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


#: the degrees and knobs of a training plan that ``train`` and ``compare`` take, each pinned where given and searched
#: where not: parameter -> (flag, the planner's field, lower bound, upper bound, help, an aside, and what ``train``
#: puts in its place where every other knob is given: said in ``train``'s help only, since ``compare`` always
#: searches the knobs left out)
PLAN_OPTIONS: dict[str, tuple[str, str, int | None, int | None, str, str, str]] = {
    "tp": ("--tp", "tp", 1, None, "tensor-parallel degree", "", ""),
    "pp": ("--pp", "pp", 1, None, "pipeline-parallel degree", "", ""),
    "dp": ("--dp", "dp", 1, None, "data-parallel degree", "", ""),
    "cp": ("--cp", "cp", 1, None, "context-parallel degree", "", "default 1"),
    "ep": ("--ep", "ep", 1, None, "expert-parallel degree; ep x etp divides tp x cp x dp", "", "default 1"),
    "etp": ("--etp", "etp", 1, None, "expert tensor-parallel degree", "1 folds EP over the TP ranks", "default tp"),
    "microbatch_size": ("--microbatch-size", "microbatch_size", 1, None, "sequences per micro-batch", "", ""),
    "virtual_stages": (
        "--virtual-stages",
        "virtual_stages",
        1,
        None,
        "interleaved pipeline stages",
        "searched if omitted; 1 at PP 1",
        "",
    ),
    "recompute": ("--recompute", "recompute", None, None, "none, selective or full", "", ""),
    "zero": ("--zero", "zero_stage", 0, 3, "ZeRO stage 0-3", "", ""),
}


def plan_option(name: str, defaults: bool = True):
    """The typer option of one plan knob of :data:`PLAN_OPTIONS` (``--tp``, ``--recompute``), one definition for
    ``train`` and ``compare``; ``defaults``: say in the help what ``train`` takes where it is left out of a plan
    given in full (``compare`` passes False: it searches every knob left out)."""
    flag, _, low, high, text, aside, default = PLAN_OPTIONS[name]
    notes = "; ".join(x for x in ((default if defaults else ""), aside) if x)
    return typer.Option(None, flag, min=low, max=high, help=text + (f" ({notes})" if notes else ""))


def plan_pins(**values) -> dict:
    """The knobs given (not None) of :data:`PLAN_OPTIONS`, under the planner's names (``zero`` is
    ``zero_stage``), in the table's order: the ``fixed`` mapping of a search.

    >>> plan_pins(tp=1, pp=None, ep=8, zero=1, recompute="none")
    {'tp': 1, 'ep': 8, 'recompute': 'none', 'zero_stage': 1}
    """
    return {field: values[k] for k, (_, field, *_) in PLAN_OPTIONS.items() if values.get(k) is not None}
